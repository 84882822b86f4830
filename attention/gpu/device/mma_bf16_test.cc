// Bf16WarpMma (device/mma.h) and the bf16 conversions on the device:
// random bf16 products against a float64 reference, through both B layouts,
// and float -> bf16 rounding against a host implementation of
// round-to-nearest-even.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "attention/gpu/device/mma_bf16_check.h"
#include "gtest/gtest.h"

namespace dsa::gpu {
namespace {

#if defined(DSA_GPU_ROCM) || defined(DSA_GPU_CUDA)
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

uint16_t HostToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  }
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
double HostBf16ToDouble(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct ProductCase {
  int m, n, k;
  bool b_k_major;
};

class Bf16WarpMmaTest : public ::testing::TestWithParam<ProductCase> {};

TEST_P(Bf16WarpMmaTest, MatchesFloat64Reference) {
  if (!kBuilt) GTEST_SKIP() << "built without --config=cuda/--config=rocm";
  const ProductCase pc = GetParam();
  const Bf16MmaShape shape = Bf16MmaShapeOfBuild();
  std::printf("Bf16WarpMma %dx%dx%d via %s\n", shape.m, shape.n, shape.k,
              shape.instruction);
  std::mt19937 rng(pc.m * 131 + pc.n * 7 + pc.k + (pc.b_k_major ? 1 : 0));
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<uint16_t> a(static_cast<size_t>(pc.m) * pc.k);
  std::vector<uint16_t> b(static_cast<size_t>(pc.n) * pc.k);
  for (auto& v : a) v = HostToBf16(dist(rng));
  for (auto& v : b) v = HostToBf16(dist(rng));
  std::vector<float> c(static_cast<size_t>(pc.m) * pc.n,
                       std::numeric_limits<float>::quiet_NaN());
  char error[256] = {0};
  const MmaCheckResult r =
      Bf16MmaProduct(a.data(), b.data(), pc.b_k_major, c.data(), pc.m, pc.n,
                     pc.k, error, sizeof(error));
  if (r == MmaCheckResult::kNoDevice) GTEST_SKIP() << "no GPU: " << error;
  ASSERT_EQ(r, MmaCheckResult::kOk) << error;
  for (int i = 0; i < pc.m; ++i) {
    for (int j = 0; j < pc.n; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int l = 0; l < pc.k; ++l) {
        const double bv =
            pc.b_k_major
                ? HostBf16ToDouble(b[static_cast<size_t>(l) * pc.n + j])
                : HostBf16ToDouble(b[static_cast<size_t>(j) * pc.k + l]);
        const double p =
            HostBf16ToDouble(a[static_cast<size_t>(i) * pc.k + l]) * bv;
        ref += p;
        mag += std::abs(p);
      }
      // Products of bf16 values are exact in fp32; the only error is the fp32
      // summation of k terms (bounded by k * 2^-24 * sum |a b|; the matrix
      // cores' internal order is not specified, so allow the full bound).
      const double got = c[static_cast<size_t>(i) * pc.n + j];
      ASSERT_NEAR(got, ref, pc.k * 0x1p-24 * mag + 1e-30)
          << "c[" << i << "][" << j << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16WarpMmaTest,
                         ::testing::Values(ProductCase{64, 64, 64, false},
                                           ProductCase{64, 64, 64, true},
                                           ProductCase{128, 96, 512, false},
                                           ProductCase{128, 96, 512, true},
                                           ProductCase{32, 32, 256, true}));

class Bf16WarpgroupMmaTest : public ::testing::TestWithParam<int> {};

TEST_P(Bf16WarpgroupMmaTest, MatchesFloat64Reference) {
  if (!kBuilt) GTEST_SKIP() << "built without --config=cuda/--config=rocm";
  const int n = GetParam();
  constexpr int kM = 64, kK = 64;
  std::mt19937 rng(n * 31 + 5);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<uint16_t> a(kM * kK), b(n * kK);
  for (auto& v : a) v = HostToBf16(dist(rng));
  for (auto& v : b) v = HostToBf16(dist(rng));
  std::vector<float> c(kM * n, std::numeric_limits<float>::quiet_NaN());
  char error[256] = {0};
  const MmaCheckResult r = Bf16WarpgroupProduct(a.data(), b.data(), c.data(), n,
                                                error, sizeof(error));
  if (r == MmaCheckResult::kNoDevice || r == MmaCheckResult::kNotBuilt) {
    GTEST_SKIP() << error;
  }
  ASSERT_EQ(r, MmaCheckResult::kOk) << error;
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int l = 0; l < kK; ++l) {
        const double p =
            HostBf16ToDouble(a[i * kK + l]) * HostBf16ToDouble(b[j * kK + l]);
        ref += p;
        mag += std::abs(p);
      }
      ASSERT_NEAR(c[i * n + j], ref, kK * 0x1p-24 * mag + 1e-30)
          << "c[" << i << "][" << j << "] (n " << n << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, Bf16WarpgroupMmaTest,
                         ::testing::Values(32, 64, 128, 256));

// B MN-major (IssueMnB): b is [k][n], n contiguous, as the values of an
// attention key tile are.
class Bf16WarpgroupMnBTest : public ::testing::TestWithParam<int> {};

TEST_P(Bf16WarpgroupMnBTest, MatchesFloat64Reference) {
  if (!kBuilt) GTEST_SKIP() << "built without --config=cuda/--config=rocm";
  const int n = GetParam();
  constexpr int kM = 64, kK = 64;
  std::mt19937 rng(n * 17 + 3);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<uint16_t> a(kM * kK), b(kK * n);
  for (auto& v : a) v = HostToBf16(dist(rng));
  for (auto& v : b) v = HostToBf16(dist(rng));
  std::vector<float> c(kM * n, std::numeric_limits<float>::quiet_NaN());
  char error[256] = {0};
  const MmaCheckResult r = Bf16WarpgroupProductMnB(a.data(), b.data(), c.data(),
                                                   n, error, sizeof(error));
  if (r == MmaCheckResult::kNoDevice || r == MmaCheckResult::kNotBuilt) {
    GTEST_SKIP() << error;
  }
  ASSERT_EQ(r, MmaCheckResult::kOk) << error;
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int l = 0; l < kK; ++l) {
        const double p =
            HostBf16ToDouble(a[i * kK + l]) * HostBf16ToDouble(b[l * n + j]);
        ref += p;
        mag += std::abs(p);
      }
      ASSERT_NEAR(c[i * n + j], ref, kK * 0x1p-24 * mag + 1e-30)
          << "c[" << i << "][" << j << "] (n " << n << ", B MN-major)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, Bf16WarpgroupMnBTest,
                         ::testing::Values(32, 64, 256));

// Both forms again with the 128-byte swizzled layout: (n, B MN-major).
class Bf16WarpgroupSw128Test
    : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(Bf16WarpgroupSw128Test, MatchesFloat64Reference) {
  if (!kBuilt) GTEST_SKIP() << "built without --config=cuda/--config=rocm";
  const auto [n, mn_b] = GetParam();
  constexpr int kM = 64, kK = 64;
  std::mt19937 rng(n * 13 + (mn_b ? 7 : 1));
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<uint16_t> a(kM * kK), b(kK * n);
  for (auto& v : a) v = HostToBf16(dist(rng));
  for (auto& v : b) v = HostToBf16(dist(rng));
  std::vector<float> c(kM * n, std::numeric_limits<float>::quiet_NaN());
  char error[256] = {0};
  const MmaCheckResult r = Bf16WarpgroupProductSw128(
      a.data(), b.data(), mn_b, c.data(), n, error, sizeof(error));
  if (r == MmaCheckResult::kNoDevice || r == MmaCheckResult::kNotBuilt) {
    GTEST_SKIP() << error;
  }
  ASSERT_EQ(r, MmaCheckResult::kOk) << error;
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int l = 0; l < kK; ++l) {
        const uint16_t bv = mn_b ? b[l * n + j] : b[j * kK + l];
        const double p = HostBf16ToDouble(a[i * kK + l]) * HostBf16ToDouble(bv);
        ref += p;
        mag += std::abs(p);
      }
      ASSERT_NEAR(c[i * n + j], ref, kK * 0x1p-24 * mag + 1e-30)
          << "c[" << i << "][" << j << "] (n " << n
          << (mn_b ? ", B MN-major" : ", B K-major") << ", swizzled)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, Bf16WarpgroupSw128Test,
                         ::testing::Combine(::testing::Values(64, 256),
                                            ::testing::Bool()));

// The descriptor-driven forms the sparse MLA's seesaw body issues for P V:
// (n, A in registers), B MN-major, swizzled.
class Bf16WarpgroupDescMnBTest
    : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(Bf16WarpgroupDescMnBTest, MatchesFloat64Reference) {
  if (!kBuilt) GTEST_SKIP() << "built without --config=cuda/--config=rocm";
  const auto [n, a_registers] = GetParam();
  constexpr int kM = 64, kK = 64;
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<uint16_t> a(kM * kK), b(kK * n);
  for (auto& v : a) v = HostToBf16(dist(rng));
  for (auto& v : b) v = HostToBf16(dist(rng));
  std::vector<float> c(kM * n, std::numeric_limits<float>::quiet_NaN());
  char error[256] = {0};
  const MmaCheckResult r = Bf16WarpgroupProductDescMnB(
      a.data(), b.data(), a_registers, c.data(), n, error, sizeof(error));
  if (r == MmaCheckResult::kNoDevice || r == MmaCheckResult::kNotBuilt) {
    GTEST_SKIP() << error;
  }
  ASSERT_EQ(r, MmaCheckResult::kOk) << error;
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int l = 0; l < kK; ++l) {
        const double p =
            HostBf16ToDouble(a[i * kK + l]) * HostBf16ToDouble(b[l * n + j]);
        ref += p;
        mag += std::abs(p);
      }
      ASSERT_NEAR(c[i * n + j], ref, kK * 0x1p-24 * mag + 1e-30)
          << "c[" << i << "][" << j << "] (n " << n
          << (a_registers ? ", A in registers" : ", A in shared memory") << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, Bf16WarpgroupDescMnBTest,
                         ::testing::Combine(::testing::Values(64, 256),
                                            ::testing::Bool()));

TEST(Bf16ConvertTest, RoundsToNearestEven) {
  if (!kBuilt) GTEST_SKIP() << "built without --config=cuda/--config=rocm";
  std::vector<float> in = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::denorm_min(),
                           1e-40f};
  // Ties (low half exactly 0x8000) with even and odd kept parts, and values
  // just either side of a tie.
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u,
                        0xbf818000u, 0x7f7f8000u, 0x7fc00001u, 0xff800001u}) {
    float f;
    std::memcpy(&f, &bits, 4);
    in.push_back(f);
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  while (in.size() < 4096) {
    const uint32_t bits = any(rng);
    float f;
    std::memcpy(&f, &bits, 4);
    in.push_back(f);
  }
  const int64_t n = static_cast<int64_t>(in.size());
  std::vector<uint16_t> bits(n, 0xdead);
  std::vector<float> back(n, 0.0f);
  std::vector<uint32_t> packed(n / 2, 0xdeadbeefu);
  char error[256] = {0};
  const MmaCheckResult r = Bf16Convert(in.data(), bits.data(), back.data(),
                                       packed.data(), n, error, sizeof(error));
  if (r == MmaCheckResult::kNoDevice) GTEST_SKIP() << "no GPU: " << error;
  ASSERT_EQ(r, MmaCheckResult::kOk) << error;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t want = HostToBf16(in[i]);
    if (std::isnan(in[i])) {
      EXPECT_TRUE(std::isnan(HostBf16ToDouble(bits[i]))) << i;
      EXPECT_TRUE(std::isnan(back[i])) << i;
    } else {
      EXPECT_EQ(bits[i], want) << "in=" << in[i] << " i=" << i;
      EXPECT_EQ(static_cast<double>(back[i]), HostBf16ToDouble(want)) << i;
    }
  }
  for (int64_t i = 0; i < n / 2; ++i) {
    for (int h = 0; h < 2; ++h) {
      const float f = in[2 * i + h];
      const uint16_t got = static_cast<uint16_t>(packed[i] >> (16 * h));
      if (std::isnan(f)) {
        EXPECT_TRUE(std::isnan(HostBf16ToDouble(got))) << i;
      } else {
        EXPECT_EQ(got, HostToBf16(f)) << "packed in=" << f << " i=" << i;
      }
    }
  }
}

}  // namespace
}  // namespace dsa::gpu
