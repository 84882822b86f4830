// Tensor parallelism over N ranks, as vLLM splits a DeepseekV32 attention
// layer:
//   - q_b_proj and kv_b_proj are column-parallel over the heads (each rank
//     holds the rows of its num_attention_heads / N heads);
//   - o_proj is row-parallel (each rank holds the columns of its heads' V
//     and produces a partial sum; an all-reduce over the ranks adds them);
//   - q_a_proj, kv_a_proj_with_mqa, the norms, eh_proj and the latent cache
//     are whole on every rank;
//   - the indexer is replicated (every rank scores every row, vLLM's
//     layout), or row-sharded: rank r scores its share of the step's query
//     rows and the top-k is all-gathered (IndexerParallel::kRows).
// The layer plan is computed from the same inputs on every rank, so every
// rank takes the same decision (skip or score, dense or sparse).
//
// A rank runs the model of RankConfig (the preset with num_attention_heads /
// N heads) on weights that are windows of the whole model's: RankWindow
// says which elements of the full tensor a rank's tensor holds, and
// ShardedWeightSource reads a rank's tensors from a source of the whole
// model (a checkpoint), so that N ranks together hold exactly the weights of
// one TP=1 model.
#ifndef DSA_MODEL_DEEPSEEK_V32_TENSOR_PARALLEL_H_
#define DSA_MODEL_DEEPSEEK_V32_TENSOR_PARALLEL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {

// How the indexer's scoring is split among the ranks.
enum class IndexerParallel {
  kReplicated,  // every rank scores every query row (vLLM)
  kRows,        // rank r scores rows [RowsOf(r)); the top-k is all-gathered
};
absl::string_view IndexerParallelName(IndexerParallel mode);
// "replicated" or "rows"; InvalidArgument naming the value otherwise.
absl::StatusOr<IndexerParallel> ParseIndexerParallel(absl::string_view name);

struct TensorParallel {
  int size = 1;  // N ranks
  int rank = 0;  // this rank, 0..size-1
  IndexerParallel indexer = IndexerParallel::kReplicated;
  // The ranks' collective group (platform DeviceRuntime::
  // CreateCollectiveGroup, one per process, shared by the ranks' models);
  // null: this rank runs alone, without collectives.
  void* group = nullptr;

  bool enabled() const { return size > 1; }
};

// InvalidArgument naming what is wrong: size < 1, rank out of [0, size), or
// a model whose num_attention_heads N does not divide.
absl::Status ValidateTensorParallel(const ModelConfig& config,
                                    const TensorParallel& tp);

// The configuration one rank runs: `config` with num_attention_heads / N
// heads, named "<name>.tp<N>-rank<r>". `config` itself for N = 1.
absl::StatusOr<ModelConfig> RankConfig(const ModelConfig& config,
                                       const TensorParallel& tp);

// How a layer's tensor is split (the file comment).
enum class WeightShard {
  kReplicated,  // the whole tensor on every rank
  kRows,        // rank r holds rows [r * rows / N, (r + 1) * rows / N)
  kCols,        // rank r holds those columns of every row
};
WeightShard ShardOf(WeightId id);

// Where a rank's tensor lies in the whole tensor: rank element (i, j) of
// its [rows, cols] is whole element first + i * row_stride + j.
struct RankWindow {
  int64_t first = 0;
  int64_t row_stride = 0;  // the whole tensor's columns
  int64_t rows = 0, cols = 0;
};
// `rank_spec` is the rank's tensor (a spec of RankConfig's layer).
RankWindow RankWindowOf(const WeightSpec& rank_spec, const TensorParallel& tp);

// `whole`'s spec of tensor `id` of `layer` (the whole model's, as
// LayerWeightSpecs lists it: shape and how Random() draws it). NotFound when
// the layer has no such tensor.
absl::StatusOr<WeightSpec> WholeSpec(const ModelConfig& whole, int layer,
                                     WeightId id);

// A rank's weights read from a source of the whole model's (a checkpoint):
// each request for elements of a rank tensor becomes reads of the whole
// tensor's rows that hold them. An FP8 checkpoint's codes and block scales
// are read as stored where the rank's window is whole 128x128 blocks of the
// whole matrix (q_b_proj and o_proj of every model, at any N that divides
// the heads into multiples of 128 rows or columns); elsewhere
// HoldsFp8Blocks is false and the loader reads the window as bf16.
class ShardedWeightSource : public WeightSource {
 public:
  // `whole_config` is the model `whole` holds (not RankConfig's).
  ShardedWeightSource(const WeightSource& whole,
                      const ModelConfig& whole_config, TensorParallel tp)
      : whole_(whole), whole_config_(whole_config), tp_(tp) {}
  absl::Status ReadBf16(int layer, const WeightSpec& rank_spec, int64_t begin,
                        int64_t count, uint16_t* out) const override;
  bool HoldsFp8Blocks(int layer, const WeightSpec& rank_spec) const override;
  absl::Status ReadFp8(int layer, const WeightSpec& rank_spec, int64_t begin,
                       int64_t count, uint8_t* out) const override;
  absl::Status ReadFp8Scales(int layer, const WeightSpec& rank_spec,
                             float* out) const override;

 private:
  // The whole tensor of a rank tensor and the rank's window of it; an error
  // when the rank's shape is not the whole's share.
  struct Window {
    WeightSpec whole;
    RankWindow window;
  };
  absl::StatusOr<Window> Locate(int layer, const WeightSpec& rank_spec) const;
  // Elements [begin, begin + count) of the rank's tensor through
  // read(first, n, out) of the whole's, a row of the window at a time.
  template <class Element, class Read>
  absl::Status ReadWindow(const WeightSpec& rank_spec, const Window& window,
                          int64_t begin, int64_t count, Element* out,
                          Read read) const;

  const WeightSource& whole_;
  const ModelConfig& whole_config_;
  TensorParallel tp_;
};

// The query rows [begin, end) of a step of `rows` rows that rank `rank`
// scores with IndexerParallel::kRows: ceil(rows / N) each, the last ranks
// fewer (possibly none). Every rank's top-k block of the all-gather has
// ceil(rows / N) rows.
struct RowRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
int64_t RowsPerRank(int64_t rows, int size);
RowRange RowsOf(int64_t rows, const TensorParallel& tp);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_TENSOR_PARALLEL_H_
