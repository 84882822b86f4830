// Hand-computed checks of the float64 references themselves, so that a
// kernel and its reference cannot agree on a mistake.
#include "attention/reference/reference.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dsa::attention::reference {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;

TEST(ReferenceFp8Test, KnownCodes) {
  EXPECT_EQ(Fp8Value(0x7e, Fp8Kind::kE4m3fn), 448.0);
  EXPECT_EQ(Fp8Value(0x7f, Fp8Kind::kE4m3fnuz), 240.0);
  EXPECT_EQ(Fp8Value(0x38, Fp8Kind::kE4m3fn), 1.0);    // exponent 7 = bias
  EXPECT_EQ(Fp8Value(0x40, Fp8Kind::kE4m3fnuz), 1.0);  // exponent 8 = bias
  EXPECT_EQ(Fp8Value(0x01, Fp8Kind::kE4m3fn), std::ldexp(1.0, -9));
  EXPECT_EQ(Fp8Value(0x01, Fp8Kind::kE4m3fnuz), std::ldexp(1.0, -10));
  EXPECT_EQ(Fp8Value(0xb8, Fp8Kind::kE4m3fn), -1.0);
  EXPECT_TRUE(std::isnan(Fp8Value(0xff, Fp8Kind::kE4m3fn)));
  EXPECT_TRUE(std::isnan(Fp8Value(0x80, Fp8Kind::kE4m3fnuz)));
  EXPECT_EQ(Fp8Value(0x80, Fp8Kind::kE4m3fn), 0.0);
}

TEST(ReferenceFp8Test, NearestTiesToEvenAndSaturates) {
  // Between 1.0 (0x38) and 1.125 (0x39): 1.0625 is a tie -> even 0x38;
  // between 1.125 and 1.25 (0x3a): 1.1875 -> 0x3a.
  EXPECT_EQ(Fp8Nearest(1.0625, Fp8Kind::kE4m3fn), 0x38);
  EXPECT_EQ(Fp8Nearest(1.1875, Fp8Kind::kE4m3fn), 0x3a);
  EXPECT_EQ(Fp8Nearest(1.07, Fp8Kind::kE4m3fn), 0x39);
  EXPECT_EQ(Fp8Nearest(1000.0, Fp8Kind::kE4m3fn), 0x7e);
  EXPECT_EQ(Fp8Nearest(-1000.0, Fp8Kind::kE4m3fnuz), 0xff);
  EXPECT_EQ(Fp8Nearest(-1e-9, Fp8Kind::kE4m3fnuz), 0x00);
  EXPECT_EQ(Fp8Ulp(1.5, Fp8Kind::kE4m3fn), 0.125);
  EXPECT_EQ(Fp8Ulp(300.0, Fp8Kind::kE4m3fn), 32.0);
  EXPECT_EQ(Fp8Ulp(1e-4, Fp8Kind::kE4m3fnuz), std::ldexp(1.0, -10));
}

TEST(ReferenceBf16Test, Rounding) {
  EXPECT_EQ(Bf16Nearest(1.0), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(Bf16Nearest(1.0 + std::ldexp(1.0, -8)), 0x3f80);
  EXPECT_EQ(Bf16Nearest(1.0 + 3 * std::ldexp(1.0, -8)), 0x3f82);
  EXPECT_EQ(Bf16Value(0xc000), -2.0);
}

TEST(ReferenceScaleTest, Ue8m0) {
  EXPECT_EQ(Ue8m0Scale(448.0, Fp8Kind::kE4m3fn), 1.0);
  EXPECT_EQ(Ue8m0Scale(449.0, Fp8Kind::kE4m3fn), 2.0);
  EXPECT_EQ(Ue8m0Scale(3.0, Fp8Kind::kE4m3fnuz), 1.0 / 64);  // 3/240 = 0.0125
  EXPECT_EQ(Ue8m0Scale(0.0, Fp8Kind::kE4m3fn),
            std::exp2(std::ceil(std::log2(1e-4 / 448))));
}

TEST(ReferenceMathTest, LayerNormOfKnownVector) {
  // mean 2.5, variance 1.25.
  std::vector<double> y =
      LayerNorm({1, 2, 3, 4}, {1, 1, 2, 1}, {0, 0, 0, 1}, 0);
  const double s = 1 / std::sqrt(1.25);
  EXPECT_THAT(
      y, ElementsAre(DoubleNear(-1.5 * s, 1e-12), DoubleNear(-0.5 * s, 1e-12),
                     DoubleNear(2 * 0.5 * s, 1e-12),
                     DoubleNear(1.5 * s + 1, 1e-12)));
}

TEST(ReferenceMathTest, RopeStyles) {
  // rope_dim 4: pair 0 rotated by 90 degrees, pair 1 unrotated.
  const std::vector<double> cos_sin = {0, 1, 1, 0};
  std::vector<double> neox = {1, 2, 3, 4, 5};
  Rope(neox, cos_sin, /*neox=*/true);  // pairs (0,2) and (1,3)
  EXPECT_THAT(neox, ElementsAre(-3, 2, 1, 4, 5));
  std::vector<double> interleaved = {1, 2, 3, 4, 5};
  Rope(interleaved, cos_sin, /*neox=*/false);  // pairs (0,1) and (2,3)
  EXPECT_THAT(interleaved, ElementsAre(-2, 1, 3, 4, 5));
}

TEST(ReferenceMathTest, IndexerLogitAppliesReluPerHead) {
  // Two heads of dim 2: dots 3 and -1 with k scale 2: relu -> 6 and 0.
  double magnitude = 0;
  const double logit =
      IndexerLogit({1, 1, -1, 0}, {0.5, 10}, {1, 2}, 2.0, &magnitude);
  EXPECT_EQ(logit, 3.0);
  EXPECT_EQ(magnitude, 0.5 * 3 * 2 + 10 * 1 * 2);
}

TEST(ReferenceTopKTest, TiesPickLowerIndexAndPad) {
  const std::vector<float> logits = {5, 1, 3, 3, 3, NAN, 4};
  EXPECT_THAT(TopK(logits, 0, 7, 3), ElementsAre(0, 2, 6));
  EXPECT_THAT(TopK(logits, 1, 6, 3), ElementsAre(2, 3, 4));
  EXPECT_THAT(TopK(logits, 4, 6, 4), ElementsAre(4, 5, -1, -1));
  EXPECT_THAT(TopK(logits, 3, 3, 2), ElementsAre(-1, -1));
}

TEST(ReferenceAttentionTest, SoftmaxWeightsValues) {
  // One head, keys giving scores 0 and log(3): weights 1/4 and 3/4.
  const std::vector<double> q = {1.0};
  const std::vector<std::vector<double>> keys = {{0.0}, {std::log(3.0)}};
  const std::vector<std::vector<double>> values = {{4.0, 0.0}, {0.0, 8.0}};
  EXPECT_THAT(Attention(q, 1, keys, values, 1.0),
              ElementsAre(DoubleNear(1.0, 1e-12), DoubleNear(6.0, 1e-12)));
  EXPECT_TRUE(Attention(q, 1, {}, {}, 1.0).empty());
  EXPECT_THAT(MatVec({1, 2, 3, 4}, 2, {1, 1}), ElementsAre(3, 7));
}

}  // namespace
}  // namespace dsa::attention::reference
