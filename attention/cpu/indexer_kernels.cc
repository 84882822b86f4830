// CPU kernels of the lightning indexer: K write (fused LayerNorm + rope +
// the optional roundings and Hadamard rotation + fp8 quantisation + cache
// write + top-k buffer clear), Q preparation,
// logits over the paged K cache, and the per-row top-k.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention/cpu/kernel_util.h"
#include "attention/cpu/kernels.h"
#include "attention/cpu/parallel.h"
#include "attention/dtypes/fp8.h"
#include "attention/dtypes/hadamard.h"
#include "attention/dtypes/layer_norm.h"
#include "attention/ops.h"
#include "platform/core_status.h"

namespace dsa::attention::cpu {
namespace {

// positions[t] must index cos_sin_cache for every token that is written
// (tokens whose slot is -1 are padding and may carry any position).
Status CheckPositions(std::string_view op, const TensorView& positions,
                      int64_t max_position, const TensorView* slot_mapping) {
  for (int64_t t = 0; t < positions.dim(0); ++t) {
    if (slot_mapping != nullptr && LoadIndex<int64_t>(*slot_mapping, t) == -1) {
      continue;
    }
    const int64_t pos = LoadIndex<int64_t>(positions, t);
    if (pos < 0 || pos >= max_position) {
      return OutOfRangeError(StrCat(op, ": positions[", t, "] is ", pos,
                                    ", outside cos_sin_cache's ", max_position,
                                    " positions"));
    }
  }
  return OkStatus();
}

// Key windows [start, end) of each row: 0 <= start <= end <= limit, where
// limit is the row's request length and (for logits) the logits width.
Status CheckWindows(std::string_view op, const TensorView& key_start,
                    const TensorView& key_end, const TensorView* request,
                    const TensorView* seq_lens, int64_t width) {
  for (int64_t i = 0; i < key_start.dim(0); ++i) {
    const int64_t ks = LoadIndex<int32_t>(key_start, i);
    const int64_t ke = LoadIndex<int32_t>(key_end, i);
    int64_t limit = width;
    if (request != nullptr) {
      limit = std::min<int64_t>(
          limit,
          LoadIndex<int32_t>(*seq_lens, LoadIndex<int32_t>(*request, i)));
    }
    if (ks < 0 || ks > ke || ke > limit) {
      return OutOfRangeError(StrCat(
          op, ": row ", i, " has key window [", ks, ", ", ke,
          "), expected 0 <= start <= end <= ", limit,
          request != nullptr ? " (min of its seq_len and the logits width)"
                             : " (the logits width)"));
    }
  }
  return OkStatus();
}

}  // namespace

Status IndexerKWriteCpu(const ExecutionContext& ctx,
                        const IndexerKWrite::Args& a) {
  constexpr std::string_view op = IndexerKWrite::kName;
  DSA_RETURN_IF_ERROR(IndexerKWrite::Validate(a));
  const int64_t tokens = a.k.dim(0);
  const int64_t head_dim = a.k.dim(1);
  const int64_t rope_dim = a.cos_sin_cache.dim(1);
  const IndexerKCacheRef cache(a.k_cache);
  DSA_RETURN_IF_ERROR(
      CheckSlotMapping(op, a.slot_mapping, cache.num_slots(a.k_cache)));
  DSA_RETURN_IF_ERROR(
      CheckPositions(op, a.positions, a.cos_sin_cache.dim(0), &a.slot_mapping));

  // The top-k buffer clear: every token's row, padding included.
  // (An empty buffer may have no data: never offset a null pointer.)
  if (!a.topk_indices.empty()) {
    int32_t* topk = a.topk_indices.data_as<int32_t>();
    for (int64_t t = 0; t < tokens; ++t) {
      int32_t* row = topk + a.topk_indices.offset(t, 0);
      std::fill(row, row + a.topk_indices.dim(1), -1);
    }
  }

  std::vector<float> weight(head_dim), bias(head_dim);
  LoadFloats(a.ln_weight, 0, head_dim, weight.data());
  LoadFloats(a.ln_bias, 0, head_dim, bias.data());
  const Fp8Traits traits = Fp8TraitsOf(a.cache_dtype);
  const float divisor = Fp8ScaleDivisor(a.cache_dtype, a.fp8_scale_divisor);
  const float* cos_sin = a.cos_sin_cache.data_as<const float>();

  ParallelFor(tokens, ResolveNumThreads(ctx.num_threads), 32,
              [&](int, int64_t begin, int64_t end) {
                std::vector<float> y(head_dim);
                for (int64_t t = begin; t < end; ++t) {
                  const int64_t slot = LoadIndex<int64_t>(a.slot_mapping, t);
                  if (slot == -1) continue;
                  LoadFloats(a.k, a.k.offset(t, 0), head_dim, y.data());
                  // Two-pass statistics in double (immune to the cancellation a
                  // one-pass fp32 variance suffers on offset inputs), summed in
                  // the order the GPU kernel uses
                  // (attention/dtypes/layer_norm.h), so both write the same
                  // bytes.
                  float mean_f, inv_std;
                  LayerNormStats(y.data(), head_dim, a.ln_eps, &mean_f,
                                 &inv_std);
                  for (int64_t d = 0; d < head_dim; ++d) {
                    y[d] = (y[d] - mean_f) * inv_std * weight[d] + bias[d];
                  }
                  RoundInPlace(y.data(), head_dim, a.intermediate_dtype);
                  const int64_t pos = LoadIndex<int64_t>(a.positions, t);
                  ApplyRope(y.data(), cos_sin + a.cos_sin_cache.offset(pos, 0),
                            rope_dim, a.rope_style);
                  RoundInPlace(y.data(), head_dim, a.intermediate_dtype);
                  if (a.hadamard_rotation != 0) {
                    HadamardRotate(y.data(), head_dim);
                    RoundInPlace(y.data(), head_dim, a.intermediate_dtype);
                  }
                  const float scale = QuantizeUe8m0(
                      y.data(), head_dim, traits, divisor, cache.values(slot));
                  StoreUnalignedFloat(cache.scale(slot), scale);
                }
              });
  return OkStatus();
}

Status IndexerQCpu(const ExecutionContext& ctx, const IndexerQ::Args& a) {
  constexpr std::string_view op = IndexerQ::kName;
  DSA_RETURN_IF_ERROR(IndexerQ::Validate(a));
  const int64_t tokens = a.q.dim(0);
  const int64_t heads = a.q.dim(1);
  const int64_t head_dim = a.q.dim(2);
  const int64_t rope_dim = a.cos_sin_cache.dim(1);
  DSA_RETURN_IF_ERROR(CheckPositions(op, a.positions, a.cos_sin_cache.dim(0),
                                     /*slot_mapping=*/nullptr));
  const Fp8Traits traits = Fp8TraitsOf(a.q_fp8.dtype);
  const float divisor = Fp8ScaleDivisor(a.q_fp8.dtype, a.fp8_scale_divisor);
  const float* cos_sin = a.cos_sin_cache.data_as<const float>();
  // head_dim^-0.5 * heads^-0.5, rounded once.
  const float weight_scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim) *
                                         static_cast<double>(heads)));
  float* head_weights = a.head_weights.data_as<float>();
  uint8_t* q_fp8 = a.q_fp8.data_as<uint8_t>();

  ParallelFor(tokens * heads, ResolveNumThreads(ctx.num_threads), 64,
              [&](int, int64_t begin, int64_t end) {
                std::vector<float> v(head_dim);
                for (int64_t item = begin; item < end; ++item) {
                  const int64_t t = item / heads;
                  const int64_t h = item % heads;
                  LoadFloats(a.q, a.q.offset(t, h), head_dim, v.data());
                  const int64_t pos = LoadIndex<int64_t>(a.positions, t);
                  ApplyRope(v.data(), cos_sin + a.cos_sin_cache.offset(pos, 0),
                            rope_dim, a.rope_style);
                  RoundInPlace(v.data(), head_dim, a.intermediate_dtype);
                  if (a.hadamard_rotation != 0) {
                    HadamardRotate(v.data(), head_dim);
                    RoundInPlace(v.data(), head_dim, a.intermediate_dtype);
                  }
                  const float scale =
                      QuantizeUe8m0(v.data(), head_dim, traits, divisor,
                                    q_fp8 + a.q_fp8.offset(t, h));
                  head_weights[a.head_weights.offset(t, h)] =
                      LoadFloat(a.weights, a.weights.offset(t, h)) * scale *
                      weight_scale;
                }
              });
  return OkStatus();
}

Status IndexerLogitsCpu(const ExecutionContext& ctx,
                        const IndexerLogits::Args& a) {
  constexpr std::string_view op = IndexerLogits::kName;
  DSA_RETURN_IF_ERROR(IndexerLogits::Validate(a));
  const int64_t rows = a.q_fp8.dim(0);
  const int64_t heads = a.q_fp8.dim(1);
  const int64_t head_dim = a.q_fp8.dim(2);
  const int64_t width = a.logits.dim(1);
  const IndexerKCacheRef cache(a.k_cache);
  DSA_RETURN_IF_ERROR(CheckBlockTableValues(
      op, a.block_table, a.seq_lens, a.k_cache.dim(0), cache.block_size));
  DSA_RETURN_IF_ERROR(CheckRequestIndices(op, "row_request", a.row_request,
                                          a.block_table.dim(0)));
  DSA_RETURN_IF_ERROR(CheckWindows(op, a.row_key_start, a.row_key_end,
                                   &a.row_request, &a.seq_lens, width));

  // Zero columns: nothing to write, and the buffer may have no data.
  if (a.logits.empty()) return OkStatus();

  const Fp8DecodeTable& table = Fp8Table(a.q_fp8.dtype);
  const uint8_t* q_codes = a.q_fp8.data_as<const uint8_t>();
  const float* head_weights = a.head_weights.data_as<const float>();
  float* logits = a.logits.data_as<float>();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Keys are dequantised a tile at a time, transposed ([dim][key]), and
  // reused by every row of a run of rows of the same request (at most
  // kMaxRun rows, to bound scratch). Scores are computed in blocks of
  // kHeadBlock heads x kKeyBlock keys whose accumulators stay in registers:
  // each step broadcasts one q value per head against a vector of keys, so
  // no horizontal sums are needed.
  constexpr int64_t kKeyTile = 64;
  constexpr int64_t kMaxRun = 16;
  constexpr int64_t kHeadBlock = kScoreRows;
  constexpr int64_t kKeyBlock = kScoreCols;
  // Heads padded with zero queries (and zero weights) to whole blocks.
  const int64_t padded_heads =
      (heads + kHeadBlock - 1) / kHeadBlock * kHeadBlock;

  ParallelFor(
      rows, ResolveNumThreads(ctx.num_threads), 4,
      [&](int, int64_t begin, int64_t end) {
        std::vector<float> q(kMaxRun * padded_heads * head_dim, 0.0f);
        std::vector<float> w(kMaxRun * padded_heads, 0.0f);
        // kKeyBlock columns of padding: a block that starts near the tile's end
        // reads past it into lanes whose results are discarded.
        constexpr int64_t kKeyStride = kKeyTile + kKeyBlock;
        std::vector<float> keys_t(head_dim * kKeyStride, 0.0f);
        float key_scale[kKeyStride] = {};
        for (int64_t run_begin = begin; run_begin < end;) {
          const int32_t request = LoadIndex<int32_t>(a.row_request, run_begin);
          int64_t run_end = run_begin + 1;
          while (run_end < end && run_end - run_begin < kMaxRun &&
                 LoadIndex<int32_t>(a.row_request, run_end) == request) {
            ++run_end;
          }
          int64_t lo = width, hi = 0;
          for (int64_t i = run_begin; i < run_end; ++i) {
            const int64_t r = i - run_begin;
            const int64_t ks = LoadIndex<int32_t>(a.row_key_start, i);
            const int64_t ke = LoadIndex<int32_t>(a.row_key_end, i);
            float* out = logits + a.logits.offset(i, 0);
            std::fill(out, out + ks, kNegInf);
            std::fill(out + ke, out + width, kNegInf);
            if (ks < ke) {
              lo = std::min(lo, ks);
              hi = std::max(hi, ke);
            }
            for (int64_t h = 0; h < heads; ++h) {
              const uint8_t* codes = q_codes + a.q_fp8.offset(i, h);
              float* qh = q.data() + (r * padded_heads + h) * head_dim;
              for (int64_t d = 0; d < head_dim; ++d)
                qh[d] = table.value[codes[d]];
              w[r * padded_heads + h] =
                  head_weights[a.head_weights.offset(i, h)];
            }
          }
          for (int64_t tile = lo; tile < hi; tile += kKeyTile) {
            const int64_t tile_end = std::min(hi, tile + kKeyTile);
            for (int64_t j = tile; j < tile_end; ++j) {
              const int64_t slot =
                  SlotOf(a.block_table, request, j, cache.block_size);
              const uint8_t* codes = cache.values(slot);
              for (int64_t d = 0; d < head_dim; ++d) {
                keys_t[d * kKeyStride + (j - tile)] = table.value[codes[d]];
              }
              key_scale[j - tile] = LoadUnalignedFloat(cache.scale(slot));
            }
            for (int64_t i = run_begin; i < run_end; ++i) {
              const int64_t r = i - run_begin;
              const int64_t j0 = std::max<int64_t>(
                  tile, LoadIndex<int32_t>(a.row_key_start, i));
              const int64_t j1 = std::min<int64_t>(
                  tile_end, LoadIndex<int32_t>(a.row_key_end, i));
              float* out = logits + a.logits.offset(i, 0);
              const float* qr = q.data() + r * padded_heads * head_dim;
              const float* wr = w.data() + r * padded_heads;
              for (int64_t j = j0; j < j1; j += kKeyBlock) {
                const int64_t col = j - tile;
                float logit[kKeyBlock] = {};
                for (int64_t h0 = 0; h0 < padded_heads; h0 += kHeadBlock) {
                  float acc[kHeadBlock][kKeyBlock];
                  ScoreBlock(qr + h0 * head_dim, head_dim, keys_t.data() + col,
                             kKeyStride, head_dim, acc);
                  for (int64_t hh = 0; hh < kHeadBlock; ++hh) {
                    for (int64_t l = 0; l < kKeyBlock; ++l) {
                      const float s = acc[hh][l] * key_scale[col + l];
                      if (s > 0.0f) logit[l] += s * wr[h0 + hh];
                    }
                  }
                }
                const int64_t n = std::min(kKeyBlock, j1 - j);
                std::copy(logit, logit + n, out + j);
              }
            }
          }
          run_begin = run_end;
        }
      });
  return OkStatus();
}

Status IndexerTopKCpu(const ExecutionContext& ctx, const IndexerTopK::Args& a) {
  constexpr std::string_view op = IndexerTopK::kName;
  DSA_RETURN_IF_ERROR(IndexerTopK::Validate(a));
  const int64_t rows = a.logits.dim(0);
  const int64_t topk = a.topk_indices.dim(1);
  DSA_RETURN_IF_ERROR(CheckWindows(op, a.row_key_start, a.row_key_end, nullptr,
                                   nullptr, a.logits.dim(1)));
  const float* logits = a.logits.data_as<const float>();
  int32_t* out_base = a.topk_indices.data_as<int32_t>();

  ParallelFor(rows, ResolveNumThreads(ctx.num_threads), 8,
              [&](int, int64_t begin, int64_t end) {
                std::vector<int32_t> candidates;
                for (int64_t i = begin; i < end; ++i) {
                  const int32_t ks = LoadIndex<int32_t>(a.row_key_start, i);
                  const int32_t ke = LoadIndex<int32_t>(a.row_key_end, i);
                  int32_t* out = out_base + a.topk_indices.offset(i, 0);
                  const int64_t n = ke - ks;
                  if (n <= topk) {
                    // Every key is selected: no scoring order needed.
                    for (int64_t j = 0; j < n; ++j)
                      out[j] = static_cast<int32_t>(ks + j);
                    std::fill(out + n, out + topk, -1);
                    continue;
                  }
                  const float* row = logits + a.logits.offset(i, 0);
                  // A strict total order (value descending, NaN last, then
                  // lower index), so the selected set is unique and independent
                  // of the algorithm.
                  auto better = [row](int32_t x, int32_t y) {
                    const float vx = row[x];
                    const float vy = row[y];
                    const bool nan_x = std::isnan(vx);
                    const bool nan_y = std::isnan(vy);
                    if (nan_x != nan_y) return nan_y;
                    if (!nan_x && vx != vy) return vx > vy;
                    return x < y;
                  };
                  candidates.resize(n);
                  for (int64_t j = 0; j < n; ++j) {
                    candidates[j] = static_cast<int32_t>(ks + j);
                  }
                  std::nth_element(candidates.begin(),
                                   candidates.begin() + topk, candidates.end(),
                                   better);
                  std::sort(candidates.begin(), candidates.begin() + topk);
                  std::copy(candidates.begin(), candidates.begin() + topk, out);
                }
              });
  return OkStatus();
}

}  // namespace dsa::attention::cpu
