// The CUDA platform plugin (NVIDIA GPUs through the CUDA driver API).
//
// The HIP kernels run here too, compiled by nvcc through
// platform/gpu/hip_compat.h. The driver (libcuda.so.1) is dlopen'ed lazily
// at the first device probe; without it, or without a GPU, the probe reports
// zero devices and no error.
#ifndef DSA_PLATFORM_CUDA_CUDA_PLATFORM_H_
#define DSA_PLATFORM_CUDA_CUDA_PLATFORM_H_

#include "platform/plugin_api.h"

namespace dsa::platform {

const DsaPluginApi* CudaPlatformPluginApi();

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_CUDA_CUDA_PLATFORM_H_
