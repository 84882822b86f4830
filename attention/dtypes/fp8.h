// FP8 E4M3 numerics shared by every kernel: the two encodings (OCP e4m3fn
// and AMD's e4m3fnuz), float32 -> fp8 with round-to-nearest-even and
// saturation, fp8 -> float32, and the power-of-two ("ue8m0") scale rule the
// DeepSeek-V3.2 indexer and this project's fp8 MLA cache use.
//
// Formats (sign, 4 exponent bits, 3 mantissa bits):
//   e4m3fn:   bias 7, max 448 (0x7e), NaN 0x7f/0xff, has -0, min normal 2^-6.
//   e4m3fnuz: bias 8, max 240 (0x7f), NaN 0x80 only, no -0, min normal 2^-7.
// Conversion saturates: |x| >= max (including infinity) becomes +-max, as the
// engines' quantisers do (values are pre-scaled so saturation is rare); NaN
// becomes the format's NaN; a value rounding to zero in e4m3fnuz is +0.
#ifndef DSA_ATTENTION_DTYPES_FP8_H_
#define DSA_ATTENTION_DTYPES_FP8_H_

#include <cstdint>

#include "attention/dtypes/dtype.h"
#include "attention/dtypes/host_device.h"

namespace dsa::attention {

struct Fp8Traits {
  uint32_t exponent_bias;
  float max;             // largest finite value
  uint32_t max_code;     // its bits without the sign
  float min_normal;      // 2^(1 - bias)
  float subnormal_step;  // 2^(1 - bias - 3): spacing below min_normal
  // 2^(23 + log2(subnormal_step)): a float whose ulp is subnormal_step, so
  // (a + magic) rounds a to the subnormal grid with the FPU's own RNE.
  float subnormal_magic;
  bool has_negative_zero;  // e4m3fn: NaN is 0x7f/0xff; e4m3fnuz: NaN is 0x80
};

inline constexpr Fp8Traits kE4m3fnTraits = {7,       448.0f,  0x7e, 0x1p-6f,
                                            0x1p-9f, 0x1p14f, true};
inline constexpr Fp8Traits kE4m3fnuzTraits = {8,        240.0f,  0x7f, 0x1p-7f,
                                              0x1p-10f, 0x1p13f, false};

// Traits of an fp8 DType; e4m3fn for anything else (callers validate first).
// Returned by value so device code never takes the address of a host global.
DSA_HOST_DEVICE constexpr Fp8Traits Fp8TraitsOf(DType dtype) {
  return dtype == DType::kFloat8E4m3fnuz ? kE4m3fnuzTraits : kE4m3fnTraits;
}

// Largest finite value: 448 (e4m3fn) or 240 (e4m3fnuz).
DSA_HOST_DEVICE constexpr float Fp8Max(DType dtype) {
  return Fp8TraitsOf(dtype).max;
}

DSA_HOST_DEVICE inline uint8_t FloatToFp8(float x, const Fp8Traits& t) {
  const uint32_t bits = BitCast<uint32_t>(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abits = bits & 0x7fffffffu;
  if (abits > 0x7f800000u) {
    return t.has_negative_zero ? static_cast<uint8_t>(sign | 0x7fu) : 0x80u;
  }
  const float a = BitCast<float>(abits);
  uint32_t mag;
  if (a >= t.max) {
    mag = t.max_code;
  } else if (a < t.min_normal) {
    // Subnormal (or zero) result: let the FPU round onto the 2^-9 / 2^-10
    // grid; the integer difference of the bits is the 3-bit mantissa, and a
    // carry to 8 is exactly the code of the smallest normal.
    const float r = a + t.subnormal_magic;
    mag = BitCast<uint32_t>(r) - BitCast<uint32_t>(t.subnormal_magic);
  } else {
    // Normal result: round the float's 23-bit mantissa to 3 bits (RNE); a
    // mantissa carry moves into the exponent field, which is correct. The
    // result cannot pass max because a < max and max is a code.
    const uint32_t r = abits + 0x7ffffu + ((abits >> 20) & 1u);
    mag = (r >> 20) - ((127u - t.exponent_bias) << 3);
  }
  if (mag == 0 && !t.has_negative_zero) return 0;
  return static_cast<uint8_t>(sign | mag);
}

DSA_HOST_DEVICE inline float Fp8ToFloat(uint8_t code, const Fp8Traits& t) {
  const uint32_t mag = code & 0x7fu;
  const bool negative = (code & 0x80u) != 0;
  if (t.has_negative_zero ? mag == 0x7fu : code == 0x80u) {
    return BitCast<float>(0x7fc00000u);
  }
  const uint32_t exponent = mag >> 3;
  const uint32_t mantissa = mag & 7u;
  float v;
  if (exponent == 0) {
    v = static_cast<float>(mantissa) * t.subnormal_step;
  } else {
    v = BitCast<float>(((exponent + 127u - t.exponent_bias) << 23) |
                       (mantissa << 20));
  }
  return negative ? -v : v;
}

// The smallest amax a quantisation scale is derived from: an all-zero (or
// tiny) vector still gets a finite, non-zero scale.
inline constexpr float kFp8MinAmax = 1e-4f;

// Scale for a vector with absolute maximum `amax`: max(amax, 1e-4) / divisor,
// rounded UP to a power of two (an "ue8m0" scale: exponent only), so that
// amax / scale <= divisor and nothing saturates when divisor <= fp8_max.
// Computed in float32 as the DeepSeek-V3.2 reference quantiser does.
DSA_HOST_DEVICE inline float Ue8m0Scale(float amax, float fp8_max) {
  // NaN amax compares false and takes the floor, keeping the scale finite.
  const float clamped = amax >= kFp8MinAmax ? amax : kFp8MinAmax;
  uint32_t bits = BitCast<uint32_t>(clamped / fp8_max);
  if ((bits & 0x007fffffu) != 0) {
    bits = (bits & 0xff800000u) + 0x00800000u;
  }
  return BitCast<float>(bits);
}

// The divisor a quantiser's scale uses: `divisor` when it is positive (an
// op's fp8_scale_divisor argument), else the format's max.
DSA_HOST_DEVICE constexpr float Fp8ScaleDivisor(DType dtype, float divisor) {
  return divisor > 0.0f ? divisor : Fp8Max(dtype);
}

// vLLM's divisor for the indexer's fp8 keys and queries: 448 for e4m3fn, and
// 224, not the format's 240, for e4m3fnuz (gfx940/gfx942: csrc's
// kFp8ScaleDivisor, the Triton kernels' IS_FNUZ branch, get_fp8_min_max,
// "Using the default value (240.0) ... will cause accuracy issue"). With
// power-of-two scales the two divisors pick scales a factor 2 apart when
// amax / 2^k falls in (224, 240].
inline constexpr float kVllmE4m3fnuzScaleDivisor = 224.0f;
DSA_HOST_DEVICE constexpr float VllmFp8ScaleDivisor(DType dtype) {
  return dtype == DType::kFloat8E4m3fnuz ? kVllmE4m3fnuzScaleDivisor
                                         : Fp8Max(dtype);
}

// Block-scaled fp8 weights and activations (W8A8; attention/dense_ops.h,
// Fp8BlockQuant and Fp8BlockGemm): 128 columns per block, a weight's blocks
// 128 rows high, an activation's one row (a token).
inline constexpr int kFp8BlockSize = 128;
// vLLM's per_token_group_quant_fp8 eps: an all-zero block keeps a finite,
// non-zero scale (and zero codes).
inline constexpr float kFp8BlockMinAmax = 1e-10f;

// The multiplier of a block with absolute maximum `amax`: max(amax, 1e-10) /
// divisor (VllmFp8ScaleDivisor: 448 e4m3fn, 224 e4m3fnuz), in float32, not
// rounded to a power of two.
DSA_HOST_DEVICE inline float Fp8BlockScale(float amax, float divisor) {
  // A NaN amax compares false and takes the floor.
  return (amax >= kFp8BlockMinAmax ? amax : kFp8BlockMinAmax) / divisor;
}

// Blocks of `n` elements: ceil(n / 128).
DSA_HOST_DEVICE constexpr int64_t Fp8Blocks(int64_t n) {
  return (n + kFp8BlockSize - 1) / kFp8BlockSize;
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_DTYPES_FP8_H_
