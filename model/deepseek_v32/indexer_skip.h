// The short-prefill indexer skip: whether an indexer layer scores (logits +
// top-k) in this forward, as a small pure function of plain values.
//
// On a CUDA-alike platform, a batch made only of prefills short enough for
// dense causal MHA reads no top-k, so scoring it is wasted work (the seed's
// "Claims"; DESIGN.md section 5). The decision has two halves:
//
//  - static, once per layer at construction (DecideIndexerStatic):
//    the layer owns an indexer, the platform is CUDA-alike, the layer is not
//    an MTP layer, no prefill context parallelism, and the platform's sparse
//    MLA backend has a dense-MHA prefill;
//  - dynamic, every forward (DecideIndexer): attention metadata is present
//    (profile/dummy runs have none and still call the op to reserve its
//    workspace), the cudagraph runtime mode is not FULL, no capture, the
//    MLA's num_decode_tokens == 0, at least one prefill, and use_dense_mha.
//
// The decode-token count is the MLA attention's (decode threshold 1), not the
// indexer's (1 + speculative tokens): with MTP=3 the indexer counts 3-token
// requests as decodes while the MLA runs them as prefills on dense MHA, and
// such a batch skips.
//
// Skipping drops only scoring. The indexer keys are written to the indexer K
// cache on every indexer layer regardless, because a later long decode will
// score them.
//
// Nothing here depends on the platform registry: callers pass the capability
// booleans, so the tests need no registry and the per-forward half costs a
// few comparisons.
#ifndef DSA_MODEL_DEEPSEEK_V32_INDEXER_SKIP_H_
#define DSA_MODEL_DEEPSEEK_V32_INDEXER_SKIP_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "model/deepseek_v32/forward_context.h"

namespace dsa::model::deepseek_v32 {

// What a layer's indexer does in one forward.
enum class IndexerAction {
  kScore,          // logits + top-k
  kSkip,           // keys written, no scoring: the layer runs dense MHA
  kShared,         // no indexer of its own: reuses an earlier layer's top-k
  kWorkspaceOnly,  // no metadata (profile/dummy run): called to reserve its
                   // workspace
};
// "score", "skip", "shared", "workspace_only".
absl::string_view IndexerActionName(IndexerAction action);

// Why. One reason per decision: the first condition that decides it, in the
// order the conditions are listed in this file's comment.
enum class IndexerReason {
  kShortDensePrefill,    // kSkip: every condition holds
  kSharesTopk,           // kShared
  kNoAttentionMetadata,  // kWorkspaceOnly
  // kScore, static: the layer scores in every forward.
  kNotCudaAlike,
  kMtpLayer,
  kPrefillContextParallel,
  kNoDenseMhaPrefill,
  // kScore, dynamic.
  kFullCudagraph,
  kCapturing,
  kDecodeTokens,  // the MLA sees decode tokens: a mixed or decode-only batch
  kNoPrefill,
  kForceMqa,               // use_dense_mha is false because of force-MQA
  kPrefillLongerThanTopk,  // use_dense_mha is false: a prefill > index_topk
};
// A stable snake_case id: "short_dense_prefill", "mtp_layer", ...
absl::string_view IndexerReasonName(IndexerReason reason);

// Facts fixed when a layer is constructed.
struct IndexerStaticInputs {
  bool owns_indexer = true;
  bool is_cuda_alike = false;
  bool is_mtp_layer = false;
  bool prefill_context_parallel = false;
  // PlatformCapabilities::sparse_mla_dense_mha_prefill.
  bool dense_mha_prefill_supported = false;
};

// The static half of the decision, kept by the layer.
struct IndexerStaticDecision {
  bool owns_indexer = true;
  // All static conditions hold: the layer may skip, forward by forward.
  bool skip_eligible = false;
  // When !owns_indexer: kSharesTopk. When !skip_eligible: the first static
  // condition that fails. Else kShortDensePrefill.
  IndexerReason reason = IndexerReason::kNotCudaAlike;
};
IndexerStaticDecision DecideIndexerStatic(const IndexerStaticInputs& in);

// Facts of one forward, read from the MLA attention's metadata.
struct IndexerDynamicInputs {
  bool has_attention_metadata = true;
  CudagraphMode cudagraph_runtime_mode = CudagraphMode::kNone;
  bool capturing = false;
  int64_t mla_num_decode_tokens = 0;
  int mla_num_prefills = 0;
  bool mla_use_dense_mha = false;
  // Only tells kForceMqa from kPrefillLongerThanTopk when use_dense_mha is
  // false; use_dense_mha already accounts for it.
  bool force_mqa = false;
};

struct IndexerDecision {
  IndexerAction action = IndexerAction::kScore;
  IndexerReason reason = IndexerReason::kNotCudaAlike;
  bool operator==(const IndexerDecision& o) const {
    return action == o.action && reason == o.reason;
  }
  bool operator!=(const IndexerDecision& o) const { return !(*this == o); }
};
IndexerDecision DecideIndexer(const IndexerStaticDecision& layer,
                              const IndexerDynamicInputs& forward);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_INDEXER_SKIP_H_
