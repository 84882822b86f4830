// The sparse MLA's launcher (launch.h): checks the call, takes the body and
// the launch plan from the heuristics (heuristics.h), and enqueues, per
// chunk of rows through the latent scratch: an fp8 cache's gathered
// workspace (decode), the attention body, the merge
// of top-k splits (few rows), W_UV on the platform's GEMM (wuv.h); or the
// FMA kernels. The kernels themselves are declared in kernels.h.
#include "attention/gpu/sparse_mla/launch.h"

#include <cstdint>

#include "attention/gpu/device/features.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/stream_scratch.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/heuristics.h"
#include "attention/gpu/sparse_mla/kernels.h"
#include "attention/gpu/sparse_mla/wuv.h"

namespace dsa::attention::gpu {
namespace sparse_mla {
namespace {

// What the launcher can check without reading device memory.
LaunchResult CheckParams(const SparseMlaParams& p) {
  const bool fp8 = p.cache_type != LatentCacheType::kBFloat16;
  const int64_t entry =
      fp8 ? p.kv_lora_rank + 4 * (p.kv_lora_rank / 128) + 2 * p.rope_dim
          : 2 * (static_cast<int64_t>(p.kv_lora_rank) + p.rope_dim);
  if (p.tokens < 0 || p.heads < 1 || p.kv_lora_rank < 1 || p.rope_dim < 0 ||
      p.num_blocks < 1 || p.block_size < 1 || p.num_requests < 1 ||
      p.max_blocks_per_request < 1 ||
      p.block_table_stride < p.max_blocks_per_request || p.topk < 0 ||
      p.topk_stride < p.topk || p.qk_nope_head_dim < 0 || p.v_head_dim < 1 ||
      p.cache_token_stride < entry ||
      p.cache_block_stride < p.cache_token_stride * p.block_size) {
    return Invalid(kOp,
                   "sizes: tokens %lld, heads %d, kv_lora_rank %d, rope_dim "
                   "%d, num_blocks %lld, block_size %d, num_requests %d, "
                   "max_blocks %d, block_table_stride %lld, topk %d, "
                   "topk_stride %lld, qk_nope %d, v_head_dim %d, cache "
                   "strides %lld/%lld (entry %lld bytes)",
                   static_cast<long long>(p.tokens), p.heads, p.kv_lora_rank,
                   p.rope_dim, static_cast<long long>(p.num_blocks),
                   p.block_size, p.num_requests, p.max_blocks_per_request,
                   static_cast<long long>(p.block_table_stride), p.topk,
                   static_cast<long long>(p.topk_stride), p.qk_nope_head_dim,
                   p.v_head_dim, static_cast<long long>(p.cache_block_stride),
                   static_cast<long long>(p.cache_token_stride),
                   static_cast<long long>(entry));
  }
  if (fp8 && p.kv_lora_rank % 128 != 0) {
    return Invalid(kOp,
                   "fp8 cache needs kv_lora_rank a multiple of 128, not %d",
                   p.kv_lora_rank);
  }
  if (p.heads > 65535) {
    return Invalid(kOp, "%d heads, at most 65535", p.heads);
  }
  if (p.q == nullptr || p.kv_cache == nullptr || p.block_table == nullptr ||
      p.seq_lens == nullptr || p.token_request == nullptr ||
      (p.topk > 0 && p.topk_indices == nullptr) || p.kv_b_proj == nullptr ||
      p.output == nullptr) {
    return Invalid(kOp, "a device pointer is null");
  }
  if (fp8 && (reinterpret_cast<uintptr_t>(p.kv_cache) % 4 != 0 ||
              p.cache_block_stride % 4 != 0 || p.cache_token_stride % 4 != 0)) {
    return Invalid(kOp, "fp8 cache entries are not 4-byte aligned (scales)");
  }
  if (!fp8 &&
      (reinterpret_cast<uintptr_t>(p.kv_cache) % 2 != 0 ||
       p.cache_block_stride % 2 != 0 || p.cache_token_stride % 2 != 0)) {
    return Invalid(kOp, "bf16 cache entries are not 2-byte aligned");
  }
  // (Never the matrix bodies' shape, whose FMA fallback needs 4.8 KB.)
  if (FmaSharedBytes(p.kv_lora_rank, p.rope_dim) > kFmaMaxSharedBytes) {
    return Invalid(
        kOp,
        "kv_lora_rank %d and rope_dim %d need %lld bytes of shared "
        "memory on the FMA kernels, more than %lld",
        p.kv_lora_rank, p.rope_dim,
        static_cast<long long>(FmaSharedBytes(p.kv_lora_rank, p.rope_dim)),
        static_cast<long long>(kFmaMaxSharedBytes));
  }
  return LaunchResult{};
}

// f(begin, rows) for each chunk of at most `chunk` of the call's rows.
template <class PerChunk>
LaunchResult ForEachChunk(int64_t tokens, int64_t chunk, PerChunk f) {
  for (int64_t begin = 0; begin < tokens; begin += chunk) {
    const LaunchResult r =
        f(begin, tokens - begin < chunk ? tokens - begin : chunk);
    if (!r.ok()) return r;
  }
  return LaunchResult{};
}

// W_UV as the GEMM reads it: row o of head h at rows + h * head_stride +
// o * row_stride (bf16, rows 16-byte aligned): kv_b_proj itself when it is
// such, else a copy converted once per call.
struct WuvWeights {
  const uint16_t* rows;
  int64_t head_stride;
  int64_t row_stride;
};

// Whether W_UV is read from kv_b_proj in place (else from a bf16 copy).
bool WuvInPlace(const SparseMlaParams& p) {
  return p.kv_b_proj_format == FloatFormat::kBFloat16 &&
         reinterpret_cast<uintptr_t>(p.kv_b_proj) % 16 == 0 &&
         p.kv_b_proj_row_stride % 8 == 0;
}

// `converted`: the copy's scratch when not in place.
LaunchResult PrepareWuv(const SparseMlaParams& p, uint16_t* converted,
                        hipStream_t stream, WuvWeights* w) {
  if (WuvInPlace(p)) {
    w->rows = static_cast<const uint16_t*>(p.kv_b_proj) +
              p.qk_nope_head_dim * p.kv_b_proj_row_stride;
    w->head_stride = static_cast<int64_t>(p.qk_nope_head_dim + p.v_head_dim) *
                     p.kv_b_proj_row_stride;
    w->row_stride = p.kv_b_proj_row_stride;
    return LaunchResult{};
  }
  LaunchResult r = LaunchConvertWuv(p, converted, stream);
  if (!r.ok()) return r;
  w->rows = converted;
  w->head_stride = static_cast<int64_t>(p.v_head_dim) * kLora;
  w->row_stride = kLora;
  return r;
}

// Rows [begin, begin + rows) of the attention on the plan's matrix body.
LaunchResult LaunchAttention(const SparseMlaParams& p, const Plan& plan,
                             int64_t begin, int64_t rows, const MmaOutput& out,
                             int device, hipStream_t stream) {
  constexpr Fp8Format kFn = Fp8Format::kE4m3fn, kFnuz = Fp8Format::kE4m3fnuz;
  if (plan.body == Body::kSeesawFp8Crossover) {
    return p.cache_type == LatentCacheType::kFp8E4m3fnuz
               ? LaunchSeesawBody<true, kFnuz, true>(p, begin, rows, out,
                                                     device, stream)
               : LaunchSeesawBody<true, kFn, true>(p, begin, rows, out, device,
                                                   stream);
  }
  if (plan.body == Body::kSeesawFp8) {
    return p.cache_type == LatentCacheType::kFp8E4m3fnuz
               ? LaunchSeesawBody<true, kFnuz>(p, begin, rows, out, device,
                                               stream)
               : LaunchSeesawBody<true, kFn>(p, begin, rows, out, device,
                                             stream);
  }
  if (plan.body == Body::kSeesaw || plan.body == Body::kSeesawDequantised ||
      plan.body == Body::kSeesawGathered) {
    return LaunchSeesawBody<false, kFn>(p, begin, rows, out, device, stream);
  }
  const bool wide = plan.heads_per_block == 64;
  switch (p.cache_type) {
    case LatentCacheType::kBFloat16:
      return wide ? LaunchWarpBody<64, false, kFn>(p, begin, rows, out, device,
                                                   stream)
                  : LaunchWarpBody<32, false, kFn>(p, begin, rows, out, device,
                                                   stream);
    case LatentCacheType::kFp8E4m3fn:
      return wide ? LaunchWarpBody<64, true, kFn>(p, begin, rows, out, device,
                                                  stream)
                  : LaunchWarpBody<32, true, kFn>(p, begin, rows, out, device,
                                                  stream);
    case LatentCacheType::kFp8E4m3fnuz:
      return wide ? LaunchWarpBody<64, true, kFnuz>(p, begin, rows, out, device,
                                                    stream)
                  : LaunchWarpBody<32, true, kFnuz>(p, begin, rows, out, device,
                                                    stream);
  }
  return Invalid(kOp, "unknown cache type %d", static_cast<int>(p.cache_type));
}

// output rows [begin, begin + rows) = W_UV latent.
LaunchResult LaunchWuvGemm(const SparseMlaParams& p, const WuvWeights& w,
                           const uint16_t* latent, int64_t begin, int64_t rows,
                           hipStream_t stream) {
  SparseMlaWuvArgs wuv;
  wuv.latent = latent;
  wuv.rows = rows;
  wuv.heads = p.heads;
  wuv.lora = kLora;
  wuv.w = w.rows;
  wuv.w_head_stride = w.head_stride;
  wuv.w_row_stride = w.row_stride;
  wuv.v = p.v_head_dim;
  wuv.output_format = p.output_format;
  wuv.output_token_stride = p.output_token_stride;
  wuv.output_head_stride = p.output_head_stride;
  const int64_t out_at = begin * p.output_token_stride;
  wuv.output =
      p.output_format == FloatFormat::kBFloat16
          ? static_cast<void*>(static_cast<uint16_t*>(p.output) + out_at)
          : static_cast<void*>(static_cast<float*>(p.output) + out_at);
  return SparseMlaWuvGemm(wuv, stream);
}

// The call as the seesaw body reads it over the bf16 workspace of an fp8
// cache (config.h: dequantised::, written by LaunchDequantiseCache): one
// workspace block per block-table entry in use, the same requests, lengths
// and rows.
SparseMlaParams OverWorkspace(const SparseMlaParams& p, const uint16_t* rows,
                              const int32_t* table) {
  SparseMlaParams w = p;
  w.kv_cache = reinterpret_cast<const uint8_t*>(rows);
  w.cache_type = LatentCacheType::kBFloat16;
  w.cache_token_stride = dequantised::kRowBytes;
  w.cache_block_stride = dequantised::kRowBytes * p.block_size;
  w.num_blocks =
      static_cast<int64_t>(p.num_requests) * p.max_blocks_per_request;
  w.block_table = table;
  w.block_table_stride = p.max_blocks_per_request;
  return w;
}

// Rows [begin, begin + rows) of the call as the seesaw body reads them over
// their gathered bf16 workspace (config.h: gathered::, written by
// LaunchGatherDequantise): row r is request r of topk positions, block r of
// the workspace, its top-k list the rewritten one; launched as rows
// [0, rows), so q starts at row begin.
SparseMlaParams OverGathered(const SparseMlaParams& p, int64_t begin,
                             int64_t rows, const uint16_t* workspace,
                             const int32_t* table) {
  SparseMlaParams w = p;
  const int64_t q_bytes = p.q_format == FloatFormat::kBFloat16 ? 2 : 4;
  w.q = static_cast<const uint8_t*>(p.q) + begin * p.q_token_stride * q_bytes;
  w.kv_cache = reinterpret_cast<const uint8_t*>(workspace);
  w.cache_type = LatentCacheType::kBFloat16;
  w.cache_token_stride = dequantised::kRowBytes;
  w.cache_block_stride = dequantised::kRowBytes * p.topk;
  w.block_size = p.topk;
  w.num_blocks = rows;
  const int32_t* ids = table + rows * p.topk;
  w.block_table = ids;
  w.num_requests = static_cast<int32_t>(rows);
  w.max_blocks_per_request = 1;
  w.block_table_stride = 1;
  w.seq_lens = ids + rows;
  w.token_request = ids;
  w.topk_indices = table;
  w.topk_stride = p.topk;
  w.tokens = rows;
  return w;
}

// Scratch, from one block of the stream's arena: W_UV in bf16 (when not
// read in place), the latent rows of a chunk, the splits' partial outputs
// and log-sum-exps (when the top-k is split), an fp8 cache's bf16
// workspace and its block table (plan.workspace_rows).
LaunchResult RunMatrix(const SparseMlaParams& p, const Plan& plan, int device,
                       hipStream_t stream) {
  StreamScratch scratch(stream, device);
  uint16_t* converted = nullptr;
  if (!WuvInPlace(p)) {
    scratch.Add(&converted,
                static_cast<size_t>(p.heads) * p.v_head_dim * kLora * 2);
  }
  const int64_t row_bytes = static_cast<int64_t>(p.heads) * kLora * 2;
  uint16_t* latent = nullptr;
  scratch.Add(&latent, static_cast<size_t>(plan.chunk_rows * row_bytes));
  MmaOutput out{nullptr, nullptr, nullptr, plan.splits};
  if (plan.splits > 1) {
    const size_t rows_heads = static_cast<size_t>(p.tokens) * p.heads;
    scratch.Add(&out.part_o, plan.splits * rows_heads * kLora * 4);
    scratch.Add(&out.part_lse, plan.splits * rows_heads * 4);
  }
  uint16_t* workspace = nullptr;
  int32_t* workspace_table = nullptr;
  if (plan.workspace_rows > 0) {
    // (A block per row at most: the dequantised table fits; the gathered
    // one takes a top-k entry per row, then two ints per query row.)
    scratch.Add(&workspace, static_cast<size_t>(plan.workspace_rows *
                                                dequantised::kRowBytes));
    scratch.Add(&workspace_table,
                static_cast<size_t>(plan.workspace_rows *
                                    gathered::kTableIntsPerRow * 4));
  }
  LaunchResult r = scratch.Allocate("sparse_mla scratch");
  if (!r.ok()) return r;
  out.latent = latent;
  WuvWeights w;
  r = PrepareWuv(p, converted, stream, &w);
  if (!r.ok()) return r;
  SparseMlaParams attention = p;
  if (plan.body == Body::kSeesawDequantised) {
    r = LaunchDequantiseCache(p, workspace, workspace_table, stream);
    if (!r.ok()) return r;
    attention = OverWorkspace(p, workspace, workspace_table);
  }
  return ForEachChunk(
      p.tokens, plan.chunk_rows, [&](int64_t begin, int64_t rows) {
        LaunchResult chunk;
        if (plan.body == Body::kSeesawGathered) {
          chunk = LaunchGatherDequantise(p, begin, rows, plan.gather_batches,
                                         workspace, workspace_table, stream);
          if (chunk.ok()) {
            chunk = LaunchAttention(
                OverGathered(p, begin, rows, workspace, workspace_table), plan,
                0, rows, out, device, stream);
          }
        } else {
          chunk = LaunchAttention(attention, plan, begin, rows, out, device,
                                  stream);
        }
        if (chunk.ok() && out.splits > 1) {
          chunk = LaunchCombineSplits(rows, p.heads, out, stream);
        }
        if (!chunk.ok()) return chunk;
        return LaunchWuvGemm(p, w, latent, begin, rows, stream);
      });
}

LaunchResult RunFma(const SparseMlaParams& p, const Plan& plan, int device,
                    hipStream_t stream) {
  StreamScratch scratch(stream, device);
  const int64_t row_bytes = static_cast<int64_t>(p.heads) * p.kv_lora_rank * 4;
  float* latent = nullptr;
  scratch.Add(&latent, static_cast<size_t>(plan.chunk_rows * row_bytes));
  const LaunchResult r = scratch.Allocate("sparse_mla scratch");
  if (!r.ok()) return r;
  return ForEachChunk(p.tokens, plan.chunk_rows,
                      [&](int64_t begin, int64_t rows) {
                        return LaunchFmaKernels(p, begin, rows, latent, stream);
                      });
}

// What the workspace passes need beyond CheckParams: an fp8_ds_mla cache of
// the matrix bodies' shape (16-byte aligned entries of 512 + 64).
LaunchResult CheckWorkspaceParams(const SparseMlaParams& p) {
  const LaunchResult r = CheckParams(p);
  if (!r.ok()) return r;
  if (p.cache_type == LatentCacheType::kBFloat16 || p.kv_lora_rank != kLora ||
      p.rope_dim != kRope ||
      reinterpret_cast<uintptr_t>(p.kv_cache) % 16 != 0 ||
      p.cache_block_stride % 16 != 0 || p.cache_token_stride % 16 != 0) {
    return Invalid(kOp,
                   "a bf16 workspace needs an fp8 cache of 16-byte aligned "
                   "entries of 512 + 64");
  }
  return LaunchResult{};
}

}  // namespace
}  // namespace sparse_mla

LaunchResult SparseMlaDequantiseCacheWorkspace(const SparseMlaParams& p,
                                               void* rows, int32_t* table,
                                               void* stream) {
  const LaunchResult r = sparse_mla::CheckWorkspaceParams(p);
  if (!r.ok()) return r;
  return sparse_mla::LaunchDequantiseCache(
      p, static_cast<uint16_t*>(rows), table, static_cast<hipStream_t>(stream));
}

LaunchResult SparseMlaGatherWorkspace(const SparseMlaParams& p, int64_t begin,
                                      int64_t rows, int batches,
                                      void* workspace, int32_t* table,
                                      void* stream) {
  const LaunchResult r = sparse_mla::CheckWorkspaceParams(p);
  if (!r.ok()) return r;
  if (begin < 0 || rows < 0 || begin + rows > p.tokens) {
    return Invalid(sparse_mla::kOp, "rows [%lld, %lld) of %lld",
                   static_cast<long long>(begin),
                   static_cast<long long>(begin + rows),
                   static_cast<long long>(p.tokens));
  }
  if (batches == 0) {  // as the plan of a call of these rows picks
    SparseMlaParams pass = p;
    pass.tokens = rows;
    DeviceFeatures features;
    const LaunchResult known = CurrentDeviceFeatures(&features);
    if (!known.ok()) return known;
    batches =
        sparse_mla::PlanFor(sparse_mla::Body::kSeesawGathered, pass, features)
            .gather_batches;
  }
  return sparse_mla::LaunchGatherDequantise(
      p, begin, rows, batches, static_cast<uint16_t*>(workspace), table,
      static_cast<hipStream_t>(stream));
}

const char* SparseMlaPath(const SparseMlaParams& params) {
  DeviceFeatures features;
  if (!CurrentDeviceFeatures(&features).ok()) {
    (void)hipGetLastError();      // not the next launch's error
    features = DeviceFeatures{};  // no device: as the heuristics take it
  }
  return sparse_mla::BodyName(sparse_mla::ChooseBody(params, features));
}

LaunchResult SparseMlaLaunch(const SparseMlaParams& p, void* stream) {
  return SparseMlaLaunchOnPath(p, nullptr, stream);
}

LaunchResult SparseMlaLaunchOnPath(const SparseMlaParams& p, const char* path,
                                   void* stream) {
  if (p.tokens == 0) return LaunchResult{};
  LaunchResult r = sparse_mla::CheckParams(p);
  if (!r.ok()) return r;
  DeviceFeatures features;
  r = CurrentDeviceFeatures(&features);
  if (!r.ok()) return r;
  using sparse_mla::Body;
  Body body = sparse_mla::ChooseBody(p, features);
  if (path != nullptr && (!sparse_mla::ParseBody(path, &body) ||
                          !sparse_mla::BodyRuns(body, p, features))) {
    return Invalid(sparse_mla::kOp, "path %s cannot run this call", path);
  }
  const sparse_mla::Plan plan = sparse_mla::PlanFor(body, p, features);
  const auto s = static_cast<hipStream_t>(stream);
  return plan.body == sparse_mla::Body::kFma
             ? sparse_mla::RunFma(p, plan, features.device, s)
             : sparse_mla::RunMatrix(p, plan, features.device, s);
}

}  // namespace dsa::attention::gpu
