// Fp8 matrix products on the matrix cores, one interface for NVIDIA and AMD,
// with a plain-FMA fallback where the target has no suitable instruction.
//
// Warp level (Fp8WarpMma<format>): a kernel stages fp8 operands in shared
// memory through Convert16() (the element type there is the policy's Elem),
// loads warp fragments with LoadA()/LoadB(), and accumulates
// C[kM x kN] += A[kM x kK] * B[kN x kK]^T in fp32 with Run(). Which lane
// holds which element of C is the policy's business: the kernel reads it
// through CRow()/CCol() and sums a row's values across the lanes that share
// it with ReduceRowLanes(). That is all the layout a kernel needs, so no
// #ifdef of an architecture appears outside this file.
//
//   NVIDIA, sm_80 and later: fp8 is widened to fp16 once, when it is staged
//     (exact for both E4M3 encodings), and multiplied by mma.sync m16n8k16
//     (HMMA). Hopper runs fp8 mma.sync only by converting every operand to
//     fp16 on the fly, so converting once per staged tile is cheaper.
//   NVIDIA before sm_80: the same fragments multiplied with FMAs.
//   AMD gfx940/941/942 with e4m3fnuz data: v_mfma_f32_32x32x16_fp8_fp8 on the
//     raw fp8 bytes (those chips' fp8 is the fnuz encoding).
//   Other AMD targets, or OCP e4m3fn data on gfx94x: the same 32x32 fragments
//     multiplied with FMAs after a software decode.
//
// Warpgroup level (WarpgroupFp8Mma, kHasWarpgroupFp8Mma): Hopper's own fp8
// path, wgmma (QGMMA in SASS), for kernels built for sm_90a; four warps
// multiply operands that stay in shared memory. Kernels branch on
// kHasWarpgroupFp8Mma with `if constexpr` and keep a warp-level body for
// every other target.
//
// Include only from sources built by gpu_kernel_library().
#ifndef DSA_PLATFORM_GPU_MMA_H_
#define DSA_PLATFORM_GPU_MMA_H_

#include <cstdint>

#include "platform/gpu/hip_compat.h"

#if defined(DSA_GPU_CUDA)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace dsa::gpu {

// The two FP8 E4M3 encodings (see attention/dtypes/fp8.h).
enum class Fp8Format : int { kE4m3fn = 0, kE4m3fnuz = 1 };

// Exact fp8 -> float (NaN codes give NaN). Used by the fallback paths.
template <Fp8Format F>
__device__ __forceinline__ float DecodeFp8(uint32_t code) {
  constexpr bool kFn = F == Fp8Format::kE4m3fn;
  constexpr int kBias = kFn ? 7 : 8;
  const uint32_t mag = code & 0x7fu;
  if (kFn ? mag == 0x7fu : code == 0x80u) return __int_as_float(0x7fc00000);
  const uint32_t exponent = mag >> 3;
  const uint32_t mantissa = mag & 7u;
  const float v =
      exponent == 0
          ? static_cast<float>(mantissa) * (kFn ? 0x1p-9f : 0x1p-10f)
          : __int_as_float(static_cast<int>(((exponent + 127u - kBias) << 23) |
                                            (mantissa << 20)));
  return (code & 0x80u) ? -v : v;
}

#if defined(DSA_GPU_CUDA)

template <Fp8Format F>
struct Fp8WarpMma {
  // fp16 bits in shared memory.
  using Elem = uint16_t;
  static constexpr int kM = 16;
  static constexpr int kN = 8;
  static constexpr int kK = 16;
  static constexpr int kRowSlots = 2;  // rows of C per lane: g, g + 8
  static constexpr int kColSlots = 2;  // columns per row slot: 2t, 2t + 1
  static constexpr const char* kInstruction = "mma.sync.m16n8k16.f16 (HMMA)";

  struct A {
    uint32_t r[4];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    const Elem* tile;
    int ld;
#endif
  };
  struct B {
    uint32_t r[2];
  };
  struct C {
    float v[kRowSlots * kColSlots];
  };
  __device__ __forceinline__ static void Zero(C& c) {
#pragma unroll
    for (int i = 0; i < kRowSlots * kColSlots; ++i) c.v[i] = 0.0f;
  }

  // 16 fp8 codes (one uint4, byte i = k i) -> 16 fp16 values at dst
  // (16-byte aligned).
  __device__ __forceinline__ static void Convert16(uint4 codes, Elem* dst) {
    uint32_t out[8];
    const uint32_t in[4] = {codes.x, codes.y, codes.z, codes.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t pair = (in[w] >> (16 * h)) & 0xffffu;
        if constexpr (F == Fp8Format::kE4m3fn) {
          const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(
              static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
          out[2 * w + h] =
              static_cast<uint32_t>(r.x) | (static_cast<uint32_t>(r.y) << 16);
        } else {
          const __half lo = __float2half_rn(DecodeFp8<F>(pair & 0xffu));
          const __half hi = __float2half_rn(DecodeFp8<F>(pair >> 8));
          out[2 * w + h] = static_cast<uint32_t>(__half_as_ushort(lo)) |
                           (static_cast<uint32_t>(__half_as_ushort(hi)) << 16);
        }
      }
    }
    uint4* d = reinterpret_cast<uint4*>(dst);
    d[0] = make_uint4(out[0], out[1], out[2], out[3]);
    d[1] = make_uint4(out[4], out[5], out[6], out[7]);
  }

  // A: the [kM][kK] tile at `tile` (row stride ld elements, rows 16-byte
  // aligned). B: the [kN][kK] tile at `tile`.
  __device__ __forceinline__ static void LoadA(A& a, const Elem* tile, int ld,
                                               int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    a.tile = tile;
    a.ld = ld;
#else
    const Elem* p = tile + (lane % 16) * ld + (lane / 16) * 8;
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(a.r[0]), "=r"(a.r[1]), "=r"(a.r[2]), "=r"(a.r[3])
        : "r"(addr));
#endif
  }
  __device__ __forceinline__ static void LoadB(B& b, const Elem* tile, int ld,
                                               int lane) {
    const Elem* p = tile + (lane / 4) * ld + 2 * (lane % 4);
    b.r[0] = *reinterpret_cast<const uint32_t*>(p);
    b.r[1] = *reinterpret_cast<const uint32_t*>(p + 8);
  }

  __device__ __forceinline__ static void Run(C& c, const A& a, const B& b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    // Gather the two B columns this lane's C elements need (held by lanes
    // col * 4 + t), then FMA over the A rows in shared memory.
    const int lane = threadIdx.x % kDsaWarpSize;
    const int g = lane / 4, t = lane % 4;
    float bcol[2][kK];
#pragma unroll
    for (int cs = 0; cs < 2; ++cs) {
#pragma unroll
      for (int src_t = 0; src_t < 4; ++src_t) {
        const int src = (2 * t + cs) * 4 + src_t;
        const uint32_t r0 = __shfl_sync(DSA_FULL_WARP_MASK, b.r[0], src);
        const uint32_t r1 = __shfl_sync(DSA_FULL_WARP_MASK, b.r[1], src);
        bcol[cs][2 * src_t] = HalfBits(r0 & 0xffffu);
        bcol[cs][2 * src_t + 1] = HalfBits(r0 >> 16);
        bcol[cs][2 * src_t + 8] = HalfBits(r1 & 0xffffu);
        bcol[cs][2 * src_t + 9] = HalfBits(r1 >> 16);
      }
    }
#pragma unroll
    for (int rs = 0; rs < 2; ++rs) {
      const Elem* row = a.tile + (g + 8 * rs) * a.ld;
#pragma unroll
      for (int cs = 0; cs < 2; ++cs) {
        float acc = c.v[rs * 2 + cs];
#pragma unroll
        for (int k = 0; k < kK; ++k) acc += HalfBits(row[k]) * bcol[cs][k];
        c.v[rs * 2 + cs] = acc;
      }
    }
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c.v[0]), "+f"(c.v[1]), "+f"(c.v[2]), "+f"(c.v[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]),
          "r"(b.r[1]));
#endif
  }

  __device__ __forceinline__ static int CRow(int lane, int slot) {
    return lane / 4 + 8 * slot;
  }
  __device__ __forceinline__ static int CCol(int lane, int col_slot) {
    return 2 * (lane % 4) + col_slot;
  }
  // Sum over the lanes that hold the same rows (the 4 lanes of a group).
  __device__ __forceinline__ static float ReduceRowLanes(float v) {
    v += DSA_SHFL_XOR(v, 1, kDsaWarpSize);
    v += DSA_SHFL_XOR(v, 2, kDsaWarpSize);
    return v;
  }
  __device__ __forceinline__ static bool IsRowLeader(int lane) {
    return lane % 4 == 0;
  }

 private:
  __device__ __forceinline__ static float HalfBits(uint32_t bits) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  }
};

// Hopper's warpgroup fp8 product (wgmma, QGMMA in SASS), for kernels built
// for sm_90a. Four consecutive warps (a warpgroup, starting at a warp index
// divisible by 4) compute D[64 x 128] (+)= A[64 x 32] * B[128 x 32]^T, both
// operands e4m3fn bytes in shared memory, K-major, in the "core matrix"
// layout below (no swizzle): 8 rows x 16 bytes are one contiguous 128-byte
// core matrix; core matrices follow each other along K (kLeadingBytes apart),
// then along the rows (kRowGroupBytes apart).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DSA_MMA_HAS_WGMMA_FP8 1
inline constexpr bool kHasWarpgroupFp8Mma = true;
#else
inline constexpr bool kHasWarpgroupFp8Mma = false;
#endif

template <int kKBytes>
struct WarpgroupFp8Mma {
  static constexpr int kM = 64;
  static constexpr int kN = 128;
  static constexpr int kK = 32;
  static constexpr int kLeadingBytes = 128;
  static constexpr int kRowGroupBytes = kKBytes / 16 * 128;
  static constexpr int kAccPerThread = kM * kN / 128;  // 64
  static constexpr const char* kInstruction =
      "wgmma.m64n128k32.e4m3 (QGMMA, sm_90a)";

  // Byte offset of (row, k) in an operand laid out as above.
  __device__ __forceinline__ static uint32_t Offset(int row, int k_byte) {
    return (row / 8) * kRowGroupBytes + (k_byte / 16) * kLeadingBytes +
           (row % 8) * 16 + k_byte % 16;
  }
  // Descriptor of the operand whose row 0, k byte k0 (a multiple of 32)
  // lies at `base`.
  __device__ __forceinline__ static uint64_t Descriptor(const void* base,
                                                        int k0) {
    const uint32_t addr =
        static_cast<uint32_t>(__cvta_generic_to_shared(base)) +
        (k0 / 16) * kLeadingBytes;
    return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
           (static_cast<uint64_t>(kLeadingBytes >> 4) << 16) |
           (static_cast<uint64_t>(kRowGroupBytes >> 4) << 32);
  }
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
  // acc (+)= A * B^T over kKBytes of K; accumulate=false starts from zero.
  // Issue() starts the products and returns at once: until Wait(), the
  // thread may do other work but must not touch acc, and the operands in
  // shared memory must stay as they are.
  __device__ __forceinline__ static void Issue(float (&acc)[kAccPerThread],
                                               const uint8_t* a_tile,
                                               const uint8_t* b_tile,
                                               bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k0 = 0; k0 < kKBytes; k0 += kK) {
      const uint64_t da = Descriptor(a_tile, k0);
      const uint64_t db = Descriptor(b_tile, k0);
      const int scale_d = (accumulate || k0 > 0) ? 1 : 0;
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
          "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
          "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
          "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
          "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63},"
          " %64, %65, p, 1, 1;\n}\n"
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]),
            "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]),
            "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]),
            "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]),
            "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]),
            "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]),
            "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]),
            "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31]),
            "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]),
            "+f"(acc[36]), "+f"(acc[37]), "+f"(acc[38]), "+f"(acc[39]),
            "+f"(acc[40]), "+f"(acc[41]), "+f"(acc[42]), "+f"(acc[43]),
            "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]),
            "+f"(acc[48]), "+f"(acc[49]), "+f"(acc[50]), "+f"(acc[51]),
            "+f"(acc[52]), "+f"(acc[53]), "+f"(acc[54]), "+f"(acc[55]),
            "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]),
            "+f"(acc[60]), "+f"(acc[61]), "+f"(acc[62]), "+f"(acc[63])
          : "l"(da), "l"(db), "r"(scale_d));
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
  __device__ __forceinline__ static void Wait(float (&acc)[kAccPerThread]) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    FenceOperands(acc);
#else
    (void)acc;
#endif
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
};

// The same product on 64 columns, D[64 x 64] (+)= A[64 x 32] * B[64 x 32]^T
// (wgmma m64n64k32, 32 accumulators a thread, same operand layout). A
// kernel splits its columns into two such banks so that it can work on the
// first bank's accumulators while the second's product still runs:
// Issue(a); Issue(b); WaitPending<1>(a) (bank a done); ...; WaitPending<0>(b).
template <int kKBytes>
struct WarpgroupFp8Mma64 : WarpgroupFp8Mma<kKBytes> {
  using Base = WarpgroupFp8Mma<kKBytes>;
  static constexpr int kN = 64;
  static constexpr int kAccPerThread = Base::kM * kN / 128;  // 32
  static constexpr const char* kInstruction =
      "wgmma.m64n64k32.e4m3 (QGMMA, sm_90a)";

  __device__ __forceinline__ static void FenceOperands(
      float (&acc)[kAccPerThread]) {
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      asm volatile("" : "+f"(acc[i])::"memory");
    }
  }
  // As WarpgroupFp8Mma::Issue; b_tile holds 64 rows. One commit group.
  __device__ __forceinline__ static void Issue(float (&acc)[kAccPerThread],
                                               const uint8_t* a_tile,
                                               const uint8_t* b_tile,
                                               bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k0 = 0; k0 < kKBytes; k0 += Base::kK) {
      const uint64_t da = Base::Descriptor(a_tile, k0);
      const uint64_t db = Base::Descriptor(b_tile, k0);
      const int scale_d = (accumulate || k0 > 0) ? 1 : 0;
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
          "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%"
          "19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31},"
          " %32, %33, p, 1, 1;\n}\n"
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]),
            "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]),
            "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]),
            "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]),
            "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]),
            "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]),
            "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]),
            "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31])
          : "l"(da), "l"(db), "r"(scale_d));
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
  // Waits until at most kPending of this warpgroup's issued products are
  // still running (the oldest first), then acc may be read.
  template <int kPending>
  __device__ __forceinline__ static void WaitPending(
      float (&acc)[kAccPerThread]) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending)
                 : "memory");
#endif
    FenceOperands(acc);
  }
};

#elif defined(DSA_GPU_ROCM)

#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define DSA_MMA_HAS_FP8_FNUZ_MFMA 1
#endif

template <Fp8Format F>
struct Fp8WarpMma {
  // Raw fp8 codes in shared memory.
  using Elem = uint8_t;
  static constexpr int kM = 32;
  static constexpr int kN = 32;
  static constexpr int kK = 16;
  static constexpr int kRowSlots = 16;
  static constexpr int kColSlots = 1;
  static constexpr const char* kInstruction =
      "v_mfma_f32_32x32x16_fp8_fp8 (gfx94x, fnuz)";

  using Acc = float __attribute__((ext_vector_type(16)));
  // Lane l holds row (or column) l % 32 at k = (l / 32) * 8 .. + 7.
  struct A {
    long r;
  };
  struct B {
    long r;
  };
  struct C {
    Acc v;
  };
  __device__ __forceinline__ static void Zero(C& c) {
#pragma unroll
    for (int i = 0; i < kRowSlots; ++i) c.v[i] = 0.0f;
  }

  __device__ __forceinline__ static void Convert16(uint4 codes, Elem* dst) {
    *reinterpret_cast<uint4*>(dst) = codes;
  }
  __device__ __forceinline__ static void LoadA(A& a, const Elem* tile, int ld,
                                               int lane) {
    a.r = *reinterpret_cast<const long*>(tile + (lane % 32) * ld +
                                         (lane / 32) * 8);
  }
  __device__ __forceinline__ static void LoadB(B& b, const Elem* tile, int ld,
                                               int lane) {
    b.r = *reinterpret_cast<const long*>(tile + (lane % 32) * ld +
                                         (lane / 32) * 8);
  }

  __device__ __forceinline__ static void Run(C& c, const A& a, const B& b) {
#if defined(DSA_MMA_HAS_FP8_FNUZ_MFMA)
    if constexpr (F == Fp8Format::kE4m3fnuz) {
      c.v = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a.r, b.r, c.v, 0, 0, 0);
      return;
    }
#endif
    // Fallback: this lane's column n = lane % 32 needs B's 16 k values
    // (lanes n and n + 32); its rows m need A's (lanes m and m + 32).
    const int lane = threadIdx.x % kDsaWarpSize;
    const int n = lane % 32;
    float bcol[kK];
    const long b_lo = __shfl(b.r, n, kDsaWarpSize);
    const long b_hi = __shfl(b.r, n + 32, kDsaWarpSize);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      bcol[k] =
          DecodeFp8<F>((static_cast<unsigned long>(b_lo) >> (8 * k)) & 0xffu);
      bcol[k + 8] =
          DecodeFp8<F>((static_cast<unsigned long>(b_hi) >> (8 * k)) & 0xffu);
    }
#pragma unroll
    for (int slot = 0; slot < kRowSlots; ++slot) {
      const int m = CRow(lane, slot);
      const long a_lo = __shfl(a.r, m, kDsaWarpSize);
      const long a_hi = __shfl(a.r, m + 32, kDsaWarpSize);
      float acc = c.v[slot];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        acc += DecodeFp8<F>((static_cast<unsigned long>(a_lo) >> (8 * k)) &
                            0xffu) *
               bcol[k];
        acc += DecodeFp8<F>((static_cast<unsigned long>(a_hi) >> (8 * k)) &
                            0xffu) *
               bcol[k + 8];
      }
      c.v[slot] = acc;
    }
  }

  __device__ __forceinline__ static int CRow(int lane, int slot) {
    return 8 * (slot / 4) + 4 * (lane / 32) + slot % 4;
  }
  __device__ __forceinline__ static int CCol(int lane, int /*col_slot*/) {
    return lane % 32;
  }
  // Sum over the 32 lanes of a half-wave (they share their rows).
  __device__ __forceinline__ static float ReduceRowLanes(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      v += DSA_SHFL_XOR(v, offset, kDsaWarpSize);
    }
    return v;
  }
  __device__ __forceinline__ static bool IsRowLeader(int lane) {
    return lane % 32 == 0;
  }
};

// No warpgroup product on AMD: declared so that kernels name it only in
// branches discarded by kHasWarpgroupFp8Mma.
inline constexpr bool kHasWarpgroupFp8Mma = false;
template <int kKBytes>
struct WarpgroupFp8Mma;
template <int kKBytes>
struct WarpgroupFp8Mma64;

#endif

}  // namespace dsa::gpu

#endif  // DSA_PLATFORM_GPU_MMA_H_
