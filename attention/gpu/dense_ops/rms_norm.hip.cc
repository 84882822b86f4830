// RMSNorm, one block per row: memory-bound (one read, one write of the
// activations, a few microseconds at GLM-5.1's hidden 6144 on an H200),
// optionally writing y's fp8 quantisation per token and 128 columns too (the
// activations of the W8A8 products that read y, without a pass of their
// own), and optionally adding x into the residual stream first and
// normalising the sum (the residual add without a launch of its own).
#include <cstdint>

#include "attention/gpu/dense_ops/element_access.h"
#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/dense_ops/token_quant.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace {

constexpr int kRowThreads = 256;

__global__ void __launch_bounds__(kRowThreads) RmsNormKernel(RmsNormParams p) {
  const int64_t r = blockIdx.x;
  __shared__ float partial[kRowThreads / 32 + 1];
  // What the norm reads: x, or with the residual the sum as stored (each
  // thread stores its columns' sums here; the barrier below makes them
  // visible to the block's second pass).
  const bool fused = p.residual != nullptr;
  const void* src = fused ? p.residual : p.x;
  const FloatFormat src_type = fused ? p.residual_type : p.x_type;
  const int64_t src_row = r * (fused ? p.residual_row_stride : p.x_row_stride);
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.dim; i += kRowThreads) {
    float v = LoadF(p.x, p.x_type, r * p.x_row_stride + i);
    if (fused) {
      const int64_t ri = src_row + i;
      StoreF(p.residual, p.residual_type, ri,
             __fadd_rn(LoadF(p.residual, p.residual_type, ri), v));
      v = LoadF(p.residual, p.residual_type, ri);
    }
    ss = fmaf(v, v, ss);
  }
  for (int offset = kDsaWarpSize / 2; offset > 0; offset /= 2) {
    ss += DSA_SHFL_XOR(ss, offset, kDsaWarpSize);
  }
  constexpr int kWarps = kRowThreads / kDsaWarpSize;
  const int warp = threadIdx.x / kDsaWarpSize;
  if (threadIdx.x % kDsaWarpSize == 0) partial[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int i = 0; i < kWarps; ++i) total += partial[i];
    partial[kWarps] = rsqrtf(total / static_cast<float>(p.dim) + p.eps);
  }
  __syncthreads();
  const float inv = partial[kWarps];
  if (p.y_q == nullptr) {
    for (int64_t i = threadIdx.x; i < p.dim; i += kRowThreads) {
      const float v = LoadF(src, src_type, src_row + i);
      const float w = LoadF(p.weight, p.weight_type, i * p.weight_stride);
      StoreF(p.y, p.y_type, r * p.y_row_stride + i, v * inv * w);
    }
    return;
  }
  // With the fp8 copy: a warp per 128-column group, each lane
  // kFp8LaneValues consecutive values, quantised as stored (a bf16 y's
  // rounding first), so the codes and scales are fp8_block_quant's on y.
  const int lane = threadIdx.x % kDsaWarpSize;
  const int64_t groups = (p.dim + kFp8BlockSize - 1) / kFp8BlockSize;
  for (int64_t g = warp; g < groups; g += kWarps) {
    const int64_t c0 = g * kFp8BlockSize + lane * kFp8LaneValues;
    const int64_t valid = p.dim - c0;
    float v[kFp8LaneValues], w[kFp8LaneValues];
    LoadValues(src, src_type, src_row + c0, valid, v);
    if (p.weight_stride == 1) {
      LoadValues(p.weight, p.weight_type, c0, valid, w);
    } else {
#pragma unroll
      for (int i = 0; i < kFp8LaneValues; ++i) {
        w[i] = i < valid
                   ? LoadF(p.weight, p.weight_type, (c0 + i) * p.weight_stride)
                   : 0.0f;
      }
    }
#pragma unroll
    for (int i = 0; i < kFp8LaneValues; ++i) v[i] = v[i] * inv * w[i];
    StoreValues(p.y, p.y_type, r * p.y_row_stride + c0, valid, v);
    QuantizeLaneGroup(
        v, lane, static_cast<int>(min(valid, int64_t{kFp8LaneValues})),
        p.traits, p.divisor, p.y_q + r * p.y_q_row_stride + c0,
        &p.y_scales[r * p.y_scale_row_stride + g * p.y_scale_col_stride]);
  }
}

}  // namespace

LaunchResult RmsNormLaunch(const RmsNormParams& p, void* stream) {
  constexpr const char* op = "rms_norm";
  if (p.rows < 0 || p.dim < 0) return Invalid(op, "negative size");
  if (p.rows == 0 || p.dim == 0) return LaunchResult();
  if (p.x == nullptr || p.weight == nullptr || p.y == nullptr ||
      (p.y_q != nullptr && p.y_scales == nullptr)) {
    return Invalid(op, "a device pointer is null");
  }
  if (p.y_q != nullptr && !(p.divisor > 0.0f)) {
    return Invalid(op, "the scale divisor is not positive");
  }
  if (p.rows > 0x7fffffff) return Invalid(op, "too many rows");
  hipLaunchKernelGGL(RmsNormKernel, dim3(static_cast<unsigned>(p.rows)),
                     dim3(kRowThreads), 0, static_cast<hipStream_t>(stream), p);
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
