// RMSNorm, one block per row: memory-bound (one read, one write of the
// activations; with the residual add of GLM-5.1's hidden 6144 in f32 at 1024
// tokens, 88 MB, ~20 us at an H200's pace), optionally writing y's fp8
// quantisation per token and 128 columns too (the activations of the W8A8
// products that read y, without a pass of their own), and optionally adding
// x into the residual stream first and normalising the sum (the residual add
// without a launch of its own).
//
// A thread's columns are chunks of kV consecutive ones, chunk c = t + k
// kRowThreads for thread t: a warp's chunks of a pass are one 128-column
// group of the fused quantisation. Rows of up to kMaxCachedCols whose every
// tensor is aligned to the chunks (the models' hidden sizes and their
// narrow norms) are held in registers between the passes, each thread's
// loads issued together as vector accesses; other rows are read again from
// memory, chunk by chunk. Both forms visit a thread's elements in the same
// order, so the sum and y are the same bits either way.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>

#include "attention/gpu/dense_ops/element_access.h"
#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/dense_ops/token_quant.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace {

constexpr int kRowThreads = 256;
constexpr int kWarps = kRowThreads / kDsaWarpSize;
// A chunk's values: a lane's share of a 128-column group (4 on NVIDIA, 2 on
// AMD).
constexpr int kV = kFp8LaneValues;
static_assert(kV * kDsaWarpSize == kFp8BlockSize,
              "a warp's chunks are one quantisation group");
// A pass of the block over a row: kRowThreads chunks.
constexpr int kPassCols = kRowThreads * kV;
// The row lengths the cached kernel is built for, a thread's chunks each
// (whole passes: 1, 2, 3, 4, 6 and 8 a thread on NVIDIA): the kernel for
// the shortest that holds a row, so narrow rows keep the registers, and the
// blocks a multiprocessor holds, of a few chunks.
constexpr int kCachedCols[] = {1024, 2048, 3072, 4096, 6144, 8192};
constexpr int kMaxCachedCols = kCachedCols[std::size(kCachedCols) - 1];
static_assert(kMaxCachedCols % kPassCols == 0 && 1024 % kPassCols == 0,
              "whole passes");

template <int kChunks>
using Chunks = float[kChunks][kV];

// One whole, aligned chunk at element e of a row of T (float or bf16 bits).
template <typename T>
__device__ __forceinline__ void LoadChunk(const T* row, int e, float (&v)[kV]) {
  if constexpr (sizeof(T) == 4) {
    if constexpr (kV == 4) {
      const float4 f = *reinterpret_cast<const float4*>(row + e);
      v[0] = f.x;
      v[1] = f.y;
      v[2] = f.z;
      v[3] = f.w;
    } else {
      const float2 f = *reinterpret_cast<const float2*>(row + e);
      v[0] = f.x;
      v[1] = f.y;
    }
  } else {
    uint32_t w[kV / 2];
    if constexpr (kV == 4) {
      const uint2 u = *reinterpret_cast<const uint2*>(row + e);
      w[0] = u.x;
      w[1] = u.y;
    } else {
      w[0] = *reinterpret_cast<const uint32_t*>(row + e);
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      v[i] = __uint_as_float((w[i / 2] >> (16 * (i % 2))) << 16);
    }
  }
}

// Stores v as one chunk and leaves in v what was stored (bf16's rounding).
template <typename T>
__device__ __forceinline__ void StoreChunk(T* row, int e, float (&v)[kV]) {
  if constexpr (sizeof(T) == 4) {
    if constexpr (kV == 4) {
      *reinterpret_cast<float4*>(row + e) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      *reinterpret_cast<float2*>(row + e) = make_float2(v[0], v[1]);
    }
  } else {
    uint32_t w[kV / 2] = {};
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      const uint16_t h = ToBf16(v[i]);
      v[i] = __uint_as_float(static_cast<uint32_t>(h) << 16);
      w[i / 2] |= static_cast<uint32_t>(h) << (16 * (i % 2));
    }
    if constexpr (kV == 4) {
      *reinterpret_cast<uint2*>(row + e) = make_uint2(w[0], w[1]);
    } else {
      *reinterpret_cast<uint32_t*>(row + e) = w[0];
    }
  }
}

// A thread's chunks of a row (zeros past its end), every load issued before
// any is used: no branch around a load (a chunk past the end reads the
// row's last and is zeroed), and the format's branch taken once, outside
// the loop.
template <typename T, int kChunks>
__device__ __forceinline__ void LoadChunksAs(const void* row, int chunks,
                                             Chunks<kChunks>& v) {
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    const int c = static_cast<int>(threadIdx.x) + k * kRowThreads;
    LoadChunk(static_cast<const T*>(row), min(c, chunks - 1) * kV, v[k]);
#pragma unroll
    for (int i = 0; i < kV; ++i) v[k][i] = c < chunks ? v[k][i] : 0.0f;
  }
}
template <int kChunks>
__device__ __forceinline__ void LoadChunks(const void* row, FloatFormat type,
                                           int chunks, Chunks<kChunks>& v) {
  if (type == FloatFormat::kFloat32) {
    LoadChunksAs<float, kChunks>(row, chunks, v);
  } else {
    LoadChunksAs<uint16_t, kChunks>(row, chunks, v);
  }
}

template <typename T, int kChunks>
__device__ __forceinline__ void StoreChunksAs(void* row, int chunks,
                                              Chunks<kChunks>& v) {
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    const int c = static_cast<int>(threadIdx.x) + k * kRowThreads;
    if (c < chunks) StoreChunk(static_cast<T*>(row), c * kV, v[k]);
  }
}
template <int kChunks>
__device__ __forceinline__ void StoreChunks(void* row, FloatFormat type,
                                            int chunks, Chunks<kChunks>& v) {
  if (type == FloatFormat::kFloat32) {
    StoreChunksAs<float, kChunks>(row, chunks, v);
  } else {
    StoreChunksAs<uint16_t, kChunks>(row, chunks, v);
  }
}

// Element e of a tensor of `type` as a pointer.
__device__ __forceinline__ const void* At(const void* base, FloatFormat type,
                                          int64_t e) {
  return static_cast<const char*>(base) +
         e * (type == FloatFormat::kFloat32 ? 4 : 2);
}
__device__ __forceinline__ void* At(void* base, FloatFormat type, int64_t e) {
  return static_cast<char*>(base) + e * (type == FloatFormat::kFloat32 ? 4 : 2);
}

// The block's sum of every thread's ss, and from it the row's 1 / rms.
__device__ __forceinline__ float InverseRms(float ss, const RmsNormParams& p) {
  __shared__ float partial[kWarps + 1];
  for (int offset = kDsaWarpSize / 2; offset > 0; offset /= 2) {
    ss += DSA_SHFL_XOR(ss, offset, kDsaWarpSize);
  }
  const int warp = threadIdx.x / kDsaWarpSize;
  if (threadIdx.x % kDsaWarpSize == 0) partial[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int i = 0; i < kWarps; ++i) total += partial[i];
    partial[kWarps] = rsqrtf(total / static_cast<float>(p.dim) + p.eps);
  }
  __syncthreads();
  return partial[kWarps];
}

// The row in registers: x (plus the residual) read once, y written from the
// registers. Launched only where Cacheable (below) holds.
template <int kChunks>
__global__ void __launch_bounds__(kRowThreads)
    RmsNormCachedKernel(RmsNormParams p) {
  const int64_t r = blockIdx.x;
  const int dim = static_cast<int>(p.dim);
  const int chunks = dim / kV;
  const bool fused = p.residual != nullptr;
  Chunks<kChunks> v, w;
  LoadChunks(At(p.x, p.x_type, r * p.x_row_stride), p.x_type, chunks, v);
  if (fused) {
    void* res = At(p.residual, p.residual_type, r * p.residual_row_stride);
    LoadChunks(res, p.residual_type, chunks, w);
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
#pragma unroll
      for (int i = 0; i < kV; ++i) v[k][i] = __fadd_rn(w[k][i], v[k][i]);
    }
    // The sum as stored is what the norm reads.
    StoreChunks(res, p.residual_type, chunks, v);
  }
  // The weights' loads under the reduction's barriers.
  LoadChunks(p.weight, p.weight_type, chunks, w);
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
#pragma unroll
    for (int i = 0; i < kV; ++i) ss = fmaf(v[k][i], v[k][i], ss);
  }
  const float inv = InverseRms(ss, p);
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
#pragma unroll
    for (int i = 0; i < kV; ++i) v[k][i] = v[k][i] * inv * w[k][i];
  }
  StoreChunks(At(p.y, p.y_type, r * p.y_row_stride), p.y_type, chunks, v);
  if (p.y_q == nullptr) return;
  // y as stored, quantised a warp per group: pass k's chunks of this warp
  // are group warp + k kWarps.
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int groups = (dim + kFp8BlockSize - 1) / kFp8BlockSize;
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    const int g = warp + k * kWarps;
    if (g >= groups) break;
    const int c0 = (static_cast<int>(threadIdx.x) + k * kRowThreads) * kV;
    QuantizeLaneGroup(
        v[k], lane, dim - c0, p.traits, p.divisor,
        p.y_q + r * p.y_q_row_stride + c0,
        &p.y_scales[r * p.y_scale_row_stride + g * p.y_scale_col_stride]);
  }
}

// Any row: the first pass sums (and adds into the residual) chunk by chunk,
// the second reads the row again.
__global__ void __launch_bounds__(kRowThreads) RmsNormKernel(RmsNormParams p) {
  const int64_t r = blockIdx.x;
  const bool fused = p.residual != nullptr;
  const void* src = fused ? p.residual : p.x;
  const FloatFormat src_type = fused ? p.residual_type : p.x_type;
  const int64_t src_row = r * (fused ? p.residual_row_stride : p.x_row_stride);
  const int64_t chunks = (p.dim + kV - 1) / kV;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += kRowThreads) {
    const int64_t e = c * kV, valid = p.dim - e;
    float v[kV];
    LoadValues(p.x, p.x_type, r * p.x_row_stride + e, valid, v);
    if (fused) {
      float s[kV];
      LoadValues(p.residual, p.residual_type, src_row + e, valid, s);
#pragma unroll
      for (int i = 0; i < kV; ++i) v[i] = __fadd_rn(s[i], v[i]);
      StoreValues(p.residual, p.residual_type, src_row + e, valid, v);
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      if (i < valid) ss = fmaf(v[i], v[i], ss);
    }
  }
  const float inv = InverseRms(ss, p);
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  // With the fp8 copy, every lane of a warp takes part in a group's
  // quantisation: warp w's chunks of a pass are group w + k kWarps.
  for (int64_t g = warp; g * kFp8BlockSize < p.dim; g += kWarps) {
    if (p.y_q == nullptr && g * kFp8BlockSize + lane * kV >= p.dim) continue;
    const int64_t c0 = g * kFp8BlockSize + lane * kV;
    const int64_t valid = p.dim - c0;
    float v[kV], w[kV];
    LoadValues(src, src_type, src_row + c0, valid, v);
    if (p.weight_stride == 1) {
      LoadValues(p.weight, p.weight_type, c0, valid, w);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        w[i] = i < valid
                   ? LoadF(p.weight, p.weight_type, (c0 + i) * p.weight_stride)
                   : 0.0f;
      }
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) v[i] = v[i] * inv * w[i];
    StoreValues(p.y, p.y_type, r * p.y_row_stride + c0, valid, v);
    if (p.y_q == nullptr) continue;
    QuantizeLaneGroup(
        v, lane, static_cast<int>(min(valid, int64_t{kV})), p.traits, p.divisor,
        p.y_q + r * p.y_q_row_stride + c0,
        &p.y_scales[r * p.y_scale_row_stride + g * p.y_scale_col_stride]);
  }
}

// A tensor whose rows start on a chunk's vector boundary.
bool ChunkAligned(const void* base, FloatFormat type, int64_t row_stride) {
  const int64_t bytes = kV * (type == FloatFormat::kFloat32 ? 4 : 2);
  return reinterpret_cast<uintptr_t>(base) % bytes == 0 && row_stride % kV == 0;
}

// Whether the row fits the registers and every tensor the chunks' vectors.
bool Cacheable(const RmsNormParams& p) {
  return p.dim <= kMaxCachedCols && p.dim % kV == 0 &&
         ChunkAligned(p.x, p.x_type, p.x_row_stride) &&
         ChunkAligned(p.y, p.y_type, p.y_row_stride) &&
         ChunkAligned(p.weight, p.weight_type, 0) && p.weight_stride == 1 &&
         (p.residual == nullptr ||
          ChunkAligned(p.residual, p.residual_type, p.residual_row_stride));
}

using NormKernel = void (*)(RmsNormParams);

// The cached kernel for the shortest of kCachedCols that holds dim.
template <size_t... kI>
NormKernel CachedKernelFor(int64_t dim, std::index_sequence<kI...>) {
  NormKernel kernel = nullptr;
  ((kernel == nullptr && dim <= kCachedCols[kI]
        ? kernel = RmsNormCachedKernel<kCachedCols[kI] / kPassCols>
        : kernel),
   ...);
  return kernel;
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
  const NormKernel kernel =
      Cacheable(p)
          ? CachedKernelFor(p.dim,
                            std::make_index_sequence<std::size(kCachedCols)>())
          : RmsNormKernel;
  hipLaunchKernelGGL(kernel, dim3(static_cast<unsigned>(p.rows)),
                     dim3(kRowThreads), 0, static_cast<hipStream_t>(stream), p);
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
