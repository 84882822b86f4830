// Small runs of the whole stack on the emulated ROCm platform, whose figures
// show the skip: the MTP layer alone scores on short prefills, every layer
// on the long one, outputs and caches equal to the bit; --op_times' shares;
// the arms in the order given, and without the reference.
#include "bench/prefill/run.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/cpu/registration.h"
#include "bench/prefill/flags.h"
#include "bench/prefill/report/json.h"
#include "bench/prefill/report/table.h"
#include "bench/prefill/result.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/cpu/cpu_platform.h"
#include "platform/registry.h"
#include "platform/rocm/registration.h"
#include "platform/runtime_test_util.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

class RunBenchTest : public ::testing::Test {
 protected:
  absl::StatusOr<BenchResult> Run(std::vector<std::string> args) {
    absl::StatusOr<Flags> flags = ParseFlags(args);
    if (!flags.ok()) return flags.status();
    progress_.str("");
    return RunBench(*flags, platform::Registry::Global(), progress_, false);
  }
  std::ostringstream progress_;
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
      EXPECT_FALSE(bound.caches_equal.has_value());  // it writes no keys
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
  // A progress line per round: 3 workloads x 2 runs, after the setup.
  EXPECT_THAT(progress_.str(),
              HasSubstr("[setup] building the no_indexer arm"));
  EXPECT_THAT(progress_.str(), HasSubstr("[6/6] 8k_c1 run 2/2: median TTFT "));

  const std::string table = FormatTable(r);
  EXPECT_THAT(table, HasSubstr("EMULATED"));
  EXPECT_THAT(table, HasSubstr("no_indexer*"));
  ASSERT_OK_AND_ASSIGN(BenchResultJson json, ToProto(r));
  EXPECT_TRUE(json.platform().emulated());
  const BenchResultJson::Arm& main_json = json.workloads(0).arms().main();
  EXPECT_FALSE(main_json.has_host_issue_ms());  // null: no GPU
  EXPECT_FALSE(main_json.has_op_times());       // null: no --op_times
  EXPECT_EQ(main_json.indexer_calls().scored(),
            r.workloads[0].arms[0].indexer_scored);
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
    SCOPED_TRACE(a.spec->name);
    ASSERT_TRUE(a.op_times.has_value());
    const double step = a.op_times->ms.total();
    EXPECT_GT(step, 0);
    EXPECT_LE(a.op_times->ms.indexer_scoring, step);
    double sum = 0;
    for (const auto& [op, ms] : OpsThatRan(a.op_times->ms)) {
      EXPECT_GT(ms, 0) << op;
      sum += ms;
    }
    EXPECT_NEAR(sum, step, 1e-9 * sum + 1e-12);
  }
  auto has_op = [](const ArmResult& a, const std::string& name) {
    for (const auto& [op, ms] : OpsThatRan(a.op_times->ms)) {
      if (op == name) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_op(arms[0], "indexer_logits"));
  EXPECT_TRUE(has_op(arms[0], "dense_mha_prefill"));
  EXPECT_GT(arms[0].op_times->ms.indexer_scoring, 0);
  EXPECT_TRUE(has_op(arms[1], "indexer_logits"));  // the MTP layer scores
  EXPECT_FALSE(has_op(arms[2], "indexer_logits"));
  EXPECT_EQ(arms[2].op_times->ms.indexer_scoring, 0);
  EXPECT_THAT(FormatTable(r), HasSubstr("indexer scoring"));
  ASSERT_OK_AND_ASSIGN(std::string json, ToJson(r));
  EXPECT_THAT(json, HasSubstr("\"indexer_scoring_ms\": "));
}

// --op_clock=host: the profiled step's ops timed around their calls alone;
// their times fall inside the step's host issue, every kind that ran has
// its calls, and the table gives the time per call.
TEST_F(RunBenchTest, HostOpClockGivesEachOpsHostShareAndCalls) {
  ASSERT_OK_AND_ASSIGN(
      BenchResult r,
      Run({"--platform=emulated-rocm", "--model=tiny-glm-5.1",
           "--workloads=1k_c1", "--prompts=1", "--runs=1", "--arms=main,skip",
           "--op_times=true", "--op_clock=host"}));
  EXPECT_EQ(r.op_clock, "host");
  ASSERT_EQ(r.workloads.size(), 1u);
  for (const ArmResult& a : r.workloads[0].arms) {
    SCOPED_TRACE(a.spec->name);
    ASSERT_TRUE(a.op_times.has_value());
    const OpProfile& p = *a.op_times;
    EXPECT_GT(p.ms.total(), 0);
    EXPECT_LE(p.ms.total(), p.host_issue_ms);
    EXPECT_GT(p.calls.total(), 0);
    for (const auto& [op, ms] : OpsThatRan(p.ms)) {
      EXPECT_GT(CallsOf(p.calls, op), 0) << op;
    }
  }
  const std::string table = FormatTable(r);
  EXPECT_THAT(table, HasSubstr("on the host clock"));
  EXPECT_THAT(table, HasSubstr(" us)"));
  EXPECT_THAT(table, HasSubstr(" calls: "));
  ASSERT_OK_AND_ASSIGN(std::string json, ToJson(r));
  EXPECT_THAT(json, HasSubstr("\"clock\": \"host\""));
  EXPECT_THAT(json, HasSubstr("\"calls\": {"));
  EXPECT_THAT(json, HasSubstr("\"step_host_issue_ms\": "));
}

// The arms run in the order given; the candidate is compared with the
// reference wherever it stands.
// The seed's --kv-cache-dtype fp8: the arms on an fp8_ds_mla latent cache,
// the short path (dense, scoring skipped) and the long one (sparse over the
// fp8 latent), outputs and caches still equal to the bit between arms.
TEST_F(RunBenchTest, Fp8LatentCache) {
  ASSERT_OK_AND_ASSIGN(
      BenchResult r, Run({"--platform=emulated-rocm", "--model=tiny-glm-5.1",
                          "--workloads=1k_c1,8k_c1", "--prompts=1", "--runs=1",
                          "--arms=main,skip", "--kv_cache_dtype=fp8"}));
  EXPECT_EQ(r.kv_cache_dtype, "fp8");
  ASSERT_EQ(r.workloads.size(), 2u);
  for (const WorkloadResult& w : r.workloads) {
    SCOPED_TRACE(w.workload.name);
    EXPECT_TRUE(w.outputs_equal.value_or(false));
    EXPECT_TRUE(w.arms[1].caches_equal.value_or(false));
  }
  EXPECT_THAT(FormatTable(r), HasSubstr("fp8 latent cache"));
  ASSERT_OK_AND_ASSIGN(BenchResultJson json, ToProto(r));
  EXPECT_EQ(json.kv_cache_dtype(), "fp8");
}

// --tp on the CPU: every rank a thread, the collectives over host memory.
// The arms still equal to the bit, every rank's outputs equal to rank 0's,
// replicated or row-sharded indexer alike.
TEST_F(RunBenchTest, TensorParallelRanksOnTheHost) {
  for (const char* indexer : {"replicated", "rows"}) {
    SCOPED_TRACE(indexer);
    ASSERT_OK_AND_ASSIGN(
        BenchResult r, Run({"--platform=emulated-rocm", "--model=tiny-glm-5.1",
                            "--workloads=1k_c1,8k_c1", "--prompts=1",
                            "--runs=1", "--arms=main,skip", "--tp=2",
                            absl::StrCat("--indexer_tp=", indexer)}));
    EXPECT_EQ(r.tp, 2);
    EXPECT_EQ(r.ranks_run, 2);
    EXPECT_THAT(r.tp_note, HasSubstr("2 heads per rank"));
    EXPECT_THAT(r.tp_note, HasSubstr("every rank a thread on the host"));
    for (const WorkloadResult& w : r.workloads) {
      SCOPED_TRACE(w.workload.name);
      EXPECT_TRUE(w.outputs_equal.value_or(false));
      for (const ArmResult& a : w.arms) {
        EXPECT_TRUE(a.ranks_agree.value_or(false)) << a.spec->name;
      }
    }
    EXPECT_THAT(FormatTable(r), HasSubstr("ranks equal"));
    ASSERT_OK_AND_ASSIGN(BenchResultJson json, ToProto(r));
    EXPECT_EQ(json.tensor_parallel().ranks(), 2);
    EXPECT_EQ(json.tensor_parallel().indexer(), indexer);
    EXPECT_EQ(json.tensor_parallel().ranks_run(), 2);
    EXPECT_TRUE(json.workloads(0).arms().main().ranks_equal());
  }
  // 3 ranks do not divide tiny-glm-5.1's 4 heads.
  EXPECT_THAT(Run({"--platform=emulated-rocm", "--model=tiny-glm-5.1",
                   "--workloads=1k_c1", "--tp=3"})
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("4 attention heads, which 3 ranks do not "
                                 "divide")));
}

// The seed's FP8 weights: the random bf16 weights quantised per 128 x 128
// block at load, every projection a W8A8 product; the arms still compare to
// the bit, and the table and the JSON say which weights ran.
TEST_F(RunBenchTest, Fp8Weights) {
  ASSERT_OK_AND_ASSIGN(
      BenchResult r,
      Run({"--platform=emulated-rocm", "--model=tiny-glm-5.1",
           "--workloads=1k_c1", "--prompts=1", "--runs=1", "--arms=main,skip",
           "--weights=fp8", "--kv_cache_dtype=fp8"}));
  EXPECT_EQ(r.weights, "fp8");
  ASSERT_EQ(r.workloads.size(), 1u);
  EXPECT_TRUE(r.workloads[0].outputs_equal.value_or(false));
  EXPECT_TRUE(r.workloads[0].arms[1].caches_equal.value_or(false));
  EXPECT_THAT(FormatTable(r),
              HasSubstr("fp8 latent cache, fp8 weights; 1 run per arm"));
  ASSERT_OK_AND_ASSIGN(BenchResultJson json, ToProto(r));
  EXPECT_EQ(json.weights(), "fp8");
  // A preset runs bf16 weights unless told.
  ASSERT_OK_AND_ASSIGN(BenchResult b,
                       Run({"--platform=emulated-rocm", "--workloads=1k_c1",
                            "--prompts=1", "--runs=1", "--arms=main"}));
  EXPECT_EQ(b.weights, "bfloat16");
}

TEST_F(RunBenchTest, ArmsInTheOrderGiven) {
  ASSERT_OK_AND_ASSIGN(BenchResult r,
                       Run({"--platform=emulated-rocm", "--workloads=1k_c1",
                            "--prompts=1", "--runs=2", "--arms=skip,main"}));
  const WorkloadResult& w = r.workloads[0];
  ASSERT_EQ(w.arms.size(), 2u);
  EXPECT_STREQ(w.arms[0].spec->name, "skip");
  EXPECT_STREQ(w.arms[1].spec->name, "main");
  EXPECT_TRUE(w.change.pct.has_value());
  EXPECT_TRUE(w.outputs_equal.value_or(false));
  EXPECT_FALSE(w.bound_change_pct.has_value());  // no bound ran
  EXPECT_EQ(w.arms[0].indexer_scored, w.steps);  // the MTP layer alone
  EXPECT_THAT(progress_.str(), HasSubstr("median TTFT skip "));
}

// Without the reference arm nothing is compared: no change, no verdict, no
// "to the bit".
TEST_F(RunBenchTest, WithoutTheReferenceNothingIsCompared) {
  ASSERT_OK_AND_ASSIGN(BenchResult r,
                       Run({"--platform=emulated-rocm", "--workloads=1k_c1",
                            "--prompts=1", "--runs=1", "--arms=skip"}));
  const WorkloadResult& w = r.workloads[0];
  ASSERT_EQ(w.arms.size(), 1u);
  EXPECT_TRUE(w.arms[0].ran);
  EXPECT_FALSE(w.arms[0].outputs_equal.has_value());
  EXPECT_FALSE(w.change.pct.has_value());
  EXPECT_FALSE(w.outputs_equal.has_value());
  EXPECT_THAT(FormatTable(r), Not(HasSubstr("reference")));
}

TEST_F(RunBenchTest, ConfigurationErrorsComeBeforeAnyRun) {
  EXPECT_THAT(
      Run({"--model=no-such-model"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--model")));
  EXPECT_THAT(
      Run({"--platform=emulated-rocm", "--workloads=1k_c32", "--num_blocks=7"}),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("workload 1k_c32 does not fit in the caches: "
                         "it needs 8 blocks of 64 tokens")));
  EXPECT_EQ(progress_.str(), "");  // not a model built
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

// A device whose memory runs out is an error the binary reports (status 2:
// ResourceExhausted is a configuration the user can change), not a crash:
// here the CPU platform reports 1 MiB free, and the arms' models are refused
// before anything is allocated, with their sizes.
uint64_t LimitedFreeBytes() { return uint64_t{1} << 20; }
DsaStatusCode LimitedMemory(uint64_t* free, uint64_t* total, char*, size_t) {
  *free = LimitedFreeBytes();
  *total = uint64_t{2} << 30;
  return DSA_STATUS_OK;
}

TEST_F(RunBenchTest, ADeviceOutOfMemoryIsAnErrorNotACrash) {
  platform::Registry registry;
  DsaPlatformDescriptor cpu =
      dsa::testing::RegisteredPlatform(platform::CpuPlatformPluginApi());
  cpu.device_memory_info = &LimitedMemory;
  platform::RegistrationBatch batch;
  batch.plugin_name = "limited_memory";
  batch.platforms = {cpu};
  ASSERT_OK(registry.Register(batch));
  ASSERT_OK(attention::cpu::RegisterCpuAttentionKernels(registry));
  ASSERT_OK(platform::RegisterRocmPlatform(registry));
  ASSERT_OK_AND_ASSIGN(
      Flags flags,
      ParseFlags({"--platform=emulated-rocm", "--model=tiny-glm-5.1",
                  "--workloads=1k_c1", "--prompts=1", "--runs=1"}));
  EXPECT_THAT(RunBench(flags, registry, progress_, false),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::AllOf(HasSubstr("model tiny-glm-5.1"),
                                        HasSubstr("more of device memory"),
                                        HasSubstr("1.00 MiB (1048576 bytes) "
                                                  "free of 2.00 GiB"))));
}

}  // namespace
}  // namespace dsa::prefill_bench
