// Plain strided tensor views, the only way tensors reach a kernel.
//
// A view is a data pointer, an explicit element type, a shape and strides in
// elements; it owns nothing. On GPU platforms `data` is a device pointer, so
// code that is not a kernel may read only the metadata (shape, strides,
// dtype), never the elements. Views cross the plugin boundary as
// DsaTensorView (attention/kernel_api.h).
//
// The checking helpers here produce the InvalidArgument messages every op
// uses, worded the same way everywhere:
//   "indexer_logits: q has 2 dims, expected 3: [rows, heads, head_dim]".
// They run inside plugins, so they use dsa::Status, not Abseil.
#ifndef DSA_ATTENTION_TENSOR_H_
#define DSA_ATTENTION_TENSOR_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "attention/dtypes/dtype.h"
#include "platform/core_status.h"

namespace dsa::attention {

inline constexpr int kMaxTensorRank = 4;

// Dimensions and strides above this are rejected, and so is a view whose
// element count or byte extent does not fit in int64 (CheckTensor), so that
// index arithmetic in int64 can never overflow, whatever a caller passes.
inline constexpr int64_t kMaxTensorDim = int64_t{1} << 31;

struct TensorView {
  // Element 0. Inputs are only read; `void*` (not `const void*`) keeps one
  // view type for inputs and outputs.
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int32_t rank = 0;
  int64_t shape[kMaxTensorRank] = {};
  int64_t strides[kMaxTensorRank] = {};  // in elements, not bytes

  int64_t dim(int i) const { return shape[i]; }
  int64_t stride(int i) const { return strides[i]; }
  // The product of the dims; meaningful once CheckTensor accepted the view
  // (it saturates at INT64_MAX instead of overflowing).
  int64_t num_elements() const;
  bool empty() const { return num_elements() == 0; }
  // An optional argument that was not given: the default view (no data,
  // rank 0). A given view of zero elements still has its rank.
  bool absent() const { return data == nullptr && rank == 0; }

  template <class T>
  T* data_as() const {
    return static_cast<T*>(data);
  }
  // Offset in elements of an index of up to four coordinates.
  int64_t offset(int64_t i0, int64_t i1 = 0, int64_t i2 = 0,
                 int64_t i3 = 0) const {
    return i0 * strides[0] + i1 * strides[1] + i2 * strides[2] +
           i3 * strides[3];
  }
};

// A row-major (contiguous) view over `data`.
TensorView MakeTensorView(const void* data, DType dtype,
                          std::initializer_list<int64_t> shape);

// "[2, 3, 128] float32"
std::string DescribeTensor(const TensorView& t);

// The bytes a view can touch, [data, data + extent): the largest element
// offset plus one, times the element size. 0 for an empty view; -1 when the
// view's metadata is out of range or the extent overflows int64.
int64_t TensorByteExtent(const TensorView& t);

// Checks a view's rank and element type and its metadata: dims and strides in
// range, the element count and byte extent representable in int64, non-null
// data unless empty, and (by default) a contiguous last dimension, which every
// kernel needs to read vectors. `layout` names the dims, e.g.
// "[tokens, heads, head_dim]". InvalidArgument naming `op` and `arg` on any
// failure.
Status CheckTensor(std::string_view op, std::string_view arg,
                   const TensorView& t, int rank, std::string_view layout,
                   std::initializer_list<DType> dtypes,
                   bool contiguous_last_dim = true);

// Checks t.shape[dim] == expected. `dim_name` is the dim's name in the
// layout ("head_dim") and `why` says where `expected` comes from
// ("q's heads"), e.g. "indexer_logits: head_weights dim 1 (heads) is 8,
// expected 4 (q's heads)".
Status CheckDim(std::string_view op, std::string_view arg, const TensorView& t,
                int dim, std::string_view dim_name, int64_t expected,
                std::string_view why);

// CheckDim with a `why` that has to be formatted (why() returns a string):
// the dim is compared first and why() runs only when it differs, so a call
// that passes builds no string.
template <class Why>
Status CheckDimWith(std::string_view op, std::string_view arg,
                    const TensorView& t, int dim, std::string_view dim_name,
                    int64_t expected, const Why& why) {
  if (dim >= 0 && dim < t.rank && t.shape[dim] == expected) return OkStatus();
  return CheckDim(op, arg, t, dim, dim_name, expected, why());
}

// Checks that a view's elements are contiguous in row-major order (caches,
// whose blocks are addressed by byte offset).
Status CheckContiguous(std::string_view op, std::string_view arg,
                       const TensorView& t);

// A named view in an op's argument list, for the aliasing check.
struct NamedView {
  const char* name;
  const TensorView* view;
  bool written;  // an output, or a cache updated in place
};

// Checks what an op writes: every written view maps distinct indices to
// distinct elements (no zero stride over a dim longer than 1, no strides that
// make two indices meet), and no written view's bytes overlap those of any
// other argument, read or written. Ranges are compared by byte extent, so
// interleaved views that share a range are rejected too; no op of ops.h
// documents in-place use across two arguments. Call after every view passed
// CheckTensor.
Status CheckNoAliasing(std::string_view op,
                       std::initializer_list<NamedView> views);

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_TENSOR_H_
