#include "attention/tensor.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "platform/checked_size.h"

namespace dsa::attention {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

bool MetadataInRange(const TensorView& t) {
  if (t.rank < 0 || t.rank > kMaxTensorRank) return false;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 0 || t.shape[i] >= kMaxTensorDim) return false;
    if (t.strides[i] < 0 || t.strides[i] >= kMaxTensorDim) return false;
  }
  return true;
}

}  // namespace

int64_t TensorView::num_elements() const {
  CheckedSize n = 1;
  for (int i = 0; i < rank && i < kMaxTensorRank; ++i) {
    if (shape[i] <= 0) return 0;
    n *= shape[i];
  }
  return n.value_or(kInt64Max);
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
  // Saturates: a shape too large for int64 strides gets strides that
  // CheckTensor rejects, never a wrapped-around small one.
  CheckedSize stride = 1;
  for (int d = std::min(t.rank, kMaxTensorRank) - 1; d >= 0; --d) {
    t.strides[d] = stride.value_or(kInt64Max);
    stride *= t.shape[d];
  }
  return t;
}

std::string DescribeTensor(const TensorView& t) {
  std::string dims;
  for (int i = 0; i < t.rank && i < kMaxTensorRank; ++i) {
    dims += StrCat(i == 0 ? "" : ", ", t.shape[i]);
  }
  return StrCat("[", dims, "] ", DTypeName(t.dtype));
}

int64_t TensorByteExtent(const TensorView& t) {
  if (!MetadataInRange(t)) return -1;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] == 0) return 0;
  }
  CheckedSize last = 0;
  for (int i = 0; i < t.rank; ++i) {
    last += CheckedSize(t.shape[i] - 1) * t.strides[i];
  }
  return ((last + 1) * DTypeSize(t.dtype)).value();  // -1 past int64
}

Status CheckTensor(std::string_view op, std::string_view arg,
                   const TensorView& t, int rank, std::string_view layout,
                   std::initializer_list<DType> dtypes,
                   bool contiguous_last_dim) {
  if (t.rank != rank) {
    return InvalidArgumentError(StrCat(op, ": ", arg, " has ", t.rank,
                                       " dims, expected ", rank, ": ", layout));
  }
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok = dtype_ok || d == t.dtype;
  if (!dtype_ok) {
    std::string names;
    for (DType d : dtypes) {
      names += StrCat(names.empty() ? "" : " or ", DTypeName(d));
    }
    return InvalidArgumentError(StrCat(op, ": ", arg, " has dtype ",
                                       DTypeName(t.dtype), ", expected ",
                                       names));
  }
  for (int i = 0; i < rank; ++i) {
    if (t.shape[i] < 0 || t.shape[i] >= kMaxTensorDim) {
      return InvalidArgumentError(StrCat(op, ": ", arg, " dim ", i, " is ",
                                         t.shape[i], ", outside [0, ",
                                         kMaxTensorDim, ")"));
    }
    if (t.strides[i] < 0 || t.strides[i] >= kMaxTensorDim) {
      return InvalidArgumentError(StrCat(op, ": ", arg, " stride ", i, " is ",
                                         t.strides[i], ", outside [0, ",
                                         kMaxTensorDim, ")"));
    }
  }
  // Each dim is below 2^31, but their product and the largest offset are
  // not bounded by that: [2^30, 2^30, 16] has 2^64 elements.
  CheckedSize elements = 1;
  for (int i = 0; i < rank; ++i) elements *= t.shape[i];
  if (!elements.ok()) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, " ", DescribeTensor(t),
               " has more elements than an int64 can count"));
  }
  if (TensorByteExtent(t) < 0) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, " ", DescribeTensor(t),
               " spans more bytes than an int64 can address"));
  }
  if (t.data == nullptr && elements.value() != 0) {
    return InvalidArgumentError(StrCat(op, ": ", arg, " has no data"));
  }
  if (contiguous_last_dim && rank > 0 && t.shape[rank - 1] > 1 &&
      t.strides[rank - 1] != 1) {
    return InvalidArgumentError(StrCat(op, ": ", arg, " has stride ",
                                       t.strides[rank - 1],
                                       " in its last dim, expected 1 "
                                       "(contiguous vectors)"));
  }
  return OkStatus();
}

Status CheckDim(std::string_view op, std::string_view arg, const TensorView& t,
                int dim, std::string_view dim_name, int64_t expected,
                std::string_view why) {
  if (dim < 0 || dim >= t.rank || t.shape[dim] != expected) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, " dim ", dim, " (", dim_name, ") is ",
               dim >= 0 && dim < t.rank ? t.shape[dim] : -1, ", expected ",
               expected, " (", why, ")"));
  }
  return OkStatus();
}

Status CheckContiguous(std::string_view op, std::string_view arg,
                       const TensorView& t) {
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.shape[d] > 1 && t.strides[d] != stride) {
      return InvalidArgumentError(
          StrCat(op, ": ", arg, " ", DescribeTensor(t),
                 " must be contiguous (row-major), but stride ", d, " is ",
                 t.strides[d], ", expected ", stride));
    }
    stride *= t.shape[d];
  }
  return OkStatus();
}

namespace {

// Whether distinct indices of `t` always address distinct elements: with the
// dims longer than 1 sorted by stride, each stride must exceed the largest
// offset the smaller-stride dims reach.
Status CheckInjective(std::string_view op, std::string_view arg,
                      const TensorView& t) {
  int dims[kMaxTensorRank];
  int n = 0;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] == 0) return OkStatus();  // nothing is written
    if (t.shape[i] > 1) dims[n++] = i;
  }
  std::sort(dims, dims + n,
            [&](int a, int b) { return t.strides[a] < t.strides[b]; });
  int64_t reach = 0;  // largest offset of the dims seen so far
  for (int k = 0; k < n; ++k) {
    const int d = dims[k];
    if (t.strides[d] <= reach) {
      return InvalidArgumentError(StrCat(
          op, ": ", arg, " ", DescribeTensor(t), " is written, but its stride ",
          d, " (", t.strides[d], ") makes two indices address the same element",
          t.strides[d] == 0 ? " (a zero stride over a dim longer than 1)"
                            : ""));
    }
    reach += (t.shape[d] - 1) * t.strides[d];
  }
  return OkStatus();
}

}  // namespace

Status CheckNoAliasing(std::string_view op,
                       std::initializer_list<NamedView> views) {
  for (const NamedView& v : views) {
    if (v.written) DSA_RETURN_IF_ERROR(CheckInjective(op, v.name, *v.view));
  }
  for (auto a = views.begin(); a != views.end(); ++a) {
    // An optional argument not given holds no memory.
    if (a->view->absent()) continue;
    const int64_t a_bytes = TensorByteExtent(*a->view);
    if (a_bytes <= 0) continue;
    const auto a_begin = reinterpret_cast<uintptr_t>(a->view->data);
    for (auto b = a + 1; b != views.end(); ++b) {
      if (!a->written && !b->written) continue;
      if (b->view->absent()) continue;
      const int64_t b_bytes = TensorByteExtent(*b->view);
      if (b_bytes <= 0) continue;
      const auto b_begin = reinterpret_cast<uintptr_t>(b->view->data);
      if (a_begin < b_begin + static_cast<uint64_t>(b_bytes) &&
          b_begin < a_begin + static_cast<uint64_t>(a_bytes)) {
        return InvalidArgumentError(
            StrCat(op, ": ", a->name, " and ", b->name,
                   " overlap in memory, and ", a->written ? a->name : b->name,
                   " is written; no op writes in place across two arguments"));
      }
    }
  }
  return OkStatus();
}

}  // namespace dsa::attention
