// Model presets of the DeepSeek-V3.2 family (DeepSeek-V3.2, GLM-5.1, GLM-5.2
// and small CPU presets): loading, validation, and the per-layer facts the
// indexer-skip decision and the layer forward read on every step.
//
// Presets are textprotos of DeepseekV32Config (model_config.proto). The ones
// under presets/ are compiled into every binary that links this library, so
// LoadPreset("glm-5.1") works from any working directory; a file path loads
// any other. Both go through the same validation, which rejects an
// inconsistent preset with InvalidArgument naming the field.
//
// Layers are numbered main layers first, then MTP layers: with 78 main layers
// and one MTP layer, layer 78 is the MTP layer.
#ifndef DSA_MODEL_DEEPSEEK_V32_MODEL_CONFIG_H_
#define DSA_MODEL_DEEPSEEK_V32_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/deepseek_v32/model_config.pb.h"

namespace dsa::model::deepseek_v32 {

// Bounds on sizes, chosen so that every size of a valid config is
// representable in int64 with room to spare: a layer's tensors have at most
// 2^49 elements each (q_b_proj: heads x (nope + rope) x q_lora_rank), a
// token's activations take at most 2^37 bytes, and the whole stack's bf16
// weights (at most 1088 layers of under 2^51.6 bytes) at most 2^62 bytes.
// Sizes that also depend on a runtime's options (cache blocks, tokens a
// step, max_model_len) can still be past int64; they are computed with
// CheckedSize (platform/checked_size.h), and a runtime refuses options whose
// sizes it cannot count.
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxMtpLayers = 64;
inline constexpr int kMaxDim = 65536;
inline constexpr int kMaxVocab = 1 << 22;
// Token positions are int32 in the attention kernels.
inline constexpr int64_t kMaxPositions = (int64_t{1} << 31) - 1;
// The fp8 MLA latent cache keeps one scale per this many latent values.
inline constexpr int kLatentScaleGroup = 128;

// A validated preset. Cheap to copy.
class ModelConfig {
 public:
  // Validates `proto`. InvalidArgument names the first inconsistent field,
  // prefixed by `source` (a preset name or a file path; the proto's name
  // when empty).
  static absl::StatusOr<ModelConfig> FromProto(DeepseekV32Config proto,
                                               absl::string_view source = "");

  const DeepseekV32Config& proto() const { return proto_; }
  const std::string& name() const { return proto_.name(); }

  int num_main_layers() const { return proto_.num_hidden_layers(); }
  int num_mtp_layers() const { return proto_.num_nextn_predict_layers(); }
  // Main + MTP layers; valid layer ids are [0, num_layers()).
  int num_layers() const { return static_cast<int>(topk_source_.size()); }
  bool is_valid_layer(int layer) const {
    return layer >= 0 && layer < num_layers();
  }
  // False for an id out of range.
  bool is_mtp_layer(int layer) const {
    return is_valid_layer(layer) && layer >= num_main_layers();
  }
  // Whether the layer runs an indexer of its own (writes its K cache, and
  // scores unless the decision skips). False for an id out of range.
  bool owns_indexer(int layer) const {
    return is_valid_layer(layer) && topk_source_[layer] == layer;
  }
  // The layer whose indexer's top-k this layer reads: itself when it owns an
  // indexer, else the nearest earlier layer that owns one (GLM-5.2's shared
  // layers). -1 for an id out of range.
  int topk_source_layer(int layer) const {
    return is_valid_layer(layer) ? topk_source_[layer] : -1;
  }
  // Layers owning an indexer, MTP layers included.
  int num_indexer_layers() const { return num_indexer_layers_; }

  int index_topk() const { return proto_.indexer().index_topk(); }
  int64_t max_position_embeddings() const {
    return proto_.max_position_embeddings();
  }
  // Query/key head dim of the dense MHA prefill: nope + rope (192 or 256).
  int qk_head_dim() const {
    return proto_.qk_nope_head_dim() + proto_.qk_rope_head_dim();
  }
  // One token's MLA latent cache entry: kv_lora_rank + qk_rope_head_dim (576
  // for the real presets).
  int latent_cache_dim() const {
    return proto_.kv_lora_rank() + proto_.qk_rope_head_dim();
  }
  double rms_norm_eps() const { return proto_.rms_norm_eps(); }
  // The softmax scale of the MLA (sparse and dense alike):
  // qk_head_dim^-0.5, times YaRN's mscale(factor, mscale_all_dim)^2 when the
  // model has YaRN (x1.874 for DeepSeek-V3.2), as vLLM computes it.
  double mla_softmax_scale() const { return mla_softmax_scale_; }

 private:
  ModelConfig() = default;
  DeepseekV32Config proto_;
  std::vector<int> topk_source_;  // per layer, main then MTP
  int num_indexer_layers_ = 0;
  double mla_softmax_scale_ = 0.0;
};

// YaRN's attention factor, vLLM's yarn_get_mscale: 0.1 * mscale * ln(factor)
// + 1, and 1 for factor <= 1.
double YarnMscale(double factor, double mscale);

// ModelConfig::mla_softmax_scale of a (validated) config.
double ComputeMlaSoftmaxScale(const DeepseekV32Config& config);

// Names of the embedded presets, sorted.
std::vector<std::string> PresetNames();

// An embedded preset. NotFound listing the known names for an unknown one.
absl::StatusOr<ModelConfig> LoadPreset(absl::string_view name);

// Parses and validates a textproto. `source` names it in errors.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view textproto,
                                             absl::string_view source);

// Reads, parses and validates a textproto file: a regular file of at most
// 1 MiB (a fifo, directory or device is refused without blocking). NotFound
// when the path names nothing, InvalidArgument for any other problem. Errors
// echo at most 200 characters of the path and, for a syntax error, the line,
// column and protobuf's message (capped), never the file's content.
absl::StatusOr<ModelConfig> LoadModelConfigFile(const std::string& path);

// An embedded preset by name, else, when the argument looks like a path
// (contains '/' or ends in ".textproto"), a file. NotFound naming the known
// presets otherwise.
absl::StatusOr<ModelConfig> LoadModelConfig(absl::string_view name_or_path);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_MODEL_CONFIG_H_
