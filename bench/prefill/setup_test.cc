// The checks before a run: the defaults a run derives (step size, cache
// blocks, activations), and each configuration error, named, before any
// model is built; the memory check on a budget the test chooses.
#include "bench/prefill/setup.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attention/dtypes/dtype.h"
#include "bench/prefill/flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<BenchSetup> SetupFrom(std::vector<std::string> args) {
  absl::StatusOr<Flags> flags = ParseFlags(args);
  if (!flags.ok()) return flags.status();
  return MakeSetup(*flags, platform::Registry::Global());
}

TEST(SetupTest, TheDefaultsScaleWithThePreset) {
  ASSERT_OK_AND_ASSIGN(BenchSetup s, SetupFrom({"--platform=emulated-rocm"}));
  EXPECT_EQ(s.config.name(), "tiny-glm-5.1");  // the CPU's default
  EXPECT_EQ(s.platform.info.name, "emulated-rocm");
  ASSERT_EQ(s.workloads.size(), 4u);
  ASSERT_EQ(s.schedules.size(), 4u);
  // 8192 tokens a step at index_topk 2048 is 256 at 64.
  EXPECT_EQ(s.step_tokens, 256);
  // The caches hold the largest peak: 1k_c32's 32 prompts of 32 tokens, in
  // steps of 256 tokens, eight resident at a time, a block each.
  int64_t peak = 0;
  for (const Schedule& schedule : s.schedules) {
    peak = std::max(peak, schedule.peak_blocks);
  }
  EXPECT_EQ(s.num_blocks, peak);
  EXPECT_EQ(s.num_blocks, 8);
  EXPECT_EQ(s.options.num_blocks, s.num_blocks);
  EXPECT_EQ(s.options.block_size, 64);
  EXPECT_EQ(s.options.max_model_len, 256);  // 8k_c1 at this scale
  EXPECT_EQ(s.options.max_num_batched_tokens, 256);
  EXPECT_FALSE(s.options.no_indexer);  // the arms set it
  EXPECT_EQ(s.options.activation_dtype, attention::DType::kFloat32);
  EXPECT_FALSE(s.options.fp8_latent_cache);
  EXPECT_EQ(s.weights, "bfloat16");  // a preset's default
  EXPECT_EQ(s.options.weight_dtype, attention::DType::kBFloat16);
}

TEST(SetupTest, FlagsOverrideTheDefaults) {
  ASSERT_OK_AND_ASSIGN(
      BenchSetup s, SetupFrom({"--platform=emulated-rocm", "--workloads=1k_c1",
                               "--max_num_batched_tokens=16", "--block_size=8",
                               "--num_blocks=50", "--threads=1", "--prompts=3",
                               "--kv_cache_dtype=fp8", "--weights=fp8"}));
  ASSERT_EQ(s.workloads.size(), 1u);
  EXPECT_EQ(s.weights, "fp8");
  EXPECT_EQ(s.options.weight_dtype, attention::DType::kFloat8E4m3fn);
  EXPECT_EQ(s.workloads[0].prompts, 3);
  EXPECT_EQ(s.step_tokens, 16);
  EXPECT_EQ(s.num_blocks, 50);
  EXPECT_EQ(s.options.block_size, 8);
  EXPECT_EQ(s.options.num_threads, 1);
  EXPECT_TRUE(s.options.fp8_latent_cache);
  // 32-token prompts in 16-token chunks: two steps each.
  EXPECT_EQ(s.schedules[0].steps.size(), 6u);
}

TEST(SetupTest, ConfigurationErrorsComeBeforeAnyRun) {
  EXPECT_THAT(
      SetupFrom({"--model=no-such-model"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--model")));
  EXPECT_THAT(
      SetupFrom({"--platform=emulated-rocm", "--arch=gfx1"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--arch")));
  EXPECT_THAT(SetupFrom({"--platform=emulated-rocm", "--num_blocks=2"}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("does not fit in the caches")));
  EXPECT_THAT(SetupFrom({"--platform=emulated-rocm", "--workloads=1k_c32",
                         "--num_blocks=7"}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("workload 1k_c32 does not fit in the caches: "
                                 "it needs 8 blocks of 64 tokens")));
  EXPECT_OK(SetupFrom({"--platform=emulated-rocm", "--workloads=1k_c32",
                       "--num_blocks=8"})
                .status());
}

// tiny-glm-5.1's textproto with `fields` replaced ({"field: old", "field:
// new"}), written to a file; its path.
std::string EditedPreset(
    const std::string& name,
    const std::vector<std::pair<std::string, std::string>>& fields) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  EXPECT_NE(srcdir, nullptr);
  std::ifstream in(std::string(srcdir == nullptr ? "" : srcdir) +
                   "/dsa/model/deepseek_v32/presets/tiny-glm-5.1.textproto");
  std::stringstream text;
  text << in.rdbuf();
  std::string preset = text.str();
  for (const auto& [from, to] : fields) {
    const size_t at = preset.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) preset.replace(at, from.size(), to);
  }
  const std::string path = ::testing::TempDir() + "/" + name + ".textproto";
  std::ofstream(path) << preset;
  return path;
}

// A preset whose max_position_embeddings is below 8k_c1's scaled length.
TEST(SetupTest, APromptLongerThanThePresetsPositionsIsAnError) {
  const std::string path = EditedPreset(
      "short",
      {{"max_position_embeddings: 4096", "max_position_embeddings: 200"}});
  EXPECT_THAT(
      SetupFrom({"--platform=emulated-rocm", "--model=" + path}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("workload 8k_c1: prompts of 256 tokens exceed "
                         "tiny-glm-5.1's max_position_embeddings 200")));
  EXPECT_OK(SetupFrom({"--platform=emulated-rocm", "--model=" + path,
                       "--workloads=1k_c1,1900_c1"})
                .status());
}

// GLM-5.1's 78 layers + MTP of bf16 weights and their caches, three arms:
// about 80 GiB of (on the CPU) host memory. A clear error before anything is
// allocated, not the OOM killer.
TEST(SetupTest, APresetTooLargeForTheMachineIsAClearError) {
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<double>(sysconf(_SC_PAGESIZE));
  if (physical > 90.0 * (1 << 30)) {
    GTEST_SKIP() << "this machine could hold GLM-5.1's three arms";
  }
  EXPECT_THAT(SetupFrom({"--platform=emulated-rocm", "--model=glm-5.1"}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("of host memory")));
}

// index_topk 2^30 and max_position_embeddings 2^31-1 are valid, but the
// workloads scale with index_topk: steps of 2^32 tokens over prompts of 2^29
// need an indexer workspace of 2^63 bytes. Refused with its size (past int64
// here), not wrapped into a small number that fits, nor a bad_alloc.
TEST(SetupTest, AModelPastInt64IsRefusedWithItsSize) {
  const std::string path = EditedPreset(
      "huge_topk",
      {{"max_position_embeddings: 4096", "max_position_embeddings: 2147483647"},
       {"index_topk: 64", "index_topk: 1073741824"}});
  EXPECT_THAT(
      SetupFrom(
          {"--platform=emulated-rocm", "--model=" + path, "--workloads=1k_c1"}),
      StatusIs(absl::StatusCode::kResourceExhausted,
               "tiny-glm-5.1 with 3 arms needs more than 2^63 bytes (more "
               "than 64 bits count) of host memory for its weights, caches "
               "and workspace: use a smaller model, --num_blocks or "
               "--max_num_batched_tokens"));
  // Smaller steps are countable, and still far more than any machine: the
  // size, not a wrapped one (of it, 2^47 bytes of indexer workspace, 2^48 of
  // top-k and 2^41 of block table for steps of 2^16 tokens).
  EXPECT_THAT(
      SetupFrom({"--platform=emulated-rocm", "--model=" + path,
                 "--workloads=1k_c1", "--max_num_batched_tokens=65536",
                 "--arms=main", "--prompts=1"}),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("tiny-glm-5.1 with 1 arm needs about 387.4 TiB of "
                         "host memory")));
}

TEST(CheckMemoryTest, HostMemoryOnTheCpuDeviceMemoryOnAGpu) {
  PlatformInfo cpu;
  cpu.name = "emulated-rocm";
  cpu.executes_on = "cpu";
  PlatformInfo gpu;
  gpu.name = "cuda";
  gpu.executes_on = "cuda";
  constexpr int64_t kGib = int64_t{1} << 30;
  const MemoryBudget budget{10 * kGib, 20 * kGib};
  // 90% of the budget fits; more does not.
  EXPECT_OK(CheckMemory("m", cpu, 3, 3 * kGib, budget));
  EXPECT_THAT(
      CheckMemory("m", cpu, 3, 4 * kGib, budget),
      StatusIs(absl::StatusCode::kResourceExhausted,
               "m with 3 arms needs about 12.0 GiB of host memory (weights, "
               "caches and workspace), 10.0 GiB are available; on the CPU use "
               "a small preset (the default tiny-glm-5.1) or fewer --arms"));
  EXPECT_THAT(CheckMemory("m", cpu, 1, 10 * kGib, budget),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("m with 1 arm needs")));
  // On a GPU the models live in device memory.
  EXPECT_OK(CheckMemory("m", gpu, 3, 6 * kGib, budget));
  EXPECT_THAT(
      CheckMemory("m", gpu, 3, 7 * kGib, budget),
      StatusIs(absl::StatusCode::kResourceExhausted,
               "the workloads need about 21.0 GiB of cuda device memory for 3 "
               "arms' weights, caches and workspace; the device has 20.0 GiB: "
               "use fewer --arms, --num_blocks or --max_num_batched_tokens"));
  // Past int64 is refused whatever the budget, on the CPU and on a GPU.
  EXPECT_THAT(
      CheckMemory("m", cpu, 3, int64_t{1} << 62, MemoryBudget{}),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("m with 3 arms needs more than 2^63 bytes (more than "
                         "64 bits count) of host memory")));
  EXPECT_THAT(CheckMemory("m", gpu, 1, CheckedSize::Overflowed(), budget),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("of cuda device memory")));
  // An unknown budget refuses nothing.
  EXPECT_OK(CheckMemory("m", cpu, 3, 1000 * kGib, MemoryBudget{}));
  EXPECT_OK(CheckMemory("m", gpu, 3, 1000 * kGib, MemoryBudget{}));
}

}  // namespace
}  // namespace dsa::prefill_bench
