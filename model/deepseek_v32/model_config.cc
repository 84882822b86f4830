#include "model/deepseek_v32/model_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "model/deepseek_v32/presets_embedded.h"
#include "platform/plugin_file.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

// Preset files are a few hundred bytes; anything this large is not one.
constexpr int64_t kMaxConfigFileBytes = 1 << 20;

// The most of a parse error message an error echoes: protobuf quotes the
// offending token, which may be the rest of a long line.
constexpr size_t kMaxParseErrorChars = 120;

// Collects the parser's first error instead of letting protobuf log it.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty()) {
      // The parser counts from 0; editors count from 1.
      error_ =
          absl::StrCat("line ", line + 1, ", column ", column + 1, ": ",
                       platform::EchoForMessage(message, kMaxParseErrorChars));
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber,
                  const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

// Builds the validation errors: "<source>: <field> <what>".
class Checker {
 public:
  explicit Checker(std::string source) : source_(std::move(source)) {}

  absl::Status Error(absl::string_view field, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", field, " ", what));
  }

  // `value` in [lo, hi].
  absl::Status InRange(absl::string_view field, int64_t value, int64_t lo,
                       int64_t hi) const {
    if (value < lo || value > hi) {
      return Error(
          field, absl::StrCat("must be in [", lo, ", ", hi, "], got ", value));
    }
    return absl::OkStatus();
  }

  absl::Status Dim(absl::string_view field, int64_t value) const {
    return InRange(field, value, 1, kMaxDim);
  }

 private:
  std::string source_;
};

bool IsValidPresetName(absl::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
  });
}

absl::Status ValidateIndexer(const DeepseekV32Config& p, const Checker& c) {
  if (!p.has_indexer()) return c.Error("indexer", "must be set");
  const IndexerConfig& ix = p.indexer();
  DSA_RETURN_IF_ERROR(c.Dim("indexer.index_n_heads", ix.index_n_heads()));
  DSA_RETURN_IF_ERROR(c.Dim("indexer.index_head_dim", ix.index_head_dim()));
  DSA_RETURN_IF_ERROR(c.InRange("indexer.index_topk", ix.index_topk(), 1,
                                p.max_position_embeddings()));
  // The indexer ropes the first qk_rope_head_dim dims of each of its heads.
  if (p.qk_rope_head_dim() > ix.index_head_dim()) {
    return c.Error("qk_rope_head_dim",
                   absl::StrCat("(", p.qk_rope_head_dim(),
                                ") must not exceed indexer.index_head_dim (",
                                ix.index_head_dim(),
                                "): the indexer ropes "
                                "the first qk_rope_head_dim dims of a head"));
  }
  if (ix.hadamard_rotation() &&
      (ix.index_head_dim() & (ix.index_head_dim() - 1)) != 0) {
    return c.Error("indexer.hadamard_rotation",
                   absl::StrCat("needs index_head_dim a power of two (the "
                                "Walsh-Hadamard transform), got ",
                                ix.index_head_dim()));
  }
  if (ix.rope_style() != INDEXER_ROPE_NEOX &&
      ix.rope_style() != INDEXER_ROPE_INTERLEAVED) {
    return c.Error("indexer.rope_style",
                   "must be INDEXER_ROPE_NEOX or INDEXER_ROPE_INTERLEAVED");
  }
  switch (ix.owner_layers_case()) {
    case IndexerConfig::kAllLayers:
      if (!ix.all_layers()) {
        return c.Error("indexer.all_layers",
                       "is false, which names no layer; list the layers in "
                       "indexer.layer_list instead");
      }
      return absl::OkStatus();
    case IndexerConfig::kLayerList: {
      const auto& layers = ix.layer_list().layers();
      if (layers.empty()) {
        return c.Error("indexer.layer_list.layers", "must not be empty");
      }
      // A layer without an indexer reuses an earlier owner's top-k, so the
      // first layer must own one.
      if (layers[0] != 0) {
        return c.Error("indexer.layer_list.layers[0]",
                       absl::StrCat("must be 0 (the first layer has no "
                                    "earlier indexer to share), got ",
                                    layers[0]));
      }
      for (int i = 0; i < layers.size(); ++i) {
        const std::string field =
            absl::StrCat("indexer.layer_list.layers[", i, "]");
        if (layers[i] < 0 || layers[i] >= p.num_hidden_layers()) {
          return c.Error(field,
                         absl::StrCat("= ", layers[i], " is out of range [0, ",
                                      p.num_hidden_layers(), ")"));
        }
        if (i > 0 && layers[i] <= layers[i - 1]) {
          return c.Error(field, absl::StrCat("= ", layers[i],
                                             " is not greater than the "
                                             "previous entry ",
                                             layers[i - 1]));
        }
      }
      return absl::OkStatus();
    }
    case IndexerConfig::OWNER_LAYERS_NOT_SET:
      break;
  }
  return c.Error("indexer.all_layers",
                 "or indexer.layer_list must be set (which layers own an "
                 "indexer)");
}

// A finite value in [lo, hi].
absl::Status FiniteInRange(const Checker& c, absl::string_view field,
                           double value, double lo, double hi) {
  if (!std::isfinite(value) || value < lo || value > hi) {
    return c.Error(field, absl::StrCat("must be a finite number in [", lo, ", ",
                                       hi, "], got ", value));
  }
  return absl::OkStatus();
}

absl::Status ValidateRope(const DeepseekV32Config& p, const Checker& c) {
  if (!std::isfinite(p.rope_theta()) || !(p.rope_theta() > 1.0)) {
    return c.Error("rope_theta",
                   absl::StrCat("must be a finite number above 1 (the rope "
                                "base), got ",
                                p.rope_theta()));
  }
  if (p.mla_rope_style() != MLA_ROPE_INTERLEAVED &&
      p.mla_rope_style() != MLA_ROPE_NEOX) {
    return c.Error("mla_rope_style",
                   "must be MLA_ROPE_INTERLEAVED or MLA_ROPE_NEOX");
  }
  if (!p.has_rope_scaling()) return absl::OkStatus();
  const RopeScaling& y = p.rope_scaling();
  if (y.type() != "yarn") {
    return c.Error("rope_scaling.type",
                   absl::StrCat("must be \"yarn\" (the only rope scaling of "
                                "the family), got \"",
                                platform::EchoForMessage(y.type()), "\""));
  }
  DSA_RETURN_IF_ERROR(
      FiniteInRange(c, "rope_scaling.factor", y.factor(), 1.0, 1e6));
  DSA_RETURN_IF_ERROR(c.InRange("rope_scaling.original_max_position_embeddings",
                                y.original_max_position_embeddings(), 1,
                                kMaxPositions));
  DSA_RETURN_IF_ERROR(
      FiniteInRange(c, "rope_scaling.beta_fast", y.beta_fast(), 1e-6, 1e6));
  DSA_RETURN_IF_ERROR(
      FiniteInRange(c, "rope_scaling.beta_slow", y.beta_slow(), 1e-6, 1e6));
  DSA_RETURN_IF_ERROR(
      FiniteInRange(c, "rope_scaling.mscale", y.mscale(), 0.0, 1e3));
  return FiniteInRange(c, "rope_scaling.mscale_all_dim", y.mscale_all_dim(),
                       0.0, 1e3);
}

absl::Status Validate(const DeepseekV32Config& p, const Checker& c) {
  if (!IsValidPresetName(p.name())) {
    return c.Error("name",
                   absl::StrCat("must be non-empty and made of "
                                "[a-z0-9._-], got \"",
                                platform::EchoForMessage(p.name()), "\""));
  }
  DSA_RETURN_IF_ERROR(
      c.InRange("num_hidden_layers", p.num_hidden_layers(), 1, kMaxLayers));
  DSA_RETURN_IF_ERROR(c.InRange("num_nextn_predict_layers",
                                p.num_nextn_predict_layers(), 0,
                                kMaxMtpLayers));
  DSA_RETURN_IF_ERROR(c.Dim("hidden_size", p.hidden_size()));
  DSA_RETURN_IF_ERROR(c.Dim("num_attention_heads", p.num_attention_heads()));
  // The indexer's query comes from the q latent, so DSA needs one.
  DSA_RETURN_IF_ERROR(c.Dim("q_lora_rank", p.q_lora_rank()));
  DSA_RETURN_IF_ERROR(c.Dim("kv_lora_rank", p.kv_lora_rank()));
  if (p.kv_lora_rank() % kLatentScaleGroup != 0) {
    return c.Error("kv_lora_rank",
                   absl::StrCat("(", p.kv_lora_rank(),
                                ") must be a multiple "
                                "of ",
                                kLatentScaleGroup,
                                ", the fp8 latent cache's scale group"));
  }
  DSA_RETURN_IF_ERROR(c.Dim("qk_nope_head_dim", p.qk_nope_head_dim()));
  DSA_RETURN_IF_ERROR(c.Dim("qk_rope_head_dim", p.qk_rope_head_dim()));
  if (p.qk_rope_head_dim() % 2 != 0) {
    return c.Error("qk_rope_head_dim",
                   absl::StrCat("(", p.qk_rope_head_dim(),
                                ") must be even: rope rotates pairs"));
  }
  DSA_RETURN_IF_ERROR(c.Dim("v_head_dim", p.v_head_dim()));
  DSA_RETURN_IF_ERROR(c.InRange("max_position_embeddings",
                                p.max_position_embeddings(), 1, kMaxPositions));
  DSA_RETURN_IF_ERROR(c.InRange("vocab_size", p.vocab_size(), 1, kMaxVocab));
  if (!std::isfinite(p.rms_norm_eps()) || !(p.rms_norm_eps() > 0.0) ||
      p.rms_norm_eps() > 1.0) {
    return c.Error("rms_norm_eps",
                   absl::StrCat("must be a finite number in (0, 1], got ",
                                p.rms_norm_eps()));
  }
  DSA_RETURN_IF_ERROR(ValidateRope(p, c));
  return ValidateIndexer(p, c);
}

}  // namespace

double YarnMscale(double factor, double mscale) {
  if (factor <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(factor) + 1.0;
}

double ComputeMlaSoftmaxScale(const DeepseekV32Config& p) {
  const double qk = p.qk_nope_head_dim() + p.qk_rope_head_dim();
  double scale = 1.0 / std::sqrt(qk);
  if (p.has_rope_scaling()) {
    const double m = YarnMscale(p.rope_scaling().factor(),
                                p.rope_scaling().mscale_all_dim());
    scale *= m * m;
  }
  return scale;
}

absl::StatusOr<ModelConfig> ModelConfig::FromProto(DeepseekV32Config proto,
                                                   absl::string_view source) {
  Checker checker(source.empty()
                      ? (proto.name().empty() ? "model config" : proto.name())
                      : std::string(source));
  DSA_RETURN_IF_ERROR(Validate(proto, checker));

  ModelConfig config;
  const int num_main = proto.num_hidden_layers();
  const int num_total = num_main + proto.num_nextn_predict_layers();
  config.topk_source_.assign(num_total, 0);
  const IndexerConfig& ix = proto.indexer();
  if (ix.owner_layers_case() == IndexerConfig::kAllLayers) {
    for (int layer = 0; layer < num_main; ++layer) {
      config.topk_source_[layer] = layer;
    }
  } else {
    std::vector<bool> owns(num_main, false);
    for (int layer : ix.layer_list().layers()) owns[layer] = true;
    int source_layer = 0;  // validated: layer 0 owns one
    for (int layer = 0; layer < num_main; ++layer) {
      if (owns[layer]) source_layer = layer;
      config.topk_source_[layer] = source_layer;
    }
  }
  for (int layer = num_main; layer < num_total; ++layer) {
    config.topk_source_[layer] = layer;  // MTP layers own their indexer
  }
  for (int layer = 0; layer < num_total; ++layer) {
    if (config.topk_source_[layer] == layer) ++config.num_indexer_layers_;
  }
  config.proto_ = std::move(proto);
  config.mla_softmax_scale_ = ComputeMlaSoftmaxScale(config.proto_);
  return config;
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (int i = 0; i < internal::kNumEmbeddedPresets; ++i) {
    names.emplace_back(internal::kEmbeddedPresets[i].name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view textproto,
                                             absl::string_view source) {
  DeepseekV32Config proto;
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(textproto), &proto)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a valid DeepseekV32Config textproto: ",
                     errors.error().empty() ? "parse error" : errors.error()));
  }
  return ModelConfig::FromProto(std::move(proto), source);
}

absl::StatusOr<ModelConfig> LoadPreset(absl::string_view name) {
  for (int i = 0; i < internal::kNumEmbeddedPresets; ++i) {
    const internal::EmbeddedPreset& preset = internal::kEmbeddedPresets[i];
    if (name != preset.name) continue;
    DSA_ASSIGN_OR_RETURN(
        ModelConfig config,
        ParseModelConfig(preset.textproto, absl::StrCat("preset ", name)));
    // The file name is the preset's id; a mismatch would make the same
    // preset answer to two names.
    if (config.name() != name) {
      return absl::InvalidArgumentError(
          absl::StrCat("preset ", name, ": name is \"", config.name(),
                       "\", not the file's name \"", name, "\""));
    }
    return config;
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown model preset \"",
      platform::EchoForMessage(std::string_view(name.data(), name.size())),
      "\"; known: ", absl::StrJoin(PresetNames(), ", ")));
}

absl::StatusOr<ModelConfig> LoadModelConfigFile(const std::string& path) {
  // Only a regular file, read without blocking: a fifo or a device given as
  // a model is an error, not a hang.
  std::string text, error;
  if (!platform::ReadRegularFile(path, kMaxConfigFileBytes, &text, &error)) {
    const std::string message = absl::StrCat("model config file ", error);
    struct stat st;
    const bool missing = ::stat(path.c_str(), &st) != 0 && errno == ENOENT;
    return missing ? absl::NotFoundError(message)
                   : absl::InvalidArgumentError(message);
  }
  return ParseModelConfig(
      text, platform::EchoForMessage(path, platform::kMaxEchoedPathChars));
}

absl::StatusOr<ModelConfig> LoadModelConfig(absl::string_view name_or_path) {
  absl::StatusOr<ModelConfig> preset = LoadPreset(name_or_path);
  if (preset.ok() || !absl::IsNotFound(preset.status())) return preset;
  if (absl::StrContains(name_or_path, '/') ||
      absl::EndsWith(name_or_path, ".textproto")) {
    return LoadModelConfigFile(std::string(name_or_path));
  }
  return absl::NotFoundError(absl::StrCat(
      preset.status().message(), " (or give a path to a .textproto file)"));
}

}  // namespace dsa::model::deepseek_v32
