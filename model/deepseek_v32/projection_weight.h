// A projection's weight as a layer step multiplies it: bf16 [out, in] for the
// gemm op, or fp8 e4m3fn [out, in] with one float32 multiplier per 128 x 128
// block for fp8_block_gemm (w = code * scale_inv[o / 128, i / 128]: an FP8
// checkpoint's weight and weight_scale_inv, attention/dense_ops.h). Views
// only; the layer owns the memory.
//
// A fused projection (a concatenated weight such as [q_a; kv_a], one product
// for both) is one ProjectionWeight, and each part a Rows() slice of it. For
// fp8 the slice must start on a block row (a multiple of 128: q_a's 1536 or
// 2048 rows are), so that the part's scale rows are the whole weight's from
// begin / 128 on; the last part may end mid-block.
#ifndef DSA_MODEL_DEEPSEEK_V32_PROJECTION_WEIGHT_H_
#define DSA_MODEL_DEEPSEEK_V32_PROJECTION_WEIGHT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "attention/dtypes/dtype.h"
#include "attention/dtypes/fp8.h"
#include "attention/tensor.h"

namespace dsa::model::deepseek_v32 {

struct ProjectionWeight {
  attention::TensorView weight;     // [out, in], bf16 or an fp8 type
  attention::TensorView scale_inv;  // fp8: [ceil(out / 128), ceil(in / 128)]
                                    // f32; absent for bf16

  bool fp8() const { return attention::IsFp8(weight.dtype); }
  int64_t out() const { return weight.dim(0); }
  int64_t in() const { return weight.dim(1); }

  // Rows [begin, begin + count) of the weight, the same precision.
  absl::StatusOr<ProjectionWeight> Rows(int64_t begin, int64_t count) const {
    if (begin < 0 || count < 0 || begin + count > out()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rows [", begin, ", ", begin + count,
                       ") are not in a projection of ", out(), " rows"));
    }
    if (fp8() && begin % attention::kFp8BlockSize != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rows from ", begin, " of an fp8 projection: a part must start on ",
          "a 128-row block (its block scales are the whole weight's)"));
    }
    ProjectionWeight part = *this;
    part.weight.data =
        static_cast<char*>(weight.data) +
        begin * weight.stride(0) *
            static_cast<int64_t>(attention::DTypeSize(weight.dtype));
    part.weight.shape[0] = count;
    if (fp8()) {
      part.scale_inv.data =
          static_cast<float*>(scale_inv.data) +
          begin / attention::kFp8BlockSize * scale_inv.stride(0);
      part.scale_inv.shape[0] = attention::Fp8Blocks(count);
    }
    return part;
  }
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_PROJECTION_WEIGHT_H_
