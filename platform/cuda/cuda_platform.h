// The CUDA platform plugin (NVIDIA GPUs through the CUDA driver API).
//
// The HIP kernels run here too, compiled by nvcc through
// attention/gpu/device/hip_compat.h. The driver (libcuda.so.1, or the file
// DSA_CUDA_DRIVER_LIBRARY names) is dlopen'ed and initialised once, at the
// first call that needs it, through the symbol list cuda_symbols.h; without
// it, or without a GPU, the probe reports zero devices and no error. A driver
// that lacks a required symbol is refused at load, and device calls then fail
// UNAVAILABLE naming it. Device calls run in device 0's primary context,
// retained once and made current only on threads where it is not already;
// device out-of-memory is RESOURCE_EXHAUSTED.
#ifndef DSA_PLATFORM_CUDA_CUDA_PLATFORM_H_
#define DSA_PLATFORM_CUDA_CUDA_PLATFORM_H_

#include "platform/plugin_api.h"

namespace dsa::platform {

const DsaPluginApi* CudaPlatformPluginApi();

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_CUDA_CUDA_PLATFORM_H_
