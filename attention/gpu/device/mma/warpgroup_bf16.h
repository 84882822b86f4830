// Hopper's warpgroup bf16 products (wgmma, HGMMA in SASS) for kernels built
// for sm_90a: WarpgroupBf16Mma (both operands in shared memory),
// WarpgroupBf16MmaRegA (A in registers) and the 128- and 32-byte swizzled
// descriptors.
// Part of mma.h (include that); device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DEVICE_MMA_WARPGROUP_BF16_H_
#define DSA_ATTENTION_GPU_DEVICE_MMA_WARPGROUP_BF16_H_

#include <cstdint>

#include "attention/gpu/device/mma/conversions.h"
#include "attention/gpu/device/mma/wgmma_accumulators.h"

#if defined(DSA_GPU_CUDA)

namespace dsa::gpu {

// Hopper's warpgroup bf16 product (wgmma, HGMMA in SASS), for kernels built
// for sm_90a: four consecutive warps (starting at a warp index divisible by
// 4) compute D[64 x kN] (+)= A[64 x K] * B[kN x K]^T, both operands bf16 in
// shared memory, K-major, in the core-matrix layout without swizzle: 8 rows
// x 8 bf16 (16 bytes) form one contiguous 128-byte core matrix; core
// matrices follow each other along K (128 bytes apart), then along the rows
// (row_group_bytes apart, at least K * 16). Kernels branch on
// kHasWarpgroupBf16Mma with `if constexpr`, as for the fp8 product.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DSA_MMA_HAS_WGMMA_BF16 1
inline constexpr bool kHasWarpgroupBf16Mma = true;
#else
inline constexpr bool kHasWarpgroupBf16Mma = false;
#endif

// B's major-ness in the descriptor-driven issues (IssueWith): K-major, or
// MN-major (imm-trans-b = 1: a row-major [K][N] tile, such as the values of
// an attention key tile, read without a transpose).
inline constexpr int kBKMajor = 0;
inline constexpr int kBMnMajor = 1;

// Waits until at most kPending of the warpgroup's committed product groups
// are still running (groups complete in commit order). The accumulators of
// the groups known complete are then fenced by their owner
// (FenceOperands) before they are read.
template <int kPending>
__device__ __forceinline__ void WarpgroupWait() {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending)
               : "memory");
#endif
}

// Four 8 x 8 bf16 matrices from a warp's registers into shared memory
// (stmatrix.x4, sm_90a kernels): register r of lane l holds row l / 4,
// columns 2 (l % 4) and 2 (l % 4) + 1 of matrix r (the layout of an
// accumulator's and a register A operand's fragments); lane l gives the
// shared address of row l % 8 of matrix l / 8 (16 bytes).
__device__ __forceinline__ void StoreMatrixX4(uint32_t addr,
                                              const uint32_t (&r)[4]) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::
          "r"(addr),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
      : "memory");
#else
  (void)addr;
  (void)r;
#endif
}

template <int kN>
struct WarpgroupBf16Mma {
  static_assert(kN == 32 || kN == 64 || kN == 80 || kN == 128 || kN == 256,
                "instantiated widths");
  static constexpr int kM = 64;
  static constexpr int kK = 16;
  static constexpr int kAccPerThread = kN / 2;
  static constexpr const char* kInstruction =
      "wgmma.m64nNk16.bf16 (HGMMA, sm_90a)";

  // Byte offset of element (row, k) of an operand laid out as above.
  __host__ __device__ static constexpr uint32_t Offset(int row, int k,
                                                       int row_group_bytes) {
    return (row / 8) * row_group_bytes + (k / 8) * 128 + (row % 8) * 16 +
           (k % 8) * 2;
  }
  // Descriptor of the operand whose row 0, column k0 (a multiple of 16)
  // lies at `base`.
  __device__ __forceinline__ static uint64_t Descriptor(const void* base,
                                                        int k0,
                                                        int row_group_bytes) {
    const uint32_t addr =
        static_cast<uint32_t>(__cvta_generic_to_shared(base)) + (k0 / 8) * 128;
    return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
           (static_cast<uint64_t>(128 >> 4) << 16) |
           (static_cast<uint64_t>(row_group_bytes >> 4) << 32);
  }
  __device__ __forceinline__ static void FenceOperands(
      float (&acc)[kAccPerThread]) {
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      asm volatile("" : "+f"(acc[i])::"memory");
    }
  }
  // Shared memory written by ordinary stores or cp.async and read next by
  // wgmma needs this in each writing thread, before the barrier.
  __device__ __forceinline__ static void FenceStores() {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
  }
  // acc (+)= A[64 x kKElems] * B[kN x kKElems]^T; accumulate=false starts
  // from zero. Returns at once: acc and the operands are off limits until
  // Wait().
  template <int kKElems>
  __device__ __forceinline__ static void Issue(float (&acc)[kAccPerThread],
                                               const void* a, int a_row_group,
                                               const void* b, int b_row_group,
                                               bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k0 = 0; k0 < kKElems; k0 += kK) {
      const uint64_t da = Descriptor(a, k0, a_row_group);
      const uint64_t db = Descriptor(b, k0, b_row_group);
      const int scale_d = (accumulate || k0 > 0) ? 1 : 0;
      Mma(acc, da, db, scale_d);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    (void)acc;
    (void)a;
    (void)a_row_group;
    (void)b;
    (void)b_row_group;
    (void)accumulate;
    __trap();  // only reached if a kernel ignores kHasWarpgroupBf16Mma
#endif
  }
  // 128-byte swizzled operands (the layout of CUTLASS's SW128 atoms; wgmma
  // reads them without the bank conflicts of the layout above). An atom is
  // 8 rows x 128 bytes (1024 bytes, 1024-byte aligned), whose 16-byte chunk
  // c of row r is stored at chunk c ^ (r % 8). K-major: element (row, k) at
  // (k / 64) * atom_bytes + row * 128 + swizzled chunk (k % 64) / 8, i.e.
  // atoms of 64 k follow each other atom_bytes apart, rows 128 bytes apart
  // within them. MN-major B: element (k, n) at (n / 64) * n_atom_bytes +
  // k * 128 + swizzled chunk (n % 64) / 8. A row-major [keys][dims] tile
  // in the K-major form (rows = keys) is thus also the MN-major B of its
  // transpose, as for the unswizzled layouts.
  __host__ __device__ static constexpr uint32_t OffsetSw128(int row, int k,
                                                            int atom_bytes) {
    return (k / 64) * atom_bytes + row * 128 +
           ((((k % 64) / 8) ^ (row % 8)) * 16) + (k % 8) * 2;
  }
  // Descriptor of a 128-byte swizzled operand starting at `addr` (shared
  // address): leading / stride byte offsets as the PTX ISA defines them for
  // that mode, layout type 1 (128B) in bits 62-63.
  __device__ __forceinline__ static uint64_t DescriptorSw128(uint32_t addr,
                                                             int leading,
                                                             int stride) {
    return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
           (static_cast<uint64_t>((leading >> 4) & 0x3fff) << 16) |
           (static_cast<uint64_t>((stride >> 4) & 0x3fff) << 32) |
           (uint64_t{1} << 62);
  }
  // acc (+)= A * B^T, both K-major 128-byte swizzled (rows of 8-row groups
  // 1024 bytes apart; the leading byte offset is unused in this mode).
  template <int kKElems>
  __device__ __forceinline__ static void IssueSw128(
      float (&acc)[kAccPerThread], const void* a, int a_atom_bytes,
      const void* b, int b_atom_bytes, bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    const uint32_t a_addr = static_cast<uint32_t>(__cvta_generic_to_shared(a));
    const uint32_t b_addr = static_cast<uint32_t>(__cvta_generic_to_shared(b));
#pragma unroll
    for (int k0 = 0; k0 < kKElems; k0 += kK) {
      const uint32_t k_off = (k0 % 64) * 2;
      const uint64_t da =
          DescriptorSw128(a_addr + (k0 / 64) * a_atom_bytes + k_off, 16, 1024);
      const uint64_t db =
          DescriptorSw128(b_addr + (k0 / 64) * b_atom_bytes + k_off, 16, 1024);
      const int scale_d = (accumulate || k0 > 0) ? 1 : 0;
      Mma<0>(acc, da, db, scale_d);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    (void)acc;
    (void)a;
    (void)a_atom_bytes;
    (void)b;
    (void)b_atom_bytes;
    (void)accumulate;
    __trap();  // only reached if a kernel ignores kHasWarpgroupBf16Mma
#endif
  }
  // acc (+)= A * B with A K-major 128-byte swizzled as above and B MN-major
  // 128-byte swizzled (atoms of 64 n, n_atom_bytes apart: the leading byte
  // offset; groups of 8 k rows 1024 bytes apart: the stride byte offset).
  template <int kKElems>
  __device__ __forceinline__ static void IssueSw128MnB(
      float (&acc)[kAccPerThread], const void* a, int a_atom_bytes,
      const void* b, int b_n_atom_bytes, bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    const uint32_t a_addr = static_cast<uint32_t>(__cvta_generic_to_shared(a));
    const uint32_t b_addr = static_cast<uint32_t>(__cvta_generic_to_shared(b));
#pragma unroll
    for (int k0 = 0; k0 < kKElems; k0 += kK) {
      const uint64_t da = DescriptorSw128(
          a_addr + (k0 / 64) * a_atom_bytes + (k0 % 64) * 2, 16, 1024);
      const uint64_t db =
          DescriptorSw128(b_addr + k0 * 128, b_n_atom_bytes, 1024);
      const int scale_d = (accumulate || k0 > 0) ? 1 : 0;
      Mma<1>(acc, da, db, scale_d);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    (void)acc;
    (void)a;
    (void)a_atom_bytes;
    (void)b;
    (void)b_n_atom_bytes;
    (void)accumulate;
    __trap();  // only reached if a kernel ignores kHasWarpgroupBf16Mma
#endif
  }
  // The same product with B read MN-major ("transposed", imm-trans-b = 1):
  // element (k, n) of B at b + (k / 8) * b_k_group + (n / 8) * b_n_group +
  // (k % 8) * 16 + (n % 8) * 2, i.e. core matrices of 8 k rows x 8 n values
  // (16 contiguous bytes per k row). A row-major [K][N] tile stored as core
  // matrices is such an operand, so the values of an attention key tile
  // (keys x dims, dims contiguous) serve as B of P V without a transpose. In
  // the descriptor (no swizzle) the leading byte offset is the stride between
  // groups of 8 k rows, the stride byte offset that between groups of 8 n.
  template <int kKElems>
  __device__ __forceinline__ static void IssueMnB(
      float (&acc)[kAccPerThread], const void* a, int a_row_group,
      const void* b, int b_k_group, int b_n_group, bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    const uint32_t b_addr = static_cast<uint32_t>(__cvta_generic_to_shared(b));
#pragma unroll
    for (int k0 = 0; k0 < kKElems; k0 += kK) {
      const uint64_t da = Descriptor(a, k0, a_row_group);
      const uint32_t addr = b_addr + (k0 / 8) * b_k_group;
      const uint64_t db =
          static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
          (static_cast<uint64_t>((b_k_group >> 4) & 0x3fff) << 16) |
          (static_cast<uint64_t>((b_n_group >> 4) & 0x3fff) << 32);
      const int scale_d = (accumulate || k0 > 0) ? 1 : 0;
      Mma<1>(acc, da, db, scale_d);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    (void)acc;
    (void)a;
    (void)a_row_group;
    (void)b;
    (void)b_k_group;
    (void)b_n_group;
    (void)accumulate;
    __trap();  // only reached if a kernel ignores kHasWarpgroupBf16Mma
#endif
  }
  __device__ __forceinline__ static void Wait(float (&acc)[kAccPerThread]) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    FenceOperands(acc);
#else
    (void)acc;
#endif
  }
  // acc (+)= A * B^T over kSteps steps of 16 columns of K, with the
  // operands' descriptors built by the caller: a_desc(j) and b_desc(j) of
  // step j (for other shared-memory layouts, such as the 128-byte swizzled
  // one of Bf16Sw128Descriptor). kB: B's major-ness (kBKMajor, or kBMnMajor
  // for B read MN-major, as IssueSw128MnB). Same contract as Issue().
  template <int kSteps, int kB = kBKMajor, typename ADesc, typename BDesc>
  __device__ __forceinline__ static void IssueWith(float (&acc)[kAccPerThread],
                                                   ADesc a_desc, BDesc b_desc,
                                                   bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      Mma<kB>(acc, a_desc(j), b_desc(j), (accumulate || j > 0) ? 1 : 0);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    (void)acc;
    (void)a_desc;
    (void)b_desc;
    (void)accumulate;
    __trap();
#endif
  }
  // Accumulator element i of this thread: row (within the 64) and column.
  // Thread (warp w of the group, lane l) holds rows 16w + l/4 (+ 8) and, in
  // each 8-column block n, columns 8n + 2(l%4) (+ 1).
  __host__ __device__ static constexpr int AccRow(int warp_in_group, int lane,
                                                  int i) {
    return 16 * warp_in_group + lane / 4 + 8 * ((i / 2) % 2);
  }
  __host__ __device__ static constexpr int AccCol(int lane, int i) {
    return 8 * (i / 4) + 2 * (lane % 4) + i % 2;
  }

 private:
  // imm-trans-b = kTransB: 0 reads B K-major, 1 MN-major.
  template <int kTransB = 0>
  __device__ __forceinline__ static void Mma(float (&acc)[kAccPerThread],
                                             uint64_t da, uint64_t db,
                                             int scale_d) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    if constexpr (kN == 32) {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %18, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_16
          "}, %16, %17, p, 1, 1, 0, %19;\n"
          "}\n"
          : DSA_WGMMA_ACC_16(acc)
          : "l"(da), "l"(db), "r"(scale_d), "n"(kTransB));
    } else if constexpr (kN == 64) {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %34, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_32
          "}, %32, %33, p, 1, 1, 0, %35;\n"
          "}\n"
          : DSA_WGMMA_ACC_32(acc)
          : "l"(da), "l"(db), "r"(scale_d), "n"(kTransB));
    } else if constexpr (kN == 80) {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %42, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_40
          "}, %40, %41, p, 1, 1, 0, %43;\n"
          "}\n"
          : DSA_WGMMA_ACC_40(acc)
          : "l"(da), "l"(db), "r"(scale_d), "n"(kTransB));
    } else if constexpr (kN == 128) {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %66, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_64
          "}, %64, %65, p, 1, 1, 0, %67;\n"
          "}\n"
          : DSA_WGMMA_ACC_64(acc)
          : "l"(da), "l"(db), "r"(scale_d), "n"(kTransB));
    } else {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %130, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_128
          "}, %128, %129, p, 1, 1, 0, %131;\n"
          "}\n"
          : DSA_WGMMA_ACC_128(acc)
          : "l"(da), "l"(db), "r"(scale_d), "n"(kTransB));
    }
#else
    (void)acc;
    (void)da;
    (void)db;
    (void)scale_d;
#endif
  }
};

// The 128-byte swizzled K-major layout of a wgmma operand (what a TMA copy
// with CU_TENSOR_MAP_SWIZZLE_128B and a 64-element bf16 box writes): the
// operand is split into blocks of 64 columns of K; a block holds its rows
// one after the other, 128 bytes each, and within every 8 rows (1024
// bytes, aligned to 1024) the 16-byte chunk c of row r sits at chunk
// c ^ (r % 8). Spreads every access pattern over all banks.
// Byte offset of element (row, k) inside a block of `rows` rows.
__host__ __device__ constexpr uint32_t Bf16Sw128Offset(int row, int k,
                                                       int rows) {
  return (k / 64) * rows * 128 + row * 128 +
         ((((k % 64) / 8) ^ (row % 8)) * 16) + (k % 8) * 2;
}
// Descriptor of the operand whose row 0 (a multiple of 8), column k0 (a
// multiple of 16) lies at shared address `block_addr` + (k0 % 64) * 2, the
// block starting 1024-aligned: 8-row groups 1024 bytes apart, the
// hardware applying the XOR on the addresses it forms.
__device__ __forceinline__ uint64_t Bf16Sw128Descriptor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
         (static_cast<uint64_t>(1) << 16) |          // LBO (unused): 16 B
         (static_cast<uint64_t>(1024 >> 4) << 32) |  // SBO: 1024 B
         (static_cast<uint64_t>(1) << 62);           // 128-byte swizzle
}

// The 32-byte swizzled K-major layout (CU_TENSOR_MAP_SWIZZLE_32B with a
// 16-element bf16 box): rows of 32 bytes (one k step of 16), 8 rows (256
// bytes, aligned to 256) a group, the 16-byte chunk c of row r at chunk
// c ^ ((r / 4) % 2). Descriptor of such an operand at shared address `addr`
// (row 0 of one 16-column block): 8-row groups 256 bytes apart, layout
// type 3 (32B) in bits 62-63; the leading byte offset is unused.
__device__ __forceinline__ uint64_t Bf16Sw32Descriptor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
         (static_cast<uint64_t>(1) << 16) |         // LBO (unused): 16 B
         (static_cast<uint64_t>(256 >> 4) << 32) |  // SBO: 256 B
         (static_cast<uint64_t>(3) << 62);          // 32-byte swizzle
}

// Hopper's warpgroup bf16 product with A in registers (wgmma RS form, HGMMA
// in SASS), for kernels built for sm_90a: D[64 x kN] (+)= A[64 x K] *
// B[kN x K]^T, B in shared memory as for WarpgroupBf16Mma (K-major core
// matrices without swizzle), A as the warpgroup's register fragments, 4 x 32
// bits (8 bf16) per thread per 16 columns of K. The fragment layout is that
// of a WarpgroupBf16Mma accumulator: the accumulator of one product converts
// into the A operand of the next without leaving the registers (attention's
// P = softmax(Q K^T) feeding P V), which saves the shared-memory round trip
// and the barrier in between.
template <int kN>
struct WarpgroupBf16MmaRegA {
  static_assert(kN == 64 || kN == 128 || kN == 256, "instantiated widths");
  static constexpr int kM = 64;
  static constexpr int kK = 16;
  static constexpr int kAccPerThread = kN / 2;
  static constexpr const char* kInstruction =
      "wgmma.m64nNk16.bf16, A in registers (HGMMA, sm_90a)";

  // The A fragments of K columns [16 j, 16 j + 16) from the fp32 values `x`
  // of a WarpgroupBf16Mma<kXN> accumulator (x[4 c + e]: 8-column block c),
  // rounded to bf16: elements 8 j .. 8 j + 7 of x.
  template <int kXN>
  __device__ __forceinline__ static void FromAccumulator(
      const float (&x)[kXN / 2], uint32_t (&a)[kXN / 16][4]) {
#pragma unroll
    for (int j = 0; j < kXN / 16; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        a[j][r] = PackBf16x2(x[8 * j + 2 * r], x[8 * j + 2 * r + 1]);
      }
    }
  }
  template <int kKSteps>
  __device__ __forceinline__ static void FenceFragments(
      uint32_t (&a)[kKSteps][4]) {
#pragma unroll
    for (int j = 0; j < kKSteps; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(a[j][r])::"memory");
    }
  }
  __device__ __forceinline__ static void FenceOperands(
      float (&acc)[kAccPerThread]) {
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      asm volatile("" : "+f"(acc[i])::"memory");
    }
  }
  // acc (+)= A * B[kN x 16 kKSteps]^T; returns at once: acc, a and B are off
  // limits until Wait().
  template <int kKSteps>
  __device__ __forceinline__ static void Issue(float (&acc)[kAccPerThread],
                                               uint32_t (&a)[kKSteps][4],
                                               const void* b, int b_row_group,
                                               bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    FenceOperands(acc);
    FenceFragments(a);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int j = 0; j < kKSteps; ++j) {
      const uint64_t db =
          WarpgroupBf16Mma<kN>::Descriptor(b, j * kK, b_row_group);
      const int scale_d = (accumulate || j > 0) ? 1 : 0;
      Mma(acc, a[j], db, scale_d);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    (void)acc;
    (void)a;
    (void)b;
    (void)b_row_group;
    (void)accumulate;
    __trap();  // only reached if a kernel ignores kHasWarpgroupBf16Mma
#endif
  }
  // As Issue(), with B's descriptor of step j built by the caller; kB:
  // B's major-ness (kBKMajor, or kBMnMajor: P V over a key tile's values).
  template <int kB = kBKMajor, int kKSteps, typename BDesc>
  __device__ __forceinline__ static void IssueWith(float (&acc)[kAccPerThread],
                                                   uint32_t (&a)[kKSteps][4],
                                                   BDesc b_desc,
                                                   bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    FenceOperands(acc);
    FenceFragments(a);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int j = 0; j < kKSteps; ++j) {
      Mma<kB>(acc, a[j], b_desc(j), (accumulate || j > 0) ? 1 : 0);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    (void)acc;
    (void)a;
    (void)b_desc;
    (void)accumulate;
    __trap();
#endif
  }
  // Waits for every product this warpgroup issued; then acc may be read and
  // a reused.
  template <int kKSteps>
  __device__ __forceinline__ static void Wait(float (&acc)[kAccPerThread],
                                              uint32_t (&a)[kKSteps][4]) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
    FenceOperands(acc);
    FenceFragments(a);
  }

 private:
  // imm-trans-b = kTransB: 0 reads B K-major, 1 MN-major.
  template <int kTransB = kBKMajor>
  __device__ __forceinline__ static void Mma(float (&acc)[kAccPerThread],
                                             const uint32_t (&a)[4],
                                             uint64_t db, int scale_d) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    if constexpr (kN == 64) {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %37, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_32
          "}, {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n"
          "}\n"
          : DSA_WGMMA_ACC_32(acc)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d),
            "n"(kTransB));
    } else if constexpr (kN == 128) {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %69, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_64
          "}, {%64,%65,%66,%67}, %68, p, 1, 1, %70;\n"
          "}\n"
          : DSA_WGMMA_ACC_64(acc)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d),
            "n"(kTransB));
    } else {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %133, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_128
          "}, {%128,%129,%130,%131}, %132, p, 1, 1, %134;\n"
          "}\n"
          : DSA_WGMMA_ACC_128(acc)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d),
            "n"(kTransB));
    }
#else
    (void)acc;
    (void)a;
    (void)db;
    (void)scale_d;
#endif
  }
};

}  // namespace dsa::gpu

#endif  // defined(DSA_GPU_CUDA)

#endif  // DSA_ATTENTION_GPU_DEVICE_MMA_WARPGROUP_BF16_H_
