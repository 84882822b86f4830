// bfloat16 <-> float32 conversion used by the kernels: round to nearest even,
// NaN stays NaN (quiet), overflow rounds to infinity as IEEE rounding does.
// bfloat16 values travel as raw uint16_t bits so no compiler-specific type
// is needed on the host.
#ifndef DSA_ATTENTION_DTYPES_BF16_H_
#define DSA_ATTENTION_DTYPES_BF16_H_

#include <cstdint>

#include "attention/dtypes/host_device.h"

namespace dsa::attention {

DSA_HOST_DEVICE inline uint16_t FloatToBf16(float x) {
  uint32_t bits = BitCast<uint32_t>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // Truncating a NaN could clear every mantissa bit that survives and give
    // infinity; force a quiet-NaN bit instead.
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

DSA_HOST_DEVICE inline float Bf16ToFloat(uint16_t h) {
  return BitCast<float>(static_cast<uint32_t>(h) << 16);
}

// x rounded to the nearest bfloat16, as a float (what storing a float32 into
// a bf16 tensor and reading it back gives).
DSA_HOST_DEVICE inline float RoundToBf16(float x) {
  return Bf16ToFloat(FloatToBf16(x));
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_DTYPES_BF16_H_
