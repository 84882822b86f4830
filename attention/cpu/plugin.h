// The CPU attention kernels as a plugin (plugin_api.h): its initialize
// registers every kernel through the host's register_kernel, so the shared
// object //attention/cpu:libdsa_attention_cpu.so links no registry of its
// own. The kernels are for platform "cpu", which the host's registry always
// has.
#ifndef DSA_ATTENTION_CPU_PLUGIN_H_
#define DSA_ATTENTION_CPU_PLUGIN_H_

#include "platform/plugin_api.h"

namespace dsa::attention::cpu {

const DsaPluginApi* CpuAttentionPluginApi();

}  // namespace dsa::attention::cpu

#endif  // DSA_ATTENTION_CPU_PLUGIN_H_
