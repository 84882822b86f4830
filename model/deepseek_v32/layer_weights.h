// Weights of one DeepseekV32 attention layer: the MLA projections and norms,
// and the lightning indexer's when the layer owns one. Layouts follow the
// Hugging Face checkpoints ([out_features, in_features], PyTorch's Linear).
//
// The model keeps its weights on the device as bfloat16 (the dense gemm op
// multiplies bf16 weights with fp32 accumulation); the host copies here are
// floats, converted once when a model is created from them.
//
// Random() draws deterministic weights from a seed, for tests, benchmarks and
// demos on presets without a checkpoint. Every value is RandomFill's
// (attention/dense_ops.h) for (seed, WeightStream(layer, id), index),
// rounded to bf16: a model created from a seed draws the same bits on its
// device with the random_fill op, so the host weights here are exactly what
// every platform multiplies with, and the float64 reference can use them.
#ifndef DSA_MODEL_DEEPSEEK_V32_LAYER_WEIGHTS_H_
#define DSA_MODEL_DEEPSEEK_V32_LAYER_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {

// The tensors of a layer, in a fixed order (their random streams depend on
// it).
enum class WeightId : int {
  kQAProj = 0,
  kQALayerNorm,
  kQBProj,
  kKvAProjWithMqa,
  kKvALayerNorm,
  kKvBProj,
  kOProj,
  kIndexerWqB,
  kIndexerWk,
  kIndexerKNormWeight,
  kIndexerKNormBias,
  kIndexerWeightsProj,
  kCount,
};
inline constexpr int kNumWeightIds = static_cast<int>(WeightId::kCount);

// One tensor of a layer: [rows, cols] (cols = 1 for a vector), and how
// Random() draws it: offset + scale * u, u uniform in [-1, 1).
struct WeightSpec {
  WeightId id;
  const char* name;
  int64_t rows = 0, cols = 1;
  float scale = 0.0f, offset = 0.0f;
  int64_t size() const { return rows * cols; }
};

// The tensors `layer` of `config` has (the indexer's only when it owns one).
// Projections are uniform with variance 1/fan_in, norm weights near 1,
// biases near 0.
std::vector<WeightSpec> LayerWeightSpecs(const ModelConfig& config, int layer);

// RandomFill's stream of a layer's tensor.
uint64_t WeightStream(int layer, WeightId id);

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

  std::vector<float>& tensor(WeightId id);
  const std::vector<float>& tensor(WeightId id) const;

  // Deterministic random weights for `layer` of `config` (see above).
  static LayerWeights Random(const ModelConfig& config, int layer,
                             uint64_t seed);

  // InvalidArgument naming the first tensor whose size does not match
  // `config` (and whether `layer` owns an indexer).
  absl::Status Validate(const ModelConfig& config, int layer) const;
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_LAYER_WEIGHTS_H_
