#include "model/deepseek_v32/checkpoint_weights.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "platform/plugin_file.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

using checkpoint::TensorDType;
using checkpoint::TensorRef;

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string HfName(int layer, const WeightSpec& spec) {
  if (absl::StartsWith(spec.hf_name, "model.")) return spec.hf_name;
  return absl::StrCat("model.layers.", layer, ".", spec.hf_name);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise.
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float LoadScalar(const uint8_t* p, TensorDType dtype, int64_t i) {
  switch (dtype) {
    case TensorDType::kF32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case TensorDType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return attention::Bf16ToFloat(b);
    }
    case TensorDType::kF16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return HalfToFloat(b);
    }
    case TensorDType::kF8E4M3:
      return attention::Fp8ToFloat(p[i], attention::kE4m3fnTraits);
    default:
      return 0.0f;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointWeights>> CheckpointWeights::Open(
    const ModelConfig& config, const WeightQuantization& quantization,
    std::unique_ptr<checkpoint::Checkpoint> ckpt) {
  std::unique_ptr<CheckpointWeights> w(new CheckpointWeights());
  w->quantization_ = quantization;
  const std::string where = absl::StrCat(
      "checkpoint ",
      platform::EchoForMessage(ckpt->dir(), platform::kMaxEchoedPathChars));
  // One tensor, checked: present, a weight type, the expected shape, and for
  // fp8 its scales.
  auto resolve = [&](const std::string& name, int64_t rows, int64_t cols,
                     bool is_vector, const std::string& what,
                     Tensor* t) -> absl::Status {
    absl::StatusOr<TensorRef> ref = ckpt->Find(name);
    if (!ref.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": no tensor ", name, " (", what, ")"));
    }
    const std::string in = absl::StrCat(
        " in ", platform::EchoForMessage(ref->file->path(),
                                         platform::kMaxEchoedPathChars));
    const std::vector<int64_t> expected =
        is_vector ? std::vector<int64_t>{rows}
                  : std::vector<int64_t>{rows, cols};
    if (ref->info->shape != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": tensor ", name, in, " has shape ",
                       ShapeText(ref->info->shape), ", expected ",
                       ShapeText(expected), " (", what, ")"));
    }
    const TensorDType dtype = ref->info->dtype;
    const bool fp8 = dtype == TensorDType::kF8E4M3;
    if (dtype != TensorDType::kBF16 && dtype != TensorDType::kF16 &&
        dtype != TensorDType::kF32 && !fp8) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": tensor ", name, in, " has dtype ",
                       checkpoint::TensorDTypeName(dtype),
                       ", expected BF16, F16, F32 or F8_E4M3 (", what, ")"));
    }
    t->data = *ref;
    t->rows = rows;
    t->cols = is_vector ? 1 : cols;
    if (!fp8) return absl::OkStatus();
    if (is_vector || !quantization.fp8) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": tensor ", name, in, " is F8_E4M3, but ",
                       is_vector ? "a norm's weight is never quantised"
                                 : "config.json has no fp8 quantization_config",
                       " (", what, ")"));
    }
    std::string scale_name = name;
    if (absl::EndsWith(scale_name, ".weight")) {
      scale_name.resize(scale_name.size() - 7);
    }
    scale_name += ".weight_scale_inv";
    absl::StatusOr<TensorRef> scale = ckpt->Find(scale_name);
    if (!scale.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": tensor ", name, in,
                       " is F8_E4M3 without its scales ", scale_name));
    }
    const std::vector<int64_t> blocks = {
        (rows + quantization.block_rows - 1) / quantization.block_rows,
        (cols + quantization.block_cols - 1) / quantization.block_cols};
    if (scale->info->shape != blocks ||
        (scale->info->dtype != TensorDType::kF32 &&
         scale->info->dtype != TensorDType::kBF16)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": tensor ", scale_name, " in ",
          platform::EchoForMessage(scale->file->path(),
                                   platform::kMaxEchoedPathChars),
          " is ", checkpoint::TensorDTypeName(scale->info->dtype), " ",
          ShapeText(scale->info->shape), ", expected F32 ", ShapeText(blocks),
          " (one scale per ", quantization.block_rows, "x",
          quantization.block_cols, " block of ", name, ")"));
    }
    t->scale = *scale;
    ++w->fp8_tensors_;
    return absl::OkStatus();
  };

  const DeepseekV32Config& c = config.proto();
  w->layers_.resize(config.num_layers());
  for (int l = 0; l < config.num_layers(); ++l) {
    for (const WeightSpec& spec : LayerWeightSpecs(config, l)) {
      DSA_RETURN_IF_ERROR(resolve(
          HfName(l, spec), spec.rows, spec.cols, spec.is_vector,
          absl::StrCat("layer ", l, "'s ", spec.name, " of ", config.name()),
          &w->layers_[l][static_cast<int>(spec.id)]));
      w->model_bytes_ += spec.size() * 2;
    }
  }
  DSA_RETURN_IF_ERROR(resolve(kEmbedTokensName, c.vocab_size(), c.hidden_size(),
                              false, "vocab_size x hidden_size", &w->embed_));
  if (config.num_mtp_layers() > 0) {
    const std::string mtp_embed = absl::StrCat(
        "model.layers.", config.num_main_layers(), ".embed_tokens.weight");
    if (ckpt->Has(mtp_embed)) {
      DSA_RETURN_IF_ERROR(resolve(mtp_embed, c.vocab_size(), c.hidden_size(),
                                  false, "the MTP layers' embedding",
                                  &w->mtp_embed_));
      w->has_mtp_embed_ = true;
    }
  }
  w->checkpoint_ = std::move(ckpt);
  return w;
}

float CheckpointWeights::Element(const Tensor& t, int64_t i) const {
  const float v = LoadScalar(t.data.data(), t.data.info->dtype, i);
  if (t.scale.file == nullptr) return v;
  const int64_t row = i / t.cols, col = i % t.cols;
  const int64_t scale_cols =
      (t.cols + quantization_.block_cols - 1) / quantization_.block_cols;
  const float s = LoadScalar(t.scale.data(), t.scale.info->dtype,
                             (row / quantization_.block_rows) * scale_cols +
                                 col / quantization_.block_cols);
  return v * s;
}

absl::Status CheckpointWeights::ReadBf16(int layer, const WeightSpec& spec,
                                         int64_t begin, int64_t count,
                                         uint16_t* out) const {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no layer ", layer));
  }
  const Tensor& t = layers_[layer][static_cast<int>(spec.id)];
  if (t.data.file == nullptr || begin < 0 || count < 0 ||
      begin + count > t.rows * t.cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " ", spec.name, ": elements [", begin,
                     ", ", begin + count, ") are not in the checkpoint"));
  }
  if (t.data.info->dtype == TensorDType::kBF16) {
    std::memcpy(out, t.data.data() + 2 * begin, static_cast<size_t>(count) * 2);
    return absl::OkStatus();
  }
  if (t.scale.file == nullptr) {
    for (int64_t i = 0; i < count; ++i) {
      out[i] = attention::FloatToBf16(Element(t, begin + i));
    }
    return absl::OkStatus();
  }
  // fp8 a row at a time: each code through a decode table, times its
  // block's scale.
  static const std::array<float, 256> kDecode = [] {
    std::array<float, 256> table;
    for (int c = 0; c < 256; ++c) {
      table[c] = attention::Fp8ToFloat(static_cast<uint8_t>(c),
                                       attention::kE4m3fnTraits);
    }
    return table;
  }();
  const int64_t cols = t.cols;
  const int64_t bc = quantization_.block_cols, br = quantization_.block_rows;
  const int64_t scale_cols = (cols + bc - 1) / bc;
  const uint8_t* codes = t.data.data();
  const uint8_t* scales = t.scale.data();
  const TensorDType scale_dtype = t.scale.info->dtype;
  for (int64_t i = begin, end = begin + count; i < end;) {
    const int64_t row = i / cols;
    const int64_t row_end = std::min(end, (row + 1) * cols);
    const int64_t scale_row = (row / br) * scale_cols;
    for (int64_t col = i - row * cols; i < row_end; ++i, ++col) {
      const float s = LoadScalar(scales, scale_dtype, scale_row + col / bc);
      out[i - begin] = attention::FloatToBf16(kDecode[codes[i]] * s);
    }
  }
  return absl::OkStatus();
}

bool CheckpointWeights::HoldsFp8Blocks(int layer,
                                       const WeightSpec& spec) const {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) return false;
  const Tensor& t = layers_[layer][static_cast<int>(spec.id)];
  return t.data.file != nullptr && t.scale.file != nullptr &&
         t.data.info->dtype == TensorDType::kF8E4M3 &&
         quantization_.block_rows == attention::kFp8BlockSize &&
         quantization_.block_cols == attention::kFp8BlockSize;
}

absl::Status CheckpointWeights::ReadFp8(int layer, const WeightSpec& spec,
                                        int64_t begin, int64_t count,
                                        uint8_t* out) const {
  if (!HoldsFp8Blocks(layer, spec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "layer ", layer, " ", spec.name,
        ": not an fp8 matrix of 128x128 blocks in the checkpoint"));
  }
  const Tensor& t = layers_[layer][static_cast<int>(spec.id)];
  if (begin < 0 || count < 0 || begin + count > t.rows * t.cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " ", spec.name, ": codes [", begin, ", ",
                     begin + count, ") are not in the checkpoint"));
  }
  std::memcpy(out, t.data.data() + begin, static_cast<size_t>(count));
  return absl::OkStatus();
}

absl::Status CheckpointWeights::ReadFp8Scales(int layer, const WeightSpec& spec,
                                              float* out) const {
  if (!HoldsFp8Blocks(layer, spec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "layer ", layer, " ", spec.name,
        ": not an fp8 matrix of 128x128 blocks in the checkpoint"));
  }
  const Tensor& t = layers_[layer][static_cast<int>(spec.id)];
  const int64_t n = t.scale.info->num_elements;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = LoadScalar(t.scale.data(), t.scale.info->dtype, i);
  }
  return absl::OkStatus();
}

absl::Status CheckpointWeights::EmbeddingRow(bool mtp, int64_t token,
                                             float* out) const {
  const Tensor& t = mtp && has_mtp_embed_ ? mtp_embed_ : embed_;
  if (token < 0 || token >= t.rows) {
    return absl::OutOfRangeError(absl::StrCat(
        "token id ", token, " is outside the vocabulary of ", t.rows));
  }
  for (int64_t i = 0; i < t.cols; ++i) out[i] = Element(t, token * t.cols + i);
  return absl::OkStatus();
}

}  // namespace dsa::model::deepseek_v32
