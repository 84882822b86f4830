#include "attention/gpu/sparse_mla/heuristics.h"

#include <cstdint>
#include <initializer_list>

#include "attention/gpu/sparse_mla/config.h"

namespace dsa::attention::gpu::sparse_mla {
namespace {

// The shape the matrix bodies take.
bool MatrixShape(const SparseMlaParams& p) {
  return p.kv_lora_rank == kLora && p.rope_dim == kRope &&
         reinterpret_cast<uintptr_t>(p.kv_cache) % 16 == 0 &&
         p.cache_block_stride % 16 == 0 && p.cache_token_stride % 16 == 0 &&
         p.topk <= 0x7fffffff - kIndexChunk;
}

bool Fits(int bytes, const DeviceFeatures& f) {
  return f.max_shared_bytes_per_block == 0 ||
         bytes <= f.max_shared_bytes_per_block;
}

// Rows per pass through a latent scratch of `row_bytes` per row.
int64_t ChunkRows(int64_t row_bytes, int64_t tokens) {
  int64_t chunk = kLatentScratchBytes / row_bytes;
  if (chunk < 1) chunk = 1;
  if (chunk > kMaxRowsPerLaunch) chunk = kMaxRowsPerLaunch;
  if (chunk > tokens) chunk = tokens;
  return chunk;
}

// The seesaw body's shared memory and softmax scale (its softmax takes
// each row's maximum before the scale).
bool SeesawFits(const SparseMlaParams& p, const DeviceFeatures& f) {
  return p.softmax_scale > 0.0f &&
         f.max_shared_bytes_per_block >=
             static_cast<int>(sizeof(seesaw::SharedMemory));
}

// An fp8 cache on one of the seesaw body's forms: sm_90a code, 64 heads or
// more, its shared memory and scale.
bool SeesawOverFp8(const SparseMlaParams& p, const DeviceFeatures& f) {
  return p.cache_type != LatentCacheType::kBFloat16 && MatrixShape(p) &&
         Fits(warp::SharedBytes(f.warp_size, p.heads, true), f) && f.sm90a &&
         p.heads >= seesaw::Config::kHeads && SeesawFits(p, f);
}

}  // namespace

Body ChooseBody(const SparseMlaParams& p, const DeviceFeatures& f) {
  const bool fp8 = p.cache_type != LatentCacheType::kBFloat16;
  if (!MatrixShape(p) ||
      !Fits(warp::SharedBytes(f.warp_size, p.heads, fp8), f)) {
    return Body::kFma;
  }
  if (!f.sm90a || p.heads < seesaw::Config::kHeads) return Body::kWarp;
  if (!SeesawFits(p, f)) return Body::kWarp;
  if (!fp8) return Body::kSeesaw;
  const int64_t budget = WorkspaceBudgetRows(p);
  // Every position once where that is fewer entries than the rows' top-k
  // lists; on a tie (one request of 8K positions, 4 rows of top-k 2048)
  // the gathered workspace measured 24 % faster at 128 heads (0.0441
  // against 0.0546 ms, RESULTS.md, "... the crossover").
  const int64_t needed = WorkspaceNeededRows(p);
  if (needed <= budget && needed < p.tokens * p.topk) {
    return Body::kSeesawDequantised;
  }
  if (p.topk < 1 || p.topk > budget) return Body::kWarp;
  // Measured on the H200 at top-k 2048 (RESULTS.md, "Sparse MLA fp8 decode:
  // lane-resolved entries, 16-byte code loads and the bf16-domain
  // conversion"): the producers that dequantise from kSeesawFp8MinRows rows
  // on, the gathered workspace below (1 and 4 rows: 5-15 % faster; 5 to 31
  // rows not measured). At 32 rows and up the crossover (an even number of
  // head groups, 128 heads) is 1.07-1.19x faster than the gathered
  // workspace, the single-block producer (one head group, 64 heads)
  // 1.28-2.1x; three or more odd head groups take the gathered workspace
  // (the single-block producer not measured there).
  const int64_t groups =
      (p.heads + seesaw::Config::kHeads - 1) / seesaw::Config::kHeads;
  if (p.tokens < kSeesawFp8MinRows) return Body::kSeesawGathered;
  if (groups % 2 == 0) return Body::kSeesawFp8Crossover;
  return groups == 1 ? Body::kSeesawFp8 : Body::kSeesawGathered;
}

int64_t WorkspaceNeededRows(const SparseMlaParams& p) {
  return int64_t{p.num_requests} * p.max_blocks_per_request * p.block_size;
}

int64_t WorkspaceBudgetRows(const SparseMlaParams& p) {
  const int64_t pairs = p.tokens * p.topk;
  return pairs < dequantised::kMaxRows ? pairs : dequantised::kMaxRows;
}

const char* BodyName(Body body) {
  switch (body) {
    case Body::kSeesaw:
      return "seesaw";
    case Body::kSeesawDequantised:
      return "dequant+seesaw";
    case Body::kSeesawGathered:
      return "gather+seesaw";
    case Body::kSeesawFp8:
      return "seesaw-fp8";
    case Body::kSeesawFp8Crossover:
      return "seesaw-fp8x2";
    case Body::kWarp:
      return "mma";
    case Body::kFma:
      break;
  }
  return "fma";
}

bool ParseBody(const char* name, Body* body) {
  for (Body b :
       {Body::kFma, Body::kWarp, Body::kSeesaw, Body::kSeesawDequantised,
        Body::kSeesawGathered, Body::kSeesawFp8, Body::kSeesawFp8Crossover}) {
    const char* n = BodyName(b);
    int i = 0;
    while (n[i] != '\0' && n[i] == name[i]) ++i;
    if (n[i] == '\0' && name[i] == '\0') {
      *body = b;
      return true;
    }
  }
  return false;
}

bool BodyRuns(Body body, const SparseMlaParams& p, const DeviceFeatures& f) {
  const Body chosen = ChooseBody(p, f);
  switch (body) {
    case Body::kFma:
      return true;
    case Body::kWarp:
      return chosen != Body::kFma;
    case Body::kSeesaw:
      return chosen == Body::kSeesaw;
    case Body::kSeesawDequantised:
      return SeesawOverFp8(p, f) &&
             WorkspaceNeededRows(p) <= WorkspaceBudgetRows(p);
    case Body::kSeesawGathered:
      return SeesawOverFp8(p, f) && p.topk >= 1 &&
             p.topk <= WorkspaceBudgetRows(p);
    case Body::kSeesawFp8:
      return SeesawOverFp8(p, f);
    case Body::kSeesawFp8Crossover:
      return SeesawOverFp8(p, f) &&
             ((p.heads + seesaw::Config::kHeads - 1) / seesaw::Config::kHeads) %
                     2 ==
                 0;
  }
  return false;
}

Plan MakePlan(const SparseMlaParams& p, const DeviceFeatures& f) {
  return PlanFor(ChooseBody(p, f), p, f);
}

Plan PlanFor(Body body, const SparseMlaParams& p, const DeviceFeatures& f) {
  Plan plan;
  plan.body = body;
  if (plan.body == Body::kFma) {
    plan.chunk_rows =
        ChunkRows(int64_t{p.heads} * p.kv_lora_rank * 4, p.tokens);
    return plan;
  }
  const bool seesaw =
      plan.body == Body::kSeesaw || plan.body == Body::kSeesawDequantised ||
      plan.body == Body::kSeesawGathered || plan.body == Body::kSeesawFp8 ||
      plan.body == Body::kSeesawFp8Crossover;
  plan.heads_per_block = seesaw ? seesaw::Config::kHeads
                                : warp::HeadsPerBlock(f.warp_size, p.heads);
  if (p.cache_type != LatentCacheType::kBFloat16 && f.sm90a &&
      p.heads >= seesaw::Config::kHeads && SeesawFits(p, f)) {
    plan.workspace_rows = WorkspaceBudgetRows(p);
  }
  plan.chunk_rows = ChunkRows(int64_t{p.heads} * kLora * 2, p.tokens);
  if (plan.body == Body::kSeesawGathered) {
    // Whole top-k lists in the workspace, in passes of equal size (so that
    // no pass is a sliver of a wave).
    const int64_t most = plan.workspace_rows / (p.topk > 0 ? p.topk : 1);
    if (most < plan.chunk_rows) plan.chunk_rows = most > 0 ? most : 1;
    const int64_t passes = (p.tokens + plan.chunk_rows - 1) / plan.chunk_rows;
    plan.chunk_rows = (p.tokens + passes - 1) / passes;
    // More batches a group keep more of a block's resolved offsets in use;
    // fewer leave more blocks for a small pass (1 row of top-k 2048: 64
    // blocks of one batch, not 16 of four).
    const int64_t pairs = plan.chunk_rows * p.topk;
    plan.gather_batches = gathered::kMaxBatches;
    while (plan.gather_batches > 1 && pairs < int64_t{2} * f.multiprocessors *
                                                  gathered::kPairsPerBatch *
                                                  plan.gather_batches) {
      plan.gather_batches /= 2;
    }
  }
  // Few rows (decode): split each row's top-k list so that the grid covers
  // every multiprocessor, at least 256 indices per split; whole waves:
  // floor, not ceil (132 multiprocessors, 32 blocks: 4 splits, not 5).
  const int64_t blocks =
      p.tokens * ((p.heads + plan.heads_per_block - 1) / plan.heads_per_block);
  const int sms = f.multiprocessors;  // 0 (unknown): no split
  if (p.tokens == plan.chunk_rows && 2 * blocks <= sms) {
    int64_t splits = sms / blocks;
    const int64_t most = p.topk / 256;
    if (splits > most) splits = most;
    if (splits > 32) splits = 32;
    if (splits > 1) plan.splits = static_cast<int>(splits);
  }
  return plan;
}

}  // namespace dsa::attention::gpu::sparse_mla
