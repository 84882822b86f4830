#include "model/deepseek_v32/tensor_parallel.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/dtypes/fp8.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {

absl::string_view IndexerParallelName(IndexerParallel mode) {
  return mode == IndexerParallel::kRows ? "rows" : "replicated";
}

absl::StatusOr<IndexerParallel> ParseIndexerParallel(absl::string_view name) {
  if (name == "replicated") return IndexerParallel::kReplicated;
  if (name == "rows") return IndexerParallel::kRows;
  return absl::InvalidArgumentError(absl::StrCat(
      "indexer tensor parallelism '", name.substr(0, 64),
      name.size() > 64 ? "...'" : "'", " is not one of replicated, rows"));
}

absl::Status ValidateTensorParallel(const ModelConfig& config,
                                    const TensorParallel& tp) {
  if (tp.size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor parallelism: ", tp.size, " ranks, expected at least 1"));
  }
  if (tp.rank < 0 || tp.rank >= tp.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallelism: rank ", tp.rank, " of ", tp.size,
                     " ranks, expected 0..", tp.size - 1));
  }
  const int64_t heads = config.proto().num_attention_heads();
  if (heads % tp.size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor parallelism: ", config.name(), " has ", heads,
        " attention heads, which ", tp.size,
        " ranks do not divide (each rank holds num_attention_heads / N)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> RankConfig(const ModelConfig& config,
                                       const TensorParallel& tp) {
  DSA_RETURN_IF_ERROR(ValidateTensorParallel(config, tp));
  if (!tp.enabled()) return config;
  DeepseekV32Config proto = config.proto();
  proto.set_num_attention_heads(proto.num_attention_heads() / tp.size);
  proto.set_name(absl::StrCat(proto.name(), ".tp", tp.size, "-rank", tp.rank));
  return ModelConfig::FromProto(std::move(proto));
}

WeightShard ShardOf(WeightId id) {
  switch (id) {
    case WeightId::kQBProj:
    case WeightId::kKvBProj:
      return WeightShard::kRows;  // [heads * ..., in]: column-parallel
    case WeightId::kOProj:
      return WeightShard::kCols;  // [hidden, heads * v]: row-parallel
    default:
      return WeightShard::kReplicated;
  }
}

RankWindow RankWindowOf(const WeightSpec& rank_spec, const TensorParallel& tp) {
  RankWindow w;
  w.rows = rank_spec.rows;
  w.cols = rank_spec.cols;
  w.row_stride = rank_spec.cols;
  switch (tp.enabled() ? ShardOf(rank_spec.id) : WeightShard::kReplicated) {
    case WeightShard::kReplicated:
      break;
    case WeightShard::kRows:
      w.first = tp.rank * rank_spec.rows * rank_spec.cols;
      break;
    case WeightShard::kCols:
      w.first = tp.rank * rank_spec.cols;
      w.row_stride = rank_spec.cols * tp.size;
      break;
  }
  return w;
}

absl::StatusOr<WeightSpec> WholeSpec(const ModelConfig& whole, int layer,
                                     WeightId id) {
  for (const WeightSpec& spec : LayerWeightSpecs(whole, layer)) {
    if (spec.id == id) return spec;
  }
  return absl::NotFoundError(absl::StrCat("weights: layer ", layer, " of ",
                                          whole.name(), " has no tensor ",
                                          static_cast<int>(id)));
}

absl::StatusOr<ShardedWeightSource::Window> ShardedWeightSource::Locate(
    int layer, const WeightSpec& rank_spec) const {
  DSA_ASSIGN_OR_RETURN(const WeightSpec whole,
                       WholeSpec(whole_config_, layer, rank_spec.id));
  const WeightShard shard =
      tp_.enabled() ? ShardOf(rank_spec.id) : WeightShard::kReplicated;
  const int64_t n = tp_.size;
  const bool fits =
      shard == WeightShard::kRows
          ? rank_spec.rows * n == whole.rows && rank_spec.cols == whole.cols
      : shard == WeightShard::kCols
          ? rank_spec.rows == whole.rows && rank_spec.cols * n == whole.cols
          : rank_spec.rows == whole.rows && rank_spec.cols == whole.cols;
  if (!fits) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights: ", rank_spec.name, " of layer ", layer, " is [",
                     rank_spec.rows, ", ", rank_spec.cols, "], not rank ",
                     tp_.rank, "'s share of ", n, " of the whole [", whole.rows,
                     ", ", whole.cols, "]"));
  }
  return Window{whole, RankWindowOf(rank_spec, tp_)};
}

template <class Element, class Read>
absl::Status ShardedWeightSource::ReadWindow(const WeightSpec& rank_spec,
                                             const Window& window,
                                             int64_t begin, int64_t count,
                                             Element* out, Read read) const {
  if (begin < 0 || count < 0 || begin > rank_spec.size() - count) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights: elements [", begin, ", ", begin + count, ") of ",
                     rank_spec.name, ", which has ", rank_spec.size()));
  }
  const RankWindow& w = window.window;
  if (w.row_stride == w.cols) {  // contiguous in the whole tensor
    return read(w.first + begin, count, out);
  }
  // A column window: one read per row it touches.
  int64_t done = 0;
  while (done < count) {
    const int64_t i = begin + done;
    const int64_t row = i / w.cols, col = i % w.cols;
    const int64_t run = std::min(w.cols - col, count - done);
    DSA_RETURN_IF_ERROR(
        read(w.first + row * w.row_stride + col, run, out + done));
    done += run;
  }
  return absl::OkStatus();
}

absl::Status ShardedWeightSource::ReadBf16(int layer,
                                           const WeightSpec& rank_spec,
                                           int64_t begin, int64_t count,
                                           uint16_t* out) const {
  DSA_ASSIGN_OR_RETURN(const Window window, Locate(layer, rank_spec));
  return ReadWindow(rank_spec, window, begin, count, out,
                    [&](int64_t first, int64_t n, uint16_t* to) {
                      return whole_.ReadBf16(layer, window.whole, first, n, to);
                    });
}

namespace {

// The window's first row and column in the whole tensor.
int64_t FirstRow(const RankWindow& w) { return w.first / w.row_stride; }
int64_t FirstCol(const RankWindow& w) { return w.first % w.row_stride; }

// Whether [first, first + size) of a dimension of `whole` elements is whole
// 128-blocks of it (the last may be the dimension's partial one).
bool OnBlocks(int64_t first, int64_t size, int64_t whole) {
  return first % attention::kFp8BlockSize == 0 &&
         (size % attention::kFp8BlockSize == 0 || first + size == whole);
}

}  // namespace

bool ShardedWeightSource::HoldsFp8Blocks(int layer,
                                         const WeightSpec& rank_spec) const {
  absl::StatusOr<Window> window = Locate(layer, rank_spec);
  if (!window.ok() || !whole_.HoldsFp8Blocks(layer, window->whole)) {
    return false;
  }
  // The rank's window must be whole blocks of the whole matrix, so that its
  // scales are a block window of the whole's; otherwise the loader reads it
  // as bf16 (dequantised) and quantises the rank's matrix itself.
  const RankWindow& w = window->window;
  return OnBlocks(FirstRow(w), w.rows, window->whole.rows) &&
         OnBlocks(FirstCol(w), w.cols, window->whole.cols);
}

absl::Status ShardedWeightSource::ReadFp8(int layer,
                                          const WeightSpec& rank_spec,
                                          int64_t begin, int64_t count,
                                          uint8_t* out) const {
  if (!HoldsFp8Blocks(layer, rank_spec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "layer ", layer, " ", rank_spec.name, ": rank ", tp_.rank, " of ",
        tp_.size, "'s window is not fp8 128x128 blocks of the checkpoint's"));
  }
  DSA_ASSIGN_OR_RETURN(const Window window, Locate(layer, rank_spec));
  return ReadWindow(rank_spec, window, begin, count, out,
                    [&](int64_t first, int64_t n, uint8_t* to) {
                      return whole_.ReadFp8(layer, window.whole, first, n, to);
                    });
}

absl::Status ShardedWeightSource::ReadFp8Scales(int layer,
                                                const WeightSpec& rank_spec,
                                                float* out) const {
  if (!HoldsFp8Blocks(layer, rank_spec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "layer ", layer, " ", rank_spec.name, ": rank ", tp_.rank, " of ",
        tp_.size, "'s window is not fp8 128x128 blocks of the checkpoint's"));
  }
  DSA_ASSIGN_OR_RETURN(const Window window, Locate(layer, rank_spec));
  const WeightSpec& whole = window.whole;
  const int64_t whole_col_blocks = attention::Fp8Blocks(whole.cols);
  std::vector<float> all(
      static_cast<size_t>(attention::Fp8Blocks(whole.rows) * whole_col_blocks));
  DSA_RETURN_IF_ERROR(whole_.ReadFp8Scales(layer, whole, all.data()));
  const RankWindow& w = window.window;
  const int64_t row0 = FirstRow(w) / attention::kFp8BlockSize;
  const int64_t col0 = FirstCol(w) / attention::kFp8BlockSize;
  const int64_t rows = attention::Fp8Blocks(w.rows);
  const int64_t cols = attention::Fp8Blocks(w.cols);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(all.data() + (row0 + r) * whole_col_blocks + col0, cols,
                out + r * cols);
  }
  return absl::OkStatus();
}

int64_t RowsPerRank(int64_t rows, int size) {
  return size < 1 ? rows : (rows + size - 1) / size;
}

RowRange RowsOf(int64_t rows, const TensorParallel& tp) {
  const int64_t per = RowsPerRank(rows, tp.size);
  RowRange r;
  r.begin = std::min(rows, per * tp.rank);
  r.end = std::min(rows, r.begin + per);
  return r;
}

}  // namespace dsa::model::deepseek_v32
