#include "attention/dense_ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string_view>

#include "attention/args_conversion.h"
#include "attention/dtypes/fp8.h"
#include "attention/kernel_abi.h"

namespace dsa::attention {
namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32,
                                                      DType::kBFloat16};

Status CheckSameShape2(std::string_view op, std::string_view arg,
                       const TensorView& t, std::string_view ref_name,
                       const TensorView& ref) {
  DSA_RETURN_IF_ERROR(CheckDimWith(op, arg, t, 0, "rows", ref.dim(0), [&] {
    return StrCat(ref_name, "'s rows");
  }));
  return CheckDimWith(op, arg, t, 1, "cols", ref.dim(1),
                      [&] { return StrCat(ref_name, "'s cols"); });
}

Status CheckFinite(std::string_view op, std::string_view arg, float v) {
  if (!std::isfinite(v)) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, " is ", v, ", expected a finite value"));
  }
  return OkStatus();
}

}  // namespace

static Status ValidateGemmShapes(const Gemm::Args& a) {
  constexpr std::string_view op = Gemm::kName;
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "x", a.x, 3, "[batch, rows, in]", kFloatTypes));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "w", a.w, 3, "[batch, out, in]",
                                  {DType::kBFloat16},
                                  /*contiguous_last_dim=*/false));
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "y", a.y, 3, "[batch, rows, out]", kFloatTypes));
  DSA_RETURN_IF_ERROR(
      CheckDim(op, "w", a.w, 0, "batch", a.x.dim(0), "x's batch"));
  DSA_RETURN_IF_ERROR(CheckDim(op, "w", a.w, 2, "in", a.x.dim(2), "x's in"));
  DSA_RETURN_IF_ERROR(
      CheckDim(op, "y", a.y, 0, "batch", a.x.dim(0), "x's batch"));
  DSA_RETURN_IF_ERROR(
      CheckDim(op, "y", a.y, 1, "rows", a.x.dim(1), "x's rows"));
  DSA_RETURN_IF_ERROR(CheckDim(op, "y", a.y, 2, "out", a.w.dim(1), "w's out"));
  const bool in_contiguous = a.w.dim(2) <= 1 || a.w.stride(2) == 1;
  const bool out_contiguous = a.w.dim(1) <= 1 || a.w.stride(1) == 1;
  if (!in_contiguous && !out_contiguous) {
    return InvalidArgumentError(StrCat(
        op, ": w has strides [", a.w.stride(0), ", ", a.w.stride(1), ", ",
        a.w.stride(2),
        "], expected its in or its out dim contiguous (stride 1): a matrix or "
        "a transposed one"));
  }
  return OkStatus();
}

constexpr std::initializer_list<DType> kFp8Types = {DType::kFloat8E4m3fn,
                                                    DType::kFloat8E4m3fnuz};

// A block-scale tensor's dims (any strides): [ceil(rows / block_rows),
// ceil(cols / 128)] of `of` (rows, cols named after its layout).
static Status CheckBlockScales(std::string_view op, std::string_view arg,
                               const TensorView& scales, std::string_view of,
                               std::string_view rows_name, int64_t rows,
                               int64_t block_rows, std::string_view cols_name,
                               int64_t cols) {
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, arg, scales, 2,
                  StrCat("[ceil(", rows_name, " / ", block_rows, "), ceil(",
                         cols_name, " / ", kFp8BlockSize, ")]"),
                  {DType::kFloat32}, /*contiguous_last_dim=*/false));
  DSA_RETURN_IF_ERROR(CheckDim(op, arg, scales, 0, StrCat(rows_name, " blocks"),
                               (rows + block_rows - 1) / block_rows,
                               StrCat("ceil(", of, "'s ", rows_name, " ", rows,
                                      " / ", block_rows, ")")));
  return CheckDim(op, arg, scales, 1, StrCat(cols_name, " blocks"),
                  Fp8Blocks(cols),
                  StrCat("ceil(", of, "'s ", cols_name, " ", cols, " / ",
                         kFp8BlockSize, ")"));
}

// Optional tensors that are given together or not at all.
static Status CheckTogether(std::string_view op, std::string_view a_name,
                            const TensorView& a, std::string_view b_name,
                            const TensorView& b) {
  if (a.absent() == b.absent()) return OkStatus();
  return InvalidArgumentError(
      StrCat(op, ": ", a.absent() ? b_name : a_name, " is given without ",
             a.absent() ? a_name : b_name, ", expected both or neither"));
}

static Status ValidateRmsNormShapes(const RmsNorm::Args& a) {
  constexpr std::string_view op = RmsNorm::kName;
  DSA_RETURN_IF_ERROR(CheckTensor(op, "x", a.x, 2, "[rows, dim]", kFloatTypes));
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "weight", a.weight, 1, "[dim]", kFloatTypes));
  DSA_RETURN_IF_ERROR(
      CheckDim(op, "weight", a.weight, 0, "dim", a.x.dim(1), "x's dim"));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "y", a.y, 2, "[rows, dim]", kFloatTypes));
  DSA_RETURN_IF_ERROR(CheckSameShape2(op, "y", a.y, "x", a.x));
  DSA_RETURN_IF_ERROR(
      CheckTogether(op, "y_q", a.y_q, "y_scale_inv", a.y_scale_inv));
  if (!a.y_q.absent()) {
    DSA_RETURN_IF_ERROR(
        CheckTensor(op, "y_q", a.y_q, 2, "[rows, dim]", kFp8Types));
    DSA_RETURN_IF_ERROR(CheckSameShape2(op, "y_q", a.y_q, "x", a.x));
    DSA_RETURN_IF_ERROR(CheckBlockScales(op, "y_scale_inv", a.y_scale_inv, "x",
                                         "rows", a.x.dim(0), 1, "dim",
                                         a.x.dim(1)));
  }
  if (!a.residual.absent()) {
    DSA_RETURN_IF_ERROR(
        CheckTensor(op, "residual", a.residual, 2, "[rows, dim]", kFloatTypes));
    DSA_RETURN_IF_ERROR(CheckSameShape2(op, "residual", a.residual, "x", a.x));
  }
  if (!(a.eps >= 0.0f) || !std::isfinite(a.eps)) {
    return InvalidArgumentError(
        StrCat(op, ": eps is ", a.eps, ", expected a finite value >= 0"));
  }
  return OkStatus();
}

static Status ValidateRopeShapes(const Rope::Args& a) {
  constexpr std::string_view op = Rope::kName;
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "x", a.x, 3, "[tokens, heads, rope_dim]", kFloatTypes));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "positions", a.positions, 1, "[tokens]",
                                  {DType::kInt64},
                                  /*contiguous_last_dim=*/false));
  DSA_RETURN_IF_ERROR(CheckDim(op, "positions", a.positions, 0, "tokens",
                               a.x.dim(0), "x's tokens"));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "cos_sin_cache", a.cos_sin_cache, 2,
                                  "[max_position, rope_dim]",
                                  {DType::kFloat32}));
  DSA_RETURN_IF_ERROR(CheckDim(op, "cos_sin_cache", a.cos_sin_cache, 1,
                               "rope_dim", a.x.dim(2), "x's rope_dim"));
  if (a.x.dim(2) % 2 != 0) {
    return InvalidArgumentError(StrCat(op, ": x rope_dim is ", a.x.dim(2),
                                       ", expected an even number"));
  }
  if (a.rope_style != RopeStyle::kNeox &&
      a.rope_style != RopeStyle::kInterleaved) {
    return InvalidArgumentError(StrCat(op, ": rope_style ",
                                       static_cast<int>(a.rope_style),
                                       " is not a RopeStyle"));
  }
  return OkStatus();
}

static Status ValidateResidualAddShapes(const ResidualAdd::Args& a) {
  constexpr std::string_view op = ResidualAdd::kName;
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "residual", a.residual, 2, "[rows, cols]", kFloatTypes));
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "x", a.x, 2, "[rows, cols]", kFloatTypes));
  return CheckSameShape2(op, "x", a.x, "residual", a.residual);
}

static Status ValidateCastShapes(const Cast::Args& a) {
  constexpr std::string_view op = Cast::kName;
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "x", a.x, 2, "[rows, cols]", kFloatTypes));
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "y", a.y, 2, "[rows, cols]", kFloatTypes));
  return CheckSameShape2(op, "y", a.y, "x", a.x);
}

static Status ValidateRandomFillShapes(const RandomFill::Args& a) {
  constexpr std::string_view op = RandomFill::kName;
  if (a.y.rank < 1 || a.y.rank > kMaxTensorRank) {
    return InvalidArgumentError(StrCat(op, ": y has rank ", a.y.rank,
                                       ", expected 1 to ", kMaxTensorRank));
  }
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "y", a.y, a.y.rank, "[...]", kFloatTypes));
  DSA_RETURN_IF_ERROR(CheckContiguous(op, "y", a.y));
  DSA_RETURN_IF_ERROR(CheckFinite(op, "scale", a.scale));
  return CheckFinite(op, "offset", a.offset);
}

static Status ValidateFp8BlockQuantShapes(const Fp8BlockQuant::Args& a) {
  constexpr std::string_view op = Fp8BlockQuant::kName;
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "x", a.x, 2, "[rows, cols]", kFloatTypes));
  if (a.block_rows != 1 && a.block_rows != kFp8BlockSize) {
    return InvalidArgumentError(StrCat(
        op, ": block_rows is ", a.block_rows, ", expected 1 (per token) ",
        "or ", kFp8BlockSize, " (a weight's 128 x 128 blocks)"));
  }
  DSA_RETURN_IF_ERROR(CheckTensor(op, "q", a.q, 2, "[rows, cols]", kFp8Types));
  DSA_RETURN_IF_ERROR(CheckSameShape2(op, "q", a.q, "x", a.x));
  return CheckBlockScales(op, "scale_inv", a.scale_inv, "x", "rows", a.x.dim(0),
                          a.block_rows, "cols", a.x.dim(1));
}

static Status ValidateFp8BlockGemmShapes(const Fp8BlockGemm::Args& a) {
  constexpr std::string_view op = Fp8BlockGemm::kName;
  DSA_RETURN_IF_ERROR(
      CheckTogether(op, "x_q", a.x_q, "x_scale_inv", a.x_scale_inv));
  const bool quantised = !a.x_q.absent();
  if (quantised && !a.x.absent()) {
    return InvalidArgumentError(StrCat(
        op,
        ": x and x_q are both given, expected the activations once: x to "
        "be quantised by the op, or x_q and x_scale_inv"));
  }
  // The activations' view and name: x, or x_q.
  const TensorView& act = quantised ? a.x_q : a.x;
  const std::string_view act_name = quantised ? "x_q" : "x";
  if (quantised) {
    DSA_RETURN_IF_ERROR(
        CheckTensor(op, "x_q", a.x_q, 2, "[rows, in]", kFp8Types));
  } else {
    DSA_RETURN_IF_ERROR(
        CheckTensor(op, "x", a.x, 2, "[rows, in]", kFloatTypes));
  }
  DSA_RETURN_IF_ERROR(CheckTensor(op, "w", a.w, 2, "[out, in]", kFp8Types));
  DSA_RETURN_IF_ERROR(CheckDimWith(op, "w", a.w, 1, "in", act.dim(1),
                                   [&] { return StrCat(act_name, "'s in"); }));
  if (quantised) {
    if (a.x_q.dtype != a.w.dtype) {
      return InvalidArgumentError(StrCat(
          op, ": x_q has dtype ", DTypeName(a.x_q.dtype), ", expected w's ",
          DTypeName(a.w.dtype), " (one fp8 encoding for both operands)"));
    }
    DSA_RETURN_IF_ERROR(CheckBlockScales(op, "x_scale_inv", a.x_scale_inv,
                                         "x_q", "rows", a.x_q.dim(0), 1, "in",
                                         a.x_q.dim(1)));
  }
  DSA_RETURN_IF_ERROR(CheckBlockScales(op, "w_scale_inv", a.w_scale_inv, "w",
                                       "out", a.w.dim(0), kFp8BlockSize, "in",
                                       a.w.dim(1)));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "y", a.y, 2, "[rows, out]", kFloatTypes));
  DSA_RETURN_IF_ERROR(CheckDimWith(op, "y", a.y, 0, "rows", act.dim(0), [&] {
    return StrCat(act_name, "'s rows");
  }));
  return CheckDim(op, "y", a.y, 1, "out", a.w.dim(0), "w's out");
}

// Validate = the shape checks, then the aliasing check over every tensor of
// the argument list (outputs and in-place tensors marked as written), as in
// ops.cc.
#define DSA_DENSE_ALIAS_WRITTEN_IN false
#define DSA_DENSE_ALIAS_WRITTEN_OUT true
#define DSA_DENSE_ALIAS_WRITTEN_INOUT true
#define DSA_DENSE_ALIAS_TENSOR(name, direction) \
  NamedView{#name, &a.name, DSA_DENSE_ALIAS_WRITTEN_##direction},
#define DSA_DENSE_ALIAS_SKIP3(x, y, z)
#define DSA_DENSE_ALIAS_SKIP1(x)
#define DSA_DEFINE_DENSE_VALIDATE(CxxName, LIST, PREFIX)              \
  Status CxxName::Validate(const Args& a) {                           \
    DSA_RETURN_IF_ERROR(Validate##CxxName##Shapes(a));                \
    return CheckNoAliasing(                                           \
        kName, {LIST(DSA_DENSE_ALIAS_TENSOR, DSA_DENSE_ALIAS_SKIP3,   \
                     DSA_DENSE_ALIAS_SKIP3, DSA_DENSE_ALIAS_SKIP1)}); \
  }
DSA_DENSE_OPS(DSA_DEFINE_DENSE_VALIDATE)
#undef DSA_DEFINE_DENSE_VALIDATE

// The C <-> C++ conversions of each dense op's arguments, generated from its
// list (args_conversion.h), as kernel_abi.cc does for the attention ops.
DSA_DENSE_OPS(DSA_DEFINE_ARGS_CONVERSIONS)

}  // namespace dsa::attention
