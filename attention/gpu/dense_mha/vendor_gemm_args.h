// The gemm dense op's arguments that DenseMhaVendorGemmLaunch (vendor_gemm.h)
// passes for a product in gemm_bf16.h's terms: C = A B^T as one bf16 matrix
// of each, or, where A or B has row groups (kv_b_proj's W_UK or W_UV rows of
// every head), a strided batch with a matrix per group and the other operand
// shared (batch stride 0). Apart from vendor_gemm.h so that the launcher
// needs none of the op headers; vendor_gemm_test.cc runs the views through
// the CPU gemm.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_VENDOR_GEMM_ARGS_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_VENDOR_GEMM_ARGS_H_

#include "attention/dense_ops.h"
#include "attention/gpu/dense_mha/gemm_bf16.h"
#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu {

// kInvalidArgument for row groups of both operands or groups that do not
// divide the rows.
LaunchResult DenseMhaVendorGemmArgs(const Bf16GemmParams& params,
                                    Gemm::Args* args);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_VENDOR_GEMM_ARGS_H_
