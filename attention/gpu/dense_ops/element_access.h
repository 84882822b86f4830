// Device helpers of the dense ops' kernels: a float tensor element read or
// written in its FloatFormat (f32, or bf16 rounded to nearest even), and the
// grid of a grid-stride loop. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_OPS_ELEMENT_ACCESS_H_
#define DSA_ATTENTION_GPU_DENSE_OPS_ELEMENT_ACCESS_H_

#include <cstdint>

#include "attention/gpu/device/formats.h"
#include "attention/gpu/device/hip_compat.h"

namespace dsa::attention::gpu {

__device__ __forceinline__ float LoadF(const void* base, FloatFormat type,
                                       int64_t i) {
  if (type == FloatFormat::kFloat32) return static_cast<const float*>(base)[i];
  return __uint_as_float(
      static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16);
}

// attention/dtypes/bf16.h's FloatToBf16 (round to nearest even, NaN kept
// quiet), on register bits: HIP 5.2 has no device memcpy for its BitCast.
__device__ __forceinline__ uint16_t ToBf16(float x) {
  uint32_t bits = __float_as_uint(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

__device__ __forceinline__ void StoreF(void* base, FloatFormat type, int64_t i,
                                       float v) {
  if (type == FloatFormat::kFloat32) {
    static_cast<float*>(base)[i] = v;
  } else {
    static_cast<uint16_t*>(base)[i] = ToBf16(v);
  }
}

// Blocks for a grid-stride loop over n elements.
inline unsigned GridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks < 1 ? 1 : blocks)
                                              : 65536);
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_OPS_ELEMENT_ACCESS_H_
