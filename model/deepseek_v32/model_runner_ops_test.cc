// The ops a step launches, counted: the dense ops of a step, the fused
// projections against each projection alone, step graphs against direct
// launches (the same bits), and the timed ops of StepOptions::time_ops; on
// every platform of RunnerPlatforms() (one without a device skips).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/model_runner_test_util.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

// Every dense op of a step goes through the platform's kernels: per layer
// three norms (input_layernorm, q_a, kv_a), two ropes, three projections
// (fused_qkv_a_proj, q_b, o), one more projection
// (wk_weights_proj) per layer that writes indexer keys and one (wq_b) per
// scoring; per MTP layer its input: enorm, hnorm (and model.norm before the
// first) and eh_proj. A layer's residual add rides in the next layer's
// input_layernorm: residual_add runs alone only before the stream is read,
// after the last main layer (kept for the read-back) and the last layer.
TEST_P(ModelRunnerTest, DenseOpsOfAStepAreCounted) {
  RuntimeOptions options;
  options.block_size = 16;
  auto model = MakeModel("tiny-glm-5.2", skip_caps_, options);
  ASSERT_TRUE(model);
  const ModelConfig& config = model->planner().config();
  const int hidden = config.proto().hidden_size();
  ASSERT_OK_AND_ASSIGN(
      StepOutput out,
      model->Step({}, {{1, 0, 20}}, RandomHidden(20, hidden, 4)));
  const int layers = config.num_layers();
  const int mtp = config.num_mtp_layers();
  ASSERT_EQ(mtp, 1);
  EXPECT_EQ(out.op_calls.rms_norm, 3 * layers + 2 * mtp + 1);
  EXPECT_EQ(out.op_calls.rope, 2 * layers);
  EXPECT_EQ(out.op_calls.residual_add, 1 + mtp);
  EXPECT_EQ(out.op_calls.cast, 0);  // float32 activations: nothing to cast
  EXPECT_EQ(out.op_calls.gemm, 3 * layers + mtp + out.op_calls.indexer_k_write +
                                   out.op_calls.indexer_logits);
}

// The fused projections (RuntimeOptions::fuse_projections) against each
// projection alone, in both arms and for a prefill on either branch: per
// layer one gemm fewer for q_a | kv_a, and one fewer for wk | weights_proj
// where the layer scores (a key write alone had one gemm either way); every
// other op the same; on the CPU the same bits in the outputs and the caches.
//
// On a GPU the counts are the same; the outputs agree within 1e-4 of their
// largest magnitude rather than to the bit (the vendor GEMM may split the
// wider product's sums otherwise), and the caches are not compared.
TEST_P(ModelRunnerTest, FusedProjectionsLaunchFewerGemmsForTheSameBits) {
  const bool bits = GetParam() == "cpu";
  auto close = [](const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    float scale = 0, worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, std::fabs(a[i]));
      worst = std::max(worst, std::fabs(a[i] - b[i]));
    }
    return worst <= 1e-4f * scale;
  };
  for (const char* preset : {"tiny-glm-5.1", "tiny-glm-5.2", "tiny-v3.2"}) {
    for (const bool skip : {false, true}) {
      // Short prefills (the skip arm skips scoring on the main layers) and
      // a long one (the sparse branch: every indexer layer scores).
      for (const int64_t tokens : {20, 100}) {
        SCOPED_TRACE(absl::StrCat(preset, skip ? " skip" : " main", ", ",
                                  tokens, " tokens"));
        RuntimeOptions options;
        options.block_size = 16;
        auto fused =
            MakeModel(preset, skip ? skip_caps_ : no_skip_caps_, options);
        options.fuse_projections = false;
        auto alone =
            MakeModel(preset, skip ? skip_caps_ : no_skip_caps_, options);
        ASSERT_TRUE(fused && alone);
        const ModelConfig& config = fused->planner().config();
        const std::vector<float> x =
            RandomHidden(tokens, config.proto().hidden_size(), 8);
        ASSERT_OK_AND_ASSIGN(StepOutput f,
                             fused->Step({}, {{1, 0, tokens}}, x));
        ASSERT_OK_AND_ASSIGN(StepOutput a,
                             alone->Step({}, {{1, 0, tokens}}, x));
        int scoring = 0, writing = 0;
        for (const LayerPlan& layer : f.plan.layers) {
          scoring += layer.indexer.action == IndexerAction::kScore;
          writing += layer.k_cache_write;
        }
        EXPECT_EQ(f.op_calls.indexer_logits, scoring);
        EXPECT_EQ(f.op_calls.indexer_k_write, writing);
        const int layers = config.num_layers();
        const int mtp = config.num_mtp_layers();
        // Per layer on the sparse branch, one more: q_nope x W_UK.
        const int sparse = f.op_calls.sparse_mla;
        EXPECT_EQ(sparse, tokens > config.index_topk() ? layers : 0);
        // Alone: q_a, q_b, kv_a, o; wk per key write; wq_b and
        // weights_proj per scoring; eh_proj per MTP layer.
        EXPECT_EQ(a.op_calls.gemm,
                  4 * layers + writing + 2 * scoring + mtp + sparse);
        // Fused: fused_qkv_a_proj, q_b, o; wk_weights_proj per key write;
        // wq_b per scoring.
        EXPECT_EQ(f.op_calls.gemm,
                  3 * layers + writing + scoring + mtp + sparse);
        EXPECT_EQ(a.op_calls.total() - f.op_calls.total(), layers + scoring);
        EXPECT_EQ(a.op_calls.attention_ops(), f.op_calls.attention_ops());
        if (!bits) {
          EXPECT_TRUE(close(a.hidden, f.hidden));
          EXPECT_TRUE(close(a.mtp_hidden, f.mtp_hidden));
          continue;
        }
        EXPECT_EQ(a.hidden, f.hidden);
        EXPECT_EQ(a.mtp_hidden, f.mtp_hidden);
        for (int l = 0; l < layers; ++l) {
          EXPECT_EQ(*fused->ReadLatentCache(l), *alone->ReadLatentCache(l))
              << "layer " << l;
          EXPECT_EQ(*fused->ReadIndexerKCache(l), *alone->ReadIndexerKCache(l))
              << "layer " << l;
        }
      }
    }
  }
}

// RuntimeOptions::step_graphs: over steps of one shape (fresh prompts of
// 16 and 40 tokens, a chunk after context, a decode), each layer's run is
// direct, then recorded, then replayed; the outputs and caches are the same
// bits as without graphs, in both arms, the op counts the same. On a
// platform without graphs (the CPU) nothing is launched as a graph.
TEST_P(ModelRunnerTest, StepGraphsGiveTheSameBits) {
  const bool graphs_here = GetParam() != "cpu";
  for (const char* preset : {"tiny-glm-5.1", "tiny-glm-5.2"}) {
    for (const bool skip : {false, true}) {
      SCOPED_TRACE(absl::StrCat(preset, skip ? " skip" : " main"));
      RuntimeOptions options;
      options.block_size = 16;
      auto with = MakeModel(preset, skip ? skip_caps_ : no_skip_caps_, options);
      options.step_graphs = false;
      auto without =
          MakeModel(preset, skip ? skip_caps_ : no_skip_caps_, options);
      ASSERT_TRUE(with && without);
      const int hidden = with->planner().config().proto().hidden_size();
      struct StepSpec {
        int64_t request, start, tokens;
      };
      const std::vector<StepSpec> steps = {
          {1, 0, 16}, {2, 0, 16}, {3, 0, 16},  {4, 0, 16},  {5, 0, 40},
          {6, 0, 40}, {7, 0, 40}, {1, 16, 16}, {2, 16, 16}, {3, 16, 16},
          {4, 16, 1}, {5, 40, 1}, {6, 40, 1}};
      int launched = 0;
      for (size_t i = 0; i < steps.size(); ++i) {
        SCOPED_TRACE(absl::StrCat("step ", i));
        const StepSpec& st = steps[i];
        const std::vector<float> x =
            RandomHidden(st.tokens, hidden, 100 + static_cast<int>(i));
        ASSERT_OK_AND_ASSIGN(
            StepOutput a,
            with->Step({}, {{st.request, st.start, st.tokens}}, x));
        ASSERT_OK_AND_ASSIGN(
            StepOutput b,
            without->Step({}, {{st.request, st.start, st.tokens}}, x));
        EXPECT_EQ(a.hidden, b.hidden);
        EXPECT_EQ(a.mtp_hidden, b.mtp_hidden);
        EXPECT_EQ(a.op_calls.total(), b.op_calls.total());
        EXPECT_EQ(b.graph_launches, 0);
        launched += a.graph_launches;
        // The third step of a shape replays every layer's run.
        if (graphs_here && (i == 2 || i == 3 || i == 6)) {
          EXPECT_EQ(a.graph_launches, with->planner().config().num_layers());
        }
      }
      EXPECT_EQ(launched > 0, graphs_here);
      const int layers = with->planner().config().num_layers();
      for (int l = 0; l < layers; ++l) {
        EXPECT_EQ(*with->ReadLatentCache(l), *without->ReadLatentCache(l))
            << "layer " << l;
        EXPECT_EQ(*with->ReadIndexerKCache(l), *without->ReadIndexerKCache(l))
            << "layer " << l;
      }
    }
  }
}

// StepOptions::time_ops: every op that ran has a time, the kinds add up to
// the total, the scoring is part of it, and the outputs are the unprofiled
// step's. Without it the times stay zero; the issue/tail split is always
// measured.
TEST_P(ModelRunnerTest, TimedOpsAddUpAndDoNotChangeTheStep) {
  RuntimeOptions options;
  options.block_size = 16;
  auto timed = MakeModel("tiny-glm-5.2", no_skip_caps_, options);
  auto plain = MakeModel("tiny-glm-5.2", no_skip_caps_, options);
  ASSERT_TRUE(timed && plain);
  const int hidden = timed->planner().config().proto().hidden_size();
  const std::vector<float> x = RandomHidden(20, hidden, 6);
  StepOptions profile;
  profile.time_ops = true;
  ASSERT_OK_AND_ASSIGN(StepOutput a, timed->Step({}, {{1, 0, 20}}, x, profile));
  ASSERT_OK_AND_ASSIGN(StepOutput b, plain->Step({}, {{1, 0, 20}}, x));
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.mtp_hidden, b.mtp_hidden);
  const OpTimes& t = a.op_ms;
  double sum = 0;
#define DSA_CHECK_OP(op)                         \
  EXPECT_EQ(t.op > 0, a.op_calls.op > 0) << #op; \
  EXPECT_GE(t.op, 0) << #op;                     \
  sum += t.op;
  DSA_STEP_OPS(DSA_CHECK_OP)
#undef DSA_CHECK_OP
  EXPECT_DOUBLE_EQ(sum, t.total());
  ASSERT_GT(a.op_calls.indexer_logits, 0);  // scoring on every indexer layer
  EXPECT_GT(t.indexer_scoring, t.indexer_logits + t.indexer_topk - 1e-12);
  EXPECT_LT(t.indexer_scoring, t.total());
  EXPECT_EQ(b.op_ms.total(), 0);
  EXPECT_EQ(b.op_ms.indexer_scoring, 0);
  EXPECT_GE(b.host_issue_ms, 0);
  EXPECT_GE(b.device_tail_ms, 0);
}

INSTANTIATE_TEST_SUITE_P(Platforms, ModelRunnerTest,
                         ::testing::ValuesIn(RunnerPlatforms()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace dsa::model::deepseek_v32
