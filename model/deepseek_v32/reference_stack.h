// A float64 reference of the DeepseekV32 attention stack for tests: every
// layer over whole sequences with plain dense causal attention computed from
// the weights (no caches, no absorption, no indexer), the MLA latent cache's
// rounding (bf16, or fp8 tiles with power-of-two scales) mirrored so that
// tolerances can stay tight. It equals the model whenever top-k keeps every
// causal key, i.e. for sequences of at most index_topk tokens.
//
// The model's own numerics, from its config, written out here: h = h +
// o_proj(attn(input_layernorm(h))) per layer; RMSNorm eps rms_norm_eps; rope
// at theta with YaRN's frequencies where the config has them (angles in
// float64), in the MLA's rope style; the softmax scale with YaRN's mscale^2;
// MTP layers on eh_proj([enorm(embedding) | hnorm(h)]), the embedding zero at
// position 0 and h = model.norm(main output) for the first.
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
  // [tokens, hidden] after every layer, main then MTP.
  std::vector<std::vector<double>> layer_hidden;
};

// One sequence of `tokens` tokens at positions 0..tokens-1; `x` is
// [tokens, hidden], the main layers' input. `mtp_embeddings` is the MTP
// layers' token input, [tokens, hidden] (empty: x, as the runner takes it).
// latent_cache_dtype: kBFloat16, kFloat8E4m3fn or kFloat8E4m3fnuz.
ReferenceOutput ReferenceForward(const ModelConfig& config,
                                 const std::vector<LayerWeights>& weights,
                                 const std::vector<float>& x, int64_t tokens,
                                 attention::DType latent_cache_dtype,
                                 const std::vector<float>& mtp_embeddings = {});

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_REFERENCE_STACK_H_
