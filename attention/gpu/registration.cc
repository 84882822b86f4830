#include "attention/gpu/registration.h"

#include <cstring>

#include "attention/gpu/op_kernels.h"
#include "platform/cuda/registration.h"
#include "platform/registry.h"
#include "platform/rocm/registration.h"

namespace dsa::attention::gpu {

absl::Status RegisterGpuAttentionKernels(platform::Registry& registry) {
  if (GpuAttentionKernelDescriptors().empty()) return absl::OkStatus();
  platform::RegistrationBatch batch;
  batch.plugin_name = kGpuAttentionPluginName;
  batch.kernels = GpuAttentionKernelDescriptors();
  return registry.Register(batch);
}

namespace {

// Static registrar. The kernels need their platform; static initialisers
// run in no defined order, so this registers the platform itself when its
// own registrar has not run yet. A failure shows up as NotFound at lookup.
[[maybe_unused]] const bool kRegistered = [] {
  const char* platform = GpuPlatformId();
  if (platform == nullptr) return true;
  platform::Registry& registry = platform::Registry::Global();
  if (!registry.HasPlatform(platform)) {
    (std::strcmp(platform, "cuda") == 0
         ? platform::RegisterCudaPlatform(registry)
         : platform::RegisterRocmPlatform(registry))
        .IgnoreError();
  }
  if (!registry.HasPlugin(kGpuAttentionPluginName)) {
    RegisterGpuAttentionKernels(registry).IgnoreError();
  }
  return true;
}();

}  // namespace
}  // namespace dsa::attention::gpu
