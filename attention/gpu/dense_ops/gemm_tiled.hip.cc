// The tiled GEMM, the fallback where no vendor BLAS is loaded (cuBLASLt and
// rocBLAS are the fast paths, op_kernels.cc): 64x64 output tiles, a 16-deep
// slice of x and w staged in shared memory as fp32, each of 256 threads
// accumulating a 4x4 block with FMAs (no matrix cores). It exists so that
// every platform runs the step without a vendor BLAS.
#include <cstdint>

#include "attention/gpu/dense_ops/element_access.h"
#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kGemmThreads = 256;

__global__ void __launch_bounds__(kGemmThreads) GemmTiledKernel(GemmParams p) {
  __shared__ float xs[kTileK][kTileM + 1];
  __shared__ float ws[kTileK][kTileN + 1];
  const int64_t b = blockIdx.z;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTileM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const void* x =
      p.x_type == FloatFormat::kFloat32
          ? static_cast<const void*>(static_cast<const float*>(p.x) +
                                     b * p.x_batch_stride)
          : static_cast<const void*>(static_cast<const uint16_t*>(p.x) +
                                     b * p.x_batch_stride);
  const uint16_t* w = p.w + b * p.w_batch_stride;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < p.in; k0 += kTileK) {
    // 64 x 16 elements of each operand, four per thread. x is read along
    // its contiguous in dim; w along whichever dim its strides make cheap
    // is not tracked here (a fallback): both are bounds-checked.
    for (int e = threadIdx.x; e < kTileM * kTileK; e += kGemmThreads) {
      const int m = e / kTileK, k = e % kTileK;
      const int64_t r = row0 + m, kk = k0 + k;
      xs[k][m] = (r < p.rows && kk < p.in)
                     ? LoadF(x, p.x_type, r * p.x_row_stride + kk)
                     : 0.0f;
      const int64_t o = col0 + m;
      ws[k][m] =
          (o < p.out && kk < p.in)
              ? __uint_as_float(static_cast<uint32_t>(
                                    w[o * p.w_out_stride + kk * p.w_in_stride])
                                << 16)
              : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTileK; ++k) {
      float a[4], c[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[k][ty * 4 + i];
        c[i] = ws[k][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], c[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t r = row0 + ty * 4 + i;
    if (r >= p.rows) continue;
    for (int j = 0; j < 4; ++j) {
      const int64_t o = col0 + tx * 4 + j;
      if (o < p.out) {
        StoreF(p.y, p.y_type, b * p.y_batch_stride + r * p.y_row_stride + o,
               acc[i][j]);
      }
    }
  }
}

}  // namespace

LaunchResult GemmTiledLaunch(const GemmParams& p, void* stream) {
  constexpr const char* op = "gemm";
  if (p.batch < 0 || p.rows < 0 || p.in < 0 || p.out < 0) {
    return Invalid(op, "negative size");
  }
  if (p.batch == 0 || p.rows == 0 || p.out == 0) return LaunchResult();
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr) {
    return Invalid(op, "a device pointer is null");
  }
  const int64_t grid_x = (p.out + kTileN - 1) / kTileN;
  const int64_t grid_y = (p.rows + kTileM - 1) / kTileM;
  if (grid_x > 0x7fffffff || grid_y > 65535 || p.batch > 65535) {
    return Invalid(op, "%lld x %lld x %lld is too large for one launch",
                   static_cast<long long>(p.batch),
                   static_cast<long long>(p.rows),
                   static_cast<long long>(p.out));
  }
  if (p.in == 0) {
    // An empty sum: y = 0, written by the same kernel (its loop is empty).
  }
  hipLaunchKernelGGL(
      GemmTiledKernel,
      dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y),
           static_cast<unsigned>(p.batch)),
      dim3(kGemmThreads), 0, static_cast<hipStream_t>(stream), p);
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
