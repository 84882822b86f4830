#include "attention/kernel_abi.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "attention/args_conversion.h"

namespace dsa::attention {
namespace {

bool KnownDType(int32_t d) {
  return d >= static_cast<int32_t>(DType::kFloat32) &&
         d <= static_cast<int32_t>(DType::kInt64);
}

}  // namespace

DsaTensorView TensorViewToC(const TensorView& v) {
  DsaTensorView c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.data = v.data;
  c.dtype = static_cast<int32_t>(v.dtype);
  c.rank = v.rank;
  for (int i = 0; i < kMaxTensorRank; ++i) {
    c.shape[i] = v.shape[i];
    c.strides[i] = v.strides[i];
  }
  return c;
}

DsaLatentCacheFormat LatentCacheFormatToC(const LatentCacheFormat& f) {
  DsaLatentCacheFormat c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.dtype = static_cast<int32_t>(f.dtype);
  c.kv_lora_rank = f.kv_lora_rank;
  c.rope_dim = f.rope_dim;
  return c;
}

DsaExecutionContext ExecutionContextToC(const ExecutionContext& ctx) {
  DsaExecutionContext c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.stream = ctx.stream;
  c.num_threads = ctx.num_threads;
  return c;
}

Status TensorViewFromC(const char* op, const char* arg, const DsaTensorView& c,
                       TensorView* out) {
  if (c.struct_size != sizeof(DsaTensorView)) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, " is a tensor view of struct_size ",
               c.struct_size, ", expected ", sizeof(DsaTensorView),
               " (views embedded in op arguments have one layout per op ABI "
               "version)"));
  }
  if (c.rank < 0 || c.rank > kMaxTensorRank) {
    return InvalidArgumentError(StrCat(op, ": ", arg, " has rank ", c.rank,
                                       ", expected 0 to ", kMaxTensorRank));
  }
  if (!KnownDType(c.dtype)) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, " has unknown dtype code ", c.dtype));
  }
  TensorView v;
  v.data = c.data;
  v.dtype = static_cast<DType>(c.dtype);
  v.rank = c.rank;
  for (int i = 0; i < c.rank; ++i) {
    v.shape[i] = c.shape[i];
    v.strides[i] = c.strides[i];
  }
  *out = v;
  return OkStatus();
}

Status LatentCacheFormatFromC(const char* op, const char* arg,
                              const DsaLatentCacheFormat& c,
                              LatentCacheFormat* out) {
  if (c.struct_size != sizeof(DsaLatentCacheFormat)) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, " is a cache format of struct_size ",
               c.struct_size, ", expected ", sizeof(DsaLatentCacheFormat)));
  }
  if (!KnownDType(c.dtype)) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, ".dtype has unknown dtype code ", c.dtype));
  }
  out->dtype = static_cast<DType>(c.dtype);
  out->kv_lora_rank = c.kv_lora_rank;
  out->rope_dim = c.rope_dim;
  return OkStatus();
}

Status ExecutionContextFromC(const char* op, const DsaExecutionContext* ctx,
                             ExecutionContext* out) {
  *out = ExecutionContext();
  if (ctx == nullptr) return OkStatus();
  const size_t size = ctx->struct_size;
  if (size < sizeof(size_t)) {
    return InvalidArgumentError(StrCat(
        op, ": execution context has struct_size ", size, ", too small"));
  }
  DsaExecutionContext c;
  std::memset(&c, 0, sizeof(c));
  std::memcpy(&c, ctx, std::min(size, sizeof(c)));
  if (internal::FieldWithin(size, offsetof(DsaExecutionContext, stream),
                            sizeof(c.stream))) {
    out->stream = c.stream;
  }
  if (internal::FieldWithin(size, offsetof(DsaExecutionContext, num_threads),
                            sizeof(c.num_threads))) {
    out->num_threads = c.num_threads;
  }
  return OkStatus();
}

// The conversions of each op's arguments, generated from its list.
DSA_ATTENTION_OPS(DSA_DEFINE_ARGS_CONVERSIONS)

}  // namespace dsa::attention
