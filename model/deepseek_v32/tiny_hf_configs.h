// Hugging Face config.json contents of tiny models for tests and fuzz seeds,
// written once where more than one target needs the same one.
#ifndef DSA_MODEL_DEEPSEEK_V32_TINY_HF_CONFIGS_H_
#define DSA_MODEL_DEEPSEEK_V32_TINY_HF_CONFIGS_H_

#include "nlohmann/json.hpp"

namespace dsa::model::deepseek_v32 {

// A DeepseekV32ForCausalLM of DeepSeek-V3.2's layout at tiny widths (3
// layers, one MTP layer) with its YaRN rope scaling (factor 40 over 4096
// positions, mscale 1: the softmax scale times mscale^2). Json is
// nlohmann::json or nlohmann::ordered_json (whose dump keeps this order).
template <class Json>
Json TinyDeepseekV32YarnHfConfig() {
  return Json{
      {"architectures", {"DeepseekV32ForCausalLM"}},
      {"model_type", "deepseek_v32"},
      {"num_hidden_layers", 3},
      {"hidden_size", 256},
      {"num_attention_heads", 4},
      {"q_lora_rank", 128},
      {"kv_lora_rank", 128},
      {"qk_nope_head_dim", 64},
      {"qk_rope_head_dim", 32},
      {"v_head_dim", 64},
      {"max_position_embeddings", 163840},
      {"vocab_size", 500},
      {"index_n_heads", 4},
      {"index_head_dim", 64},
      {"index_topk", 64},
      {"num_nextn_predict_layers", 1},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 10000},
      {"rope_scaling",
       {{"type", "yarn"},
        {"factor", 40},
        {"original_max_position_embeddings", 4096},
        {"beta_fast", 32},
        {"beta_slow", 1},
        {"mscale", 1.0},
        {"mscale_all_dim", 1.0}}},
  };
}

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_TINY_HF_CONFIGS_H_
