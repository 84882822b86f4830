// The seed's workloads at a preset's scale and the chunked-prefill scheduler:
// the seed's cases by hand, then the scheduler's invariants on random
// workloads.
#include "bench/prefill/workloads.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(WorkloadsTest, ScaledToTheSeedsRelationWithIndexTopk) {
  ASSERT_OK_AND_ASSIGN(std::vector<Workload> real,
                       MakeWorkloads({}, 2048, 0, /*on_cpu=*/false));
  ASSERT_EQ(real.size(), 4u);
  EXPECT_EQ(real[0].name, "1k_c1");
  EXPECT_EQ(real[0].prompt_len, 1024);
  EXPECT_EQ(real[0].prompts, 40);
  EXPECT_EQ(real[1].prompt_len, 1900);
  EXPECT_EQ(real[2].prompt_len, 1024);
  EXPECT_EQ(real[2].prompts, 32);
  EXPECT_EQ(real[2].concurrency, 32);
  EXPECT_EQ(real[3].prompt_len, 8192);
  EXPECT_EQ(real[3].prompts, 16);
  // index_topk 64: short below it, "1900" just under it, "8k" well above.
  ASSERT_OK_AND_ASSIGN(std::vector<Workload> tiny,
                       MakeWorkloads({}, 64, 0, /*on_cpu=*/true));
  EXPECT_EQ(tiny[0].prompt_len, 32);
  EXPECT_EQ(tiny[1].prompt_len, 59);
  EXPECT_LT(tiny[1].prompt_len, 64);
  EXPECT_EQ(tiny[3].prompt_len, 256);
  EXPECT_EQ(tiny[0].prompts, 16);
  ASSERT_OK_AND_ASSIGN(std::vector<Workload> some,
                       MakeWorkloads({"8k_c1"}, 64, 3, true));
  ASSERT_EQ(some.size(), 1u);
  EXPECT_EQ(some[0].prompts, 3);
  EXPECT_THAT(MakeWorkloads({"16k_c1"}, 64, 0, true),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("16k_c1")));
}

TEST(WorkloadsTest, FewerPromptsThanTheConcurrencyRunAllAtOnce) {
  ASSERT_OK_AND_ASSIGN(std::vector<Workload> w,
                       MakeWorkloads({"1k_c32"}, 64, 2, true));
  EXPECT_EQ(w[0].prompts, 2);
  EXPECT_EQ(w[0].concurrency, 2);
  // A tiny index_topk still leaves every prompt a token.
  EXPECT_EQ(ScaleToTopk(1024, 1), 1);
  EXPECT_EQ(ScaleToTopk(8192, 2048), 8192);
  EXPECT_THAT(WorkloadNames(),
              ElementsAre("1k_c1", "1900_c1", "1k_c32", "8k_c1"));
}

TEST(ScheduleTest, ConcurrencyOneIsOneStepPerPromptBackToBack) {
  Workload w{"1k_c1", 1024, 1024, 3, 1};
  ASSERT_OK_AND_ASSIGN(Schedule s, MakeSchedule(w, 8192, 64));
  ASSERT_EQ(s.steps.size(), 3u);
  EXPECT_THAT(s.arrival_boundary, ElementsAre(0, 1, 2));
  EXPECT_THAT(s.finish_step, ElementsAre(0, 1, 2));
  EXPECT_EQ(s.peak_blocks, 16);
}

TEST(ScheduleTest, ThirtyTwoPromptsFillStepsOfTheTokenBudget) {
  Workload w{"1k_c32", 1024, 1024, 32, 32};
  ASSERT_OK_AND_ASSIGN(Schedule s, MakeSchedule(w, 8192, 64));
  ASSERT_EQ(s.steps.size(), 4u);
  for (const ScheduledStep& step : s.steps) {
    EXPECT_EQ(step.tokens, 8192);
    EXPECT_EQ(step.prompts.size(), 8u);
  }
  // All arrive at the start; the TTFT of prompt i ends with step i / 8.
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(s.arrival_boundary[i], 0);
    EXPECT_EQ(s.finish_step[i], i / 8);
  }
  EXPECT_EQ(s.peak_blocks, 8 * 16);
}

TEST(ScheduleTest, APromptThatDoesNotFitIsChunkedAndFinishesFirstNextStep) {
  Workload w{"x", 0, 100, 3, 2};
  ASSERT_OK_AND_ASSIGN(Schedule s, MakeSchedule(w, 150, 16));
  // Step 0: prompt 0 whole, prompt 1's first 50 tokens.
  ASSERT_GE(s.steps.size(), 2u);
  ASSERT_EQ(s.steps[0].prompts.size(), 2u);
  EXPECT_EQ(s.steps[0].prompts[1].prompt, 1);
  EXPECT_EQ(s.steps[0].prompts[1].new_tokens, 50);
  EXPECT_FALSE(s.steps[0].prompts[1].finishes);
  // Step 1: prompt 1's remaining 50 (context 50) before prompt 2, which
  // arrived when prompt 0 finished.
  EXPECT_EQ(s.steps[1].prompts[0].prompt, 1);
  EXPECT_EQ(s.steps[1].prompts[0].context, 50);
  EXPECT_EQ(s.steps[1].prompts[0].new_tokens, 50);
  EXPECT_TRUE(s.steps[1].prompts[0].finishes);
  EXPECT_EQ(s.arrival_boundary[2], 1);
  EXPECT_EQ(s.steps[1].prompts[1].prompt, 2);
  EXPECT_EQ(s.steps[1].prompts[1].new_tokens, 100);
  EXPECT_THAT(s.finish_step, ElementsAre(0, 1, 1));
  EXPECT_THAT(MakeSchedule(w, 0, 16),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ScheduleTest, BadSizesAreErrorsNamingTheWorkload) {
  for (const Workload& w :
       {Workload{"a", 0, 0, 1, 1}, Workload{"b", 0, 1, 0, 1},
        Workload{"c", 0, 1, 1, 0}}) {
    EXPECT_THAT(
        MakeSchedule(w, 8, 8),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(w.name)));
  }
  EXPECT_THAT(MakeSchedule(Workload{"d", 0, 1, 1, 1}, 8, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A workload of more than kMaxScheduledSteps steps is refused, naming its
// sizes: at once when its tokens over the step size say so (index_topk 2^30
// in steps of one token: 2^29 steps, which once grew until the host's memory
// ran out), else when the schedule reaches the bound; a workload at the
// bound is scheduled.
TEST(ScheduleTest, MoreStepsThanTheBoundAreRefused) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(
      MakeSchedule(Workload{"1k_c1", 1024, int64_t{1} << 29, 1, 1}, 1, 64),
      StatusIs(absl::StatusCode::kResourceExhausted,
               "workload 1k_c1: 1 prompt of 536870912 tokens in steps of at "
               "most 1 token take more than 1048576 steps: raise "
               "--max_num_batched_tokens, or use fewer --prompts or a model "
               "with a smaller index_topk"));
  // Refused before scheduling: no step was made.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_THAT(
      MakeSchedule(Workload{"w", 0, kMaxScheduledSteps + 1, 1, 1}, 1, 64),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("take more than 1048576 steps")));
  ASSERT_OK_AND_ASSIGN(
      const Schedule at_bound,
      MakeSchedule(Workload{"w", 0, kMaxScheduledSteps, 1, 1}, 1, 64));
  EXPECT_EQ(static_cast<int64_t>(at_bound.steps.size()), kMaxScheduledSteps);
  // Prompts of 3 tokens in steps of 4, one in flight: each step finishes a
  // prompt and takes 3 tokens, so the least number (3/4 of the prompts) is
  // under the bound and the schedule itself reaches it.
  const int prompts = static_cast<int>(kMaxScheduledSteps) + 1;
  EXPECT_THAT(MakeSchedule(Workload{"short", 0, 3, prompts, 1}, 4, 64),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("workload short: 1048577 prompts of 3 tokens "
                                 "in steps of at most 4 tokens take more than "
                                 "1048576 steps")));
}

// Random workloads: every prompt's tokens are scheduled exactly once, in
// order, no step exceeds the budget, at most `concurrency` prompts are in
// flight, a prompt arrives when an earlier one finishes, unfinished prompts
// go first, and the peak counts the blocks of what is resident.
TEST(ScheduleTest, InvariantsHoldOnRandomWorkloads) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  for (int trial = 0; trial < 300; ++trial) {
    std::uniform_int_distribution<int> small(1, 12);
    Workload w{"random", 0, std::uniform_int_distribution<int64_t>(1, 300)(rng),
               small(rng), small(rng)};
    const int64_t budget = std::uniform_int_distribution<int64_t>(1, 400)(rng);
    const int block = std::uniform_int_distribution<int>(1, 64)(rng);
    SCOPED_TRACE(::testing::Message()
                 << "len " << w.prompt_len << " prompts " << w.prompts
                 << " concurrency " << w.concurrency << " budget " << budget
                 << " block " << block);
    ASSERT_OK_AND_ASSIGN(Schedule s, MakeSchedule(w, budget, block));
    std::vector<int64_t> done(w.prompts, 0);
    int64_t peak = 0;
    for (size_t k = 0; k < s.steps.size(); ++k) {
      const ScheduledStep& step = s.steps[k];
      ASSERT_FALSE(step.prompts.empty()) << "step " << k;
      int64_t tokens = 0;
      bool seen_new = false;
      for (const ScheduledPrompt& p : step.prompts) {
        ASSERT_GE(p.prompt, 0);
        ASSERT_LT(p.prompt, w.prompts);
        EXPECT_LE(s.arrival_boundary[p.prompt], static_cast<int>(k));
        EXPECT_EQ(p.context, done[p.prompt]);  // chunks in order
        EXPECT_GT(p.new_tokens, 0);
        // Unfinished prompts before new ones.
        if (p.context == 0) seen_new = true;
        if (p.context > 0) {
          EXPECT_FALSE(seen_new);
        }
        done[p.prompt] += p.new_tokens;
        EXPECT_LE(done[p.prompt], w.prompt_len);
        EXPECT_EQ(p.finishes, done[p.prompt] == w.prompt_len);
        if (p.finishes) {
          EXPECT_EQ(s.finish_step[p.prompt], static_cast<int>(k));
        }
        tokens += p.new_tokens;
      }
      EXPECT_EQ(step.tokens, tokens);
      EXPECT_LE(tokens, budget);
      int in_flight = 0;
      int64_t blocks = 0;
      for (int p = 0; p < w.prompts; ++p) {
        const bool arrived = s.arrival_boundary[p] <= static_cast<int>(k);
        const bool finished_before =
            s.finish_step[p] >= 0 && s.finish_step[p] < static_cast<int>(k);
        if (arrived && !finished_before) {
          ++in_flight;
          blocks += (done[p] + block - 1) / block;
        }
      }
      EXPECT_LE(in_flight, w.concurrency);
      EXPECT_EQ(step.resident_blocks, blocks) << "step " << k;
      peak = std::max(peak, blocks);
    }
    for (int p = 0; p < w.prompts; ++p) {
      EXPECT_EQ(done[p], w.prompt_len) << "prompt " << p;
      EXPECT_GE(s.finish_step[p], 0);
    }
    EXPECT_EQ(s.peak_blocks, peak);
    // The client keeps `concurrency` prompts in flight: by each step
    // boundary, as many have arrived as have finished plus the concurrency.
    for (size_t b = 0; b <= s.steps.size(); ++b) {
      int arrived = 0, finished = 0;
      for (int p = 0; p < w.prompts; ++p) {
        arrived += s.arrival_boundary[p] <= static_cast<int>(b) ? 1 : 0;
        finished += s.finish_step[p] < static_cast<int>(b) ? 1 : 0;
      }
      EXPECT_EQ(arrived, std::min(w.prompts, w.concurrency + finished))
          << "boundary " << b;
    }
    for (int p = 1; p < w.prompts; ++p) {
      EXPECT_GE(s.arrival_boundary[p], s.arrival_boundary[p - 1]);
    }
  }
}

}  // namespace
}  // namespace dsa::prefill_bench
