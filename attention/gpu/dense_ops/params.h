// Parameters of the dense ops' own GPU kernels (launch.h): raw device
// pointers, element strides and sizes; plain C++ (no HIP or CUDA types).
#ifndef DSA_ATTENTION_GPU_DENSE_OPS_PARAMS_H_
#define DSA_ATTENTION_GPU_DENSE_OPS_PARAMS_H_

#include <cstdint>

#include "attention/gpu/device/formats.h"

namespace dsa::attention::gpu {

// y[b, r, o] = sum_i x[b, r, i] * w[b, o, i]; strides in elements.
struct GemmParams {
  const void* x = nullptr;
  FloatFormat x_type = FloatFormat::kFloat32;
  int64_t x_batch_stride = 0, x_row_stride = 0;  // x's in dim: stride 1
  const uint16_t* w = nullptr;                   // bf16
  int64_t w_batch_stride = 0, w_out_stride = 0, w_in_stride = 0;
  void* y = nullptr;
  FloatFormat y_type = FloatFormat::kFloat32;
  int64_t y_batch_stride = 0, y_row_stride = 0;  // y's out dim: stride 1
  int64_t batch = 0, rows = 0, in = 0, out = 0;
};

struct RmsNormParams {
  const void* x = nullptr;
  FloatFormat x_type = FloatFormat::kFloat32;
  int64_t x_row_stride = 0;
  const void* weight = nullptr;
  FloatFormat weight_type = FloatFormat::kFloat32;
  int64_t weight_stride = 1;
  void* y = nullptr;
  FloatFormat y_type = FloatFormat::kFloat32;
  int64_t y_row_stride = 0;
  int64_t rows = 0, dim = 0;
  float eps = 1e-6f;
};

struct RopeParams {
  void* x = nullptr;  // [tokens, heads, rope_dim], in place
  FloatFormat type = FloatFormat::kFloat32;
  int64_t token_stride = 0, head_stride = 0;
  int64_t tokens = 0, heads = 0, rope_dim = 0;
  const int64_t* positions = nullptr;
  int64_t position_stride = 1;
  const float* cos_sin = nullptr;  // [max_position, cos_sin_stride]
  int64_t cos_sin_stride = 0;
  int64_t max_position = 0;  // positions are clamped to [0, max_position)
  bool neox = false;
};

// y = x (a cast or copy), or y += x with `accumulate`.
struct ElementwiseParams {
  const void* x = nullptr;
  FloatFormat x_type = FloatFormat::kFloat32;
  int64_t x_row_stride = 0;
  void* y = nullptr;
  FloatFormat y_type = FloatFormat::kFloat32;
  int64_t y_row_stride = 0;
  int64_t rows = 0, cols = 0;
  bool accumulate = false;
};

struct RandomFillParams {
  void* y = nullptr;  // contiguous
  FloatFormat type = FloatFormat::kFloat32;
  int64_t n = 0;
  uint64_t seed = 0, stream = 0;
  float scale = 1.0f, offset = 0.0f;
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_OPS_PARAMS_H_
