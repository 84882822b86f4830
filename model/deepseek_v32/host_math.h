// Host-side dense math of the DeepseekV32 attention layer: the projections,
// RMSNorm and the MLA's rope. The seven attention ops run on the active
// platform (attention/ops.h); these steps run on the host in float32, which
// is what the CPU platform does anyway and what keeps the layer runnable on
// any platform that registers the attention kernels (a GPU platform gets its
// inputs copied to the device).
#ifndef DSA_MODEL_DEEPSEEK_V32_HOST_MATH_H_
#define DSA_MODEL_DEEPSEEK_V32_HOST_MATH_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace dsa::model::deepseek_v32 {

// y[t, o] = sum_i x[t, i] * w[o, i] for x [tokens, in] and w [out, in]
// (PyTorch's Linear layout); y is resized to [tokens, out].
void Linear(absl::Span<const float> x, int64_t tokens, int64_t in,
            absl::Span<const float> w, int64_t out, std::vector<float>& y,
            int num_threads);

// In place over rows of width `dim` with stride `row_stride`:
// x = x / sqrt(mean(x^2) + eps) * weight.
void RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t row_stride,
                 absl::Span<const float> weight, float eps);

// Rotary embedding table in the attention ops' layout: for each position,
// rope_dim/2 cosines then rope_dim/2 sines, with inverse frequencies
// base^(-2i/rope_dim).
std::vector<float> RopeCosSinTable(int64_t max_position, int rope_dim,
                                   double base);

// Interleaved (GPT-J) rope in place on `rope_dim` values at x: pairs
// (x[2i], x[2i+1]) rotate by the angle of pair i at `position`.
void RopeInterleaved(float* x, int rope_dim, const float* cos_sin_row);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_HOST_MATH_H_
