// GPU kernels of the dense ops (attention/dense_ops.h) that the project
// writes itself: RMSNorm, rope, residual add / cast, random fill, a plain
// tiled GEMM, the fallback where no vendor BLAS is loaded (cuBLASLt on
// NVIDIA is the fast path, see op_kernels.cc), and the fp8 block
// quantisation and W8A8 product. Same semantics as the
// CPU kernels (attention/cpu/dense_kernels.cc).
//
// Plain C++ launchers over raw device pointers,
// enqueued on `stream`, checking what they can see without reading device
// memory; the one index they read (rope's positions) is clamped on the
// device.
#ifndef DSA_ATTENTION_GPU_DENSE_OPS_LAUNCH_H_
#define DSA_ATTENTION_GPU_DENSE_OPS_LAUNCH_H_

#include "attention/gpu/dense_ops/params.h"
#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu {

LaunchResult GemmTiledLaunch(const GemmParams& params, void* stream);
LaunchResult RmsNormLaunch(const RmsNormParams& params, void* stream);
LaunchResult RopeLaunch(const RopeParams& params, void* stream);
LaunchResult ElementwiseLaunch(const ElementwiseParams& params, void* stream);
LaunchResult RandomFillLaunch(const RandomFillParams& params, void* stream);
// fp8_block_quant's kernels: a warp per 128 columns of a token for
// block_rows 1, a block per 128 x 128 tile for 128.
LaunchResult Fp8QuantLaunch(const Fp8QuantParams& params, void* stream);
// The own W8A8 kernel (fp8_block_gemm without a vendor library): 64 x 64
// output tiles, one 128-deep group of x and w staged at a time and
// multiplied on the matrix cores (device/mma.h's Fp8WarpMma), each group's
// partial sums scaled by its two block scales. Any shape and stride.
LaunchResult Fp8GemmTiledLaunch(const Fp8GemmParams& params, void* stream);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_OPS_LAUNCH_H_
