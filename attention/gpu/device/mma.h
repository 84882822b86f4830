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
// every other target. WarpgroupBf16Mma / kHasWarpgroupBf16Mma are the same
// for bf16 operands (HGMMA), with B K-major (Issue) or MN-major (IssueMnB,
// the transposed operand a P V product reads straight from a key tile).
//
// Bf16 (Bf16WarpMma): bf16 operands staged in shared memory as raw bits,
// C[kM x kN] += A[kM x kK] * B[kN x kK]^T in fp32, for the attention kernels
// (Q K^T, P V) and the latent-decompression GEMM.
//
//   NVIDIA, sm_80 and later: mma.sync m16n8k16 bf16 (HMMA), fragments loaded
//     with ldmatrix (x4 for A, x2 / x2.trans for B).
//   NVIDIA before sm_80: the same m16n8k16 fragments multiplied with FMAs.
//   AMD gfx90a/gfx940/941/942: v_mfma_f32_32x32x8bf16_1k.
//   Other AMD targets: the same 32x32x8 fragments multiplied with FMAs.
// Every path multiplies bf16 values exactly in fp32 and accumulates in fp32,
// so they agree up to the order of the fp32 summation.
//
// Include only from sources built by gpu_kernel_library().
#ifndef DSA_PLATFORM_GPU_MMA_H_
#define DSA_PLATFORM_GPU_MMA_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"

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

// float -> bf16 bits, rounded to nearest even; a NaN stays a (quiet) NaN.
__device__ __forceinline__ uint16_t FloatToBf16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  }
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
// bf16 bits -> float (exact).
__device__ __forceinline__ float Bf16ToFloat(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}
// Two floats -> two bf16 (lo in bits 0..15), rounded as FloatToBf16.
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
#if defined(DSA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return static_cast<uint32_t>(FloatToBf16(lo)) |
         (static_cast<uint32_t>(FloatToBf16(hi)) << 16);
#endif
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

// bf16 warp product, NVIDIA: m16n8k16, HMMA from sm_80 (FMAs before).
struct Bf16WarpMma {
  using Elem = uint16_t;  // bf16 bits
  static constexpr int kM = 16;
  static constexpr int kN = 8;
  static constexpr int kK = 16;
  static constexpr int kCPerLane = 4;
  static constexpr const char* kInstruction = "mma.sync.m16n8k16.bf16 (HMMA)";

  // Fragments of the PTX ISA's m16n8k16 layout (g = lane / 4, t = lane % 4):
  // A r0 = A[g][2t..2t+1], r1 = A[g+8][2t..], r2 = A[g][2t+8..],
  // r3 = A[g+8][2t+8..]; B r0 = B[n=g][k=2t..2t+1], r1 = B[g][2t+8..].
  struct A {
    uint32_t r[4];
  };
  struct B {
    uint32_t r[2];
  };
  struct C {
    float v[kCPerLane];
  };
  __device__ __forceinline__ static void Zero(C& c) {
#pragma unroll
    for (int i = 0; i < kCPerLane; ++i) c.v[i] = 0.0f;
  }

  __device__ __forceinline__ static void LoadA(A& a, const Elem* tile, int ld,
                                               int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const Elem* p = tile + (lane % 16) * ld + (lane / 16) * 8;
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
        : "=r"(a.r[0]), "=r"(a.r[1]), "=r"(a.r[2]), "=r"(a.r[3])
        : "r"(addr));
#else
    const int g = lane / 4, t = lane % 4;
    a.r[0] = Pair(tile + g * ld + 2 * t);
    a.r[1] = Pair(tile + (g + 8) * ld + 2 * t);
    a.r[2] = Pair(tile + g * ld + 2 * t + 8);
    a.r[3] = Pair(tile + (g + 8) * ld + 2 * t + 8);
#endif
  }
  __device__ __forceinline__ static void LoadB(B& b, const Elem* tile, int ld,
                                               int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // Lanes 0-7 address rows 0-7 at k 0, lanes 8-15 at k 8 (lanes 16-31
    // repeat them: their addresses are ignored but stay in bounds).
    const Elem* p = tile + (lane % 8) * ld + ((lane / 8) % 2) * 8;
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(b.r[0]), "=r"(b.r[1])
                 : "r"(addr));
#else
    const int g = lane / 4, t = lane % 4;
    b.r[0] = Pair(tile + g * ld + 2 * t);
    b.r[1] = Pair(tile + g * ld + 2 * t + 8);
#endif
  }
  __device__ __forceinline__ static void LoadBTrans(B& b, const Elem* tile,
                                                    int ld, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // Lanes 0-15 address the rows k = 0..15 of the [kK][kN] tile.
    const Elem* p = tile + (lane % 16) * ld;
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
        : "=r"(b.r[0]), "=r"(b.r[1])
        : "r"(addr));
#else
    const int g = lane / 4, t = lane % 4;
    b.r[0] = static_cast<uint32_t>(tile[(2 * t) * ld + g]) |
             (static_cast<uint32_t>(tile[(2 * t + 1) * ld + g]) << 16);
    b.r[1] = static_cast<uint32_t>(tile[(2 * t + 8) * ld + g]) |
             (static_cast<uint32_t>(tile[(2 * t + 9) * ld + g]) << 16);
#endif
  }

  __device__ __forceinline__ static void Run(C& c, const A& a, const B& b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c.v[0]), "+f"(c.v[1]), "+f"(c.v[2]), "+f"(c.v[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]),
          "r"(b.r[1]));
#else
    // Row r of A lives in the four lanes 4 (r % 8) + t', column n of B in
    // lanes 4 n + t'; gather them and multiply with FMAs.
    const int lane = threadIdx.x % kDsaWarpSize;
    const int g = lane / 4, t = lane % 4;
    float arow[2][kK], bcol[2][kK];
#pragma unroll
    for (int src_t = 0; src_t < 4; ++src_t) {
      const int a_src = 4 * g + src_t;
      const uint32_t a0 = __shfl_sync(DSA_FULL_WARP_MASK, a.r[0], a_src);
      const uint32_t a1 = __shfl_sync(DSA_FULL_WARP_MASK, a.r[1], a_src);
      const uint32_t a2 = __shfl_sync(DSA_FULL_WARP_MASK, a.r[2], a_src);
      const uint32_t a3 = __shfl_sync(DSA_FULL_WARP_MASK, a.r[3], a_src);
      Unpack(a0, &arow[0][2 * src_t]);
      Unpack(a2, &arow[0][2 * src_t + 8]);
      Unpack(a1, &arow[1][2 * src_t]);
      Unpack(a3, &arow[1][2 * src_t + 8]);
#pragma unroll
      for (int cs = 0; cs < 2; ++cs) {
        const int b_src = 4 * (2 * t + cs) + src_t;
        const uint32_t b0 = __shfl_sync(DSA_FULL_WARP_MASK, b.r[0], b_src);
        const uint32_t b1 = __shfl_sync(DSA_FULL_WARP_MASK, b.r[1], b_src);
        Unpack(b0, &bcol[cs][2 * src_t]);
        Unpack(b1, &bcol[cs][2 * src_t + 8]);
      }
    }
#pragma unroll
    for (int i = 0; i < kCPerLane; ++i) {
      float acc = c.v[i];
#pragma unroll
      for (int k = 0; k < kK; ++k) acc += arow[i / 2][k] * bcol[i % 2][k];
      c.v[i] = acc;
    }
#endif
  }

  // The rows of C a lane holds, and which of them accumulator slot i is in
  // (CRow(lane, i) is the same for every slot of one row slot).
  static constexpr int kCRowsPerLane = 2;
  __host__ __device__ static constexpr int CRowSlot(int i) { return i / 2; }
  // C element of accumulator slot i: rows g, g + 8; columns 2t, 2t + 1.
  __device__ __forceinline__ static int CRow(int lane, int i) {
    return lane / 4 + 8 * (i / 2);
  }
  __device__ __forceinline__ static int CCol(int lane, int i) {
    return 2 * (lane % 4) + i % 2;
  }
  // Sum / max over the lanes that hold the same rows of C (a quad).
  __device__ __forceinline__ static float RowSum(float v) {
    v += DSA_SHFL_XOR(v, 1, kDsaWarpSize);
    v += DSA_SHFL_XOR(v, 2, kDsaWarpSize);
    return v;
  }
  __device__ __forceinline__ static float RowMax(float v) {
    v = fmaxf(v, DSA_SHFL_XOR(v, 1, kDsaWarpSize));
    v = fmaxf(v, DSA_SHFL_XOR(v, 2, kDsaWarpSize));
    return v;
  }

 private:
  __device__ __forceinline__ static uint32_t Pair(const Elem* p) {
    return *reinterpret_cast<const uint32_t*>(p);
  }
  __device__ __forceinline__ static void Unpack(uint32_t r, float* out) {
    out[0] = __uint_as_float(r << 16);
    out[1] = __uint_as_float(r & 0xffff0000u);
  }
};

// The accumulator operands of a warpgroup product (m64, fp32 accumulators):
// N values a thread, N = kN / 2 for an n-wide tile. DSA_WGMMA_ACC_REGS_N is
// the register list of the PTX ("%0,%1,...") and DSA_WGMMA_ACC_N(acc) the
// matching read-write constraints, so that the operands that follow an
// accumulator are numbered from N.
#define DSA_WGMMA_ACC_REGS_16 \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
#define DSA_WGMMA_ACC_REGS_32 \
  DSA_WGMMA_ACC_REGS_16       \
  ",%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define DSA_WGMMA_ACC_REGS_64                                        \
  DSA_WGMMA_ACC_REGS_32                                              \
  ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47" \
  ",%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define DSA_WGMMA_ACC_REGS_128                                         \
  DSA_WGMMA_ACC_REGS_64                                                \
  ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79"   \
  ",%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"   \
  ",%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109" \
  ",%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122"  \
  ",%123,%124,%125,%126,%127"
#define DSA_WGMMA_ACC_4(acc, i) \
  "+f"(acc[i]), "+f"(acc[i + 1]), "+f"(acc[i + 2]), "+f"(acc[i + 3])
#define DSA_WGMMA_ACC_16_AT(acc, i)                     \
  DSA_WGMMA_ACC_4(acc, i), DSA_WGMMA_ACC_4(acc, i + 4), \
      DSA_WGMMA_ACC_4(acc, i + 8), DSA_WGMMA_ACC_4(acc, i + 12)
#define DSA_WGMMA_ACC_16(acc) DSA_WGMMA_ACC_16_AT(acc, 0)
#define DSA_WGMMA_ACC_32(acc) \
  DSA_WGMMA_ACC_16_AT(acc, 0), DSA_WGMMA_ACC_16_AT(acc, 16)
#define DSA_WGMMA_ACC_64(acc)                          \
  DSA_WGMMA_ACC_32(acc), DSA_WGMMA_ACC_16_AT(acc, 32), \
      DSA_WGMMA_ACC_16_AT(acc, 48)
#define DSA_WGMMA_ACC_128(acc)                                    \
  DSA_WGMMA_ACC_64(acc), DSA_WGMMA_ACC_16_AT(acc, 64),            \
      DSA_WGMMA_ACC_16_AT(acc, 80), DSA_WGMMA_ACC_16_AT(acc, 96), \
      DSA_WGMMA_ACC_16_AT(acc, 112)

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
  // Descriptor of an operand of 128-byte rows (kKBytes = 128) as the tensor
  // memory accelerator writes it with 128-byte swizzle: row r at 128 r, its
  // 16-byte chunk c at chunk c ^ (r % 8); 8-row groups 1024 bytes apart.
  // Row 0 lies at `base` (1024-byte aligned); k0 is a multiple of 32.
  __device__ __forceinline__ static uint64_t DescriptorSwizzle128(
      const void* base, int k0) {
    static_assert(kKBytes == 128, "128-byte swizzle spans 128-byte rows");
    const uint32_t addr =
        static_cast<uint32_t>(__cvta_generic_to_shared(base)) + k0;
    return static_cast<uint64_t>((addr & 0x3ffff) >> 4) |
           (uint64_t{1} << 16) |                       // leading offset: unused
           (static_cast<uint64_t>(1024 >> 4) << 32) |  // 8-row group stride
           (uint64_t{1} << 62);  // layout: 128-byte swizzle
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
    IssueAs<false, false>(acc, a_tile, b_tile, accumulate);
  }
  // The same with A (a_tile, 1024-byte aligned) in the 128-byte swizzled
  // layout of DescriptorSwizzle128, B as above.
  __device__ __forceinline__ static void IssueSwizzledA(
      float (&acc)[kAccPerThread], const uint8_t* a_tile, const uint8_t* b_tile,
      bool accumulate) {
    IssueAs<true, false>(acc, a_tile, b_tile, accumulate);
  }
  // Both operands (1024-byte aligned) in the 128-byte swizzled layout.
  __device__ __forceinline__ static void IssueSwizzled(
      float (&acc)[kAccPerThread], const uint8_t* a_tile, const uint8_t* b_tile,
      bool accumulate) {
    IssueAs<true, true>(acc, a_tile, b_tile, accumulate);
  }
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
      const int scale_d = (accumulate || k0 > 0) ? 1 : 0;
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %66, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
          "{" DSA_WGMMA_ACC_REGS_64
          "}, %64, %65, p, 1, 1;\n"
          "}\n"
          : DSA_WGMMA_ACC_64(acc)
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
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %34, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
          "{" DSA_WGMMA_ACC_REGS_32
          "}, %32, %33, p, 1, 1;\n"
          "}\n"
          : DSA_WGMMA_ACC_32(acc)
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

// The same product on 32 columns, D[64 x 32] (+)= A[64 x 32] * B[32 x 32]^T
// (wgmma m64n32k32, 16 accumulators a thread; accumulator i of a thread is
// at AccRow / AccCol as above). For products whose useful columns are few
// (a decode row of 32 heads). kASwizzle128: A as DescriptorSwizzle128 reads
// it, else the core-matrix layout.
template <int kKBytes>
struct WarpgroupFp8Mma32 : WarpgroupFp8Mma<kKBytes> {
  using Base = WarpgroupFp8Mma<kKBytes>;
  static constexpr int kN = 32;
  static constexpr int kAccPerThread = Base::kM * kN / 128;  // 16
  static constexpr const char* kInstruction =
      "wgmma.m64n32k32.e4m3 (QGMMA, sm_90a)";

  __device__ __forceinline__ static void FenceOperands(
      float (&acc)[kAccPerThread]) {
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      asm volatile("" : "+f"(acc[i])::"memory");
    }
  }
  // As WarpgroupFp8Mma::Issue; b_tile holds 32 rows. One commit group.
  template <bool kASwizzle128, bool kBSwizzle128 = false>
  __device__ __forceinline__ static void Issue(float (&acc)[kAccPerThread],
                                               const uint8_t* a_tile,
                                               const uint8_t* b_tile,
                                               bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k0 = 0; k0 < kKBytes; k0 += Base::kK) {
      uint64_t da;
      if constexpr (kASwizzle128) {
        da = Base::DescriptorSwizzle128(a_tile, k0);
      } else {
        da = Base::Descriptor(a_tile, k0);
      }
      uint64_t db;
      if constexpr (kBSwizzle128) {
        db = Base::DescriptorSwizzle128(b_tile, k0);
      } else {
        db = Base::Descriptor(b_tile, k0);
      }
      const int scale_d = (accumulate || k0 > 0) ? 1 : 0;
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %18, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
          "{" DSA_WGMMA_ACC_REGS_16
          "}, %16, %17, p, 1, 1;\n"
          "}\n"
          : DSA_WGMMA_ACC_16(acc)
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
#endif
    FenceOperands(acc);
  }
};

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

template <int kN>
struct WarpgroupBf16Mma {
  static_assert(kN == 32 || kN == 64 || kN == 128 || kN == 256,
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
  // one of Bf16Sw128Descriptor). Same contract as Issue().
  template <int kSteps, typename ADesc, typename BDesc>
  __device__ __forceinline__ static void IssueWith(float (&acc)[kAccPerThread],
                                                   ADesc a_desc, BDesc b_desc,
                                                   bool accumulate) {
#if defined(DSA_MMA_HAS_WGMMA_BF16)
    FenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      Mma(acc, a_desc(j), b_desc(j), (accumulate || j > 0) ? 1 : 0);
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
  // As Issue(), with B's descriptor of step j built by the caller.
  template <int kKSteps, typename BDesc>
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
      Mma(acc, a[j], b_desc(j), (accumulate || j > 0) ? 1 : 0);
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
          "}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n"
          "}\n"
          : DSA_WGMMA_ACC_32(acc)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
    } else if constexpr (kN == 128) {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %69, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_64
          "}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n"
          "}\n"
          : DSA_WGMMA_ACC_64(acc)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
    } else {
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "setp.ne.b32 p, %133, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
          "{" DSA_WGMMA_ACC_REGS_128
          "}, {%128,%129,%130,%131}, %132, p, 1, 1, 0;\n"
          "}\n"
          : DSA_WGMMA_ACC_128(acc)
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
    }
#else
    (void)acc;
    (void)a;
    (void)db;
    (void)scale_d;
#endif
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

#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || \
    defined(__gfx942__)
#define DSA_MMA_HAS_BF16_MFMA 1
#endif

// bf16 warp product, AMD: 32x32x8 (v_mfma_f32_32x32x8bf16_1k on gfx90a and
// gfx94x, FMAs on the same fragments elsewhere).
struct Bf16WarpMma {
  using Elem = uint16_t;  // bf16 bits
  static constexpr int kM = 32;
  static constexpr int kN = 32;
  static constexpr int kK = 8;
  static constexpr int kCPerLane = 16;
  static constexpr const char* kInstruction = "v_mfma_f32_32x32x8bf16_1k";

  using Operand = short __attribute__((ext_vector_type(4)));
  using Acc = float __attribute__((ext_vector_type(16)));
  // Lane l holds row (A) or column (B) l % 32 at k = (l / 32) * 4 .. + 3.
  struct A {
    Operand r;
  };
  struct B {
    Operand r;
  };
  struct C {
    Acc v;
  };
  __device__ __forceinline__ static void Zero(C& c) {
#pragma unroll
    for (int i = 0; i < kCPerLane; ++i) c.v[i] = 0.0f;
  }

  __device__ __forceinline__ static void LoadA(A& a, const Elem* tile, int ld,
                                               int lane) {
    a.r = *reinterpret_cast<const Operand*>(tile + (lane % 32) * ld +
                                            (lane / 32) * 4);
  }
  __device__ __forceinline__ static void LoadB(B& b, const Elem* tile, int ld,
                                               int lane) {
    b.r = *reinterpret_cast<const Operand*>(tile + (lane % 32) * ld +
                                            (lane / 32) * 4);
  }
  __device__ __forceinline__ static void LoadBTrans(B& b, const Elem* tile,
                                                    int ld, int lane) {
    const Elem* p = tile + (lane / 32) * 4 * ld + lane % 32;
#pragma unroll
    for (int j = 0; j < 4; ++j) b.r[j] = static_cast<short>(p[j * ld]);
  }

  __device__ __forceinline__ static void Run(C& c, const A& a, const B& b) {
#if defined(DSA_MMA_HAS_BF16_MFMA)
    c.v = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a.r, b.r, c.v, 0, 0, 0);
#else
    // Column n = lane % 32 needs B's 8 k values (lanes n and n + 32); row m
    // needs A's (lanes m and m + 32).
    const int lane = threadIdx.x % kDsaWarpSize;
    const int n = lane % 32;
    float bcol[kK];
    LoadColumn(b.r, n, bcol);
#pragma unroll
    for (int i = 0; i < kCPerLane; ++i) {
      float arow[kK];
      LoadColumn(a.r, CRow(lane, i), arow);
      float acc = c.v[i];
#pragma unroll
      for (int k = 0; k < kK; ++k) acc += arow[k] * bcol[k];
      c.v[i] = acc;
    }
#endif
  }

  // Every slot of a lane is its own row of C.
  static constexpr int kCRowsPerLane = 16;
  __host__ __device__ static constexpr int CRowSlot(int i) { return i; }
  // C element of accumulator slot i: column lane % 32, rows
  // 8 (i / 4) + 4 (lane / 32) + i % 4.
  __device__ __forceinline__ static int CRow(int lane, int i) {
    return 8 * (i / 4) + 4 * (lane / 32) + i % 4;
  }
  __device__ __forceinline__ static int CCol(int lane, int /*i*/) {
    return lane % 32;
  }
  // Sum / max over the lanes that hold the same rows of C (a half-wave).
  __device__ __forceinline__ static float RowSum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      v += DSA_SHFL_XOR(v, offset, kDsaWarpSize);
    }
    return v;
  }
  __device__ __forceinline__ static float RowMax(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      v = fmaxf(v, DSA_SHFL_XOR(v, offset, kDsaWarpSize));
    }
    return v;
  }

 private:
  // The 8 k values of row/column `idx` of an operand (lanes idx, idx + 32).
  __device__ __forceinline__ static void LoadColumn(const Operand& r, int idx,
                                                    float* out) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int v = static_cast<int>(r[j]) & 0xffff;
      const int lo = __shfl(v, idx, kDsaWarpSize);
      const int hi = __shfl(v, idx + 32, kDsaWarpSize);
      out[j] = Bf16ToFloat(static_cast<uint16_t>(lo));
      out[j + 4] = Bf16ToFloat(static_cast<uint16_t>(hi));
    }
  }
};

// No warpgroup product on AMD: declared so that kernels name it only in
// branches discarded by kHasWarpgroupFp8Mma.
inline constexpr bool kHasWarpgroupFp8Mma = false;
template <int kKBytes>
struct WarpgroupFp8Mma;
template <int kKBytes>
struct WarpgroupFp8Mma64;
template <int kKBytes>
struct WarpgroupFp8Mma32;
inline constexpr bool kHasWarpgroupBf16Mma = false;
template <int kN>
struct WarpgroupBf16Mma;
template <int kN>
struct WarpgroupBf16MmaRegA;

#endif

}  // namespace dsa::gpu

#endif  // DSA_PLATFORM_GPU_MMA_H_
