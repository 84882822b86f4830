// The ROCm platform plugin (AMD Instinct GPUs through the HIP runtime).
//
// Static capabilities per architecture are known without a device, so plans
// for gfx942 (MI300X) or gfx950 (MI355X) can be made on any machine. The HIP
// runtime (libamdhip64, or the file DSA_HIP_RUNTIME_LIBRARY names) is
// dlopen'ed once, at the first call that needs it, through the symbol list
// hip_symbols.h; with no runtime or no AMD GPU the probe reports zero devices
// and no error. A runtime that lacks a required symbol is refused at load,
// and device calls then fail UNAVAILABLE naming it. Device out-of-memory is
// RESOURCE_EXHAUSTED. DSA_ROCM_ARCH overrides the device's architecture.
//
// ROCm's sparse MLA rejects decode context parallelism, which the capability
// record says (sparse_mla_decode_context_parallel = 0).
#ifndef DSA_PLATFORM_ROCM_ROCM_PLATFORM_H_
#define DSA_PLATFORM_ROCM_ROCM_PLATFORM_H_

#include <string>

#include "platform/plugin_api.h"

namespace dsa::platform {

const DsaPluginApi* RocmPlatformPluginApi();

// "gfx942" from a KFD gfx_target_version such as 90402 (major, minor and
// stepping, the last two in hex: 90010 -> gfx90a). Empty for 0 (a CPU node).
std::string GfxNameFromTargetVersion(unsigned version);

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_ROCM_ROCM_PLATFORM_H_
