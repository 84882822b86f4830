// The CUDA and ROCm platform plugins as their shared objects ship them
// (//platform/cuda:libdsa_cuda_platform.so, //platform/rocm:
// libdsa_rocm_platform.so): the platform (capabilities, device runtime)
// together with the GPU attention kernels built for it (op_kernels.h), so a
// host that dlopens the plugin (testing/host, the PyTorch binding
// engines/torch) gets the kernels through the C boundary.
//
// Initialize registers the platform first, through the platform plugin's own
// initialize, then every kernel of GpuAttentionKernelDescriptors() whose
// platform is this one; the host applies the whole batch or nothing. A build
// without that GPU backend (plain, or --config=rocm for the CUDA plugin)
// has no kernels for it and registers the platform alone, as before.
//
// Statically linked hosts use //platform/<id>:registration and
// //attention/gpu:registration instead; these tables are for the shared
// objects only.
#ifndef DSA_ATTENTION_GPU_PLATFORM_PLUGINS_H_
#define DSA_ATTENTION_GPU_PLATFORM_PLUGINS_H_

#include "platform/plugin_api.h"

namespace dsa::attention::gpu {

const DsaPluginApi* CudaPlatformWithKernelsPluginApi();
const DsaPluginApi* RocmPlatformWithKernelsPluginApi();

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_PLATFORM_PLUGINS_H_
