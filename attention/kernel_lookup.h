// Typed kernel lookup: the registry stores entry points as `const void*`
// keyed by (op name, op ABI version, platform); GetKernel<Op> asks for Op's
// name and version and hands back Op::Fn, so callers never cast.
//
//   DSA_ASSIGN_OR_RETURN(IndexerLogits::Fn logits,
//                        GetKernel<IndexerLogits>(registry, "rocm"));
//   DSA_RETURN_IF_ERROR(logits(ctx, args));
#ifndef DSA_ATTENTION_KERNEL_LOOKUP_H_
#define DSA_ATTENTION_KERNEL_LOOKUP_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attention/ops.h"
#include "platform/registry.h"
#include "platform/status_macros.h"

namespace dsa::attention {

// NotFound when no kernel of Op is registered for the platform;
// FailedPrecondition when one was registered with another ABI version.
template <class Op>
absl::StatusOr<typename Op::Fn> GetKernel(const platform::Registry& registry,
                                          absl::string_view platform_id) {
  DSA_ASSIGN_OR_RETURN(
      const void* fn,
      registry.FindKernel(Op::kName, Op::kAbiVersion, platform_id));
  return reinterpret_cast<typename Op::Fn>(const_cast<void*>(fn));
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_KERNEL_LOOKUP_H_
