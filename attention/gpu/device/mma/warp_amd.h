// Warp-level fp8 and bf16 matrix products on AMD (MFMA where the target has
// it: fp8 for e4m3fnuz on gfx94x, bf16 for the other fp8 cases; the same
// 32x32 fragments with FMAs on targets without MFMA): Fp8WarpMma,
// Bf16WarpMma; and the warpgroup products' declarations (AMD has none).
// Part of mma.h (include that); device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DEVICE_MMA_WARP_AMD_H_
#define DSA_ATTENTION_GPU_DEVICE_MMA_WARP_AMD_H_

#include <cstdint>

#include "attention/gpu/device/mma/conversions.h"

#if defined(DSA_GPU_ROCM)

namespace dsa::gpu {

#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define DSA_MMA_HAS_FP8_FNUZ_MFMA 1
#endif
#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || \
    defined(__gfx942__)
#define DSA_MMA_HAS_BF16_MFMA 1
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
      "v_mfma_f32_32x32x16_fp8_fp8 (gfx94x, fnuz), else "
      "v_mfma_f32_32x32x8bf16_1k";

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
#if defined(DSA_MMA_HAS_BF16_MFMA)
    // No fp8 MFMA for this format: the codes widened to bf16 (exact: E4M3's
    // values are bf16 values) and two 32x32x8 bf16 MFMAs, one per half of
    // each lane's 8 k values. A and B lanes hold the same k values, and the
    // 32x32 output layout is the same, so the sum over k is the fp8
    // product's. (The FMA loop below needs 256 decodes and 32 shuffles per
    // lane and product; in the indexer logits it spilled 128-132 VGPRs.)
    c.v = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(
        Bf16Half(a.r, 0), Bf16Half(b.r, 0), c.v, 0, 0, 0);
    c.v = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(
        Bf16Half(a.r, 1), Bf16Half(b.r, 1), c.v, 0, 0, 0);
    return;
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
  // Codes 4 * half .. 4 * half + 3 of a fragment as a bf16 MFMA operand.
  using Bf16x4 = short __attribute__((ext_vector_type(4)));
  __device__ __forceinline__ static Bf16x4 Bf16Half(long r, int half) {
    Bf16x4 out;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t code =
          (static_cast<unsigned long>(r) >> (8 * (4 * half + j))) & 0xffu;
      out[j] = static_cast<short>(__float_as_uint(DecodeFp8<F>(code)) >> 16);
    }
    return out;
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

  // A lane's 16 slots all lie in one column of C (lane % 32); the other half
  // of that column is lane ^ 32's. Sum / max over a column of C: the lane's
  // own slots first, then these two lanes.
  __device__ __forceinline__ static float ColumnSum(float v) {
    return v + DSA_SHFL_XOR(v, 32, kDsaWarpSize);
  }
  __device__ __forceinline__ static float ColumnMax(float v) {
    return fmaxf(v, DSA_SHFL_XOR(v, 32, kDsaWarpSize));
  }

  // The accumulator as the next product's B operand, without shared memory:
  // slots 4 j .. 4 j + 3 of a lane hold C's rows 8 j + 4 (lane / 32) + 0..3
  // of column lane % 32, which is what a B fragment of k-step j holds of
  // the transposed matrix (row lane % 32 at k = (lane / 32) * 4 .. + 3).
  // So C^T is the B of a product over C's rows: with C = K Q^T (keys x
  // queries), the probabilities made from slots 4 j .. 4 j + 3 are the B
  // fragment of keys 8 j .. 8 j + 7 in O^T += V^T P^T. `four`: those slots'
  // values (after the softmax), rounded to bf16 here.
  static constexpr int kCSlotsPerBStep = 4;
  __device__ __forceinline__ static void CSlotsAsB(B& b, const float* four) {
    SetLaneValues(b.r, four);
  }
  // An A fragment from this lane's own four values (row lane % 32 at
  // k = (lane / 32) * 4 .. + 3), rounded to bf16: operands that come from
  // registers or global memory rather than a shared-memory tile.
  __device__ __forceinline__ static void SetA(A& a, const float* four) {
    SetLaneValues(a.r, four);
  }

 private:
  __device__ __forceinline__ static void SetLaneValues(Operand& r,
                                                       const float* four) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      r[j] = static_cast<short>(FloatToBf16(four[j]));
    }
  }
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
template <int kKBytes, int kWidth = 128>
struct WarpgroupFp8Mma;
inline constexpr bool kHasWarpgroupBf16Mma = false;
template <int kN>
struct WarpgroupBf16Mma;
template <int kN>
struct WarpgroupBf16MmaRegA;

}  // namespace dsa::gpu

#endif  // defined(DSA_GPU_ROCM)

#endif  // DSA_ATTENTION_GPU_DEVICE_MMA_WARP_AMD_H_
