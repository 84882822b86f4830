// The memory-bound ops' decision table (heuristics.h) without a device:
// both bodies of the K write and Q reached, the rope dims and head dims at
// the register paths' edges, the 32-bit row limit of Q's register path, the
// explicit staged variant and the Hadamard rotation, the staged grids at
// the shared-memory budget's edges, and the argument checks.
#include "attention/gpu/cache/heuristics.h"

#include <cstdint>
#include <string>
#include <utility>

#include "attention/gpu/cache/config.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu::cache {
namespace {

// A device address that is never dereferenced here.
template <class T>
T* Fake(uintptr_t offset = 0) {
  return reinterpret_cast<T*>((uintptr_t{1} << 20) + offset);
}

// DeepSeek-V3.2's indexer K write: head_dim 128, rope 64, top-k 2048.
IndexerKWriteParams KWrite(int64_t tokens = 8192, int head_dim = 128,
                           int rope_dim = 64) {
  IndexerKWriteParams p;
  p.k = Fake<const void>();
  p.k_row_stride = head_dim;
  p.ln_weight = Fake<const void>(0x1000);
  p.ln_bias = Fake<const void>(0x2000);
  p.positions = Fake<const int64_t>(0x3000);
  p.cos_sin_cache = Fake<const float>(0x4000);
  p.max_position = 16384;
  p.cos_sin_stride = rope_dim;
  p.rope_dim = rope_dim;
  p.slot_mapping = Fake<const int64_t>(0x5000);
  p.k_cache = Fake<uint8_t>(0x6000);
  p.num_blocks = 128;
  p.block_size = 64;
  p.topk_indices = Fake<int32_t>(0x7000);
  p.topk = 2048;
  p.topk_stride = 2048;
  p.tokens = tokens;
  p.head_dim = head_dim;
  return p;
}

// The indexer Q of DeepSeek-V3.2 (64 heads) or GLM-5.x (32).
IndexerQParams Q(int64_t tokens = 8192, int heads = 64, int head_dim = 128,
                 int rope_dim = 64) {
  IndexerQParams p;
  p.q = Fake<const void>();
  p.q_token_stride = int64_t{heads} * head_dim;
  p.q_head_stride = head_dim;
  p.weights = Fake<const void>(0x1000);
  p.weights_token_stride = heads;
  p.weights_head_stride = 1;
  p.positions = Fake<const int64_t>(0x2000);
  p.cos_sin_cache = Fake<const float>(0x3000);
  p.max_position = 16384;
  p.cos_sin_stride = rope_dim;
  p.rope_dim = rope_dim;
  p.q_fp8 = Fake<uint8_t>(0x4000);
  p.q_fp8_token_stride = int64_t{heads} * head_dim;
  p.q_fp8_head_stride = head_dim;
  p.head_weights = Fake<float>(0x5000);
  p.head_weights_token_stride = heads;
  p.head_weights_head_stride = 1;
  p.tokens = tokens;
  p.heads = heads;
  p.head_dim = head_dim;
  return p;
}

// The MLA latent cache write at kv_lora_rank 512, rope 64.
MlaCacheWriteParams Mla(int64_t tokens = 8192, int lora = 512, int rope = 64,
                        LatentLayout layout = LatentLayout::kBFloat16) {
  MlaCacheWriteParams p;
  p.kv_c = Fake<const void>();
  p.kv_c_stride = lora;
  p.k_pe = Fake<const void>(0x1000);
  p.k_pe_stride = rope;
  p.slot_mapping = Fake<const int64_t>(0x2000);
  p.kv_cache = Fake<uint8_t>(0x3000);
  p.num_blocks = 128;
  p.block_size = 64;
  p.slot_stride_bytes = 2 * (lora + rope);
  p.block_stride_bytes = 64 * p.slot_stride_bytes;
  p.layout = layout;
  p.kv_lora_rank = lora;
  p.rope_dim = rope;
  p.tokens = tokens;
  return p;
}

// The message of a rejected plan, which must name the op.
template <class P, class F>
std::string Rejection(const P& p, F plan_fn, const char* op) {
  LaunchPlan plan;
  const LaunchResult r = plan_fn(p, &plan);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_EQ(std::string(r.message).rfind(op, 0), 0u) << r.message;
  return r.message;
}

TEST(CacheHeuristicsTest, KWriteTakesTheRegisterBodyAtHeadDim128) {
  // rope_dim / 8 a power of two, up to 128.
  for (int rope : {8, 16, 32, 64, 128}) {
    EXPECT_EQ(ChooseIndexerKWriteBody(KWrite(8192, 128, rope)), Body::kRegister)
        << rope;
  }
  for (int rope : {0, 2, 4, 6, 24, 40, 48, 96, 120}) {
    EXPECT_EQ(ChooseIndexerKWriteBody(KWrite(8192, 128, rope)), Body::kStaged)
        << rope;
  }
  // The tiny presets' head_dim 64, and head dims next to 128.
  EXPECT_EQ(ChooseIndexerKWriteBody(KWrite(8192, 64, 32)), Body::kStaged);
  EXPECT_EQ(ChooseIndexerKWriteBody(KWrite(8192, 127, 64)), Body::kStaged);
  EXPECT_EQ(ChooseIndexerKWriteBody(KWrite(8192, 129, 64)), Body::kStaged);
  EXPECT_EQ(ChooseIndexerKWriteBody(KWrite(8192, 256, 64)), Body::kStaged);
  // Any number of tokens.
  EXPECT_EQ(ChooseIndexerKWriteBody(KWrite(1)), Body::kRegister);
  EXPECT_EQ(ChooseIndexerKWriteBody(KWrite(int64_t{1} << 34)), Body::kRegister);
}

TEST(CacheHeuristicsTest, KWriteVariantAndRotationTakeTheStagedBody) {
  IndexerKWriteParams p = KWrite();
  p.force_staged_path = true;
  EXPECT_EQ(ChooseIndexerKWriteBody(p), Body::kStaged);
  p.force_staged_path = false;
  p.hadamard_rotation = true;
  EXPECT_EQ(ChooseIndexerKWriteBody(p), Body::kStaged);
  // The other engine numerics keep the register body.
  p.hadamard_rotation = false;
  p.round_to_bf16 = true;
  p.scale_divisor = 224.0f;
  p.encoding = Fp8Encoding::kE4m3fnuz;
  EXPECT_EQ(ChooseIndexerKWriteBody(p), Body::kRegister);
}

TEST(CacheHeuristicsTest, QTakesTheRegisterBodyAtHeadDim128AndWholeLanes) {
  for (int rope : {32, 64, 128}) {
    EXPECT_EQ(ChooseIndexerQBody(Q(8192, 64, 128, rope)), Body::kRegister)
        << rope;
  }
  // NeoX partners less than a lane or not a power of two of lanes apart.
  for (int rope : {0, 8, 16, 24, 48, 96}) {
    EXPECT_EQ(ChooseIndexerQBody(Q(8192, 64, 128, rope)), Body::kStaged)
        << rope;
  }
  EXPECT_EQ(ChooseIndexerQBody(Q(8192, 32, 128, 64)), Body::kRegister);
  EXPECT_EQ(ChooseIndexerQBody(Q(1, 1, 128, 64)), Body::kRegister);
  EXPECT_EQ(ChooseIndexerQBody(Q(8192, 64, 64, 32)), Body::kStaged);
  EXPECT_EQ(ChooseIndexerQBody(Q(8192, 64, 130, 64)), Body::kStaged);
}

TEST(CacheHeuristicsTest, QRegisterBodyStopsAt32BitRowIndices) {
  // (token, head) rows: at most 2^31 - 1.
  EXPECT_EQ(ChooseIndexerQBody(Q(0x7fffffff, 1)), Body::kRegister);
  EXPECT_EQ(ChooseIndexerQBody(Q(int64_t{0x7fffffff} + 1, 1)), Body::kStaged);
  EXPECT_EQ(ChooseIndexerQBody(Q((int64_t{1} << 25) - 1, 64)), Body::kRegister);
  EXPECT_EQ(ChooseIndexerQBody(Q(int64_t{1} << 25, 64)), Body::kStaged);
}

TEST(CacheHeuristicsTest, QVariantAndRotationTakeTheStagedBody) {
  IndexerQParams p = Q();
  p.force_staged_path = true;
  EXPECT_EQ(ChooseIndexerQBody(p), Body::kStaged);
  p.force_staged_path = false;
  p.hadamard_rotation = true;
  EXPECT_EQ(ChooseIndexerQBody(p), Body::kStaged);
  p.hadamard_rotation = false;
  p.round_to_bf16 = true;
  EXPECT_EQ(ChooseIndexerQBody(p), Body::kRegister);
}

TEST(CacheHeuristicsTest, BodyNames) {
  EXPECT_STREQ(BodyName(Body::kRegister), "register");
  EXPECT_STREQ(BodyName(Body::kStaged), "staged");
}

TEST(CacheHeuristicsTest, KWriteRegisterGridIsEightTokensABlock) {
  LaunchPlan plan;
  for (const auto& [tokens, blocks] :
       {std::pair<int64_t, uint32_t>{1, 1}, {8, 1}, {9, 2}, {8192, 1024}}) {
    ASSERT_TRUE(PlanIndexerKWrite(KWrite(tokens), &plan).ok());
    EXPECT_EQ(plan.body, Body::kRegister);
    EXPECT_EQ(plan.threads, kThreads);
    EXPECT_EQ(plan.shared_bytes, 0u);
    EXPECT_EQ(plan.blocks, blocks) << tokens;
  }
  // The last grid that fits a launch, and one token more.
  ASSERT_TRUE(PlanIndexerKWrite(KWrite(int64_t{8} * 0x7fffffff), &plan).ok());
  EXPECT_EQ(plan.blocks, 0x7fffffffu);
  const std::string why = Rejection(KWrite(int64_t{8} * 0x7fffffff + 1),
                                    PlanIndexerKWrite, "indexer_k_write");
  EXPECT_NE(why.find("too many"), std::string::npos) << why;
}

TEST(CacheHeuristicsTest, StagedGridsFillTheSharedMemoryBudget) {
  LaunchPlan plan;
  // head_dim 128 staged: 8 groups (the block), 4 KiB of rows.
  IndexerKWriteParams k = KWrite(9);
  k.force_staged_path = true;
  ASSERT_TRUE(PlanIndexerKWrite(k, &plan).ok());
  EXPECT_EQ(plan.body, Body::kStaged);
  EXPECT_EQ(plan.groups, kMaxGroups);
  EXPECT_EQ(plan.threads, kThreads);
  EXPECT_EQ(plan.shared_bytes, size_t{kMaxGroups} * 128 * 4);
  EXPECT_EQ(plan.blocks, 2u);
  // Long rows: as many groups as the budget holds, at least one.
  for (const auto& [head_dim, groups] : {std::pair<int, int>{1536, 8},
                                         {1538, 7},
                                         {2000, 6},
                                         {6144, 2},
                                         {6145, 1},
                                         {kMaxStagedFloats, 1}}) {
    ASSERT_TRUE(PlanIndexerKWrite(KWrite(100, head_dim, 64), &plan).ok());
    EXPECT_EQ(plan.body, Body::kStaged);
    EXPECT_EQ(plan.groups, groups) << head_dim;
    EXPECT_EQ(plan.threads, groups * kLanes);
    EXPECT_EQ(plan.shared_bytes, size_t{4} * groups * head_dim);
    EXPECT_LE(plan.shared_bytes, size_t{48} * 1024);
    EXPECT_EQ(plan.blocks, (100 + groups - 1) / groups);
  }
  const std::string why = Rejection(KWrite(100, kMaxStagedFloats + 1, 64),
                                    PlanIndexerKWrite, "indexer_k_write");
  EXPECT_NE(why.find("head_dim 12289"), std::string::npos) << why;
}

TEST(CacheHeuristicsTest, QGridsCountTokenHeadRows) {
  LaunchPlan plan;
  // Register: 64 rows a block (8 groups x 4 rows x 2 passes).
  ASSERT_TRUE(PlanIndexerQ(Q(8192, 64), &plan).ok());
  EXPECT_EQ(plan.body, Body::kRegister);
  EXPECT_EQ(plan.threads, kThreads);
  EXPECT_EQ(plan.shared_bytes, 0u);
  EXPECT_EQ(plan.blocks, 8192u);
  ASSERT_TRUE(PlanIndexerQ(Q(3, 7), &plan).ok());
  EXPECT_EQ(plan.blocks, 1u);
  ASSERT_TRUE(PlanIndexerQ(Q(65, 1), &plan).ok());
  EXPECT_EQ(plan.blocks, 2u);
  // Staged: a row a group.
  ASSERT_TRUE(PlanIndexerQ(Q(5, 3, 130, 128), &plan).ok());
  EXPECT_EQ(plan.body, Body::kStaged);
  EXPECT_EQ(plan.groups, kMaxGroups);
  EXPECT_EQ(plan.shared_bytes, size_t{kMaxGroups} * 130 * 4);
  EXPECT_EQ(plan.blocks, 2u);  // 15 rows
  // Past 2^31 - 1 rows the staged body runs (8 rows a block), while its
  // grid fits a launch.
  ASSERT_TRUE(PlanIndexerQ(Q(int64_t{1} << 26, 64), &plan).ok());
  EXPECT_EQ(plan.body, Body::kStaged);
  EXPECT_EQ(plan.blocks, uint32_t{1} << 29);
  const std::string why =
      Rejection(Q(int64_t{1} << 28, 64), PlanIndexerQ, "indexer_q");
  EXPECT_NE(why.find("(token, head) rows are too many"), std::string::npos)
      << why;
}

TEST(CacheHeuristicsTest, MlaWriteStagesWholeLatentRows) {
  LaunchPlan plan;
  for (LatentLayout layout : {LatentLayout::kBFloat16, LatentLayout::kFp8}) {
    ASSERT_TRUE(PlanMlaCacheWrite(Mla(8192, 512, 64, layout), &plan).ok());
    EXPECT_EQ(plan.body, Body::kStaged);
    EXPECT_EQ(plan.groups, kMaxGroups);
    EXPECT_EQ(plan.threads, kThreads);
    EXPECT_EQ(plan.shared_bytes, size_t{kMaxGroups} * 576 * 4);
    EXPECT_EQ(plan.blocks, 1024u);
  }
  ASSERT_TRUE(PlanMlaCacheWrite(Mla(3, kMaxStagedFloats - 64, 64), &plan).ok());
  EXPECT_EQ(plan.groups, 1);
  EXPECT_EQ(plan.threads, kLanes);
  EXPECT_EQ(plan.blocks, 3u);
  std::string why = Rejection(Mla(3, kMaxStagedFloats - 63, 64),
                              PlanMlaCacheWrite, "mla_cache_write");
  EXPECT_NE(why.find("kv_lora_rank + rope_dim = 12289"), std::string::npos)
      << why;
  why = Rejection(Mla(3, 500, 64, LatentLayout::kFp8), PlanMlaCacheWrite,
                  "mla_cache_write");
  EXPECT_NE(why.find("multiple of 128"), std::string::npos) << why;
  // bf16 entries take any kv_lora_rank.
  EXPECT_TRUE(PlanMlaCacheWrite(Mla(3, 500, 64), &plan).ok());
}

TEST(CacheHeuristicsTest, NoTokensIsNothingToLaunch) {
  LaunchPlan plan;
  // Null pointers are fine for empty tensors.
  IndexerKWriteParams k;
  k.head_dim = 128;
  k.block_size = 64;
  ASSERT_TRUE(PlanIndexerKWrite(k, &plan).ok());
  EXPECT_EQ(plan.blocks, 0u);
  IndexerQParams q;
  q.heads = 64;
  q.head_dim = 128;
  ASSERT_TRUE(PlanIndexerQ(q, &plan).ok());
  EXPECT_EQ(plan.blocks, 0u);
  MlaCacheWriteParams m;
  m.kv_lora_rank = 512;
  m.block_size = 64;
  ASSERT_TRUE(PlanMlaCacheWrite(m, &plan).ok());
  EXPECT_EQ(plan.blocks, 0u);
  // An empty cache (no blocks) needs no cache pointer; every token skips.
  k = KWrite(5);
  k.k_cache = nullptr;
  k.num_blocks = 0;
  EXPECT_TRUE(PlanIndexerKWrite(k, &plan).ok());
  k.topk = 0;
  k.topk_indices = nullptr;
  EXPECT_TRUE(PlanIndexerKWrite(k, &plan).ok());
}

TEST(CacheHeuristicsTest, BadArgumentsAreNamed) {
  IndexerKWriteParams k = KWrite();
  k.rope_dim = 63;
  EXPECT_NE(
      Rejection(k, PlanIndexerKWrite, "indexer_k_write").find("rope_dim 63"),
      std::string::npos);
  k = KWrite(8192, 64, 96);
  EXPECT_NE(
      Rejection(k, PlanIndexerKWrite, "indexer_k_write").find("rope_dim 96"),
      std::string::npos);
  k = KWrite();
  k.block_size = 0;
  Rejection(k, PlanIndexerKWrite, "indexer_k_write");
  k = KWrite();
  k.tokens = -1;
  Rejection(k, PlanIndexerKWrite, "indexer_k_write");
  k = KWrite();
  k.ln_bias = nullptr;
  EXPECT_NE(
      Rejection(k, PlanIndexerKWrite, "indexer_k_write").find("null pointer"),
      std::string::npos);
  k = KWrite();
  k.topk_indices = nullptr;
  Rejection(k, PlanIndexerKWrite, "indexer_k_write");
  k = KWrite(8192, 96, 32);
  k.hadamard_rotation = true;
  EXPECT_NE(Rejection(k, PlanIndexerKWrite, "indexer_k_write")
                .find("power of two, got 96"),
            std::string::npos);
  LaunchPlan plan;
  k = KWrite(8192, 64, 32);
  k.hadamard_rotation = true;
  ASSERT_TRUE(PlanIndexerKWrite(k, &plan).ok());
  EXPECT_EQ(plan.body, Body::kStaged);

  IndexerQParams q = Q();
  q.heads = 0;
  Rejection(q, PlanIndexerQ, "indexer_q");
  q = Q();
  q.rope_dim = 130;
  Rejection(q, PlanIndexerQ, "indexer_q");
  q = Q();
  q.head_weights = nullptr;
  Rejection(q, PlanIndexerQ, "indexer_q");
  q = Q(8, 4, 96, 32);
  q.hadamard_rotation = true;
  Rejection(q, PlanIndexerQ, "indexer_q");

  MlaCacheWriteParams m = Mla();
  m.kv_lora_rank = 0;
  Rejection(m, PlanMlaCacheWrite, "mla_cache_write");
  m = Mla();
  m.kv_cache = nullptr;
  Rejection(m, PlanMlaCacheWrite, "mla_cache_write");
}

}  // namespace
}  // namespace dsa::attention::gpu::cache
