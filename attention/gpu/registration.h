// Registration of the GPU attention kernels (op_kernels.h) into a registry.
//
// Linking //attention/gpu:registration registers them into
// platform::Registry::Global() at start-up (a static registrar, alwayslink)
// for the platform the build targets (cuda or rocm); a build without a GPU
// backend registers nothing.
#ifndef DSA_ATTENTION_GPU_REGISTRATION_H_
#define DSA_ATTENTION_GPU_REGISTRATION_H_

#include "absl/status/status.h"
#include "platform/registry.h"

namespace dsa::attention::gpu {

inline constexpr char kGpuAttentionPluginName[] = "dsa_attention_gpu";

// Registers the GPU kernels for their platform, all or nothing: NotFound
// when the registry lacks that platform, AlreadyExists when any is there
// already; OK (and nothing registered) without a GPU backend.
absl::Status RegisterGpuAttentionKernels(platform::Registry& registry);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_REGISTRATION_H_
