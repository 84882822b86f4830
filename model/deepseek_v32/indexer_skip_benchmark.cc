// Cost of the indexer-skip decision per layer. It runs on the host in every
// forward of every indexer layer, where an eager 1K prefill is host-bound
// (the seed: the indexer op costs ~0.2 ms of host time per call), so it must
// stay far below a microsecond.
//
//   bazel run -c opt //model/deepseek_v32:indexer_skip_benchmark
#include <vector>

#include "benchmark/benchmark.h"
#include "model/deepseek_v32/indexer_skip.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/model_config.h"
#include "platform/capabilities.h"

namespace dsa::model::deepseek_v32 {
namespace {

platform::PlatformCapabilities RocmGfx942() {
  platform::PlatformCapabilities c;
  c.platform_id = "rocm";
  c.kind = platform::PlatformKind::kRocm;
  c.arch = platform::RocmArch{"gfx942"};
  c.is_accelerator = true;
  c.is_cuda_alike = true;
  c.warp_size = 64;
  c.sparse_mla_dense_mha_prefill = true;
  return c;
}

LayerPlanner Glm51Planner() {
  return *LayerPlanner::Create(*LoadPreset("glm-5.1"), RocmGfx942(), {});
}

// The pure dynamic decision, over GLM-5.1's 79 layers' static halves; one
// iteration = one layer.
void BM_DecideIndexer(benchmark::State& state) {
  const LayerPlanner planner = Glm51Planner();
  std::vector<IndexerStaticDecision> layers;
  for (int layer = 0; layer < planner.config().num_layers(); ++layer) {
    layers.push_back(*planner.StaticDecision(layer));
  }
  IndexerDynamicInputs forward;
  forward.mla_num_prefills = 1;
  forward.mla_use_dense_mha = state.range(0) != 0;  // skip or score path
  size_t i = 0;
  for (auto _ : state) {
    IndexerDecision d = DecideIndexer(layers[i], forward);
    benchmark::DoNotOptimize(d);
    if (++i == layers.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecideIndexer)->Arg(1)->Arg(0)->ArgName("dense_mha");

// The static half, once per layer at construction.
void BM_DecideIndexerStatic(benchmark::State& state) {
  IndexerStaticInputs in;
  in.is_cuda_alike = true;
  in.dense_mha_prefill_supported = true;
  for (auto _ : state) {
    benchmark::DoNotOptimize(in);
    IndexerStaticDecision d = DecideIndexerStatic(in);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecideIndexerStatic);

// What a layer forward calls: the layer's whole plan (decision, prefill
// branch, K-cache write) from the forward's metadata, with range checks.
void BM_PlanLayer(benchmark::State& state) {
  const LayerPlanner planner = Glm51Planner();
  const BatchMetadata metadata = *planner.BuildMetadata({{0, 1024}});
  const ForwardContext forward;
  const int num_layers = planner.config().num_layers();
  int layer = 0;
  for (auto _ : state) {
    absl::StatusOr<LayerPlan> plan =
        planner.PlanLayer(layer, forward, &metadata);
    benchmark::DoNotOptimize(plan);
    if (++layer == num_layers) layer = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PlanLayer);

// A whole forward's plan: batch metadata plus all 79 layers (what the plan
// tool computes); per iteration, not per layer.
void BM_PlanForwardGlm51(benchmark::State& state) {
  const LayerPlanner planner = Glm51Planner();
  const std::vector<Request> requests = {{0, 1024}};
  const ForwardContext forward;
  for (auto _ : state) {
    absl::StatusOr<ForwardPlan> plan = planner.PlanForward(forward, requests);
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * 79);
}
BENCHMARK(BM_PlanForwardGlm51);

}  // namespace
}  // namespace dsa::model::deepseek_v32
