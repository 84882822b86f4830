// Typed kernel lookup and calls, on the host side of the plugin boundary.
//
// The registry stores entry points as `const void*` keyed by (op name, op ABI
// version, platform). GetKernel<Op> asks for Op's name and version and hands
// back a Kernel<Op>: a callable that converts the C++ arguments to the op's C
// struct (kernel_api.h), calls the plugin's C entry point and turns its code
// and message into an absl::Status. Callers never cast and never see the C
// types. Every call is a fault site (platform/fault_injection.h): a test's
// FaultInjector can make it fail as a failed launch would.
//
//   DSA_ASSIGN_OR_RETURN(Kernel<IndexerLogits> logits,
//                        GetKernel<IndexerLogits>(registry, "rocm"));
//   DSA_RETURN_IF_ERROR(logits(ctx, args));
#ifndef DSA_ATTENTION_KERNEL_LOOKUP_H_
#define DSA_ATTENTION_KERNEL_LOOKUP_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "attention/kernel_abi.h"
#include "attention/ops.h"
#include "platform/absl_status.h"
#include "platform/fault_injection.h"
#include "platform/registry.h"
#include "platform/status_macros.h"

namespace dsa::attention {

// Size of the message buffer a host hands a kernel.
inline constexpr size_t kKernelErrorSize = 1024;

template <class Op>
class Kernel {
 public:
  using CFn = typename Op::CFn;

  Kernel() = default;
  explicit Kernel(CFn fn) : fn_(fn) {}

  absl::Status operator()(const ExecutionContext& ctx,
                          const typename Op::Args& args) const {
    if (fn_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(Op::kName, ": no kernel was looked up"));
    }
    const DsaExecutionContext c_ctx = ExecutionContextToC(ctx);
    const typename Op::CArgs c_args = ToCArgs(args);
    char error[kKernelErrorSize];
    error[0] = '\0';
    const DsaStatusCode code =
        platform::FaultInjected(platform::FaultSite::kOpCall)
            ? platform::InjectedFaultError(platform::FaultSite::kOpCall, error,
                                           sizeof(error))
            : fn_(&c_ctx, &c_args, error, sizeof(error));
    if (code == DSA_STATUS_OK) return absl::OkStatus();
    error[sizeof(error) - 1] = '\0';
    return platform::StatusFromC(
        code, error[0] != '\0'
                  ? absl::string_view(error)
                  : absl::string_view("the kernel gave no message"));
  }

  CFn c_fn() const { return fn_; }
  explicit operator bool() const { return fn_ != nullptr; }

 private:
  CFn fn_ = nullptr;
};

// NotFound when no kernel of Op is registered for the platform;
// FailedPrecondition when one was registered with another ABI version.
template <class Op>
absl::StatusOr<Kernel<Op>> GetKernel(const platform::Registry& registry,
                                     absl::string_view platform_id) {
  DSA_ASSIGN_OR_RETURN(
      const void* fn,
      registry.FindKernel(Op::kName, Op::kAbiVersion, platform_id));
  return Kernel<Op>(reinterpret_cast<typename Op::CFn>(const_cast<void*>(fn)));
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_KERNEL_LOOKUP_H_
