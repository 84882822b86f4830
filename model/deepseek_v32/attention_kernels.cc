#include "model/deepseek_v32/attention_kernels.h"

#include "attention/kernel_lookup.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {

absl::StatusOr<AttentionKernels> AttentionKernels::Load(
    const platform::Registry& registry, absl::string_view platform_id) {
  using attention::GetKernel;
  AttentionKernels k;
  DSA_ASSIGN_OR_RETURN(k.indexer_k_write, GetKernel<attention::IndexerKWrite>(
                                              registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.indexer_q,
                       GetKernel<attention::IndexerQ>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.indexer_logits, GetKernel<attention::IndexerLogits>(
                                             registry, platform_id));
  DSA_ASSIGN_OR_RETURN(
      k.indexer_topk, GetKernel<attention::IndexerTopK>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.mla_cache_write, GetKernel<attention::MlaCacheWrite>(
                                              registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.sparse_mla,
                       GetKernel<attention::SparseMla>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(
      k.dense_mha_prefill,
      GetKernel<attention::DenseMhaPrefill>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.dense, DenseKernels::Load(registry, platform_id));
  return k;
}

absl::StatusOr<DenseKernels> DenseKernels::Load(
    const platform::Registry& registry, absl::string_view platform_id) {
  using attention::GetKernel;
  DenseKernels k;
  DSA_ASSIGN_OR_RETURN(k.gemm,
                       GetKernel<attention::Gemm>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.rms_norm,
                       GetKernel<attention::RmsNorm>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.rope,
                       GetKernel<attention::Rope>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(
      k.residual_add, GetKernel<attention::ResidualAdd>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.cast,
                       GetKernel<attention::Cast>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.random_fill,
                       GetKernel<attention::RandomFill>(registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.fp8_block_quant, GetKernel<attention::Fp8BlockQuant>(
                                              registry, platform_id));
  DSA_ASSIGN_OR_RETURN(k.fp8_block_gemm, GetKernel<attention::Fp8BlockGemm>(
                                             registry, platform_id));
  return k;
}

}  // namespace dsa::model::deepseek_v32
