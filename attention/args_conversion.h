// The conversions between an op's C++ Args (ops.h, dense_ops.h) and its C
// struct (kernel_api.h, dense_api.h), generated from the op's argument list:
// expanding DSA_DEFINE_ARGS_CONVERSIONS over a list of ops (DSA_ATTENTION_OPS,
// DSA_DENSE_OPS) defines ToCArgs and FromCArgs for each. FromCArgs reads at
// most the caller's struct_size, whole fields only; a field the caller's
// struct does not reach keeps its default. Include only from the .cc file
// that defines the conversions, inside namespace dsa::attention, after
// kernel_abi.h (TensorViewToC/FromC, LatentCacheFormatToC/FromC).
#ifndef DSA_ATTENTION_ARGS_CONVERSION_H_
#define DSA_ATTENTION_ARGS_CONVERSION_H_

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "attention/kernel_abi.h"
#include "platform/core_status.h"

namespace dsa::attention::internal {

// Whether a field of `size` bytes at `offset` lies within the caller's
// struct_size.
constexpr bool FieldWithin(size_t struct_size, size_t offset, size_t size) {
  return offset + size <= struct_size;
}

}  // namespace dsa::attention::internal

#define DSA_TO_C_TENSOR(name, direction) c.name = TensorViewToC(a.name);
#define DSA_TO_C_SCALAR(c_type, name, default_value) c.name = a.name;
#define DSA_TO_C_ENUM(cxx_enum, name, default_value) \
  c.name = static_cast<int32_t>(a.name);
#define DSA_TO_C_FORMAT(name) c.name = LatentCacheFormatToC(a.name);

// A field the caller's struct does not reach keeps its default.
#define DSA_FIELD_PRESENT(name)                                    \
  ::dsa::attention::internal::FieldWithin(size, offsetof(C, name), \
                                          sizeof(c.name))
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

#endif  // DSA_ATTENTION_ARGS_CONVERSION_H_
