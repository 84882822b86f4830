#include "attention/gpu/dense_mha/plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "attention/gpu/dense_mha/config.h"

namespace dsa::attention::gpu::dense_mha {
namespace {

constexpr const char* kOp = "dense_mha_prefill";

LaunchResult CheckShapes(const DenseMhaPrefillParams& p) {
  const int64_t nope = p.qk_nope_head_dim, rope = p.rope_dim, v = p.v_head_dim;
  const int64_t lora = p.kv_lora_rank;
  const bool fp8 = p.cache_encoding != LatentCacheType::kBFloat16;
  if (p.tokens < 0 || p.heads <= 0 || p.heads > 65535 || p.num_requests < 0) {
    return Invalid(kOp, "tokens=%lld heads=%d num_requests=%d out of range",
                   static_cast<long long>(p.tokens), p.heads, p.num_requests);
  }
  if (nope < 0 || nope % 8 != 0 || rope <= 0 || rope % 8 != 0 || v <= 0 ||
      v % 8 != 0 || nope + rope > kMaxHeadDim || v > kMaxHeadDim) {
    return Invalid(kOp,
                   "qk_nope %lld, rope %lld, v %lld: the GPU kernel needs "
                   "multiples of 8 with nope + rope <= %d and v <= %d",
                   static_cast<long long>(nope), static_cast<long long>(rope),
                   static_cast<long long>(v), kMaxHeadDim, kMaxHeadDim);
  }
  if (lora <= 0 || lora % 8 != 0 || (fp8 && lora % 128 != 0)) {
    return Invalid(kOp,
                   "kv_lora_rank %lld: needs a positive multiple of 8 (of 128 "
                   "for an fp8 cache)",
                   static_cast<long long>(lora));
  }
  return LaunchResult{};
}

LaunchResult CheckBuffers(const DenseMhaPrefillParams& p) {
  if (p.q == nullptr || p.kv_cache == nullptr || p.block_table == nullptr ||
      p.kv_b_proj == nullptr || p.output == nullptr ||
      p.host_seq_lens == nullptr || p.host_query_start_loc == nullptr) {
    return Invalid(kOp, "a pointer argument is null");
  }
  if (p.num_blocks <= 0 || p.block_size <= 0 || p.max_blocks_per_request <= 0 ||
      p.block_table_stride < p.max_blocks_per_request) {
    return Invalid(kOp,
                   "num_blocks %lld, block_size %d, max_blocks %d, block table "
                   "stride %lld: need positive sizes and stride >= max_blocks",
                   static_cast<long long>(p.num_blocks), p.block_size,
                   p.max_blocks_per_request,
                   static_cast<long long>(p.block_table_stride));
  }
  if (p.host_query_start_loc[0] != 0 ||
      p.host_query_start_loc[p.num_requests] != p.tokens) {
    return Invalid(
        kOp, "query_start_loc runs from %d to %d, expected 0 to %lld",
        p.host_query_start_loc[0], p.host_query_start_loc[p.num_requests],
        static_cast<long long>(p.tokens));
  }
  return LaunchResult{};
}

// The requests with queries, their scratch rows, and the work items (one
// per query tile of `block_m` rows), longest first.
LaunchResult PlanWork(const DenseMhaPrefillParams& p, int block_m, Plan* plan) {
  std::vector<std::pair<int64_t, WorkItem>> work;  // (keys, item)
  const int64_t capacity =
      static_cast<int64_t>(p.max_blocks_per_request) * p.block_size;
  for (int32_t r = 0; r < p.num_requests; ++r) {
    const int64_t n = static_cast<int64_t>(p.host_query_start_loc[r + 1]) -
                      p.host_query_start_loc[r];
    const int64_t len = p.host_seq_lens[r];
    if (n < 0 || n > len) {
      return Invalid(kOp,
                     "request %d has %lld query tokens (query_start_loc), "
                     "expected 0 to its seq_len %lld",
                     r, static_cast<long long>(n), static_cast<long long>(len));
    }
    if (len > capacity) {
      return Invalid(kOp,
                     "request %d: seq_len %lld exceeds its block table's %lld "
                     "slots",
                     r, static_cast<long long>(len),
                     static_cast<long long>(capacity));
    }
    if (n == 0) continue;
    RequestInfo info{};
    info.q_begin = p.host_query_start_loc[r];
    info.n = static_cast<int32_t>(n);
    info.seq_len = static_cast<int32_t>(len);
    info.kv_row = static_cast<int32_t>(plan->kv_rows);
    info.table_row = r;
    const int64_t padded = (len + kKeyAlign - 1) / kKeyAlign * kKeyAlign;
    const int32_t index = static_cast<int32_t>(plan->requests.size());
    plan->requests.push_back(info);
    for (int64_t tile = 0; tile * block_m < n; ++tile) {
      const int64_t keys = len - n + std::min<int64_t>((tile + 1) * block_m, n);
      work.push_back({keys, WorkItem{index, static_cast<int32_t>(tile)}});
    }
    plan->kv_rows += padded;
    plan->max_rows = std::max(plan->max_rows, padded);
    if (plan->kv_rows > 0x7fffffff) {
      return Invalid(kOp, "more than 2^31 latent rows in one call");
    }
  }
  // Longest blocks first (within each head), so the short ones fill the
  // tail.
  std::stable_sort(work.begin(), work.end(), [](const auto& x, const auto& y) {
    return x.first > y.first;
  });
  if (plan->requests.size() > 65535 || work.size() > 0x7fffffff) {
    return Invalid(kOp,
                   "%zu requests with queries / %zu query tiles: more than "
                   "one launch holds",
                   plan->requests.size(), work.size());
  }
  plan->items.reserve(work.size());
  for (const auto& w : work) plan->items.push_back(w.second);
  return LaunchResult{};
}

void PlanMeta(Plan* plan) {
  Meta& meta = plan->meta;
  const std::vector<RequestInfo>& requests = plan->requests;
  const std::vector<WorkItem>& items = plan->items;
  meta.is_inline =
      requests.size() <= kInlineRequests && items.size() <= kInlineItems;
  if (meta.is_inline) {
    std::copy(requests.begin(), requests.end(), meta.req);
    std::copy(items.begin(), items.end(), meta.item);
    return;
  }
  const size_t request_bytes = requests.size() * sizeof(RequestInfo);
  plan->meta_upload.resize(request_bytes + items.size() * sizeof(WorkItem));
  std::memcpy(plan->meta_upload.data(), requests.data(), request_bytes);
  std::memcpy(plan->meta_upload.data() + request_bytes, items.data(),
              items.size() * sizeof(WorkItem));
}

}  // namespace

LaunchResult PlanDenseMhaPrefill(const DenseMhaPrefillParams& p, int block_m,
                                 Plan* plan) {
  *plan = Plan{};
  LaunchResult r = CheckShapes(p);
  if (!r.ok() || p.tokens == 0) return r;
  r = CheckBuffers(p);
  if (!r.ok()) return r;
  // Positive and finite (ops.h): the TMA body scales the row maxima rather
  // than every score (sm90_tile.h's MaskRowMax).
  if (!(p.softmax_scale > 0.0f) || !std::isfinite(p.softmax_scale)) {
    return Invalid(kOp, "softmax_scale %g: needs a positive finite value",
                   static_cast<double>(p.softmax_scale));
  }
  const int64_t nope = p.qk_nope_head_dim, rope = p.rope_dim, v = p.v_head_dim;
  const int64_t lora = p.kv_lora_rank, heads = p.heads;
  plan->entry_bytes = p.cache_encoding != LatentCacheType::kBFloat16
                          ? lora + 4 * (lora / 128) + 2 * rope
                          : 2 * (lora + rope);
  r = PlanWork(p, block_m, plan);
  if (!r.ok()) return r;
  PlanMeta(plan);

  plan->lat_ld = lora + rope;
  plan->knope_ld = heads * nope;
  plan->vt_rows = heads * v;
  plan->convert_weights = p.kv_b_proj_format == FloatFormat::kFloat32 ||
                          reinterpret_cast<uintptr_t>(p.kv_b_proj) % 16 != 0;
  plan->convert_queries = p.q_format == FloatFormat::kFloat32 ||
                          reinterpret_cast<uintptr_t>(p.q) % 16 != 0;
  const int64_t kv_rows = plan->kv_rows;
  plan->latent_bytes = static_cast<size_t>(kv_rows * plan->lat_ld * 2);
  plan->knope_bytes = static_cast<size_t>(kv_rows * plan->knope_ld * 2);
  plan->vt_bytes = static_cast<size_t>(plan->vt_rows * kv_rows * 2);
  plan->wk_bytes = static_cast<size_t>(heads * nope * lora * 2);
  plan->wv_bytes = static_cast<size_t>(heads * v * lora * 2);
  plan->weight_bytes = static_cast<size_t>(heads * (nope + v) * lora * 2);
  plan->query_bytes = static_cast<size_t>(p.tokens * heads * (nope + rope) * 2);
  return LaunchResult{};
}

}  // namespace dsa::attention::gpu::dense_mha
