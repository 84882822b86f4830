// The gemm op's two GPU backends on bf16 operands: the platform's vendor
// GEMM (kAuto: cuBLASLt / rocBLAS) and the project's tiled kernel
// (kOwnKernel), each against a float64 product of the same bf16 inputs, with
// the output poisoned first; the same for fp8_block_gemm. Skips without a
// device or a GPU backend.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "attention/dense_ops.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
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

// fp8_block_gemm on both backends (kAuto: cuBLASLt's block-scaled matmul
// where it takes the layout, kOwnKernel: the project's kernel) at projection
// shapes of GLM-5.1 and odd ones, against a float64 product of the
// activations quantised by the host's rule (attention/dtypes/fp8.h) and the
// dequantised weight.
TEST_P(GemmBackendTest, Fp8BlockGemmMatchesFloat64OnQuantisedActivations) {
  struct Shape {
    int64_t rows, in, out;
  };
  std::mt19937 gen(
      static_cast<uint32_t>(::testing::UnitTest::GetInstance()->random_seed()));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const Shape& sh :
       {Shape{1, 6144, 576}, Shape{1, 6144, 2048}, Shape{77, 2048, 512},
        Shape{130, 512, 1024}, Shape{5, 200, 136}, Shape{64, 6144, 128},
        Shape{3, 16384, 256}}) {
    for (DType y_type : {DType::kBFloat16, DType::kFloat32}) {
      SCOPED_TRACE(::testing::Message()
                   << sh.rows << " x " << sh.in << " -> " << sh.out << " y "
                   << DTypeName(y_type));
      const int64_t groups = Fp8Blocks(sh.in), out_blocks = Fp8Blocks(sh.out);
      std::vector<uint16_t> x(sh.rows * sh.in);
      for (uint16_t& v : x) v = FloatToBf16(dist(gen));
      // The weight's codes and block scales as a checkpoint holds them.
      std::vector<uint8_t> w(sh.out * sh.in);
      std::vector<float> ws(out_blocks * groups);
      for (uint8_t& c : w) {
        c = FloatToFp8(dist(gen) * 100.0f, kE4m3fnTraits);
        if ((c & 0x7f) == 0x7f) c = 0;  // no NaN codes
      }
      for (float& v : ws) v = 1e-4f * (1.0f + std::fabs(dist(gen)));
      DeviceArray dx, dw, ds, dy;
      ASSERT_LAUNCH(dx.Upload(x));
      ASSERT_LAUNCH(dw.Upload(w));
      ASSERT_LAUNCH(ds.Upload(ws));
      const size_t y_bytes = sh.rows * sh.out * DTypeSize(y_type);
      ASSERT_LAUNCH(dy.Upload(std::vector<uint8_t>(y_bytes, 0xff)));  // NaN
      Fp8BlockGemm::Args args;
      args.x =
          MakeTensorView(dx.get<void>(), DType::kBFloat16, {sh.rows, sh.in});
      args.w =
          MakeTensorView(dw.get<void>(), DType::kFloat8E4m3fn, {sh.out, sh.in});
      args.w_scale_inv =
          MakeTensorView(ds.get<void>(), DType::kFloat32, {out_blocks, groups});
      args.y = MakeTensorView(dy.get<void>(), y_type, {sh.rows, sh.out});
      const Status st = Fp8BlockGemmGpuOn(ExecutionContext(), args, GetParam());
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_LAUNCH(DeviceSynchronize());
      std::vector<uint8_t> y_bytes_host;
      ASSERT_LAUNCH(dy.Download(&y_bytes_host));
      // The host's quantisation of x and the dequantised operands.
      std::vector<double> xd(sh.rows * sh.in), wd(sh.out * sh.in);
      for (int64_t r = 0; r < sh.rows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t c0 = g * kFp8BlockSize;
          const int64_t n = std::min<int64_t>(kFp8BlockSize, sh.in - c0);
          float amax = 0.0f;
          for (int64_t i = 0; i < n; ++i) {
            amax =
                std::max(amax, std::fabs(Bf16ToFloat(x[r * sh.in + c0 + i])));
          }
          const float s = Fp8BlockScale(amax, 448.0f);
          for (int64_t i = 0; i < n; ++i) {
            const uint8_t code = FloatToFp8(
                Bf16ToFloat(x[r * sh.in + c0 + i]) / s, kE4m3fnTraits);
            xd[r * sh.in + c0 + i] =
                double{Fp8ToFloat(code, kE4m3fnTraits)} * s;
          }
        }
      }
      for (int64_t o = 0; o < sh.out; ++o) {
        for (int64_t i = 0; i < sh.in; ++i) {
          wd[o * sh.in + i] =
              double{Fp8ToFloat(w[o * sh.in + i], kE4m3fnTraits)} *
              ws[(o / kFp8BlockSize) * groups + i / kFp8BlockSize];
        }
      }
      double worst = 0.0;
      for (int64_t r = 0; r < sh.rows; ++r) {
        for (int64_t o = 0; o < sh.out; ++o) {
          double want = 0.0, scale = 0.0;
          for (int64_t i = 0; i < sh.in; ++i) {
            const double p = xd[r * sh.in + i] * wd[o * sh.in + i];
            want += p;
            scale += std::fabs(p);
          }
          double got;
          if (y_type == DType::kFloat32) {
            float f;
            std::memcpy(&f, y_bytes_host.data() + 4 * (r * sh.out + o), 4);
            got = f;
          } else {
            uint16_t b;
            std::memcpy(&b, y_bytes_host.data() + 2 * (r * sh.out + o), 2);
            got = Bf16ToFloat(b);
          }
          ASSERT_TRUE(std::isfinite(got)) << "row " << r << " col " << o;
          const double tol =
              (y_type == DType::kBFloat16 ? std::fabs(want) * 0x1p-8 : 0.0) +
              scale * (sh.in * 0x1p-24 + 1e-6) + 1e-30;
          worst = std::max(worst, std::fabs(got - want) / tol);
        }
      }
      EXPECT_LE(worst, 1.0) << GpuFp8GemmBackend();
    }
  }
  std::cout << "fp8_block_gemm "
            << (GetParam() == GemmBackend::kAuto ? "auto" : "own kernel")
            << ": " << GpuFp8GemmBackend() << "\n";
  RecordProperty("fp8_backend", GpuFp8GemmBackend());
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
