// RMSNorm, one block per row: memory-bound (one read, one write of the
// activations, a few microseconds at GLM-5.1's hidden 6144 on an H200; a row
// of up to 8192 held in registers between the two passes),
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

// Rows of up to kRowThreads x kCachedValues elements (8192: GLM-5.x's and
// DeepSeek-V3.2's hidden sizes among them) are read once into registers, all
// of a thread's loads issued before the first sum, and the second pass
// normalises the registers; longer rows read their elements again.
constexpr int kCachedValues = 32;

// The value an element of `type` holds once v is stored in it (StoreF, then
// LoadF): v itself in f32, v rounded to bf16 otherwise.
__device__ __forceinline__ float AsStored(FloatFormat type, float v) {
  if (type == FloatFormat::kFloat32) return v;
  return __uint_as_float(static_cast<uint32_t>(ToBf16(v)) << 16);
}

// Element e of a tensor of `type` as a pointer, for 32-bit offsets from it.
__device__ __forceinline__ const void* RowOf(const void* base, FloatFormat type,
                                             int64_t e) {
  return static_cast<const char*>(base) +
         e * (type == FloatFormat::kFloat32 ? 4 : 2);
}
__device__ __forceinline__ void* RowOf(void* base, FloatFormat type,
                                       int64_t e) {
  return static_cast<char*>(base) + e * (type == FloatFormat::kFloat32 ? 4 : 2);
}

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
  const bool cached = p.dim <= int64_t{kRowThreads} * kCachedValues;
  // A thread's elements are i = threadIdx.x + k kRowThreads, summed in that
  // order whether cached or not, so both forms give the same bits.
  float c[kCachedValues];
  float ss = 0.0f;
  if (cached) {
    // Row pointers once, 32-bit offsets within the row.
    const int dim = static_cast<int>(p.dim);
    const void* x_row = RowOf(p.x, p.x_type, r * p.x_row_stride);
    void* res_row =
        fused ? RowOf(p.residual, p.residual_type, src_row) : nullptr;
#pragma unroll
    for (int k = 0; k < kCachedValues; ++k) {
      const int i = static_cast<int>(threadIdx.x) + k * kRowThreads;
      c[k] = i < dim ? LoadF(x_row, p.x_type, i) : 0.0f;
    }
    if (fused) {
      // Every load before the first store (x and the residual may alias as
      // far as the compiler knows).
#pragma unroll
      for (int k = 0; k < kCachedValues; ++k) {
        const int i = static_cast<int>(threadIdx.x) + k * kRowThreads;
        if (i < dim) {
          c[k] = __fadd_rn(LoadF(res_row, p.residual_type, i), c[k]);
        }
      }
#pragma unroll
      for (int k = 0; k < kCachedValues; ++k) {
        const int i = static_cast<int>(threadIdx.x) + k * kRowThreads;
        if (i < dim) {
          StoreF(res_row, p.residual_type, i, c[k]);
          c[k] = AsStored(p.residual_type, c[k]);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kCachedValues; ++k) {
      if (static_cast<int>(threadIdx.x) + k * kRowThreads < dim) {
        ss = fmaf(c[k], c[k], ss);
      }
    }
  } else {
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
  if (p.y_q == nullptr && cached) {
    const int dim = static_cast<int>(p.dim);
    void* y_row = RowOf(p.y, p.y_type, r * p.y_row_stride);
#pragma unroll
    for (int k = 0; k < kCachedValues; ++k) {
      const int i = static_cast<int>(threadIdx.x) + k * kRowThreads;
      if (i < dim) {
        const float w = LoadF(p.weight, p.weight_type, i * p.weight_stride);
        StoreF(y_row, p.y_type, i, c[k] * inv * w);
      }
    }
    return;
  }
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
