// What a model needs of the device, counted before anything is allocated:
// a model or a step that does not fit the device's free memory is refused
// with its sizes (a platform reporting little memory), DeviceBytes follows
// the caches, activations and weights and overflows cleanly at every
// dimension's maximum, and models or caches larger than the device are
// refused before the block tables are made. On the CPU platform.
#include <sys/resource.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/model_runner_test_util.h"
#include "platform/cpu/cpu_platform.h"
#include "platform/registry.h"
#include "platform/runtime_test_util.h"
#include "platform/status_macros.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The CPU platform's runtime with its free memory set by the test: what a
// device that has `free` bytes left would report.
class LimitedMemoryTest : public ::testing::Test {
 protected:
  static inline std::atomic<uint64_t> free_bytes{0};
  static DsaStatusCode ReportedMemory(uint64_t* free, uint64_t* total, char*,
                                      size_t) {
    *free = free_bytes.load();
    *total = uint64_t{80} << 30;
    return DSA_STATUS_OK;
  }
  void SetUp() override {
    DsaPlatformDescriptor d =
        dsa::testing::RegisteredPlatform(platform::CpuPlatformPluginApi());
    d.device_memory_info = &ReportedMemory;
    platform::RegistrationBatch batch;
    batch.plugin_name = "limited_memory";
    batch.platforms = {d};
    ASSERT_OK(registry_.Register(batch));
    ASSERT_OK_AND_ASSIGN(platform::Platform cpu, registry_.GetPlatform("cpu"));
    platform_.emplace(cpu);
    ASSERT_OK_AND_ASSIGN(
        kernels_, AttentionKernels::Load(platform::Registry::Global(), "cpu"));
    auto rocm = platform::Registry::Global().GetPlatform("rocm");
    ASSERT_OK(rocm.status());
    ASSERT_OK_AND_ASSIGN(caps_, rocm->CapabilitiesForArch("gfx942"));
    ASSERT_OK_AND_ASSIGN(ModelConfig config, LoadModelConfig("tiny-glm-5.1"));
    config_.emplace(std::move(config));
    options_.block_size = 16;
    options_.num_blocks = 32;  // a 300-token prefill fits
    options_.max_model_len = 1024;
    options_.max_num_batched_tokens = 512;
  }
  absl::StatusOr<std::unique_ptr<DeepseekV32Model>> Create() {
    DSA_ASSIGN_OR_RETURN(LayerPlanner planner,
                         LayerPlanner::Create(*config_, caps_, {}));
    return DeepseekV32Model::Create(std::move(planner), *platform_, kernels_,
                                    options_, 7);
  }

  platform::Registry registry_;
  std::optional<platform::Platform> platform_;
  AttentionKernels kernels_;
  platform::PlatformCapabilities caps_;
  std::optional<ModelConfig> config_;
  RuntimeOptions options_;
};

// A model that does not fit is refused before anything is allocated, with
// its size and the platform's free and total memory in the message.
TEST_F(LimitedMemoryTest, AModelThatDoesNotFitIsRefusedWithItsSizes) {
  const int64_t bytes =
      DeepseekV32Model::DeviceBytes(*config_, options_).value();
  free_bytes = static_cast<uint64_t>(bytes) - 1;
  platform::FaultPlan count_allocations;
  count_allocations.sites =
      platform::FaultSiteBit(platform::FaultSite::kDeviceMalloc);
  platform::FaultInjector allocations(count_allocations);
  EXPECT_THAT(
      Create(),
      StatusIs(absl::StatusCode::kResourceExhausted,
               ::testing::AllOf(HasSubstr("model tiny-glm-5.1"),
                                HasSubstr(absl::StrCat("(", bytes, " bytes)")),
                                HasSubstr(absl::StrCat("(", bytes - 1,
                                                       " bytes) free of 80.00 "
                                                       "GiB")))));
  EXPECT_EQ(allocations.calls(), 0);
  free_bytes = static_cast<uint64_t>(bytes);
  EXPECT_OK(Create().status());
}

// A step whose indexer workspace does not fit (no profile run reserved it)
// is refused before it starts, naming the workspace's sizes: nothing was
// allocated or written, and with the memory back the same step runs.
TEST_F(LimitedMemoryTest, AStepThatDoesNotFitIsRefusedBeforeItStarts) {
  free_bytes = uint64_t{1} << 40;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeepseekV32Model> model, Create());
  free_bytes = 4096;
  const std::vector<StepRequest> sparse = {{1, 0, 300}};
  const std::vector<float> x =
      RandomHidden(300, config_->proto().hidden_size(), 3);
  const std::vector<uint8_t> latent_before = *model->ReadLatentCache(0);
  EXPECT_THAT(
      model->Step({}, sparse, x),
      StatusIs(
          absl::StatusCode::kResourceExhausted,
          ::testing::AllOf(
              HasSubstr("step: the indexer's workspace (300 query rows over "
                        "300 keys: 351.56 KiB (360000 bytes))"),
              HasSubstr("4.00 KiB (4096 bytes) free"),
              HasSubstr("a profile run"))));
  EXPECT_EQ(model->block_tables().num_free_blocks(), options_.num_blocks);
  EXPECT_EQ(model->block_tables().cached_tokens(1), 0);
  EXPECT_EQ(*model->ReadLatentCache(0), latent_before);
  EXPECT_EQ(model->reserved_workspace_bytes(), 0);
  EXPECT_THAT(model->ProfileRun({}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("profile run: the indexer's workspace (512 "
                                 "query rows over 1024 keys")));
  free_bytes = uint64_t{1} << 40;
  ASSERT_OK(model->ProfileRun({}).status());
  free_bytes = 0;  // reserved: the step needs nothing more
  EXPECT_OK(model->Step({}, sparse, x).status());
}

// DeviceBytes counts what a model holds: one more cache block per layer adds
// exactly its latent and indexer-key slots; bf16 activations halve the
// activation buffers the projections read; the weights are bf16.
TEST(DeviceBytesTest, FollowsTheCachesActivationsAndWeights) {
  auto config = LoadModelConfig("glm-5.1");
  ASSERT_TRUE(config.ok()) << config.status();
  const DeepseekV32Config& c = config->proto();
  RuntimeOptions options;
  options.block_size = 64;
  // Past the 128 blocks a request of max_model_len can hold, so that one more
  // block adds to the caches alone (the step's block table is sized by the
  // smaller of the two).
  options.num_blocks = 200;
  options.max_model_len = 8192;
  options.max_num_batched_tokens = 8192;
  const int64_t base = DeepseekV32Model::DeviceBytes(*config, options).value();
  RuntimeOptions more = options;
  more.num_blocks = 201;
  const int64_t latent = (c.kv_lora_rank() + c.qk_rope_head_dim()) * 2;
  const int64_t keys = c.indexer().index_head_dim() + 4;
  EXPECT_EQ(DeepseekV32Model::DeviceBytes(*config, more).value() - base,
            64 * (config->num_layers() * latent +
                  config->num_indexer_layers() * keys));
  RuntimeOptions bf16 = options;
  bf16.activation_dtype = attention::DType::kBFloat16;
  EXPECT_LT(DeepseekV32Model::DeviceBytes(*config, bf16).value(), base);
  // GLM-5.1's 79 layers of bf16 weights alone are about 25 GiB.
  EXPECT_GT(base, int64_t{24} << 30);
  EXPECT_LT(base, int64_t{40} << 30);
  // Fp8 weights: a byte per element of each fp8 product's weight and a float
  // per 128 x 128 block instead of two bytes per element, plus the bf16
  // staging of the largest one, quantised at load, and per token x's and
  // q_c's codes and scales (quantised once by their RMSNorms).
  RuntimeOptions fp8 = options;
  fp8.weight_dtype = attention::DType::kFloat8E4m3fn;
  int64_t saved = 0, largest = 0;
  for (int l = 0; l < config->num_layers(); ++l) {
    for (const WeightSpec& spec : LayerWeightSpecs(*config, l)) {
      if (!spec.fp8_product) continue;
      saved += spec.size() -
               ((spec.rows + 127) / 128) * ((spec.cols + 127) / 128) * 4;
      largest = std::max(largest, spec.size());
    }
  }
  const int64_t quantised_norms =
      options.max_num_batched_tokens *
      (c.hidden_size() + (c.hidden_size() + 127) / 128 * 4 + c.q_lora_rank() +
       (c.q_lora_rank() + 127) / 128 * 4);
  EXPECT_EQ(base - DeepseekV32Model::DeviceBytes(*config, fp8).value(),
            saved - 2 * largest - quantised_norms);
  EXPECT_GT(saved, int64_t{10} << 30);
}

// A model with every dimension at its validation limit: its own sizes (every
// layer's weights, a cache slot, a token's activations) are representable,
// so DeviceBytes counts it exactly with the smallest options; options that
// take the sum past int64 give an overflowed size, never a wrapped one (under
// --config=asan UBSan checks there is no signed overflow on the way), and
// Create refuses them with the options in the message, before allocating.
DeepseekV32Config LargestConfig() {
  DeepseekV32Config p;
  p.set_name("largest");
  p.set_num_hidden_layers(kMaxLayers);
  p.set_num_nextn_predict_layers(kMaxMtpLayers);
  for (auto set : {&DeepseekV32Config::set_hidden_size,
                   &DeepseekV32Config::set_num_attention_heads,
                   &DeepseekV32Config::set_q_lora_rank,
                   &DeepseekV32Config::set_kv_lora_rank,
                   &DeepseekV32Config::set_qk_nope_head_dim,
                   &DeepseekV32Config::set_qk_rope_head_dim,
                   &DeepseekV32Config::set_v_head_dim}) {
    (p.*set)(kMaxDim);
  }
  p.set_vocab_size(kMaxVocab);
  p.set_max_position_embeddings(kMaxPositions);
  p.set_rope_theta(10000);
  p.set_rms_norm_eps(1e-6);
  p.set_mla_rope_style(MLA_ROPE_INTERLEAVED);
  IndexerConfig& ix = *p.mutable_indexer();
  ix.set_rope_style(INDEXER_ROPE_NEOX);
  ix.set_index_n_heads(kMaxDim);
  ix.set_index_head_dim(kMaxDim);
  ix.set_index_topk(static_cast<int32_t>(kMaxPositions));
  ix.set_all_layers(true);
  return p;
}

TEST(DeviceBytesTest, EveryDimensionAtItsMaximumIsCountedOrOverflowed) {
  ASSERT_OK_AND_ASSIGN(const ModelConfig config,
                       ModelConfig::FromProto(LargestConfig()));
  RuntimeOptions smallest;
  smallest.block_size = 1;
  smallest.num_blocks = 1;
  smallest.max_model_len = 1;
  smallest.max_num_batched_tokens = 1;
  const CheckedSize bytes = DeepseekV32Model::DeviceBytes(config, smallest);
  ASSERT_TRUE(bytes.ok());
  // The weights dominate: 1088 layers of about 3 x 2^49 bf16 parameters,
  // kv_b_proj counted twice (itself and its W_UK / W_UV split).
  long double weights = 0;
  for (int l = 0; l < config.num_layers(); ++l) {
    for (const WeightSpec& spec : LayerWeightSpecs(config, l)) {
      weights += 2.0L * spec.rows * spec.cols *
                 (spec.id == WeightId::kKvBProj ? 2 : 1);
    }
  }
  EXPECT_GT(static_cast<long double>(bytes.value()), weights);
  EXPECT_LT(static_cast<long double>(bytes.value()), weights * 1.001L);
  EXPECT_GT(bytes.value(), int64_t{1} << 61);
  // One more block per layer adds exactly its slots, at these sizes too.
  RuntimeOptions more = smallest;
  more.num_blocks = 2;
  const int64_t latent = (int64_t{kMaxDim} + kMaxDim) * 2;
  const int64_t keys = int64_t{kMaxDim} + 4;
  EXPECT_EQ(DeepseekV32Model::DeviceBytes(config, more).value() - bytes.value(),
            config.num_layers() * latent + config.num_indexer_layers() * keys);
  // Past int64: many blocks, long steps, or long steps over a long
  // max_model_len (the indexer's workspace alone).
  RuntimeOptions blocks = smallest;
  blocks.block_size = 4096;
  blocks.num_blocks = 1 << 24;
  RuntimeOptions steps = smallest;
  steps.max_num_batched_tokens = kMaxPositions;
  RuntimeOptions workspace = smallest;
  workspace.max_model_len = kMaxPositions;
  workspace.max_num_batched_tokens = 1 << 30;
  for (const RuntimeOptions& o : {blocks, steps, workspace}) {
    EXPECT_FALSE(DeepseekV32Model::DeviceBytes(config, o).ok());
  }
}

class TooLargeModelTest : public ModelRunnerTestBase {};

TEST_F(TooLargeModelTest, CreateRefusesModelsLargerThanTheDevice) {
  SetUpPlatform("cpu");
  ASSERT_OK_AND_ASSIGN(const ModelConfig config,
                       ModelConfig::FromProto(LargestConfig()));
  ASSERT_OK_AND_ASSIGN(LayerPlanner planner,
                       LayerPlanner::Create(config, skip_caps_, {}));
  auto create = [&](const RuntimeOptions& options) {
    return DeepseekV32Model::Create(planner, *platform_, CallCounter::real,
                                    options, 1);
  };
  RuntimeOptions options;
  options.max_model_len = kMaxPositions;
  options.max_num_batched_tokens = 1 << 30;
  EXPECT_THAT(create(options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("largest with 256 cache blocks of 64 "
                                       "tokens per layer, steps of "
                                       "1073741824 tokens and max_model_len "
                                       "2147483647"),
                             HasSubstr("more than 2^63 bytes"))));
  // Countable, but far more than the machine: its size and the device's.
  // (The host's rope table alone would be 2^49 bytes.)
  options.max_num_batched_tokens = 1;
  const int64_t bytes = DeepseekV32Model::DeviceBytes(config, options).value();
  EXPECT_THAT(create(options),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("model largest ("),
                             HasSubstr(absl::StrCat("(", bytes,
                                                    " bytes) more of device "
                                                    "memory; platform 'cpu' "
                                                    "reports")))));
  // A step's token indices are int32.
  options.max_model_len = 1;
  options.max_num_batched_tokens = kMaxPositions + 1;
  EXPECT_THAT(create(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_num_batched_tokens is 2147483648, "
                                 "expected 1..2147483647")));
}

// A small model with caches larger than the device is refused with its size
// before anything is allocated: the block tables' free list of 2^31-1
// entries (8 GiB of host memory) included. The process's peak memory stays
// where it was.
TEST_F(TooLargeModelTest, CachesLargerThanTheDeviceAreRefusedBeforeTheTables) {
  SetUpPlatform("cpu");
  ASSERT_OK_AND_ASSIGN(const ModelConfig config,
                       LoadModelConfig("tiny-glm-5.1"));
  ASSERT_OK_AND_ASSIGN(LayerPlanner planner,
                       LayerPlanner::Create(config, skip_caps_, {}));
  RuntimeOptions options;
  options.num_blocks = std::numeric_limits<int>::max();
  const int64_t bytes = DeepseekV32Model::DeviceBytes(config, options).value();
  struct rusage before, after;
  ASSERT_EQ(getrusage(RUSAGE_SELF, &before), 0);
  EXPECT_THAT(DeepseekV32Model::Create(planner, *platform_, CallCounter::real,
                                       options, 1),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("model tiny-glm-5.1 ("),
                             HasSubstr(absl::StrCat("(", bytes,
                                                    " bytes) more of device "
                                                    "memory")),
                             HasSubstr("fewer cache blocks (num_blocks)"))));
  ASSERT_EQ(getrusage(RUSAGE_SELF, &after), 0);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 1 << 20);  // KiB: 1 GiB
  // Sizes the tables refuse are refused as before, before any size check.
  options.num_blocks = 0;
  EXPECT_THAT(DeepseekV32Model::Create(planner, *platform_, CallCounter::real,
                                       options, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_blocks (0) must be positive")));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
