// One token's 128-column group quantised by a warp (Fp8BlockQuant with
// block_rows 1, dense_ops.h): each lane holds kFp8LaneValues consecutive
// values, the amax is a warp reduction, the scale Fp8BlockScale's and the
// codes EncodeFp8's, so the codes and scales are the CPU kernel's bit for bit
// (a division and a max: nothing a compiler may contract). fp8_block_quant's
// per-token kernel and rms_norm's fused quantisation both store their codes
// through it.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_OPS_TOKEN_QUANT_H_
#define DSA_ATTENTION_GPU_DENSE_OPS_TOKEN_QUANT_H_

#include <cstdint>

#include "attention/dtypes/fp8.h"
#include "attention/gpu/dense_ops/element_access.h"
#include "attention/gpu/device/fp8_encode.h"
#include "attention/gpu/device/hip_compat.h"

namespace dsa::attention::gpu {

// A lane's consecutive values of a group: 4 on NVIDIA, 2 on AMD.
constexpr int kFp8LaneValues = kFp8BlockSize / kDsaWarpSize;

// fmaxf ignores a NaN operand, as the CPU kernel's std::max does.
__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int m = kDsaWarpSize / 2; m > 0; m /= 2) {
    v = fmaxf(v, DSA_SHFL_XOR(v, m, kDsaWarpSize));
  }
  return v;
}

// The group's scale (stored by lane 0 at *scale_out) and this lane's codes
// of v at q (columns at or past `valid` of the lane's values left
// untouched; v holds zeros there). Every lane of the warp calls it.
__device__ __forceinline__ void QuantizeLaneGroup(
    const float (&v)[kFp8LaneValues], int lane, int valid,
    const Fp8Traits& traits, float divisor, uint8_t* q, float* scale_out) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kFp8LaneValues; ++i) amax = fmaxf(amax, fabsf(v[i]));
  amax = WarpMax(amax);
  const float scale = Fp8BlockScale(amax, divisor);
  if (lane == 0) *scale_out = scale;
  uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < kFp8LaneValues; ++i) {
    packed |= static_cast<uint32_t>(EncodeFp8(v[i] / scale, traits)) << (8 * i);
  }
  if (valid >= kFp8LaneValues &&
      reinterpret_cast<uintptr_t>(q) % kFp8LaneValues == 0) {
    if constexpr (kFp8LaneValues == 4) {
      *reinterpret_cast<uint32_t*>(q) = packed;
    } else {
      *reinterpret_cast<uint16_t*>(q) = static_cast<uint16_t>(packed);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kFp8LaneValues; ++i) {
      if (i < valid) q[i] = static_cast<uint8_t>(packed >> (8 * i));
    }
  }
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_OPS_TOKEN_QUANT_H_
