// prefill_bench's pieces: the flag parser, the scaled workloads, the
// chunked-prefill scheduler, the output hash, the atomic writer, and a small
// run on the emulated ROCm platform whose figures show the skip (the MTP layer
// alone scores on short prefills, every layer on the long one, outputs equal).
#include "testing/prefill_bench.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Flags> Parse(std::vector<std::string> args) {
  return ParseFlags(args);
}

TEST(ParseFlagsTest, DefaultsAndValues) {
  ASSERT_OK_AND_ASSIGN(Flags d, Parse({}));
  EXPECT_EQ(d.platform, "auto");
  EXPECT_EQ(d.runs, 2);
  EXPECT_TRUE(d.model.empty());
  EXPECT_TRUE(d.workloads.empty());
  ASSERT_OK_AND_ASSIGN(
      Flags f,
      Parse({"--model=glm-5.2", "--platform=emulated-rocm", "--arch=gfx942",
             "--workloads=8k_c1,1k_c1", "--arms=skip,main", "--runs=3",
             "--prompts=5", "--max_num_batched_tokens=512", "--json=x.json"}));
  EXPECT_EQ(f.model, "glm-5.2");
  EXPECT_EQ(f.platform, "emulated-rocm");
  EXPECT_EQ(f.arch, "gfx942");
  EXPECT_THAT(f.workloads, ElementsAre("8k_c1", "1k_c1"));
  EXPECT_THAT(f.arms, ElementsAre("skip", "main"));
  EXPECT_EQ(f.runs, 3);
  EXPECT_EQ(f.prompts, 5);
  EXPECT_EQ(f.max_num_batched_tokens, 512);
  EXPECT_EQ(f.json, "x.json");
  ASSERT_OK_AND_ASSIGN(Flags h, Parse({"--runs=oops", "--help"}));
  EXPECT_TRUE(h.help);  // --help wins over everything else
}

TEST(ParseFlagsTest, BadFlagsNameWhatIsWrong) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bogus=1"}, "unknown flag --bogus"},
      {{"positional"}, "unexpected argument \"positional\""},
      {{"--runs=0"}, "--runs=0: expected an integer in [1, 1000]"},
      {{"--runs=2x"}, "--runs=2x: expected an integer"},
      {{"--runs"}, "--runs needs a value"},
      {{"--runs=1", "--runs=2"}, "--runs given twice"},
      {{"--platform=tpu"}, "expected auto, cpu, rocm, cuda or emulated-rocm"},
      {{"--workloads=2k_c1"}, "unknown workload \"2k_c1\""},
      {{"--workloads=1k_c1,1k_c1"}, "named twice"},
      {{"--arms=fast"}, "unknown arm \"fast\""},
      {{"--arms=,"}, "name at least one arm"},
      {{"--block_size=-4"}, "--block_size=-4: expected an integer"},
      {{"--spec_tokens=65"},
       "--spec_tokens=65: expected an integer in [0, 64]"},
      {{"--op_times=yes"}, "--op_times=yes: expected true or false"},
  };
  for (const auto& [args, message] : cases) {
    EXPECT_THAT(Parse(args), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr(message)))
        << args.front();
  }
}

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

TEST(CompareRunsTest, ChangeSpreadAndVerdictFromPairedRounds) {
  Change faster = CompareRuns({90, 80}, {100, 100});
  EXPECT_DOUBLE_EQ(*faster.pct, -15.0);
  EXPECT_DOUBLE_EQ(*faster.min_pct, -20.0);
  EXPECT_DOUBLE_EQ(*faster.max_pct, -10.0);
  EXPECT_EQ(faster.verdict, "faster");
  // Round 2 ran under more load for both arms: paired, it is still faster.
  EXPECT_EQ(CompareRuns({90, 180}, {100, 200}).verdict, "faster");
  EXPECT_EQ(CompareRuns({97, 105}, {100, 100}).verdict, "within noise");
  EXPECT_EQ(CompareRuns({101, 101.5}, {100, 100}).verdict, "within noise");
  EXPECT_EQ(CompareRuns({110, 105}, {100, 100}).verdict, "slower");
  EXPECT_EQ(CompareRuns({50}, {100}).verdict, "one run");
  EXPECT_FALSE(CompareRuns({}, {100}).pct.has_value());
}

TEST(HashBytesTest, EqualBytesEqualHashesAnyChangeAnother) {
  // 77 bytes: two 32-byte blocks through the lanes and a 13-byte tail.
  std::mt19937_64 rng(7);
  std::vector<uint8_t> bytes(77);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const uint64_t h = HashBytes(bytes.data(), bytes.size(), kHashSeed);
  std::vector<uint8_t> copy = bytes;
  EXPECT_EQ(HashBytes(copy.data(), copy.size(), kHashSeed), h);
  // Every single flipped bit, in the lanes and in the tail.
  std::set<uint64_t> seen = {h};
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      copy[i] ^= static_cast<uint8_t>(1u << bit);
      const uint64_t flipped = HashBytes(copy.data(), copy.size(), kHashSeed);
      EXPECT_NE(flipped, h) << "byte " << i << " bit " << bit;
      seen.insert(flipped);
      copy[i] ^= static_cast<uint8_t>(1u << bit);
    }
  }
  EXPECT_EQ(seen.size(), 1 + 8 * bytes.size());
  // Two 8-byte words swapped: in one block (two lanes), and in one lane
  // (two blocks).
  for (const int other : {8, 32}) {
    copy = bytes;
    std::swap_ranges(copy.begin(), copy.begin() + 8, copy.begin() + other);
    EXPECT_NE(HashBytes(copy.data(), copy.size(), kHashSeed), h) << other;
  }
  // A shorter buffer; the seed chains calls.
  EXPECT_NE(HashBytes(bytes.data(), bytes.size() - 1, kHashSeed), h);
  EXPECT_NE(HashBytes(bytes.data(), bytes.size(), kHashSeed + 1), h);
}

TEST(WriteFileAtomicallyTest, WritesWholeFilesAndNothingOnError) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/atomic.json";
  ASSERT_OK(WriteFileAtomically(path, "{\"a\": 1}\n"));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "{\"a\": 1}\n");
  EXPECT_FALSE(WriteFileAtomically(dir + "/no/such/dir/x.json", "{}").ok());
  EXPECT_THAT(CheckWritableDestination("json", dir + "/no/such/dir/x.json"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("does not exist")));
  EXPECT_OK(CheckWritableDestination("json", path));
  EXPECT_THAT(CheckWritableDestination("json", dir),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is a directory")));
}

class RunBenchTest : public ::testing::Test {
 protected:
  absl::StatusOr<BenchResult> Run(std::vector<std::string> args) {
    absl::StatusOr<Flags> flags = ParseFlags(args);
    if (!flags.ok()) return flags.status();
    std::ostringstream progress;
    return RunBench(*flags, platform::Registry::Global(), progress, false);
  }
};

TEST_F(RunBenchTest, EmulatedRocmShowsTheSkip) {
  ASSERT_OK_AND_ASSIGN(BenchResult r,
                       Run({"--platform=emulated-rocm", "--model=tiny-glm-5.1",
                            "--workloads=1k_c1,1k_c32,8k_c1", "--prompts=2",
                            "--runs=2", "--max_num_batched_tokens=128"}));
  EXPECT_EQ(r.platform.name, "emulated-rocm");
  EXPECT_TRUE(r.platform.emulated);
  EXPECT_EQ(r.platform.arch, "gfx950");
  EXPECT_EQ(r.platform.executes_on, "cpu");
  EXPECT_EQ(r.model, "tiny-glm-5.1");
  ASSERT_EQ(r.workloads.size(), 3u);
  const int indexers = r.indexer_layers;  // 6 main + 1 MTP
  ASSERT_EQ(indexers, 7);
  for (const WorkloadResult& w : r.workloads) {
    SCOPED_TRACE(w.workload.name);
    ASSERT_EQ(w.arms.size(), 3u);
    const ArmResult& main = w.arms[0];
    const ArmResult& skip = w.arms[1];
    const ArmResult& bound = w.arms[2];
    ASSERT_TRUE(main.ran && skip.ran);
    EXPECT_EQ(main.ttft_ms.size(), 2u);
    EXPECT_GT(main.median_ttft_ms, 0);
    EXPECT_EQ(main.indexer_total, indexers * w.steps);
    EXPECT_EQ(main.indexer_scored, main.indexer_total);
    const bool is_long = w.workload.name == "8k_c1";
    // Short: only the MTP layer scores; long: every layer, as on main.
    EXPECT_EQ(skip.indexer_scored, is_long ? indexers * w.steps : w.steps);
    EXPECT_TRUE(w.outputs_equal.value_or(false));
    EXPECT_TRUE(skip.caches_equal.value_or(false));
    EXPECT_TRUE(w.change.pct.has_value());
    EXPECT_TRUE(w.change_cpu.pct.has_value());
    EXPECT_FALSE(w.change.verdict.empty());
    EXPECT_FALSE(main.host_issue_ms.has_value());
    EXPECT_EQ(bound.ran, !is_long);
    if (is_long) {
      EXPECT_THAT(bound.not_run_reason, HasSubstr("sparse path"));
    } else {
      EXPECT_EQ(bound.indexer_scored, 0);
      EXPECT_TRUE(bound.outputs_equal.value_or(false));
      EXPECT_LT(bound.launches_per_step, skip.launches_per_step);
      EXPECT_LT(skip.launches_per_step, main.launches_per_step);
    }
    // Every op: the attention ops and the dense ones around them.
    EXPECT_GT(main.all_launches_per_step, main.launches_per_step);
  }
  // --prompts=2: 1k_c32 is two concurrent prompts of 32 tokens, one step;
  // 8k_c1's 256-token prompts in two chunks of 128 tokens each (both
  // > index_topk 64, so both score).
  EXPECT_EQ(r.workloads[1].workload.concurrency, 2);
  EXPECT_EQ(r.workloads[1].steps, 1);
  EXPECT_EQ(r.workloads[2].steps, 4);

  const std::string table = FormatTable(r);
  EXPECT_THAT(table, HasSubstr("EMULATED"));
  EXPECT_THAT(table, HasSubstr("no_indexer*"));
  const std::string json = ToJson(r);
  EXPECT_THAT(json, HasSubstr("\"emulated\": true"));
  EXPECT_THAT(json, HasSubstr("\"host_issue_ms\": null"));
  EXPECT_THAT(json, HasSubstr("\"op_times\": null"));
}

// --op_times: one more step per arm with every op timed; on a short
// workload the skip arm's scoring is the MTP layer's alone, so its share is
// smaller than main's, and the bound scores nothing.
TEST_F(RunBenchTest, OpTimesShowTheScoringShare) {
  ASSERT_OK_AND_ASSIGN(
      BenchResult r,
      Run({"--platform=emulated-rocm", "--model=tiny-glm-5.1",
           "--workloads=1k_c1", "--prompts=1", "--runs=1", "--op_times=true"}));
  ASSERT_EQ(r.workloads.size(), 1u);
  const std::vector<ArmResult>& arms = r.workloads[0].arms;
  ASSERT_EQ(arms.size(), 3u);
  for (const ArmResult& a : arms) {
    SCOPED_TRACE(a.arm);
    ASSERT_TRUE(a.profiled_step_ms.has_value());
    ASSERT_TRUE(a.scoring_ms.has_value());
    EXPECT_GT(*a.profiled_step_ms, 0);
    EXPECT_LE(*a.scoring_ms, *a.profiled_step_ms);
    double sum = 0;
    for (const auto& [op, ms] : a.op_ms) {
      EXPECT_GT(ms, 0) << op;
      sum += ms;
    }
    EXPECT_NEAR(sum, *a.profiled_step_ms, 1e-9 * sum + 1e-12);
  }
  auto has_op = [](const ArmResult& a, const std::string& name) {
    for (const auto& [op, ms] : a.op_ms) {
      if (op == name) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_op(arms[0], "indexer_logits"));
  EXPECT_TRUE(has_op(arms[0], "dense_mha_prefill"));
  EXPECT_GT(*arms[0].scoring_ms, 0);
  EXPECT_TRUE(has_op(arms[1], "indexer_logits"));  // the MTP layer scores
  EXPECT_FALSE(has_op(arms[2], "indexer_logits"));
  EXPECT_EQ(*arms[2].scoring_ms, 0);
  EXPECT_THAT(FormatTable(r), HasSubstr("indexer scoring"));
  EXPECT_THAT(ToJson(r), HasSubstr("\"indexer_scoring_ms\": "));
}

TEST_F(RunBenchTest, ConfigurationErrorsComeBeforeAnyRun) {
  EXPECT_THAT(
      Run({"--model=no-such-model"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--model")));
  EXPECT_THAT(
      Run({"--platform=emulated-rocm", "--arch=gfx1"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--arch")));
  EXPECT_THAT(Run({"--platform=emulated-rocm", "--num_blocks=2"}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("does not fit in the caches")));
  EXPECT_THAT(
      Run({"--platform=emulated-rocm", "--workloads=1k_c32", "--num_blocks=7"}),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("workload 1k_c32 does not fit in the caches: "
                         "it needs 8 blocks of 64 tokens")));
}

// GLM-5.1's 78 layers + MTP of bf16 weights and their caches, three arms:
// about 80 GiB of (on the CPU) host memory. A clear error before anything is
// allocated, not the OOM killer.
TEST_F(RunBenchTest, APresetTooLargeForTheMachineIsAClearError) {
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<double>(sysconf(_SC_PAGESIZE));
  if (physical > 90.0 * (1 << 30)) {
    GTEST_SKIP() << "this machine could hold GLM-5.1's three arms";
  }
  EXPECT_THAT(Run({"--platform=emulated-rocm", "--model=glm-5.1"}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("of host memory")));
}

TEST_F(RunBenchTest, AGpuPlatformWithoutADeviceIsAClearError) {
  for (const char* id : {"rocm", "cuda"}) {
    auto p = platform::Registry::Global().GetPlatform(id);
    ASSERT_TRUE(p.ok()) << p.status();
    auto devices = p->ProbeDevices();
    if (devices.ok() && devices->device_count > 0) continue;
    EXPECT_THAT(Run({std::string("--platform=") + id}),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr("no " + std::string(id) + " device")));
  }
}

}  // namespace
}  // namespace dsa::prefill_bench
