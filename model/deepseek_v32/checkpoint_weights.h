// A Hugging Face checkpoint's weights as a DeepseekV32 stack reads them
// (model/checkpoint finds the tensors; this maps the model onto them): every
// layer's tensors by their Hugging Face names (LayerWeightSpecs' hf_name under
// model.layers.<layer>., model.norm.weight, model.embed_tokens.weight),
// checked when opened, before anything is computed: a missing tensor, a
// shape or dtype that disagrees with the config, an fp8 matrix without its
// weight_scale_inv (or one of the wrong shape) is an InvalidArgument naming
// the tensor, its file and what the config expects. Tensors the model does
// not run are not read: the MLPs and experts of an attention-only stack,
// lm_head, and the indexer tensors a checkpoint ships for layers that share
// another layer's top-k (GLM-5.2).
//
// Element types: BF16, F16 and F32 are rounded to bf16; F8_E4M3 (OCP e4m3fn)
// is either handed over as stored (codes and weight_scale_inv, for a model
// with fp8 weights: HoldsFp8Blocks, ReadFp8, ReadFp8Scales) or dequantised,
// w = code * weight_scale_inv[row / block_rows, col / block_cols] in
// float32, then rounded to bf16 (DeepSeek's weight_dequant; what a model
// with bf16 weights reads, and kv_b_proj always).
#ifndef DSA_MODEL_DEEPSEEK_V32_CHECKPOINT_WEIGHTS_H_
#define DSA_MODEL_DEEPSEEK_V32_CHECKPOINT_WEIGHTS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/checkpoint.h"
#include "model/deepseek_v32/hf_config.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {

inline constexpr char kEmbedTokensName[] = "model.embed_tokens.weight";

class CheckpointWeights : public WeightSource {
 public:
  static absl::StatusOr<std::unique_ptr<CheckpointWeights>> Open(
      const ModelConfig& config, const WeightQuantization& quantization,
      std::unique_ptr<checkpoint::Checkpoint> checkpoint);

  absl::Status ReadBf16(int layer, const WeightSpec& spec, int64_t begin,
                        int64_t count, uint16_t* out) const override;
  // An F8_E4M3 matrix with 128 x 128 blocks (weight_block_size [128, 128]),
  // handed over as stored: its codes and its weight_scale_inv (F32, or BF16
  // widened). Other block sizes are only dequantised (ReadBf16).
  bool HoldsFp8Blocks(int layer, const WeightSpec& spec) const override;
  absl::Status ReadFp8(int layer, const WeightSpec& spec, int64_t begin,
                       int64_t count, uint8_t* out) const override;
  absl::Status ReadFp8Scales(int layer, const WeightSpec& spec,
                             float* out) const override;

  // Row `token` of the embedding table, as floats: the MTP layers' own
  // (model.layers.<N>.embed_tokens.weight, which DeepSeek's checkpoints
  // ship) when `mtp` and present, else model.embed_tokens.weight.
  absl::Status EmbeddingRow(bool mtp, int64_t token, float* out) const;

  const checkpoint::Checkpoint& checkpoint() const { return *checkpoint_; }
  // Bytes of bf16 weights the model reads from it.
  int64_t model_bytes() const { return model_bytes_; }
  // Whether it holds fp8 matrices (dequantised for bf16 weights, kept as
  // they are for fp8 weights where HoldsFp8Blocks).
  bool dequantises_fp8() const { return fp8_tensors_ > 0; }
  bool holds_fp8() const { return fp8_tensors_ > 0; }
  const WeightQuantization& quantization() const { return quantization_; }

 private:
  struct Tensor {
    checkpoint::TensorRef data;
    checkpoint::TensorRef scale;  // fp8 only
    int64_t rows = 0, cols = 1;
  };
  CheckpointWeights() = default;
  // Element i of a tensor as a float (dequantised).
  float Element(const Tensor& t, int64_t i) const;

  std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
  WeightQuantization quantization_;
  std::vector<std::array<Tensor, kNumWeightIds>> layers_;
  Tensor embed_, mtp_embed_;
  bool has_mtp_embed_ = false;
  int64_t model_bytes_ = 0;
  int fp8_tensors_ = 0;
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_CHECKPOINT_WEIGHTS_H_
