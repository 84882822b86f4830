// GPU kernels of the dense ops (attention/dense_ops.h) that the project
// writes itself: RMSNorm, rope, residual add / cast, random fill, and a plain
// tiled GEMM, the fallback where no vendor BLAS is loaded (cuBLASLt on
// NVIDIA is the fast path, see op_kernels.cc). Same semantics as the
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

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_OPS_LAUNCH_H_
