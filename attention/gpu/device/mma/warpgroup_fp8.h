// Hopper's warpgroup fp8 products (wgmma, QGMMA in SASS) for kernels built
// for sm_90a: WarpgroupFp8Mma<kKBytes, kN>, one template over the product's
// width N (32, 64 or 128 columns).
// Part of mma.h (include that); device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DEVICE_MMA_WARPGROUP_FP8_H_
#define DSA_ATTENTION_GPU_DEVICE_MMA_WARPGROUP_FP8_H_

#include <cstdint>

#include "attention/gpu/device/mma/conversions.h"
#include "attention/gpu/device/mma/wgmma_accumulators.h"

#if defined(DSA_GPU_CUDA)

namespace dsa::gpu {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DSA_MMA_HAS_WGMMA_FP8 1
inline constexpr bool kHasWarpgroupFp8Mma = true;
#else
inline constexpr bool kHasWarpgroupFp8Mma = false;
#endif

// One wgmma m64n<n>k32 e4m3 x e4m3 -> f32 instruction: `accs` (= n / 2)
// accumulators a thread in acc[], operands numbered after them (the A and B
// descriptors a_desc / b_desc at %<da> / %<db>, the scale-d flag at
// %<scale>: 0 overwrites acc, 1 accumulates). The mnemonic is built from n,
// the accumulator list and constraints chosen by accs.
#define DSA_WGMMA_FP8_E4M3(n, accs, da, db, scale)       \
  asm volatile(                                          \
      "{\n"                                              \
      ".reg .pred p;\n"                                  \
      "setp.ne.b32 p, %" #scale                          \
      ", 0;\n"                                           \
      "wgmma.mma_async.sync.aligned.m64n" #n             \
      "k32.f32.e4m3.e4m3 "                               \
      "{" DSA_WGMMA_ACC_REGS_##accs "}, %" #da ", %" #db \
                                    ", p, 1, 1;\n"       \
                                    "}\n"                \
      : DSA_WGMMA_ACC_##accs(acc)                        \
      : "l"(a_desc), "l"(b_desc), "r"(scale_d))

// Four consecutive warps (a warpgroup, starting at a warp index divisible by
// 4) compute D[64 x kN] (+)= A[64 x 32] * B[kN x 32]^T, both operands e4m3fn
// bytes in shared memory, K-major, in the "core matrix" layout below (no
// swizzle) or the 128-byte swizzled layout the tensor memory accelerator
// writes: 8 rows x 16 bytes are one contiguous 128-byte core matrix; core
// matrices follow each other along K (kLeadingBytes apart), then along the
// rows (kRowGroupBytes apart). kN = 128 is the kernels' tile; 64 and 32 are
// for products whose useful columns are fewer (a decode row of 32 heads).
template <int kKBytes, int kWidth = 128>
struct WarpgroupFp8Mma {
  static_assert(kWidth == 32 || kWidth == 64 || kWidth == 128,
                "wgmma widths the kernels use");
  static constexpr int kM = 64;
  static constexpr int kN = kWidth;
  static constexpr int kK = 32;
  static constexpr int kLeadingBytes = 128;
  static constexpr int kRowGroupBytes = kKBytes / 16 * 128;
  static constexpr int kAccPerThread = kM * kN / 128;  // 16, 32 or 64
  static constexpr const char* kInstruction =
      kN == 32   ? "wgmma.m64n32k32.e4m3 (QGMMA, sm_90a)"
      : kN == 64 ? "wgmma.m64n64k32.e4m3 (QGMMA, sm_90a)"
                 : "wgmma.m64n128k32.e4m3 (QGMMA, sm_90a)";
  // The same product on another width (the same operand layouts).
  template <int kOtherWidth>
  using OfWidth = WarpgroupFp8Mma<kKBytes, kOtherWidth>;

  // Byte offset of (row, k) in an operand laid out as above.
  __device__ __forceinline__ static uint32_t Offset(int row, int k_byte) {
    return (row / 8) * kRowGroupBytes + (k_byte / 16) * kLeadingBytes +
           (row % 8) * 16 + k_byte % 16;
  }
  // Descriptor of the operand whose row 0, k byte k0 (a multiple of 32)
  // lies at `base`.
  __device__ __forceinline__ static uint64_t Descriptor(const void* base,
                                                        int k0) {
    return DescriptorAt<false>(
        static_cast<uint32_t>(__cvta_generic_to_shared(base)) +
        (k0 / 16) * kLeadingBytes);
  }
  // Descriptor of an operand of 128-byte rows (kKBytes = 128) as the tensor
  // memory accelerator writes it with 128-byte swizzle: row r at 128 r, its
  // 16-byte chunk c at chunk c ^ (r % 8); 8-row groups 1024 bytes apart.
  // Row 0 lies at `base` (1024-byte aligned); k0 is a multiple of 32.
  __device__ __forceinline__ static uint64_t DescriptorSwizzle128(
      const void* base, int k0) {
    return DescriptorAt<true>(
        static_cast<uint32_t>(__cvta_generic_to_shared(base)) + k0);
  }
  // The descriptor of an operand whose row 0, k byte 0 lies at shared
  // address `addr` (swizzled: 1024-byte aligned), in either layout above.
  // A kernel that computes it once and moves it by whole stages and K steps
  // (IssueFromDescriptors) spends one 32-bit add a descriptor: the start
  // address is the low 14 bits (addresses below 256 KB), which no such
  // move carries out of.
  template <bool kSwizzle128>
  __device__ __forceinline__ static uint64_t DescriptorAt(uint32_t addr) {
    if constexpr (kSwizzle128) {
      static_assert(kKBytes == 128, "128-byte swizzle spans 128-byte rows");
      return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
             (uint64_t{1} << 16) |                       // leading: unused
             (static_cast<uint64_t>(1024 >> 4) << 32) |  // 8-row group stride
             (uint64_t{1} << 62);  // layout: 128-byte swizzle
    } else {
      return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
             (static_cast<uint64_t>(kLeadingBytes >> 4) << 16) |
             (static_cast<uint64_t>(kRowGroupBytes >> 4) << 32);
    }
  }
  // A descriptor moved by `bytes` of shared memory (a multiple of 16).
  __device__ __forceinline__ static uint64_t DescriptorPlus(uint64_t desc,
                                                            uint32_t bytes) {
    const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
    return (desc & 0xffffffff00000000ull) | lo;
  }
  // Bytes from one 32-byte K step's start to the next in a layout.
  template <bool kSwizzle128>
  static constexpr uint32_t kKStepBytes = kSwizzle128
                                              ? kK
                                              : (kK / 16) * kLeadingBytes;

  // Keeps the compiler from moving reads or writes of the accumulators
  // across the asynchronous product.
  __device__ __forceinline__ static void FenceOperands(
      float (&acc)[kAccPerThread]) {
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      asm volatile("" : "+f"(acc[i])::"memory");
    }
  }
  // Shared memory written by ordinary stores and read next by wgmma needs
  // this in each writing thread, before the barrier.
  __device__ __forceinline__ static void FenceStores() {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
  }
  // acc (+)= A * B^T over kKBytes of K (B holds kN rows); accumulate=false
  // starts from zero. kASwizzle128 / kBSwizzle128: that operand (1024-byte
  // aligned) is in the 128-byte swizzled layout of DescriptorSwizzle128,
  // else the core-matrix layout. IssueAs() starts the products (one commit
  // group) and returns at once: until Wait(), the thread may do other work
  // but must not touch acc, and the operands in shared memory must stay as
  // they are.
  template <bool kASwizzle128, bool kBSwizzle128>
  __device__ __forceinline__ static void IssueAs(float (&acc)[kAccPerThread],
                                                 const uint8_t* a_tile,
                                                 const uint8_t* b_tile,
                                                 bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k0 = 0; k0 < kKBytes; k0 += kK) {
      uint64_t da;
      if constexpr (kASwizzle128) {
        da = DescriptorSwizzle128(a_tile, k0);
      } else {
        da = Descriptor(a_tile, k0);
      }
      uint64_t db;
      if constexpr (kBSwizzle128) {
        db = DescriptorSwizzle128(b_tile, k0);
      } else {
        db = Descriptor(b_tile, k0);
      }
      Mma(acc, da, db, (accumulate || k0 > 0) ? 1 : 0);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    (void)acc;
    (void)a_tile;
    (void)b_tile;
    (void)accumulate;
    __trap();  // only reached if a kernel ignores kHasWarpgroupFp8Mma
#endif
  }
  // IssueAs from the operands' descriptors at k = 0 (DescriptorAt).
  template <bool kASwizzle128, bool kBSwizzle128>
  __device__ __forceinline__ static void IssueFromDescriptors(
      float (&acc)[kAccPerThread], uint64_t a_desc0, uint64_t b_desc0,
      bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < kKBytes / kK; ++k) {
      const uint64_t da =
          DescriptorPlus(a_desc0, k * kKStepBytes<kASwizzle128>);
      const uint64_t db =
          DescriptorPlus(b_desc0, k * kKStepBytes<kBSwizzle128>);
      Mma(acc, da, db, (accumulate || k > 0) ? 1 : 0);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    (void)acc;
    (void)a_desc0;
    (void)b_desc0;
    (void)accumulate;
    __trap();  // only reached if a kernel ignores kHasWarpgroupFp8Mma
#endif
  }
  // Both operands in the core-matrix layout.
  __device__ __forceinline__ static void Issue(float (&acc)[kAccPerThread],
                                               const uint8_t* a_tile,
                                               const uint8_t* b_tile,
                                               bool accumulate) {
    IssueAs<false, false>(acc, a_tile, b_tile, accumulate);
  }
  // A swizzled, B in the core-matrix layout.
  __device__ __forceinline__ static void IssueSwizzledA(
      float (&acc)[kAccPerThread], const uint8_t* a_tile, const uint8_t* b_tile,
      bool accumulate) {
    IssueAs<true, false>(acc, a_tile, b_tile, accumulate);
  }
  // Both operands swizzled.
  __device__ __forceinline__ static void IssueSwizzled(
      float (&acc)[kAccPerThread], const uint8_t* a_tile, const uint8_t* b_tile,
      bool accumulate) {
    IssueAs<true, true>(acc, a_tile, b_tile, accumulate);
  }
  __device__ __forceinline__ static void Wait(float (&acc)[kAccPerThread]) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    FenceOperands(acc);
#else
    (void)acc;
#endif
  }
  // Waits until at most kPending of this warpgroup's issued products are
  // still running (the oldest finish first); then acc, the accumulators of
  // an older product, may be read. With two accumulator sets, a kernel
  // issues the next product into one while it reads the other.
  template <int kPending>
  __device__ __forceinline__ static void WaitPending(
      float (&acc)[kAccPerThread]) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending)
                 : "memory");
#endif
    FenceOperands(acc);
  }
  __device__ __forceinline__ static void Run(float (&acc)[kAccPerThread],
                                             const uint8_t* a_tile,
                                             const uint8_t* b_tile,
                                             bool accumulate) {
    Issue(acc, a_tile, b_tile, accumulate);
    Wait(acc);
  }
  // Accumulator element i of this thread: row (within the 64) and column.
  // Thread (warp w of the group, lane l) holds rows 16w + l/4 (+ 8) and, in
  // each 8-column block n, columns 8n + 2(l%4) (+ 1).
  __device__ __forceinline__ static int AccRow(int warp_in_group, int lane,
                                               int i) {
    return 16 * warp_in_group + lane / 4 + 8 * ((i / 2) % 2);
  }
  __device__ __forceinline__ static int AccCol(int lane, int i) {
    return 8 * (i / 4) + 2 * (lane % 4) + i % 2;
  }

 private:
  // One instruction over 32 bytes of K.
  __device__ __forceinline__ static void Mma(float (&acc)[kAccPerThread],
                                             uint64_t a_desc, uint64_t b_desc,
                                             int scale_d) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    if constexpr (kN == 32) {
      DSA_WGMMA_FP8_E4M3(32, 16, 16, 17, 18);
    } else if constexpr (kN == 64) {
      DSA_WGMMA_FP8_E4M3(64, 32, 32, 33, 34);
    } else {
      DSA_WGMMA_FP8_E4M3(128, 64, 64, 65, 66);
    }
#else
    (void)acc;
    (void)a_desc;
    (void)b_desc;
    (void)scale_d;
#endif
  }
};

#undef DSA_WGMMA_FP8_E4M3

}  // namespace dsa::gpu

#endif  // defined(DSA_GPU_CUDA)

#endif  // DSA_ATTENTION_GPU_DEVICE_MMA_WARPGROUP_FP8_H_
