// Host-side math the runner still does itself: the rope table it uploads
// once (the layer's projections, RMSNorm and rope are the platform's dense
// ops, attention/dense_ops.h).
#ifndef DSA_MODEL_DEEPSEEK_V32_HOST_MATH_H_
#define DSA_MODEL_DEEPSEEK_V32_HOST_MATH_H_

#include <cstdint>
#include <vector>

namespace dsa::model::deepseek_v32 {

// Rotary embedding table in the attention ops' layout: for each position,
// rope_dim/2 cosines then rope_dim/2 sines, with inverse frequencies
// base^(-2i/rope_dim).
std::vector<float> RopeCosSinTable(int64_t max_position, int rope_dim,
                                   double base);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_HOST_MATH_H_
