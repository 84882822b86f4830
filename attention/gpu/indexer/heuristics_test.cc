// The indexer decision tables (heuristics.h), on the CPU. Logits: every body
// reachable, the shape boundaries of each, sm_90a code on and off, the
// persistent kernel's block width, key path and key splitting, and the
// options that force a body (accepted where it can run, refused with a
// message naming why where it cannot). Top-k: the instance by width and
// rows on either side of each boundary, and forced paths.
#include "attention/gpu/indexer/heuristics.h"

#include <cstdint>
#include <set>
#include <string>

#include "attention/gpu/indexer/config.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu::indexer {
namespace {

using Body = IndexerLogitsBody;
#define DSA_TOPK_TEST_VALUE(name, text) , IndexerTopKPath::name

// An H200's features with sm_90a code loaded.
DeviceFeatures Hopper() {
  DeviceFeatures f;
  f.device = 0;
  f.multiprocessors = 132;
  f.max_shared_bytes_per_block = 232448;
  f.sm90a = true;
  f.tensor_maps = true;
  return f;
}
// The same card running sm_90 (or sm_80) code: no wgmma, no TMA.
DeviceFeatures NotSm90a() {
  DeviceFeatures f = Hopper();
  f.sm90a = false;
  f.tensor_maps = false;
  return f;
}
// An AMD MI300X as the ROCm build reports it.
DeviceFeatures Amd() {
  DeviceFeatures f;
  f.device = 0;
  f.multiprocessors = 304;
  f.max_shared_bytes_per_block = 65536;
  return f;
}

// A valid prefill of one request: `rows` causal rows, 16-byte aligned
// (fake) device pointers, block size 64.
IndexerLogitsParams Prefill(int heads, int64_t rows) {
  IndexerLogitsParams p;
  p.q_fp8 = reinterpret_cast<const uint8_t*>(uintptr_t{0x10000});
  p.head_weights = reinterpret_cast<const float*>(uintptr_t{0x20000});
  p.k_cache = reinterpret_cast<const uint8_t*>(uintptr_t{0x30000});
  p.rows = rows;
  p.heads = heads;
  p.head_dim = 128;
  p.block_size = 64;
  p.num_blocks = (rows + 63) / 64;
  p.num_requests = 1;
  p.max_blocks_per_request = static_cast<int32_t>(p.num_blocks);
  p.block_table_stride = p.max_blocks_per_request;
  p.width = rows;
  p.logits_stride = rows;
  return p;
}
// Paged decode: one row per request, `context` cached tokens each.
IndexerLogitsParams Decode(int heads, int32_t requests, int64_t context) {
  IndexerLogitsParams p = Prefill(heads, requests);
  p.num_requests = requests;
  p.max_blocks_per_request = static_cast<int32_t>((context + 63) / 64);
  p.block_table_stride = p.max_blocks_per_request;
  p.num_blocks = int64_t{p.max_blocks_per_request} * requests;
  p.width = context;
  p.logits_stride = context;
  return p;
}

LogitsPlan PlanOrDie(const IndexerLogitsParams& p, const DeviceFeatures& f,
                     const IndexerLogitsOptions& options = {}) {
  LogitsPlan plan;
  const LaunchResult r = PlanIndexerLogits(p, options, f, &plan);
  EXPECT_TRUE(r.ok()) << r.message;
  return plan;
}
std::string Refusal(const IndexerLogitsParams& p, const DeviceFeatures& f,
                    const IndexerLogitsOptions& options) {
  LogitsPlan plan;
  const LaunchResult r = PlanIndexerLogits(p, options, f, &plan);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument)
      << "planned " << LogitsPathName(plan);
  return r.message;
}

TEST(IndexerLogitsHeuristicsTest, HopperPrefillRunsThePersistentKernel) {
  for (int heads : {32, 64, 128}) {
    const LogitsPlan plan = PlanOrDie(Prefill(heads, 8192), Hopper());
    EXPECT_EQ(plan.body, Body::kPersistent) << heads;
    EXPECT_TRUE(plan.wide) << heads;
    EXPECT_TRUE(plan.tma_keys) << heads;
    EXPECT_EQ(plan.rows_per_block, 256 / heads);
    EXPECT_EQ(plan.blocks, 8192 / (256 / heads));
    EXPECT_EQ(plan.splits, 1);
    EXPECT_EQ(plan.grid, 132);  // one CTA a multiprocessor
    EXPECT_EQ(plan.math_groups, 4);
    EXPECT_STREQ(LogitsPathName(plan), "persistent_wide_tma_4g");
  }
}

TEST(IndexerLogitsHeuristicsTest, FourMathGroupsOnLongWideLaunches) {
  // Four where the 256-column blocks times the 64-key tiles of a full row
  // reach 64 a multiprocessor (132 x 64 = 8448): at 32 heads T = 2048 holds
  // 256 x 32 = 8192, T = 2112 holds 264 x 33 = 8712.
  EXPECT_EQ(PlanOrDie(Prefill(32, 2048), Hopper()).math_groups, 2);
  EXPECT_EQ(PlanOrDie(Prefill(32, 2112), Hopper()).math_groups, 4);
  EXPECT_EQ(PlanOrDie(Prefill(32, 1900), Hopper()).math_groups, 2);
  EXPECT_EQ(PlanOrDie(Prefill(64, 1900), Hopper()).math_groups, 4);
  EXPECT_EQ(PlanOrDie(Prefill(64, 1024), Hopper()).math_groups, 2);
  LogitsPlan plan = PlanOrDie(Prefill(32, 1024), Hopper());
  EXPECT_EQ(plan.math_groups, 2);
  EXPECT_STREQ(LogitsPathName(plan), "persistent_wide_tma");
  // Narrow blocks (decode) keep two, whose one-row tiles take m64n32.
  plan = PlanOrDie(Decode(32, 32, 65536), Hopper());
  EXPECT_FALSE(plan.wide);
  EXPECT_EQ(plan.math_groups, 2);
  // Forced: two on a long launch; four on decode rows on wide blocks.
  IndexerLogitsOptions o;
  o.groups = IndexerLogitsGroups::kTwo;
  plan = PlanOrDie(Prefill(32, 8192), Hopper(), o);
  EXPECT_EQ(plan.math_groups, 2);
  EXPECT_STREQ(LogitsPathName(plan), "persistent_wide_tma");
  o.groups = IndexerLogitsGroups::kFour;
  o.blocks = IndexerLogitsBlocks::kWide;
  plan = PlanOrDie(Decode(32, 32, 8192), Hopper(), o);
  EXPECT_EQ(plan.math_groups, 4);
  EXPECT_STREQ(LogitsPathName(plan), "persistent_wide_tma_4g");
}

TEST(IndexerLogitsHeuristicsTest, WideBlocksFromRowsPerRequest) {
  // Wide when rows >= (256 / heads) * requests: 8 rows of 32 heads a block.
  IndexerLogitsParams p = Prefill(32, 64);
  p.num_requests = 8;
  EXPECT_TRUE(PlanOrDie(p, Hopper()).wide);
  p.rows = 63;
  EXPECT_FALSE(PlanOrDie(p, Hopper()).wide);
  p = Prefill(128, 2);
  EXPECT_TRUE(PlanOrDie(p, Hopper()).wide);
  p.num_requests = 2;
  EXPECT_FALSE(PlanOrDie(p, Hopper()).wide);
}

TEST(IndexerLogitsHeuristicsTest, DecodeSplitsKeysOverTheMultiprocessors) {
  // 32 requests of 8192 tokens, 32 heads: narrow blocks of 4 rows, 8 blocks,
  // each split into min(132 / 8, 8192 / 512) = 16 chunks.
  LogitsPlan plan = PlanOrDie(Decode(32, 32, 8192), Hopper());
  EXPECT_EQ(plan.body, Body::kPersistent);
  EXPECT_FALSE(plan.wide);
  EXPECT_EQ(plan.rows_per_block, 4);
  EXPECT_EQ(plan.blocks, 8);
  EXPECT_EQ(plan.splits, 16);
  EXPECT_EQ(plan.grid, 128);
  EXPECT_STREQ(LogitsPathName(plan), "persistent_narrow_tma");
  // Short contexts: chunks of at least kSplitKeys keys.
  plan = PlanOrDie(Decode(32, 32, 2 * Persistent::kSplitKeys - 1), Hopper());
  EXPECT_EQ(plan.splits, 1);
  plan = PlanOrDie(Decode(32, 32, 2 * Persistent::kSplitKeys), Hopper());
  EXPECT_EQ(plan.splits, 2);
  // More blocks than multiprocessors: no split, the grid is the SMs.
  plan = PlanOrDie(Decode(64, 1000, 8192), Hopper());
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.grid, 132);
}

TEST(IndexerLogitsHeuristicsTest, KeysByTmaOnlyWhereTheCacheAllows) {
  for (int bs : {64, 128, 256}) {
    IndexerLogitsParams p = Prefill(64, 1000);
    p.block_size = bs;
    EXPECT_TRUE(PlanOrDie(p, Hopper()).tma_keys) << bs;
  }
  for (int bs : {4, 16, 20, 32, 96 + 4}) {
    IndexerLogitsParams p = Prefill(64, 1000);
    p.block_size = bs;
    const LogitsPlan plan = PlanOrDie(p, Hopper());
    EXPECT_EQ(plan.body, Body::kPersistent) << bs;
    EXPECT_FALSE(plan.tma_keys) << bs;
    EXPECT_STREQ(LogitsPathName(plan), "persistent_wide_cp_async");
  }
  IndexerLogitsParams p = Prefill(64, 1000);
  DeviceFeatures f = Hopper();
  f.tensor_maps = false;
  EXPECT_FALSE(PlanOrDie(p, f).tma_keys);
  p.num_blocks = int64_t{1} << 31;  // past a 32-bit page coordinate
  EXPECT_FALSE(PlanOrDie(p, Hopper()).tma_keys);
  p.num_blocks = 0x7fffffff;
  EXPECT_TRUE(PlanOrDie(p, Hopper()).tma_keys);
}

TEST(IndexerLogitsHeuristicsTest, MatrixKernelWhereThePersistentOneDoesNot) {
  // 256 heads: one row fills a block; on sm_90a the warpgroup body.
  LogitsPlan plan = PlanOrDie(Prefill(256, 100), Hopper());
  EXPECT_EQ(plan.body, Body::kWarpgroupMma);
  EXPECT_EQ(plan.rows_per_block, 1);
  EXPECT_EQ(plan.grid, 100);
  EXPECT_STREQ(LogitsPathName(plan), "warpgroup_mma");
  // Too little shared memory for the persistent kernel's ring.
  DeviceFeatures small = Hopper();
  small.max_shared_bytes_per_block = PersistentSmem<false>::kSmemBytes - 1;
  plan = PlanOrDie(Prefill(32, 100), small);
  EXPECT_EQ(plan.body, Body::kWarpgroupMma);
  EXPECT_EQ(plan.rows_per_block, 8);
  EXPECT_EQ(plan.grid, 13);
  // Enough for narrow blocks only: decode-like rows still go persistent,
  // prefill rows (which want wide blocks) too, on narrow blocks.
  small.max_shared_bytes_per_block = PersistentSmem<false>::kSmemBytes;
  plan = PlanOrDie(Prefill(32, 100), small);
  EXPECT_EQ(plan.body, Body::kPersistent);
  EXPECT_FALSE(plan.wide);
  // fnuz data on sm_90a: the warp-level body (wgmma takes e4m3fn).
  IndexerLogitsParams p = Prefill(32, 100);
  p.encoding = Fp8Encoding::kE4m3fnuz;
  EXPECT_EQ(PlanOrDie(p, Hopper()).body, Body::kWarpMma);
  // Code that is not sm_90a's, and AMD: warp-level products everywhere.
  for (int heads : {32, 64, 128, 256}) {
    EXPECT_EQ(PlanOrDie(Prefill(heads, 100), NotSm90a()).body, Body::kWarpMma);
    p = Prefill(heads, 100);
    p.encoding = Fp8Encoding::kE4m3fnuz;
    plan = PlanOrDie(p, Amd());
    EXPECT_EQ(plan.body, Body::kWarpMma);
    EXPECT_STREQ(LogitsPathName(plan), "warp_mma");
  }
}

TEST(IndexerLogitsHeuristicsTest, FmaForShapesTheMatrixKernelDoesNotTake) {
  auto body = [](const IndexerLogitsParams& p) {
    return PlanOrDie(p, Hopper()).body;
  };
  IndexerLogitsParams p = Prefill(32, 100);
  ASSERT_NE(body(p), Body::kFma);
  for (int heads : {1, 16, 31, 33, 48, 96, 512}) {
    p = Prefill(heads, 100);
    EXPECT_EQ(body(p), Body::kFma) << heads;
  }
  for (int dim : {64, 127, 129, 192}) {
    p = Prefill(32, 100);
    p.head_dim = dim;
    EXPECT_EQ(body(p), Body::kFma) << dim;
  }
  for (int bs : {1, 2, 6, 66}) {
    p = Prefill(32, 100);
    p.block_size = bs;
    EXPECT_EQ(body(p), Body::kFma) << bs;
  }
  p = Prefill(32, 100);
  p.q_fp8 += 8;  // 8-byte aligned only
  EXPECT_EQ(body(p), Body::kFma);
  p = Prefill(32, 100);
  p.k_cache += 4;
  EXPECT_EQ(body(p), Body::kFma);
  const LogitsPlan plan = PlanOrDie(p, Hopper());
  EXPECT_EQ(plan.grid, 100);  // one block a row
  EXPECT_STREQ(LogitsPathName(plan), "fma");
}

TEST(IndexerLogitsHeuristicsTest, EveryBodyAndVariantIsReachable) {
  std::set<std::string> seen;
  const DeviceFeatures features[] = {Hopper(), NotSm90a(), Amd()};
  for (const DeviceFeatures& f : features) {
    for (int heads : {16, 32, 64, 128, 256}) {
      for (int bs : {16, 64}) {
        for (int64_t rows : {int64_t{4}, int64_t{300}, int64_t{5000}}) {
          for (Fp8Encoding e : {Fp8Encoding::kE4m3fn, Fp8Encoding::kE4m3fnuz}) {
            IndexerLogitsParams p =
                Decode(heads, static_cast<int32_t>(rows), 4096);
            p.block_size = bs;
            p.encoding = e;
            p.num_requests = rows > 4 ? 1 : static_cast<int32_t>(rows);
            seen.insert(LogitsPathName(PlanOrDie(p, f)));
          }
        }
      }
    }
  }
  EXPECT_EQ(seen,
            (std::set<std::string>{
                "fma", "warp_mma", "warpgroup_mma", "persistent_narrow_tma",
                "persistent_narrow_cp_async", "persistent_wide_tma",
                "persistent_wide_cp_async", "persistent_wide_tma_4g",
                "persistent_wide_cp_async_4g"}));
}

TEST(IndexerLogitsHeuristicsTest, OptionsForceABodyWhereItCanRun) {
  IndexerLogitsOptions o;
  o.body = Body::kFma;
  EXPECT_EQ(PlanOrDie(Prefill(32, 100), Hopper(), o).body, Body::kFma);
  o.body = Body::kWarpgroupMma;
  LogitsPlan plan = PlanOrDie(Prefill(32, 100), Hopper(), o);
  EXPECT_EQ(plan.body, Body::kWarpgroupMma);
  EXPECT_EQ(plan.grid, 13);
  o = {};
  o.keys = IndexerLogitsKeys::kCpAsync;  // implies the persistent body
  plan = PlanOrDie(Prefill(32, 100), Hopper(), o);
  EXPECT_EQ(plan.body, Body::kPersistent);
  EXPECT_FALSE(plan.tma_keys);
  EXPECT_TRUE(plan.wide);
  o.blocks = IndexerLogitsBlocks::kNarrow;
  plan = PlanOrDie(Prefill(32, 100), Hopper(), o);
  EXPECT_FALSE(plan.wide);
  EXPECT_EQ(plan.rows_per_block, 4);
  EXPECT_STREQ(LogitsPathName(plan), "persistent_narrow_cp_async");
  o = {};
  o.body = Body::kPersistent;
  o.blocks = IndexerLogitsBlocks::kWide;  // decode rows on wide blocks
  plan = PlanOrDie(Decode(32, 32, 8192), Hopper(), o);
  EXPECT_TRUE(plan.wide);
  EXPECT_EQ(plan.rows_per_block, 8);
  EXPECT_EQ(plan.blocks, 4);
  EXPECT_EQ(plan.splits, 16);  // min(132 / 4, 8192 / 512)
  EXPECT_STREQ(LogitsPathName(plan), "persistent_wide_tma");
  o = {};
  o.body = Body::kWarpMma;
  EXPECT_EQ(PlanOrDie(Prefill(64, 100), NotSm90a(), o).body, Body::kWarpMma);
}

TEST(IndexerLogitsHeuristicsTest, OptionsThatCannotRunAreRefusedWithAReason) {
  IndexerLogitsOptions o;
  o.body = Body::kWarpgroupMma;
  EXPECT_NE(Refusal(Prefill(32, 100), NotSm90a(), o).find("not sm_90a"),
            std::string::npos);
  o.body = Body::kWarpMma;  // sm_90a e4m3fn: the matrix kernel is wgmma's
  EXPECT_NE(Refusal(Prefill(32, 100), Hopper(), o).find("warpgroup_mma"),
            std::string::npos);
  IndexerLogitsParams p = Prefill(32, 100);
  p.head_dim = 64;
  EXPECT_NE(Refusal(p, NotSm90a(), o).find("head_dim 64"), std::string::npos);
  o.body = Body::kPersistent;
  EXPECT_NE(Refusal(Prefill(256, 100), Hopper(), o).find("256 heads"),
            std::string::npos);
  EXPECT_NE(Refusal(Prefill(32, 100), Amd(), o).find("not sm_90a"),
            std::string::npos);
  p = Prefill(32, 100);
  p.encoding = Fp8Encoding::kE4m3fnuz;
  EXPECT_NE(Refusal(p, Hopper(), o).find("e4m3fnuz"), std::string::npos);
  o = {};
  o.keys = IndexerLogitsKeys::kTma;
  p = Prefill(32, 100);
  p.block_size = 32;
  EXPECT_NE(Refusal(p, Hopper(), o).find("block_size 32"), std::string::npos);
  o = {};
  o.body = Body::kFma;
  o.blocks = IndexerLogitsBlocks::kWide;
  EXPECT_NE(Refusal(Prefill(32, 100), Hopper(), o).find("persistent"),
            std::string::npos);
  o = {};
  o.groups = IndexerLogitsGroups::kFour;  // decode rows: narrow blocks
  EXPECT_NE(Refusal(Decode(32, 32, 8192), Hopper(), o).find("wide blocks"),
            std::string::npos);
  o.blocks = IndexerLogitsBlocks::kNarrow;
  EXPECT_NE(Refusal(Prefill(32, 8192), Hopper(), o).find("wide blocks"),
            std::string::npos);
}

TEST(IndexerLogitsHeuristicsTest, NamesRoundTrip) {
  for (Body b : {Body::kAuto, Body::kFma, Body::kWarpMma, Body::kWarpgroupMma,
                 Body::kPersistent}) {
    Body parsed = Body::kFma;
    ASSERT_TRUE(ParseBody(BodyName(b), &parsed)) << BodyName(b);
    EXPECT_EQ(parsed, b);
  }
  for (IndexerLogitsBlocks b :
       {IndexerLogitsBlocks::kAuto, IndexerLogitsBlocks::kNarrow,
        IndexerLogitsBlocks::kWide}) {
    IndexerLogitsBlocks parsed = IndexerLogitsBlocks::kAuto;
    ASSERT_TRUE(ParseBlocks(BlocksName(b), &parsed));
    EXPECT_EQ(parsed, b);
  }
  for (IndexerLogitsKeys k : {IndexerLogitsKeys::kAuto, IndexerLogitsKeys::kTma,
                              IndexerLogitsKeys::kCpAsync}) {
    IndexerLogitsKeys parsed = IndexerLogitsKeys::kAuto;
    ASSERT_TRUE(ParseKeys(KeysName(k), &parsed));
    EXPECT_EQ(parsed, k);
  }
  for (IndexerLogitsGroups g :
       {IndexerLogitsGroups::kAuto, IndexerLogitsGroups::kTwo,
        IndexerLogitsGroups::kFour}) {
    IndexerLogitsGroups parsed = IndexerLogitsGroups::kAuto;
    ASSERT_TRUE(ParseGroups(GroupsName(g), &parsed));
    EXPECT_EQ(parsed, g);
  }
  IndexerLogitsGroups groups = IndexerLogitsGroups::kTwo;
  EXPECT_FALSE(ParseGroups("3", &groups));
  EXPECT_EQ(groups, IndexerLogitsGroups::kTwo);
  Body body = Body::kFma;
  EXPECT_FALSE(ParseBody("mma", &body));
  EXPECT_EQ(body, Body::kFma);
  IndexerLogitsKeys keys = IndexerLogitsKeys::kAuto;
  EXPECT_FALSE(ParseKeys("", &keys));
}

// `rows` rows of `width` columns, k = 2048.
IndexerTopKParams TopKRows(int64_t rows, int64_t width) {
  IndexerTopKParams p;
  p.rows = rows;
  p.width = width;
  p.logits_stride = width;
  p.topk = 2048;
  p.topk_stride = 2048;
  return p;
}

IndexerTopKPath TopKChoice(const IndexerTopKParams& p, const DeviceFeatures& f,
                           IndexerTopKPath forced = IndexerTopKPath::kAuto) {
  IndexerTopKOptions o;
  o.path = forced;
  TopKPlan plan;
  const LaunchResult r = PlanIndexerTopK(p, o, f, &plan);
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_NE(plan.path, IndexerTopKPath::kAuto);
  EXPECT_GT(plan.threads, 0);
  return plan.path;
}

TEST(IndexerTopKHeuristicsTest, StagedUpToTheStageStreamedBeyond) {
  using Path = IndexerTopKPath;
  for (const DeviceFeatures& f : {Hopper(), Amd()}) {
    // Prefill rows that fit the stage: staged, however many.
    EXPECT_EQ(TopKChoice(TopKRows(1024, 1024), f), Path::kStaged512);
    EXPECT_EQ(TopKChoice(TopKRows(8192, kTopKStageKeys), f), Path::kStaged512);
    EXPECT_EQ(TopKChoice(TopKRows(1, kTopKStageKeys), f), Path::kStaged512);
    // Wider: a row a multiprocessor up to one row each, then four.
    const int sms = f.multiprocessors;
    EXPECT_EQ(TopKChoice(TopKRows(1, kTopKStageKeys + 1), f),
              Path::kStreamed1024);
    EXPECT_EQ(TopKChoice(TopKRows(32, 131072), f), Path::kStreamed1024);
    EXPECT_EQ(TopKChoice(TopKRows(sms, 65536), f), Path::kStreamed1024);
    EXPECT_EQ(TopKChoice(TopKRows(sms + 1, 65536), f), Path::kStreamed512);
    EXPECT_EQ(TopKChoice(TopKRows(16384, 16384), f), Path::kStreamed512);
  }
}

TEST(IndexerTopKHeuristicsTest, ForcedPathsRunOrSayWhyNot) {
  using Path = IndexerTopKPath;
  const IndexerTopKParams wide = TopKRows(4, 65536);
  for (const DeviceFeatures& f : {Hopper(), Amd()}) {
    for (Path forced : {Path::kStreamed1024, Path::kStreamed512}) {
      EXPECT_EQ(TopKChoice(wide, f, forced), forced);
      EXPECT_EQ(TopKChoice(TopKRows(4096, 4096), f, forced), forced);
    }
    EXPECT_EQ(TopKChoice(TopKRows(4096, 4096), f, Path::kStaged512),
              Path::kStaged512);
    IndexerTopKOptions o;
    o.path = Path::kStaged512;
    TopKPlan plan;
    const LaunchResult r = PlanIndexerTopK(wide, o, f, &plan);
    EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
    EXPECT_NE(std::string(r.message).find("width 65536"), std::string::npos)
        << r.message;
  }
  // Every instance fits 64 KiB (AMD's LDS); the bitmap one of 1024 threads
  // needs more than the 48 KiB a block gets without opting in.
  DeviceFeatures small = Hopper();
  small.max_shared_bytes_per_block = 48 * 1024;
  IndexerTopKOptions o;
  o.path = Path::kStreamed1024;
  TopKPlan plan;
  const LaunchResult r = PlanIndexerTopK(wide, o, small, &plan);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("streamed_1024 needs"),
            std::string::npos)
      << r.message;
  EXPECT_EQ(TopKChoice(wide, small), Path::kStreamed512);
  EXPECT_EQ(TopKChoice(wide, small, Path::kStreamed512), Path::kStreamed512);
}

TEST(IndexerTopKHeuristicsTest, NamesRoundTrip) {
  std::set<std::string> names;
  for (IndexerTopKPath path :
       {IndexerTopKPath::kAuto DSA_INDEXER_TOPK_PATHS(DSA_TOPK_TEST_VALUE)}) {
    IndexerTopKPath parsed = IndexerTopKPath::kAuto;
    ASSERT_TRUE(ParseTopKPath(TopKPathName(path), &parsed))
        << TopKPathName(path);
    EXPECT_EQ(parsed, path);
    EXPECT_TRUE(names.insert(TopKPathName(path)).second) << TopKPathName(path);
  }
  IndexerTopKPath path = IndexerTopKPath::kAuto;
  EXPECT_FALSE(ParseTopKPath("radix", &path));
  EXPECT_EQ(path, IndexerTopKPath::kAuto);
}

}  // namespace
}  // namespace dsa::attention::gpu::indexer
