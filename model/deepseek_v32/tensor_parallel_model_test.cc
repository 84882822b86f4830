// Tensor-parallel ranks of the stack on the CPU platform: one thread and
// model per rank, a collective group among them (RuntimeOptions::
// tensor_parallel). The ranks' outputs are equal to each other to the bit and
// to one TP=1 model's within what splitting o_proj's sum allows; the
// row-sharded indexer gives the replicated one's top-k; the layer plan is the
// same on every rank; a failed collective fails every rank, none hangs.
#include "model/deepseek_v32/tensor_parallel_model.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/tensor_parallel.h"
#include "platform/fault_injection.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::testing::HasSubstr;

std::vector<float> RandomHidden(int64_t tokens, int64_t hidden, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(tokens * hidden);
  for (float& v : x) v = dist(rng);
  return x;
}

// ‖a - b‖ / ‖b‖.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    num +=
        (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

struct Step {
  std::vector<StepRequest> requests;
  uint32_t seed = 0;
};

// A prefill short enough to skip (20 <= topk 64), one long enough to score
// on the sparse branch (80), and a decode of each.
std::vector<Step> Steps() {
  return {{{{1, 0, 20}}, 1}, {{{2, 0, 80}}, 2}, {{{1, 20, 1}, {2, 80, 1}}, 3}};
}

struct RankRun {
  absl::Status status;
  std::vector<StepOutput> outputs;
};

class TensorParallelModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    platform::Registry& registry = platform::Registry::Global();
    auto cpu = registry.GetPlatform("cpu");
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    platform_.emplace(*cpu);
    auto kernels = AttentionKernels::Load(registry, "cpu");
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    kernels_ = *kernels;
    // A CUDA-alike's decisions (the skip on), as the GPU platforms take them.
    auto rocm = registry.GetPlatform("rocm");
    ASSERT_TRUE(rocm.ok());
    auto caps = rocm->CapabilitiesForArch("gfx942");
    ASSERT_TRUE(caps.ok());
    caps_ = *caps;
  }

  // `n` ranks, each on its own thread, run `steps`; with `group` false each
  // runs alone (no collectives).
  std::vector<RankRun> RunRanks(const std::string& preset, int n,
                                IndexerParallel mode, RuntimeOptions options,
                                const std::vector<Step>& steps,
                                bool group = true,
                                StepOptions step_options = {}) {
    auto config = LoadModelConfig(preset);
    EXPECT_TRUE(config.ok()) << config.status();
    const platform::DeviceRuntime rt = platform_->runtime();
    void* handle = nullptr;
    if (group && n > 1) {
      auto g = rt.CreateCollectiveGroup(std::vector<int32_t>(n, 0));
      EXPECT_TRUE(g.ok()) << g.status();
      handle = *g;
    }
    std::vector<RankRun> runs(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        RankRun& run = runs[r];
        auto planner = LayerPlanner::Create(*config, caps_, {});
        if (!planner.ok()) {
          run.status = planner.status();
          return;
        }
        RuntimeOptions o = options;
        o.num_threads = 1;
        o.tensor_parallel = {n, r, mode, handle};
        auto model = DeepseekV32Model::Create(std::move(*planner), *platform_,
                                              kernels_, o, 7);
        if (!model.ok()) {
          run.status = model.status();
          return;
        }
        const int64_t hidden = config->proto().hidden_size();
        for (const Step& s : steps) {
          int64_t tokens = 0;
          for (const StepRequest& q : s.requests) tokens += q.num_new_tokens;
          absl::StatusOr<StepOutput> out = (*model)->Step(
              {}, s.requests, RandomHidden(tokens, hidden, s.seed),
              step_options);
          if (!out.ok()) {
            run.status = out.status();
            return;
          }
          run.outputs.push_back(std::move(*out));
        }
      });
    }
    for (std::thread& t : threads) t.join();
    if (handle != nullptr) EXPECT_OK(rt.DestroyCollectiveGroup(handle));
    return runs;
  }

  std::optional<platform::Platform> platform_;
  AttentionKernels kernels_;
  platform::PlatformCapabilities caps_;
};

TEST_F(TensorParallelModelTest, RanksAgreeToTheBitAndWithOneRank) {
  for (const char* preset : {"tiny-glm-5.1", "tiny-glm-5.2"}) {
    RuntimeOptions options;
    options.block_size = 16;
    const std::vector<RankRun> one =
        RunRanks(preset, 1, IndexerParallel::kReplicated, options, Steps());
    ASSERT_OK(one[0].status);
    for (int n : {2, 4}) {
      SCOPED_TRACE(absl::StrCat(preset, " TP ", n));
      const std::vector<RankRun> ranks =
          RunRanks(preset, n, IndexerParallel::kReplicated, options, Steps());
      for (int r = 0; r < n; ++r) ASSERT_OK(ranks[r].status) << "rank " << r;
      for (size_t s = 0; s < Steps().size(); ++s) {
        const StepOutput& ref = one[0].outputs[s];
        for (int r = 0; r < n; ++r) {
          const StepOutput& out = ranks[r].outputs[s];
          EXPECT_EQ(out.hidden, ranks[0].outputs[s].hidden) << "rank " << r;
          EXPECT_EQ(out.mtp_hidden, ranks[0].outputs[s].mtp_hidden);
          // The same decision on every rank as on one.
          EXPECT_EQ(out.plan.counts.skipped, ref.plan.counts.skipped);
          EXPECT_EQ(out.plan.counts.scored, ref.plan.counts.scored);
          EXPECT_EQ(out.op_calls.indexer_logits, ref.op_calls.indexer_logits);
          // One all-reduce per layer, nothing gathered.
          EXPECT_EQ(out.op_calls.all_reduce,
                    static_cast<int>(ref.plan.layers.size()));
          EXPECT_EQ(out.op_calls.all_gather, 0);
        }
        // float32 activations: o_proj's sum split in N partial sums, each
        // rounded to float32 (~1e-7), after which the next layers' latent
        // values (bf16 in the cache) and indexer keys (fp8) now and then
        // land on a neighbouring value: measured 2e-7 to 4e-5 after 6-8
        // layers (the same mechanism as kReferenceTolerance's in
        // model_runner_test). A wrong head, window or sum is of order 1.
        const double e = RelativeError(ranks[0].outputs[s].hidden, ref.hidden);
        std::printf("[ tp        ] %s TP %d step %zu: relative error %.3g\n",
                    preset, n, s, e);
        EXPECT_LT(e, 1e-3) << "step " << s;
        if (!ref.mtp_hidden.empty()) {
          EXPECT_LT(
              RelativeError(ranks[0].outputs[s].mtp_hidden, ref.mtp_hidden),
              1e-3);
        }
      }
    }
  }
}

// bf16 activations: each rank's partial o_proj is rounded to bf16 and the
// all-reduce adds bf16 values (vLLM's row-parallel o_proj): one bf16
// rounding of each partial and of the sum, 2^-9 relative each, against
// TP=1's float32 o_proj, in every layer's residual update. Measured 4e-3 to
// 1e-2 after 7 layers (of the residual stream's norm).
TEST_F(TensorParallelModelTest, Bf16AllReduceStaysWithinItsRounding) {
  RuntimeOptions options;
  options.block_size = 16;
  options.activation_dtype = attention::DType::kBFloat16;
  const std::vector<RankRun> one = RunRanks(
      "tiny-glm-5.1", 1, IndexerParallel::kReplicated, options, Steps());
  ASSERT_OK(one[0].status);
  const std::vector<RankRun> two = RunRanks(
      "tiny-glm-5.1", 2, IndexerParallel::kReplicated, options, Steps());
  for (const RankRun& r : two) ASSERT_OK(r.status);
  for (size_t s = 0; s < Steps().size(); ++s) {
    EXPECT_EQ(two[0].outputs[s].hidden, two[1].outputs[s].hidden);
    const double e =
        RelativeError(two[0].outputs[s].hidden, one[0].outputs[s].hidden);
    std::printf("[ tp        ] bf16 TP 2 step %zu: relative error %.3g\n", s,
                e);
    EXPECT_LT(e, 2e-2) << "step " << s;
  }
}

// FP8 weights on ranks: each rank's q_b_proj and o_proj are the whole
// model's drawn weights cut to its window and quantised per 128x128 block of
// the window. At 2 ranks of tiny-glm-5.1 the windows are whole blocks (128
// rows or columns), so every rank holds exactly the codes and scales of the
// TP=1 model's blocks, and o_proj's activation groups of 128 are the same
// too: what differs from TP=1 is the split sum, as with bf16 weights (the
// first step: 1.5e-7), and the fp8 activation codes and indexer top-k picks
// it moves to a neighbour now and then (later steps: 7e-3 to 1.3e-2). At 4
// ranks the windows are 64 wide, quantised as blocks of their own: other
// scales and codes, a difference of fp8 weights' own size (measured 4-6e-2;
// fp8 weights against the float64 reference: 4.8e-2, model_runner_test).
// The ranks agree to the bit either way.
TEST_F(TensorParallelModelTest, Fp8WeightsOnRanks) {
  RuntimeOptions options;
  options.block_size = 16;
  options.weight_dtype = attention::DType::kFloat8E4m3fn;
  const std::vector<RankRun> one = RunRanks(
      "tiny-glm-5.1", 1, IndexerParallel::kReplicated, options, Steps());
  ASSERT_OK(one[0].status);
  for (const auto& [n, bound] : {std::pair<int, double>{2, 3e-2}, {4, 1e-1}}) {
    SCOPED_TRACE(absl::StrCat("TP ", n));
    const std::vector<RankRun> ranks = RunRanks(
        "tiny-glm-5.1", n, IndexerParallel::kReplicated, options, Steps());
    for (const RankRun& r : ranks) ASSERT_OK(r.status);
    for (size_t s = 0; s < Steps().size(); ++s) {
      for (int r = 1; r < n; ++r) {
        EXPECT_EQ(ranks[r].outputs[s].hidden, ranks[0].outputs[s].hidden);
      }
      const double e =
          RelativeError(ranks[0].outputs[s].hidden, one[0].outputs[s].hidden);
      std::printf(
          "[ tp        ] fp8 weights TP %d step %zu: relative error "
          "%.3g\n",
          n, s, e);
      EXPECT_LT(e, bound) << "step " << s;
    }
  }
}

TEST_F(TensorParallelModelTest, RowShardedIndexerGivesTheReplicatedTopK) {
  RuntimeOptions options;
  options.block_size = 16;
  StepOptions capture;
  capture.capture_topk = true;
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(n);
    // 3 ranks do not divide the 4 heads: refused, naming why.
    if (n == 3) {
      const std::vector<RankRun> three = RunRanks(
          "tiny-glm-5.1", 3, IndexerParallel::kRows, options, Steps(), true);
      EXPECT_THAT(three[0].status,
                  ::dsa::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("do not divide")));
      continue;
    }
    const std::vector<RankRun> replicated =
        RunRanks("tiny-glm-5.1", n, IndexerParallel::kReplicated, options,
                 Steps(), true, capture);
    const std::vector<RankRun> rows =
        RunRanks("tiny-glm-5.1", n, IndexerParallel::kRows, options, Steps(),
                 true, capture);
    for (int r = 0; r < n; ++r) {
      ASSERT_OK(replicated[r].status);
      ASSERT_OK(rows[r].status);
      for (size_t s = 0; s < Steps().size(); ++s) {
        EXPECT_EQ(rows[r].outputs[s].topk, replicated[r].outputs[s].topk)
            << "rank " << r << " step " << s;
        EXPECT_EQ(rows[r].outputs[s].hidden, replicated[r].outputs[s].hidden);
        // One all-gather per scoring layer.
        EXPECT_EQ(rows[r].outputs[s].op_calls.all_gather,
                  replicated[r].outputs[s].op_calls.indexer_logits);
        // Each rank scores its block of rows (none when it has no rows).
        const std::vector<Step> steps = Steps();
        int64_t tokens = 0;
        for (const StepRequest& q : steps[s].requests) {
          tokens += q.num_new_tokens;
        }
        EXPECT_EQ(rows[r].outputs[s].op_calls.indexer_logits > 0,
                  replicated[r].outputs[s].op_calls.indexer_logits > 0 &&
                      RowsOf(tokens, {n, r, IndexerParallel::kRows}).size() > 0)
            << "rank " << r << " step " << s;
      }
    }
  }
}

// Without a group a rank runs its share alone (one rank timed on one device):
// no collectives, and a smaller model.
TEST_F(TensorParallelModelTest, ARankAloneRunsItsShareWithoutCollectives) {
  RuntimeOptions options;
  options.block_size = 16;
  const std::vector<RankRun> alone =
      RunRanks("tiny-glm-5.1", 4, IndexerParallel::kReplicated, options,
               Steps(), /*group=*/false);
  for (const RankRun& r : alone) {
    ASSERT_OK(r.status);
    for (const StepOutput& out : r.outputs) {
      EXPECT_EQ(out.op_calls.all_reduce, 0);
      EXPECT_FALSE(out.hidden.empty());
    }
  }
  ASSERT_OK_AND_ASSIGN(ModelConfig glm, LoadPreset("glm-5.1"));
  RuntimeOptions tp4;
  tp4.tensor_parallel = {4, 0};
  const CheckedSize whole =
      DeepseekV32Model::DeviceBytes(glm, RuntimeOptions{});
  const CheckedSize rank = DeepseekV32Model::DeviceBytes(glm, tp4);
  ASSERT_TRUE(whole.ok() && rank.ok());
  EXPECT_LT(rank.value(), whole.value());
}

// A collective made to fail on one rank: that rank reports it and aborts the
// group, the others' steps fail instead of waiting; nobody hangs.
TEST_F(TensorParallelModelTest, AFailedCollectiveFailsEveryRankWithoutAHang) {
  RuntimeOptions options;
  options.block_size = 16;
  platform::FaultPlan plan;
  plan.fail_at = 3;
  plan.sites = platform::FaultSiteBit(platform::FaultSite::kCollective);
  const auto start = std::chrono::steady_clock::now();
  std::vector<RankRun> runs;
  {
    platform::FaultInjector injector(plan);
    runs = RunRanks("tiny-glm-5.1", 2, IndexerParallel::kReplicated, options,
                    Steps());
    EXPECT_EQ(injector.faults(), 1);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  int injected = 0;
  for (const RankRun& r : runs) {
    ASSERT_FALSE(r.status.ok());
    EXPECT_THAT(r.status.message(), HasSubstr("tensor-parallel group"));
    if (absl::StrContains(r.status.message(), "injected fault")) {
      ++injected;
      EXPECT_THAT(r.status.message(), HasSubstr("all_reduce (o_proj)"));
    } else {
      EXPECT_THAT(r.status.message(), HasSubstr("aborted"));
    }
  }
  EXPECT_EQ(injected, 1);
}

// TensorParallelModel: the same ranks as one stack.
TEST_F(TensorParallelModelTest, TheRanksAsOneStack) {
  auto config = LoadModelConfig("tiny-glm-5.1");
  ASSERT_OK(config.status());
  RuntimeOptions options;
  options.block_size = 16;
  options.tensor_parallel.size = 2;
  const std::vector<RankRun> expected = RunRanks(
      "tiny-glm-5.1", 2, IndexerParallel::kReplicated, options, Steps());
  ASSERT_OK(expected[0].status);
  ASSERT_OK_AND_ASSIGN(LayerPlanner planner,
                       LayerPlanner::Create(*config, caps_, {}));
  for (RankSet set : {RankSet::kAllRanks, RankSet::kRankZeroAlone}) {
    ASSERT_OK_AND_ASSIGN(
        std::unique_ptr<TensorParallelModel> stack,
        TensorParallelModel::Create(planner, *platform_, kernels_, options,
                                    nullptr, 7, set));
    EXPECT_EQ(stack->size(), 2);
    EXPECT_EQ(stack->num_ranks_run(), set == RankSet::kAllRanks ? 2 : 1);
    EXPECT_EQ(stack->all_ranks(), set == RankSet::kAllRanks);
    EXPECT_EQ(stack->planner().config().proto().num_attention_heads(), 2);
    ASSERT_OK(stack->ProfileRun({}).status());
    const std::vector<Step> steps = Steps();
    for (size_t s = 0; s < steps.size(); ++s) {
      int64_t tokens = 0;
      for (const StepRequest& q : steps[s].requests) tokens += q.num_new_tokens;
      ASSERT_OK_AND_ASSIGN(
          StepOutput out,
          stack->Step({}, steps[s].requests,
                      RandomHidden(tokens, config->proto().hidden_size(),
                                   steps[s].seed)));
      if (set == RankSet::kAllRanks) {
        EXPECT_EQ(out.hidden, expected[0].outputs[s].hidden) << s;
        EXPECT_EQ(out.op_calls.all_reduce,
                  static_cast<int>(out.plan.layers.size()));
      } else {
        EXPECT_EQ(out.op_calls.all_reduce, 0);
      }
    }
    EXPECT_TRUE(stack->ranks_agree());
    EXPECT_EQ(stack->steps_compared(), set == RankSet::kAllRanks
                                           ? static_cast<int64_t>(steps.size())
                                           : 0);
    EXPECT_OK(stack->Release(1));
    EXPECT_OK(stack->Release(2));
  }
  // A fault in one rank's collective: the stack reports that rank's error,
  // not the others' echo of the abort.
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<TensorParallelModel> stack,
      TensorParallelModel::Create(planner, *platform_, kernels_, options,
                                  nullptr, 7, RankSet::kAllRanks));
  platform::FaultPlan plan;
  plan.fail_at = 2;
  plan.sites = platform::FaultSiteBit(platform::FaultSite::kCollective);
  platform::FaultInjector injector(plan);
  absl::StatusOr<StepOutput> failed = stack->Step(
      {}, {{1, 0, 20}}, RandomHidden(20, config->proto().hidden_size(), 1));
  EXPECT_THAT(failed.status().message(), HasSubstr("injected fault"));
  EXPECT_THAT(failed.status().message(), HasSubstr("all_reduce (o_proj)"));
}

TEST_F(TensorParallelModelTest, RefusesTensorParallelOptionsThatCannotWork) {
  auto config = LoadModelConfig("tiny-glm-5.1");
  ASSERT_OK(config.status());
  for (const TensorParallel& tp :
       {TensorParallel{2, 2}, TensorParallel{0, 0}, TensorParallel{8, 0}}) {
    auto planner = LayerPlanner::Create(*config, caps_, {});
    ASSERT_OK(planner.status());
    RuntimeOptions o;
    o.tensor_parallel = tp;
    EXPECT_THAT(DeepseekV32Model::Create(std::move(*planner), *platform_,
                                         kernels_, o, 7)
                    .status(),
                ::dsa::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("tensor parallelism")));
  }
  auto planner = LayerPlanner::Create(*config, caps_, {});
  ASSERT_OK(planner.status());
  RuntimeOptions o;
  o.device = 1;
  EXPECT_THAT(
      DeepseekV32Model::Create(std::move(*planner), *platform_, kernels_, o, 7)
          .status(),
      ::dsa::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("device 1 of 1")));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
