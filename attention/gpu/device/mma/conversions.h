// The element conversions every matrix policy and kernel shares: the two fp8
// E4M3 encodings decoded, bf16 rounding (to nearest even) and packing.
// Part of mma.h (include that); device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DEVICE_MMA_CONVERSIONS_H_
#define DSA_ATTENTION_GPU_DEVICE_MMA_CONVERSIONS_H_

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

}  // namespace dsa::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_MMA_CONVERSIONS_H_
