// Registration of the rocm platform plugin into a registry.
//
// Linking //platform/rocm:registration registers the platform into
// Registry::Global() at start-up (a static registrar, alwayslink); hosts
// that manage their own registry call RegisterRocmPlatform explicitly.
#ifndef DSA_PLATFORM_ROCM_REGISTRATION_H_
#define DSA_PLATFORM_ROCM_REGISTRATION_H_

#include "absl/status/status.h"
#include "platform/registry.h"

namespace dsa::platform {

// AlreadyExists when the registry has the rocm platform already.
absl::Status RegisterRocmPlatform(Registry& registry);

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_ROCM_REGISTRATION_H_
