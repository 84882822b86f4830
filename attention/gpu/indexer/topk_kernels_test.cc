// The GPU indexer top-k kernel against a host sort in float64, on fresh
// random inputs with poisoned outputs, every path forced in turn (params.h's
// DSA_INDEXER_TOPK_PATHS, and the heuristics' choice): windows of topk - 1,
// topk and topk + 1 keys, empty and short ones, windows starting mid-quad,
// rows of 8K, 64K and 128K keys; flat and normal logits, heavy ties, all
// keys equal (+0 and -0 mixed), NaN and infinities, windows of every length
// modulo 16 from every start within a quad, clustered logits whose
// keys share their top bits, rows whose every 4th key is high (or low) so
// that the sampled paths' sample misleads them and they start over, and
// threshold bins of chosen sizes (the few
// keys ranked against each other, more by radix rounds over the gathered
// keys, too many to gather by radix rounds over the row). Values outside
// the windows are poison that must never be selected. Skips cleanly when
// built without a GPU backend or run without a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention/gpu/device/runtime.h"
#include "attention/gpu/device/test_util.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/heuristics.h"
#include "attention/gpu/indexer/launch.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

#if defined(DSA_GPU_ROCM) || defined(DSA_GPU_CUDA)
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

// The reference: a strict total order (value descending in float64, NaN
// last, then the lower index), the first topk, ascending positions, -1
// padding.
std::vector<int32_t> ReferenceTopK(const float* row, int32_t start, int32_t end,
                                   int topk) {
  std::vector<int32_t> idx(end - start);
  std::iota(idx.begin(), idx.end(), start);
  auto better = [row](int32_t x, int32_t y) {
    const double vx = row[x], vy = row[y];
    const bool nan_x = std::isnan(vx), nan_y = std::isnan(vy);
    if (nan_x != nan_y) return nan_y;
    if (!nan_x && vx != vy) return vx > vy;
    return x < y;
  };
  if (static_cast<int>(idx.size()) > topk) {
    std::nth_element(idx.begin(), idx.begin() + topk, idx.end(), better);
    idx.resize(topk);
  }
  std::sort(idx.begin(), idx.end());
  idx.resize(topk, -1);
  return idx;
}

enum class Values {
  kNormal,       // N(0, 3^2)
  kFlat,         // uniform in [-1, 1)
  kFewDistinct,  // 6 values: heavy ties
  kAllEqual,     // every key +0 or -0
  kSpecials,     // a quarter NaN, +-inf, +-0, +-1
  kClustered,    // 1 + U * 2^-16: every key's top 15 bits the same
  kBand,         // a threshold bin of `band` keys (distinct)
  kBandTies,     // the same with 16 distinct values in the bin
  kStrided,      // every 4th float of the buffer in [16, 32), the rest below:
                 // a sample of every 8th or 16th key sees only the high ones
  kStridedLow,   // every 4th float below the rest: the sample sees the low
};

struct TopKCase {
  std::string name;
  int topk;
  int64_t width;
  Values values;
  std::vector<std::pair<int32_t, int32_t>> windows;
  int band = 0;  // kBand / kBandTies: keys in the threshold bin
};

// Fills one row (`offset` floats from the buffer's 16-byte aligned start):
// poison outside the window, the distribution inside.
void FillRow(const TopKCase& c, int64_t offset, int32_t start, int32_t end,
             std::mt19937& rng, float* row) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<float> flat(-1.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f};
  // Larger than any logit inside: selected only if read by mistake.
  for (int64_t j = 0; j < c.width + 5; ++j) row[j] = 1e30f;
  const int32_t n = end - start;
  if (c.values == Values::kBand || c.values == Values::kBandTies) {
    // `high` keys above the bin, `band` in it (one coarse bin: [1, 1 +
    // 2^-6)), the rest below; the threshold falls inside the bin.
    const int32_t band = std::min<int32_t>(c.band, n);
    const int32_t high =
        std::max<int32_t>(0, std::min<int32_t>(c.topk - band / 2, n - band));
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), start);
    std::shuffle(order.begin(), order.end(), rng);
    for (int32_t i = 0; i < n; ++i) {
      float v;
      if (i < high) {
        v = 16.0f + 16.0f * unit(rng);
      } else if (i < high + band) {
        v = c.values == Values::kBand
                ? 1.0f + std::ldexp(unit(rng), -6)
                : 1.0f + std::ldexp(static_cast<float>(rng() % 16), -10);
      } else {
        v = -8.0f + 4.0f * unit(rng);
      }
      row[order[i]] = v;
    }
    return;
  }
  for (int32_t j = start; j < end; ++j) {
    float v = 0.0f;
    switch (c.values) {
      case Values::kNormal:
        v = normal(rng);
        break;
      case Values::kFlat:
        v = flat(rng);
        break;
      case Values::kFewDistinct:
        v = static_cast<float>(rng() % 6);
        break;
      case Values::kAllEqual:
        v = (rng() % 2) ? 0.0f : -0.0f;
        break;
      case Values::kSpecials:
        v = (rng() % 4 == 0) ? specials[rng() % 7] : normal(rng);
        break;
      case Values::kClustered:
        v = 1.0f + std::ldexp(unit(rng), -16);
        break;
      case Values::kStrided:
        v = (offset + j) % 4 == 0 ? 16.0f + 16.0f * unit(rng)
                                  : -8.0f + 12.0f * unit(rng);
        break;
      case Values::kStridedLow:
        v = (offset + j) % 4 == 0 ? -8.0f + 12.0f * unit(rng)
                                  : 16.0f + 16.0f * unit(rng);
        break;
      default:
        break;
    }
    row[j] = v;
  }
}

using PathCase = std::tuple<TopKCase, IndexerTopKPath>;

class IndexerTopKTest : public ::testing::TestWithParam<PathCase> {};

TEST_P(IndexerTopKTest, MatchesReference) {
  if (!kBuilt) {
    GTEST_SKIP() << "built without a GPU backend: use --config=cuda or "
                    "--config=rocm";
  }
  const TopKCase& c = std::get<0>(GetParam());
  IndexerTopKOptions options;
  options.path = std::get<1>(GetParam());
  const int64_t rows = static_cast<int64_t>(c.windows.size());
  // Rows 5 floats apart: each row starts at a different place in its quad.
  const int64_t stride = c.width + 5;
  std::mt19937 rng(std::random_device{}());
  std::vector<float> logits(rows * stride);
  std::vector<int32_t> starts(rows), ends(rows);
  for (int64_t i = 0; i < rows; ++i) {
    starts[i] = c.windows[i].first;
    ends[i] = c.windows[i].second;
    FillRow(c, i * stride, starts[i], ends[i], rng, logits.data() + i * stride);
  }
  const int64_t topk_stride = c.topk + 2;
  DeviceArray d_logits, d_start, d_end, d_topk;
  ASSERT_LAUNCH(d_logits.Upload(logits));
  ASSERT_LAUNCH(d_start.Upload(starts));
  ASSERT_LAUNCH(d_end.Upload(ends));
  ASSERT_LAUNCH(d_topk.Allocate(rows * topk_stride * sizeof(int32_t)));
  ASSERT_LAUNCH(DeviceMemset(d_topk.get<void>(), 0x7f,
                             rows * topk_stride * sizeof(int32_t)));
  IndexerTopKParams p;
  p.logits = d_logits.get<float>();
  p.row_key_start = d_start.get<int32_t>();
  p.row_key_end = d_end.get<int32_t>();
  p.topk_indices = d_topk.get<int32_t>();
  p.rows = rows;
  p.width = c.width;
  p.logits_stride = stride;
  p.topk = c.topk;
  p.topk_stride = topk_stride;
  const LaunchResult launched = IndexerTopKLaunch(p, nullptr, options);
  if (options.path == IndexerTopKPath::kStaged512 &&
      c.width > indexer::kTopKStageKeys) {
    // The staged path refuses rows wider than its stage, saying so.
    EXPECT_EQ(launched.code, LaunchCode::kInvalidArgument);
    EXPECT_NE(std::string(launched.message).find("staged"), std::string::npos)
        << launched.message;
    return;
  }
  ASSERT_LAUNCH(launched);
  ASSERT_LAUNCH(DeviceSynchronize());
  std::vector<int32_t> got;
  ASSERT_LAUNCH(d_topk.Download(&got));
  for (int64_t i = 0; i < rows; ++i) {
    const std::vector<int32_t> want =
        ReferenceTopK(logits.data() + i * stride, starts[i], ends[i], c.topk);
    for (int k = 0; k < c.topk; ++k) {
      ASSERT_EQ(got[i * topk_stride + k], want[k])
          << "path " << IndexerTopKPathName(p, options) << " row " << i
          << " window [" << starts[i] << ", " << ends[i] << ") slot " << k;
    }
    for (int64_t k = c.topk; k < topk_stride; ++k) {
      ASSERT_EQ(got[i * topk_stride + k], 0x7f7f7f7f)
          << "row " << i << " wrote past topk";
    }
  }
}

std::vector<TopKCase> TopKCases() {
  std::vector<TopKCase> cases;
  const int k = 2048;
  // Prefill-sized rows (every path, the staged one included): lengths
  // around topk, windows starting mid-row and mid-quad, empty and short
  // ones, whole 8K rows.
  const int64_t short_width = indexer::kTopKStageKeys;
  const std::vector<std::pair<int32_t, int32_t>> short_windows = {
      {0, k - 1},
      {0, k},
      {0, k + 1},
      {100, 100 + k + 1},
      {7, 7 + k},
      {3, 3 + k - 1},
      {0, 0},
      {50, 60},
      {0, 4096},
      {1234, 8000},
      {0, 8192},
      {1, 8192},
      {2, 8191},
      {3, 8190},
      {8192 - k - 1, 8192},
      {5, 5 + 3 * k + 1}};
  // Decode-sized rows (the streamed paths): 64K and 128K keys, with a few
  // short ones in the same launch.
  const int64_t long_width = 131072 + 8;
  const std::vector<std::pair<int32_t, int32_t>> long_windows = {
      {0, 65536}, {3, 65536 + 3}, {0, 131072}, {5, 131072 + 5},
      {0, k + 1}, {777, 12000},   {1, 30001},  {0, 0}};
  struct Dist {
    const char* name;
    Values values;
    int band;
  };
  const Dist dists[] = {
      {"normal", Values::kNormal, 0},
      {"flat", Values::kFlat, 0},
      {"ties", Values::kFewDistinct, 0},
      {"all_equal", Values::kAllEqual, 0},
      {"specials", Values::kSpecials, 0},
      {"clustered", Values::kClustered, 0},
      // Threshold bins ranked, radix-resolved when gathered, and (staged:
      // over 512; streamed: over 4096) resolved over the row.
      {"band100", Values::kBand, 100},
      {"band400", Values::kBand, 400},
      {"band2000", Values::kBand, 2000},
      {"band6000", Values::kBand, 6000},
      {"band_ties100", Values::kBandTies, 100},
      {"band_ties2000", Values::kBandTies, 2000},
      {"strided", Values::kStrided, 0},
      {"strided_low", Values::kStridedLow, 0},
  };
  for (const Dist& d : dists) {
    cases.push_back({std::string(d.name) + "_8k", k, short_width, d.values,
                     short_windows, d.band});
    cases.push_back({std::string(d.name) + "_128k", k, long_width, d.values,
                     long_windows, d.band});
  }
  // Windows of every length modulo 16 and every start within a quad (the
  // staged walk's runs of 16 positions and its edge masks), just over topk.
  std::vector<std::pair<int32_t, int32_t>> run_windows;
  for (int32_t i = 0; i < 32; ++i) {
    run_windows.push_back({2 * i, 2 * i + k + 1 + 7 * i});
  }
  cases.push_back(
      {"normal_runs_8k", k, short_width, Values::kNormal, run_windows});
  cases.push_back(
      {"specials_runs_8k", k, short_width, Values::kSpecials, run_windows});
  // A small k over many rows of random windows, and a large one.
  std::mt19937 rng(12345);
  std::vector<std::pair<int32_t, int32_t>> small_windows;
  for (int i = 0; i < 300; ++i) {
    const int32_t a = static_cast<int32_t>(rng() % 600);
    const int32_t b = static_cast<int32_t>(rng() % 600);
    small_windows.push_back({std::min(a, b), std::max(a, b)});
  }
  cases.push_back({"normal_k7", 7, 600, Values::kNormal, small_windows});
  cases.push_back({"ties_k7", 7, 600, Values::kFewDistinct, small_windows});
  cases.push_back({"normal_k5000",
                   5000,
                   short_width,
                   Values::kNormal,
                   {{0, 4999}, {0, 5001}, {3, 8192}, {0, 8192}}});
  return cases;
}

std::vector<IndexerTopKPath> Paths() {
  std::vector<IndexerTopKPath> paths = {IndexerTopKPath::kAuto};
#define DSA_TOPK_PATH_VALUE(name, text) paths.push_back(IndexerTopKPath::name);
  DSA_INDEXER_TOPK_PATHS(DSA_TOPK_PATH_VALUE)
#undef DSA_TOPK_PATH_VALUE
  return paths;
}

INSTANTIATE_TEST_SUITE_P(Windows, IndexerTopKTest,
                         ::testing::Combine(::testing::ValuesIn(TopKCases()),
                                            ::testing::ValuesIn(Paths())),
                         [](const ::testing::TestParamInfo<PathCase>& info) {
                           return std::get<0>(info.param).name + "_" +
                                  indexer::TopKPathName(
                                      std::get<1>(info.param));
                         });

TEST(IndexerTopKLaunchTest, RejectsBadSizesWithAMessage) {
  if (!kBuilt) GTEST_SKIP() << "built without a GPU backend";
  IndexerTopKParams p;
  p.rows = 3;
  p.width = 10;
  p.logits_stride = 10;
  p.topk = 0;
  const LaunchResult r = IndexerTopKLaunch(p, nullptr);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("topk 0"), std::string::npos)
      << r.message;
}

}  // namespace
}  // namespace dsa::attention::gpu
