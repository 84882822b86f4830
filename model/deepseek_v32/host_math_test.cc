// Rope frequencies and tables per model: plain rope at each model's theta,
// and DeepSeek-V3.2's YaRN (21 of its 32 pairs changed), checked against the
// formulas written out here.
#include "model/deepseek_v32/host_math.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {
namespace {

TEST(RopeTest, PlainRopeUsesTheModelsTheta) {
  for (const char* name : {"glm-5.1", "glm-5.2"}) {
    auto config = LoadPreset(name);
    ASSERT_TRUE(config.ok());
    const double theta = config->proto().rope_theta();
    const std::vector<double> inv = RopeInverseFrequencies(config->proto());
    ASSERT_EQ(inv.size(), 32u);
    for (int i = 0; i < 32; ++i) {
      EXPECT_DOUBLE_EQ(inv[i], std::pow(theta, -i / 32.0)) << name << " " << i;
    }
    EXPECT_EQ(RopeCosSinScale(config->proto()), 1.0);
    const std::vector<float> table = RopeCosSinTable(config->proto(), 100);
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(table[i], 1.0f);       // cos 0
      EXPECT_EQ(table[32 + i], 0.0f);  // sin 0
      EXPECT_EQ(table[99 * 64 + i], static_cast<float>(std::cos(99 * inv[i])));
      EXPECT_EQ(table[99 * 64 + 32 + i],
                static_cast<float>(std::sin(99 * inv[i])));
    }
  }
}

TEST(RopeTest, DeepseekV32YarnChanges21Of32Pairs) {
  auto config = LoadPreset("deepseek-v3.2");
  ASSERT_TRUE(config.ok());
  const std::vector<double> inv = RopeInverseFrequencies(config->proto());
  ASSERT_EQ(inv.size(), 32u);
  // Correction range for dim 64, base 1e4, original 4096, betas 32 and 1:
  // floor(10.47) = 10 and ceil(22.5) = 23.
  const double pi = std::acos(-1.0);
  const double low =
      std::floor(64 * std::log(4096 / (32 * 2 * pi)) / (2 * std::log(1e4)));
  const double high =
      std::ceil(64 * std::log(4096 / (1 * 2 * pi)) / (2 * std::log(1e4)));
  ASSERT_EQ(low, 10);
  ASSERT_EQ(high, 23);
  int changed = 0;
  for (int i = 0; i < 32; ++i) {
    const double plain = std::pow(1e4, -i / 32.0);
    const double ramp = std::min(1.0, std::max(0.0, (i - low) / (high - low)));
    EXPECT_NEAR(inv[i], plain * (1 - ramp) + plain / 40 * ramp, 1e-15) << i;
    if (inv[i] != plain) ++changed;
  }
  EXPECT_EQ(changed, 21);
  EXPECT_DOUBLE_EQ(inv[10], std::pow(1e4, -10 / 32.0));
  EXPECT_NEAR(inv[11] / std::pow(1e4, -11 / 32.0), 0.925, 1e-3);
  EXPECT_DOUBLE_EQ(inv[31], std::pow(1e4, -31 / 32.0) / 40);
  // mscale == mscale_all_dim: cos and sin are not scaled.
  EXPECT_EQ(RopeCosSinScale(config->proto()), 1.0);
  DeepseekV32Config scaled = config->proto();
  scaled.mutable_rope_scaling()->set_mscale(2.0);
  EXPECT_DOUBLE_EQ(RopeCosSinScale(scaled),
                   (0.2 * std::log(40.0) + 1) / (0.1 * std::log(40.0) + 1));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
