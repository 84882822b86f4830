#include "model/deepseek_v32/host_math.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<double> PlainInverseFrequencies(int rope_dim, double base) {
  std::vector<double> inv(rope_dim / 2);
  for (int i = 0; i < rope_dim / 2; ++i) {
    inv[i] = std::pow(base, -2.0 * i / rope_dim);
  }
  return inv;
}

std::vector<float> Table(const std::vector<double>& inv_freq,
                         int64_t max_position, double scale) {
  const int half = static_cast<int>(inv_freq.size());
  const int rope_dim = 2 * half;
  std::vector<float> table(static_cast<size_t>(max_position) * rope_dim);
  for (int64_t p = 0; p < max_position; ++p) {
    float* row = table.data() + p * rope_dim;
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * inv_freq[i];
      row[i] = static_cast<float>(std::cos(angle) * scale);
      row[half + i] = static_cast<float>(std::sin(angle) * scale);
    }
  }
  return table;
}

// vLLM's _yarn_find_correction_dim.
double CorrectionDim(double rotations, int dim, double base,
                     double original_max_position) {
  return dim * std::log(original_max_position / (rotations * 2.0 * kPi)) /
         (2.0 * std::log(base));
}

}  // namespace

std::vector<double> RopeInverseFrequencies(const DeepseekV32Config& c) {
  const int dim = c.qk_rope_head_dim();
  std::vector<double> inv = PlainInverseFrequencies(dim, c.rope_theta());
  if (!c.has_rope_scaling()) return inv;
  const RopeScaling& y = c.rope_scaling();
  const double original =
      static_cast<double>(y.original_max_position_embeddings());
  double low =
      std::floor(CorrectionDim(y.beta_fast(), dim, c.rope_theta(), original));
  double high =
      std::ceil(CorrectionDim(y.beta_slow(), dim, c.rope_theta(), original));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // _yarn_linear_ramp_mask
  for (int i = 0; i < dim / 2; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation_mask = 1.0 - ramp;
    inv[i] = inv[i] / y.factor() * (1.0 - extrapolation_mask) +
             inv[i] * extrapolation_mask;
  }
  return inv;
}

double RopeCosSinScale(const DeepseekV32Config& c) {
  if (!c.has_rope_scaling()) return 1.0;
  const RopeScaling& y = c.rope_scaling();
  return YarnMscale(y.factor(), y.mscale()) /
         YarnMscale(y.factor(), y.mscale_all_dim());
}

std::vector<float> RopeCosSinTable(const DeepseekV32Config& config,
                                   int64_t max_position) {
  return Table(RopeInverseFrequencies(config), max_position,
               RopeCosSinScale(config));
}

std::vector<float> RopeCosSinTable(int64_t max_position, int rope_dim,
                                   double base) {
  return Table(PlainInverseFrequencies(rope_dim, base), max_position, 1.0);
}

}  // namespace dsa::model::deepseek_v32
