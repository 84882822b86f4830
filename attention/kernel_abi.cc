#include "attention/kernel_abi.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace dsa::attention {
namespace {

// Whether `field` of size `size` at `offset` lies within the caller's
// struct_size.
constexpr bool Within(size_t struct_size, size_t offset, size_t size) {
  return offset + size <= struct_size;
}

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
  if (Within(size, offsetof(DsaExecutionContext, stream), sizeof(c.stream))) {
    out->stream = c.stream;
  }
  if (Within(size, offsetof(DsaExecutionContext, num_threads),
             sizeof(c.num_threads))) {
    out->num_threads = c.num_threads;
  }
  return OkStatus();
}

// The conversions of each op's arguments, generated from its list.
#define DSA_TO_C_TENSOR(name, direction) c.name = TensorViewToC(a.name);
#define DSA_TO_C_SCALAR(c_type, name, default_value) c.name = a.name;
#define DSA_TO_C_ENUM(cxx_enum, name, default_value) \
  c.name = static_cast<int32_t>(a.name);
#define DSA_TO_C_FORMAT(name) c.name = LatentCacheFormatToC(a.name);

// A field the caller's struct does not reach keeps its default.
#define DSA_FIELD_PRESENT(name) Within(size, offsetof(C, name), sizeof(c.name))
#define DSA_FROM_C_TENSOR(name, direction)                             \
  if (DSA_FIELD_PRESENT(name)) {                                       \
    DSA_RETURN_IF_ERROR(TensorViewFromC(kOp, #name, c.name, &a.name)); \
  }
#define DSA_FROM_C_SCALAR(c_type, name, default_value) \
  if (DSA_FIELD_PRESENT(name)) a.name = c.name;
#define DSA_FROM_C_ENUM(cxx_enum, name, default_value) \
  if (DSA_FIELD_PRESENT(name)) a.name = static_cast<cxx_enum>(c.name);
#define DSA_FROM_C_FORMAT(name)                                               \
  if (DSA_FIELD_PRESENT(name)) {                                              \
    DSA_RETURN_IF_ERROR(LatentCacheFormatFromC(kOp, #name, c.name, &a.name)); \
  }

#define DSA_DEFINE_ARGS_CONVERSIONS(CxxName, LIST, PREFIX)                    \
  CxxName::CArgs ToCArgs(const CxxName::Args& a) {                            \
    CxxName::CArgs c;                                                         \
    std::memset(&c, 0, sizeof(c));                                            \
    c.struct_size = sizeof(c);                                                \
    LIST(DSA_TO_C_TENSOR, DSA_TO_C_SCALAR, DSA_TO_C_ENUM, DSA_TO_C_FORMAT)    \
    return c;                                                                 \
  }                                                                           \
  Status FromCArgs(const CxxName::CArgs* raw, CxxName::Args* out) {           \
    using C = CxxName::CArgs;                                                 \
    constexpr const char* kOp = CxxName::kName;                               \
    if (raw == nullptr) {                                                     \
      return InvalidArgumentError(StrCat(kOp, ": arguments are NULL"));       \
    }                                                                         \
    const size_t size = raw->struct_size;                                     \
    if (size < sizeof(size_t)) {                                              \
      return InvalidArgumentError(                                            \
          StrCat(kOp, ": arguments have struct_size ", size, ", too small")); \
    }                                                                         \
    C c;                                                                      \
    std::memset(&c, 0, sizeof(c));                                            \
    std::memcpy(&c, raw, std::min(size, sizeof(c)));                          \
    CxxName::Args a;                                                          \
    LIST(DSA_FROM_C_TENSOR, DSA_FROM_C_SCALAR, DSA_FROM_C_ENUM,               \
         DSA_FROM_C_FORMAT)                                                   \
    *out = a;                                                                 \
    return OkStatus();                                                        \
  }
DSA_ATTENTION_OPS(DSA_DEFINE_ARGS_CONVERSIONS)

}  // namespace dsa::attention
