// Device helpers of the dense ops' kernels: a float tensor element read or
// written in its FloatFormat (f32, or bf16 rounded to nearest even), two or
// four consecutive ones with one vector access, and the grid of a
// grid-stride loop. Device-compiler sources only.
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

// A thread's kN (2 or 4) consecutive elements of a float tensor from
// element e, of which the first `valid` exist (the rest read as zero): one
// vector load where they are whole and aligned, else element by element.
template <int kN>
__device__ __forceinline__ void LoadValues(const void* base, FloatFormat type,
                                           int64_t e, int64_t valid,
                                           float (&v)[kN]) {
  static_assert(kN == 2 || kN == 4, "two or four values");
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

// Stores a thread's kN values at element e of a float tensor (the first
// `valid` of them; one vector store where whole and aligned) and leaves in
// v what was stored: a bf16 tensor's rounding.
template <int kN>
__device__ __forceinline__ void StoreValues(void* base, FloatFormat type,
                                            int64_t e, int64_t valid,
                                            float (&v)[kN]) {
  static_assert(kN == 2 || kN == 4, "two or four values");
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

// Blocks for a grid-stride loop over n elements.
inline unsigned GridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks < 1 ? 1 : blocks)
                                              : 65536);
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_OPS_ELEMENT_ACCESS_H_
