// What the model runner's tests share: kernels called through counting
// wrappers around the registered ones (so that "never calls scoring" is
// observed, not assumed), fresh random hidden states, the platforms the
// stack runs on, and the fixtures that make models on one of them.
#ifndef DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_TEST_UTIL_H_
#define DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/forward_context.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/model_config.h"
#include "model/deepseek_v32/model_runner.h"
#include "platform/capabilities.h"
#include "platform/registry.h"

namespace dsa::model::deepseek_v32 {

// Calls of each op, counted by C entry points wrapped around the real
// kernels' (the way a probe in an engine would interpose on a plugin).
struct CallCounter {
  static inline AttentionKernels real;
  static inline OpCallCounts calls;
};

template <class Op, attention::Kernel<Op> AttentionKernels::*kMember,
          int OpCallCounts::*kCount>
DsaStatusCode Counting(const DsaExecutionContext* ctx,
                       const typename Op::CArgs* args, char* error,
                       size_t error_size) {
  ++(CallCounter::calls.*kCount);
  return (CallCounter::real.*kMember).c_fn()(ctx, args, error, error_size);
}

inline AttentionKernels CountingKernels() {
  AttentionKernels k;
#define DSA_COUNTING_KERNEL(CxxName, field)                   \
  k.field = attention::Kernel<attention::CxxName>(            \
      &Counting<attention::CxxName, &AttentionKernels::field, \
                &OpCallCounts::field>);
  DSA_COUNTING_KERNEL(IndexerKWrite, indexer_k_write)
  DSA_COUNTING_KERNEL(IndexerQ, indexer_q)
  DSA_COUNTING_KERNEL(IndexerLogits, indexer_logits)
  DSA_COUNTING_KERNEL(IndexerTopK, indexer_topk)
  DSA_COUNTING_KERNEL(MlaCacheWrite, mla_cache_write)
  DSA_COUNTING_KERNEL(SparseMla, sparse_mla)
  DSA_COUNTING_KERNEL(DenseMhaPrefill, dense_mha_prefill)
#undef DSA_COUNTING_KERNEL
  k.dense = CallCounter::real.dense;  // counted by the model (OpCallCounts)
  return k;
}

// Fresh random hidden states (never zeros), [tokens, hidden].
inline std::vector<float> RandomHidden(int64_t tokens, int64_t hidden,
                                       uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(tokens * hidden);
  for (float& v : x) v = dist(rng);
  return x;
}

// The platforms whose kernels the stack runs on in these tests. A GPU
// platform joins by being added here (and to attention's OpTestPlatforms())
// with its kernel registration linked in; one without a device skips.
inline std::vector<std::string> RunnerPlatforms() {
  return {"cpu", "cuda", "rocm"};
}

class ModelRunnerTestBase : public ::testing::Test {
 protected:
  // Kernels and device memory of `platform_id`; decisions from ROCm gfx942's
  // capabilities (skip) or the same with is_cuda_alike off (no skip).
  void SetUpPlatform(const std::string& platform_id) {
    platform::Registry& registry = platform::Registry::Global();
    auto target = registry.GetPlatform(platform_id);
    if (!target.ok()) GTEST_SKIP() << target.status();
    auto devices = target->ProbeDevices();
    if (!devices.ok() || devices->device_count == 0) {
      GTEST_SKIP() << platform_id << ": no device";
    }
    // A platform without every op the step calls (the seven attention ops
    // and the dense ops) skips, naming the first missing op.
    auto kernels = AttentionKernels::Load(registry, platform_id);
    if (!kernels.ok()) GTEST_SKIP() << kernels.status();
    CallCounter::real = *kernels;
    CallCounter::calls = {};
    platform_.emplace(*target);
    auto rocm = registry.GetPlatform("rocm");
    ASSERT_TRUE(rocm.ok()) << rocm.status();
    auto caps = rocm->CapabilitiesForArch("gfx942");
    ASSERT_TRUE(caps.ok());
    skip_caps_ = *caps;
    no_skip_caps_ = *caps;
    no_skip_caps_.is_cuda_alike = false;
  }

  // A model for `preset` whose decisions follow `caps`, on the platform's
  // kernels.
  std::unique_ptr<DeepseekV32Model> MakeModel(
      const std::string& preset, const platform::PlatformCapabilities& caps,
      RuntimeOptions options = {}, EngineConfig engine = {},
      uint64_t seed = 7) {
    auto config = LoadModelConfig(preset);
    EXPECT_TRUE(config.ok()) << config.status();
    return MakeModel(*config, caps, options, engine, seed);
  }
  std::unique_ptr<DeepseekV32Model> MakeModel(
      const ModelConfig& config, const platform::PlatformCapabilities& caps,
      RuntimeOptions options = {}, EngineConfig engine = {},
      uint64_t seed = 7) {
    auto planner = LayerPlanner::Create(config, caps, engine);
    EXPECT_TRUE(planner.ok()) << planner.status();
    if (!planner.ok()) return nullptr;
    auto model = DeepseekV32Model::Create(std::move(*planner), *platform_,
                                          CountingKernels(), options, seed);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return nullptr;
    return std::move(*model);
  }

  static int64_t Tokens(const std::vector<StepRequest>& requests) {
    int64_t n = 0;
    for (const StepRequest& r : requests) n += r.num_new_tokens;
    return n;
  }

  std::optional<platform::Platform> platform_;
  platform::PlatformCapabilities skip_caps_;
  platform::PlatformCapabilities no_skip_caps_;
};

// ModelRunnerTestBase on the platform named by the test's parameter.
class ModelRunnerTest : public ModelRunnerTestBase,
                        public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override { SetUpPlatform(GetParam()); }
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_TEST_UTIL_H_
