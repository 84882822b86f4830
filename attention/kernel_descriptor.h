// Building the C ABI's kernel descriptors from the typed op structs.
//
// A kernel library (static registration or a plugin shared object) lists its
// kernels as DsaKernelDescriptor values; this keeps the op name, ABI version
// and C entry point type (kernel_api.h) together so a descriptor cannot pair
// one op's name with another op's entry point. A C++ kernel becomes an entry
// point through CKernel (kernel_abi.h):
//   KernelDescriptorFor<SparseMla>("cpu", &CKernel<SparseMla, &SparseMlaCpu>)
//   Depends on nothing but the C ABI, so a plugin
// shared object can use it without linking a registry.
#ifndef DSA_ATTENTION_KERNEL_DESCRIPTOR_H_
#define DSA_ATTENTION_KERNEL_DESCRIPTOR_H_

#include "attention/ops.h"
#include "platform/plugin_api.h"

namespace dsa::attention {

// `platform_id` must outlive the registration (a string literal).
template <class Op>
DsaKernelDescriptor KernelDescriptorFor(const char* platform_id,
                                        typename Op::CFn fn) {
  DsaKernelDescriptor d{};
  d.struct_size = sizeof(DsaKernelDescriptor);
  d.op_name = Op::kName;
  d.op_abi_version = Op::kAbiVersion;
  d.platform_id = platform_id;
  // Function and object pointers are the same size on every platform we
  // build for (POSIX requires it for dlsym); the registry stores void*.
  d.fn = reinterpret_cast<const void*>(fn);
  return d;
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_KERNEL_DESCRIPTOR_H_
