// Warp-level fp8 and bf16 matrix products on NVIDIA (mma.sync m16n8k16 on
// sm_80 and later, the same fragments with FMAs before): Fp8WarpMma,
// Bf16WarpMma.
// Part of mma.h (include that); device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DEVICE_MMA_WARP_NVIDIA_H_
#define DSA_ATTENTION_GPU_DEVICE_MMA_WARP_NVIDIA_H_

#include <cstdint>

#include "attention/gpu/device/mma/conversions.h"

#if defined(DSA_GPU_CUDA)

namespace dsa::gpu {

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

}  // namespace dsa::gpu

#endif  // defined(DSA_GPU_CUDA)

#endif  // DSA_ATTENTION_GPU_DEVICE_MMA_WARP_NVIDIA_H_
