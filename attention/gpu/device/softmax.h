// Online softmax, written once for the attention bodies (FlashAttention's
// running max and sum, in the log2 domain: scores arrive multiplied by
// softmax_scale * log2(e), probabilities are exp2(score - base)).
//
// A thread holds kRows rows' worth of scores of each key tile, and the lanes
// that share a row combine through RowReduce (Max and Sum across them: the
// quad of a wgmma or mma.sync accumulator row, QuadRowReduce, or a matrix
// policy's own, MmaRowReduce). Per tile a body
//   1. takes this thread's maximum of each row's (scaled, masked) scores,
//   2. calls Update: the running max moves, `base` is what to subtract
//      before exp2 and `alpha` what rescales the row's output (the running
//      sum is rescaled here),
//   3. adds its probabilities to row_sum and rescales its output by alpha;
// at the end Finalize gives 1 / the row's sum. A row that has seen no
// unmasked key keeps max -inf and base 0, so its probabilities are
// exp2(-inf) = 0 rather than NaN, and its output is 0.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DEVICE_SOFTMAX_H_
#define DSA_ATTENTION_GPU_DEVICE_SOFTMAX_H_

#include "attention/gpu/device/hip_compat.h"

namespace dsa::attention::gpu {

// 2^x for the softmax's probabilities: the hardware's approximation with
// subnormal results flushed to zero on NVIDIA (one MUFU.EX2; exp2f adds
// three instructions to keep subnormals, which a probability below 2^-126
// of the row maximum's does not need), exp2f elsewhere. 2^-inf = 0.
__device__ __forceinline__ float Exp2Ftz(float x) {
#if defined(DSA_GPU_CUDA)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// The four lanes (xor 1, 2) that share a row of a wgmma or mma.sync
// accumulator.
struct QuadRowReduce {
  __device__ __forceinline__ static float Max(float x) {
    x = fmaxf(x, DSA_SHFL_XOR(x, 1, kDsaWarpSize));
    return fmaxf(x, DSA_SHFL_XOR(x, 2, kDsaWarpSize));
  }
  __device__ __forceinline__ static float Sum(float x) {
    x += DSA_SHFL_XOR(x, 1, kDsaWarpSize);
    return x + DSA_SHFL_XOR(x, 2, kDsaWarpSize);
  }
};

// The lanes that share a row of a warp-level matrix policy's C fragment
// (mma.h: RowMax / RowSum).
template <typename Mma>
struct MmaRowReduce {
  __device__ __forceinline__ static float Max(float x) {
    return Mma::RowMax(x);
  }
  __device__ __forceinline__ static float Sum(float x) {
    return Mma::RowSum(x);
  }
};

template <int kRows, typename RowReduce>
struct OnlineSoftmax {
  float row_max[kRows];
  float row_sum[kRows];  // this lane's share, until Finalize sums the row

  __device__ __forceinline__ void Init() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -__builtin_huge_valf();
      row_sum[r] = 0.0f;
    }
  }

  // tile_max: this thread's maximum of each row's scores in the new tile.
  __device__ __forceinline__ void Update(const float (&tile_max)[kRows],
                                         float (&base)[kRows],
                                         float (&alpha)[kRows]) {
    constexpr float kNegInf = -__builtin_huge_valf();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float new_max = fmaxf(row_max[r], RowReduce::Max(tile_max[r]));
      base[r] = new_max == kNegInf ? 0.0f : new_max;
      alpha[r] = exp2f(row_max[r] - base[r]);
      row_max[r] = new_max;
      row_sum[r] *= alpha[r];
    }
  }

  // 1 / each row's sum (0 for a row with no unmasked key).
  __device__ __forceinline__ void Finalize(float (&inv)[kRows]) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float sum = RowReduce::Sum(row_sum[r]);
      inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
    }
  }
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_SOFTMAX_H_
