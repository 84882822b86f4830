// The CPU platform plugin: the reference platform, always present.
//
// It is not CUDA-alike, so the model never skips indexer scoring on it; its
// kernels (attention/cpu) are the float references the GPU kernels are
// checked against. "Device" memory is host memory.
#ifndef DSA_PLATFORM_CPU_CPU_PLATFORM_H_
#define DSA_PLATFORM_CPU_CPU_PLATFORM_H_

#include "platform/plugin_api.h"

namespace dsa::platform {

// The plugin's API table (the same one its shared object exports).
const DsaPluginApi* CpuPlatformPluginApi();

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_CPU_CPU_PLATFORM_H_
