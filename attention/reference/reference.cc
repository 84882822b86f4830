#include "attention/reference/reference.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

namespace dsa::attention::reference {
namespace {

bool IsNanCode(uint8_t code, Fp8Kind kind) {
  return kind == Fp8Kind::kE4m3fn ? (code & 0x7f) == 0x7f : code == 0x80;
}

int Bias(Fp8Kind kind) { return kind == Fp8Kind::kE4m3fn ? 7 : 8; }

}  // namespace

double Fp8Value(uint8_t code, Fp8Kind kind) {
  if (IsNanCode(code, kind)) return std::numeric_limits<double>::quiet_NaN();
  const int sign = (code & 0x80) ? -1 : 1;
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 0x7;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa / 8.0, 1 - Bias(kind))
                    : std::ldexp(1.0 + mantissa / 8.0, exponent - Bias(kind));
  return sign * magnitude;
}

double Fp8MaxValue(Fp8Kind kind) {
  return kind == Fp8Kind::kE4m3fn ? 448.0 : 240.0;
}

uint8_t Fp8Nearest(double x, Fp8Kind kind) {
  if (std::isnan(x)) return kind == Fp8Kind::kE4m3fn ? 0x7f : 0x80;
  const double max = Fp8MaxValue(kind);
  x = std::clamp(x, -max, max);
  // Every finite code by value (built once per format); the nearest is one
  // of the two entries around x. Equal values (the two zeros of e4m3fn)
  // are resolved below.
  static const auto* const tables = [] {
    auto* t = new std::vector<std::pair<double, uint8_t>>[2];
    for (int k = 0; k < 2; ++k) {
      const Fp8Kind fk = k == 0 ? Fp8Kind::kE4m3fn : Fp8Kind::kE4m3fnuz;
      for (int c = 0; c < 256; ++c) {
        const uint8_t code = static_cast<uint8_t>(c);
        if (!IsNanCode(code, fk)) t[k].emplace_back(Fp8Value(code, fk), code);
      }
      std::sort(t[k].begin(), t[k].end());
    }
    return t;
  }();
  const auto& table = tables[kind == Fp8Kind::kE4m3fn ? 0 : 1];
  auto above = std::lower_bound(table.begin(), table.end(), x,
                                [](const std::pair<double, uint8_t>& e,
                                   double v) { return e.first < v; });
  uint8_t best;
  if (above == table.begin()) {
    best = above->second;
  } else if (above == table.end()) {
    best = std::prev(above)->second;
  } else {
    const auto below = std::prev(above);
    const double d_below = x - below->first;
    const double d_above = above->first - x;
    if (d_below != d_above) {
      best = d_below < d_above ? below->second : above->second;
    } else {
      // A tie: the code with the even mantissa.
      best = (below->second & 1) == 0 ? below->second : above->second;
    }
  }
  // Zero has two codes in e4m3fn; keep the sign of x as IEEE rounding does.
  if (Fp8Value(best, kind) == 0.0) {
    return (kind == Fp8Kind::kE4m3fn && std::signbit(x)) ? 0x80 : 0x00;
  }
  return best;
}

double Fp8Ulp(double x, Fp8Kind kind) {
  const double a = std::fabs(x);
  const int min_exponent = 1 - Bias(kind);
  if (a < std::ldexp(1.0, min_exponent))
    return std::ldexp(1.0, min_exponent - 3);
  const int e = std::ilogb(a);
  return std::ldexp(1.0, e - 3);
}

double Bf16Value(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof(f));
  return f;
}

uint16_t Bf16Nearest(double x) {
  double rounded = 0.0;
  if (x != 0.0) {
    // 8 significant bits; nearbyint rounds half to even in the default mode.
    const int e = std::ilogb(x);
    const int shift = 7 - std::max(e, -126);  // subnormals keep 2^-133 steps
    rounded = std::ldexp(std::nearbyint(std::ldexp(x, shift)), -shift);
  }
  const float f = static_cast<float>(rounded);  // exact: 8-bit significand
  uint32_t wide;
  std::memcpy(&wide, &f, sizeof(wide));
  return static_cast<uint16_t>(wide >> 16);
}

double Ue8m0Scale(double amax, Fp8Kind kind) {
  return Ue8m0ScaleWithDivisor(amax, Fp8MaxValue(kind));
}

double Ue8m0ScaleWithDivisor(double amax, double divisor) {
  const double s = std::max(amax, 1e-4) / divisor;
  return std::exp2(std::ceil(std::log2(s)));
}

double RoundBf16(double x) { return Bf16Value(Bf16Nearest(x)); }

std::vector<double> HadamardRotate(const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<double> y(n, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(n));
  for (size_t i = 0; i < n; ++i) {
    double acc = 0.0;
    for (size_t j = 0; j < n; ++j) {
      acc += (__builtin_popcountll(i & j) % 2 == 0 ? 1.0 : -1.0) * x[j];
    }
    y[i] = acc * scale;
  }
  return y;
}

std::vector<double> LayerNorm(const std::vector<double>& x,
                              const std::vector<double>& w,
                              const std::vector<double>& b, double eps) {
  const double n = static_cast<double>(x.size());
  const double mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
  double var = 0;
  for (double v : x) var += (v - mean) * (v - mean);
  var /= n;
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] = (x[i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
  }
  return y;
}

void Rope(std::vector<double>& v, const std::vector<double>& cos_sin,
          bool neox) {
  const size_t half = cos_sin.size() / 2;
  for (size_t i = 0; i < half; ++i) {
    const size_t a = neox ? i : 2 * i;
    const size_t b = neox ? i + half : 2 * i + 1;
    const double x1 = v[a], x2 = v[b];
    v[a] = x1 * cos_sin[i] - x2 * cos_sin[half + i];
    v[b] = x2 * cos_sin[i] + x1 * cos_sin[half + i];
  }
}

double IndexerLogit(const std::vector<double>& q, const std::vector<double>& w,
                    const std::vector<double>& k, double k_scale,
                    double* magnitude) {
  const size_t heads = w.size();
  const size_t dim = k.size();
  double logit = 0, mag = 0;
  for (size_t h = 0; h < heads; ++h) {
    double dot = 0, abs_dot = 0;
    for (size_t d = 0; d < dim; ++d) {
      dot += q[h * dim + d] * k[d];
      abs_dot += std::fabs(q[h * dim + d] * k[d]);
    }
    logit += std::max(dot * k_scale, 0.0) * w[h];
    mag += std::fabs(w[h]) * abs_dot * k_scale;
  }
  if (magnitude != nullptr) *magnitude = mag;
  return logit;
}

std::vector<int32_t> TopK(const std::vector<float>& logits, int64_t ks,
                          int64_t ke, int64_t topk) {
  std::vector<int32_t> order;
  for (int64_t j = ks; j < ke; ++j) order.push_back(static_cast<int32_t>(j));
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const double va = logits[a], vb = logits[b];
    if (std::isnan(va) || std::isnan(vb))
      return !std::isnan(va) && std::isnan(vb);
    return va > vb;
  });
  if (static_cast<int64_t>(order.size()) > topk) order.resize(topk);
  std::sort(order.begin(), order.end());
  order.resize(topk, -1);
  return order;
}

std::vector<double> Attention(const std::vector<double>& q, int64_t heads,
                              const std::vector<std::vector<double>>& keys,
                              const std::vector<std::vector<double>>& values,
                              double scale) {
  const size_t qk_dim = q.size() / heads;
  const size_t v_dim = values.empty() ? 0 : values[0].size() / heads;
  std::vector<double> out;
  if (keys.empty()) return out;  // caller sizes zeros
  out.assign(heads * v_dim, 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<double> s(keys.size());
    double max = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < keys.size(); ++j) {
      double dot = 0;
      for (size_t d = 0; d < qk_dim; ++d) {
        dot += q[h * qk_dim + d] * keys[j][h * qk_dim + d];
      }
      s[j] = scale * dot;
      max = std::max(max, s[j]);
    }
    double sum = 0;
    for (double& v : s) {
      v = std::exp(v - max);
      sum += v;
    }
    for (size_t j = 0; j < keys.size(); ++j) {
      for (size_t d = 0; d < v_dim; ++d) {
        out[h * v_dim + d] += s[j] / sum * values[j][h * v_dim + d];
      }
    }
  }
  return out;
}

std::vector<double> MatVec(const std::vector<double>& w, int64_t rows,
                           const std::vector<double>& x) {
  const size_t cols = x.size();
  std::vector<double> y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
  }
  return y;
}

}  // namespace dsa::attention::reference
