// What a profile run reaches of the GPU kernels' scratch arenas
// (attention/gpu/device/scratch_arena.h): a profile run
// (DeepseekV32Model::ProfileRun) reserves the indexer's workspace and top-k
// for the largest step and runs the attention ops once at the largest step's
// shapes (DeepseekV32Model::ProfileScratch), so the arenas grow there, and
// no later step up to max_num_batched_tokens allocates: not the largest
// dense prefill, not a smaller one, not a dense or a sparse chunk after
// cached context, not a decode.
//
// Here on "emulated-rocm" (ROCm's capabilities, the CPU kernels): the op
// calls counted (platform/fault_injection.h's kOpCall site). The gpu-tagged
// twin (DSA_PROFILE_TEST_ON_CUDA) counts the CUDA kernels' stream-ordered
// allocations, the arenas' growth, too; it skips without a device.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/model_config.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/paged_cache.h"
#include "platform/fault_injection.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

#ifdef DSA_PROFILE_TEST_ON_CUDA
#define DSA_PROFILE_TEST_PLATFORM "cuda"
#else
#define DSA_PROFILE_TEST_PLATFORM "emulated-rocm"
#endif

namespace dsa::model::deepseek_v32 {
namespace {

using platform::FaultInjector;
using platform::FaultSite;

constexpr char kPlatform[] = DSA_PROFILE_TEST_PLATFORM;
constexpr bool kEmulated = std::string_view(kPlatform) == "emulated-rocm";

class ProfileRunScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    platform::Registry& registry = platform::Registry::Global();
    const std::string exec_id = kEmulated ? "cpu" : kPlatform;
    absl::StatusOr<platform::Platform> exec = registry.GetPlatform(exec_id);
    if (!exec.ok()) GTEST_SKIP() << exec.status();
    absl::StatusOr<platform::DeviceInfo> devices = exec->ProbeDevices();
    if (!devices.ok() || devices->device_count == 0) {
      GTEST_SKIP() << kPlatform << ": no device";
    }
    absl::StatusOr<AttentionKernels> kernels =
        AttentionKernels::Load(registry, exec_id);
    if (!kernels.ok()) GTEST_SKIP() << kernels.status();
    absl::StatusOr<platform::PlatformCapabilities> caps;
    if (kEmulated) {
      absl::StatusOr<platform::Platform> rocm = registry.GetPlatform("rocm");
      ASSERT_OK(rocm.status());
      caps = rocm->CapabilitiesForArch("gfx950");
    } else {
      caps = exec->Capabilities();
    }
    ASSERT_OK(caps.status());
    absl::StatusOr<ModelConfig> config = LoadModelConfig("tiny-glm-5.1");
    ASSERT_OK(config.status());
    hidden_size_ = config->proto().hidden_size();
    absl::StatusOr<LayerPlanner> planner =
        LayerPlanner::Create(*config, *caps, {});
    ASSERT_OK(planner.status());
    RuntimeOptions options;
    options.block_size = 16;
    options.num_blocks = 64;
    options.max_model_len = 256;
    options.max_num_batched_tokens = kMaxTokens;
    options.num_threads = 1;
    options.activation_dtype =
        kEmulated ? attention::DType::kFloat32 : attention::DType::kBFloat16;
    absl::StatusOr<std::unique_ptr<DeepseekV32Model>> model =
        DeepseekV32Model::Create(std::move(*planner), *exec, *kernels, options,
                                 /*seed=*/7);
    ASSERT_OK(model.status());
    model_ = std::move(*model);
  }

  std::vector<float> Hidden(const std::vector<StepRequest>& step) const {
    int64_t tokens = 0;
    for (const StepRequest& r : step) tokens += r.num_new_tokens;
    std::mt19937 rng(11);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(tokens * hidden_size_));
    for (float& v : x) v = dist(rng);
    return x;
  }

  static constexpr int64_t kMaxTokens = 48;
  int64_t hidden_size_ = 0;
  std::unique_ptr<DeepseekV32Model> model_;
};

TEST_F(ProfileRunScratchTest,
       TheProfileRunGrowsTheScratchStepsAllocateNothing) {
  {
    FaultInjector counting;  // counts, fails nothing
    ASSERT_OK(model_->ProfileRun({}).status());
    // One dense prefill, sparse MLA over 48 rows and 1, 2, ..., 32.
    EXPECT_EQ(counting.calls(FaultSite::kOpCall), 8);
    if (!kEmulated) {
      std::printf(
          "profile run: %lld stream-ordered allocations\n",
          static_cast<long long>(counting.calls(FaultSite::kStreamAlloc)));
    }
  }
  // The largest step (dense prefills, each below index_topk, of
  // max_num_batched_tokens in all), smaller and equal ones, a dense chunk
  // after cached context (30 + 30 keys: more keys than the step's tokens,
  // within index_topk 64), a sparse chunk after cached context (40 + 30 keys
  // > index_topk) and decodes.
  const std::vector<std::vector<StepRequest>> steps = {
      {{1, 0, kMaxTokens / 2}, {2, 0, kMaxTokens / 2}},
      {{3, 0, kMaxTokens / 2}, {4, 0, kMaxTokens / 2}},
      {{5, 0, 7}},
      {{9, 0, 30}},
      {{9, 30, 30}},
      {{6, 0, 40}},
      {{6, 40, 30}},
      {{6, 70, 1}, {5, 7, 1}, {3, 24, 1}},
      {{7, 0, kMaxTokens / 3}, {8, 0, kMaxTokens / 3}}};
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "step " << i);
    FaultInjector counting;
    ASSERT_OK(model_->Step({}, steps[i], Hidden(steps[i])).status());
    EXPECT_GT(counting.calls(FaultSite::kOpCall), 0);
    EXPECT_EQ(counting.calls(FaultSite::kStreamAlloc), 0);
  }
}

// A dense step past the profile run's shapes (two prompts continued in one
// step: 2 x (24 + 24) keys, more than the profile's 64) grows the dense
// prefill's scratch in the reservation before its first layer: with every
// stream-ordered allocation failing, the step fails there, naming it, and
// writes nothing; without the fault the same step runs, and again it
// allocates nothing.
TEST_F(ProfileRunScratchTest, ADenseStepPastTheProfileGrowsBeforeItWrites) {
  ASSERT_OK(model_->ProfileRun({}).status());
  const std::vector<StepRequest> first = {{1, 0, 24}, {2, 0, 24}};
  ASSERT_OK(model_->Step({}, first, Hidden(first)).status());
  const std::vector<StepRequest> continued = {{1, 24, 24}, {2, 24, 24}};
  absl::StatusOr<std::vector<uint8_t>> latent = model_->ReadLatentCache(0);
  ASSERT_OK(latent.status());
  int64_t grew = 0;
  {
    platform::FaultPlan plan;
    plan.fail_at = 1;
    plan.persistent = true;
    plan.sites = platform::FaultSiteBit(FaultSite::kStreamAlloc);
    FaultInjector no_growth(plan);
    absl::StatusOr<StepOutput> failed =
        model_->Step({}, continued, Hidden(continued));
    grew = no_growth.calls();
    if (grew > 0) {
      EXPECT_THAT(
          failed.status().message(),
          ::testing::HasSubstr("step: reserving the dense prefill's scratch"));
      absl::StatusOr<std::vector<uint8_t>> after = model_->ReadLatentCache(0);
      ASSERT_OK(after.status());
      EXPECT_EQ(*after, *latent);
      EXPECT_EQ(model_->block_tables().cached_tokens(1), 24);
    } else {
      // Nothing to grow (the emulated platform's CPU kernels have no arena).
      ASSERT_OK(failed.status());
    }
  }
  if (grew > 0) {
    ASSERT_OK(model_->Step({}, continued, Hidden(continued)).status());
  }
  FaultInjector counting;
  const std::vector<StepRequest> again = {{3, 0, 24}, {4, 0, 24}};
  ASSERT_OK(model_->Step({}, again, Hidden(again)).status());
  const std::vector<StepRequest> again_continued = {{3, 24, 24}, {4, 24, 24}};
  ASSERT_OK(
      model_->Step({}, again_continued, Hidden(again_continued)).status());
  EXPECT_EQ(counting.calls(FaultSite::kStreamAlloc), 0);
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
