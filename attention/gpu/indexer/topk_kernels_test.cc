// The GPU indexer top-k kernel against a host sort, on fresh random inputs
// with poisoned outputs: windows of topk - 1, topk and topk + 1 keys, empty
// and short ones, heavy ties, NaN and infinities. Skips cleanly when built
// without a GPU backend or run without a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attention/gpu/device/runtime.h"
#include "attention/gpu/device/test_util.h"
#include "attention/gpu/indexer/launch.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

#if defined(DSA_GPU_ROCM) || defined(DSA_GPU_CUDA)
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

// The reference: a strict total order (value descending, NaN last, then the
// lower index), the first topk, ascending positions, -1 padding.
std::vector<int32_t> ReferenceTopK(const float* row, int32_t start, int32_t end,
                                   int topk) {
  std::vector<int32_t> idx(end - start);
  std::iota(idx.begin(), idx.end(), start);
  auto better = [row](int32_t x, int32_t y) {
    const float vx = row[x], vy = row[y];
    const bool nan_x = std::isnan(vx), nan_y = std::isnan(vy);
    if (nan_x != nan_y) return nan_y;
    if (!nan_x && vx != vy) return vx > vy;
    return x < y;
  };
  if (static_cast<int>(idx.size()) > topk) {
    std::sort(idx.begin(), idx.end(), better);
    idx.resize(topk);
  }
  std::sort(idx.begin(), idx.end());
  idx.resize(topk, -1);
  return idx;
}

enum class Values { kRandom, kFewDistinct, kSpecials };

struct TopKCase {
  std::string name;
  int topk;
  int64_t width;
  Values values;
  std::vector<std::pair<int32_t, int32_t>> windows;
};

class IndexerTopKTest : public ::testing::TestWithParam<TopKCase> {};

TEST_P(IndexerTopKTest, MatchesReference) {
  if (!kBuilt) {
    GTEST_SKIP() << "built without a GPU backend: use --config=cuda or "
                    "--config=rocm";
  }
  const TopKCase& c = GetParam();
  const int64_t rows = static_cast<int64_t>(c.windows.size());
  const int64_t stride = c.width + 5;
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> small(0, 5);
  std::vector<float> logits(rows * stride);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f};
  for (float& v : logits) {
    switch (c.values) {
      case Values::kRandom:
        v = normal(rng);
        break;
      case Values::kFewDistinct:
        v = static_cast<float>(small(rng));  // heavy ties
        break;
      case Values::kSpecials:
        v = (rng() % 4 == 0) ? specials[rng() % 7] : normal(rng);
        break;
    }
  }
  std::vector<int32_t> starts(rows), ends(rows);
  for (int64_t i = 0; i < rows; ++i) {
    starts[i] = c.windows[i].first;
    ends[i] = c.windows[i].second;
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
  ASSERT_LAUNCH(IndexerTopKLaunch(p, nullptr));
  ASSERT_LAUNCH(DeviceSynchronize());
  std::vector<int32_t> got;
  ASSERT_LAUNCH(d_topk.Download(&got));
  for (int64_t i = 0; i < rows; ++i) {
    const std::vector<int32_t> want =
        ReferenceTopK(logits.data() + i * stride, starts[i], ends[i], c.topk);
    for (int k = 0; k < c.topk; ++k) {
      ASSERT_EQ(got[i * topk_stride + k], want[k])
          << "row " << i << " window [" << starts[i] << ", " << ends[i]
          << ") slot " << k;
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
  // Lengths around topk, windows starting mid-row, empty and short windows,
  // and windows longer than what a block stages in shared memory.
  const std::vector<std::pair<int32_t, int32_t>> windows = {
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
      {5, 8192 + 5},
      {0, 10000},
      {777, 12000},
      {12000 - k - 1, 12000}};
  cases.push_back({"random_k2048", k, 12000, Values::kRandom, windows});
  cases.push_back({"ties_k2048", k, 12000, Values::kFewDistinct, windows});
  cases.push_back({"specials_k2048", k, 12000, Values::kSpecials, windows});
  // A small k over many rows of random windows.
  std::mt19937 rng(12345);
  std::vector<std::pair<int32_t, int32_t>> small_windows;
  for (int i = 0; i < 300; ++i) {
    const int32_t a = static_cast<int32_t>(rng() % 600);
    const int32_t b = static_cast<int32_t>(rng() % 600);
    small_windows.push_back({std::min(a, b), std::max(a, b)});
  }
  cases.push_back({"random_k7", 7, 600, Values::kRandom, small_windows});
  cases.push_back({"ties_k7", 7, 600, Values::kFewDistinct, small_windows});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Windows, IndexerTopKTest,
                         ::testing::ValuesIn(TopKCases()),
                         [](const ::testing::TestParamInfo<TopKCase>& info) {
                           return info.param.name;
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
