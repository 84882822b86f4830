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
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {

// The tensors of a layer, in a fixed order (their random streams depend on
// it: new tensors are appended).
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
  kInputLayerNorm,  // every layer: the RMSNorm before attention
  kEhProj,          // MTP layers: eh_proj over [enorm(embed); hnorm(h)]
  kEnorm,           // MTP layers
  kHnorm,           // MTP layers
  // The first MTP layer: the main model's final RMSNorm (model.norm), which
  // the main layers' output passes before hnorm (vLLM hands the MTP the
  // model's normed output).
  kFinalNorm,
  kCount,
};
inline constexpr int kNumWeightIds = static_cast<int>(WeightId::kCount);

// One tensor of a layer: [rows, cols] (cols = 1 for a vector), its name in
// a Hugging Face checkpoint after "model.layers.<layer>.", and how Random()
// draws it: offset + scale * u, u uniform in [-1, 1).
struct WeightSpec {
  WeightId id;
  const char* name;
  // "self_attn.q_a_proj.weight", ...; a name starting with "model." is the
  // whole name (a model-level tensor, model.norm.weight).
  const char* hf_name;
  int64_t rows = 0, cols = 1;
  float scale = 0.0f, offset = 0.0f;
  bool is_vector = false;  // a norm's weight or bias: shape [rows]
  // An FP8 checkpoint holds it as F8_E4M3 with a weight_scale_inv of
  // 128 x 128 blocks: the attention projections (DeepSeek-V3.2's and
  // GLM-5.x-FP8's Linear layers), not the norms, the indexer's weights_proj
  // (kept in bf16/f32, as vLLM's unquantised ReplicatedLinear), the MTP
  // layer's eh_proj (vLLM's plain nn.Linear), the embeddings or lm_head.
  bool quantized = false;
  // With fp8 weights (RuntimeOptions::weight_dtype) the step multiplies it
  // with fp8_block_gemm: every quantized projection but kv_b_proj, which the
  // attention ops read in bf16 (dequantised at load, as vLLM does for its
  // absorbed W_UK / W_UV).
  bool fp8_product = false;
  int64_t size() const { return rows * cols; }
};

// The tensors `layer` of `config` has: the MLA's and input_layernorm always,
// the indexer's only when the layer owns one (GLM-5.2's shared layers have
// none, whatever a checkpoint ships for them), eh_proj, enorm and hnorm on
// MTP layers. Projections are uniform with variance 1/fan_in, norm weights
// near 1, biases near 0.
std::vector<WeightSpec> LayerWeightSpecs(const ModelConfig& config, int layer);

// The model's embedding table, model.embed_tokens.weight [vocab, hidden],
// drawn for a model without a checkpoint: N(0, 1)-sized rows (uniform on
// [-sqrt(3), sqrt(3)) as RandomFill draws them, rounded to bf16), so that
// hidden states are of order 1 as real embeddings scaled by the first
// norms are.
inline constexpr uint64_t kEmbeddingStream = ~uint64_t{0};
float RandomEmbeddingValue(uint64_t seed, int64_t token, int64_t hidden_index,
                           int64_t hidden_size);

// Where a model's weights come from when they are not drawn from a seed (a
// checkpoint, host floats): each tensor as bf16 bits, a range of its
// row-major elements at a time, so that a loader can move it to the device
// through a bounded staging buffer.
//
// A source that holds a matrix as fp8 (an FP8 checkpoint) also hands it over
// as it is: e4m3fn codes and the float32 multipliers of its 128 x 128 blocks
// (w = code * scale_inv[row / 128, col / 128]), which a model with fp8
// weights uploads unchanged; ReadBf16 dequantises it.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Elements [begin, begin + count) of `layer`'s tensor `spec`.
  virtual absl::Status ReadBf16(int layer, const WeightSpec& spec,
                                int64_t begin, int64_t count,
                                uint16_t* out) const = 0;
  // Whether ReadFp8 and ReadFp8Scales give `layer`'s `spec`.
  virtual bool HoldsFp8Blocks(int layer, const WeightSpec& spec) const {
    return false;
  }
  // Codes [begin, begin + count) (row-major) of an fp8 matrix.
  virtual absl::Status ReadFp8(int layer, const WeightSpec& spec, int64_t begin,
                               int64_t count, uint8_t* out) const;
  // All [ceil(rows / 128), ceil(cols / 128)] scales of an fp8 matrix,
  // row-major.
  virtual absl::Status ReadFp8Scales(int layer, const WeightSpec& spec,
                                     float* out) const;
};

// Progress of a load: bytes of device weights written so far and in all.
using LoadProgress = std::function<void(int64_t done, int64_t total)>;

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
  std::vector<float> input_layernorm;        // [hidden] RMSNorm weight
  // MTP layers only.
  std::vector<float> eh_proj;     // [hidden, 2 * hidden]
  std::vector<float> enorm;       // [hidden]
  std::vector<float> hnorm;       // [hidden]
  std::vector<float> final_norm;  // [hidden], the first MTP layer only

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

// A WeightSource over host weights (one LayerWeights per layer), each value
// rounded to bf16.
class HostWeightSource : public WeightSource {
 public:
  explicit HostWeightSource(const std::vector<LayerWeights>& weights)
      : weights_(weights) {}
  absl::Status ReadBf16(int layer, const WeightSpec& spec, int64_t begin,
                        int64_t count, uint16_t* out) const override;

 private:
  const std::vector<LayerWeights>& weights_;
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_LAYER_WEIGHTS_H_
