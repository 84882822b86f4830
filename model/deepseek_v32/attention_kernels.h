// The kernels of one platform a layer step calls, looked up once from the
// registry: the seven attention ops and the dense ops of the step
// (attention/dense_ops.h). The layer forward calls the ops through this
// table, so a test or a probe can substitute wrappers (to count calls, say)
// without touching the layer.
#ifndef DSA_MODEL_DEEPSEEK_V32_ATTENTION_KERNELS_H_
#define DSA_MODEL_DEEPSEEK_V32_ATTENTION_KERNELS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attention/dense_ops.h"
#include "attention/kernel_lookup.h"
#include "attention/ops.h"
#include "platform/registry.h"

namespace dsa::model::deepseek_v32 {

// The dense ops: projections (bf16, and W8A8 fp8 with the weights' fp8
// block quantisation), norms, rope, casts, residual, random weights.
struct DenseKernels {
  attention::Kernel<attention::Gemm> gemm;
  attention::Kernel<attention::RmsNorm> rms_norm;
  attention::Kernel<attention::Rope> rope;
  attention::Kernel<attention::ResidualAdd> residual_add;
  attention::Kernel<attention::Cast> cast;
  attention::Kernel<attention::RandomFill> random_fill;
  attention::Kernel<attention::Fp8BlockQuant> fp8_block_quant;
  attention::Kernel<attention::Fp8BlockGemm> fp8_block_gemm;

  // All eight dense kernels of `platform_id`; NotFound naming the first
  // missing op.
  static absl::StatusOr<DenseKernels> Load(const platform::Registry& registry,
                                           absl::string_view platform_id);
};

struct AttentionKernels {
  attention::Kernel<attention::IndexerKWrite> indexer_k_write;
  attention::Kernel<attention::IndexerQ> indexer_q;
  attention::Kernel<attention::IndexerLogits> indexer_logits;
  attention::Kernel<attention::IndexerTopK> indexer_topk;
  attention::Kernel<attention::MlaCacheWrite> mla_cache_write;
  attention::Kernel<attention::SparseMla> sparse_mla;
  attention::Kernel<attention::DenseMhaPrefill> dense_mha_prefill;
  DenseKernels dense;

  // All seven attention kernels of `platform_id` and its dense kernels;
  // NotFound naming the first missing op.
  static absl::StatusOr<AttentionKernels> Load(
      const platform::Registry& registry, absl::string_view platform_id);
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_ATTENTION_KERNELS_H_
