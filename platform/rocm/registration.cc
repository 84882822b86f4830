#include "platform/rocm/registration.h"

#include "platform/rocm/rocm_platform.h"

namespace dsa::platform {

absl::Status RegisterRocmPlatform(Registry& registry) {
  return registry.RegisterPlugin(RocmPlatformPluginApi());
}

namespace {

// Static registrar: checks before registering, so a host that also loads the
// plugin's shared object, or registers explicitly, sees no conflict here.
[[maybe_unused]] const bool kRegistered = [] {
  Registry& registry = Registry::Global();
  if (!registry.HasPlatform("rocm")) {
    RegisterRocmPlatform(registry).IgnoreError();
  }
  return true;
}();

}  // namespace
}  // namespace dsa::platform
