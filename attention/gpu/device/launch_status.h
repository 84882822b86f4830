// Between the op kernels and the launchers (each family's launch.h): a
// launcher's LaunchResult as the dsa::Status an op kernel returns across the
// plugin boundary (a rejected argument is InvalidArgument, no device
// FailedPrecondition, a build without a GPU backend Unimplemented, out of
// memory ResourceExhausted, any other runtime failure Internal), and the ops'
// dtypes as the launchers' enums. Free of Abseil, like the op kernels that use
// it.
#ifndef DSA_ATTENTION_GPU_LAUNCH_STATUS_H_
#define DSA_ATTENTION_GPU_LAUNCH_STATUS_H_

#include "attention/dtypes/dtype.h"
#include "attention/gpu/device/formats.h"
#include "attention/gpu/device/launch_result.h"
#include "platform/core_status.h"

namespace dsa::attention::gpu {

inline Status StatusFromLaunch(const LaunchResult& r) {
  switch (r.code) {
    case LaunchCode::kOk:
      return OkStatus();
    case LaunchCode::kInvalidArgument:
      return InvalidArgumentError(r.message);
    case LaunchCode::kNoDevice:
      return FailedPreconditionError(r.message);
    case LaunchCode::kNotBuilt:
      return UnimplementedError(r.message);
    case LaunchCode::kOutOfMemory:
      return ResourceExhaustedError(r.message);
    case LaunchCode::kRuntimeError:
      break;
  }
  return InternalError(r.message);
}

// A float tensor's dtype (f32 or bf16, as the ops' checks leave it).
inline FloatFormat FloatFormatOf(DType dtype) {
  return dtype == DType::kBFloat16 ? FloatFormat::kBFloat16
                                   : FloatFormat::kFloat32;
}

// A latent cache's dtype (bf16 or an fp8 encoding, as CheckLatentCache
// leaves it).
inline LatentCacheType LatentCacheTypeOf(DType dtype) {
  if (dtype == DType::kBFloat16) return LatentCacheType::kBFloat16;
  return dtype == DType::kFloat8E4m3fnuz ? LatentCacheType::kFp8E4m3fnuz
                                         : LatentCacheType::kFp8E4m3fn;
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_LAUNCH_STATUS_H_
