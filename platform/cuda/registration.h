// Registration of the cuda platform plugin into a registry.
//
// Linking //platform/cuda:registration registers the platform into
// Registry::Global() at start-up (a static registrar, alwayslink); hosts
// that manage their own registry call RegisterCudaPlatform explicitly.
#ifndef DSA_PLATFORM_CUDA_REGISTRATION_H_
#define DSA_PLATFORM_CUDA_REGISTRATION_H_

#include "absl/status/status.h"
#include "platform/registry.h"

namespace dsa::platform {

// AlreadyExists when the registry has the cuda platform already.
absl::Status RegisterCudaPlatform(Registry& registry);

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_CUDA_REGISTRATION_H_
