#include "attention/cpu/kernel_table.h"

#include <vector>

#include "attention/cpu/dense_kernels.h"
#include "attention/cpu/kernels.h"
#include "attention/dense_ops.h"
#include "attention/kernel_abi.h"
#include "attention/kernel_descriptor.h"
#include "attention/ops.h"

namespace dsa::attention::cpu {

const std::vector<DsaKernelDescriptor>& CpuAttentionKernelDescriptors() {
  // Every op of kernel_api.h's list, each C++ kernel <Op>Cpu behind its C
  // entry point.
#define DSA_CPU_KERNEL_DESCRIPTOR(CxxName, LIST, PREFIX) \
  KernelDescriptorFor<CxxName>(kCpuPlatformId,           \
                               &CKernel<CxxName, &CxxName##Cpu>),
  static const auto* const descriptors = new std::vector<DsaKernelDescriptor>{
      DSA_ATTENTION_OPS(DSA_CPU_KERNEL_DESCRIPTOR)};
#undef DSA_CPU_KERNEL_DESCRIPTOR
  return *descriptors;
}

const std::vector<DsaKernelDescriptor>& CpuDenseKernelDescriptors() {
#define DSA_CPU_DENSE_KERNEL_DESCRIPTOR(CxxName, LIST, PREFIX) \
  KernelDescriptorFor<CxxName>(kCpuPlatformId,                 \
                               &CKernel<CxxName, &CxxName##Cpu>),
  static const auto* const descriptors = new std::vector<DsaKernelDescriptor>{
      DSA_DENSE_OPS(DSA_CPU_DENSE_KERNEL_DESCRIPTOR)};
#undef DSA_CPU_DENSE_KERNEL_DESCRIPTOR
  return *descriptors;
}

}  // namespace dsa::attention::cpu
