// The arm table: its records are consistent, each configures what it says
// (main scores every layer, skip only the MTP layer on a short prefill, the
// bound runs no indexer), and the bound refuses the sparse path.
#include "bench/prefill/arms.h"

#include <set>
#include <string>

#include "bench/prefill/workloads.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/model_config.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using model::deepseek_v32::EngineConfig;
using model::deepseek_v32::ForwardPlan;
using model::deepseek_v32::LayerPlanner;
using model::deepseek_v32::ModelConfig;
using model::deepseek_v32::RuntimeOptions;
using ::testing::HasSubstr;

TEST(ArmTableTest, NamesAreUniqueAndFound) {
  std::set<std::string> names;
  for (const ArmSpec& arm : kArms) {
    EXPECT_TRUE(names.insert(arm.name).second) << arm.name;
    EXPECT_EQ(FindArm(arm.name), &arm);
    EXPECT_THAT(arm.table_label, HasSubstr(arm.name));
  }
  EXPECT_EQ(FindArm("fast"), nullptr);
  EXPECT_EQ(FindArm(""), nullptr);
  EXPECT_EQ(ArmNames(), "main, skip, no_indexer");
  ASSERT_EQ(AllArms().size(), std::size(kArms));
  for (size_t i = 0; i < std::size(kArms); ++i) {
    EXPECT_EQ(AllArms()[i], &kArms[i]);
  }
}

TEST(ArmTableTest, RolesAndFootnotes) {
  EXPECT_EQ(FindArm("main")->role, ArmRole::kReference);
  EXPECT_EQ(FindArm("skip")->role, ArmRole::kCandidate);
  EXPECT_EQ(FindArm("no_indexer")->role, ArmRole::kBound);
  // A bound is marked in the table and explained under it.
  for (const ArmSpec& arm : kArms) {
    const bool bound = arm.role == ArmRole::kBound;
    EXPECT_EQ(arm.footnote != nullptr, bound) << arm.name;
    EXPECT_EQ(std::string(arm.table_label) != arm.name, bound) << arm.name;
  }
}

TEST(ArmTableTest, EachArmConfiguresWhatItSays) {
  platform::PlatformCapabilities caps;
  caps.is_cuda_alike = true;
  EXPECT_FALSE(ArmCapabilities(*FindArm("main"), caps).is_cuda_alike);
  EXPECT_TRUE(ArmCapabilities(*FindArm("skip"), caps).is_cuda_alike);
  EXPECT_TRUE(ArmCapabilities(*FindArm("no_indexer"), caps).is_cuda_alike);
  caps.is_cuda_alike = false;  // never made CUDA-alike by an arm
  for (const ArmSpec& arm : kArms) {
    EXPECT_FALSE(ArmCapabilities(arm, caps).is_cuda_alike) << arm.name;
  }
  RuntimeOptions options;
  options.block_size = 16;
  options.no_indexer = true;
  EXPECT_FALSE(ArmOptions(*FindArm("main"), options).no_indexer);
  EXPECT_FALSE(ArmOptions(*FindArm("skip"), options).no_indexer);
  options.no_indexer = false;
  const RuntimeOptions bound = ArmOptions(*FindArm("no_indexer"), options);
  EXPECT_TRUE(bound.no_indexer);
  EXPECT_EQ(bound.block_size, 16);  // the rest untouched
}

class ArmPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(platform::Platform rocm,
                         platform::Registry::Global().GetPlatform("rocm"));
    ASSERT_OK_AND_ASSIGN(caps_, rocm.CapabilitiesForArch("gfx950"));
    ASSERT_OK_AND_ASSIGN(ModelConfig config,
                         model::deepseek_v32::LoadModelConfig("tiny-glm-5.1"));
    config_ = config;
  }
  absl::StatusOr<LayerPlanner> Planner(const ArmSpec& arm) {
    return LayerPlanner::Create(*config_, ArmCapabilities(arm, caps_),
                                EngineConfig{});
  }
  platform::PlatformCapabilities caps_;
  std::optional<ModelConfig> config_;
};

// On ROCm a pure short prefill skips scoring in every main layer; main's
// capabilities make every indexer layer score, as before the optimisation.
TEST_F(ArmPlanTest, MainScoresEveryLayerSkipOnlyTheMtpLayer) {
  ASSERT_OK_AND_ASSIGN(
      std::vector<Workload> w,
      MakeWorkloads({"1k_c1"}, config_->index_topk(), 1, true));
  const int indexers = config_->num_indexer_layers();
  ASSERT_OK_AND_ASSIGN(LayerPlanner main, Planner(*FindArm("main")));
  ASSERT_OK_AND_ASSIGN(ForwardPlan main_plan,
                       main.PlanForward({}, {{0, w[0].prompt_len}}));
  EXPECT_EQ(main_plan.counts.scored, indexers);
  ASSERT_OK_AND_ASSIGN(LayerPlanner skip, Planner(*FindArm("skip")));
  ASSERT_OK_AND_ASSIGN(ForwardPlan skip_plan,
                       skip.PlanForward({}, {{0, w[0].prompt_len}}));
  EXPECT_EQ(skip_plan.counts.scored, config_->num_mtp_layers());
  EXPECT_EQ(skip_plan.counts.skipped, indexers - config_->num_mtp_layers());
}

// The bound runs only where every layer prefills on dense MHA: at and below
// index_topk, not above it (the sparse path reads the top-k).
TEST_F(ArmPlanTest, TheBoundRefusesTheSparsePath) {
  const int64_t topk = config_->index_topk();
  for (const ArmSpec& arm : kArms) {
    ASSERT_OK_AND_ASSIGN(LayerPlanner planner, Planner(arm));
    for (const int64_t len : {int64_t{2}, topk - 1, topk, topk + 1, 4 * topk}) {
      SCOPED_TRACE(::testing::Message() << arm.name << " len " << len);
      const Workload w{"w", 0, len, 1, 1};
      const std::string reason = NotRunReason(arm, planner, w);
      if (arm.no_indexer && len > topk) {
        EXPECT_THAT(reason, HasSubstr("take the sparse path"));
        EXPECT_THAT(reason, HasSubstr("index_topk " + std::to_string(topk)));
      } else {
        EXPECT_EQ(reason, "");
      }
    }
  }
}

// A prompt of one token is a decode to the MLA attention, whatever
// index_topk is; the note says so, not "1 tokens > index_topk 1".
TEST_F(ArmPlanTest, TheBoundSaysAOneTokenPromptIsADecode) {
  model::deepseek_v32::DeepseekV32Config proto = config_->proto();
  proto.mutable_indexer()->set_index_topk(1);
  ASSERT_OK_AND_ASSIGN(ModelConfig topk1, ModelConfig::FromProto(proto));
  ASSERT_OK_AND_ASSIGN(
      LayerPlanner planner,
      LayerPlanner::Create(topk1,
                           ArmCapabilities(*FindArm("no_indexer"), caps_),
                           EngineConfig{}));
  ASSERT_OK_AND_ASSIGN(std::vector<Workload> w,
                       MakeWorkloads({}, topk1.index_topk(), 1, true));
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].prompt_len, 1);  // 1k_c1 at index_topk 1
  EXPECT_EQ(w[3].prompt_len, 4);  // 8k_c1
  EXPECT_EQ(NotRunReason(*FindArm("no_indexer"), planner, w[0]),
            "prompts of 1 token are decodes to the MLA attention (a query of "
            "at most 1 token), which reads the indexer's top-k");
  EXPECT_EQ(NotRunReason(*FindArm("no_indexer"), planner, w[3]),
            "prompts of 4 tokens > index_topk 1 take the sparse path, which "
            "reads the indexer's top-k");
  // At the tiny preset's own index_topk 1 token is a decode too.
  ASSERT_OK_AND_ASSIGN(LayerPlanner tiny, Planner(*FindArm("no_indexer")));
  EXPECT_THAT(
      NotRunReason(*FindArm("no_indexer"), tiny, Workload{"w", 0, 1, 1, 1}),
      HasSubstr("prompts of 1 token are decodes"));
  // Without dense MHA on the platform a short prompt takes the sparse path.
  platform::PlatformCapabilities no_dense = caps_;
  no_dense.sparse_mla_dense_mha_prefill = false;
  ASSERT_OK_AND_ASSIGN(
      LayerPlanner sparse,
      LayerPlanner::Create(*config_,
                           ArmCapabilities(*FindArm("no_indexer"), no_dense),
                           EngineConfig{}));
  EXPECT_EQ(
      NotRunReason(*FindArm("no_indexer"), sparse, Workload{"w", 0, 8, 1, 1}),
      "prompts of 8 tokens take the sparse path (the platform has no "
      "dense-MHA prefill), which reads the indexer's top-k");
}

}  // namespace
}  // namespace dsa::prefill_bench
