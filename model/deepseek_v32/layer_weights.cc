#include "model/deepseek_v32/layer_weights.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/random_fill.h"

namespace dsa::model::deepseek_v32 {
namespace {

// Uniform on [-a, a] has variance a^2/3: a = sqrt(3 / fan_in) gives 1/fan_in.
float ProjectionScale(int64_t fan_in) {
  return static_cast<float>(std::sqrt(3.0 / static_cast<double>(fan_in)));
}

}  // namespace

std::vector<WeightSpec> LayerWeightSpecs(const ModelConfig& config, int layer) {
  const DeepseekV32Config& c = config.proto();
  const int64_t hidden = c.hidden_size();
  const int64_t heads = c.num_attention_heads();
  const int64_t nope = c.qk_nope_head_dim(), rope = c.qk_rope_head_dim();
  const int64_t q_lora = c.q_lora_rank(), kv_lora = c.kv_lora_rank();
  auto projection = [](WeightId id, const char* name, const char* hf_name,
                       int64_t out, int64_t in) {
    WeightSpec spec{id,   name, hf_name, out, in, ProjectionScale(in),
                    0.0f, false};
    spec.quantized =
        id != WeightId::kIndexerWeightsProj && id != WeightId::kEhProj;
    spec.fp8_product = spec.quantized && id != WeightId::kKvBProj;
    return spec;
  };
  auto vector = [](WeightId id, const char* name, const char* hf_name,
                   int64_t n, float offset) {
    return WeightSpec{id, name, hf_name, n, 1, 0.1f, offset, true};
  };
  std::vector<WeightSpec> specs = {
      projection(WeightId::kQAProj, "q_a_proj", "self_attn.q_a_proj.weight",
                 q_lora, hidden),
      vector(WeightId::kQALayerNorm, "q_a_layernorm",
             "self_attn.q_a_layernorm.weight", q_lora, 1.0f),
      projection(WeightId::kQBProj, "q_b_proj", "self_attn.q_b_proj.weight",
                 heads * (nope + rope), q_lora),
      projection(WeightId::kKvAProjWithMqa, "kv_a_proj_with_mqa",
                 "self_attn.kv_a_proj_with_mqa.weight", kv_lora + rope, hidden),
      vector(WeightId::kKvALayerNorm, "kv_a_layernorm",
             "self_attn.kv_a_layernorm.weight", kv_lora, 1.0f),
      projection(WeightId::kKvBProj, "kv_b_proj", "self_attn.kv_b_proj.weight",
                 heads * (nope + c.v_head_dim()), kv_lora),
      projection(WeightId::kOProj, "o_proj", "self_attn.o_proj.weight", hidden,
                 heads * c.v_head_dim()),
  };
  if (config.owns_indexer(layer)) {
    const int64_t ih = c.indexer().index_n_heads();
    const int64_t id = c.indexer().index_head_dim();
    specs.push_back(projection(WeightId::kIndexerWqB, "indexer_wq_b",
                               "self_attn.indexer.wq_b.weight", ih * id,
                               q_lora));
    specs.push_back(projection(WeightId::kIndexerWk, "indexer_wk",
                               "self_attn.indexer.wk.weight", id, hidden));
    specs.push_back(vector(WeightId::kIndexerKNormWeight,
                           "indexer_k_norm_weight",
                           "self_attn.indexer.k_norm.weight", id, 1.0f));
    specs.push_back(vector(WeightId::kIndexerKNormBias, "indexer_k_norm_bias",
                           "self_attn.indexer.k_norm.bias", id, 0.0f));
    specs.push_back(
        projection(WeightId::kIndexerWeightsProj, "indexer_weights_proj",
                   "self_attn.indexer.weights_proj.weight", ih, hidden));
  }
  specs.push_back(vector(WeightId::kInputLayerNorm, "input_layernorm",
                         "input_layernorm.weight", hidden, 1.0f));
  if (config.is_mtp_layer(layer)) {
    specs.push_back(projection(WeightId::kEhProj, "eh_proj", "eh_proj.weight",
                               hidden, 2 * hidden));
    specs.push_back(
        vector(WeightId::kEnorm, "enorm", "enorm.weight", hidden, 1.0f));
    specs.push_back(
        vector(WeightId::kHnorm, "hnorm", "hnorm.weight", hidden, 1.0f));
    if (layer == config.num_main_layers()) {
      specs.push_back(vector(WeightId::kFinalNorm, "final_norm",
                             "model.norm.weight", hidden, 1.0f));
    }
  }
  return specs;
}

absl::Status WeightSource::ReadFp8(int, const WeightSpec& spec, int64_t,
                                   int64_t, uint8_t*) const {
  return absl::FailedPreconditionError(
      absl::StrCat(spec.name, ": this weight source holds no fp8 codes"));
}

absl::Status WeightSource::ReadFp8Scales(int, const WeightSpec& spec,
                                         float*) const {
  return absl::FailedPreconditionError(
      absl::StrCat(spec.name, ": this weight source holds no fp8 scales"));
}

uint64_t WeightStream(int layer, WeightId id) {
  return static_cast<uint64_t>(layer) * 64 + static_cast<uint64_t>(id);
}

std::vector<float>& LayerWeights::tensor(WeightId id) {
  return const_cast<std::vector<float>&>(
      static_cast<const LayerWeights*>(this)->tensor(id));
}

const std::vector<float>& LayerWeights::tensor(WeightId id) const {
  switch (id) {
    case WeightId::kQAProj:
      return q_a_proj;
    case WeightId::kQALayerNorm:
      return q_a_layernorm;
    case WeightId::kQBProj:
      return q_b_proj;
    case WeightId::kKvAProjWithMqa:
      return kv_a_proj_with_mqa;
    case WeightId::kKvALayerNorm:
      return kv_a_layernorm;
    case WeightId::kKvBProj:
      return kv_b_proj;
    case WeightId::kOProj:
      return o_proj;
    case WeightId::kIndexerWqB:
      return indexer_wq_b;
    case WeightId::kIndexerWk:
      return indexer_wk;
    case WeightId::kIndexerKNormWeight:
      return indexer_k_norm_weight;
    case WeightId::kIndexerKNormBias:
      return indexer_k_norm_bias;
    case WeightId::kInputLayerNorm:
      return input_layernorm;
    case WeightId::kEhProj:
      return eh_proj;
    case WeightId::kEnorm:
      return enorm;
    case WeightId::kHnorm:
      return hnorm;
    case WeightId::kFinalNorm:
      return final_norm;
    case WeightId::kIndexerWeightsProj:
    case WeightId::kCount:
      break;
  }
  return indexer_weights_proj;
}

float RandomEmbeddingValue(uint64_t seed, int64_t token, int64_t hidden_index,
                           int64_t hidden_size) {
  return attention::Bf16ToFloat(
      attention::FloatToBf16(attention::RandomFillValue(
          seed, kEmbeddingStream,
          static_cast<uint64_t>(token) * static_cast<uint64_t>(hidden_size) +
              static_cast<uint64_t>(hidden_index),
          1.7320508f, 0.0f)));
}

absl::Status HostWeightSource::ReadBf16(int layer, const WeightSpec& spec,
                                        int64_t begin, int64_t count,
                                        uint16_t* out) const {
  if (layer < 0 || layer >= static_cast<int>(weights_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("no host weights for layer ", layer));
  }
  const std::vector<float>& v = weights_[layer].tensor(spec.id);
  if (begin < 0 || count < 0 ||
      begin + count > static_cast<int64_t>(v.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " ", spec.name, ": elements [", begin,
                     ", ", begin + count, ") of ", v.size()));
  }
  for (int64_t i = 0; i < count; ++i) {
    out[i] = attention::FloatToBf16(v[begin + i]);
  }
  return absl::OkStatus();
}

LayerWeights LayerWeights::Random(const ModelConfig& config, int layer,
                                  uint64_t seed) {
  LayerWeights w;
  for (const WeightSpec& spec : LayerWeightSpecs(config, layer)) {
    std::vector<float>& v = w.tensor(spec.id);
    v.resize(static_cast<size_t>(spec.size()));
    const uint64_t stream = WeightStream(layer, spec.id);
    for (int64_t i = 0; i < spec.size(); ++i) {
      v[i] = attention::Bf16ToFloat(attention::FloatToBf16(
          attention::RandomFillValue(seed, stream, static_cast<uint64_t>(i),
                                     spec.scale, spec.offset)));
    }
  }
  return w;
}

absl::Status LayerWeights::Validate(const ModelConfig& config,
                                    int layer) const {
  const std::vector<WeightSpec> specs = LayerWeightSpecs(config, layer);
  for (int i = 0; i < kNumWeightIds; ++i) {
    const WeightId id = static_cast<WeightId>(i);
    int64_t expected = 0;
    const char* name = nullptr;
    for (const WeightSpec& s : specs) {
      if (s.id == id) {
        expected = s.size();
        name = s.name;
      }
    }
    const std::vector<float>& v = tensor(id);
    if (static_cast<int64_t>(v.size()) != expected) {
      // Names of the tensors a layer without an indexer (or a main layer)
      // must leave empty.
      static constexpr const char* kNames[] = {"q_a_proj",
                                               "q_a_layernorm",
                                               "q_b_proj",
                                               "kv_a_proj_with_mqa",
                                               "kv_a_layernorm",
                                               "kv_b_proj",
                                               "o_proj",
                                               "indexer_wq_b",
                                               "indexer_wk",
                                               "indexer_k_norm_weight",
                                               "indexer_k_norm_bias",
                                               "indexer_weights_proj",
                                               "input_layernorm",
                                               "eh_proj",
                                               "enorm",
                                               "hnorm",
                                               "final_norm"};
      static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumWeightIds);
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, " weights: ", name != nullptr ? name : kNames[i],
          " has ", v.size(), " values, expected ", expected));
    }
  }
  return absl::OkStatus();
}

}  // namespace dsa::model::deepseek_v32
