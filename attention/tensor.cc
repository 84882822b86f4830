#include "attention/tensor.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dsa::attention {

int64_t TensorView::num_elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank && i < kMaxTensorRank; ++i) n *= shape[i];
  return n;
}

TensorView MakeTensorView(const void* data, DType dtype,
                          std::initializer_list<int64_t> shape) {
  TensorView t;
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(shape.size());
  int i = 0;
  for (int64_t d : shape) {
    if (i < kMaxTensorRank) t.shape[i] = d;
    ++i;
  }
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (d < kMaxTensorRank) {
      t.strides[d] = stride;
      stride *= t.shape[d];
    }
  }
  return t;
}

std::string DescribeTensor(const TensorView& t) {
  std::string dims;
  for (int i = 0; i < t.rank && i < kMaxTensorRank; ++i) {
    absl::StrAppend(&dims, i == 0 ? "" : ", ", t.shape[i]);
  }
  return absl::StrCat("[", dims, "] ", DTypeName(t.dtype));
}

absl::Status CheckTensor(absl::string_view op, absl::string_view arg,
                         const TensorView& t, int rank,
                         absl::string_view layout,
                         std::initializer_list<DType> dtypes,
                         bool contiguous_last_dim) {
  if (t.rank != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", arg, " has ", t.rank, " dims, expected ", rank, ": ",
        layout));
  }
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok = dtype_ok || d == t.dtype;
  if (!dtype_ok) {
    std::string names;
    for (DType d : dtypes) {
      absl::StrAppend(&names, names.empty() ? "" : " or ", DTypeName(d));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", arg, " has dtype ", DTypeName(t.dtype), ", expected ",
        names));
  }
  for (int i = 0; i < rank; ++i) {
    if (t.shape[i] < 0 || t.shape[i] >= kMaxTensorDim) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", arg, " dim ", i, " is ", t.shape[i], ", outside [0, ",
          kMaxTensorDim, ")"));
    }
    if (t.strides[i] < 0 || t.strides[i] >= kMaxTensorDim) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", arg, " stride ", i, " is ", t.strides[i],
          ", outside [0, ", kMaxTensorDim, ")"));
    }
  }
  if (t.data == nullptr && t.num_elements() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " has no data"));
  }
  if (contiguous_last_dim && rank > 0 && t.shape[rank - 1] > 1 &&
      t.strides[rank - 1] != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", arg, " has stride ", t.strides[rank - 1],
        " in its last dim, expected 1 (contiguous vectors)"));
  }
  return absl::OkStatus();
}

absl::Status CheckDim(absl::string_view op, absl::string_view arg,
                      const TensorView& t, int dim,
                      absl::string_view dim_name, int64_t expected,
                      absl::string_view why) {
  if (dim < 0 || dim >= t.rank || t.shape[dim] != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": ", arg, " dim ", dim, " (", dim_name, ") is ",
        dim >= 0 && dim < t.rank ? t.shape[dim] : -1, ", expected ", expected,
        " (", why, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckContiguous(absl::string_view op, absl::string_view arg,
                             const TensorView& t) {
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.shape[d] > 1 && t.strides[d] != stride) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", arg, " ", DescribeTensor(t),
          " must be contiguous (row-major), but stride ", d, " is ",
          t.strides[d], ", expected ", stride));
    }
    stride *= t.shape[d];
  }
  return absl::OkStatus();
}

}  // namespace dsa::attention
