// The elementwise dense ops: cast / copy, the residual add (y += x), and the
// random fill of attention/dtypes/random_fill.h (the same values as the CPU
// kernel). Memory-bound; grid-stride loops, four elements a thread.
#include <cstdint>

#include "attention/dtypes/random_fill.h"
#include "attention/gpu/dense_ops/element_access.h"
#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace {

// Rows over y, columns over x (no 64-bit division per element), each thread
// kVec consecutive columns with one vector access where they are whole and
// aligned. A block is 256 threads: as many column groups as the row has, up
// to 256, and as many rows as fill the rest, so that narrow rows (a head's
// 64 rope dims) keep every thread busy.
constexpr int kVec = 4;

__global__ void ElementwiseKernel(ElementwiseParams p) {
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
       r < p.rows; r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    for (int64_t c = kVec * (static_cast<int64_t>(blockIdx.x) * blockDim.x +
                             threadIdx.x);
         c < p.cols; c += kVec * static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const int64_t valid = p.cols - c;
      const int64_t yi = r * p.y_row_stride + c;
      float v[kVec];
      LoadValues(p.x, p.x_type, r * p.x_row_stride + c, valid, v);
      if (p.accumulate) {
        float y[kVec];
        LoadValues(p.y, p.y_type, yi, valid, y);
#pragma unroll
        for (int i = 0; i < kVec; ++i) v[i] = __fadd_rn(y[i], v[i]);
      }
      StoreValues(p.y, p.y_type, yi, valid, v);
    }
  }
}

__global__ void RandomFillKernel(RandomFillParams p) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < p.n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    StoreF(p.y, p.type, i,
           RandomFillValue(p.seed, p.stream, static_cast<uint64_t>(i), p.scale,
                           p.offset));
  }
}

}  // namespace

LaunchResult ElementwiseLaunch(const ElementwiseParams& p, void* stream) {
  const char* op = p.accumulate ? "residual_add" : "cast";
  if (p.rows < 0 || p.cols < 0) return Invalid(op, "negative size");
  const int64_t n = p.rows * p.cols;
  if (n == 0) return LaunchResult();
  if (p.x == nullptr || p.y == nullptr) {
    return Invalid(op, "a device pointer is null");
  }
  // A power of two, at least the row's column groups, up to 256.
  const int64_t groups = (p.cols + kVec - 1) / kVec;
  unsigned threads_x = 1;
  while (threads_x < 256 && threads_x < groups) threads_x *= 2;
  const unsigned threads_y = 256 / threads_x;
  const int64_t col_blocks = (groups + threads_x - 1) / threads_x;
  const int64_t row_blocks = (p.rows + threads_y - 1) / threads_y;
  const unsigned grid_x =
      static_cast<unsigned>(col_blocks < 1024 ? col_blocks : 1024);
  const unsigned grid_y =
      static_cast<unsigned>(row_blocks < 65535 ? row_blocks : 65535);
  hipLaunchKernelGGL(ElementwiseKernel, dim3(grid_x, grid_y),
                     dim3(threads_x, threads_y), 0,
                     static_cast<hipStream_t>(stream), p);
  return CheckLaunch(op);
}

LaunchResult RandomFillLaunch(const RandomFillParams& p, void* stream) {
  constexpr const char* op = "random_fill";
  if (p.n < 0) return Invalid(op, "negative size");
  if (p.n == 0) return LaunchResult();
  if (p.y == nullptr) return Invalid(op, "a device pointer is null");
  hipLaunchKernelGGL(RandomFillKernel, dim3(GridFor(p.n, 256)), dim3(256), 0,
                     static_cast<hipStream_t>(stream), p);
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
