// The attention kernels of one platform, looked up once from the registry.
// The layer forward calls the ops through this table, so a test or a probe
// can substitute wrappers (to count calls, say) without touching the layer.
#ifndef DSA_MODEL_DEEPSEEK_V32_ATTENTION_KERNELS_H_
#define DSA_MODEL_DEEPSEEK_V32_ATTENTION_KERNELS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attention/ops.h"
#include "platform/registry.h"

namespace dsa::model::deepseek_v32 {

struct AttentionKernels {
  attention::IndexerKWrite::Fn indexer_k_write = nullptr;
  attention::IndexerQ::Fn indexer_q = nullptr;
  attention::IndexerLogits::Fn indexer_logits = nullptr;
  attention::IndexerTopK::Fn indexer_topk = nullptr;
  attention::MlaCacheWrite::Fn mla_cache_write = nullptr;
  attention::SparseMla::Fn sparse_mla = nullptr;
  attention::DenseMhaPrefill::Fn dense_mha_prefill = nullptr;

  // All seven kernels of `platform_id`; NotFound naming the first missing op.
  static absl::StatusOr<AttentionKernels> Load(
      const platform::Registry& registry, absl::string_view platform_id);
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_ATTENTION_KERNELS_H_
