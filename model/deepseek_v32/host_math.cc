#include "model/deepseek_v32/host_math.h"

#include <cmath>
#include <vector>

namespace dsa::model::deepseek_v32 {

std::vector<float> RopeCosSinTable(int64_t max_position, int rope_dim,
                                   double base) {
  const int half = rope_dim / 2;
  std::vector<float> table(static_cast<size_t>(max_position) * rope_dim);
  for (int64_t p = 0; p < max_position; ++p) {
    float* row = table.data() + p * rope_dim;
    for (int i = 0; i < half; ++i) {
      const double inv_freq = std::pow(base, -2.0 * i / rope_dim);
      const double angle = static_cast<double>(p) * inv_freq;
      row[i] = static_cast<float>(std::cos(angle));
      row[half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return table;
}

}  // namespace dsa::model::deepseek_v32
