#include "model/deepseek_v32/layer_plan.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/batch_metadata.h"
#include "model/deepseek_v32/model_config.h"
#include "platform/capabilities.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using platform::PlatformCapabilities;
using ::testing::HasSubstr;

// Capabilities as the platform plugins describe them; built by hand so these
// tests need no registry (platform_query_test and plan_tool_test use it).
PlatformCapabilities Rocm() {
  PlatformCapabilities c;
  c.platform_id = "rocm";
  c.kind = platform::PlatformKind::kRocm;
  c.arch = platform::RocmArch{"gfx942"};
  c.is_accelerator = true;
  c.is_cuda_alike = true;
  c.warp_size = 64;
  c.sparse_mla_dense_mha_prefill = true;
  c.sparse_mla_decode_context_parallel = false;
  return c;
}

PlatformCapabilities Cuda() {
  PlatformCapabilities c = Rocm();
  c.platform_id = "cuda";
  c.kind = platform::PlatformKind::kCuda;
  c.arch = platform::CudaComputeCapability{9, 0};
  c.warp_size = 32;
  c.sparse_mla_decode_context_parallel = true;
  return c;
}

PlatformCapabilities Cpu() {
  PlatformCapabilities c;
  c.platform_id = "cpu";
  c.kind = platform::PlatformKind::kCpu;
  c.arch = platform::CpuArch{"x86_64"};
  c.is_cuda_alike = false;
  c.sparse_mla_dense_mha_prefill = true;
  return c;
}

LayerPlanner MakePlanner(const std::string& preset, PlatformCapabilities caps,
                         EngineConfig engine = {}) {
  absl::StatusOr<ModelConfig> config = LoadPreset(preset);
  EXPECT_TRUE(config.ok()) << config.status();
  absl::StatusOr<LayerPlanner> planner =
      LayerPlanner::Create(*config, caps, engine);
  EXPECT_TRUE(planner.ok()) << planner.status();
  return *std::move(planner);
}

ForwardPlan PlanOrDie(const LayerPlanner& planner,
                      std::vector<Request> requests,
                      ForwardContext forward = {}) {
  absl::StatusOr<ForwardPlan> plan = planner.PlanForward(forward, requests);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

int CountAction(const ForwardPlan& plan, IndexerAction action) {
  int n = 0;
  for (const LayerPlan& l : plan.layers) n += l.indexer.action == action;
  return n;
}

// The seed's probe: GLM-5.1 on ROCm, a pure 1K prefill. 78 main layers skip;
// the MTP layer scores.
TEST(LayerPlanTest, Glm51RocmShortPrefillSkipsAllButMtp) {
  const LayerPlanner planner = MakePlanner("glm-5.1", Rocm());
  const ForwardPlan plan = PlanOrDie(planner, {{0, 1024}});
  ASSERT_EQ(plan.layers.size(), 79u);
  EXPECT_EQ(plan.counts.skipped, 78);
  EXPECT_EQ(plan.counts.scored, 1);
  EXPECT_EQ(plan.counts.shared, 0);
  EXPECT_EQ(plan.counts.workspace_only, 0);
  // The counts tally the layers.
  EXPECT_EQ(CountAction(plan, IndexerAction::kSkip), 78);
  EXPECT_EQ(CountAction(plan, IndexerAction::kScore), 1);
  for (int layer = 0; layer < 78; ++layer) {
    const LayerPlan& l = plan.layers[layer];
    EXPECT_EQ(l.layer, layer);
    EXPECT_FALSE(l.is_mtp);
    EXPECT_EQ(l.indexer.action, IndexerAction::kSkip);
    EXPECT_EQ(l.prefill_branch, PrefillBranch::kDenseMha);
    // The keys are written even when scoring is skipped.
    EXPECT_TRUE(l.k_cache_write);
  }
  const LayerPlan& mtp = plan.layers[78];
  EXPECT_TRUE(mtp.is_mtp);
  EXPECT_EQ(mtp.indexer.action, IndexerAction::kScore);
  EXPECT_EQ(mtp.indexer.reason, IndexerReason::kMtpLayer);
  EXPECT_EQ(mtp.prefill_branch, PrefillBranch::kDenseMha);
  EXPECT_TRUE(mtp.k_cache_write);
  EXPECT_EQ(DescribeIndexerDecision(mtp, planner, &*plan.metadata),
            "MTP layer");
}

TEST(LayerPlanTest, LongPrefillScoresEverywhere) {
  const LayerPlanner planner = MakePlanner("glm-5.1", Rocm());
  const ForwardPlan plan = PlanOrDie(planner, {{0, 8192}});
  EXPECT_EQ(plan.counts.scored, 79);
  for (const LayerPlan& l : plan.layers) {
    EXPECT_EQ(l.prefill_branch, PrefillBranch::kSparseMqa);
  }
  EXPECT_EQ(plan.layers[0].indexer.reason,
            IndexerReason::kPrefillLongerThanTopk);
  EXPECT_EQ(DescribeIndexerDecision(plan.layers[0], planner, &*plan.metadata),
            "prefill 8192 > index_topk 2048");
}

// Around index_topk: 2048 total tokens still fit; the context counts.
TEST(LayerPlanTest, TopkBoundary) {
  const LayerPlanner planner = MakePlanner("glm-5.1", Rocm());
  EXPECT_EQ(PlanOrDie(planner, {{0, 2048}}).counts.skipped, 78);
  EXPECT_EQ(PlanOrDie(planner, {{0, 2049}}).counts.skipped, 0);
  EXPECT_EQ(PlanOrDie(planner, {{1000, 1049}}).counts.skipped, 0);
  EXPECT_EQ(PlanOrDie(planner, {{1000, 1048}, {0, 2}}).counts.skipped, 78);
}

TEST(LayerPlanTest, Glm52SharedLayers) {
  const LayerPlanner planner = MakePlanner("glm-5.2", Rocm());
  const ForwardPlan plan = PlanOrDie(planner, {{0, 1024}});
  EXPECT_EQ(plan.counts.skipped, 21);
  EXPECT_EQ(plan.counts.shared, 57);
  EXPECT_EQ(plan.counts.scored, 1);
  const LayerPlan& shared = plan.layers[7];
  EXPECT_EQ(shared.indexer.action, IndexerAction::kShared);
  EXPECT_EQ(shared.topk_source_layer, 6);
  EXPECT_FALSE(shared.k_cache_write);
  EXPECT_EQ(shared.prefill_branch, PrefillBranch::kDenseMha);
  EXPECT_EQ(DescribeIndexerDecision(shared, planner, &*plan.metadata),
            "no indexer of its own: reuses layer 6's top-k");
  // A long prefill: the 21 owners and the MTP layer score, the rest share.
  const ForwardPlan long_plan = PlanOrDie(planner, {{0, 8192}});
  EXPECT_EQ(long_plan.counts.scored, 22);
  EXPECT_EQ(long_plan.counts.shared, 57);
}

TEST(LayerPlanTest, MixedBatchScores) {
  const LayerPlanner planner = MakePlanner("glm-5.1", Rocm());
  const ForwardPlan plan = PlanOrDie(planner, {{100, 1}, {0, 1024}});
  EXPECT_EQ(plan.counts.scored, 79);
  EXPECT_EQ(plan.layers[0].indexer.reason, IndexerReason::kDecodeTokens);
  // The prefill tokens still take dense MHA; only the decodes need top-k.
  EXPECT_EQ(plan.layers[0].prefill_branch, PrefillBranch::kDenseMha);
  const ForwardPlan two = PlanOrDie(planner, {{100, 1}, {5, 1}, {0, 64}});
  EXPECT_EQ(DescribeIndexerDecision(two.layers[0], planner, &*two.metadata),
            "mixed batch: 2 decode tokens");
}

TEST(LayerPlanTest, DecodeOnlyBatchScoresWithoutPrefillBranch) {
  const LayerPlanner planner = MakePlanner("glm-5.1", Rocm());
  const ForwardPlan plan = PlanOrDie(planner, {{100, 1}, {200, 1}});
  EXPECT_EQ(plan.counts.scored, 79);
  EXPECT_EQ(plan.layers[0].prefill_branch, PrefillBranch::kNone);
  EXPECT_EQ(DescribeIndexerDecision(plan.layers[0], planner, &*plan.metadata),
            "decode-only batch: 2 decode tokens");
}

TEST(LayerPlanTest, FullCudagraphAndCaptureScore) {
  const LayerPlanner planner = MakePlanner("glm-5.1", Rocm());
  ForwardContext full;
  full.cudagraph_runtime_mode = CudagraphMode::kFull;
  EXPECT_EQ(PlanOrDie(planner, {{0, 1024}}, full).counts.scored, 79);
  ForwardContext capture;
  capture.cudagraph_runtime_mode = CudagraphMode::kPiecewise;
  capture.capturing = true;
  const ForwardPlan captured = PlanOrDie(planner, {{0, 1024}}, capture);
  EXPECT_EQ(captured.counts.scored, 79);
  EXPECT_EQ(captured.layers[3].indexer.reason, IndexerReason::kCapturing);
  ForwardContext piecewise;
  piecewise.cudagraph_runtime_mode = CudagraphMode::kPiecewise;
  EXPECT_EQ(PlanOrDie(planner, {{0, 1024}}, piecewise).counts.skipped, 78);
}

TEST(LayerPlanTest, ProfileRunReservesWorkspaceOnIndexerLayers) {
  const LayerPlanner glm51 = MakePlanner("glm-5.1", Rocm());
  ASSERT_OK_AND_ASSIGN(ForwardPlan plan, glm51.PlanProfileRun({}));
  EXPECT_FALSE(plan.metadata.has_value());
  EXPECT_EQ(plan.counts.workspace_only, 79);
  for (const LayerPlan& l : plan.layers) {
    EXPECT_FALSE(l.k_cache_write);
    EXPECT_EQ(l.prefill_branch, PrefillBranch::kNone);
  }
  const LayerPlanner glm52 = MakePlanner("glm-5.2", Rocm());
  ASSERT_OK_AND_ASSIGN(ForwardPlan plan52, glm52.PlanProfileRun({}));
  EXPECT_EQ(plan52.counts.workspace_only, 22);
  EXPECT_EQ(plan52.counts.shared, 57);
}

TEST(LayerPlanTest, CpuPlatformAlwaysScores) {
  const LayerPlanner planner = MakePlanner("glm-5.1", Cpu());
  const ForwardPlan plan = PlanOrDie(planner, {{0, 1024}});
  EXPECT_EQ(plan.counts.scored, 79);
  EXPECT_EQ(plan.layers[0].indexer.reason, IndexerReason::kNotCudaAlike);
  // CPU's reference has the dense branch; it just does not skip.
  EXPECT_EQ(plan.layers[0].prefill_branch, PrefillBranch::kDenseMha);
  EXPECT_EQ(DescribeIndexerDecision(plan.layers[0], planner, &*plan.metadata),
            "platform cpu is not CUDA-alike");
}

TEST(LayerPlanTest, CudaSkipsLikeRocm) {
  for (const char* preset : {"deepseek-v3.2", "glm-5.1", "glm-5.2"}) {
    const ForwardPlan rocm =
        PlanOrDie(MakePlanner(preset, Rocm()), {{0, 1024}});
    const ForwardPlan cuda =
        PlanOrDie(MakePlanner(preset, Cuda()), {{0, 1024}});
    ASSERT_EQ(rocm.layers.size(), cuda.layers.size());
    for (size_t i = 0; i < rocm.layers.size(); ++i) {
      EXPECT_EQ(rocm.layers[i].indexer, cuda.layers[i].indexer) << preset;
    }
  }
  EXPECT_EQ(PlanOrDie(MakePlanner("deepseek-v3.2", Cuda()), {{0, 1024}})
                .counts.skipped,
            61);
}

// MTP=3: 3-token requests are decodes to the indexer (threshold 4) but
// prefills to the MLA, which has no decode tokens: the batch skips.
TEST(LayerPlanTest, MtpThresholdMismatchStillSkips) {
  EngineConfig engine;
  engine.num_speculative_tokens = 3;
  const LayerPlanner planner = MakePlanner("glm-5.1", Rocm(), engine);
  const ForwardPlan plan = PlanOrDie(planner, {{10, 3}, {20, 3}});
  EXPECT_EQ(plan.metadata->indexer.num_decodes, 2);
  EXPECT_EQ(plan.metadata->indexer.num_prefills, 0);
  EXPECT_EQ(plan.metadata->mla.num_decode_tokens, 0);
  EXPECT_EQ(plan.counts.skipped, 78);
  EXPECT_EQ(plan.counts.scored, 1);
  // One true 1-token decode makes the MLA see a decode token: score.
  EXPECT_EQ(PlanOrDie(planner, {{10, 1}, {20, 3}}).counts.scored, 79);
}

TEST(LayerPlanTest, PrefillContextParallelScores) {
  EngineConfig engine;
  engine.prefill_context_parallel = true;
  const ForwardPlan plan =
      PlanOrDie(MakePlanner("glm-5.1", Rocm(), engine), {{0, 1024}});
  EXPECT_EQ(plan.counts.scored, 79);
  EXPECT_EQ(plan.layers[0].indexer.reason,
            IndexerReason::kPrefillContextParallel);
}

TEST(LayerPlanTest, ForceMqaScoresOnSparseMqa) {
  EngineConfig engine;
  engine.force_mqa = true;
  const LayerPlanner planner = MakePlanner("glm-5.1", Rocm(), engine);
  const ForwardPlan plan = PlanOrDie(planner, {{0, 1024}});
  EXPECT_EQ(plan.counts.scored, 79);
  EXPECT_EQ(plan.layers[0].prefill_branch, PrefillBranch::kSparseMqa);
  EXPECT_EQ(DescribeIndexerDecision(plan.layers[0], planner, &*plan.metadata),
            "force-MQA: prefills run sparse MQA");
}

TEST(LayerPlanTest, NoDenseMhaPrefillOnPlatformScores) {
  PlatformCapabilities caps = Rocm();
  caps.sparse_mla_dense_mha_prefill = false;
  const ForwardPlan plan = PlanOrDie(MakePlanner("glm-5.1", caps), {{0, 1024}});
  EXPECT_EQ(plan.counts.scored, 79);
  EXPECT_EQ(plan.layers[0].prefill_branch, PrefillBranch::kSparseMqa);
  EXPECT_EQ(plan.layers[0].indexer.reason, IndexerReason::kNoDenseMhaPrefill);
}

TEST(LayerPlanTest, DecodeContextParallelNeedsPlatformSupport) {
  ASSERT_OK_AND_ASSIGN(ModelConfig config, LoadPreset("glm-5.1"));
  EngineConfig engine;
  engine.decode_context_parallel_size = 2;
  EXPECT_THAT(LayerPlanner::Create(config, Rocm(), engine),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("rocm (gfx942) sparse MLA backend rejects "
                                 "decode context parallelism")));
  ASSERT_OK_AND_ASSIGN(LayerPlanner cuda,
                       LayerPlanner::Create(config, Cuda(), engine));
  // DCP does not change the decision.
  EXPECT_EQ(PlanOrDie(cuda, {{0, 1024}}).counts.skipped, 78);
  engine.decode_context_parallel_size = 0;
  EXPECT_THAT(LayerPlanner::Create(config, Cuda(), engine),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("decode_context_parallel_size")));
}

TEST(LayerPlanTest, PlanLayerMatchesPlanForward) {
  const LayerPlanner planner = MakePlanner("glm-5.2", Rocm());
  ASSERT_OK_AND_ASSIGN(BatchMetadata metadata,
                       planner.BuildMetadata({{0, 512}, {0, 700}}));
  ASSERT_OK_AND_ASSIGN(ForwardPlan plan,
                       planner.PlanForward({}, {{0, 512}, {0, 700}}));
  for (int layer = 0; layer < planner.config().num_layers(); ++layer) {
    ASSERT_OK_AND_ASSIGN(LayerPlan l, planner.PlanLayer(layer, {}, &metadata));
    EXPECT_EQ(l.indexer, plan.layers[layer].indexer);
    EXPECT_EQ(l.prefill_branch, plan.layers[layer].prefill_branch);
    EXPECT_EQ(l.k_cache_write, plan.layers[layer].k_cache_write);
    EXPECT_EQ(l.topk_source_layer, plan.layers[layer].topk_source_layer);
  }
  ASSERT_OK_AND_ASSIGN(LayerPlan profile, planner.PlanLayer(0, {}, nullptr));
  EXPECT_EQ(profile.indexer.action, IndexerAction::kWorkspaceOnly);
}

TEST(LayerPlanTest, RejectsBadLayersAndContexts) {
  const LayerPlanner planner = MakePlanner("glm-5.1", Rocm());
  EXPECT_THAT(planner.PlanLayer(79, {}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layer 79 is out of range [0, 79)")));
  EXPECT_THAT(planner.PlanLayer(-1, {}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layer -1 is out of range")));
  EXPECT_THAT(planner.StaticDecision(1000),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("layer 1000 is out of range")));
  ForwardContext capture_eager;
  capture_eager.capturing = true;
  EXPECT_THAT(
      planner.PlanForward(capture_eager, {{0, 16}}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("capturing")));
  EXPECT_THAT(planner.PlanForward({}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("at least one request")));
}

// Skipping is safe only when no layer needs a top-k: whenever a layer skips,
// every layer runs dense MHA and the batch has no decode tokens.
TEST(LayerPlanTest, SkipImpliesDenseMhaEverywhere) {
  const std::vector<std::vector<Request>> batches = {
      {{0, 1024}},  {{0, 8192}},  {{100, 1}, {0, 1024}}, {{0, 2}},
      {{2000, 48}}, {{2000, 49}}, {{0, 3}, {0, 3}},      {{5, 1}}};
  for (int spec : {0, 1, 3}) {
    EngineConfig engine;
    engine.num_speculative_tokens = spec;
    for (const char* preset : {"glm-5.1", "glm-5.2", "tiny-glm-5.2"}) {
      const LayerPlanner planner = MakePlanner(preset, Rocm(), engine);
      for (const auto& batch : batches) {
        absl::StatusOr<ForwardPlan> plan = planner.PlanForward({}, batch);
        if (!plan.ok()) continue;  // longer than a tiny preset allows
        if (plan->counts.skipped == 0) continue;
        EXPECT_EQ(plan->metadata->mla.num_decode_tokens, 0);
        for (const LayerPlan& l : plan->layers) {
          EXPECT_EQ(l.prefill_branch, PrefillBranch::kDenseMha);
        }
      }
    }
  }
}

TEST(PrefillBranchTest, Names) {
  EXPECT_EQ(PrefillBranchName(PrefillBranch::kNone), "none");
  EXPECT_EQ(PrefillBranchName(PrefillBranch::kDenseMha), "dense_mha");
  EXPECT_EQ(PrefillBranchName(PrefillBranch::kSparseMqa), "sparse_mqa");
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
