// Built twice (attention/gpu/BUILD): with DSA_PLUGIN_FOR_CUDA for the CUDA
// plugin and DSA_PLUGIN_FOR_ROCM for the ROCm one, each linking the kernels
// only under its own backend, so neither shared object needs the other
// vendor's runtime.
#include "attention/gpu/platform_plugins.h"

#include <cstddef>
#include <cstring>

#include "platform/plugin_util.h"

#if defined(DSA_PLUGIN_FOR_CUDA)
#include "platform/cuda/cuda_platform.h"
#define DSA_PLUGIN_PLATFORM_ID "cuda"
#if defined(DSA_GPU_CUDA)
#define DSA_PLUGIN_HAS_KERNELS 1
#endif
#elif defined(DSA_PLUGIN_FOR_ROCM)
#include "platform/rocm/rocm_platform.h"
#define DSA_PLUGIN_PLATFORM_ID "rocm"
#if defined(DSA_GPU_ROCM)
#define DSA_PLUGIN_HAS_KERNELS 1
#endif
#else
#error \
    "build platform_plugins.cc with DSA_PLUGIN_FOR_CUDA or DSA_PLUGIN_FOR_ROCM"
#endif

#if defined(DSA_PLUGIN_HAS_KERNELS)
#include "attention/gpu/op_kernels.h"
#endif

namespace dsa::attention::gpu {
namespace {

const DsaPluginApi* PlatformPlugin() {
#if defined(DSA_PLUGIN_FOR_CUDA)
  return platform::CudaPlatformPluginApi();
#else
  return platform::RocmPlatformPluginApi();
#endif
}

// The platform plugin's initialize, then the kernels for this platform.
DsaStatusCode Initialize(const DsaHostApi* host, char* error,
                         size_t error_size) {
  const DsaStatusCode code =
      PlatformPlugin()->initialize(host, error, error_size);
  if (code != DSA_STATUS_OK) return code;
#if defined(DSA_PLUGIN_HAS_KERNELS)
  // The platform's initialize checked the host's version and
  // register_platform; register_kernel is checked here.
  if (host->struct_size < offsetof(DsaHostApi, register_kernel) +
                              sizeof(host->register_kernel) ||
      host->register_kernel == nullptr) {
    return platform::PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                                 "%s: the host API has no register_kernel",
                                 PlatformPlugin()->plugin_name);
  }
  for (const DsaKernelDescriptor& kernel : GpuAttentionKernelDescriptors()) {
    if (std::strcmp(kernel.platform_id, DSA_PLUGIN_PLATFORM_ID) != 0) continue;
    const DsaStatusCode c =
        host->register_kernel(host->context, &kernel, error, error_size);
    if (c != DSA_STATUS_OK) return c;
  }
#endif
  return DSA_STATUS_OK;
}

// The platform plugin's name and version: to a host this is that plugin,
// with kernels.
const DsaPluginApi* Api() {
  static const DsaPluginApi api = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR,
                                   DSA_PLUGIN_API_MINOR,
                                   PlatformPlugin()->plugin_name, &Initialize};
  return &api;
}

}  // namespace

#if defined(DSA_PLUGIN_FOR_CUDA)
const DsaPluginApi* CudaPlatformWithKernelsPluginApi() { return Api(); }
#else
const DsaPluginApi* RocmPlatformWithKernelsPluginApi() { return Api(); }
#endif

}  // namespace dsa::attention::gpu
