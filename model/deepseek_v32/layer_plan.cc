#include "model/deepseek_v32/layer_plan.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

absl::string_view Plural(int64_t n, absl::string_view one,
                         absl::string_view many) {
  return n == 1 ? one : many;
}

}  // namespace

absl::string_view PrefillBranchName(PrefillBranch branch) {
  switch (branch) {
    case PrefillBranch::kNone:
      return "none";
    case PrefillBranch::kDenseMha:
      return "dense_mha";
    case PrefillBranch::kSparseMqa:
      return "sparse_mqa";
  }
  return "unknown";
}

PrefillBranch DecidePrefillBranch(const AttentionMetadata* mla,
                                  bool dense_mha_prefill_supported) {
  if (mla == nullptr || mla->num_prefills == 0) return PrefillBranch::kNone;
  return mla->use_dense_mha && dense_mha_prefill_supported
             ? PrefillBranch::kDenseMha
             : PrefillBranch::kSparseMqa;
}

LayerPlanner::LayerPlanner(ModelConfig config,
                           platform::PlatformCapabilities capabilities,
                           EngineConfig engine)
    : config_(std::move(config)),
      capabilities_(std::move(capabilities)),
      engine_(engine) {}

absl::StatusOr<LayerPlanner> LayerPlanner::Create(
    ModelConfig config, const platform::PlatformCapabilities& capabilities,
    const EngineConfig& engine) {
  DSA_RETURN_IF_ERROR(ValidateEngineConfig(engine));
  if (engine.decode_context_parallel_size > 1 &&
      !capabilities.sparse_mla_decode_context_parallel) {
    return absl::FailedPreconditionError(absl::StrCat(
        "decode context parallel size ", engine.decode_context_parallel_size,
        " is not supported: the ", capabilities.platform_id, " (",
        platform::DeviceArchName(capabilities.arch),
        ") sparse MLA backend rejects decode context parallelism"));
  }
  LayerPlanner planner(std::move(config), capabilities, engine);
  const ModelConfig& c = planner.config_;
  planner.static_decisions_.reserve(c.num_layers());
  for (int layer = 0; layer < c.num_layers(); ++layer) {
    IndexerStaticInputs in;
    in.owns_indexer = c.owns_indexer(layer);
    in.is_cuda_alike = capabilities.is_cuda_alike;
    in.is_mtp_layer = c.is_mtp_layer(layer);
    in.prefill_context_parallel = engine.prefill_context_parallel;
    in.dense_mha_prefill_supported = capabilities.sparse_mla_dense_mha_prefill;
    planner.static_decisions_.push_back(DecideIndexerStatic(in));
  }
  return planner;
}

absl::StatusOr<IndexerStaticDecision> LayerPlanner::StaticDecision(
    int layer) const {
  if (!config_.is_valid_layer(layer)) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " is out of range [0, ",
                     config_.num_layers(), ") for ", config_.name()));
  }
  return static_decisions_[layer];
}

absl::StatusOr<BatchMetadata> LayerPlanner::BuildMetadata(
    absl::Span<const Request> requests) const {
  return BuildBatchMetadata(config_, engine_, requests);
}

LayerPlan LayerPlanner::PlanValidLayer(int layer, const ForwardContext& forward,
                                       const BatchMetadata* metadata) const {
  const IndexerStaticDecision& fixed = static_decisions_[layer];
  IndexerDynamicInputs in;
  in.has_attention_metadata = metadata != nullptr;
  in.cudagraph_runtime_mode = forward.cudagraph_runtime_mode;
  in.capturing = forward.capturing;
  in.force_mqa = engine_.force_mqa;
  if (metadata != nullptr) {
    // The MLA's view, not the indexer's: see indexer_skip.h.
    in.mla_num_decode_tokens = metadata->mla.num_decode_tokens;
    in.mla_num_prefills = metadata->mla.num_prefills;
    in.mla_use_dense_mha = metadata->mla.use_dense_mha;
  }
  LayerPlan plan;
  plan.layer = layer;
  plan.is_mtp = config_.is_mtp_layer(layer);
  plan.topk_source_layer = config_.topk_source_layer(layer);
  plan.indexer = DecideIndexer(fixed, in);
  plan.prefill_branch =
      DecidePrefillBranch(metadata != nullptr ? &metadata->mla : nullptr,
                          capabilities_.sparse_mla_dense_mha_prefill);
  plan.k_cache_write = fixed.owns_indexer && metadata != nullptr;
  return plan;
}

absl::StatusOr<LayerPlan> LayerPlanner::PlanLayer(
    int layer, const ForwardContext& forward,
    const BatchMetadata* metadata) const {
  DSA_RETURN_IF_ERROR(StaticDecision(layer).status());
  DSA_RETURN_IF_ERROR(ValidateForwardContext(forward));
  return PlanValidLayer(layer, forward, metadata);
}

absl::StatusOr<ForwardPlan> LayerPlanner::Plan(
    const ForwardContext& forward,
    std::optional<BatchMetadata> metadata) const {
  DSA_RETURN_IF_ERROR(ValidateForwardContext(forward));
  ForwardPlan plan;
  plan.forward = forward;
  plan.metadata = std::move(metadata);
  const BatchMetadata* m = plan.metadata ? &*plan.metadata : nullptr;
  plan.layers.reserve(config_.num_layers());
  for (int layer = 0; layer < config_.num_layers(); ++layer) {
    plan.layers.push_back(PlanValidLayer(layer, forward, m));
    switch (plan.layers.back().indexer.action) {
      case IndexerAction::kScore:
        ++plan.counts.scored;
        break;
      case IndexerAction::kSkip:
        ++plan.counts.skipped;
        break;
      case IndexerAction::kShared:
        ++plan.counts.shared;
        break;
      case IndexerAction::kWorkspaceOnly:
        ++plan.counts.workspace_only;
        break;
    }
  }
  return plan;
}

absl::StatusOr<ForwardPlan> LayerPlanner::PlanForward(
    const ForwardContext& forward, absl::Span<const Request> requests) const {
  DSA_ASSIGN_OR_RETURN(BatchMetadata metadata, BuildMetadata(requests));
  return Plan(forward, std::move(metadata));
}

absl::StatusOr<ForwardPlan> LayerPlanner::PlanProfileRun(
    const ForwardContext& forward) const {
  return Plan(forward, std::nullopt);
}

std::string DescribeIndexerDecision(const LayerPlan& plan,
                                    const LayerPlanner& planner,
                                    const BatchMetadata* metadata) {
  const ModelConfig& config = planner.config();
  const AttentionMetadata* mla = metadata != nullptr ? &metadata->mla : nullptr;
  const int topk = config.index_topk();
  switch (plan.indexer.reason) {
    case IndexerReason::kShortDensePrefill:
      return absl::StrCat("pure prefill, max len ",
                          mla ? mla->prefill_max_seq_len : 0, " <= index_topk ",
                          topk, ": dense MHA reads no top-k");
    case IndexerReason::kSharesTopk:
      return absl::StrCat("no indexer of its own: reuses layer ",
                          plan.topk_source_layer, "'s top-k");
    case IndexerReason::kNoAttentionMetadata:
      return "profile/dummy run without metadata: called only to reserve "
             "its workspace";
    case IndexerReason::kNotCudaAlike:
      return absl::StrCat("platform ", planner.capabilities().platform_id,
                          " is not CUDA-alike");
    case IndexerReason::kMtpLayer:
      return "MTP layer";
    case IndexerReason::kPrefillContextParallel:
      return "prefill context parallel (PCP)";
    case IndexerReason::kNoDenseMhaPrefill:
      return absl::StrCat(planner.capabilities().platform_id,
                          " sparse MLA has no dense-MHA prefill");
    case IndexerReason::kFullCudagraph:
      return "FULL cudagraph";
    case IndexerReason::kCapturing:
      return "capturing a cudagraph";
    case IndexerReason::kDecodeTokens: {
      const int64_t n = mla ? mla->num_decode_tokens : 0;
      return absl::StrCat(mla && mla->num_prefills > 0 ? "mixed batch: "
                                                       : "decode-only batch: ",
                          n, Plural(n, " decode token", " decode tokens"));
    }
    case IndexerReason::kNoPrefill:
      return "no prefill in the batch";
    case IndexerReason::kForceMqa:
      return "force-MQA: prefills run sparse MQA";
    case IndexerReason::kPrefillLongerThanTopk:
      return absl::StrCat("prefill ", mla ? mla->prefill_max_seq_len : 0,
                          " > index_topk ", topk);
  }
  return std::string(IndexerReasonName(plan.indexer.reason));
}

}  // namespace dsa::model::deepseek_v32
