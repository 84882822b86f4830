// The W_UV product of the GPU sparse MLA (sparse_mla/launch.h), on the
// platform's GEMM: output[t, h, :] = W_UV[h] latent[t, h, :] for every head
// at once, as one strided-batched bf16 GEMM through GemmGpu
// (dense_ops/op_kernels.h: cuBLASLt on CUDA, rocBLAS on ROCm, the project's own
// tiled kernel where neither loads). Plain C++, called by the sparse MLA
// launcher (sparse_mla.hip.cc) after its attention kernel, on the same
// stream; it does not synchronise.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_WUV_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_WUV_H_

#include <cstdint>

#include "attention/gpu/device/formats.h"
#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu {

struct SparseMlaWuvArgs {
  // [rows, heads, lora] bf16, contiguous.
  const uint16_t* latent = nullptr;
  int64_t rows = 0;
  int32_t heads = 0;
  int32_t lora = 0;
  // Row o of head h's W_UV at w + h * w_head_stride + o * w_row_stride
  // (bf16, lora contiguous values).
  const uint16_t* w = nullptr;
  int64_t w_head_stride = 0;  // elements
  int64_t w_row_stride = 0;   // elements
  int32_t v = 0;
  // Row 0's output: [rows, heads, v], the last dim contiguous.
  void* output = nullptr;
  FloatFormat output_format = FloatFormat::kFloat32;
  int64_t output_token_stride = 0;  // elements
  int64_t output_head_stride = 0;   // elements
};

LaunchResult SparseMlaWuvGemm(const SparseMlaWuvArgs& args, void* stream);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_WUV_H_
