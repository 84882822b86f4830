#include "model/deepseek_v32/layer_weights.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace dsa::model::deepseek_v32 {
namespace {

// SplitMix64: a fixed, portable generator.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float Symmetric() {
    return static_cast<float>(static_cast<double>(Next() >> 11) * 0x1p-52 -
                              1.0);
  }

 private:
  uint64_t state_;
};

std::vector<float> Uniform(SplitMix64& rng, int64_t n, float scale,
                           float offset = 0.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = offset + scale * rng.Symmetric();
  return v;
}

// Uniform on [-a, a] has variance a^2/3: a = sqrt(3 / fan_in) gives 1/fan_in.
std::vector<float> Projection(SplitMix64& rng, int64_t out, int64_t in) {
  return Uniform(rng, out * in, static_cast<float>(std::sqrt(3.0 / in)));
}

absl::Status CheckSize(const std::vector<float>& v, int64_t expected,
                       const char* name, int layer) {
  if (static_cast<int64_t>(v.size()) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " weights: ", name, " has ", v.size(),
                     " values, expected ", expected));
  }
  return absl::OkStatus();
}

}  // namespace

LayerWeights LayerWeights::Random(const ModelConfig& config, int layer,
                                  uint64_t seed) {
  const DeepseekV32Config& c = config.proto();
  const int64_t hidden = c.hidden_size();
  const int64_t heads = c.num_attention_heads();
  const int64_t nope = c.qk_nope_head_dim(), rope = c.qk_rope_head_dim();
  SplitMix64 rng(seed * 0x100000001b3ull + static_cast<uint64_t>(layer) + 1);
  LayerWeights w;
  w.q_a_proj = Projection(rng, c.q_lora_rank(), hidden);
  w.q_a_layernorm = Uniform(rng, c.q_lora_rank(), 0.1f, 1.0f);
  w.q_b_proj = Projection(rng, heads * (nope + rope), c.q_lora_rank());
  w.kv_a_proj_with_mqa = Projection(rng, c.kv_lora_rank() + rope, hidden);
  w.kv_a_layernorm = Uniform(rng, c.kv_lora_rank(), 0.1f, 1.0f);
  w.kv_b_proj =
      Projection(rng, heads * (nope + c.v_head_dim()), c.kv_lora_rank());
  w.o_proj = Projection(rng, hidden, heads * c.v_head_dim());
  if (config.owns_indexer(layer)) {
    const int64_t ih = c.indexer().index_n_heads();
    const int64_t id = c.indexer().index_head_dim();
    w.indexer_wq_b = Projection(rng, ih * id, c.q_lora_rank());
    w.indexer_wk = Projection(rng, id, hidden);
    w.indexer_k_norm_weight = Uniform(rng, id, 0.1f, 1.0f);
    w.indexer_k_norm_bias = Uniform(rng, id, 0.1f);
    w.indexer_weights_proj = Projection(rng, ih, hidden);
  }
  return w;
}

absl::Status LayerWeights::Validate(const ModelConfig& config,
                                    int layer) const {
  const DeepseekV32Config& c = config.proto();
  const int64_t hidden = c.hidden_size();
  const int64_t heads = c.num_attention_heads();
  const int64_t nope = c.qk_nope_head_dim(), rope = c.qk_rope_head_dim();
  const struct {
    const std::vector<float>& v;
    int64_t n;
    const char* name;
  } mla[] = {
      {q_a_proj, c.q_lora_rank() * hidden, "q_a_proj"},
      {q_a_layernorm, c.q_lora_rank(), "q_a_layernorm"},
      {q_b_proj, heads * (nope + rope) * c.q_lora_rank(), "q_b_proj"},
      {kv_a_proj_with_mqa, (c.kv_lora_rank() + rope) * hidden,
       "kv_a_proj_with_mqa"},
      {kv_a_layernorm, c.kv_lora_rank(), "kv_a_layernorm"},
      {kv_b_proj, heads * (nope + c.v_head_dim()) * c.kv_lora_rank(),
       "kv_b_proj"},
      {o_proj, hidden * heads * c.v_head_dim(), "o_proj"},
  };
  for (const auto& t : mla) {
    if (absl::Status s = CheckSize(t.v, t.n, t.name, layer); !s.ok()) return s;
  }
  const bool owns = config.owns_indexer(layer);
  const int64_t ih = c.indexer().index_n_heads();
  const int64_t id = c.indexer().index_head_dim();
  const struct {
    const std::vector<float>& v;
    int64_t n;
    const char* name;
  } indexer[] = {
      {indexer_wq_b, owns ? ih * id * c.q_lora_rank() : 0, "indexer_wq_b"},
      {indexer_wk, owns ? id * hidden : 0, "indexer_wk"},
      {indexer_k_norm_weight, owns ? id : 0, "indexer_k_norm_weight"},
      {indexer_k_norm_bias, owns ? id : 0, "indexer_k_norm_bias"},
      {indexer_weights_proj, owns ? ih * hidden : 0, "indexer_weights_proj"},
  };
  for (const auto& t : indexer) {
    if (absl::Status s = CheckSize(t.v, t.n, t.name, layer); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace dsa::model::deepseek_v32
