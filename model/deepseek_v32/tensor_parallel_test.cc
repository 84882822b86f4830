#include "model/deepseek_v32/tensor_parallel.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

TEST(TensorParallelTest, RefusesWhatCannotBeSplit) {
  ASSERT_OK_AND_ASSIGN(ModelConfig glm, LoadPreset("glm-5.1"));
  EXPECT_THAT(ValidateTensorParallel(glm, {0, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("0 ranks, expected at least 1")));
  EXPECT_THAT(ValidateTensorParallel(glm, {2, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 2 of 2 ranks, expected 0..1")));
  EXPECT_THAT(
      ValidateTensorParallel(glm, {2, -1}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank -1 of 2")));
  EXPECT_THAT(ValidateTensorParallel(glm, {3, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("has 64 attention heads, which 3 ranks do "
                                 "not divide")));
  for (int n : {1, 2, 4, 8, 64}) {
    EXPECT_OK(ValidateTensorParallel(glm, {n, n - 1}));
  }
  EXPECT_THAT(ValidateTensorParallel(glm, {128, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TensorParallelTest, RankConfigHoldsItsHeads) {
  ASSERT_OK_AND_ASSIGN(ModelConfig glm, LoadPreset("glm-5.1"));
  ASSERT_OK_AND_ASSIGN(ModelConfig one, RankConfig(glm, {1, 0}));
  EXPECT_EQ(one.name(), glm.name());
  EXPECT_EQ(one.proto().num_attention_heads(), 64);
  ASSERT_OK_AND_ASSIGN(ModelConfig rank3, RankConfig(glm, {4, 3}));
  EXPECT_EQ(rank3.proto().num_attention_heads(), 16);
  EXPECT_EQ(rank3.name(), "glm-5.1.tp4-rank3");
  // The rest of the model, and so the layer plan, is the same.
  EXPECT_EQ(rank3.proto().indexer().index_n_heads(),
            glm.proto().indexer().index_n_heads());
  EXPECT_EQ(rank3.index_topk(), glm.index_topk());
  EXPECT_EQ(rank3.num_layers(), glm.num_layers());
  EXPECT_EQ(rank3.mla_softmax_scale(), glm.mla_softmax_scale());
  for (int l = 0; l < glm.num_layers(); ++l) {
    EXPECT_EQ(rank3.owns_indexer(l), glm.owns_indexer(l));
  }
  EXPECT_THAT(RankConfig(glm, {3, 0}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TensorParallelTest, OnlyTheHeadDimensionsAreSplit) {
  EXPECT_EQ(ShardOf(WeightId::kQBProj), WeightShard::kRows);
  EXPECT_EQ(ShardOf(WeightId::kKvBProj), WeightShard::kRows);
  EXPECT_EQ(ShardOf(WeightId::kOProj), WeightShard::kCols);
  for (WeightId id :
       {WeightId::kQAProj, WeightId::kQALayerNorm, WeightId::kKvAProjWithMqa,
        WeightId::kKvALayerNorm, WeightId::kIndexerWqB, WeightId::kIndexerWk,
        WeightId::kIndexerKNormWeight, WeightId::kIndexerKNormBias,
        WeightId::kIndexerWeightsProj, WeightId::kInputLayerNorm,
        WeightId::kEhProj, WeightId::kEnorm, WeightId::kHnorm,
        WeightId::kFinalNorm}) {
    EXPECT_EQ(ShardOf(id), WeightShard::kReplicated) << static_cast<int>(id);
  }
}

// The ranks' tensors, read through ShardedWeightSource in ragged chunks,
// are the windows of the whole model's tensors that RankWindowOf names, and
// together they are the whole tensors: every element held once (split
// tensors) or by every rank (replicated ones).
TEST(TensorParallelTest, RanksTogetherHoldTheWholeModel) {
  for (const char* preset : {"tiny-glm-5.1", "tiny-glm-5.2", "tiny-v3.2"}) {
    ASSERT_OK_AND_ASSIGN(ModelConfig whole, LoadPreset(preset));
    std::vector<LayerWeights> weights;
    for (int l = 0; l < whole.num_layers(); ++l) {
      weights.push_back(LayerWeights::Random(whole, l, 7 + l));
    }
    const HostWeightSource source(weights);
    std::mt19937 rng(11);
    for (int n : {2, 4}) {
      if (whole.proto().num_attention_heads() % n != 0) continue;
      for (int l = 0; l < whole.num_layers(); ++l) {
        for (const WeightSpec& w : LayerWeightSpecs(whole, l)) {
          std::vector<int> held(static_cast<size_t>(w.size()), 0);
          for (int r = 0; r < n; ++r) {
            const TensorParallel tp{n, r};
            ASSERT_OK_AND_ASSIGN(ModelConfig rank_config,
                                 RankConfig(whole, tp));
            ASSERT_OK_AND_ASSIGN(WeightSpec spec,
                                 WholeSpec(rank_config, l, w.id));
            const ShardedWeightSource sharded(source, whole, tp);
            std::vector<uint16_t> got(static_cast<size_t>(spec.size()), 0);
            for (int64_t begin = 0; begin < spec.size();) {
              const int64_t count = std::min<int64_t>(
                  spec.size() - begin,
                  std::uniform_int_distribution<int64_t>(1, 37)(rng));
              ASSERT_OK(
                  sharded.ReadBf16(l, spec, begin, count, got.data() + begin));
              begin += count;
            }
            const RankWindow win = RankWindowOf(spec, tp);
            const std::vector<float>& v = weights[l].tensor(w.id);
            for (int64_t i = 0; i < win.rows; ++i) {
              for (int64_t j = 0; j < win.cols; ++j) {
                const int64_t at = win.first + i * win.row_stride + j;
                ASSERT_LT(at, w.size());
                ASSERT_EQ(got[i * win.cols + j], attention::FloatToBf16(v[at]))
                    << preset << " layer " << l << " " << w.name << " rank "
                    << r << " of " << n << " element " << i << "," << j;
                ++held[at];
              }
            }
          }
          const int expected =
              ShardOf(w.id) == WeightShard::kReplicated ? n : 1;
          for (int64_t i = 0; i < w.size(); ++i) {
            ASSERT_EQ(held[i], expected)
                << preset << " layer " << l << " " << w.name << " element " << i
                << " at TP " << n;
          }
        }
      }
    }
  }
}

TEST(TensorParallelTest, ShardedSourceRefusesAWrongShapeOrRange) {
  ASSERT_OK_AND_ASSIGN(ModelConfig whole, LoadPreset("tiny-glm-5.1"));
  std::vector<LayerWeights> weights;
  for (int l = 0; l < whole.num_layers(); ++l) {
    weights.push_back(LayerWeights::Random(whole, l, 3));
  }
  const HostWeightSource source(weights);
  const ShardedWeightSource sharded(source, whole, {2, 1});
  // The whole model's q_b_proj is not rank 1's share.
  ASSERT_OK_AND_ASSIGN(WeightSpec whole_qb,
                       WholeSpec(whole, 0, WeightId::kQBProj));
  std::vector<uint16_t> out(static_cast<size_t>(whole_qb.size()));
  EXPECT_THAT(sharded.ReadBf16(0, whole_qb, 0, 4, out.data()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not rank 1's share of 2")));
  ASSERT_OK_AND_ASSIGN(ModelConfig rank1, RankConfig(whole, {2, 1}));
  ASSERT_OK_AND_ASSIGN(WeightSpec qb, WholeSpec(rank1, 0, WeightId::kQBProj));
  EXPECT_THAT(
      sharded.ReadBf16(0, qb, qb.size() - 2, 4, out.data()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("elements [")));
  EXPECT_THAT(sharded.ReadBf16(0, qb, -1, 1, out.data()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(WholeSpec(whole, 0, WeightId::kEhProj).status(),
              StatusIs(absl::StatusCode::kNotFound));
}

// A whole model's FP8 checkpoint stand-in: every fp8 product's code of
// element i and scale of block b are functions of them.
class Fp8BlocksSource : public WeightSource {
 public:
  static uint8_t Code(int layer, WeightId id, int64_t i) {
    return static_cast<uint8_t>((static_cast<uint64_t>(i) * 2654435761u +
                                 layer * 97 + static_cast<int>(id)) >>
                                7);
  }
  static float Scale(int layer, WeightId id, int64_t block) {
    return 1.0f + block + 1000.0f * layer + 0.5f * static_cast<int>(id);
  }
  absl::Status ReadBf16(int, const WeightSpec&, int64_t, int64_t count,
                        uint16_t* out) const override {
    std::fill_n(out, count, uint16_t{0x3f80});
    return absl::OkStatus();
  }
  bool HoldsFp8Blocks(int, const WeightSpec& spec) const override {
    return spec.fp8_product;
  }
  absl::Status ReadFp8(int layer, const WeightSpec& spec, int64_t begin,
                       int64_t count, uint8_t* out) const override {
    if (begin < 0 || count < 0 || begin + count > spec.size()) {
      return absl::OutOfRangeError("codes out of the whole matrix");
    }
    for (int64_t i = 0; i < count; ++i)
      out[i] = Code(layer, spec.id, begin + i);
    return absl::OkStatus();
  }
  absl::Status ReadFp8Scales(int layer, const WeightSpec& spec,
                             float* out) const override {
    const int64_t n =
        attention::Fp8Blocks(spec.rows) * attention::Fp8Blocks(spec.cols);
    for (int64_t b = 0; b < n; ++b) out[b] = Scale(layer, spec.id, b);
    return absl::OkStatus();
  }
};

// An FP8 checkpoint's codes and block scales reach a rank as stored where
// its window is whole 128x128 blocks (tiny-glm-5.1 at 2 ranks: q_b_proj's
// 128 rows and o_proj's 128 columns per rank), and are refused where it is
// not (4 ranks: 64), so that the loader reads those as bf16; replicated
// matrices always are.
TEST(TensorParallelTest, ShardedSourceForwardsFp8BlocksOnBlockWindows) {
  ASSERT_OK_AND_ASSIGN(ModelConfig whole, LoadPreset("tiny-glm-5.1"));
  const Fp8BlocksSource source;
  for (int n : {2, 4}) {
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(absl::StrCat(n, " ranks, rank ", r));
      const TensorParallel tp{n, r};
      ASSERT_OK_AND_ASSIGN(ModelConfig rank_config, RankConfig(whole, tp));
      const ShardedWeightSource sharded(source, whole, tp);
      for (const WeightSpec& spec : LayerWeightSpecs(rank_config, 1)) {
        SCOPED_TRACE(spec.name);
        if (!spec.fp8_product) {
          EXPECT_FALSE(sharded.HoldsFp8Blocks(1, spec));
          continue;
        }
        const bool split = ShardOf(spec.id) != WeightShard::kReplicated;
        const bool blocks = !split || n == 2;
        ASSERT_EQ(sharded.HoldsFp8Blocks(1, spec), blocks);
        std::vector<uint8_t> codes(static_cast<size_t>(spec.size()));
        std::vector<float> scales(static_cast<size_t>(
            attention::Fp8Blocks(spec.rows) * attention::Fp8Blocks(spec.cols)));
        if (!blocks) {
          EXPECT_THAT(sharded.ReadFp8(1, spec, 0, 1, codes.data()),
                      StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("not fp8 128x128 blocks")));
          EXPECT_THAT(sharded.ReadFp8Scales(1, spec, scales.data()),
                      StatusIs(absl::StatusCode::kFailedPrecondition));
          continue;
        }
        // In two ragged reads, the second across a row of the window.
        const int64_t half = spec.size() / 2 + 3;
        ASSERT_OK(sharded.ReadFp8(1, spec, 0, half, codes.data()));
        ASSERT_OK(sharded.ReadFp8(1, spec, half, spec.size() - half,
                                  codes.data() + half));
        ASSERT_OK(sharded.ReadFp8Scales(1, spec, scales.data()));
        ASSERT_OK_AND_ASSIGN(WeightSpec w, WholeSpec(whole, 1, spec.id));
        const RankWindow win = RankWindowOf(spec, tp);
        const int64_t row0 = win.first / win.row_stride;
        const int64_t col0 = win.first % win.row_stride;
        for (int64_t i = 0; i < spec.rows; ++i) {
          for (int64_t j = 0; j < spec.cols; ++j) {
            ASSERT_EQ(codes[i * spec.cols + j],
                      Fp8BlocksSource::Code(1, spec.id,
                                            (row0 + i) * w.cols + col0 + j))
                << i << ", " << j;
          }
        }
        const int64_t cb = attention::Fp8Blocks(spec.cols);
        const int64_t whole_cb = attention::Fp8Blocks(w.cols);
        for (int64_t i = 0; i < attention::Fp8Blocks(spec.rows); ++i) {
          for (int64_t j = 0; j < cb; ++j) {
            EXPECT_EQ(
                scales[i * cb + j],
                Fp8BlocksSource::Scale(
                    1, spec.id, (row0 / 128 + i) * whole_cb + col0 / 128 + j));
          }
        }
      }
    }
  }
}

TEST(TensorParallelTest, IndexerRowsSplitIntoEqualBlocks) {
  struct Case {
    int64_t rows;
    int n;
    std::vector<std::pair<int64_t, int64_t>> ranges;
  };
  for (const Case& c : std::vector<Case>{
           {10, 4, {{0, 3}, {3, 6}, {6, 9}, {9, 10}}},
           {8, 4, {{0, 2}, {2, 4}, {4, 6}, {6, 8}}},
           {2, 4, {{0, 1}, {1, 2}, {2, 2}, {2, 2}}},
           {0, 2, {{0, 0}, {0, 0}}},
           {5, 1, {{0, 5}}},
       }) {
    for (int r = 0; r < c.n; ++r) {
      const RowRange range = RowsOf(c.rows, {c.n, r, IndexerParallel::kRows});
      EXPECT_EQ(range.begin, c.ranges[r].first) << c.rows << "/" << c.n;
      EXPECT_EQ(range.end, c.ranges[r].second) << c.rows << "/" << c.n;
      EXPECT_LE(range.size(), RowsPerRank(c.rows, c.n));
    }
  }
}

TEST(TensorParallelTest, IndexerModesByName) {
  ASSERT_OK_AND_ASSIGN(IndexerParallel rows, ParseIndexerParallel("rows"));
  EXPECT_EQ(rows, IndexerParallel::kRows);
  ASSERT_OK_AND_ASSIGN(IndexerParallel rep, ParseIndexerParallel("replicated"));
  EXPECT_EQ(rep, IndexerParallel::kReplicated);
  EXPECT_EQ(IndexerParallelName(IndexerParallel::kRows), "rows");
  EXPECT_EQ(IndexerParallelName(IndexerParallel::kReplicated), "replicated");
  EXPECT_THAT(ParseIndexerParallel("columns").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'columns' is not one of replicated, rows")));
  EXPECT_THAT(ParseIndexerParallel(std::string(1000, 'x')).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("...' is not one of")));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
