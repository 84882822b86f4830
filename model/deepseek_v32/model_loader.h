// What a --model argument names, as one model: a preset ("glm-5.1"), a
// textproto of DeepseekV32Config, a Hugging Face config.json (a model of
// that config with weights drawn from a seed), or a checkpoint directory
// (config.json and its safetensors weights). Every host (prefill_bench,
// plan, the stack library behind dsa_torch.stack) goes through LoadModel, so
// they all accept the same four.
//
// A checkpoint is opened and every tensor the model needs checked when it
// loads (checkpoint_weights.h); its weights are read only when a runner is
// created from it (DeepseekV32Model::Create with weight_source()), straight
// into device memory through a bounded staging buffer.
#ifndef DSA_MODEL_DEEPSEEK_V32_MODEL_LOADER_H_
#define DSA_MODEL_DEEPSEEK_V32_MODEL_LOADER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/deepseek_v32/checkpoint_weights.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {

enum class ModelSourceKind { kPreset, kTextproto, kConfigJson, kCheckpoint };
// "preset", "textproto", "config.json", "checkpoint".
const char* ModelSourceKindName(ModelSourceKind kind);

struct LoadModelOptions {
  // False: the configuration only (a checkpoint's weights are not opened);
  // what `plan` needs.
  bool open_weights = true;
  // Overrides the model option of the same name (config.json has no field
  // for it): the indexer's Hadamard rotation.
  std::optional<bool> indexer_hadamard_rotation;
};

class LoadedModel {
 public:
  const ModelConfig& config() const { return config_; }
  ModelSourceKind kind() const { return kind_; }
  // One line saying what was loaded, e.g. "checkpoint /m/GLM-5.1-FP8: 1809
  // tensors in 142 files, 27.4 GiB of bf16 attention weights (stored as fp8
  // e4m3 with 128x128 block scales: kept for fp8 weights, dequantised for
  // bf16)" or "preset glm-5.1 (random weights)".
  const std::string& description() const { return description_; }
  // Whether the checkpoint stores fp8 matrices (what --weights defaults to).
  bool holds_fp8_weights() const {
    return weights_ != nullptr && weights_->holds_fp8();
  }
  bool has_checkpoint_weights() const { return weights_ != nullptr; }
  const CheckpointWeights* checkpoint_weights() const { return weights_.get(); }

  // The checkpoint's weights for a runner (DeepseekV32Model::Create); null
  // for a model without them, whose runner draws its weights from a seed.
  const WeightSource* weight_source() const { return weights_.get(); }

  // The embeddings of `ids` into out[ids.size() * hidden]: the checkpoint's
  // embedding table (the MTP layers' own for `mtp` where it has one), or
  // rows drawn from `seed` (RandomEmbeddingValue) without a checkpoint.
  // OutOfRange for an id outside the vocabulary.
  absl::Status Embed(absl::Span<const int64_t> ids, bool mtp, uint64_t seed,
                     float* out) const;

 private:
  friend absl::StatusOr<LoadedModel> LoadModel(absl::string_view,
                                               const LoadModelOptions&);
  LoadedModel(ModelConfig config, ModelSourceKind kind)
      : config_(std::move(config)), kind_(kind) {}
  ModelConfig config_;
  ModelSourceKind kind_;
  std::string description_;
  std::unique_ptr<CheckpointWeights> weights_;
};

// Resolves `spec`: an embedded preset's name; else a path: a directory
// holding model.safetensors or model.safetensors.index.json (a checkpoint,
// with its config.json), a directory holding only config.json, a file whose
// name ends in .json (a config.json), any other file (a textproto). NotFound
// for a name that is no preset and no path; the loaders' errors otherwise.
absl::StatusOr<LoadedModel> LoadModel(absl::string_view spec,
                                      const LoadModelOptions& options = {});

// A LoadProgress that rewrites one line on `out` ("loading weights: 3.2 of
// 27.4 GiB") when `out` is a terminal and the load is at least 1 GiB;
// nothing otherwise.
LoadProgress TerminalLoadProgress(std::FILE* out);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_MODEL_LOADER_H_
