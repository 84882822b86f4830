// What every kernel of the memory-bound ops uses on the row its group of
// kLanes lanes owns (config.h): the group's reductions, the canonical
// LayerNorm lanes (attention/dtypes/layer_norm.h), element loads and
// unaligned stores, and the ue8m0 scale's reciprocal (the float -> fp8
// conversion is the device layer's EncodeFp8, device/fp8_encode.h).
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_CACHE_ROW_GROUP_H_
#define DSA_ATTENTION_GPU_CACHE_ROW_GROUP_H_

#include <cmath>
#include <cstdint>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "attention/dtypes/layer_norm.h"
#include "attention/gpu/cache/config.h"
#include "attention/gpu/device/formats.h"
#include "attention/gpu/device/fp8_encode.h"
#include "attention/gpu/device/hip_compat.h"

namespace dsa::attention::gpu::cache {

static_assert(kDsaWarpSize % kLanes == 0, "a group must fit in a warp");

// The elements lane `lane` owns in the canonical order: chunks of
// kLayerNormChunk starting at chunk `lane`, every kLanes chunks.
#define DSA_CACHE_FOR_OWN_ELEMENTS(i, n, lane)    \
  for (int c_ = (lane)*kLayerNormChunk; c_ < (n); \
       c_ += kLanes * kLayerNormChunk)            \
    for (int i = c_; i < c_ + kLayerNormChunk && i < (n); ++i)

// The sum and the max over the group: the xor butterfly of the canonical
// order (offsets 16, 8, ..., 1), every lane gets the result.
template <class T>
__device__ __forceinline__ T GroupSum(T v) {
#pragma unroll
  for (int o = kLanes / 2; o >= 1; o /= 2) v += DSA_SHFL_XOR(v, o, kLanes);
  return v;
}

__device__ __forceinline__ float GroupMax(float v) {
#pragma unroll
  for (int o = kLanes / 2; o >= 1; o /= 2) {
    v = fmaxf(v, DSA_SHFL_XOR(v, o, kLanes));
  }
  return v;
}

__device__ __forceinline__ float LoadElement(const void* base, FloatFormat type,
                                             int64_t i) {
  if (type == FloatFormat::kFloat32) return static_cast<const float*>(base)[i];
  return Bf16ToFloat(static_cast<const uint16_t*>(base)[i]);
}

__device__ __forceinline__ void StoreFloatBytes(uint8_t* p, float v) {
  if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) {
    *reinterpret_cast<float*>(p) = v;
    return;
  }
  const uint32_t bits = __float_as_uint(v);
#pragma unroll
  for (int k = 0; k < 4; ++k) p[k] = static_cast<uint8_t>(bits >> (8 * k));
}

__device__ __forceinline__ void StoreBf16Bytes(uint8_t* p, float v) {
  const uint16_t bits = FloatToBf16(v);
  if ((reinterpret_cast<uintptr_t>(p) & 1) == 0) {
    *reinterpret_cast<uint16_t*>(p) = bits;
    return;
  }
  p[0] = static_cast<uint8_t>(bits);
  p[1] = static_cast<uint8_t>(bits >> 8);
}

// A params' scale_divisor, or the format's max for 0.
__device__ __forceinline__ float Fp8ScaleDivisorOf(const Fp8Traits& traits,
                                                   float divisor) {
  return divisor > 0.0f ? divisor : traits.max;
}

// 1 / scale for an ue8m0 scale (a power of two in [2^-22, 2^121], or +inf
// for an infinite amax) without a division: exact, so equal to the CPU's
// 1.0f / scale.
__device__ __forceinline__ float InversePow2(float scale) {
  const uint32_t bits = __float_as_uint(scale);
  if (bits >= (253u << 23)) return 1.0f / scale;  // 2^126 and up, inf
  return __uint_as_float((254u << 23) - bits);
}

// The kernels' traits argument (host code).
inline Fp8Traits TraitsOf(Fp8Encoding e) {
  return e == Fp8Encoding::kE4m3fnuz ? kE4m3fnuzTraits : kE4m3fnTraits;
}

}  // namespace dsa::attention::gpu::cache

#endif  // DSA_ATTENTION_GPU_CACHE_ROW_GROUP_H_
