// Fp8EncodeForTesting (launch.h): the kernels' float -> fp8 conversion
// (device/fp8_encode.h's EncodeFp8, the hardware e4m3 conversion on sm_89 and
// newer) element by element, so that kernels_test compares it with FloatToFp8
// over 2^25 float32 bit patterns.
#include <cstdint>

#include "attention/dtypes/fp8.h"
#include "attention/gpu/cache/config.h"
#include "attention/gpu/cache/launch.h"
#include "attention/gpu/cache/row_group.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace cache {

__global__ void Fp8EncodeKernel(const float* in, uint8_t* out, int64_t n,
                                Fp8Traits traits) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = EncodeFp8(in[i], traits);
}

}  // namespace cache

LaunchResult Fp8EncodeForTesting(const float* in, uint8_t* out, int64_t n,
                                 Fp8Encoding encoding, void* stream) {
  constexpr const char* op = "fp8_encode";
  if (n < 0 || (n > 0 && (in == nullptr || out == nullptr))) {
    return Invalid(op, "n %lld with a null pointer", static_cast<long long>(n));
  }
  if (n == 0) return LaunchResult{};
  const int64_t blocks = (n + cache::kThreads - 1) / cache::kThreads;
  if (blocks > 0x7fffffff) return Invalid(op, "n is too large");
  hipLaunchKernelGGL(cache::Fp8EncodeKernel,
                     dim3(static_cast<uint32_t>(blocks)), dim3(cache::kThreads),
                     0, static_cast<hipStream_t>(stream), in, out, n,
                     cache::TraitsOf(encoding));
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
