#include "attention/gpu/sparse_mla/wuv.h"

#include <cstdio>

#include "attention/dense_ops.h"
#include "attention/gpu/dense_ops/op_kernels.h"
#include "attention/tensor.h"

namespace dsa::attention::gpu {

LaunchResult SparseMlaWuvGemm(const SparseMlaWuvArgs& a, void* stream) {
  // Batch = heads: x[h] = latent[:, h, :], w[h] = W_UV[h], y[h] =
  // output[:, h, :]; rows of x and y interleave across heads, which strided
  // batches allow.
  auto view = [](const void* data, DType dtype, int64_t d0, int64_t d1,
                 int64_t d2, int64_t s0, int64_t s1) {
    TensorView t;
    t.data = const_cast<void*>(data);
    t.dtype = dtype;
    t.rank = 3;
    t.shape[0] = d0;
    t.shape[1] = d1;
    t.shape[2] = d2;
    t.strides[0] = s0;
    t.strides[1] = s1;
    t.strides[2] = 1;
    return t;
  };
  Gemm::Args g;
  g.x = view(a.latent, DType::kBFloat16, a.heads, a.rows, a.lora, a.lora,
             static_cast<int64_t>(a.heads) * a.lora);
  g.w = view(a.w, DType::kBFloat16, a.heads, a.v, a.lora, a.w_head_stride,
             a.w_row_stride);
  g.y = view(a.output,
             a.output_format == FloatFormat::kBFloat16 ? DType::kBFloat16
                                                       : DType::kFloat32,
             a.heads, a.rows, a.v, a.output_head_stride, a.output_token_stride);
  ExecutionContext ctx;
  ctx.stream = stream;
  const Status s = GemmGpu(ctx, g);
  LaunchResult r;
  if (!s.ok()) {
    r.code = LaunchCode::kRuntimeError;
    std::snprintf(r.message, sizeof(r.message), "sparse_mla: W_UV gemm: %s",
                  s.message().c_str());
  }
  return r;
}

}  // namespace dsa::attention::gpu
