// A Monte Carlo of the sparse MLA kernels' roundings against the float64
// reference of sparse_mla/kernels_test.cc, on the host: how large the
// suite's worst error of a case can be from the documented numerics alone.
// Per head: q in bf16 (N(0, q_scale^2)), `keys` fp8_ds_mla keys drawn as
// the suite draws them (e4m3fn codes of N(0, 1) / scale, the suite's mix
// of scales, the rope in bf16), then
// - the reference: scores, softmax and P V in float64 over the exact keys,
//   W_UV (fp32 weights) in float64;
// - the kernels' roundings: keys rounded to bf16 (exact for power-of-two
//   scales), scores in fp32, P rounded to bf16 for P V (the row sums of the
//   fp32 P), the latent rounded to bf16, W_UV in bf16 with fp32 sums.
// Prints the distribution of each head's worst |ours - reference| over
// its v outputs, relative to their largest |reference| (the suite's
// measure), and how many heads pass the suite's 1/64.
//
//   bazel run -c opt //testing/gpu:sparse_mla_rounding_sim -- --heads=3968 \
//       --keys=4095 --q_scale=2 --seed=1
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

float Bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// x rounded to the nearest e4m3fn value (ties to even), saturating at 448.
double E4m3fn(double x) {
  const double a = std::fabs(x);
  if (a >= 448.0) return std::copysign(448.0, x);
  if (a == 0.0) return 0.0;
  int e;
  std::frexp(a, &e);
  const double step = std::ldexp(1.0, std::max(e - 1, -6) - 3);
  return std::copysign(std::nearbyint(a / step) * step, x);
}

struct Config {
  int heads = 3968, keys = 4095, seed = 1;
  double q_scale = 2.0;
};

bool Parse(const char* arg, const char* name, double* out) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, "--", 2) != 0 || std::strncmp(arg + 2, name, n) != 0 ||
      arg[2 + n] != '=') {
    return false;
  }
  *out = std::atof(arg + 3 + n);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    double v;
    if (Parse(argv[i], "heads", &v)) {
      c.heads = static_cast<int>(v);
    } else if (Parse(argv[i], "keys", &v)) {
      c.keys = static_cast<int>(v);
    } else if (Parse(argv[i], "seed", &v)) {
      c.seed = static_cast<int>(v);
    } else if (Parse(argv[i], "q_scale", &v)) {
      c.q_scale = v;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (c.heads < 1 || c.keys < 1) {
    std::fprintf(stderr, "--heads and --keys must be positive\n");
    return 2;
  }
  // The suite's 64-head case: nope 192 + rope 64, v 256, latent 512.
  constexpr int kLora = 512, kRope = 64, kDim = kLora + kRope, kV = 256;
  constexpr int kHeadsPerRow = 64;
  const double softmax_scale = 1.0 / 16.0;
  std::mt19937 rng(static_cast<uint32_t>(c.seed));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<double> exact(static_cast<size_t>(c.keys) * kDim);
  std::vector<float> rounded(exact.size());
  std::vector<double> worst;
  for (int head = 0; head < c.heads; ++head) {
    if (head % kHeadsPerRow == 0) {  // a row's keys, shared by its heads
      for (int j = 0; j < c.keys; ++j) {
        double* e = exact.data() + static_cast<size_t>(j) * kDim;
        float* b = rounded.data() + static_cast<size_t>(j) * kDim;
        for (int tile = 0; tile < kLora / 128; ++tile) {
          // The suite's scales: 1 in 16 from 2^7, 2 of any 10-bit mantissa,
          // the rest powers of two.
          const int kind = static_cast<int>(rng() % 16);
          const float scale =
              kind == 0 ? std::ldexp(1.0f, 7 + static_cast<int>(rng() % 3))
              : kind <= 2
                  ? std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024,
                               static_cast<int>(rng() % 5) - 5)
                  : std::ldexp(1.0f, static_cast<int>(rng() % 5) - 5);
          for (int d = tile * 128; d < tile * 128 + 128; ++d) {
            e[d] = E4m3fn(normal(rng) / scale) * scale;
            b[d] = Bf16(static_cast<float>(e[d]));
          }
        }
        for (int d = kLora; d < kDim; ++d) e[d] = b[d] = Bf16(normal(rng));
      }
    }
    std::vector<float> q(kDim);
    for (float& x : q) x = Bf16(normal(rng) * static_cast<float>(c.q_scale));
    std::vector<double> s_ref(c.keys);
    std::vector<float> s_ours(c.keys);
    double max_ref = -1e300;
    float max_ours = -1e30f;
    for (int j = 0; j < c.keys; ++j) {
      double a = 0.0, b = 0.0;
      for (int d = 0; d < kDim; ++d) {
        a += double{q[d]} * exact[static_cast<size_t>(j) * kDim + d];
        b += double{q[d]} * rounded[static_cast<size_t>(j) * kDim + d];
      }
      s_ref[j] = a * softmax_scale;
      s_ours[j] = static_cast<float>(b) * static_cast<float>(softmax_scale);
      max_ref = std::max(max_ref, s_ref[j]);
      max_ours = std::max(max_ours, s_ours[j]);
    }
    std::vector<double> o_ref(kLora, 0.0), o_ours(kLora, 0.0);
    double l_ref = 0.0, l_ours = 0.0;
    for (int j = 0; j < c.keys; ++j) {
      const double p_ref = std::exp(s_ref[j] - max_ref);
      const float p_ours = std::exp(s_ours[j] - max_ours);
      l_ref += p_ref;
      l_ours += p_ours;
      const float p_bf16 = Bf16(p_ours);
      for (int d = 0; d < kLora; ++d) {
        o_ref[d] += p_ref * exact[static_cast<size_t>(j) * kDim + d];
        o_ours[d] +=
            double{p_bf16} * rounded[static_cast<size_t>(j) * kDim + d];
      }
    }
    std::vector<float> latent(kLora);
    for (int d = 0; d < kLora; ++d) {
      o_ref[d] /= l_ref;
      latent[d] = Bf16(static_cast<float>(o_ours[d] / l_ours));
    }
    std::vector<double> y_ref(kV), y_ours(kV);
    double scale = 0.0;
    for (int o = 0; o < kV; ++o) {
      double a = 0.0;
      float b = 0.0f;
      for (int d = 0; d < kLora; ++d) {
        const float w = normal(rng) / std::sqrt(static_cast<float>(kLora));
        a += double{w} * o_ref[d];
        b += Bf16(w) * latent[d];
      }
      y_ref[o] = a;
      y_ours[o] = b;
      scale = std::max(scale, std::fabs(a));
    }
    double w = 0.0;
    for (int o = 0; o < kV; ++o) {
      w = std::max(w, std::fabs(y_ours[o] - y_ref[o]) / scale);
    }
    worst.push_back(w);
  }
  std::sort(worst.begin(), worst.end());
  const auto at = [&](double f) {
    return worst[std::min(worst.size() - 1,
                          static_cast<size_t>(f * worst.size()))];
  };
  const int64_t over = std::count_if(worst.begin(), worst.end(),
                                     [](double x) { return x > 1.0 / 64; });
  std::printf(
      "sparse_mla_rounding_sim heads=%d keys=%d q_scale=%g seed=%d: a head's "
      "worst error median %.4f p90 %.4f p99 %.4f max %.4f of the output "
      "scale; heads past 1/64: %lld\n",
      c.heads, c.keys, c.q_scale, c.seed, at(0.5), at(0.9), at(0.99),
      worst.back(), static_cast<long long>(over));
  return 0;
}
