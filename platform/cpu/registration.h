// Registration of the cpu platform plugin into a registry.
//
// Linking //platform/cpu:registration registers the platform into
// Registry::Global() at start-up (a static registrar, alwayslink); hosts
// that manage their own registry call RegisterCpuPlatform explicitly.
#ifndef DSA_PLATFORM_CPU_REGISTRATION_H_
#define DSA_PLATFORM_CPU_REGISTRATION_H_

#include "absl/status/status.h"
#include "platform/registry.h"

namespace dsa::platform {

// AlreadyExists when the registry has the cpu platform already.
absl::Status RegisterCpuPlatform(Registry& registry);

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_CPU_REGISTRATION_H_
