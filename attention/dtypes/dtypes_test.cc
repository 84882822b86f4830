// The kernels' fp8 / bf16 / ue8m0 conversions against the float64
// reference's independent definitions (exhaustive nearest-code search), on
// every code, every rounding midpoint and many random values.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/dtype.h"
#include "attention/dtypes/fp8.h"
#include "attention/reference/reference.h"
#include "gtest/gtest.h"

namespace dsa::attention {
namespace {

using reference::Fp8Kind;

struct Format {
  DType dtype;
  Fp8Kind kind;
};

class Fp8Test : public ::testing::TestWithParam<Format> {
 protected:
  Fp8Traits traits() const { return Fp8TraitsOf(GetParam().dtype); }
  Fp8Kind kind() const { return GetParam().kind; }
};

TEST_P(Fp8Test, DecodesEveryCodeAsTheReference) {
  for (int c = 0; c < 256; ++c) {
    const double expected =
        reference::Fp8Value(static_cast<uint8_t>(c), kind());
    const float got = Fp8ToFloat(static_cast<uint8_t>(c), traits());
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(got, expected) << "code " << c;
    }
  }
}

TEST_P(Fp8Test, MaxAndNanCodes) {
  const bool fnuz = GetParam().dtype == DType::kFloat8E4m3fnuz;
  EXPECT_EQ(Fp8Max(GetParam().dtype), fnuz ? 240.0f : 448.0f);
  EXPECT_EQ(FloatToFp8(1e9f, traits()), fnuz ? 0x7f : 0x7e);
  EXPECT_EQ(FloatToFp8(-1e9f, traits()), fnuz ? 0xff : 0xfe);
  EXPECT_EQ(FloatToFp8(std::numeric_limits<float>::infinity(), traits()),
            fnuz ? 0x7f : 0x7e);
  const uint8_t nan =
      FloatToFp8(std::numeric_limits<float>::quiet_NaN(), traits());
  EXPECT_TRUE(std::isnan(Fp8ToFloat(nan, traits())));
  // e4m3fnuz has no negative zero: -0 and tiny negatives encode as +0.
  EXPECT_EQ(FloatToFp8(-0.0f, traits()), fnuz ? 0x00 : 0x80);
  EXPECT_EQ(FloatToFp8(-1e-9f, traits()), fnuz ? 0x00 : 0x80);
}

// Every finite code round-trips, and every midpoint between neighbours
// (and the floats just either side of it) rounds as the reference does:
// ties to the even mantissa, saturating above max.
TEST_P(Fp8Test, EncodesCodesAndMidpointsAsTheReference) {
  std::vector<double> values;
  for (int c = 0; c < 256; ++c) {
    const double v = reference::Fp8Value(static_cast<uint8_t>(c), kind());
    if (!std::isnan(v)) values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  int checked = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<float> probes = {static_cast<float>(values[i])};
    if (i + 1 < values.size()) {
      const float mid = static_cast<float>((values[i] + values[i + 1]) / 2);
      probes.push_back(mid);
      probes.push_back(std::nextafter(mid, -INFINITY));
      probes.push_back(std::nextafter(mid, INFINITY));
    }
    for (float x : probes) {
      const uint8_t expected = reference::Fp8Nearest(x, kind());
      const uint8_t got = FloatToFp8(x, traits());
      EXPECT_EQ(static_cast<int>(got), static_cast<int>(expected))
          << "x = " << x;
      ++checked;
    }
  }
  EXPECT_GT(checked, 900);
}

TEST_P(Fp8Test, EncodesRandomValuesAsTheReference) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> exponent(-14.0, 10.0);
  for (int i = 0; i < 200000; ++i) {
    const float x =
        static_cast<float>((i % 2 ? -1 : 1) * std::exp2(exponent(rng)));
    ASSERT_EQ(static_cast<int>(FloatToFp8(x, traits())),
              static_cast<int>(reference::Fp8Nearest(x, kind())))
        << "x = " << x;
  }
}

TEST_P(Fp8Test, Ue8m0ScaleIsThePowerOfTwoAtOrAboveAmaxOverMax) {
  const float max = traits().max;
  // Clamp: tiny or zero amax uses 1e-4.
  EXPECT_EQ(Ue8m0Scale(0.0f, max), reference::Ue8m0Scale(0.0, kind()));
  EXPECT_EQ(Ue8m0Scale(1e-9f, max), reference::Ue8m0Scale(1e-4, kind()));
  // Exact powers of two stay.
  EXPECT_EQ(Ue8m0Scale(max * 0.25f, max), 0.25f);
  EXPECT_EQ(Ue8m0Scale(std::nextafter(max * 0.25f, INFINITY), max), 0.5f);
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> exponent(-20.0, 20.0);
  for (int i = 0; i < 100000; ++i) {
    const float amax = static_cast<float>(std::exp2(exponent(rng)));
    const float s = Ue8m0Scale(amax, max);
    // The reference in double; float32 division can only differ when
    // amax / max lies within float rounding of a power of two.
    const double expected = reference::Ue8m0Scale(amax, kind());
    const double ratio = std::max<double>(amax, 1e-4) / max;
    const double nearest_pow2 = std::exp2(std::round(std::log2(ratio)));
    if (std::fabs(ratio / nearest_pow2 - 1) < 1e-6) continue;
    ASSERT_EQ(s, expected) << "amax = " << amax;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, Fp8Test,
    ::testing::Values(Format{DType::kFloat8E4m3fn, Fp8Kind::kE4m3fn},
                      Format{DType::kFloat8E4m3fnuz, Fp8Kind::kE4m3fnuz}),
    [](const ::testing::TestParamInfo<Format>& info) {
      return std::string(DTypeName(info.param.dtype)).substr(7);
    });

TEST(Bf16Test, RoundsToNearestEvenAsTheReference) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> exponent(-130.0, 120.0);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float x = static_cast<float>(std::exp2(exponent(rng)));
    // Half of the probes are exact midpoints between two bf16 values.
    if (i % 2) {
      uint32_t b;
      std::memcpy(&b, &x, 4);
      b = (b & 0xffff0000u) | 0x8000u;
      std::memcpy(&x, &b, 4);
    }
    if (bits(rng) & 1) x = -x;
    ASSERT_EQ(FloatToBf16(x), reference::Bf16Nearest(x)) << "x = " << x;
    ASSERT_EQ(Bf16ToFloat(FloatToBf16(x)),
              reference::Bf16Value(reference::Bf16Nearest(x)));
  }
}

TEST(Bf16Test, NanStaysNanAndInfinityStays) {
  EXPECT_TRUE(std::isnan(
      Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lies only in the low 16 bits must not truncate to
  // infinity.
  uint32_t low_payload_nan = 0x7f800001u;
  float f;
  std::memcpy(&f, &low_payload_nan, 4);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(INFINITY)), INFINITY);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-INFINITY)), -INFINITY);
}

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat8E4m3fnuz), 1u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_STREQ(DTypeName(DType::kFloat8E4m3fn), "float8_e4m3fn");
  EXPECT_TRUE(IsFp8(DType::kFloat8E4m3fnuz));
  EXPECT_FALSE(IsFp8(DType::kUint8));
}

}  // namespace
}  // namespace dsa::attention
