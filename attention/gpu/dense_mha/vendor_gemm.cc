#include "attention/gpu/dense_mha/vendor_gemm.h"

#include <cstdio>
#include <string>

#include "attention/dense_ops.h"
#include "attention/gpu/dense_mha/vendor_gemm_args.h"
#include "attention/gpu/dense_ops/op_kernels.h"
#include "attention/tensor.h"

namespace dsa::attention::gpu {
namespace {

// A bf16 [batch, rows, cols] view: row stride `ld`, batch stride `stride`.
TensorView Bf16Matrices(const void* data, int64_t batch, int64_t stride,
                        int64_t rows, int64_t cols, int64_t ld) {
  TensorView t;
  t.data = const_cast<void*>(data);
  t.dtype = DType::kBFloat16;
  t.rank = 3;
  t.shape[0] = batch;
  t.shape[1] = rows;
  t.shape[2] = cols;
  t.strides[0] = stride;
  t.strides[1] = ld;
  t.strides[2] = 1;
  return t;
}
// ... a batch of one.
TensorView Bf16Matrix(const void* data, int64_t rows, int64_t cols,
                      int64_t ld) {
  return Bf16Matrices(data, 1, rows * ld, rows, cols, ld);
}

LaunchResult Error(LaunchCode code, const std::string& message) {
  LaunchResult r;
  r.code = code;
  std::snprintf(r.message, sizeof(r.message), "dense_mha_prefill gemm: %s",
                message.c_str());
  return r;
}

}  // namespace

const char* DenseMhaVendorGemmBackend() {
  static const char* const backend = []() -> const char* {
    const std::string name = GpuGemmBackend();
    if (name.rfind("cublaslt", 0) == 0) return "cublaslt";
    if (name.rfind("rocblas", 0) == 0) return "rocblas";
    return nullptr;
  }();
  return backend;
}

LaunchResult DenseMhaVendorGemmArgs(const Bf16GemmParams& p, Gemm::Args* g) {
  if (p.a_group_rows != 0 && p.b_group_rows != 0) {
    return Error(LaunchCode::kInvalidArgument, "row groups of both operands");
  }
  if ((p.a_group_rows != 0 && p.m % p.a_group_rows != 0) ||
      (p.b_group_rows != 0 && p.n % p.b_group_rows != 0)) {
    return Error(LaunchCode::kInvalidArgument,
                 "row groups that do not divide the rows");
  }
  if (p.b_group_rows != 0) {
    // C[:, group] = A B_group^T: y[b] = C + b * rows columns.
    const int64_t groups = p.n / p.b_group_rows;
    g->x = Bf16Matrices(p.a, groups, 0, p.m, p.k, p.lda);
    g->w = Bf16Matrices(p.b, groups, p.b_group_stride * p.ldb, p.b_group_rows,
                        p.k, p.ldb);
    g->y =
        Bf16Matrices(p.c, groups, p.b_group_rows, p.m, p.b_group_rows, p.ldc);
  } else if (p.a_group_rows != 0) {
    // C[group rows, :] = A_group B^T.
    const int64_t groups = p.m / p.a_group_rows;
    g->x = Bf16Matrices(p.a, groups, p.a_group_stride * p.lda, p.a_group_rows,
                        p.k, p.lda);
    g->w = Bf16Matrices(p.b, groups, 0, p.n, p.k, p.ldb);
    g->y = Bf16Matrices(p.c, groups, p.a_group_rows * p.ldc, p.a_group_rows,
                        p.n, p.ldc);
  } else {
    g->x = Bf16Matrix(p.a, p.m, p.k, p.lda);
    g->w = Bf16Matrix(p.b, p.n, p.k, p.ldb);
    g->y = Bf16Matrix(p.c, p.m, p.n, p.ldc);
  }
  return LaunchResult{};
}

LaunchResult DenseMhaVendorGemmLaunch(const Bf16GemmParams& p, void* stream) {
  Gemm::Args g;
  const LaunchResult r = DenseMhaVendorGemmArgs(p, &g);
  if (!r.ok() || p.m == 0 || p.n == 0) return r;
  ExecutionContext ctx;
  ctx.stream = stream;
  const Status s = GemmGpu(ctx, g);
  if (s.ok()) return LaunchResult{};
  return Error(s.code() == DSA_STATUS_INVALID_ARGUMENT
                   ? LaunchCode::kInvalidArgument
                   : LaunchCode::kRuntimeError,
               s.message());
}

}  // namespace dsa::attention::gpu
