// CPU kernels of the MLA side: latent cache write, sparse MLA in the
// absorbed (MQA) form, and dense causal MHA prefill over keys and values
// decompressed from the latent cache.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention/cpu/kernel_util.h"
#include "attention/cpu/kernels.h"
#include "attention/cpu/parallel.h"
#include "attention/dtypes/dtype.h"
#include "attention/ops.h"
#include "platform/core_status.h"

namespace dsa::attention::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

const Fp8DecodeTable* TableFor(const LatentCacheFormat& f) {
  return IsFp8(f.dtype) ? &Fp8Table(f.dtype) : nullptr;
}

// Online-softmax state of one head over a stream of key tiles (the
// FlashAttention recurrence), so a row never needs all its scores at once.
struct SoftmaxAccumulator {
  float max = kNegInf;
  float sum = 0.0f;
  // Rescales `acc` (n values) for a new running max and returns the
  // multiplier for the tile's exponentials.
  void Rescale(float tile_max, float* acc, int64_t n) {
    if (tile_max <= max) return;
    const float correction = max == kNegInf ? 0.0f : std::exp(max - tile_max);
    if (correction != 1.0f) {
      sum *= correction;
      for (int64_t i = 0; i < n; ++i) acc[i] *= correction;
    }
    max = tile_max;
  }
};

}  // namespace

Status MlaCacheWriteCpu(const ExecutionContext& ctx,
                        const MlaCacheWrite::Args& a) {
  constexpr std::string_view op = MlaCacheWrite::kName;
  DSA_RETURN_IF_ERROR(MlaCacheWrite::Validate(a));
  const int64_t tokens = a.kv_c.dim(0);
  const int64_t lora = a.cache_format.kv_lora_rank;
  const int64_t rope = a.cache_format.rope_dim;
  const LatentCacheRef cache(a.kv_cache, a.cache_format);
  DSA_RETURN_IF_ERROR(CheckSlotMapping(op, a.slot_mapping,
                                       a.kv_cache.dim(0) * a.kv_cache.dim(1)));
  ParallelFor(tokens, ResolveNumThreads(ctx.num_threads), 32,
              [&](int, int64_t begin, int64_t end) {
                std::vector<float> kv_c(lora), k_pe(rope);
                for (int64_t t = begin; t < end; ++t) {
                  const int64_t slot = LoadIndex<int64_t>(a.slot_mapping, t);
                  if (slot == -1) continue;
                  LoadFloats(a.kv_c, a.kv_c.offset(t, 0), lora, kv_c.data());
                  LoadFloats(a.k_pe, a.k_pe.offset(t, 0), rope, k_pe.data());
                  cache.Encode(slot, kv_c.data(), k_pe.data());
                }
              });
  return OkStatus();
}

Status SparseMlaCpu(const ExecutionContext& ctx, const SparseMla::Args& a) {
  constexpr std::string_view op = SparseMla::kName;
  DSA_RETURN_IF_ERROR(SparseMla::Validate(a));
  const LatentCacheFormat& f = a.cache_format;
  const int64_t tokens = a.q.dim(0);
  const int64_t heads = a.q.dim(1);
  const int64_t lora = f.kv_lora_rank;
  const int64_t dim = lora + f.rope_dim;
  const int64_t v_dim = a.output.dim(2);
  const int64_t nope = a.qk_nope_head_dim;
  const int64_t topk = a.topk_indices.dim(1);
  const int64_t block_size = a.kv_cache.dim(1);
  DSA_RETURN_IF_ERROR(CheckBlockTableValues(op, a.block_table, a.seq_lens,
                                            a.kv_cache.dim(0), block_size));
  DSA_RETURN_IF_ERROR(CheckRequestIndices(op, "token_request", a.token_request,
                                          a.block_table.dim(0)));
  const int32_t* indices = a.topk_indices.data_as<const int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    const int32_t r = LoadIndex<int32_t>(a.token_request, t);
    const int64_t seq_len = LoadIndex<int32_t>(a.seq_lens, r);
    for (int64_t j = 0; j < topk; ++j) {
      const int64_t idx = indices[a.topk_indices.offset(t, j)];
      if (idx != -1 && (idx < 0 || idx >= seq_len)) {
        return OutOfRangeError(StrCat(op, ": topk_indices[", t, ", ", j,
                                      "] is ", idx, ", outside request ", r,
                                      "'s ", seq_len,
                                      " tokens (-1 marks padding)"));
      }
    }
  }

  const LatentCacheRef cache(a.kv_cache, f);
  const Fp8DecodeTable* table = TableFor(f);
  const int threads = ResolveNumThreads(ctx.num_threads);
  constexpr int64_t kKeyTile = 32;
  // Tokens per round: phase A writes their latent outputs, phase B applies
  // W_UV head by head so each weight row is converted once per round. A
  // round's latent outputs are kept within 16 MiB; fewer, larger rounds
  // mean fewer thread start-ups.
  const int64_t token_chunk = std::max<int64_t>(
      1, std::min<int64_t>(tokens, (int64_t{4} << 20) / (heads * lora)));
  std::vector<float> latent_out(token_chunk * heads * lora);

  for (int64_t chunk = 0; chunk < tokens; chunk += token_chunk) {
    const int64_t chunk_len = std::min(token_chunk, tokens - chunk);
    // Phase A: attention over the latent cache, per token.
    ParallelFor(chunk_len, threads, 1, [&](int, int64_t begin, int64_t end) {
      std::vector<float> q(heads * dim), keys(kKeyTile * dim);
      std::vector<float> acc(heads * lora), scores(kKeyTile);
      std::vector<SoftmaxAccumulator> state(heads);
      std::vector<int64_t> slots(kKeyTile);
      for (int64_t c = begin; c < end; ++c) {
        const int64_t t = chunk + c;
        const int32_t r = LoadIndex<int32_t>(a.token_request, t);
        for (int64_t h = 0; h < heads; ++h) {
          LoadFloats(a.q, a.q.offset(t, h), dim, q.data() + h * dim);
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(state.begin(), state.end(), SoftmaxAccumulator());
        // topk 0: no indices, and possibly no data to offset.
        const int32_t* row =
            topk > 0 ? indices + a.topk_indices.offset(t, 0) : nullptr;
        int64_t j = 0;
        while (j < topk) {
          int64_t n = 0;
          for (; j < topk && n < kKeyTile; ++j) {
            if (row[j] == -1) continue;
            slots[n++] = SlotOf(a.block_table, r, row[j], block_size);
          }
          if (n == 0) break;
          for (int64_t k = 0; k < n; ++k) {
            cache.Decode(slots[k], table, keys.data() + k * dim);
          }
          for (int64_t h = 0; h < heads; ++h) {
            float tile_max = kNegInf;
            for (int64_t k = 0; k < n; ++k) {
              scores[k] = a.softmax_scale *
                          Dot(q.data() + h * dim, keys.data() + k * dim, dim);
              tile_max = std::max(tile_max, scores[k]);
            }
            float* acc_h = acc.data() + h * lora;
            SoftmaxAccumulator& s = state[h];
            s.Rescale(tile_max, acc_h, lora);
            for (int64_t k = 0; k < n; ++k) {
              const float p = std::exp(scores[k] - s.max);
              s.sum += p;
              Axpy(p, keys.data() + k * dim, acc_h, lora);
            }
          }
        }
        float* out = latent_out.data() + c * heads * lora;
        for (int64_t h = 0; h < heads; ++h) {
          // No valid index: the row attends to nothing and outputs zeros.
          const float inv = state[h].sum > 0.0f ? 1.0f / state[h].sum : 0.0f;
          for (int64_t d = 0; d < lora; ++d) {
            out[h * lora + d] = acc[h * lora + d] * inv;
          }
        }
      }
    });
    // Phase B: output[t, h] = W_UV[h] latent_out[t, h].
    ParallelFor(heads, threads, 1, [&](int, int64_t begin, int64_t end) {
      std::vector<float> w(lora), out(chunk_len * v_dim);
      for (int64_t h = begin; h < end; ++h) {
        for (int64_t o = 0; o < v_dim; ++o) {
          LoadFloats(a.kv_b_proj,
                     a.kv_b_proj.offset(h * (nope + v_dim) + nope + o, 0), lora,
                     w.data());
          for (int64_t c = 0; c < chunk_len; ++c) {
            out[c * v_dim + o] =
                Dot(w.data(), latent_out.data() + (c * heads + h) * lora, lora);
          }
        }
        for (int64_t c = 0; c < chunk_len; ++c) {
          StoreFloats(a.output, a.output.offset(chunk + c, h), v_dim,
                      out.data() + c * v_dim);
        }
      }
    });
  }
  return OkStatus();
}

namespace {

// query_start_loc: starts at 0, non-decreasing, ends at `tokens`, and no
// request has more query tokens than tokens in total.
Status CheckQueryStartLoc(std::string_view op,
                          const TensorView& query_start_loc,
                          const TensorView& seq_lens, int64_t tokens) {
  const int64_t requests = seq_lens.dim(0);
  if (LoadIndex<int32_t>(query_start_loc, 0) != 0 ||
      LoadIndex<int32_t>(query_start_loc, requests) != tokens) {
    return OutOfRangeError(StrCat(op, ": query_start_loc runs from ",
                                  LoadIndex<int32_t>(query_start_loc, 0),
                                  " to ",
                                  LoadIndex<int32_t>(query_start_loc, requests),
                                  ", expected 0 to ", tokens, " (q's tokens)"));
  }
  for (int64_t r = 0; r < requests; ++r) {
    const int64_t n = int64_t{LoadIndex<int32_t>(query_start_loc, r + 1)} -
                      LoadIndex<int32_t>(query_start_loc, r);
    const int64_t seq_len = LoadIndex<int32_t>(seq_lens, r);
    if (n < 0 || n > seq_len) {
      return OutOfRangeError(
          StrCat(op, ": request ", r, " has ", n,
                 " query tokens (query_start_loc), expected 0 to its seq_len ",
                 seq_len));
    }
  }
  return OkStatus();
}

}  // namespace

Status DenseMhaPrefillCpu(const ExecutionContext& ctx,
                          const DenseMhaPrefill::Args& a) {
  constexpr std::string_view op = DenseMhaPrefill::kName;
  DSA_RETURN_IF_ERROR(DenseMhaPrefill::Validate(a));
  const LatentCacheFormat& f = a.cache_format;
  const int64_t tokens = a.q.dim(0);
  const int64_t heads = a.q.dim(1);
  const int64_t qk_dim = a.q.dim(2);
  const int64_t lora = f.kv_lora_rank;
  const int64_t rope = f.rope_dim;
  const int64_t dim = lora + rope;
  const int64_t nope = qk_dim - rope;
  const int64_t v_dim = a.output.dim(2);
  const int64_t block_size = a.kv_cache.dim(1);
  const int64_t requests = a.block_table.dim(0);
  DSA_RETURN_IF_ERROR(CheckBlockTableValues(op, a.block_table, a.seq_lens,
                                            a.kv_cache.dim(0), block_size));
  DSA_RETURN_IF_ERROR(
      CheckQueryStartLoc(op, a.query_start_loc, a.seq_lens, tokens));
  if (a.reserve_only) return OkStatus();  // nothing to make ready here

  const LatentCacheRef cache(a.kv_cache, f);
  const Fp8DecodeTable* table = TableFor(f);
  const int threads = ResolveNumThreads(ctx.num_threads);
  // Keys decompressed per weight-row pass: a W row is reused for this many
  // keys while it sits in L1.
  constexpr int64_t kKeyTile = 8;

  for (int64_t r = 0; r < requests; ++r) {
    const int64_t q_begin = LoadIndex<int32_t>(a.query_start_loc, r);
    const int64_t n = LoadIndex<int32_t>(a.query_start_loc, r + 1) - q_begin;
    if (n == 0) continue;
    const int64_t seq_len = LoadIndex<int32_t>(a.seq_lens, r);
    const int64_t context = seq_len - n;
    std::vector<float> latent(seq_len * dim);
    ParallelFor(seq_len, threads, 64, [&](int, int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        cache.Decode(SlotOf(a.block_table, r, j, block_size), table,
                     latent.data() + j * dim);
      }
    });

    // One head at a time: decompress its keys and values, then attend. With
    // fewer heads than threads the work inside a head is split instead.
    const bool split_heads = heads >= threads;
    // W_UK[h] and W_UV[h]: the caller's split copies when given, else
    // kv_b_proj's row blocks (the same values).
    const bool split = !a.w_uk.absent();
    auto run_head = [&](int64_t h, int inner_threads) {
      std::vector<float> w_uk(nope * lora), w_uv(v_dim * lora);
      const int64_t row0 = h * (nope + v_dim);
      for (int64_t o = 0; o < nope; ++o) {
        if (split) {
          LoadFloats(a.w_uk, a.w_uk.offset(h, o), lora, w_uk.data() + o * lora);
        } else {
          LoadFloats(a.kv_b_proj, a.kv_b_proj.offset(row0 + o, 0), lora,
                     w_uk.data() + o * lora);
        }
      }
      for (int64_t o = 0; o < v_dim; ++o) {
        if (split) {
          LoadFloats(a.w_uv, a.w_uv.offset(h, o), lora, w_uv.data() + o * lora);
        } else {
          LoadFloats(a.kv_b_proj, a.kv_b_proj.offset(row0 + nope + o, 0), lora,
                     w_uv.data() + o * lora);
        }
      }
      std::vector<float> k_nope(seq_len * nope), value(seq_len * v_dim);
      ParallelFor(
          (seq_len + kKeyTile - 1) / kKeyTile, inner_threads, 4,
          [&](int, int64_t begin, int64_t end) {
            for (int64_t tile = begin; tile < end; ++tile) {
              const int64_t j0 = tile * kKeyTile;
              const int64_t j1 = std::min(seq_len, j0 + kKeyTile);
              for (int64_t o = 0; o < nope; ++o) {
                const float* w = w_uk.data() + o * lora;
                for (int64_t j = j0; j < j1; ++j) {
                  k_nope[j * nope + o] = Dot(w, latent.data() + j * dim, lora);
                }
              }
              for (int64_t o = 0; o < v_dim; ++o) {
                const float* w = w_uv.data() + o * lora;
                for (int64_t j = j0; j < j1; ++j) {
                  value[j * v_dim + o] = Dot(w, latent.data() + j * dim, lora);
                }
              }
            }
          });
      ParallelFor(n, inner_threads, 4, [&](int, int64_t begin, int64_t end) {
        std::vector<float> q(qk_dim), scores(seq_len), acc(v_dim);
        for (int64_t i = begin; i < end; ++i) {
          const int64_t t = q_begin + i;
          const int64_t last = context + i;  // causal: keys [0, last]
          LoadFloats(a.q, a.q.offset(t, h), qk_dim, q.data());
          float max_score = kNegInf;
          for (int64_t j = 0; j <= last; ++j) {
            scores[j] =
                a.softmax_scale *
                (Dot(q.data(), k_nope.data() + j * nope, nope) +
                 Dot(q.data() + nope, latent.data() + j * dim + lora, rope));
            max_score = std::max(max_score, scores[j]);
          }
          std::fill(acc.begin(), acc.end(), 0.0f);
          float sum = 0.0f;
          for (int64_t j = 0; j <= last; ++j) {
            const float p = std::exp(scores[j] - max_score);
            sum += p;
            Axpy(p, value.data() + j * v_dim, acc.data(), v_dim);
          }
          const float inv = 1.0f / sum;
          for (int64_t d = 0; d < v_dim; ++d) acc[d] *= inv;
          StoreFloats(a.output, a.output.offset(t, h), v_dim, acc.data());
        }
      });
    };
    if (split_heads) {
      ParallelFor(heads, threads, 1, [&](int, int64_t begin, int64_t end) {
        for (int64_t h = begin; h < end; ++h) run_head(h, 1);
      });
    } else {
      for (int64_t h = 0; h < heads; ++h) run_head(h, threads);
    }
  }
  return OkStatus();
}

}  // namespace dsa::attention::cpu
