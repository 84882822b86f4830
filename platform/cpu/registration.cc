#include "platform/cpu/registration.h"

#include "platform/cpu/cpu_platform.h"

namespace dsa::platform {

absl::Status RegisterCpuPlatform(Registry& registry) {
  return registry.RegisterPlugin(CpuPlatformPluginApi());
}

namespace {

// Static registrar: checks before registering, so a host that also loads the
// plugin's shared object, or registers explicitly, sees no conflict here.
[[maybe_unused]] const bool kRegistered = [] {
  Registry& registry = Registry::Global();
  if (!registry.HasPlatform("cpu")) {
    RegisterCpuPlatform(registry).IgnoreError();
  }
  return true;
}();

}  // namespace
}  // namespace dsa::platform
