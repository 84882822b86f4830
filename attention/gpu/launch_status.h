// A launcher's LaunchResult (indexer_kernels.h) as the dsa::Status an op
// kernel returns across the plugin boundary: a rejected argument is
// InvalidArgument, no device FailedPrecondition, a build without a GPU
// backend Unimplemented, a runtime failure Internal. Free of Abseil, like the
// op kernels that use it.
#ifndef DSA_ATTENTION_GPU_LAUNCH_STATUS_H_
#define DSA_ATTENTION_GPU_LAUNCH_STATUS_H_

#include "attention/gpu/indexer_kernels.h"
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
    case LaunchCode::kRuntimeError:
      break;
  }
  return InternalError(r.message);
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_LAUNCH_STATUS_H_
