// A Hugging Face config.json of DeepseekV32ForCausalLM (DeepSeek-V3.2) or
// GlmMoeDsaForCausalLM (GLM-5, GLM-5.1, GLM-5.2) as a DeepseekV32Config,
// reading every field the attention stack needs the way vLLM reads it:
//   dimensions     num_hidden_layers, hidden_size, num_attention_heads,
//                  q_lora_rank, kv_lora_rank, qk_nope_head_dim,
//                  qk_rope_head_dim, v_head_dim, max_position_embeddings,
//                  vocab_size, index_n_heads, index_head_dim, index_topk,
//                  num_nextn_predict_layers (default 0);
//   rope           rope_theta (default 10000) and rope_scaling, or
//                  transformers' rope_parameters {rope_theta, rope_type,
//                  ...}; YaRN's beta_fast, beta_slow, mscale and
//                  mscale_all_dim default to 32, 1, 1, 0 as in vLLM;
//                  indexer_rope_interleave (vLLM: absent is NeoX) and
//                  rope_interleave (absent: interleaved; vLLM ignores it);
//   norms          rms_norm_eps (default 1e-6);
//   index pattern  GLM-5.2's IndexShare: indexer_types ("full"/"shared", as
//                  transformers saves it), else index_topk_pattern ("F"/"S"
//                  per layer), else index_topk_freq and
//                  index_skip_topk_offset (layer i owns an indexer when
//                  max(i - offset + 1, 0) % freq == 0; defaults 1 and 2);
//   weights        quantization_config: none, or quant_method "fp8" with
//                  fmt e4m3 and weight_block_size [rows, cols] (each fp8
//                  matrix has a weight_scale_inv of per-block multipliers).
// Any other value of a field that changes the computation (an unknown
// architecture, rope type or quant_method) is an error naming the field,
// never a guess.
#ifndef DSA_MODEL_DEEPSEEK_V32_HF_CONFIG_H_
#define DSA_MODEL_DEEPSEEK_V32_HF_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {

// How the checkpoint stores its matrices.
struct WeightQuantization {
  bool fp8 = false;  // e4m3fn matrices with weight_scale_inv
  int64_t block_rows = 128, block_cols = 128;
};

struct HfModelConfig {
  ModelConfig config;
  WeightQuantization quantization;
  std::string architecture;  // "DeepseekV32ForCausalLM", ...
};

// The most of a config.json this reads (real ones are a few KiB).
inline constexpr size_t kMaxConfigJsonBytes = size_t{4} << 20;

// Converts config.json text. `name` becomes the config's name (a preset-
// style id; characters outside [a-z0-9._-] become '-'), `source` names the
// file in errors and is kept as hf_model.
absl::StatusOr<HfModelConfig> ParseHfConfig(absl::string_view json,
                                            absl::string_view name,
                                            absl::string_view source);

// Reads and converts a config.json file (a regular file of at most
// kMaxConfigJsonBytes), named after its directory.
absl::StatusOr<HfModelConfig> LoadHfConfigFile(const std::string& path);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_HF_CONFIG_H_
