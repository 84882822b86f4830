// One arm's run of a schedule on a small stack (tiny-glm-5.1 on the CPU
// kernels): steps in order only, figures counted per step, the same outputs
// hashed alike run after run, a TTFT per finished prompt, and no request
// left in the cache by a partial run or a profiled step.
#include "bench/prefill/schedule_run.h"

#include <memory>
#include <random>
#include <vector>

#include "bench/prefill/compare.h"
#include "bench/prefill/workloads.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/model_config.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/tensor_parallel_model.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using ::dsa::testing::StatusIs;
using model::deepseek_v32::AttentionKernels;
using model::deepseek_v32::LayerPlanner;
using model::deepseek_v32::ModelConfig;
using model::deepseek_v32::OpClock;
using model::deepseek_v32::OpTimes;
using model::deepseek_v32::RankSet;
using model::deepseek_v32::RuntimeOptions;
using model::deepseek_v32::StepOutput;
using model::deepseek_v32::TensorParallelModel;

class ScheduleRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const platform::Registry& registry = platform::Registry::Global();
    ASSERT_OK_AND_ASSIGN(ModelConfig config,
                         model::deepseek_v32::LoadModelConfig("tiny-glm-5.1"));
    ASSERT_OK_AND_ASSIGN(platform::Platform cpu, registry.GetPlatform("cpu"));
    ASSERT_OK_AND_ASSIGN(platform::PlatformCapabilities caps,
                         cpu.Capabilities());
    ASSERT_OK_AND_ASSIGN(LayerPlanner planner,
                         LayerPlanner::Create(config, caps, {}));
    ASSERT_OK_AND_ASSIGN(AttentionKernels kernels,
                         AttentionKernels::Load(registry, "cpu"));
    // Two concurrent prompts of 24 tokens in steps of 16: chunked.
    workload_ = Workload{"w", 0, 24, 3, 2};
    ASSERT_OK_AND_ASSIGN(schedule_, MakeSchedule(workload_, 16, 16));
    RuntimeOptions options;
    options.block_size = 16;
    options.num_blocks = static_cast<int>(schedule_.peak_blocks);
    options.max_model_len = 24;
    options.max_num_batched_tokens = 16;
    options.num_threads = 1;
    ASSERT_OK_AND_ASSIGN(model_, TensorParallelModel::Create(
                                     planner, cpu, kernels, options, nullptr,
                                     /*seed=*/3, RankSet::kAllRanks));
    input_.resize(16 * config.proto().hidden_size());
    std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
    std::normal_distribution<float> dist;
    for (float& v : input_) v = dist(rng);
    indexer_layers_ = config.num_indexer_layers();
  }

  absl::StatusOr<RunFigures> RunAll(int64_t id_base) {
    ScheduleRun run(*model_, schedule_, input_, id_base);
    for (size_t k = 0; k < schedule_.steps.size(); ++k) {
      absl::Status s = run.Step(static_cast<int>(k));
      if (!s.ok()) return s;
    }
    return run.Finish();
  }

  Workload workload_;
  Schedule schedule_;
  std::unique_ptr<TensorParallelModel> model_;
  std::vector<float> input_;
  int indexer_layers_ = 0;
};

TEST_F(ScheduleRunTest, StepsRunInOrderOnly) {
  ScheduleRun run(*model_, schedule_, input_, 0);
  EXPECT_THAT(run.Step(1), StatusIs(absl::StatusCode::kInternal));
  ASSERT_OK(run.Step(0));
  EXPECT_THAT(run.Step(0), StatusIs(absl::StatusCode::kInternal));
}

TEST_F(ScheduleRunTest, FiguresOfAWholeRun) {
  ASSERT_GT(schedule_.steps.size(), 2u);
  ASSERT_OK_AND_ASSIGN(RunFigures a, RunAll(0));
  const size_t steps = schedule_.steps.size();
  EXPECT_GT(a.median_ttft_ms, 0);
  EXPECT_GT(a.median_ttft_cpu_ms, 0);
  // The CPU is not CUDA-alike: every indexer layer scores at every step.
  EXPECT_EQ(a.scored, int64_t{indexer_layers_} * static_cast<int64_t>(steps));
  EXPECT_GT(a.launches, 0);
  EXPECT_GT(a.all_launches, a.launches);
  EXPECT_EQ(a.host_issue_ms.size(), steps);
  EXPECT_EQ(a.device_tail_ms.size(), steps);
  EXPECT_EQ(a.prepare_ms.size(), steps);
  EXPECT_EQ(a.read_back_ms.size(), steps);
  EXPECT_NE(a.output_hash, kHashSeed);
  // The same requests again (other ids): the same outputs to the bit.
  ASSERT_OK_AND_ASSIGN(RunFigures b, RunAll(100));
  EXPECT_EQ(b.output_hash, a.output_hash);
  EXPECT_EQ(b.scored, a.scored);
  // Other inputs: other outputs.
  for (float& v : input_) v += 1.0f;
  ASSERT_OK_AND_ASSIGN(RunFigures c, RunAll(200));
  EXPECT_NE(c.output_hash, a.output_hash);
}

// A warm-up runs one step and stops: its unfinished prompts are released,
// so the caches (sized for the schedule's peak) hold the next full run.
TEST_F(ScheduleRunTest, APartialRunLeavesNothingInTheCache) {
  for (int i = 0; i < 3; ++i) {
    ScheduleRun warm_up(*model_, schedule_, input_, 10 * i);
    ASSERT_OK(warm_up.Step(0));
    ASSERT_OK_AND_ASSIGN(RunFigures figures, warm_up.Finish());
    // Prompt 0 finishes in step 1 at the earliest: no TTFT yet.
    EXPECT_EQ(figures.median_ttft_ms, 0);
  }
  {
    ScheduleRun abandoned(*model_, schedule_, input_, 50);
    ASSERT_OK(abandoned.Step(0));
    ASSERT_OK(abandoned.Step(1));
  }  // released by the destructor
  EXPECT_OK(RunAll(60).status());
}

TEST_F(ScheduleRunTest, AProfiledStepTimesEveryOpAndReleasesItsRequests) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(
        StepOutput out,
        ProfileFirstStep(*model_, schedule_, input_, 10 * i,
                         i == 2 ? OpClock::kHost : OpClock::kDevice));
    const OpTimes& times = out.op_ms;
    EXPECT_GT(times.total(), 0);
    EXPECT_GT(out.op_calls.total(), 0);
    EXPECT_GT(times.indexer_logits, 0);  // the CPU always scores
    EXPECT_GT(times.indexer_scoring, 0);
    EXPECT_LE(times.indexer_scoring, times.total());
  }
  EXPECT_OK(RunAll(40).status());
}

}  // namespace
}  // namespace dsa::prefill_bench
