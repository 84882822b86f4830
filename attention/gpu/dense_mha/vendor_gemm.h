// The dense MHA prefill's bridge to the platform's vendor GEMM: a bf16
// product in gemm_bf16.h's terms (C = A B^T) run through the gemm dense op's
// GPU kernel (GemmGpu, dense_ops/op_kernels.h: cuBLASLt on CUDA, rocBLAS on
// ROCm, both loaded at run time). Plain C++, compiled by the host compiler,
// so that dense_mha.hip.cc needs none of the op headers.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_VENDOR_GEMM_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_VENDOR_GEMM_H_

#include "attention/gpu/dense_mha/gemm_bf16.h"
#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu {

// "cublaslt" or "rocblas" when the process has the vendor library loaded,
// else nullptr (then the caller uses Bf16GemmLaunch). Asked once.
const char* DenseMhaVendorGemmBackend();

// params as for Bf16GemmLaunch. Row groups of A or of B (not both; the
// group count dividing m or n) run as one strided-batched product, a batch
// per group, the other operand shared (batch stride 0): kv_b_proj's W_UK or
// W_UV rows of every head read in place. kInvalidArgument otherwise. Falls
// back to the platform's own tiled GEMM inside GemmGpu where the vendor
// library cannot take the product; a vendor call that fails is
// kRuntimeError naming it.
LaunchResult DenseMhaVendorGemmLaunch(const Bf16GemmParams& params,
                                      void* stream);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_VENDOR_GEMM_H_
