// The GPU kernels of the dense ops (attention/dense_ops.h) as op kernels for
// the platform the build targets ("cuda" or "rocm"; none otherwise), listed
// with the attention kernels by GpuAttentionKernelDescriptors (op_kernels.h).
//
// gemm runs on cuBLASLt on the CUDA platform when x is bf16 and
// libcublasLt can be dlopen'ed (platform/cuda/cublaslt.h), otherwise on the
// project's own tiled kernel (dense_ops/launch.h), which also takes fp32 x.
// On ROCm it runs on rocBLAS (gemm_strided_batched_ex, dlopen'ed,
// platform/rocm/rocblas.h) when x is bf16 and librocblas can be loaded.
// A product the vendor library cannot take (no algorithm for a layout, an
// unsupported size or arch) falls back to the own kernel, the same way every
// time; a vendor call that fails (out of memory, an execution failure) is the
// gemm's error, named after the call and the library's status, so that a
// product's numerics never depend on a passing failure. Every vendor call
// that can fail is a fault site (platform/fault_injection.h).
// GemmGpuOn(..., GemmBackend::kOwnKernel) runs the own kernel on any x (the
// bench and the tests compare both).
//
// fp8_block_gemm takes cuBLASLt's block-scaled fp8 matmul (cuBLAS 12.9+,
// BLK128x128_32F weight scales, VEC128_32F activation scales) on CUDA when
// the library has an algorithm for the layout, else the own kernel. On ROCm
// it always runs the own kernel: hipBLASLt documents its VEC128_32F and
// BLK128x128_32F scale modes as not supported yet (hipblaslt-types.h), and
// its per-token (OUTER_VEC) recipe is not the 1 x 128 one.
// Free of Abseil: linked into plugin shared objects.
#ifndef DSA_ATTENTION_GPU_DENSE_OPS_OP_KERNELS_H_
#define DSA_ATTENTION_GPU_DENSE_OPS_OP_KERNELS_H_

#include <string>
#include <vector>

#include "attention/dense_ops.h"
#include "platform/plugin_api.h"

namespace dsa::attention::gpu {

Status GemmGpu(const ExecutionContext& ctx, const Gemm::Args& args);

// Which GEMM a gemm call may take: kAuto as above, kOwnKernel the project's
// tiled kernel whatever x is.
enum class GemmBackend { kAuto, kOwnKernel };
Status GemmGpuOn(const ExecutionContext& ctx, const Gemm::Args& args,
                 GemmBackend backend);
Status RmsNormGpu(const ExecutionContext& ctx, const RmsNorm::Args& args);
Status RopeGpu(const ExecutionContext& ctx, const Rope::Args& args);
Status ResidualAddGpu(const ExecutionContext& ctx,
                      const ResidualAdd::Args& args);
Status CastGpu(const ExecutionContext& ctx, const Cast::Args& args);
Status RandomFillGpu(const ExecutionContext& ctx, const RandomFill::Args& args);
Status Fp8BlockQuantGpu(const ExecutionContext& ctx,
                        const Fp8BlockQuant::Args& args);
// fp8_block_gemm: the activations quantised by fp8_block_quant's kernel into
// stream-ordered scratch, then cuBLASLt's block-scaled product (kAuto, where
// the library and the layout allow it) or the own kernel (launch.h).
Status Fp8BlockGemmGpu(const ExecutionContext& ctx,
                       const Fp8BlockGemm::Args& args);
Status Fp8BlockGemmGpuOn(const ExecutionContext& ctx,
                         const Fp8BlockGemm::Args& args, GemmBackend backend);

// Appends the descriptors of the kernels above for `platform_id`.
void AppendGpuDenseKernelDescriptors(const char* platform_id,
                                     std::vector<DsaKernelDescriptor>* out);

// Which GEMM a bf16 call takes in this process, for reports:
// "cublaslt (libcublasLt.so.13 ...)", "rocblas (...)" or "tiled (<why>)".
std::string GpuGemmBackend();
// The same for fp8_block_gemm, with how many shapes cuBLASLt took so far.
std::string GpuFp8GemmBackend();

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_OPS_OP_KERNELS_H_
