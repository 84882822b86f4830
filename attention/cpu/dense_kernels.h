// The CPU implementations of the dense ops (attention/dense_ops.h): the
// platform's production kernels for a layer step's projections, norms, rope,
// residual and casts, fp8 block quantisation and W8A8 products, and the
// reference the GPU dense kernels are compared with. Each validates its
// arguments (Op::Validate, plus the positions rope reads) before writing
// anything and runs on ExecutionContext::num_threads threads.
#ifndef DSA_ATTENTION_CPU_DENSE_KERNELS_H_
#define DSA_ATTENTION_CPU_DENSE_KERNELS_H_

#include "attention/dense_ops.h"

namespace dsa::attention::cpu {

Status GemmCpu(const ExecutionContext& ctx, const Gemm::Args& args);
Status RmsNormCpu(const ExecutionContext& ctx, const RmsNorm::Args& args);
Status RopeCpu(const ExecutionContext& ctx, const Rope::Args& args);
Status ResidualAddCpu(const ExecutionContext& ctx,
                      const ResidualAdd::Args& args);
Status CastCpu(const ExecutionContext& ctx, const Cast::Args& args);
Status RandomFillCpu(const ExecutionContext& ctx, const RandomFill::Args& args);
Status Fp8BlockQuantCpu(const ExecutionContext& ctx,
                        const Fp8BlockQuant::Args& args);
Status Fp8BlockGemmCpu(const ExecutionContext& ctx,
                       const Fp8BlockGemm::Args& args);

}  // namespace dsa::attention::cpu

#endif  // DSA_ATTENTION_CPU_DENSE_KERNELS_H_
