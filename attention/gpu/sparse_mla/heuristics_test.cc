// The sparse MLA's decision table (heuristics.h) without a device: every
// body reached, the shape and shared-memory boundaries, sm_90a on and off,
// the seesaw body's softmax scale, an fp8 cache's bf16
// workspace, both backends' warp bodies, the launch plan's chunks and
// splits.
#include "attention/gpu/sparse_mla/heuristics.h"

#include <cstdint>

#include "attention/gpu/sparse_mla/config.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu::sparse_mla {
namespace {

constexpr int kSeesawBytes = sizeof(seesaw::SharedMemory);

// An H200 running sm_90a device code.
DeviceFeatures H200() {
  DeviceFeatures f;
  f.device = 0;
  f.multiprocessors = 132;
  f.warp_size = 32;
  f.max_shared_bytes_per_block = kSm90SharedBytesPerBlock;
  f.sm90a = true;
  f.tensor_maps = true;
  return f;
}

// An MI300X-like device (64-wide wavefronts) with `lds` bytes per workgroup.
DeviceFeatures Amd(int lds) {
  DeviceFeatures f;
  f.device = 0;
  f.multiprocessors = 304;
  f.warp_size = 64;
  f.max_shared_bytes_per_block = lds;
  return f;
}

// DeepSeek-V3.2's shape: a cache at a 16-byte aligned address, one request
// of max(tokens, topk) positions (blocks of 64).
SparseMlaParams Params(int heads, LatentCacheType cache, int64_t tokens = 8192,
                       int topk = 2048) {
  SparseMlaParams p;
  p.num_requests = 1;
  p.max_blocks_per_request =
      static_cast<int32_t>(((tokens > topk ? tokens : topk) + 63) / 64);
  p.kv_cache = reinterpret_cast<const uint8_t*>(uintptr_t{1} << 20);
  p.cache_type = cache;
  const int entry = cache == LatentCacheType::kBFloat16 ? 1152 : 656;
  p.cache_token_stride = entry;
  p.cache_block_stride = int64_t{entry} * 64;
  p.block_size = 64;
  p.heads = heads;
  p.tokens = tokens;
  p.topk = topk;
  p.topk_stride = topk;
  p.softmax_scale = 0.0722f;  // 1 / sqrt(192)
  return p;
}

constexpr LatentCacheType kBf16 = LatentCacheType::kBFloat16;
constexpr LatentCacheType kFp8 = LatentCacheType::kFp8E4m3fn;
constexpr LatentCacheType kFnuz = LatentCacheType::kFp8E4m3fnuz;

TEST(SparseMlaHeuristicsTest, H200RunsTheSeesawBodyFrom64HeadsOnBf16) {
  const DeviceFeatures f = H200();
  EXPECT_EQ(ChooseBody(Params(64, kBf16), f), Body::kSeesaw);
  EXPECT_EQ(ChooseBody(Params(128, kBf16), f), Body::kSeesaw);
  EXPECT_EQ(ChooseBody(Params(72, kBf16), f), Body::kSeesaw);
  EXPECT_EQ(ChooseBody(Params(63, kBf16), f), Body::kWarp);
  EXPECT_EQ(ChooseBody(Params(1, kBf16), f), Body::kWarp);
}

TEST(SparseMlaHeuristicsTest,
     Fp8PrefillRunsTheSeesawBodyOverADequantisedCache) {
  const DeviceFeatures f = H200();
  for (LatentCacheType cache : {kFp8, kFnuz}) {
    for (int64_t tokens : {1024, 8192, 32768}) {
      EXPECT_EQ(ChooseBody(Params(64, cache, tokens), f),
                Body::kSeesawDequantised);
      EXPECT_EQ(ChooseBody(Params(128, cache, tokens), f),
                Body::kSeesawDequantised);
    }
    EXPECT_EQ(ChooseBody(Params(72, cache), f), Body::kSeesawDequantised);
    EXPECT_EQ(ChooseBody(Params(63, cache), f), Body::kWarp);
    SparseMlaParams p = Params(64, cache);
    p.softmax_scale = 0.0f;  // the seesaw body's softmax needs it positive
    EXPECT_EQ(ChooseBody(p, f), Body::kWarp);
    DeviceFeatures less = f;
    less.max_shared_bytes_per_block = kSeesawBytes - 1;
    EXPECT_EQ(ChooseBody(Params(64, cache), less), Body::kWarp);
    DeviceFeatures no_sm90a = f;
    no_sm90a.sm90a = false;
    EXPECT_EQ(ChooseBody(Params(64, cache), no_sm90a), Body::kWarp);
  }
}

TEST(SparseMlaHeuristicsTest,
     TheWorkspaceHoldsEveryPositionOrEachRowsTopkEntries) {
  const DeviceFeatures f = H200();
  // 8 rows of top-k 64 carve 512 rows: 7 blocks of 64 positions fit and
  // are fewer than the 512 pairs, 8 fit but tie (the gathered workspace,
  // faster on a tie), 9 do not (the requests' positions, not the rows'
  // indices, count).
  SparseMlaParams p = Params(64, kFp8, 8, 64);
  p.max_blocks_per_request = 8;
  EXPECT_EQ(WorkspaceNeededRows(p), 512);
  EXPECT_EQ(WorkspaceBudgetRows(p), 512);
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawGathered);
  p.max_blocks_per_request = 7;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawDequantised);
  p.max_blocks_per_request = 9;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawGathered);
  p.max_blocks_per_request = 3;
  p.num_requests = 2;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawDequantised);
  p.num_requests = 3;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawGathered);
  // Decode, 32 requests x 8K: 262144 positions for 65536 (row, key) pairs;
  // 32 rows of 128 heads, the crossover over the fp8 cache itself.
  p = Params(128, kFp8, 32);
  p.num_requests = 32;
  p.max_blocks_per_request = 8192 / 64;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawFp8Crossover);
  p = Params(128, kFp8, kSeesawFp8MinRows - 1);
  p.num_requests = static_cast<int32_t>(kSeesawFp8MinRows - 1);
  p.max_blocks_per_request = 8192 / 64;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawGathered);
  // One row of top-k 2048 over 2048 positions: a tie, gathered; over fewer
  // positions (a shorter table), every position.
  p = Params(64, kFnuz, 1);
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawGathered);  // 2048 positions
  p.max_blocks_per_request -= 1;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawDequantised);
  p.max_blocks_per_request += 2;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawGathered);
  // Decode, one request of 8K positions, 4 rows of top-k 2048: a tie.
  p = Params(128, kFp8, 4);
  p.max_blocks_per_request = 8192 / 64;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawGathered);
  // A top-k list longer than the workspace, or none: the warp body.
  p = Params(64, kFp8, 1, static_cast<int>(dequantised::kMaxRows));
  p.max_blocks_per_request = static_cast<int32_t>(dequantised::kMaxRows);
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawGathered);
  p = Params(64, kFp8, 2, static_cast<int>(dequantised::kMaxRows) + 1);
  EXPECT_EQ(ChooseBody(p, f), Body::kWarp);
  p = Params(64, kFp8, 4, 0);
  EXPECT_EQ(ChooseBody(p, f), Body::kWarp);
  // At most 256 MiB of bf16 rows: one request of GLM-5.1's 202752
  // positions fits, one past kMaxRows does not.
  EXPECT_EQ(dequantised::kMaxRows, 233016);
  p = Params(64, kFp8, 8192);
  p.max_blocks_per_request = 202752 / 64;
  EXPECT_EQ(WorkspaceBudgetRows(p), dequantised::kMaxRows);
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawDequantised);
  p.max_blocks_per_request = 1;
  p.block_size = static_cast<int32_t>(dequantised::kMaxRows);
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawDequantised);
  // (8192 rows of 64 heads past the workspace: the dequantising producer,
  // the rule of 32 to 512 rows, not measured at 8192.)
  p.block_size += 1;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesawFp8);
}

TEST(SparseMlaHeuristicsTest,
     Fp8DecodeGathersFewRowsElseDequantisesInTheProducers) {
  const DeviceFeatures f = H200();
  // Requests of 8K positions, more than the workspace's tokens * topk rows.
  auto decode = [](int heads, int64_t rows) {
    SparseMlaParams p = Params(heads, kFp8, rows);
    p.num_requests = static_cast<int32_t>(rows);
    p.max_blocks_per_request = 8192 / 64;
    return p;
  };
  // 128 heads: gathered below kSeesawFp8MinRows rows, the crossover from
  // there, however many rows (split or not, one workspace pass or more).
  for (int64_t rows : {int64_t{1}, int64_t{4}, kSeesawFp8MinRows - 1}) {
    EXPECT_EQ(ChooseBody(decode(128, rows), f), Body::kSeesawGathered) << rows;
  }
  for (int64_t rows : {kSeesawFp8MinRows, int64_t{113}, int64_t{114},
                       int64_t{128}, int64_t{512}}) {
    EXPECT_EQ(ChooseBody(decode(128, rows), f), Body::kSeesawFp8Crossover)
        << rows;
  }
  // At 32 rows its top-k list splits in two (2 x 32 x 2 <= 132).
  EXPECT_EQ(MakePlan(decode(128, 32), f).splits, 2);
  SparseMlaParams crossover_fnuz = decode(128, 512);
  crossover_fnuz.cache_type = kFnuz;
  EXPECT_EQ(ChooseBody(crossover_fnuz, f), Body::kSeesawFp8Crossover);
  // Three head groups: no pairs of blocks.
  EXPECT_EQ(ChooseBody(decode(192, 512), f), Body::kSeesawGathered);
  const Plan crossover = MakePlan(decode(128, 128), f);
  EXPECT_EQ(crossover.heads_per_block, 64);
  EXPECT_EQ(crossover.chunk_rows, 128);
  EXPECT_EQ(crossover.splits, 1);
  EXPECT_EQ(crossover.gather_batches, 0);
  // 64 heads: gathered below kSeesawFp8MinRows rows, the dequantising
  // producer from there, however many rows.
  EXPECT_EQ(ChooseBody(decode(64, 1), f), Body::kSeesawGathered);
  EXPECT_EQ(ChooseBody(decode(64, kSeesawFp8MinRows - 1), f),
            Body::kSeesawGathered);
  for (int64_t rows : {kSeesawFp8MinRows, int64_t{66}, int64_t{128},
                       int64_t{228}, int64_t{512}}) {
    EXPECT_EQ(ChooseBody(decode(64, rows), f), Body::kSeesawFp8) << rows;
  }
  SparseMlaParams fnuz = decode(64, 128);
  fnuz.cache_type = kFnuz;
  EXPECT_EQ(ChooseBody(fnuz, f), Body::kSeesawFp8);
  fnuz = decode(64, 512);
  fnuz.cache_type = kFnuz;
  EXPECT_EQ(ChooseBody(fnuz, f), Body::kSeesawFp8);
  // At 32 rows the top-k list still splits (2 * 32 <= 132 multiprocessors).
  EXPECT_EQ(MakePlan(decode(64, 32), f).splits, 4);
  // The gather pass's batches a group: four at 32 rows of top-k 2048 (512
  // blocks), fewer where a pass would leave multiprocessors idle.
  EXPECT_EQ(PlanFor(Body::kSeesawGathered, decode(128, 32), f).gather_batches,
            4);
  EXPECT_EQ(MakePlan(decode(128, 16), f).gather_batches, 2);
  EXPECT_EQ(MakePlan(decode(128, 4), f).gather_batches, 1);
  EXPECT_EQ(MakePlan(decode(128, 1), f).gather_batches, 1);
  EXPECT_EQ(PlanFor(Body::kSeesawGathered, decode(128, 512), f).gather_batches,
            4);                                               // passes of 103
  EXPECT_EQ(MakePlan(decode(64, 128), f).gather_batches, 0);  // seesaw-fp8
  // 72 heads: two head groups.
  EXPECT_EQ(ChooseBody(decode(72, 512), f), Body::kSeesawFp8Crossover);
  EXPECT_EQ(ChooseBody(decode(72, 32), f), Body::kSeesawFp8Crossover);
  EXPECT_EQ(ChooseBody(decode(72, 31), f), Body::kSeesawGathered);
  // An unknown multiprocessor count: no split; the rows decide as before.
  DeviceFeatures unknown = f;
  unknown.multiprocessors = 0;
  EXPECT_EQ(ChooseBody(decode(64, 1), unknown), Body::kSeesawGathered);
  EXPECT_EQ(MakePlan(decode(64, 1), unknown).splits, 1);
  EXPECT_EQ(ChooseBody(decode(64, 32), unknown), Body::kSeesawFp8);
  // Its plan: 64 heads a block, the workspace still carved (the shapes
  // alone decide it).
  const Plan plan = MakePlan(decode(64, 128), f);
  EXPECT_EQ(plan.body, Body::kSeesawFp8);
  EXPECT_EQ(plan.heads_per_block, 64);
  EXPECT_EQ(plan.chunk_rows, 128);
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.workspace_rows, dequantised::kMaxRows);
}

TEST(SparseMlaHeuristicsTest, BodiesABenchMayAskFor) {
  const DeviceFeatures f = H200();
  SparseMlaParams p = Params(128, kFp8, 32);
  p.num_requests = 32;
  p.max_blocks_per_request = 8192 / 64;
  EXPECT_TRUE(BodyRuns(Body::kWarp, p, f));
  EXPECT_TRUE(BodyRuns(Body::kSeesawGathered, p, f));
  EXPECT_TRUE(BodyRuns(Body::kSeesawFp8, p, f));
  EXPECT_TRUE(BodyRuns(Body::kSeesawFp8Crossover, p, f));  // 2 head groups
  EXPECT_FALSE(BodyRuns(Body::kSeesawDequantised, p, f));  // 262144 > 65536
  EXPECT_FALSE(BodyRuns(Body::kSeesaw, p, f));             // an fp8 cache
  EXPECT_TRUE(BodyRuns(Body::kFma, p, f));
  // The prefill shape: every position fits.
  p = Params(64, kFp8, 8192);
  EXPECT_TRUE(BodyRuns(Body::kSeesawDequantised, p, f));
  EXPECT_TRUE(BodyRuns(Body::kSeesawGathered, p, f));
  EXPECT_TRUE(BodyRuns(Body::kSeesawFp8, p, f));
  // None of the fp8 forms for a bf16 cache, fewer heads, or without sm_90a.
  // The crossover: an even number of head groups.
  EXPECT_FALSE(BodyRuns(Body::kSeesawFp8Crossover, Params(64, kFp8), f));
  EXPECT_FALSE(BodyRuns(Body::kSeesawFp8Crossover, Params(192, kFp8), f));
  EXPECT_TRUE(BodyRuns(Body::kSeesawFp8Crossover, Params(72, kFp8), f));
  EXPECT_TRUE(BodyRuns(Body::kSeesawFp8Crossover, Params(256, kFp8), f));
  for (Body b : {Body::kSeesawDequantised, Body::kSeesawGathered,
                 Body::kSeesawFp8, Body::kSeesawFp8Crossover}) {
    EXPECT_FALSE(BodyRuns(b, Params(64, kBf16), f));
    EXPECT_FALSE(BodyRuns(b, Params(63, kFp8), f));
    EXPECT_FALSE(BodyRuns(b, Params(64, kFp8), Amd(65536)));
  }
  EXPECT_TRUE(BodyRuns(Body::kSeesaw, Params(64, kBf16), f));
  EXPECT_TRUE(BodyRuns(Body::kWarp, Params(64, kBf16), f));
  // Other shapes: the FMA kernels only.
  p = Params(64, kBf16);
  p.kv_lora_rank = 256;
  EXPECT_FALSE(BodyRuns(Body::kWarp, p, f));
  EXPECT_TRUE(BodyRuns(Body::kFma, p, f));
  // Names.
  Body body = Body::kFma;
  EXPECT_TRUE(ParseBody("seesaw-fp8", &body));
  EXPECT_EQ(body, Body::kSeesawFp8);
  EXPECT_TRUE(ParseBody("mma", &body));
  EXPECT_EQ(body, Body::kWarp);
  EXPECT_TRUE(ParseBody("gather+seesaw", &body));
  EXPECT_EQ(body, Body::kSeesawGathered);
  EXPECT_FALSE(ParseBody("seesaw-fp", &body));
  EXPECT_FALSE(ParseBody("seesaw-fp8x", &body));
  EXPECT_TRUE(ParseBody("seesaw-fp8x2", &body));
  EXPECT_EQ(body, Body::kSeesawFp8Crossover);
  EXPECT_FALSE(ParseBody("", &body));
}

TEST(SparseMlaHeuristicsTest, TheWorkspaceCarvedDependsOnTheShapesOnly) {
  const DeviceFeatures f = H200();
  // min(kMaxRows, tokens * topk), whichever body runs, for every fp8 call
  // that could take the dequantised path.
  Plan plan = MakePlan(Params(64, kFp8, 8192), f);
  EXPECT_EQ(plan.body, Body::kSeesawDequantised);
  EXPECT_EQ(plan.workspace_rows, dequantised::kMaxRows);
  plan = MakePlan(Params(128, kFnuz, 4, 2048), f);
  EXPECT_EQ(plan.body, Body::kSeesawDequantised);
  EXPECT_EQ(plan.workspace_rows, 4 * 2048);
  SparseMlaParams p = Params(128, kFp8, 32);
  p.num_requests = 32;
  p.max_blocks_per_request = 8192 / 64;
  plan = MakePlan(p, f);
  EXPECT_EQ(plan.body, Body::kSeesawFp8Crossover);
  EXPECT_EQ(plan.workspace_rows, 32 * 2048);
  EXPECT_EQ(plan.chunk_rows, 32);
  EXPECT_EQ(plan.splits, 2);  // 64 blocks on 132 multiprocessors
  plan = PlanFor(Body::kSeesawGathered, p, f);
  EXPECT_EQ(plan.workspace_rows, 32 * 2048);
  EXPECT_EQ(plan.chunk_rows, 32);
  EXPECT_EQ(plan.splits, 2);
  // The warp body's plan on the same call (a bench's comparison).
  plan = PlanFor(Body::kWarp, p, f);
  EXPECT_EQ(plan.body, Body::kWarp);
  EXPECT_EQ(plan.heads_per_block, 64);
  EXPECT_EQ(plan.splits, 2);
  // None where the seesaw body cannot run, nor for a bf16 cache.
  EXPECT_EQ(MakePlan(Params(63, kFp8), f).workspace_rows, 0);
  EXPECT_EQ(MakePlan(Params(64, kBf16), f).workspace_rows, 0);
  DeviceFeatures no_sm90a = f;
  no_sm90a.sm90a = false;
  EXPECT_EQ(MakePlan(Params(64, kFp8), no_sm90a).workspace_rows, 0);
  EXPECT_EQ(MakePlan(Params(128, kFp8), Amd(65536)).workspace_rows, 0);
  p = Params(64, kFp8);
  p.softmax_scale = 0.0f;
  EXPECT_EQ(MakePlan(p, f).workspace_rows, 0);
  // Few rows split the top-k list as over a bf16 cache.
  plan = MakePlan(Params(128, kFp8, 4), f);
  EXPECT_EQ(plan.body, Body::kSeesawDequantised);
  EXPECT_EQ(plan.heads_per_block, 64);
  EXPECT_EQ(plan.splits, 8);
}

TEST(SparseMlaHeuristicsTest, SeesawBodyNeedsAPositiveSoftmaxScale) {
  // Its softmax takes each row's maximum before the scale.
  const DeviceFeatures f = H200();
  SparseMlaParams p = Params(64, kBf16);
  p.softmax_scale = 0.0f;
  EXPECT_EQ(ChooseBody(p, f), Body::kWarp);
  p.softmax_scale = -0.5f;
  EXPECT_EQ(ChooseBody(p, f), Body::kWarp);
  p.softmax_scale = 1e-30f;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesaw);
}

TEST(SparseMlaHeuristicsTest, WithoutSm90aCodeTheWarpBodyRuns) {
  DeviceFeatures f = H200();
  f.sm90a = false;  // e.g. an sm_90 (not 90a) build
  EXPECT_EQ(ChooseBody(Params(64, kBf16), f), Body::kWarp);
  EXPECT_EQ(ChooseBody(Params(128, kBf16), f), Body::kWarp);
}

TEST(SparseMlaHeuristicsTest, SharedMemoryBoundaries) {
  DeviceFeatures f = H200();
  // The seesaw body needs exactly its plan's bytes, over a bf16 cache and
  // over an fp8 cache's workspace.
  f.max_shared_bytes_per_block = kSeesawBytes;
  EXPECT_EQ(ChooseBody(Params(64, kBf16), f), Body::kSeesaw);
  f.max_shared_bytes_per_block = kSeesawBytes - 1;
  EXPECT_EQ(ChooseBody(Params(64, kBf16), f), Body::kWarp);
  SparseMlaParams fp8 = Params(64, kFp8);
  f.max_shared_bytes_per_block = kSeesawBytes;
  EXPECT_EQ(ChooseBody(fp8, f), Body::kSeesawDequantised);
  f.max_shared_bytes_per_block = kSeesawBytes - 1;
  EXPECT_EQ(ChooseBody(fp8, f), Body::kWarp);
  // The warp body likewise, per heads per block and cache.
  for (int heads : {32, 64}) {
    for (LatentCacheType cache : {kBf16, kFp8}) {
      const int bytes = warp::SharedBytes(32, heads, cache != kBf16);
      f.max_shared_bytes_per_block = bytes;
      EXPECT_EQ(ChooseBody(Params(heads, cache), f), Body::kWarp)
          << heads << " heads";
      f.max_shared_bytes_per_block = bytes - 1;
      EXPECT_EQ(ChooseBody(Params(heads, cache), f), Body::kFma)
          << heads << " heads";
    }
  }
  // An A100's 163 KiB: too little for the 64-head warp body.
  f.max_shared_bytes_per_block = 166912;
  f.sm90a = false;
  EXPECT_EQ(ChooseBody(Params(64, kBf16), f), Body::kFma);
}

TEST(SparseMlaHeuristicsTest, WarpBodySizesFollowTheBackend) {
  // NVIDIA: 48-key tiles on m16n8k16; AMD: 32-key tiles on 32x32x8 MFMA.
  EXPECT_EQ(warp::Config<32>::kTileKeys, 48);
  EXPECT_EQ(warp::Config<64>::kTileKeys, 32);
  EXPECT_EQ(warp::SharedBytes(32, 64, false), 215076);
  EXPECT_LT(warp::SharedBytes(64, 32, false), warp::SharedBytes(32, 32, false));
  // AMD: 32 heads a block, within a workgroup's 64 KiB of LDS (MI300X) for
  // every cache, so the matrix body runs at every head count; one byte less
  // takes the FMA kernels.
  for (LatentCacheType cache : {kBf16, kFp8, kFnuz}) {
    const int bytes = warp::SharedBytes(64, 128, cache != kBf16);
    EXPECT_LE(bytes, kAmdLdsBytesPerWorkgroup);
    EXPECT_EQ(bytes, warp::SharedBytes(64, 1, cache != kBf16));
    for (int heads : {1, 32, 64, 128}) {
      EXPECT_EQ(ChooseBody(Params(heads, cache), Amd(65536)), Body::kWarp)
          << heads << " heads";
      EXPECT_EQ(ChooseBody(Params(heads, cache), Amd(bytes - 1)), Body::kFma)
          << heads << " heads";
    }
  }
  EXPECT_EQ(warp::SharedBytes(64, 64, false), 61076);
  EXPECT_EQ(warp::SharedBytes(64, 64, true), 62612);
  // Never an sm_90a body without sm_90a code.
  EXPECT_EQ(ChooseBody(Params(64, kBf16), Amd(1 << 20)), Body::kWarp);
}

TEST(SparseMlaHeuristicsTest, OtherShapesRunOnFma) {
  const DeviceFeatures f = H200();
  SparseMlaParams p = Params(64, kBf16);
  p.kv_lora_rank = 256;
  EXPECT_EQ(ChooseBody(p, f), Body::kFma);
  p = Params(64, kBf16);
  p.rope_dim = 32;
  EXPECT_EQ(ChooseBody(p, f), Body::kFma);
  p = Params(64, kBf16);
  p.kv_cache += 8;  // entries not 16-byte aligned
  EXPECT_EQ(ChooseBody(p, f), Body::kFma);
  p = Params(64, kBf16);
  p.cache_token_stride = 1160;
  EXPECT_EQ(ChooseBody(p, f), Body::kFma);
  p = Params(64, kBf16);
  p.cache_block_stride += 8;
  EXPECT_EQ(ChooseBody(p, f), Body::kFma);
  // A top-k list so long that the index chunks would overflow.
  p = Params(64, kBf16);
  p.topk = 0x7fffffff - kIndexChunk;
  EXPECT_EQ(ChooseBody(p, f), Body::kSeesaw);
  p.topk += 1;
  EXPECT_EQ(ChooseBody(p, f), Body::kFma);
}

TEST(SparseMlaHeuristicsTest, UnknownFeaturesAssumeTheWarpBodyFits) {
  // No device (the query failed): the warp body, whose launch then reports
  // the missing device; never an sm_90a body.
  const DeviceFeatures none;
  EXPECT_EQ(ChooseBody(Params(64, kBf16), none), Body::kWarp);
  EXPECT_EQ(ChooseBody(Params(8, kFp8), none), Body::kWarp);
}

TEST(SparseMlaHeuristicsTest, BodyNamesAreTheReportedPaths) {
  EXPECT_STREQ(BodyName(Body::kSeesaw), "seesaw");
  EXPECT_STREQ(BodyName(Body::kSeesawDequantised), "dequant+seesaw");
  EXPECT_STREQ(BodyName(Body::kSeesawGathered), "gather+seesaw");
  EXPECT_STREQ(BodyName(Body::kSeesawFp8), "seesaw-fp8");
  EXPECT_STREQ(BodyName(Body::kSeesawFp8Crossover), "seesaw-fp8x2");
  EXPECT_STREQ(BodyName(Body::kWarp), "mma");
  EXPECT_STREQ(BodyName(Body::kFma), "fma");
}

TEST(SparseMlaHeuristicsTest, HeadsPerBlock) {
  const DeviceFeatures f = H200();
  EXPECT_EQ(MakePlan(Params(1, kBf16), f).heads_per_block, 32);
  EXPECT_EQ(MakePlan(Params(32, kBf16), f).heads_per_block, 32);
  EXPECT_EQ(MakePlan(Params(33, kBf16), f).heads_per_block, 64);
  EXPECT_EQ(MakePlan(Params(64, kBf16), f).heads_per_block, 64);
  EXPECT_EQ(MakePlan(Params(128, kFp8), f).heads_per_block, 64);
  // AMD: always 32 (config.h's HeadsPerBlock).
  for (int heads : {1, 32, 33, 64, 128}) {
    EXPECT_EQ(MakePlan(Params(heads, kBf16), Amd(65536)).heads_per_block, 32);
  }
}

TEST(SparseMlaHeuristicsTest, ChunksBoundTheLatentScratch) {
  const DeviceFeatures f = H200();
  // bf16 latent: heads * 512 * 2 bytes a row.
  Plan plan = MakePlan(Params(128, kBf16, 100000), f);
  EXPECT_EQ(plan.chunk_rows, kLatentScratchBytes / (128 * 512 * 2));
  plan = MakePlan(Params(128, kBf16, 1000), f);
  EXPECT_EQ(plan.chunk_rows, 1000);
  // At most one launch's grid.x.
  plan = MakePlan(Params(1, kBf16, 1000000), f);
  EXPECT_EQ(plan.chunk_rows, kMaxRowsPerLaunch);
  // FMA: an fp32 latent of kv_lora_rank a row.
  SparseMlaParams p = Params(16, kBf16, 1 << 20);
  p.kv_lora_rank = 128;
  p.rope_dim = 32;
  plan = MakePlan(p, f);
  EXPECT_EQ(plan.body, Body::kFma);
  EXPECT_EQ(plan.chunk_rows, kLatentScratchBytes / (16 * 128 * 4));
  EXPECT_EQ(plan.splits, 1);
}

TEST(SparseMlaHeuristicsTest, FewRowsSplitTheTopkList) {
  const DeviceFeatures f = H200();
  // 4 rows x 2 head groups = 8 blocks on 132 multiprocessors: 16 splits of
  // a 2048 list would be 128 indices each; at least 256 each: 8.
  EXPECT_EQ(MakePlan(Params(128, kBf16, 4), f).splits, 8);
  // Whole waves: 32 blocks, 4 splits (not 5).
  EXPECT_EQ(MakePlan(Params(128, kFp8, 16, 4096), f).splits, 4);
  // At most 32.
  EXPECT_EQ(MakePlan(Params(32, kBf16, 1, 1 << 20), f).splits, 32);
  // Enough blocks already (2 x 66 > 132 / 2), a short list, or an unknown
  // multiprocessor count: no split.
  EXPECT_EQ(MakePlan(Params(64, kBf16, 67), f).splits, 1);
  EXPECT_EQ(MakePlan(Params(64, kBf16, 66), f).splits, 2);
  EXPECT_EQ(MakePlan(Params(128, kBf16, 4, 511), f).splits, 1);
  DeviceFeatures unknown = f;
  unknown.multiprocessors = 0;
  EXPECT_EQ(MakePlan(Params(128, kBf16, 4), unknown).splits, 1);
  // Several chunks: no split.
  EXPECT_EQ(MakePlan(Params(1, kBf16, 100000, 2048), f).splits, 1);
}

TEST(SparseMlaHeuristicsTest, GatheredRowsRunInEqualPassesOfTheWorkspace) {
  const DeviceFeatures f = H200();
  // 128 requests x 4 tokens (MTP 3) over 64K: 512 rows of top-k 2048; the
  // workspace holds 233016 / 2048 = 113 rows, so 5 passes of 103 (not 4 of
  // 113 and one of 60), none split.
  // (MakePlan picks the crossover there: the gathered plan as a bench asks
  // for it.)
  SparseMlaParams p = Params(128, kFp8, 512);
  p.num_requests = 128;
  p.max_blocks_per_request = 65536 / 64;
  Plan plan = PlanFor(Body::kSeesawGathered, p, f);
  EXPECT_EQ(plan.body, Body::kSeesawGathered);
  EXPECT_EQ(plan.workspace_rows, dequantised::kMaxRows);
  EXPECT_EQ(plan.chunk_rows, 103);
  EXPECT_EQ(plan.splits, 1);
  // 32 x 4 rows: two passes of 64 (128 blocks each), no split.
  p = Params(128, kFp8, 128);
  p.num_requests = 32;
  p.max_blocks_per_request = 8192 / 64;
  plan = PlanFor(Body::kSeesawGathered, p, f);
  EXPECT_EQ(plan.body, Body::kSeesawGathered);
  EXPECT_EQ(plan.chunk_rows, 64);
  EXPECT_EQ(plan.splits, 1);
  // One request, one token, 64 heads: one block a row, 8 splits of 256.
  p = Params(64, kFp8, 1);
  p.max_blocks_per_request = 8192 / 64;
  plan = MakePlan(p, f);
  EXPECT_EQ(plan.body, Body::kSeesawGathered);
  EXPECT_EQ(plan.chunk_rows, 1);
  EXPECT_EQ(plan.splits, 8);
}

}  // namespace
}  // namespace dsa::attention::gpu::sparse_mla
