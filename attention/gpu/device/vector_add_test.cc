#include "attention/gpu/device/vector_add.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dsa::gpu {

#if defined(DSA_GPU_ROCM) || defined(DSA_GPU_CUDA)
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

class VectorAddTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(VectorAddTest, MatchesFloat64Reference) {
  if (!kBuilt) {
    GTEST_SKIP() << "built without a GPU backend: use --config=cuda or "
                    "--config=rocm";
  }
  const int64_t n = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(n * 7919 + 17));
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = dist(rng);
    b[i] = dist(rng);
  }
  const int64_t blocks = (n + kVectorAddBlock - 1) / kVectorAddBlock;
  // Poisoned outputs: an element the kernel does not write stays NaN.
  std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> sums(blocks, std::numeric_limits<float>::quiet_NaN());
  char error[256] = {0};
  const GpuCallResult r = DeviceVectorAdd(a.data(), b.data(), out.data(),
                                          sums.data(), n, error, sizeof(error));
  if (r == GpuCallResult::kNoDevice) {
    GTEST_SKIP() << "no GPU device: " << error;
  }
  ASSERT_EQ(r, GpuCallResult::kOk) << error;
  std::printf("backend=%s warp=%d n=%lld\n", GpuBackendName(), GpuWarpSize(),
              static_cast<long long>(n));

  for (int64_t i = 0; i < n; ++i) {
    const double ref = static_cast<double>(a[i]) + static_cast<double>(b[i]);
    // One float rounding of an exact sum.
    ASSERT_NEAR(out[i], ref, std::abs(ref) * 1e-7 + 1e-30) << "i=" << i;
  }
  for (int64_t blk = 0; blk < blocks; ++blk) {
    double ref = 0.0, abs_sum = 0.0;
    for (int64_t i = blk * kVectorAddBlock;
         i < std::min(n, (blk + 1) * kVectorAddBlock); ++i) {
      ref += static_cast<double>(a[i]) + static_cast<double>(b[i]);
      abs_sum += std::abs(static_cast<double>(a[i]) + b[i]);
    }
    ASSERT_FALSE(std::isnan(sums[blk])) << "block " << blk << " not written";
    // 256 float additions: the error is bounded by ~log2(256) roundings of
    // the absolute sum.
    ASSERT_NEAR(sums[blk], ref, abs_sum * 1e-6) << "block " << blk;
  }
}

// Sizes around the block and warp widths, and a large one that fills a GPU.
INSTANTIATE_TEST_SUITE_P(Sizes, VectorAddTest,
                         ::testing::Values(1, 31, 32, 33, 63, 64, 65, 255, 256,
                                           257, 100003, 1 << 24));

}  // namespace dsa::gpu
