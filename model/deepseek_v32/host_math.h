// Host-side math the runner still does itself: the rope table it uploads
// once (the layer's projections, RMSNorm and rope are the platform's dense
// ops, attention/dense_ops.h).
#ifndef DSA_MODEL_DEEPSEEK_V32_HOST_MATH_H_
#define DSA_MODEL_DEEPSEEK_V32_HOST_MATH_H_

#include <cstdint>
#include <vector>

#include "model/deepseek_v32/model_config.pb.h"

namespace dsa::model::deepseek_v32 {

// The inverse frequency of each of the rope_dim/2 rotated pairs:
// theta^(-2i/rope_dim), and with YaRN (config.rope_scaling) vLLM's
// DeepseekScalingRotaryEmbedding._compute_inv_freq, which is DeepSeek's
// precompute_freqs_cis: pairs below the correction range [low, high] keep
// their frequency, pairs above it are divided by `factor`, and a linear ramp
// blends the two between, with low = floor(d(beta_fast)), high =
// ceil(d(beta_slow)) clamped to [0, rope_dim - 1] and d(r) = rope_dim *
// ln(original_max_position_embeddings / (2 pi r)) / (2 ln theta).
std::vector<double> RopeInverseFrequencies(const DeepseekV32Config& config);

// What cos and sin are multiplied by: mscale(factor, mscale) /
// mscale(factor, mscale_all_dim) with YaRN (1 for DeepSeek-V3.2), else 1.
double RopeCosSinScale(const DeepseekV32Config& config);

// Rotary embedding table in the attention ops' layout: for each position,
// rope_dim/2 cosines then rope_dim/2 sines of position * inverse frequency
// (angles in float64, each value rounded once to float32), times
// RopeCosSinScale.
std::vector<float> RopeCosSinTable(const DeepseekV32Config& config,
                                   int64_t max_position);

// Plain rope with inverse frequencies base^(-2i/rope_dim).
std::vector<float> RopeCosSinTable(int64_t max_position, int rope_dim,
                                   double base);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_HOST_MATH_H_
