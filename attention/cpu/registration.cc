#include "attention/cpu/registration.h"

#include "attention/cpu/kernel_table.h"
#include "attention/ops.h"
#include "platform/cpu/registration.h"
#include "platform/registry.h"

namespace dsa::attention::cpu {

absl::Status RegisterCpuAttentionKernels(platform::Registry& registry) {
  platform::RegistrationBatch batch;
  batch.plugin_name = kCpuAttentionPluginName;
  batch.kernels = CpuAttentionKernelDescriptors();
  batch.kernels.insert(batch.kernels.end(), CpuDenseKernelDescriptors().begin(),
                       CpuDenseKernelDescriptors().end());
  return registry.Register(batch);
}

namespace {

// Static registrar. It checks first, so a host that also loads the plugin
// shared object or registers explicitly sees no conflict here; a failure
// cannot be reported from a static initialiser and shows up as NotFound at
// lookup instead. The kernels need their platform: static initialisers run
// in no defined order, so this one registers the CPU platform itself when
// the platform's own registrar has not run yet.
[[maybe_unused]] const bool kRegistered = [] {
  platform::Registry& registry = platform::Registry::Global();
  if (!registry.HasPlatform(kCpuPlatformId)) {
    platform::RegisterCpuPlatform(registry).IgnoreError();
  }
  if (registry
          .FindKernel(IndexerKWrite::kName, IndexerKWrite::kAbiVersion,
                      kCpuPlatformId)
          .status()
          .code() == absl::StatusCode::kNotFound) {
    RegisterCpuAttentionKernels(registry).IgnoreError();
  }
  return true;
}();

}  // namespace
}  // namespace dsa::attention::cpu
