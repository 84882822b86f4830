// fp8_block_quant on the device (dense_ops.h): one float32 scale per block of
// block_rows x 128 elements, s = max(amax, 1e-10) / D, codes fp8(x / s)
// rounded to nearest even as attention/dtypes/fp8.h's FloatToFp8 (or the
// hardware conversion that equals it), so the codes and scales are the CPU
// kernel's, bit for bit (a division and a max: nothing a compiler may
// contract).
//
// Per token (block_rows 1, the activations of every fp8 product): a warp per
// 128 columns, each lane 128 / warp size consecutive elements, the amax a
// warp reduction (token_quant.h). A weight's 128 x 128 blocks (block_rows 128,
// once at load): a block of threads per tile, the amax reduced through shared
// memory.
#include <cstdint>

#include "attention/dtypes/fp8.h"
#include "attention/gpu/dense_ops/element_access.h"
#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/dense_ops/token_quant.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kDsaWarpSize;
constexpr int kPerLane = kFp8LaneValues;

__global__ void __launch_bounds__(kThreads)
    QuantTokenGroupsKernel(Fp8QuantParams p, int64_t groups) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock +
                       threadIdx.x / kDsaWarpSize;
  if (item >= p.rows * groups) return;  // whole warps leave together
  const int lane = threadIdx.x % kDsaWarpSize;
  const int64_t row = item / groups, group = item % groups;
  const int64_t c0 = group * kFp8BlockSize + lane * kPerLane;
  float v[kPerLane];
  LoadValues(p.x, p.x_type, row * p.x_row_stride + c0, p.cols - c0, v);
  QuantizeLaneGroup(
      v, lane, static_cast<int>(min(p.cols - c0, int64_t{kPerLane})), p.traits,
      p.divisor, p.q + row * p.q_row_stride + c0,
      &p.scales[row * p.scale_row_stride + group * p.scale_col_stride]);
}

__global__ void __launch_bounds__(kThreads) QuantTilesKernel(Fp8QuantParams p) {
  __shared__ float warp_max[kWarpsPerBlock];
  const int64_t rb = blockIdx.y, cb = blockIdx.x;
  const int64_t r0 = rb * p.block_rows, c0 = cb * kFp8BlockSize;
  const int64_t nr = min(static_cast<int64_t>(p.block_rows), p.rows - r0);
  const int64_t nc = min(static_cast<int64_t>(kFp8BlockSize), p.cols - c0);
  float amax = 0.0f;
  for (int64_t e = threadIdx.x; e < nr * kFp8BlockSize; e += kThreads) {
    const int64_t r = e / kFp8BlockSize, c = e % kFp8BlockSize;
    if (c < nc) {
      amax = fmaxf(amax, fabsf(LoadF(p.x, p.x_type,
                                     (r0 + r) * p.x_row_stride + c0 + c)));
    }
  }
  amax = WarpMax(amax);
  if (threadIdx.x % kDsaWarpSize == 0) {
    warp_max[threadIdx.x / kDsaWarpSize] = amax;
  }
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < kWarpsPerBlock; ++w) amax = fmaxf(amax, warp_max[w]);
  const float scale = Fp8BlockScale(amax, p.divisor);
  if (threadIdx.x == 0) {
    p.scales[rb * p.scale_row_stride + cb * p.scale_col_stride] = scale;
  }
  const Fp8Traits traits = p.traits;
  for (int64_t e = threadIdx.x; e < nr * kFp8BlockSize; e += kThreads) {
    const int64_t r = e / kFp8BlockSize, c = e % kFp8BlockSize;
    if (c < nc) {
      const float v = LoadF(p.x, p.x_type, (r0 + r) * p.x_row_stride + c0 + c);
      p.q[(r0 + r) * p.q_row_stride + c0 + c] = EncodeFp8(v / scale, traits);
    }
  }
}

}  // namespace

LaunchResult Fp8QuantLaunch(const Fp8QuantParams& p, void* stream) {
  constexpr const char* op = "fp8_block_quant";
  if (p.rows < 0 || p.cols < 0) return Invalid(op, "negative size");
  if (p.block_rows != 1 && p.block_rows != kFp8BlockSize) {
    return Invalid(op, "block_rows %d is neither 1 nor 128", p.block_rows);
  }
  if (p.rows == 0 || p.cols == 0) return LaunchResult();
  if (!(p.divisor > 0.0f))
    return Invalid(op, "the scale divisor is not positive");
  if (p.x == nullptr || p.q == nullptr || p.scales == nullptr) {
    return Invalid(op, "a device pointer is null");
  }
  const int64_t groups = Fp8Blocks(p.cols);
  const hipStream_t s = static_cast<hipStream_t>(stream);
  if (p.block_rows == 1) {
    const int64_t blocks =
        (p.rows * groups + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (blocks > 0x7fffffff) {
      return Invalid(op, "%lld x %lld is too large for one launch",
                     static_cast<long long>(p.rows),
                     static_cast<long long>(p.cols));
    }
    hipLaunchKernelGGL(QuantTokenGroupsKernel,
                       dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                       s, p, groups);
  } else {
    const int64_t row_blocks = (p.rows + p.block_rows - 1) / p.block_rows;
    if (groups > 0x7fffffff || row_blocks > 65535) {
      return Invalid(op, "%lld x %lld is too large for one launch",
                     static_cast<long long>(p.rows),
                     static_cast<long long>(p.cols));
    }
    hipLaunchKernelGGL(
        QuantTilesKernel,
        dim3(static_cast<unsigned>(groups), static_cast<unsigned>(row_blocks)),
        dim3(kThreads), 0, s, p);
  }
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
