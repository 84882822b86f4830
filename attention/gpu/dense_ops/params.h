// Parameters of the dense ops' own GPU kernels (launch.h): raw device
// pointers, element strides and sizes; plain C++ (no HIP or CUDA types).
#ifndef DSA_ATTENTION_GPU_DENSE_OPS_PARAMS_H_
#define DSA_ATTENTION_GPU_DENSE_OPS_PARAMS_H_

#include <cstdint>

#include "attention/dtypes/fp8.h"
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
  // Optional (y_q non-null): y as stored, also quantised per token and 128
  // columns (Fp8QuantParams with block_rows 1): codes at y_q[r *
  // y_q_row_stride + c], group g's scale at y_scales[r * y_scale_row_stride
  // + g * y_scale_col_stride].
  uint8_t* y_q = nullptr;
  int64_t y_q_row_stride = 0;
  float* y_scales = nullptr;
  int64_t y_scale_row_stride = 0, y_scale_col_stride = 1;
  Fp8Traits traits = {};
  float divisor = 448.0f;
  // Optional (non-null): x is first added into residual[r * residual_row_
  // stride + c] (residual += x, stored in its format) and the norm reads the
  // sum as stored.
  void* residual = nullptr;
  FloatFormat residual_type = FloatFormat::kFloat32;
  int64_t residual_row_stride = 0;
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

// fp8_block_quant: codes and one scale per block of block_rows x 128
// elements of x (dense_ops.h); scale of block (rb, cb) at
// scales[rb * scale_row_stride + cb * scale_col_stride].
struct Fp8QuantParams {
  const void* x = nullptr;
  FloatFormat x_type = FloatFormat::kFloat32;
  int64_t x_row_stride = 0;  // x's cols: stride 1
  uint8_t* q = nullptr;
  int64_t q_row_stride = 0;
  float* scales = nullptr;
  int64_t scale_row_stride = 0, scale_col_stride = 1;
  int64_t rows = 0, cols = 0;
  int block_rows = 1;  // 1 or 128
  // The codes' encoding (Fp8TraitsOf, attention/dtypes/fp8.h: host globals
  // reach the device by value) and its scale divisor, VllmFp8ScaleDivisor
  // (448, or 224 for e4m3fnuz).
  Fp8Traits traits = {};
  float divisor = 448.0f;
};

// The W8A8 product (dense_ops.h, Fp8BlockGemm) of activations already
// quantised per token and 128 columns (Fp8QuantParams with block_rows 1):
// y[t, o] = sum_g x_scales[t * x_scale_row_stride + g * x_scale_group_stride]
// * w_scales[(o / 128) * w_scale_row_stride + g] * sum_{k in g} x_q[t, k]
// w[o, k]. cuBLASLt's VEC128 layout is x_scale_row_stride 1,
// x_scale_group_stride rows (token-major groups).
struct Fp8GemmParams {
  const uint8_t* x_q = nullptr;  // [rows][x_q_row_stride] codes
  int64_t x_q_row_stride = 0;
  const float* x_scales = nullptr;
  int64_t x_scale_row_stride = 1, x_scale_group_stride = 0;
  const uint8_t* w = nullptr;  // [out][w_row_stride] codes
  int64_t w_row_stride = 0;
  const float* w_scales = nullptr;  // [ceil(out / 128)][w_scale_row_stride]
  int64_t w_scale_row_stride = 0;
  void* y = nullptr;
  FloatFormat y_type = FloatFormat::kFloat32;
  int64_t y_row_stride = 0;  // y's out dim: stride 1
  int64_t rows = 0, in = 0, out = 0;
  bool fnuz = false;  // both operands' encoding
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_OPS_PARAMS_H_
