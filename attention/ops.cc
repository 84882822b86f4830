#include "attention/ops.h"

#include <cmath>
#include <cstdint>
#include <string_view>

#include "attention/dtypes/dtype.h"
#include "attention/dtypes/fp8.h"
#include "attention/tensor.h"
#include "platform/core_status.h"

namespace dsa::attention {
namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat32,
                                                      DType::kBFloat16};
constexpr std::initializer_list<DType> kFp8Types = {DType::kFloat8E4m3fn,
                                                    DType::kFloat8E4m3fnuz};

Status CheckFp8Dtype(std::string_view op, std::string_view arg, DType dtype) {
  if (!IsFp8(dtype)) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, " is ", DTypeName(dtype),
               ", expected float8_e4m3fn or float8_e4m3fnuz"));
  }
  return OkStatus();
}

// The indexer numerics appended to the K write and Q (kernel_api.h).
Status CheckIndexerNumerics(std::string_view op, DType intermediate_dtype,
                            float fp8_scale_divisor, int32_t hadamard_rotation,
                            int64_t head_dim, DType fp8) {
  if (intermediate_dtype != DType::kFloat32 &&
      intermediate_dtype != DType::kBFloat16) {
    return InvalidArgumentError(StrCat(op, ": intermediate_dtype is ",
                                       DTypeName(intermediate_dtype), " (code ",
                                       static_cast<int32_t>(intermediate_dtype),
                                       "), expected float32 or bfloat16"));
  }
  const float fp8_max = Fp8Max(fp8);
  if (!(fp8_scale_divisor == 0.0f ||
        (fp8_scale_divisor > 0.0f && fp8_scale_divisor <= fp8_max))) {
    return InvalidArgumentError(
        StrCat(op, ": fp8_scale_divisor is ", fp8_scale_divisor,
               ", expected 0 (the fp8 format's max) or a value in (0, ",
               fp8_max, "] for ", DTypeName(fp8)));
  }
  if (hadamard_rotation != 0 && hadamard_rotation != 1) {
    return InvalidArgumentError(StrCat(op, ": hadamard_rotation is ",
                                       hadamard_rotation, ", expected 0 or 1"));
  }
  if (hadamard_rotation == 1 && (head_dim & (head_dim - 1)) != 0) {
    return InvalidArgumentError(
        StrCat(op, ": hadamard_rotation needs head_dim a power of two, got ",
               head_dim));
  }
  return OkStatus();
}

Status CheckRope(std::string_view op, const TensorView& cos_sin_cache,
                 RopeStyle style, int64_t head_dim) {
  DSA_RETURN_IF_ERROR(CheckTensor(op, "cos_sin_cache", cos_sin_cache, 2,
                                  "[max_position, rope_dim]",
                                  {DType::kFloat32}));
  const int64_t rope_dim = cos_sin_cache.dim(1);
  if (rope_dim <= 0 || rope_dim % 2 != 0 || rope_dim > head_dim) {
    return InvalidArgumentError(StrCat(
        op, ": cos_sin_cache rope_dim is ", rope_dim,
        ", expected a positive even number <= head_dim (", head_dim, ")"));
  }
  if (style != RopeStyle::kNeox && style != RopeStyle::kInterleaved) {
    return InvalidArgumentError(StrCat(
        op, ": rope_style ", static_cast<int>(style), " is not a RopeStyle"));
  }
  return OkStatus();
}

// Rank-1 index vector of `n` entries.
Status CheckIndexVector(std::string_view op, std::string_view arg,
                        const TensorView& t, std::string_view layout,
                        DType dtype, int64_t n, std::string_view why) {
  DSA_RETURN_IF_ERROR(CheckTensor(op, arg, t, 1, layout, {dtype},
                                  /*contiguous_last_dim=*/false));
  // "[tokens]" names dim 0 "tokens".
  return CheckDim(op, arg, t, 0, layout.substr(1, layout.size() - 2), n, why);
}

Status CheckIndexerKCache(std::string_view op, const TensorView& k_cache,
                          int64_t head_dim) {
  DSA_RETURN_IF_ERROR(CheckTensor(op, "k_cache", k_cache, 3,
                                  "[num_blocks, block_size, head_dim + 4]",
                                  {DType::kUint8}));
  DSA_RETURN_IF_ERROR(CheckDim(op, "k_cache", k_cache, 2, "head_dim + 4",
                               head_dim + 4,
                               "head_dim fp8 values and one fp32 scale"));
  if (k_cache.dim(1) < 1) {
    return InvalidArgumentError(StrCat(op, ": k_cache block_size is ",
                                       k_cache.dim(1),
                                       ", expected at least 1"));
  }
  return CheckContiguous(op, "k_cache", k_cache);
}

// block_table [num_requests, max_blocks] and seq_lens [num_requests].
Status CheckBlockTable(std::string_view op, const TensorView& block_table,
                       const TensorView& seq_lens) {
  DSA_RETURN_IF_ERROR(CheckTensor(op, "block_table", block_table, 2,
                                  "[num_requests, max_blocks]", {DType::kInt32},
                                  /*contiguous_last_dim=*/false));
  return CheckIndexVector(op, "seq_lens", seq_lens, "[num_requests]",
                          DType::kInt32, block_table.dim(0),
                          "block_table's num_requests");
}

Status CheckPositiveScale(std::string_view op, std::string_view arg,
                          float value) {
  if (!(value > 0.0f) || !std::isfinite(value)) {
    return InvalidArgumentError(
        StrCat(op, ": ", arg, " is ", value, ", expected a finite value > 0"));
  }
  return OkStatus();
}

}  // namespace

// Ranks, dtypes, shapes and strides.
static Status ValidateIndexerKWriteShapes(const IndexerKWrite::Args& a) {
  constexpr std::string_view op = IndexerKWrite::kName;
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "k", a.k, 2, "[tokens, head_dim]", kFloatTypes));
  const int64_t tokens = a.k.dim(0);
  const int64_t head_dim = a.k.dim(1);
  if (head_dim < 1) {
    return InvalidArgumentError(
        StrCat(op, ": k head_dim is 0, expected at least 1"));
  }
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "ln_weight", a.ln_weight, 1, "[head_dim]", kFloatTypes));
  DSA_RETURN_IF_ERROR(CheckDim(op, "ln_weight", a.ln_weight, 0, "head_dim",
                               head_dim, "k's head_dim"));
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "ln_bias", a.ln_bias, 1, "[head_dim]", kFloatTypes));
  DSA_RETURN_IF_ERROR(CheckDim(op, "ln_bias", a.ln_bias, 0, "head_dim",
                               head_dim, "k's head_dim"));
  DSA_RETURN_IF_ERROR(CheckPositiveScale(op, "ln_eps", a.ln_eps));
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "positions", a.positions, "[tokens]",
                                       DType::kInt64, tokens, "k's tokens"));
  DSA_RETURN_IF_ERROR(CheckRope(op, a.cos_sin_cache, a.rope_style, head_dim));
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "slot_mapping", a.slot_mapping,
                                       "[tokens]", DType::kInt64, tokens,
                                       "k's tokens"));
  DSA_RETURN_IF_ERROR(CheckFp8Dtype(op, "cache_dtype", a.cache_dtype));
  DSA_RETURN_IF_ERROR(
      CheckIndexerNumerics(op, a.intermediate_dtype, a.fp8_scale_divisor,
                           a.hadamard_rotation, head_dim, a.cache_dtype));
  DSA_RETURN_IF_ERROR(CheckIndexerKCache(op, a.k_cache, head_dim));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "topk_indices", a.topk_indices, 2,
                                  "[tokens, topk]", {DType::kInt32}));
  return CheckDim(op, "topk_indices", a.topk_indices, 0, "tokens", tokens,
                  "k's tokens");
}

// Ranks, dtypes, shapes and strides.
static Status ValidateIndexerQShapes(const IndexerQ::Args& a) {
  constexpr std::string_view op = IndexerQ::kName;
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "q", a.q, 3, "[tokens, heads, head_dim]", kFloatTypes));
  const int64_t tokens = a.q.dim(0);
  const int64_t heads = a.q.dim(1);
  const int64_t head_dim = a.q.dim(2);
  if (heads < 1 || head_dim < 1) {
    return InvalidArgumentError(
        StrCat(op, ": q is ", DescribeTensor(a.q),
               ", expected at least one head of at least one dim"));
  }
  DSA_RETURN_IF_ERROR(CheckTensor(op, "weights", a.weights, 2,
                                  "[tokens, heads]", kFloatTypes,
                                  /*contiguous_last_dim=*/false));
  DSA_RETURN_IF_ERROR(
      CheckDim(op, "weights", a.weights, 0, "tokens", tokens, "q's tokens"));
  DSA_RETURN_IF_ERROR(
      CheckDim(op, "weights", a.weights, 1, "heads", heads, "q's heads"));
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "positions", a.positions, "[tokens]",
                                       DType::kInt64, tokens, "q's tokens"));
  DSA_RETURN_IF_ERROR(CheckRope(op, a.cos_sin_cache, a.rope_style, head_dim));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "q_fp8", a.q_fp8, 3,
                                  "[tokens, heads, head_dim]", kFp8Types));
  DSA_RETURN_IF_ERROR(
      CheckIndexerNumerics(op, a.intermediate_dtype, a.fp8_scale_divisor,
                           a.hadamard_rotation, head_dim, a.q_fp8.dtype));
  for (int d = 0; d < 3; ++d) {
    DSA_RETURN_IF_ERROR(CheckDim(op, "q_fp8", a.q_fp8, d,
                                 d == 0   ? "tokens"
                                 : d == 1 ? "heads"
                                          : "head_dim",
                                 a.q.dim(d), "q's shape"));
  }
  DSA_RETURN_IF_ERROR(CheckTensor(op, "head_weights", a.head_weights, 2,
                                  "[tokens, heads]", {DType::kFloat32},
                                  /*contiguous_last_dim=*/false));
  DSA_RETURN_IF_ERROR(CheckDim(op, "head_weights", a.head_weights, 0, "tokens",
                               tokens, "q's tokens"));
  return CheckDim(op, "head_weights", a.head_weights, 1, "heads", heads,
                  "q's heads");
}

// Ranks, dtypes, shapes and strides.
static Status ValidateIndexerLogitsShapes(const IndexerLogits::Args& a) {
  constexpr std::string_view op = IndexerLogits::kName;
  DSA_RETURN_IF_ERROR(CheckTensor(op, "q_fp8", a.q_fp8, 3,
                                  "[rows, heads, head_dim]", kFp8Types));
  const int64_t rows = a.q_fp8.dim(0);
  const int64_t heads = a.q_fp8.dim(1);
  const int64_t head_dim = a.q_fp8.dim(2);
  if (heads < 1 || head_dim < 1) {
    return InvalidArgumentError(
        StrCat(op, ": q_fp8 is ", DescribeTensor(a.q_fp8),
               ", expected at least one head of at least one dim"));
  }
  DSA_RETURN_IF_ERROR(CheckTensor(op, "head_weights", a.head_weights, 2,
                                  "[rows, heads]", {DType::kFloat32},
                                  /*contiguous_last_dim=*/false));
  DSA_RETURN_IF_ERROR(CheckDim(op, "head_weights", a.head_weights, 0, "rows",
                               rows, "q_fp8's rows"));
  DSA_RETURN_IF_ERROR(CheckDim(op, "head_weights", a.head_weights, 1, "heads",
                               heads, "q_fp8's heads"));
  DSA_RETURN_IF_ERROR(CheckIndexerKCache(op, a.k_cache, head_dim));
  DSA_RETURN_IF_ERROR(CheckBlockTable(op, a.block_table, a.seq_lens));
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "row_request", a.row_request,
                                       "[rows]", DType::kInt32, rows,
                                       "q_fp8's rows"));
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "row_key_start", a.row_key_start,
                                       "[rows]", DType::kInt32, rows,
                                       "q_fp8's rows"));
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "row_key_end", a.row_key_end,
                                       "[rows]", DType::kInt32, rows,
                                       "q_fp8's rows"));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "logits", a.logits, 2, "[rows, width]",
                                  {DType::kFloat32}));
  return CheckDim(op, "logits", a.logits, 0, "rows", rows, "q_fp8's rows");
}

CheckedSize IndexerLogits::WorkspaceBytes(int64_t rows, int64_t max_seq_len) {
  if (rows <= 0 || max_seq_len <= 0) return 0;
  return CheckedSize(rows) * max_seq_len * sizeof(float);
}

// Ranks, dtypes, shapes and strides.
static Status ValidateIndexerTopKShapes(const IndexerTopK::Args& a) {
  constexpr std::string_view op = IndexerTopK::kName;
  DSA_RETURN_IF_ERROR(CheckTensor(op, "logits", a.logits, 2, "[rows, width]",
                                  {DType::kFloat32}));
  const int64_t rows = a.logits.dim(0);
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "row_key_start", a.row_key_start,
                                       "[rows]", DType::kInt32, rows,
                                       "logits' rows"));
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "row_key_end", a.row_key_end,
                                       "[rows]", DType::kInt32, rows,
                                       "logits' rows"));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "topk_indices", a.topk_indices, 2,
                                  "[rows, topk]", {DType::kInt32}));
  DSA_RETURN_IF_ERROR(CheckDim(op, "topk_indices", a.topk_indices, 0, "rows",
                               rows, "logits' rows"));
  if (a.topk_indices.dim(1) < 1) {
    return InvalidArgumentError(
        StrCat(op, ": topk_indices has topk 0, expected at least 1"));
  }
  return OkStatus();
}

int64_t LatentCacheEntryWidth(const LatentCacheFormat& f) {
  if (IsFp8(f.dtype)) {
    return int64_t{f.kv_lora_rank} +
           4 * (int64_t{f.kv_lora_rank} / kLatentFp8TileSize) +
           2 * int64_t{f.rope_dim};
  }
  return int64_t{f.kv_lora_rank} + f.rope_dim;
}

Status CheckLatentCache(std::string_view op, const TensorView& kv_cache,
                        const LatentCacheFormat& f) {
  if (f.dtype != DType::kBFloat16 && !IsFp8(f.dtype)) {
    return InvalidArgumentError(
        StrCat(op, ": cache_format.dtype is ", DTypeName(f.dtype),
               ", expected bfloat16, float8_e4m3fn or float8_e4m3fnuz"));
  }
  if (f.kv_lora_rank < 1 ||
      (IsFp8(f.dtype) && f.kv_lora_rank % kLatentFp8TileSize != 0)) {
    return InvalidArgumentError(StrCat(
        op, ": cache_format.kv_lora_rank is ", f.kv_lora_rank,
        IsFp8(f.dtype) ? ", expected a positive multiple of 128 (fp8 tiles)"
                       : ", expected at least 1"));
  }
  if (f.rope_dim < 2 || f.rope_dim % 2 != 0) {
    return InvalidArgumentError(StrCat(op, ": cache_format.rope_dim is ",
                                       f.rope_dim,
                                       ", expected a positive even number"));
  }
  const bool fp8 = IsFp8(f.dtype);
  DSA_RETURN_IF_ERROR(CheckTensor(
      op, "kv_cache", kv_cache, 3,
      fp8 ? "[num_blocks, block_size, kv_lora_rank + kv_lora_rank/32 + "
            "2*rope_dim] (fp8 layout)"
          : "[num_blocks, block_size, kv_lora_rank + rope_dim]",
      {fp8 ? DType::kUint8 : DType::kBFloat16}));
  DSA_RETURN_IF_ERROR(CheckDim(op, "kv_cache", kv_cache, 2, "entry width",
                               LatentCacheEntryWidth(f),
                               fp8 ? "fp8 latent, fp32 tile scales, bf16 rope"
                                   : "bf16 latent and rope"));
  if (kv_cache.dim(1) < 1) {
    return InvalidArgumentError(StrCat(op, ": kv_cache block_size is ",
                                       kv_cache.dim(1),
                                       ", expected at least 1"));
  }
  // Entries are addressed by byte offset within a contiguous entry; blocks
  // and offsets may be strided.
  return OkStatus();
}

// Ranks, dtypes, shapes and strides.
static Status ValidateMlaCacheWriteShapes(const MlaCacheWrite::Args& a) {
  constexpr std::string_view op = MlaCacheWrite::kName;
  DSA_RETURN_IF_ERROR(CheckLatentCache(op, a.kv_cache, a.cache_format));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "kv_c", a.kv_c, 2,
                                  "[tokens, kv_lora_rank]", kFloatTypes));
  const int64_t tokens = a.kv_c.dim(0);
  DSA_RETURN_IF_ERROR(CheckDim(op, "kv_c", a.kv_c, 1, "kv_lora_rank",
                               a.cache_format.kv_lora_rank,
                               "cache_format.kv_lora_rank"));
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "k_pe", a.k_pe, 2, "[tokens, rope_dim]", kFloatTypes));
  DSA_RETURN_IF_ERROR(
      CheckDim(op, "k_pe", a.k_pe, 0, "tokens", tokens, "kv_c's tokens"));
  DSA_RETURN_IF_ERROR(CheckDim(op, "k_pe", a.k_pe, 1, "rope_dim",
                               a.cache_format.rope_dim,
                               "cache_format.rope_dim"));
  return CheckIndexVector(op, "slot_mapping", a.slot_mapping, "[tokens]",
                          DType::kInt64, tokens, "kv_c's tokens");
}

namespace {

// kv_b_proj [heads * (qk_nope + v), kv_lora_rank].
Status CheckKvBProj(std::string_view op, const TensorView& kv_b_proj,
                    int64_t heads, int64_t qk_nope, int64_t v,
                    int64_t kv_lora_rank) {
  DSA_RETURN_IF_ERROR(CheckTensor(op, "kv_b_proj", kv_b_proj, 2,
                                  "[heads * (qk_nope_head_dim + v_head_dim), "
                                  "kv_lora_rank]",
                                  kFloatTypes));
  DSA_RETURN_IF_ERROR(CheckDimWith(
      op, "kv_b_proj", kv_b_proj, 0, "heads * (qk_nope + v)",
      heads * (qk_nope + v),
      [&] { return StrCat(heads, " heads * (", qk_nope, " + ", v, ")"); }));
  return CheckDim(op, "kv_b_proj", kv_b_proj, 1, "kv_lora_rank", kv_lora_rank,
                  "cache_format.kv_lora_rank");
}

Status CheckAttentionOutput(std::string_view op, const TensorView& output,
                            int64_t tokens, int64_t heads) {
  DSA_RETURN_IF_ERROR(CheckTensor(op, "output", output, 3,
                                  "[tokens, heads, v_head_dim]", kFloatTypes));
  DSA_RETURN_IF_ERROR(
      CheckDim(op, "output", output, 0, "tokens", tokens, "q's tokens"));
  DSA_RETURN_IF_ERROR(
      CheckDim(op, "output", output, 1, "heads", heads, "q's heads"));
  if (output.dim(2) < 1) {
    return InvalidArgumentError(
        StrCat(op, ": output v_head_dim is 0, expected at least 1"));
  }
  return OkStatus();
}

}  // namespace

// Ranks, dtypes, shapes and strides.
static Status ValidateSparseMlaShapes(const SparseMla::Args& a) {
  constexpr std::string_view op = SparseMla::kName;
  const LatentCacheFormat& f = a.cache_format;
  DSA_RETURN_IF_ERROR(CheckLatentCache(op, a.kv_cache, f));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "q", a.q, 3,
                                  "[tokens, heads, kv_lora_rank + rope_dim]",
                                  kFloatTypes));
  const int64_t tokens = a.q.dim(0);
  const int64_t heads = a.q.dim(1);
  if (heads < 1) {
    return InvalidArgumentError(
        StrCat(op, ": q has 0 heads, expected at least 1"));
  }
  DSA_RETURN_IF_ERROR(CheckDim(op, "q", a.q, 2, "kv_lora_rank + rope_dim",
                               int64_t{f.kv_lora_rank} + f.rope_dim,
                               "absorbed query: latent and rope parts"));
  DSA_RETURN_IF_ERROR(CheckBlockTable(op, a.block_table, a.seq_lens));
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "token_request", a.token_request,
                                       "[tokens]", DType::kInt32, tokens,
                                       "q's tokens"));
  DSA_RETURN_IF_ERROR(CheckTensor(op, "topk_indices", a.topk_indices, 2,
                                  "[tokens, topk]", {DType::kInt32}));
  DSA_RETURN_IF_ERROR(CheckDim(op, "topk_indices", a.topk_indices, 0, "tokens",
                               tokens, "q's tokens"));
  if (a.qk_nope_head_dim < 0) {
    return InvalidArgumentError(StrCat(op, ": qk_nope_head_dim is ",
                                       a.qk_nope_head_dim, ", expected >= 0"));
  }
  DSA_RETURN_IF_ERROR(CheckPositiveScale(op, "softmax_scale", a.softmax_scale));
  DSA_RETURN_IF_ERROR(CheckAttentionOutput(op, a.output, tokens, heads));
  return CheckKvBProj(op, a.kv_b_proj, heads, a.qk_nope_head_dim,
                      a.output.dim(2), f.kv_lora_rank);
}

// The optional W_UK and W_UV split out of kv_b_proj: both or neither, in
// kv_b_proj's dtype, [heads, qk_nope, kv_lora] and [heads, v, kv_lora].
static Status CheckSplitKvBProj(std::string_view op,
                                const DenseMhaPrefill::Args& a, int64_t heads,
                                int64_t qk_nope) {
  const bool w_uk = !a.w_uk.absent();
  const bool w_uv = !a.w_uv.absent();
  if (w_uk != w_uv) {
    return InvalidArgumentError(
        StrCat(op, ": ", w_uk ? "w_uk" : "w_uv", " is given without ",
               w_uk ? "w_uv" : "w_uk", "; pass both split weights or neither"));
  }
  if (!w_uk) return OkStatus();
  const int64_t lora = a.kv_b_proj.dim(1);
  const struct {
    const char* name;
    const TensorView* t;
    const char* layout;
    const char* rows;
    int64_t expected_rows;
    const char* why;
  } split[] = {
      {"w_uk", &a.w_uk, "[heads, qk_nope_head_dim, kv_lora_rank]", "qk_nope",
       qk_nope, "q's head dim - rope_dim"},
      {"w_uv", &a.w_uv, "[heads, v_head_dim, kv_lora_rank]", "v_head_dim",
       a.output.dim(2), "output's v_head_dim"},
  };
  for (const auto& w : split) {
    DSA_RETURN_IF_ERROR(
        CheckTensor(op, w.name, *w.t, 3, w.layout, {a.kv_b_proj.dtype}));
    DSA_RETURN_IF_ERROR(
        CheckDim(op, w.name, *w.t, 0, "heads", heads, "q's heads"));
    DSA_RETURN_IF_ERROR(
        CheckDim(op, w.name, *w.t, 1, w.rows, w.expected_rows, w.why));
    DSA_RETURN_IF_ERROR(CheckDim(op, w.name, *w.t, 2, "kv_lora_rank", lora,
                                 "kv_b_proj's kv_lora_rank"));
  }
  return OkStatus();
}

// Ranks, dtypes, shapes and strides.
static Status ValidateDenseMhaPrefillShapes(const DenseMhaPrefill::Args& a) {
  constexpr std::string_view op = DenseMhaPrefill::kName;
  const LatentCacheFormat& f = a.cache_format;
  if (a.reserve_only != 0 && a.reserve_only != 1) {
    return InvalidArgumentError(
        StrCat(op, ": reserve_only is ", a.reserve_only, ", expected 0 or 1"));
  }
  if (a.reserve_only == 1 && a.seq_lens_host.absent()) {
    return InvalidArgumentError(
        StrCat(op,
               ": reserve_only needs seq_lens_host and "
               "query_start_loc_host (a reservation reads no device "
               "tensor)"));
  }
  DSA_RETURN_IF_ERROR(CheckLatentCache(op, a.kv_cache, f));
  DSA_RETURN_IF_ERROR(
      CheckTensor(op, "q", a.q, 3,
                  "[tokens, heads, qk_nope_head_dim + rope_dim]", kFloatTypes));
  const int64_t tokens = a.q.dim(0);
  const int64_t heads = a.q.dim(1);
  if (heads < 1) {
    return InvalidArgumentError(
        StrCat(op, ": q has 0 heads, expected at least 1"));
  }
  if (a.q.dim(2) < f.rope_dim) {
    return InvalidArgumentError(StrCat(
        op, ": q head dim is ", a.q.dim(2),
        ", expected qk_nope_head_dim + rope_dim with rope_dim ", f.rope_dim));
  }
  const int64_t qk_nope = a.q.dim(2) - f.rope_dim;
  DSA_RETURN_IF_ERROR(CheckBlockTable(op, a.block_table, a.seq_lens));
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "query_start_loc", a.query_start_loc,
                                       "[num_requests + 1]", DType::kInt32,
                                       a.block_table.dim(0) + 1,
                                       "block_table's num_requests + 1"));
  DSA_RETURN_IF_ERROR(CheckPositiveScale(op, "softmax_scale", a.softmax_scale));
  DSA_RETURN_IF_ERROR(CheckAttentionOutput(op, a.output, tokens, heads));
  DSA_RETURN_IF_ERROR(CheckKvBProj(op, a.kv_b_proj, heads, qk_nope,
                                   a.output.dim(2), f.kv_lora_rank));
  DSA_RETURN_IF_ERROR(CheckSplitKvBProj(op, a, heads, qk_nope));
  // The optional host copies: both or neither, shaped as the originals.
  const bool seq_lens_host = !a.seq_lens_host.absent();
  const bool starts_host = !a.query_start_loc_host.absent();
  if (seq_lens_host != starts_host) {
    return InvalidArgumentError(StrCat(
        op, ": ", seq_lens_host ? "seq_lens_host" : "query_start_loc_host",
        " is given without ",
        seq_lens_host ? "query_start_loc_host" : "seq_lens_host",
        "; pass both host copies or neither"));
  }
  if (!seq_lens_host) return OkStatus();
  const int64_t requests = a.block_table.dim(0);
  DSA_RETURN_IF_ERROR(CheckIndexVector(op, "seq_lens_host", a.seq_lens_host,
                                       "[num_requests]", DType::kInt32,
                                       requests, "block_table's num_requests"));
  return CheckIndexVector(op, "query_start_loc_host", a.query_start_loc_host,
                          "[num_requests + 1]", DType::kInt32, requests + 1,
                          "block_table's num_requests + 1");
}

// ---------------------------------------------------------------------------
// Validate = the shape checks above, then the aliasing check over every
// tensor of the op's argument list (kernel_api.h), outputs and in-place
// caches marked as written.

#define DSA_ALIAS_WRITTEN_IN false
#define DSA_ALIAS_WRITTEN_OUT true
#define DSA_ALIAS_WRITTEN_INOUT true
#define DSA_ALIAS_TENSOR(name, direction) \
  NamedView{#name, &a.name, DSA_ALIAS_WRITTEN_##direction},
#define DSA_ALIAS_SKIP3(x, y, z)
#define DSA_ALIAS_SKIP1(x)
#define DSA_DEFINE_VALIDATE(CxxName, LIST, PREFIX)                           \
  Status CxxName::Validate(const Args& a) {                                  \
    DSA_RETURN_IF_ERROR(Validate##CxxName##Shapes(a));                       \
    return CheckNoAliasing(kName, {LIST(DSA_ALIAS_TENSOR, DSA_ALIAS_SKIP3,   \
                                        DSA_ALIAS_SKIP3, DSA_ALIAS_SKIP1)}); \
  }
DSA_ATTENTION_OPS(DSA_DEFINE_VALIDATE)
#undef DSA_DEFINE_VALIDATE
#undef DSA_ALIAS_SKIP1
#undef DSA_ALIAS_SKIP3
#undef DSA_ALIAS_TENSOR

}  // namespace dsa::attention
