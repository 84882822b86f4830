// The gemm op's two GPU backends on bf16 operands: the platform's vendor
// GEMM (kAuto: cuBLASLt / rocBLAS) and the project's tiled kernel
// (kOwnKernel), each against a float64 product of the same bf16 inputs, with
// the output poisoned first. Skips without a device or a GPU backend.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attention/dense_ops.h"
#include "attention/dtypes/bf16.h"
#include "attention/gpu/dense_ops/op_kernels.h"
#include "attention/gpu/device/test_util.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

class GemmBackendTest : public ::testing::TestWithParam<GemmBackend> {};

TEST_P(GemmBackendTest, MatchesFloat64OnBf16) {
  // Odd sizes: partial tiles on every side.
  const int64_t rows = 77, in = 200, out = 136;
  std::mt19937 gen(
      static_cast<uint32_t>(::testing::UnitTest::GetInstance()->random_seed()));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> x(rows * in), w(out * in);
  for (uint16_t& v : x) v = FloatToBf16(dist(gen));
  for (uint16_t& v : w) v = FloatToBf16(dist(gen));
  DeviceArray dx, dw, dy;
  ASSERT_LAUNCH(dx.Upload(x));
  ASSERT_LAUNCH(dw.Upload(w));
  ASSERT_LAUNCH(dy.Upload(std::vector<float>(rows * out, std::nanf(""))));
  Gemm::Args args;
  args.x = MakeTensorView(dx.get<void>(), DType::kBFloat16, {1, rows, in});
  args.w = MakeTensorView(dw.get<void>(), DType::kBFloat16, {1, out, in});
  args.y = MakeTensorView(dy.get<void>(), DType::kFloat32, {1, rows, out});
  const Status s = GemmGpuOn(ExecutionContext(), args, GetParam());
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_LAUNCH(DeviceSynchronize());
  std::vector<float> y;
  ASSERT_LAUNCH(dy.Download(&y));
  double worst = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double want = 0.0, scale = 0.0;
      for (int64_t k = 0; k < in; ++k) {
        const double p = static_cast<double>(Bf16ToFloat(x[r * in + k])) *
                         Bf16ToFloat(w[o * in + k]);
        want += p;
        scale += std::fabs(p);
      }
      const double got = y[r * out + o];
      ASSERT_TRUE(std::isfinite(got)) << "row " << r << " col " << o;
      worst = std::max(worst, std::fabs(got - want) / (scale + 1e-30));
    }
  }
  // fp32 accumulation of exact bf16 products: well inside 2^-16 of the sum
  // of |products| at this depth.
  EXPECT_LE(worst, 0x1p-16) << GpuGemmBackend();
}

INSTANTIATE_TEST_SUITE_P(Backends, GemmBackendTest,
                         ::testing::Values(GemmBackend::kAuto,
                                           GemmBackend::kOwnKernel),
                         [](const auto& info) {
                           return info.param == GemmBackend::kAuto
                                      ? std::string("auto")
                                      : std::string("own_kernel");
                         });

}  // namespace
}  // namespace dsa::attention::gpu
