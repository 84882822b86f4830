#include "model/deepseek_v32/indexer_skip.h"

namespace dsa::model::deepseek_v32 {

absl::string_view IndexerActionName(IndexerAction action) {
  switch (action) {
    case IndexerAction::kScore:
      return "score";
    case IndexerAction::kSkip:
      return "skip";
    case IndexerAction::kShared:
      return "shared";
    case IndexerAction::kWorkspaceOnly:
      return "workspace_only";
  }
  return "unknown";
}

absl::string_view IndexerReasonName(IndexerReason reason) {
  switch (reason) {
    case IndexerReason::kShortDensePrefill:
      return "short_dense_prefill";
    case IndexerReason::kSharesTopk:
      return "shares_topk";
    case IndexerReason::kNoAttentionMetadata:
      return "no_attention_metadata";
    case IndexerReason::kNotCudaAlike:
      return "not_cuda_alike";
    case IndexerReason::kMtpLayer:
      return "mtp_layer";
    case IndexerReason::kPrefillContextParallel:
      return "prefill_context_parallel";
    case IndexerReason::kNoDenseMhaPrefill:
      return "no_dense_mha_prefill";
    case IndexerReason::kFullCudagraph:
      return "full_cudagraph";
    case IndexerReason::kCapturing:
      return "capturing";
    case IndexerReason::kDecodeTokens:
      return "decode_tokens";
    case IndexerReason::kNoPrefill:
      return "no_prefill";
    case IndexerReason::kForceMqa:
      return "force_mqa";
    case IndexerReason::kPrefillLongerThanTopk:
      return "prefill_longer_than_topk";
  }
  return "unknown";
}

IndexerStaticDecision DecideIndexerStatic(const IndexerStaticInputs& in) {
  IndexerStaticDecision d;
  d.owns_indexer = in.owns_indexer;
  if (!in.owns_indexer) {
    d.reason = IndexerReason::kSharesTopk;
  } else if (!in.is_cuda_alike) {
    d.reason = IndexerReason::kNotCudaAlike;
  } else if (in.is_mtp_layer) {
    d.reason = IndexerReason::kMtpLayer;
  } else if (in.prefill_context_parallel) {
    d.reason = IndexerReason::kPrefillContextParallel;
  } else if (!in.dense_mha_prefill_supported) {
    d.reason = IndexerReason::kNoDenseMhaPrefill;
  } else {
    d.skip_eligible = true;
    d.reason = IndexerReason::kShortDensePrefill;
  }
  return d;
}

IndexerDecision DecideIndexer(const IndexerStaticDecision& layer,
                              const IndexerDynamicInputs& forward) {
  if (!layer.owns_indexer) {
    return {IndexerAction::kShared, IndexerReason::kSharesTopk};
  }
  if (!forward.has_attention_metadata) {
    return {IndexerAction::kWorkspaceOnly, IndexerReason::kNoAttentionMetadata};
  }
  if (!layer.skip_eligible) return {IndexerAction::kScore, layer.reason};
  if (forward.cudagraph_runtime_mode == CudagraphMode::kFull) {
    return {IndexerAction::kScore, IndexerReason::kFullCudagraph};
  }
  if (forward.capturing) {
    return {IndexerAction::kScore, IndexerReason::kCapturing};
  }
  if (forward.mla_num_decode_tokens != 0) {
    return {IndexerAction::kScore, IndexerReason::kDecodeTokens};
  }
  if (forward.mla_num_prefills < 1) {
    return {IndexerAction::kScore, IndexerReason::kNoPrefill};
  }
  if (!forward.mla_use_dense_mha) {
    return {IndexerAction::kScore, forward.force_mqa
                                       ? IndexerReason::kForceMqa
                                       : IndexerReason::kPrefillLongerThanTopk};
  }
  return {IndexerAction::kSkip, IndexerReason::kShortDensePrefill};
}

}  // namespace dsa::model::deepseek_v32
