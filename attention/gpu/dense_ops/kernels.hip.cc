// The project's own GPU kernels of the dense ops (kernels.h).
//
// Costs, for a sense of scale at GLM-5.1's shapes (hidden 6144): RMSNorm,
// rope, casts and the residual are memory-bound and each moves a few MB per
// step (one read, one write of the activations), a few microseconds at the
// H200's 4 TB/s; they use one block per row (RMSNorm) or a grid-stride loop
// with one element per thread. The tiled GEMM is the fallback: 64x64 output
// tiles, a 16-deep slice of x and w staged in shared memory as fp32, each of
// 256 threads accumulating a 4x4 block with FMAs (no matrix cores). It
// exists so that every platform runs the step without a vendor BLAS; the
// NVIDIA fast path is cuBLASLt (op_kernels.cc).
#include "attention/gpu/dense_ops/kernels.h"

#include <cstdint>

#include "attention/dtypes/random_fill.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace {

__device__ __forceinline__ float LoadF(const void* base, FloatFormat type,
                                       int64_t i) {
  if (type == FloatFormat::kFloat32) return static_cast<const float*>(base)[i];
  return __uint_as_float(
      static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16);
}

// attention/dtypes/bf16.h's FloatToBf16 (round to nearest even, NaN kept
// quiet), on register bits: HIP 5.2 has no device memcpy for its BitCast.
__device__ __forceinline__ uint16_t ToBf16(float x) {
  uint32_t bits = __float_as_uint(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

__device__ __forceinline__ void StoreF(void* base, FloatFormat type, int64_t i,
                                       float v) {
  if (type == FloatFormat::kFloat32) {
    static_cast<float*>(base)[i] = v;
  } else {
    static_cast<uint16_t*>(base)[i] = ToBf16(v);
  }
}

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

constexpr int kRowThreads = 256;

__global__ void __launch_bounds__(kRowThreads) RmsNormKernel(RmsNormParams p) {
  const int64_t r = blockIdx.x;
  __shared__ float partial[kRowThreads / 32 + 1];
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.dim; i += kRowThreads) {
    const float v = LoadF(p.x, p.x_type, r * p.x_row_stride + i);
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
  for (int64_t i = threadIdx.x; i < p.dim; i += kRowThreads) {
    const float v = LoadF(p.x, p.x_type, r * p.x_row_stride + i);
    const float w = LoadF(p.weight, p.weight_type, i * p.weight_stride);
    StoreF(p.y, p.y_type, r * p.y_row_stride + i, v * inv * w);
  }
}

__global__ void RopeKernel(RopeParams p) {
  const int64_t half = p.rope_dim / 2;
  const int64_t n = p.tokens * p.heads * half;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < n; e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % half;
    const int64_t h = (e / half) % p.heads;
    const int64_t t = e / (half * p.heads);
    int64_t pos = p.positions[t * p.position_stride];
    pos = pos < 0 ? 0 : (pos >= p.max_position ? p.max_position - 1 : pos);
    const float c = p.cos_sin[pos * p.cos_sin_stride + i];
    const float s = p.cos_sin[pos * p.cos_sin_stride + half + i];
    const int64_t base = t * p.token_stride + h * p.head_stride;
    const int64_t ia = base + (p.neox ? i : 2 * i);
    const int64_t ib = base + (p.neox ? i + half : 2 * i + 1);
    const float x1 = LoadF(p.x, p.type, ia);
    const float x2 = LoadF(p.x, p.type, ib);
    // The CPU kernel's expression, each product rounded before the sum.
    StoreF(p.x, p.type, ia, __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
    StoreF(p.x, p.type, ib, __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
  }
}

// Rows over y, columns over x (no 64-bit division per element). A block is
// 256 threads: as many columns as the row has, up to 256, and as many rows as
// fill the rest, so that narrow rows (a head's 64 rope dims) keep every
// thread busy.
__global__ void ElementwiseKernel(ElementwiseParams p) {
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
       r < p.rows; r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    for (int64_t c =
             static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         c < p.cols; c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      float v = LoadF(p.x, p.x_type, r * p.x_row_stride + c);
      const int64_t yi = r * p.y_row_stride + c;
      if (p.accumulate) v = __fadd_rn(LoadF(p.y, p.y_type, yi), v);
      StoreF(p.y, p.y_type, yi, v);
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

// Blocks for a grid-stride loop over n elements.
unsigned GridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks < 1 ? 1 : blocks)
                                              : 65536);
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

LaunchResult RmsNormLaunch(const RmsNormParams& p, void* stream) {
  constexpr const char* op = "rms_norm";
  if (p.rows < 0 || p.dim < 0) return Invalid(op, "negative size");
  if (p.rows == 0 || p.dim == 0) return LaunchResult();
  if (p.x == nullptr || p.weight == nullptr || p.y == nullptr) {
    return Invalid(op, "a device pointer is null");
  }
  if (p.rows > 0x7fffffff) return Invalid(op, "too many rows");
  hipLaunchKernelGGL(RmsNormKernel, dim3(static_cast<unsigned>(p.rows)),
                     dim3(kRowThreads), 0, static_cast<hipStream_t>(stream), p);
  return CheckLaunch(op);
}

LaunchResult RopeLaunch(const RopeParams& p, void* stream) {
  constexpr const char* op = "rope";
  if (p.tokens < 0 || p.heads < 0 || p.rope_dim < 0 || p.rope_dim % 2 != 0) {
    return Invalid(op, "bad sizes");
  }
  const int64_t n = p.tokens * p.heads * (p.rope_dim / 2);
  if (n == 0) return LaunchResult();
  if (p.x == nullptr || p.positions == nullptr || p.cos_sin == nullptr ||
      p.max_position < 1) {
    return Invalid(op, "a device pointer is null or the rope table is empty");
  }
  hipLaunchKernelGGL(RopeKernel, dim3(GridFor(n, 256)), dim3(256), 0,
                     static_cast<hipStream_t>(stream), p);
  return CheckLaunch(op);
}

LaunchResult ElementwiseLaunch(const ElementwiseParams& p, void* stream) {
  const char* op = p.accumulate ? "residual_add" : "cast";
  if (p.rows < 0 || p.cols < 0) return Invalid(op, "negative size");
  const int64_t n = p.rows * p.cols;
  if (n == 0) return LaunchResult();
  if (p.x == nullptr || p.y == nullptr) {
    return Invalid(op, "a device pointer is null");
  }
  unsigned threads_x = 32;  // a power of two, at least the row, up to 256
  while (threads_x < 256 && threads_x < p.cols) threads_x *= 2;
  const unsigned threads_y = 256 / threads_x;
  const int64_t col_blocks = (p.cols + threads_x - 1) / threads_x;
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
