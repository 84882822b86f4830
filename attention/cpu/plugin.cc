#include "attention/cpu/plugin.h"

#include <cstddef>

#include "attention/cpu/kernel_table.h"
#include "platform/plugin_api.h"
#include "platform/plugin_util.h"

namespace dsa::attention::cpu {
namespace {

DsaStatusCode Initialize(const DsaHostApi* host, char* error,
                         size_t error_size) {
  using platform::PluginError;
  if (host == nullptr ||
      host->struct_size < offsetof(DsaHostApi, register_kernel) +
                              sizeof(host->register_kernel) ||
      host->register_kernel == nullptr) {
    return PluginError(
        DSA_STATUS_INVALID_ARGUMENT, error, error_size,
        "dsa_attention_cpu: the host API has no register_kernel");
  }
  if (host->major_version != DSA_PLUGIN_API_MAJOR) {
    return PluginError(DSA_STATUS_FAILED_PRECONDITION, error, error_size,
                       "dsa_attention_cpu: host API major version %u, plugin "
                       "built for %d",
                       host->major_version, DSA_PLUGIN_API_MAJOR);
  }
  for (const auto* table :
       {&CpuAttentionKernelDescriptors(), &CpuDenseKernelDescriptors()}) {
    for (const DsaKernelDescriptor& kernel : *table) {
      const DsaStatusCode code =
          host->register_kernel(host->context, &kernel, error, error_size);
      if (code != DSA_STATUS_OK) return code;
    }
  }
  return DSA_STATUS_OK;
}

}  // namespace

const DsaPluginApi* CpuAttentionPluginApi() {
  static const DsaPluginApi api = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR,
                                   DSA_PLUGIN_API_MINOR, "dsa_attention_cpu",
                                   &Initialize};
  return &api;
}

}  // namespace dsa::attention::cpu
