#include "model/deepseek_v32/host_math.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

namespace dsa::model::deepseek_v32 {

void Linear(absl::Span<const float> x, int64_t tokens, int64_t in,
            absl::Span<const float> w, int64_t out, std::vector<float>& y,
            int num_threads) {
  y.assign(static_cast<size_t>(tokens * out), 0.0f);
  if (tokens == 0 || out == 0) return;
  // Rows of the output split over threads. Each dot product keeps kLanes
  // partial sums, which the compiler maps onto SIMD lanes (a single float
  // accumulator is a serial dependency it may not reorder), and two tokens
  // share each weight row while it is in cache.
  constexpr int kLanes = 16;
  auto dot2 = [&](const float* x0, const float* x1, const float* wr,
                  float* out0, float* out1) {
    float a0[kLanes] = {}, a1[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= in; i += kLanes) {
      for (int k = 0; k < kLanes; ++k) {
        a0[k] += x0[i + k] * wr[i + k];
        a1[k] += x1[i + k] * wr[i + k];
      }
    }
    float s0 = 0.0f, s1 = 0.0f;
    for (; i < in; ++i) {
      s0 += x0[i] * wr[i];
      s1 += x1[i] * wr[i];
    }
    for (int k = 0; k < kLanes; ++k) {
      s0 += a0[k];
      s1 += a1[k];
    }
    *out0 = s0;
    *out1 = s1;
  };
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; t += 2) {
      // An odd last token is paired with itself; its duplicate is dropped.
      const int64_t t1 = t + 1 < end ? t + 1 : t;
      const float* x0 = x.data() + t * in;
      const float* x1 = x.data() + t1 * in;
      float* y0 = y.data() + t * out;
      float* y1 = y.data() + t1 * out;
      for (int64_t o = 0; o < out; ++o) {
        float r0, r1;
        dot2(x0, x1, w.data() + o * in, &r0, &r1);
        y0[o] = r0;
        y1[o] = r1;
      }
    }
  };
  int threads =
      num_threads > 0
          ? num_threads
          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<int64_t>(threads, tokens));
  if (threads <= 1 || tokens * in * out < (int64_t{1} << 16)) {
    rows(0, tokens);
    return;
  }
  std::vector<std::thread> workers;
  const int64_t chunk = (tokens + threads - 1) / threads;
  for (int k = 1; k < threads; ++k) {
    const int64_t b = k * chunk, e = std::min(tokens, b + chunk);
    if (b < e) workers.emplace_back(rows, b, e);
  }
  rows(0, std::min(tokens, chunk));
  for (std::thread& t : workers) t.join();
}

void RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t row_stride,
                 absl::Span<const float> weight, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * row_stride;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += double{v[i]} * v[i];
    const float inv = static_cast<float>(
        1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) v[i] = v[i] * inv * weight[i];
  }
}

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

void RopeInterleaved(float* x, int rope_dim, const float* cos_sin_row) {
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float c = cos_sin_row[i], s = cos_sin_row[half + i];
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c - b * s;
    x[2 * i + 1] = b * c + a * s;
  }
}

}  // namespace dsa::model::deepseek_v32
