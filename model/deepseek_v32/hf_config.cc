#include "model/deepseek_v32/hf_config.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "platform/plugin_file.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

using Json = nlohmann::json;

std::string Echo(absl::string_view s) {
  return platform::EchoForMessage(std::string_view(s.data(), s.size()));
}

// Reads fields of one JSON object, errors prefixed by "<source>: <where>".
class Fields {
 public:
  Fields(const Json& object, std::string source, std::string prefix)
      : object_(object),
        source_(std::move(source)),
        prefix_(std::move(prefix)) {}

  absl::Status Error(absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", prefix_, key, " ", what));
  }
  const Json* Find(absl::string_view key) const {
    auto it = object_.find(std::string(key));
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  // An integer (a JSON integer, or a number with an integral value).
  absl::Status Int(absl::string_view key, int64_t* out,
                   const int64_t* default_value = nullptr) const {
    const Json* v = Find(key);
    if (v == nullptr) {
      if (default_value == nullptr) return Error(key, "is missing");
      *out = *default_value;
      return absl::OkStatus();
    }
    if (v->is_number_integer() || v->is_number_unsigned()) {
      if (v->is_number_unsigned() &&
          v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return Error(key, "is too large");
      }
      *out = v->get<int64_t>();
      return absl::OkStatus();
    }
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
        *out = static_cast<int64_t>(d);
        return absl::OkStatus();
      }
    }
    return Error(key,
                 absl::StrCat("must be an integer, got ", Echo(v->dump())));
  }
  absl::Status Int32(absl::string_view key, int32_t* out,
                     const int64_t* default_value = nullptr) const {
    int64_t v = 0;
    DSA_RETURN_IF_ERROR(Int(key, &v, default_value));
    if (v < INT32_MIN || v > INT32_MAX) {
      return Error(key, absl::StrCat("is ", v, ", out of range"));
    }
    *out = static_cast<int32_t>(v);
    return absl::OkStatus();
  }
  absl::Status Double(absl::string_view key, double* out,
                      const double* default_value = nullptr) const {
    const Json* v = Find(key);
    if (v == nullptr) {
      if (default_value == nullptr) return Error(key, "is missing");
      *out = *default_value;
      return absl::OkStatus();
    }
    if (!v->is_number()) {
      return Error(key,
                   absl::StrCat("must be a number, got ", Echo(v->dump())));
    }
    *out = v->get<double>();
    return absl::OkStatus();
  }
  absl::Status Bool(absl::string_view key, bool* out,
                    bool default_value) const {
    const Json* v = Find(key);
    if (v == nullptr) {
      *out = default_value;
      return absl::OkStatus();
    }
    if (!v->is_boolean()) {
      return Error(
          key, absl::StrCat("must be true or false, got ", Echo(v->dump())));
    }
    *out = v->get<bool>();
    return absl::OkStatus();
  }
  absl::Status String(absl::string_view key, std::string* out) const {
    const Json* v = Find(key);
    if (v == nullptr) return Error(key, "is missing");
    if (!v->is_string()) {
      return Error(key,
                   absl::StrCat("must be a string, got ", Echo(v->dump())));
    }
    *out = v->get<std::string>();
    return absl::OkStatus();
  }

 private:
  const Json& object_;
  std::string source_;
  std::string prefix_;
};

constexpr const char* kArchitectures[] = {"DeepseekV32ForCausalLM",
                                          "GlmMoeDsaForCausalLM"};
constexpr const char* kModelTypes[] = {"deepseek_v32", "glm_moe_dsa"};

absl::Status ReadArchitecture(const Json& j, const Fields& f,
                              std::string* architecture) {
  if (const Json* archs = f.Find("architectures")) {
    if (!archs->is_array()) {
      return f.Error("architectures", "must be a list of class names");
    }
    for (const Json& a : *archs) {
      if (!a.is_string()) continue;
      for (int i = 0; i < 2; ++i) {
        if (a.get<std::string>() == kArchitectures[i]) {
          *architecture = kArchitectures[i];
          return absl::OkStatus();
        }
      }
    }
    return f.Error("architectures",
                   absl::StrCat("is ", Echo(archs->dump()),
                                "; supported: DeepseekV32ForCausalLM, "
                                "GlmMoeDsaForCausalLM"));
  }
  std::string model_type;
  if (!f.String("model_type", &model_type).ok()) {
    return f.Error("architectures",
                   "and model_type are missing: not a config.json of a "
                   "DeepSeek-V3.2-family model");
  }
  for (int i = 0; i < 2; ++i) {
    if (model_type == kModelTypes[i]) {
      *architecture = kArchitectures[i];
      return absl::OkStatus();
    }
  }
  return f.Error("model_type",
                 absl::StrCat("is \"", Echo(model_type),
                              "\"; supported: deepseek_v32, glm_moe_dsa"));
}

// rope_theta and the YaRN parameters, from rope_parameters (transformers v5)
// or rope_theta + rope_scaling (DeepSeek's and older configs).
absl::Status ReadRope(const Json& j, const Fields& f, const std::string& source,
                      DeepseekV32Config* p) {
  const Json* params = f.Find("rope_parameters");
  const Json* scaling = f.Find("rope_scaling");
  if (params != nullptr && !params->is_object()) {
    return f.Error("rope_parameters", "must be an object");
  }
  if (scaling != nullptr && !scaling->is_object()) {
    return f.Error("rope_scaling", "must be an object");
  }
  double theta = 10000.0;  // vLLM's and transformers' default
  const double default_theta = theta;
  if (params != nullptr && params->contains("rope_theta")) {
    DSA_RETURN_IF_ERROR(Fields(*params, source, "rope_parameters.")
                            .Double("rope_theta", &theta, &default_theta));
  } else {
    DSA_RETURN_IF_ERROR(f.Double("rope_theta", &theta, &default_theta));
  }
  p->set_rope_theta(theta);
  // The scaling's own fields: rope_parameters when it has a type, else
  // rope_scaling.
  const Json* s = nullptr;
  std::string where;
  if (params != nullptr &&
      (params->contains("rope_type") || params->contains("type"))) {
    s = params;
    where = "rope_parameters.";
  } else if (scaling != nullptr) {
    s = scaling;
    where = "rope_scaling.";
  }
  if (s == nullptr) return absl::OkStatus();
  const Fields sf(*s, source, where);
  std::string type;
  if (!sf.String("rope_type", &type).ok() && !sf.String("type", &type).ok()) {
    return sf.Error("rope_type", "is missing");
  }
  if (type == "default") return absl::OkStatus();
  if (type != "yarn" && type != "deepseek_yarn") {
    return absl::UnimplementedError(
        absl::StrCat(source, ": ", where, "rope_type \"", Echo(type),
                     "\" is not supported (default or yarn)"));
  }
  RopeScaling& y = *p->mutable_rope_scaling();
  y.set_type("yarn");
  double v = 0;
  DSA_RETURN_IF_ERROR(sf.Double("factor", &v));
  y.set_factor(v);
  int64_t original = 0;
  DSA_RETURN_IF_ERROR(sf.Int("original_max_position_embeddings", &original));
  y.set_original_max_position_embeddings(original);
  const double beta_fast = 32, beta_slow = 1, mscale = 1, mscale_all_dim = 0;
  DSA_RETURN_IF_ERROR(sf.Double("beta_fast", &v, &beta_fast));
  y.set_beta_fast(v);
  DSA_RETURN_IF_ERROR(sf.Double("beta_slow", &v, &beta_slow));
  y.set_beta_slow(v);
  DSA_RETURN_IF_ERROR(sf.Double("mscale", &v, &mscale));
  y.set_mscale(v);
  DSA_RETURN_IF_ERROR(sf.Double("mscale_all_dim", &v, &mscale_all_dim));
  y.set_mscale_all_dim(v);
  return absl::OkStatus();
}

// Which main layers own an indexer.
absl::Status ReadIndexPattern(const Fields& f, int num_layers,
                              IndexerConfig* ix) {
  std::vector<bool> full(num_layers, true);
  if (const Json* types = f.Find("indexer_types")) {
    if (!types->is_array() ||
        static_cast<int64_t>(types->size()) != num_layers) {
      return f.Error("indexer_types",
                     absl::StrCat("must be a list of ", num_layers,
                                  " \"full\" or \"shared\" (one per layer)"));
    }
    for (int i = 0; i < num_layers; ++i) {
      const Json& t = (*types)[i];
      if (!t.is_string() || (t.get<std::string>() != "full" &&
                             t.get<std::string>() != "shared")) {
        return f.Error(absl::StrCat("indexer_types[", i, "]"),
                       "must be \"full\" or \"shared\"");
      }
      full[i] = t.get<std::string>() == "full";
    }
  } else if (const Json* pattern = f.Find("index_topk_pattern")) {
    std::string chars;
    if (pattern->is_string()) {
      chars = pattern->get<std::string>();
    } else if (pattern->is_array()) {
      for (const Json& c : *pattern) {
        if (!c.is_string()) break;
        chars += c.get<std::string>();
      }
    }
    if (static_cast<int64_t>(chars.size()) != num_layers ||
        chars.find_first_not_of("FS") != std::string::npos) {
      return f.Error("index_topk_pattern",
                     absl::StrCat("must be ", num_layers,
                                  " characters F (full) or S (shared)"));
    }
    for (int i = 0; i < num_layers; ++i) full[i] = chars[i] == 'F';
  } else {
    int64_t freq = 0, offset = 0;
    const int64_t one = 1, two = 2;
    DSA_RETURN_IF_ERROR(f.Int("index_topk_freq", &freq, &one));
    DSA_RETURN_IF_ERROR(f.Int("index_skip_topk_offset", &offset, &two));
    freq = std::max<int64_t>(freq, 1);  // transformers' max(freq, 1)
    for (int i = 0; i < num_layers; ++i) {
      full[i] = std::max<int64_t>(i - offset + 1, 0) % freq == 0;
    }
  }
  bool all = true;
  for (bool b : full) all = all && b;
  if (all) {
    ix->set_all_layers(true);
    return absl::OkStatus();
  }
  IndexerLayerList* list = ix->mutable_layer_list();
  for (int i = 0; i < num_layers; ++i) {
    if (full[i]) list->add_layers(i);
  }
  return absl::OkStatus();
}

absl::Status ReadQuantization(const Fields& f, const std::string& source,
                              WeightQuantization* q) {
  const Json* qc = f.Find("quantization_config");
  if (qc == nullptr) return absl::OkStatus();
  if (!qc->is_object())
    return f.Error("quantization_config", "must be an object");
  const Fields qf(*qc, source, "quantization_config.");
  std::string method;
  DSA_RETURN_IF_ERROR(qf.String("quant_method", &method));
  if (method != "fp8") {
    return absl::UnimplementedError(absl::StrCat(
        source, ": quantization_config.quant_method \"", Echo(method),
        "\" is not supported (fp8 with block scales, e4m3, is)"));
  }
  if (const Json* fmt = qf.Find("fmt")) {
    if (!fmt->is_string() || fmt->get<std::string>() != "e4m3") {
      return qf.Error("fmt", absl::StrCat("is ", Echo(fmt->dump()),
                                          ", only e4m3 is supported"));
    }
  }
  const Json* block = qf.Find("weight_block_size");
  if (block == nullptr || !block->is_array() || block->size() != 2 ||
      !(*block)[0].is_number_integer() || !(*block)[1].is_number_integer() ||
      (*block)[0].get<int64_t>() < 1 || (*block)[1].get<int64_t>() < 1 ||
      (*block)[0].get<int64_t>() > kMaxDim ||
      (*block)[1].get<int64_t>() > kMaxDim) {
    return qf.Error("weight_block_size",
                    "must be [rows, cols] of positive integers (per-tensor "
                    "fp8 scales are not supported)");
  }
  q->fp8 = true;
  q->block_rows = (*block)[0].get<int64_t>();
  q->block_cols = (*block)[1].get<int64_t>();
  return absl::OkStatus();
}

std::string PresetStyleName(absl::string_view name) {
  std::string out;
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    out += ok ? c : '-';
    if (out.size() >= 64) break;
  }
  return out.empty() ? "checkpoint" : out;
}

}  // namespace

absl::StatusOr<HfModelConfig> ParseHfConfig(absl::string_view text,
                                            absl::string_view name,
                                            absl::string_view source_view) {
  const std::string source(source_view);
  Json j;
  try {
    j = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": not valid JSON: ", platform::EchoForMessage(e.what(), 160)));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a JSON object"));
  }
  const Fields f(j, source, "");
  std::string architecture;
  WeightQuantization quantization;
  DSA_RETURN_IF_ERROR(ReadArchitecture(j, f, &architecture));
  DeepseekV32Config p;
  p.set_name(PresetStyleName(name));
  p.set_hf_model(source);
  int32_t v = 0;
#define DSA_READ_INT(field)                 \
  DSA_RETURN_IF_ERROR(f.Int32(#field, &v)); \
  p.set_##field(v);
  DSA_READ_INT(num_hidden_layers)
  DSA_READ_INT(hidden_size)
  DSA_READ_INT(num_attention_heads)
  DSA_READ_INT(q_lora_rank)
  DSA_READ_INT(kv_lora_rank)
  DSA_READ_INT(qk_nope_head_dim)
  DSA_READ_INT(qk_rope_head_dim)
  DSA_READ_INT(v_head_dim)
  DSA_READ_INT(vocab_size)
#undef DSA_READ_INT
  int64_t max_pos = 0;
  DSA_RETURN_IF_ERROR(f.Int("max_position_embeddings", &max_pos));
  p.set_max_position_embeddings(max_pos);
  const int64_t no_mtp = 0;
  DSA_RETURN_IF_ERROR(f.Int32("num_nextn_predict_layers", &v, &no_mtp));
  p.set_num_nextn_predict_layers(v);
  double eps = 0;
  const double default_eps = 1e-6;
  DSA_RETURN_IF_ERROR(f.Double("rms_norm_eps", &eps, &default_eps));
  p.set_rms_norm_eps(eps);
  DSA_RETURN_IF_ERROR(ReadRope(j, f, source, &p));
  bool mla_interleave = true;
  DSA_RETURN_IF_ERROR(f.Bool("rope_interleave", &mla_interleave, true));
  p.set_mla_rope_style(mla_interleave ? MLA_ROPE_INTERLEAVED : MLA_ROPE_NEOX);

  IndexerConfig& ix = *p.mutable_indexer();
  DSA_RETURN_IF_ERROR(f.Int32("index_n_heads", &v));
  ix.set_index_n_heads(v);
  DSA_RETURN_IF_ERROR(f.Int32("index_head_dim", &v));
  ix.set_index_head_dim(v);
  DSA_RETURN_IF_ERROR(f.Int32("index_topk", &v));
  ix.set_index_topk(v);
  bool indexer_interleave = false;
  DSA_RETURN_IF_ERROR(
      f.Bool("indexer_rope_interleave", &indexer_interleave, false));
  ix.set_rope_style(indexer_interleave ? INDEXER_ROPE_INTERLEAVED
                                       : INDEXER_ROPE_NEOX);
  if (p.num_hidden_layers() < 1 || p.num_hidden_layers() > kMaxLayers) {
    return f.Error("num_hidden_layers",
                   absl::StrCat("is ", p.num_hidden_layers(), ", expected 1..",
                                kMaxLayers));
  }
  DSA_RETURN_IF_ERROR(ReadIndexPattern(f, p.num_hidden_layers(), &ix));
  DSA_RETURN_IF_ERROR(ReadQuantization(f, source, &quantization));
  DSA_ASSIGN_OR_RETURN(ModelConfig config,
                       ModelConfig::FromProto(std::move(p), source));
  return HfModelConfig{std::move(config), quantization, architecture};
}

absl::StatusOr<HfModelConfig> LoadHfConfigFile(const std::string& path) {
  std::string text, error;
  if (!platform::ReadRegularFile(path, kMaxConfigJsonBytes, &text, &error)) {
    struct stat st;
    const bool missing = ::stat(path.c_str(), &st) != 0 && errno == ENOENT;
    return missing ? absl::NotFoundError(error)
                   : absl::InvalidArgumentError(error);
  }
  // Named after the checkpoint directory: ".../GLM-5.1-FP8/config.json" is
  // "glm-5.1-fp8".
  std::string dir = path;
  const size_t slash = dir.find_last_of('/');
  dir = slash == std::string::npos ? "." : dir.substr(0, slash);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t base = dir.find_last_of('/');
  std::string name = base == std::string::npos ? dir : dir.substr(base + 1);
  if (name == "." || name == ".." || name.empty()) name = "checkpoint";
  return ParseHfConfig(
      text, name,
      platform::EchoForMessage(path, platform::kMaxEchoedPathChars));
}

}  // namespace dsa::model::deepseek_v32
