// float -> fp8 on the device, as attention/dtypes/fp8.h's FloatToFp8
// computes it (the codes every platform writes). On NVIDIA sm_89 and newer,
// e4m3fn uses the hardware conversion (cvt.rn.satfinite: round to nearest
// even, saturating to +-448, as FloatToFp8 does) instead of ~20 integer
// instructions; NaN keeps FloatToFp8's sign rule. The cache family's
// kernels_test compares the two over 2^25 float32 bit patterns
// (Fp8EncodeForTesting). Device-compiler sources only; the including family
// lists //attention:dtypes/fp8.h among its device headers.
#ifndef DSA_ATTENTION_GPU_DEVICE_FP8_ENCODE_H_
#define DSA_ATTENTION_GPU_DEVICE_FP8_ENCODE_H_

#include <cmath>
#include <cstdint>

#include "attention/dtypes/fp8.h"
#include "attention/gpu/device/hip_compat.h"

namespace dsa::attention::gpu {

__device__ __forceinline__ uint8_t EncodeFp8(float x, const Fp8Traits& t) {
#if defined(DSA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (t.has_negative_zero && !isnan(x)) {
    uint16_t pair;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(pair) : "f"(x));
    return static_cast<uint8_t>(pair);
  }
#endif
  return FloatToFp8(x, t);
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_FP8_ENCODE_H_
