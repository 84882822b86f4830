// The DeepseekV32 attention layer and a stack of them (every layer of a
// preset, MTP layers included) running one step of a batch on the ops of a
// platform, taking the prefill branch and the indexer skip the layer plan
// decides (layer_plan.h).
//
// Per layer and step:
//   host   q_c = RMSNorm(x W_qa), q = q_c W_qb (rope on q_pe),
//          kv = x W_kva: kv_c = RMSNorm(kv[:kv_lora]), k_pe =
//          rope(kv[kv_lora:])
//   op     mla_cache_write(kv_c, k_pe)
//   op     indexer_k_write(x W_k)                 layers owning an indexer
//   op     indexer_q, indexer_logits, indexer_topk only when the plan scores
//   op     sparse_mla over top-k for MLA decodes, and for prefills on the
//          sparse MQA branch; dense_mha_prefill for prefills on the dense one
//   host   out = attn W_o
// Layers are chained with a residual: x_{l+1} = x_l + out_l. MTP layers run
// after the main layers on their output.
//
// The dense steps run on the host in float32 (host_math.h); everything the
// attention ops read or write lives in the platform's device memory,
// allocated through its runtime, so the same code runs on any platform that
// registers the seven kernels.
//
// A profile (dummy) run has no attention metadata: indexer layers reserve the
// indexer's workspace for the largest batch and nothing is written.
#ifndef DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_H_
#define DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "attention/ops.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/paged_cache.h"
#include "platform/device_buffer.h"
#include "platform/registry.h"

namespace dsa::model::deepseek_v32 {

struct RuntimeOptions {
  int block_size = 64;
  int num_blocks = 256;  // per layer cache, shared by all requests
  // Longest request (context + new); sizes the rope table. At most the
  // preset's max_position_embeddings.
  int64_t max_model_len = 4096;
  // Largest step; a profile run reserves the indexer workspace for it.
  int64_t max_num_batched_tokens = 4096;
  // MLA latent cache: bfloat16, or fp8 in the platform's fp8 format.
  bool fp8_latent_cache = false;
  double rope_theta = 10000.0;
  int num_threads = 0;  // host math and CPU kernels; 0 = all cores
  // A benchmark bound, not a valid model: no layer does any indexer work (no
  // key write, no scoring, no workspace). It tells how much of a step the
  // indexer costs at most. The indexer K caches stay as they are, so a later
  // long decode would read keys that were never written; a step that needs a
  // top-k (decodes, prefills on the sparse MQA branch) is FailedPrecondition.
  bool no_indexer = false;
};

// Counts of the attention ops one step launched, summed over layers.
struct OpCallCounts {
  int indexer_k_write = 0;
  int indexer_q = 0;
  int indexer_logits = 0;
  int indexer_topk = 0;
  int mla_cache_write = 0;
  int sparse_mla = 0;
  int dense_mha_prefill = 0;
};

struct StepOptions {
  bool capture_topk = false;           // copy each layer's top-k to the host
  bool capture_layer_outputs = false;  // keep each layer's attention output
};

struct StepOutput {
  // [tokens, hidden] in the caller's row order: after the main layers, and
  // after the MTP layers (empty when the preset has none).
  std::vector<float> hidden;
  std::vector<float> mtp_hidden;
  ForwardPlan plan;
  OpCallCounts op_calls;
  // With StepOptions: per layer, [tokens, index_topk] (caller's row order) of
  // the top-k the layer read, and [tokens, hidden] of its attention output.
  std::vector<std::vector<int32_t>> topk;
  std::vector<std::vector<float>> layer_outputs;
};

class DeepseekV32Model {
 public:
  // Weights drawn with LayerWeights::Random(seed).
  static absl::StatusOr<std::unique_ptr<DeepseekV32Model>> Create(
      LayerPlanner planner, platform::Platform platform,
      AttentionKernels kernels, RuntimeOptions options, uint64_t seed);
  static absl::StatusOr<std::unique_ptr<DeepseekV32Model>> Create(
      LayerPlanner planner, platform::Platform platform,
      AttentionKernels kernels, RuntimeOptions options,
      std::vector<LayerWeights> weights);
  ~DeepseekV32Model();

  const LayerPlanner& planner() const { return planner_; }
  const RuntimeOptions& options() const { return options_; }

  // One step: `hidden` holds [tokens, hidden] for the requests' new tokens,
  // request after request. Allocates cache blocks for the new tokens.
  absl::StatusOr<StepOutput> Step(const ForwardContext& forward,
                                  absl::Span<const StepRequest> requests,
                                  absl::Span<const float> hidden,
                                  const StepOptions& step_options = {});

  // A profile/dummy run: no metadata. Returns the plan it followed.
  absl::StatusOr<ForwardPlan> ProfileRun(const ForwardContext& forward);

  // Frees a finished request's cache blocks.
  absl::Status Release(int64_t request_id) {
    return blocks_.Release(request_id);
  }

  // Bytes of indexer workspace reserved so far (by profile runs and steps).
  int64_t reserved_workspace_bytes() const;

  // Host copies of a layer's caches, for tests and debugging. The indexer K
  // cache is empty for a layer without an indexer.
  absl::StatusOr<std::vector<uint8_t>> ReadLatentCache(int layer) const;
  absl::StatusOr<std::vector<uint8_t>> ReadIndexerKCache(int layer) const;

 private:
  struct Shared;
  struct Layer;
  DeepseekV32Model(LayerPlanner planner, RuntimeOptions options,
                   BlockTables blocks);
  // One layer's forward over the step's tokens (internal order): x in,
  // the attention output (before the residual) out.
  absl::Status RunLayer(Layer& layer, const LayerPlan& plan,
                        const StepLayout& layout, const std::vector<float>& x,
                        std::vector<float>& out);
  // The layer's indexer: writes its keys and, when the plan scores, its
  // top-k. Without a step (a profile run, plan kWorkspaceOnly) it only
  // reserves its workspace for the largest step. x and q_c are the layer's
  // input and normalised q latent.
  absl::Status RunIndexer(Layer& layer, const LayerPlan& plan,
                          const StepLayout* step, const std::vector<float>* x,
                          const std::vector<float>* q_c);

  LayerPlanner planner_;
  RuntimeOptions options_;
  BlockTables blocks_;
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_H_
