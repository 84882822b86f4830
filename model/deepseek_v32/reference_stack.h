// A float64 reference of the DeepseekV32 attention stack for tests: every
// layer over whole sequences with plain dense causal attention computed from
// the weights (no caches, no absorption, no indexer), the MLA latent cache's
// rounding (bf16, or fp8 tiles with power-of-two scales) mirrored so that
// tolerances can stay tight. It equals the model whenever top-k keeps every
// causal key, i.e. for sequences of at most index_topk tokens.
#ifndef DSA_MODEL_DEEPSEEK_V32_REFERENCE_STACK_H_
#define DSA_MODEL_DEEPSEEK_V32_REFERENCE_STACK_H_

#include <vector>

#include "attention/dtypes/dtype.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {

struct ReferenceOutput {
  std::vector<double> hidden;      // [tokens, hidden] after the main layers
  std::vector<double> mtp_hidden;  // after the MTP layers (empty without)
};

// One sequence of `tokens` tokens at positions 0..tokens-1; `x` is
// [tokens, hidden]. latent_cache_dtype: kBFloat16, kFloat8E4m3fn or
// kFloat8E4m3fnuz.
ReferenceOutput ReferenceForward(const ModelConfig& config,
                                 const std::vector<LayerWeights>& weights,
                                 const std::vector<float>& x, int64_t tokens,
                                 attention::DType latent_cache_dtype,
                                 double rope_theta);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_REFERENCE_STACK_H_
