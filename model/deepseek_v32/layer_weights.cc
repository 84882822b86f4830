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
  auto projection = [](WeightId id, const char* name, int64_t out, int64_t in) {
    return WeightSpec{id, name, out, in, ProjectionScale(in), 0.0f};
  };
  std::vector<WeightSpec> specs = {
      projection(WeightId::kQAProj, "q_a_proj", q_lora, hidden),
      {WeightId::kQALayerNorm, "q_a_layernorm", q_lora, 1, 0.1f, 1.0f},
      projection(WeightId::kQBProj, "q_b_proj", heads * (nope + rope), q_lora),
      projection(WeightId::kKvAProjWithMqa, "kv_a_proj_with_mqa",
                 kv_lora + rope, hidden),
      {WeightId::kKvALayerNorm, "kv_a_layernorm", kv_lora, 1, 0.1f, 1.0f},
      projection(WeightId::kKvBProj, "kv_b_proj",
                 heads * (nope + c.v_head_dim()), kv_lora),
      projection(WeightId::kOProj, "o_proj", hidden, heads * c.v_head_dim()),
  };
  if (config.owns_indexer(layer)) {
    const int64_t ih = c.indexer().index_n_heads();
    const int64_t id = c.indexer().index_head_dim();
    specs.push_back(
        projection(WeightId::kIndexerWqB, "indexer_wq_b", ih * id, q_lora));
    specs.push_back(projection(WeightId::kIndexerWk, "indexer_wk", id, hidden));
    specs.push_back({WeightId::kIndexerKNormWeight, "indexer_k_norm_weight", id,
                     1, 0.1f, 1.0f});
    specs.push_back({WeightId::kIndexerKNormBias, "indexer_k_norm_bias", id, 1,
                     0.1f, 0.0f});
    specs.push_back(projection(WeightId::kIndexerWeightsProj,
                               "indexer_weights_proj", ih, hidden));
  }
  return specs;
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
    case WeightId::kIndexerWeightsProj:
    case WeightId::kCount:
      break;
  }
  return indexer_weights_proj;
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
      // Names of the tensors a layer without an indexer must leave empty.
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
                                               "indexer_weights_proj"};
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, " weights: ", name != nullptr ? name : kNames[i],
          " has ", v.size(), " values, expected ", expected));
    }
  }
  return absl::OkStatus();
}

}  // namespace dsa::model::deepseek_v32
