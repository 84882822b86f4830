// Registration of the CPU attention kernels into a registry.
//
// Linking //attention/cpu:registration registers them into
// platform::Registry::Global() at start-up (a static registrar, alwayslink);
// hosts that manage their own registry call RegisterCpuAttentionKernels.
// The plugin shared object //attention/cpu:libdsa_attention_cpu.so registers
// the same kernels through the host API instead.
#ifndef DSA_ATTENTION_CPU_REGISTRATION_H_
#define DSA_ATTENTION_CPU_REGISTRATION_H_

#include "absl/status/status.h"
#include "platform/registry.h"

namespace dsa::attention::cpu {

inline constexpr char kCpuAttentionPluginName[] = "dsa_attention_cpu";

// Registers all seven kernels for platform "cpu", all or nothing:
// AlreadyExists when any is registered already, NotFound when the registry
// has no "cpu" platform.
absl::Status RegisterCpuAttentionKernels(platform::Registry& registry);

}  // namespace dsa::attention::cpu

#endif  // DSA_ATTENTION_CPU_REGISTRATION_H_
