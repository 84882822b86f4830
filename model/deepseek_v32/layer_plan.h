// What every layer of a DeepSeek-V3.2-family model does in one forward: its
// indexer action and why, its prefill branch, and whether it writes indexer
// keys. The plan tool prints it; the layer forward uses the same object, so
// the two never disagree.
//
//   preset (ModelConfig) + platform capabilities + EngineConfig
//     -> LayerPlanner (static half of the decision, per layer, at creation)
//   + ForwardContext + requests (BatchMetadata, absent in a profile run)
//     -> LayerPlan per layer (dynamic half, every forward)
//
// Capabilities come from the platform registry (platform_query.h) or from a
// caller that has them; this file knows no platform plugin.
#ifndef DSA_MODEL_DEEPSEEK_V32_LAYER_PLAN_H_
#define DSA_MODEL_DEEPSEEK_V32_LAYER_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/deepseek_v32/batch_metadata.h"
#include "model/deepseek_v32/forward_context.h"
#include "model/deepseek_v32/indexer_skip.h"
#include "model/deepseek_v32/model_config.h"
#include "platform/capabilities.h"

namespace dsa::model::deepseek_v32 {

// Which attention computation the layer's prefill tokens take.
enum class PrefillBranch {
  kNone,       // no prefill in the batch, or no metadata
  kDenseMha,   // dense causal MHA (use_dense_mha and the platform has it)
  kSparseMqa,  // sparse MLA in MQA form over the top-k
};
// "none", "dense_mha", "sparse_mqa".
absl::string_view PrefillBranchName(PrefillBranch branch);

// The prefill branch of a forward: the MLA's view decides. `mla` null (no
// metadata) or without prefills: kNone.
PrefillBranch DecidePrefillBranch(const AttentionMetadata* mla,
                                  bool dense_mha_prefill_supported);

struct LayerPlan {
  int layer = 0;
  bool is_mtp = false;
  // The layer whose indexer's top-k this layer reads (itself when it owns
  // an indexer).
  int topk_source_layer = 0;
  IndexerDecision indexer;
  PrefillBranch prefill_branch = PrefillBranch::kNone;
  // The fused norm + rope + quantise step writes this forward's indexer keys
  // (and clears the top-k buffer) before the decision: on every layer that
  // owns an indexer whenever there is metadata, skipped or not.
  bool k_cache_write = false;
};

struct IndexerCallCounts {
  int scored = 0;
  int skipped = 0;
  int shared = 0;
  int workspace_only = 0;
};

struct ForwardPlan {
  ForwardContext forward;
  std::optional<BatchMetadata> metadata;  // absent in a profile/dummy run
  std::vector<LayerPlan> layers;          // main layers, then MTP layers
  IndexerCallCounts counts;
};

class LayerPlanner {
 public:
  // Checks `engine` (ValidateEngineConfig) and the configuration against the
  // platform: FailedPrecondition for decode context parallel > 1 on a
  // platform whose sparse MLA backend rejects it (ROCm). Computes every
  // layer's static decision.
  static absl::StatusOr<LayerPlanner> Create(
      ModelConfig config, const platform::PlatformCapabilities& capabilities,
      const EngineConfig& engine);

  const ModelConfig& config() const { return config_; }
  const platform::PlatformCapabilities& capabilities() const {
    return capabilities_;
  }
  const EngineConfig& engine() const { return engine_; }

  // The static half of `layer`'s decision. InvalidArgument out of range.
  absl::StatusOr<IndexerStaticDecision> StaticDecision(int layer) const;

  // The classified batch for this planner's model and engine settings.
  absl::StatusOr<BatchMetadata> BuildMetadata(
      absl::Span<const Request> requests) const;

  // One layer's plan. `metadata` null means a profile/dummy run.
  // InvalidArgument for a layer out of range or an invalid `forward`.
  absl::StatusOr<LayerPlan> PlanLayer(int layer, const ForwardContext& forward,
                                      const BatchMetadata* metadata) const;

  // Every layer for a forward over `requests` (metadata built here).
  absl::StatusOr<ForwardPlan> PlanForward(
      const ForwardContext& forward, absl::Span<const Request> requests) const;
  // Every layer for a profile/dummy run: no attention metadata.
  absl::StatusOr<ForwardPlan> PlanProfileRun(
      const ForwardContext& forward) const;

 private:
  LayerPlanner(ModelConfig config, platform::PlatformCapabilities capabilities,
               EngineConfig engine);
  LayerPlan PlanValidLayer(int layer, const ForwardContext& forward,
                           const BatchMetadata* metadata) const;
  absl::StatusOr<ForwardPlan> Plan(const ForwardContext& forward,
                                   std::optional<BatchMetadata> metadata) const;

  ModelConfig config_;
  platform::PlatformCapabilities capabilities_;
  EngineConfig engine_;
  std::vector<IndexerStaticDecision> static_decisions_;  // per layer
};

// A short explanation for people ("MTP layer", "prefill 8192 > index_topk
// 2048", "mixed batch: 2 decode tokens", ...), with the numbers that decided
// it. `metadata` is the forward's (null in a profile run).
std::string DescribeIndexerDecision(const LayerPlan& plan,
                                    const LayerPlanner& planner,
                                    const BatchMetadata* metadata);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_LAYER_PLAN_H_
