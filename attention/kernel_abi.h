// Conversions between an op's C++ arguments (ops.h) and its C ABI
// (kernel_api.h), for both sides of a plugin boundary.
//
//  - Hosts convert Args to CArgs (ToCArgs) on every call; see Kernel<Op> in
//    kernel_lookup.h.
//  - Plugins expose a C++ kernel `Status Impl(const ExecutionContext&,
//    const Op::Args&)` as the op's C entry point with CKernel<Op, Impl>. It
//    reads at most args->struct_size bytes (an older host's struct is
//    shorter; what it lacks reads as the defaults of ops.h), refuses views
//    and formats of another layout, validates the arguments, converts the
//    status to a code and a message, and turns an exception escaping the
//    kernel into a status (std::bad_alloc is RESOURCE_EXHAUSTED) instead of
//    letting it unwind through C.
// Free of Abseil: this runs inside plugin shared objects.
#ifndef DSA_ATTENTION_KERNEL_ABI_H_
#define DSA_ATTENTION_KERNEL_ABI_H_

#include <cstddef>
#include <exception>
#include <new>

#include "attention/kernel_api.h"
#include "attention/ops.h"
#include "attention/tensor.h"
#include "platform/core_status.h"

namespace dsa::attention {

DsaTensorView TensorViewToC(const TensorView& view);
DsaLatentCacheFormat LatentCacheFormatToC(const LatentCacheFormat& format);
DsaExecutionContext ExecutionContextToC(const ExecutionContext& ctx);

// InvalidArgument naming `op` and `arg` for a view of another ABI
// (struct_size), a rank above 4 or an unknown dtype.
Status TensorViewFromC(const char* op, const char* arg, const DsaTensorView& c,
                       TensorView* out);
Status LatentCacheFormatFromC(const char* op, const char* arg,
                              const DsaLatentCacheFormat& c,
                              LatentCacheFormat* out);
// `ctx` may be NULL (defaults); fields past its struct_size read as defaults.
Status ExecutionContextFromC(const char* op, const DsaExecutionContext* ctx,
                             ExecutionContext* out);

// Per op: Op::CArgs ToCArgs(const Op::Args&) and
// Status FromCArgs(const Op::CArgs*, Op::Args*) (`raw` may be shorter than
// CArgs; only raw->struct_size bytes are read).
#define DSA_DECLARE_ARGS_CONVERSIONS(CxxName, LIST, PREFIX) \
  CxxName::CArgs ToCArgs(const CxxName::Args& args);        \
  Status FromCArgs(const CxxName::CArgs* raw, CxxName::Args* out);
DSA_ATTENTION_OPS(DSA_DECLARE_ARGS_CONVERSIONS)
#undef DSA_DECLARE_ARGS_CONVERSIONS

template <class Op>
using KernelImpl = Status (*)(const ExecutionContext&,
                              const typename Op::Args&);

// The C entry point of a C++ kernel.
template <class Op, KernelImpl<Op> Impl>
DsaStatusCode CKernel(const DsaExecutionContext* ctx,
                      const typename Op::CArgs* args, char* error,
                      size_t error_size) noexcept {
  Status status;
  try {
    ExecutionContext exec;
    typename Op::Args a;
    status = ExecutionContextFromC(Op::kName, ctx, &exec);
    if (status.ok()) status = FromCArgs(args, &a);
    if (status.ok()) status = Impl(exec, a);
  } catch (const std::bad_alloc&) {
    status = ResourceExhaustedError(StrCat(Op::kName, ": out of host memory"));
  } catch (const std::exception& e) {
    status = InternalError(StrCat(Op::kName, ": ", e.what()));
  } catch (...) {
    status = InternalError(StrCat(Op::kName, ": unknown exception"));
  }
  return status.ToC(error, error_size);
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_KERNEL_ABI_H_
