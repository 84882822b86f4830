// Weights of one DeepseekV32 attention layer: the MLA projections and norms,
// and the lightning indexer's when the layer owns one. Layouts follow the
// Hugging Face checkpoints ([out_features, in_features], PyTorch's Linear).
//
// Random() draws deterministic weights from a seed, for tests, benchmarks and
// demos on presets without a checkpoint: the same (seed, layer) always gives
// the same weights on every machine (a fixed-algorithm generator, not
// std::normal_distribution, whose output the standard leaves unspecified).
#ifndef DSA_MODEL_DEEPSEEK_V32_LAYER_WEIGHTS_H_
#define DSA_MODEL_DEEPSEEK_V32_LAYER_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {

struct LayerWeights {
  // MLA.
  std::vector<float> q_a_proj;       // [q_lora_rank, hidden]
  std::vector<float> q_a_layernorm;  // [q_lora_rank] RMSNorm weight
  std::vector<float> q_b_proj;       // [heads * (nope + rope), q_lora_rank]
  std::vector<float> kv_a_proj_with_mqa;  // [kv_lora_rank + rope, hidden]
  std::vector<float> kv_a_layernorm;      // [kv_lora_rank] RMSNorm weight
  std::vector<float> kv_b_proj;           // [heads * (nope + v), kv_lora_rank]
  std::vector<float> o_proj;              // [hidden, heads * v]
  // Indexer (empty when the layer reuses another layer's top-k).
  std::vector<float> indexer_wq_b;  // [index_heads * index_dim, q_lora_rank]
  std::vector<float> indexer_wk;    // [index_dim, hidden]
  std::vector<float> indexer_k_norm_weight;  // [index_dim] LayerNorm
  std::vector<float> indexer_k_norm_bias;    // [index_dim]
  std::vector<float> indexer_weights_proj;   // [index_heads, hidden]

  bool has_indexer() const { return !indexer_wk.empty(); }

  // Deterministic random weights for `layer` of `config`: projections
  // uniform with variance 1/fan_in, norm weights near 1, biases near 0.
  static LayerWeights Random(const ModelConfig& config, int layer,
                             uint64_t seed);

  // InvalidArgument naming the first tensor whose size does not match
  // `config` (and whether `layer` owns an indexer).
  absl::Status Validate(const ModelConfig& config, int layer) const;
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_LAYER_WEIGHTS_H_
