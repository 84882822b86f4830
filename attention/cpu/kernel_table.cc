#include "attention/cpu/kernel_table.h"

#include <vector>

#include "attention/cpu/kernels.h"
#include "attention/kernel_descriptor.h"
#include "attention/ops.h"

namespace dsa::attention::cpu {

const std::vector<DsaKernelDescriptor>& CpuAttentionKernelDescriptors() {
  static const auto* const descriptors = new std::vector<DsaKernelDescriptor>{
      KernelDescriptorFor<IndexerKWrite>(kCpuPlatformId, &IndexerKWriteCpu),
      KernelDescriptorFor<IndexerQ>(kCpuPlatformId, &IndexerQCpu),
      KernelDescriptorFor<IndexerLogits>(kCpuPlatformId, &IndexerLogitsCpu),
      KernelDescriptorFor<IndexerTopK>(kCpuPlatformId, &IndexerTopKCpu),
      KernelDescriptorFor<MlaCacheWrite>(kCpuPlatformId, &MlaCacheWriteCpu),
      KernelDescriptorFor<SparseMla>(kCpuPlatformId, &SparseMlaCpu),
      KernelDescriptorFor<DenseMhaPrefill>(kCpuPlatformId,
                                           &DenseMhaPrefillCpu),
  };
  return *descriptors;
}

}  // namespace dsa::attention::cpu
