// The CPU platform's attention kernels as C ABI descriptors: the one list
// that both the static registration and the plugin shared object register,
// so the two can never disagree.
#ifndef DSA_ATTENTION_CPU_KERNEL_TABLE_H_
#define DSA_ATTENTION_CPU_KERNEL_TABLE_H_

#include <vector>

#include "platform/plugin_api.h"

namespace dsa::attention::cpu {

inline constexpr char kCpuPlatformId[] = "cpu";

// One descriptor per op of attention/ops.h, for platform "cpu".
const std::vector<DsaKernelDescriptor>& CpuAttentionKernelDescriptors();

// One descriptor per dense op of attention/dense_ops.h, for platform "cpu";
// registered with the attention kernels (static registration and plugin).
const std::vector<DsaKernelDescriptor>& CpuDenseKernelDescriptors();

}  // namespace dsa::attention::cpu

#endif  // DSA_ATTENTION_CPU_KERNEL_TABLE_H_
