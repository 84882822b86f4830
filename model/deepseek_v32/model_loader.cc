#include "model/deepseek_v32/model_loader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/checkpoint/checkpoint.h"
#include "model/deepseek_v32/hf_config.h"
#include "platform/plugin_file.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string Join(const std::string& dir, const char* name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string Gib(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1 << 30));
}

absl::StatusOr<ModelConfig> WithOptions(ModelConfig config,
                                        const LoadModelOptions& options) {
  if (!options.indexer_hadamard_rotation.has_value() ||
      config.proto().indexer().hadamard_rotation() ==
          *options.indexer_hadamard_rotation) {
    return config;
  }
  DeepseekV32Config proto = config.proto();
  proto.mutable_indexer()->set_hadamard_rotation(
      *options.indexer_hadamard_rotation);
  return ModelConfig::FromProto(std::move(proto));
}

}  // namespace

const char* ModelSourceKindName(ModelSourceKind kind) {
  switch (kind) {
    case ModelSourceKind::kPreset:
      return "preset";
    case ModelSourceKind::kTextproto:
      return "textproto";
    case ModelSourceKind::kConfigJson:
      return "config.json";
    case ModelSourceKind::kCheckpoint:
      return "checkpoint";
  }
  return "?";
}

absl::StatusOr<LoadedModel> LoadModel(absl::string_view spec_view,
                                      const LoadModelOptions& options) {
  const std::string spec(spec_view);
  const std::string echoed =
      platform::EchoForMessage(spec, platform::kMaxEchoedPathChars);
  absl::StatusOr<ModelConfig> preset = LoadPreset(spec);
  if (preset.ok()) {
    DSA_ASSIGN_OR_RETURN(ModelConfig config,
                         WithOptions(*std::move(preset), options));
    LoadedModel m(std::move(config), ModelSourceKind::kPreset);
    m.description_ = absl::StrCat("preset ", spec, " (random weights)");
    return m;
  }
  if (!absl::IsNotFound(preset.status())) return preset.status();
  if (!Exists(spec)) {
    if (absl::EndsWith(spec, ".textproto")) {
      return LoadModelConfigFile(spec).status();  // its NotFound message
    }
    if (absl::StrContains(spec, '/') || absl::EndsWith(spec, ".json")) {
      return absl::NotFoundError(
          absl::StrCat(echoed, ": no such file or directory"));
    }
    return absl::NotFoundError(absl::StrCat(
        preset.status().message(),
        " (or give a checkpoint directory, a config.json or a .textproto)"));
  }
  if (!IsDirectory(spec) && !absl::EndsWith(spec, ".json")) {
    DSA_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfigFile(spec));
    DSA_ASSIGN_OR_RETURN(config, WithOptions(std::move(config), options));
    LoadedModel m(std::move(config), ModelSourceKind::kTextproto);
    m.description_ = absl::StrCat("textproto ", echoed, " (random weights)");
    return m;
  }
  const bool dir = IsDirectory(spec);
  const std::string config_path = dir ? Join(spec, "config.json") : spec;
  const bool has_weights =
      dir && (Exists(Join(spec, checkpoint::kSingleFileName)) ||
              Exists(Join(spec, checkpoint::kIndexFileName)));
  if (dir && !Exists(config_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        echoed, ": no config.json (not a Hugging Face checkpoint directory)"));
  }
  DSA_ASSIGN_OR_RETURN(HfModelConfig hf, LoadHfConfigFile(config_path));
  DSA_ASSIGN_OR_RETURN(ModelConfig config,
                       WithOptions(std::move(hf.config), options));
  if (!has_weights) {
    LoadedModel m(std::move(config), ModelSourceKind::kConfigJson);
    m.description_ = absl::StrCat(
        "config.json ",
        platform::EchoForMessage(config_path, platform::kMaxEchoedPathChars),
        " (", hf.architecture, "; no weights: random weights)");
    return m;
  }
  LoadedModel m(std::move(config), ModelSourceKind::kCheckpoint);
  m.description_ = absl::StrCat("checkpoint ", echoed, " (", hf.architecture,
                                "; weights not opened)");
  if (!options.open_weights) return m;
  DSA_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::Checkpoint> ckpt,
                       checkpoint::Checkpoint::Open(spec));
  DSA_ASSIGN_OR_RETURN(
      m.weights_,
      CheckpointWeights::Open(m.config_, hf.quantization, std::move(ckpt)));
  const checkpoint::Checkpoint& c = m.weights_->checkpoint();
  m.description_ =
      absl::StrCat("checkpoint ", echoed, " (", hf.architecture,
                   "): ", c.num_tensors(), " tensors in ", c.files().size(),
                   c.files().size() == 1 ? " file" : " files", ", ",
                   Gib(m.weights_->model_bytes()), " of bf16 attention weights",
                   m.weights_->holds_fp8()
                       ? absl::StrCat(" (stored as fp8 e4m3 with ",
                                      hf.quantization.block_rows, "x",
                                      hf.quantization.block_cols,
                                      " block scales: kept for fp8 weights, "
                                      "dequantised for bf16)")
                       : "");
  return m;
}

absl::Status LoadedModel::Embed(absl::Span<const int64_t> ids, bool mtp,
                                uint64_t seed, float* out) const {
  const int64_t hidden = config_.proto().hidden_size();
  const int64_t vocab = config_.proto().vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::OutOfRangeError(
          absl::StrCat("input id ", ids[i], " at ", i,
                       " is outside the vocabulary of ", vocab));
    }
    float* row = out + static_cast<int64_t>(i) * hidden;
    if (weights_ != nullptr) {
      DSA_RETURN_IF_ERROR(weights_->EmbeddingRow(mtp, ids[i], row));
    } else {
      for (int64_t d = 0; d < hidden; ++d) {
        row[d] = RandomEmbeddingValue(seed, ids[i], d, hidden);
      }
    }
  }
  return absl::OkStatus();
}

LoadProgress TerminalLoadProgress(std::FILE* out) {
  if (out == nullptr || ::isatty(::fileno(out)) == 0) return {};
  auto last_percent = std::make_shared<int>(-1);
  return [out, last_percent](int64_t done, int64_t total) {
    if (total < (int64_t{1} << 30)) return;
    const int percent = static_cast<int>(100 * done / total);
    if (percent == *last_percent) return;
    *last_percent = percent;
    std::fprintf(out, "\r\033[Kloading weights: %s of %s (%d%%)%s",
                 Gib(done).c_str(), Gib(total).c_str(), percent,
                 done == total ? "\n" : "");
    std::fflush(out);
  };
}

}  // namespace dsa::model::deepseek_v32
