// The LayerNorm statistics of the indexer K write, in one summation order
// that the CPU kernel and the GPU kernel both follow, so that their fp8
// caches are equal to the bit (the skip on/off equality on a GPU compares
// caches written by either).
//
// Why an order at all: the mean and the variance are sums of head_dim terms
// in float64. A float64 sum of float32 (or bf16) values is exact only while
// the values span fewer binades than float64's spare bits, and the squared
// deviations are rounded products, so neither sum is exact in general and a
// different order (a sequential CPU loop against a GPU tree reduction) can
// change the last bit of the mean or of 1/std, hence an fp8 code. Every
// other step of the K write is elementwise float32 arithmetic (normalise,
// affine, rope, x * 2^-k, round to fp8), which IEEE rounding makes
// order-free as long as no product is fused into an FMA: the GPU kernels
// use the _rn intrinsics for that, and the host must not contract either
// (x86-64's baseline has no FMA; the CPU kernels build with
// -ffp-contract=off so a -march=native build cannot change it).
//
// The canonical order: element i belongs to lane (i / 4) % 32 of 32 lanes
// (4 consecutive elements per lane, 128 elements per round); each lane sums
// its elements in increasing i; the 32 lane sums are then added as a tree,
// p[j] += p[j + o] for o = 16, 8, 4, 2, 1, which is what a 32-lane xor
// butterfly (shuffle offsets 16, 8, ..., 1) computes in every lane.
#ifndef DSA_ATTENTION_DTYPES_LAYER_NORM_H_
#define DSA_ATTENTION_DTYPES_LAYER_NORM_H_

#include <cmath>
#include <cstdint>

#include "attention/dtypes/host_device.h"

namespace dsa::attention {

inline constexpr int kLayerNormLanes = 32;
inline constexpr int kLayerNormChunk = 4;

// The lane that sums element i.
DSA_HOST_DEVICE constexpr int LayerNormLaneOf(int64_t i) {
  return static_cast<int>((i / kLayerNormChunk) % kLayerNormLanes);
}

// 1 / sqrt(variance + eps) rounded once to float32 (float64 IEEE division
// and square root on host and device alike).
DSA_HOST_DEVICE inline float LayerNormInvStd(double sum_sq_dev, int64_t n,
                                             float eps) {
  return static_cast<float>(1.0 / sqrt(sum_sq_dev / static_cast<double>(n) +
                                       static_cast<double>(eps)));
}

// Host form of the canonical order: mean (rounded to float32) and
// 1 / std of y[0:n], biased variance, as the GPU kernel computes them.
inline void LayerNormStats(const float* y, int64_t n, float eps, float* mean,
                           float* inv_std) {
  double lane[kLayerNormLanes];
  for (double& v : lane) v = 0.0;
  for (int64_t i = 0; i < n; ++i) lane[LayerNormLaneOf(i)] += y[i];
  for (int o = kLayerNormLanes / 2; o >= 1; o /= 2) {
    for (int j = 0; j < o; ++j) lane[j] += lane[j + o];
  }
  const double mean_d = lane[0] / static_cast<double>(n);
  for (double& v : lane) v = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(y[i]) - mean_d;
    lane[LayerNormLaneOf(i)] += d * d;
  }
  for (int o = kLayerNormLanes / 2; o >= 1; o /= 2) {
    for (int j = 0; j < o; ++j) lane[j] += lane[j + o];
  }
  *mean = static_cast<float>(mean_d);
  *inv_std = LayerNormInvStd(lane[0], n, eps);
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_DTYPES_LAYER_NORM_H_
