// One token's 128-column group quantised by a warp (Fp8BlockQuant with
// block_rows 1, dense_ops.h): each lane holds kFp8LaneValues consecutive
// values, the amax is a warp reduction, the scale Fp8BlockScale's and the
// codes EncodeFp8's, so the codes and scales are the CPU kernel's bit for bit
// (a division and a max: nothing a compiler may contract). fp8_block_quant's
// per-token kernel and rms_norm's fused quantisation both load their lanes
// and store their codes through it.
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

// A lane's kFp8LaneValues consecutive elements of a float tensor from
// element e, of which the first `valid` exist (the rest read as zero): one
// vector load where they are whole and aligned, else element by element.
__device__ __forceinline__ void LoadLaneValues(const void* base,
                                               FloatFormat type, int64_t e,
                                               int64_t valid,
                                               float (&v)[kFp8LaneValues]) {
  constexpr int kN = kFp8LaneValues;
  if (valid >= kN) {
    if (type == FloatFormat::kBFloat16) {
      const uint16_t* src = static_cast<const uint16_t*>(base) + e;
      if ((reinterpret_cast<uintptr_t>(src) % (2 * kN)) == 0) {
        uint32_t w[(kN + 1) / 2];
        if constexpr (kN == 4) {
          const uint2 u = *reinterpret_cast<const uint2*>(src);
          w[0] = u.x;
          w[1] = u.y;
        } else {
          w[0] = *reinterpret_cast<const uint32_t*>(src);
        }
#pragma unroll
        for (int i = 0; i < kN; ++i) {
          v[i] = __uint_as_float((w[i / 2] >> (16 * (i % 2))) << 16);
        }
        return;
      }
    } else {
      const float* src = static_cast<const float*>(base) + e;
      if ((reinterpret_cast<uintptr_t>(src) % (4 * kN)) == 0) {
        if constexpr (kN == 4) {
          const float4 f = *reinterpret_cast<const float4*>(src);
          v[0] = f.x;
          v[1] = f.y;
          v[2] = f.z;
          v[3] = f.w;
        } else {
          const float2 f = *reinterpret_cast<const float2*>(src);
          v[0] = f.x;
          v[1] = f.y;
        }
        return;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kN; ++i)
    v[i] = i < valid ? LoadF(base, type, e + i) : 0.0f;
}

// Stores the lane's values at element e of a float tensor (the first
// `valid` of them; one vector store where whole and aligned) and leaves in
// v what was stored: a bf16 tensor's rounding.
__device__ __forceinline__ void StoreLaneValues(void* base, FloatFormat type,
                                                int64_t e, int64_t valid,
                                                float (&v)[kFp8LaneValues]) {
  constexpr int kN = kFp8LaneValues;
  if (type == FloatFormat::kBFloat16) {
    uint16_t h[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      h[i] = ToBf16(v[i]);
      v[i] = __uint_as_float(static_cast<uint32_t>(h[i]) << 16);
    }
    uint16_t* dst = static_cast<uint16_t*>(base) + e;
    if (valid >= kN && reinterpret_cast<uintptr_t>(dst) % (2 * kN) == 0) {
      if constexpr (kN == 4) {
        *reinterpret_cast<uint2*>(dst) = make_uint2(
            h[0] | (uint32_t{h[1]} << 16), h[2] | (uint32_t{h[3]} << 16));
      } else {
        *reinterpret_cast<uint32_t*>(dst) = h[0] | (uint32_t{h[1]} << 16);
      }
      return;
    }
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if (i < valid) dst[i] = h[i];
    }
    return;
  }
  float* dst = static_cast<float*>(base) + e;
  if (valid >= kN && reinterpret_cast<uintptr_t>(dst) % (4 * kN) == 0) {
    if constexpr (kN == 4) {
      *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      *reinterpret_cast<float2*>(dst) = make_float2(v[0], v[1]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    if (i < valid) dst[i] = v[i];
  }
}

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
