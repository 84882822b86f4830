#include "platform/cuda/registration.h"

#include "platform/cuda/cuda_platform.h"

namespace dsa::platform {

absl::Status RegisterCudaPlatform(Registry& registry) {
  return registry.RegisterPlugin(CudaPlatformPluginApi());
}

namespace {

// Static registrar: checks before registering, so a host that also loads the
// plugin's shared object, or registers explicitly, sees no conflict here.
[[maybe_unused]] const bool kRegistered = [] {
  Registry& registry = Registry::Global();
  if (!registry.HasPlatform("cuda")) {
    RegisterCudaPlatform(registry).IgnoreError();
  }
  return true;
}();

}  // namespace
}  // namespace dsa::platform
