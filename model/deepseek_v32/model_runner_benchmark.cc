// One prefill step of a whole stack on the CPU kernels, with the indexer skip
// (ROCm gfx942 capabilities) and without it (the same capabilities with
// is_cuda_alike off, i.e. the behaviour before the skip): the seed's A/B arms
// on the reference platform. Each iteration prefills fresh requests of the
// given length and releases them.
//
//   bazel run -c opt //model/deepseek_v32:model_runner_benchmark --
//       --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//
// DSA_PLATFORM=cuda (a build with --config=cuda, on a GPU machine) runs the
// same steps on that platform's kernels with bf16 activations.
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "model/deepseek_v32/model_runner.h"
#include "platform/registry.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

// GLM-5.1's attention shapes (kv_lora 512, rope 64, qk_nope 192, v 256, an
// indexer of 32 heads x 128 with index_topk 2048 on every layer) with fewer
// heads, a smaller hidden size and 2 main layers + the MTP layer, so that a
// CPU step takes about a second.
ModelConfig BenchConfig() {
  DeepseekV32Config proto = LoadModelConfig("glm-5.1")->proto();
  proto.set_name("glm-5.1-bench");
  proto.set_num_hidden_layers(2);
  proto.set_hidden_size(1024);
  proto.set_num_attention_heads(4);
  proto.set_q_lora_rank(512);
  return *ModelConfig::FromProto(proto);
}

std::string PlatformId() {
  const char* id = std::getenv("DSA_PLATFORM");
  return id != nullptr && id[0] != '\0' ? id : "cpu";
}

absl::StatusOr<std::unique_ptr<DeepseekV32Model>> MakeModel(bool skip,
                                                            int64_t max_len) {
  platform::Registry& registry = platform::Registry::Global();
  const std::string id = PlatformId();
  platform::PlatformCapabilities caps =
      *registry.GetPlatform("rocm")->CapabilitiesForArch("gfx942");
  caps.is_cuda_alike = skip;
  auto planner = LayerPlanner::Create(BenchConfig(), caps, {});
  RuntimeOptions options;
  options.block_size = 64;
  options.num_blocks = static_cast<int>((max_len + 63) / 64 + 1);
  options.max_model_len = max_len;
  options.max_num_batched_tokens = max_len;
  if (id != "cpu") options.activation_dtype = attention::DType::kBFloat16;
  DSA_ASSIGN_OR_RETURN(platform::Platform target, registry.GetPlatform(id));
  DSA_ASSIGN_OR_RETURN(AttentionKernels kernels,
                       AttentionKernels::Load(registry, id));
  return DeepseekV32Model::Create(std::move(*planner), target, kernels, options,
                                  /*seed=*/1);
}

// Args: skip (1) or not (0), prefill length. The first argument varies
// fastest, so the two arms of each length run back to back.
void BM_PrefillStep(benchmark::State& state) {
  const bool skip = state.range(0) != 0;
  const int64_t len = state.range(1);
  auto made = MakeModel(skip, len);
  if (!made.ok()) {
    state.SkipWithError(made.status().ToString().c_str());
    return;
  }
  std::unique_ptr<DeepseekV32Model> model = std::move(*made);
  const int hidden = model->planner().config().proto().hidden_size();
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  std::vector<float> x(len * hidden);
  for (float& v : x) v = dist(rng);
  int64_t id = 0;
  int scored = 0;
  for (auto _ : state) {
    auto out = model->Step({}, {{id, 0, len}}, x);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      break;
    }
    scored = out->plan.counts.scored;
    benchmark::DoNotOptimize(out->hidden.data());
    (void)model->Release(id++);
  }
  state.counters["scored_layers"] = scored;
  state.SetLabel(skip ? "skip" : "score");
}

// Pure short prefills: 256, 1024 and 2048 (= index_topk) tokens.
BENCHMARK(BM_PrefillStep)
    ->ArgNames({"skip", "tokens"})
    ->ArgsProduct({{0, 1}, {256, 1024, 2048}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace dsa::model::deepseek_v32

BENCHMARK_MAIN();
