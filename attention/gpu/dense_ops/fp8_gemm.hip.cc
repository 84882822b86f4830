// The project's own W8A8 product (fp8_block_gemm where no vendor library
// takes it): y = sum over 128-column groups g of sx[t, g] sw[o / 128, g]
// (x_q w^T restricted to g), on activations fp8_block_quant wrote.
//
// A block computes a 64 x 64 tile of y with four warps (2 x 2, each 32 x 32).
// Per group it stages the tile's 64 x 128 activation and weight codes in
// shared memory through Fp8WarpMma::Convert16 (fp16 on NVIDIA, raw codes or
// bf16 on AMD: device/mma.h), multiplies them on the matrix cores into a
// group accumulator, and adds that times the two block scales to the tile's
// accumulator: DeepSeek's fp8_gemm order (inference/kernel.py), so each
// group's sum is exact products in fp32 and the scaling is one multiply per
// group. A 64-column tile never straddles two weight block rows. Loads are
// bounds-checked (any in, out, rows and strides; 16-byte loads where a row is
// aligned), so partial groups and tiles read zeros. One staging buffer and
// no software pipeline: the fallback, correct on every target; cuBLASLt's
// block-scaled kernels are the fast path on NVIDIA (op_kernels.cc).
#include <cstdint>

#include "attention/gpu/dense_ops/element_access.h"
#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"

namespace dsa::attention::gpu {
namespace {

using ::dsa::gpu::Fp8Format;

constexpr int kTile = 64;    // rows and columns of y per block
constexpr int kGroup = 128;  // columns of a block scale
constexpr int kWarpTile = 32;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kDsaWarpSize;
constexpr int kChunksPerRow = kGroup / 16;  // 16-byte chunks of a tile row

// 16 codes of `row` from column k0 (columns at or past n read as zero).
__device__ __forceinline__ uint4 LoadCodes16(const uint8_t* row, int64_t k0,
                                             int64_t n) {
  const uint8_t* p = row + k0;
  if (k0 + 16 <= n && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
    return *reinterpret_cast<const uint4*>(p);
  }
  uint32_t w[4] = {0, 0, 0, 0};
  for (int i = 0; i < 16; ++i) {
    if (k0 + i < n) w[i / 4] |= static_cast<uint32_t>(p[i]) << (8 * (i % 4));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <Fp8Format F>
__global__ void __launch_bounds__(kThreads) Fp8GemmKernel(Fp8GemmParams p) {
  using P = ::dsa::gpu::Fp8WarpMma<F>;
  using Elem = typename P::Elem;
  constexpr int kLd = kGroup + 16 / static_cast<int>(sizeof(Elem));
  constexpr int kMT = kWarpTile / P::kM;
  constexpr int kNT = kWarpTile / P::kN;
  constexpr int kKT = kGroup / P::kK;
  constexpr int kSlots = P::kRowSlots * P::kColSlots;
  static_assert(
      kWarpTile % P::kM == 0 && kWarpTile % P::kN == 0 && kGroup % P::kK == 0,
      "a warp tile is whole fragments");
  // The staged group: 64 rows of x and of w (rows 16-byte aligned for the
  // fragment loads) and the 64 tokens' scales.
  struct Tiles {
    alignas(16) Elem x[kTile * kLd];
    alignas(16) Elem w[kTile * kLd];
    float x_scale[kTile];
  };
  __shared__ Tiles sm;
  Elem* const x_tile = sm.x;
  Elem* const w_tile = sm.w;
  float* const x_scale = sm.x_scale;

  const int tid = threadIdx.x;
  const int warp = tid / kDsaWarpSize, lane = tid % kDsaWarpSize;
  const int wm = warp / 2, wn = warp % 2;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t groups = (p.in + kGroup - 1) / kGroup;
  const float* w_scales = p.w_scales + (col0 / kGroup) * p.w_scale_row_stride;

  float acc[kMT][kNT][kSlots];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int i = 0; i < kSlots; ++i) acc[mt][nt][i] = 0.0f;
    }
  }

  for (int64_t g = 0; g < groups; ++g) {
    const int64_t k_begin = g * kGroup;
    for (int c = tid; c < kTile * kChunksPerRow; c += kThreads) {
      const int r = c / kChunksPerRow, part = c % kChunksPerRow;
      const int64_t k0 = k_begin + part * 16;
      const int64_t t = row0 + r, o = col0 + r;
      const uint4 xc = t < p.rows
                           ? LoadCodes16(p.x_q + t * p.x_q_row_stride, k0, p.in)
                           : make_uint4(0, 0, 0, 0);
      const uint4 wc = o < p.out
                           ? LoadCodes16(p.w + o * p.w_row_stride, k0, p.in)
                           : make_uint4(0, 0, 0, 0);
      P::Convert16(xc, x_tile + r * kLd + part * 16);
      P::Convert16(wc, w_tile + r * kLd + part * 16);
    }
    if (tid < kTile) {
      x_scale[tid] = row0 + tid < p.rows
                         ? p.x_scales[(row0 + tid) * p.x_scale_row_stride +
                                      g * p.x_scale_group_stride]
                         : 0.0f;
    }
    __syncthreads();

    typename P::C part[kMT][kNT];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) P::Zero(part[mt][nt]);
    }
#pragma unroll
    for (int kt = 0; kt < kKT; ++kt) {
      typename P::B b[kNT];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        P::LoadB(b[nt],
                 w_tile + (wn * kWarpTile + nt * P::kN) * kLd + kt * P::kK, kLd,
                 lane);
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        typename P::A a;
        P::LoadA(a, x_tile + (wm * kWarpTile + mt * P::kM) * kLd + kt * P::kK,
                 kLd, lane);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) P::Run(part[mt][nt], a, b[nt]);
      }
    }

    // The group's partial sums, scaled by the token's and the weight
    // block's scales.
    const float sw = col0 < p.out ? w_scales[g] : 0.0f;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int rs = 0; rs < P::kRowSlots; ++rs) {
        const int r = wm * kWarpTile + mt * P::kM + P::CRow(lane, rs);
        const float s = x_scale[r] * sw;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
          for (int cs = 0; cs < P::kColSlots; ++cs) {
            const int i = rs * P::kColSlots + cs;
            acc[mt][nt][i] += part[mt][nt].v[i] * s;
          }
        }
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int rs = 0; rs < P::kRowSlots; ++rs) {
      const int64_t t = row0 + wm * kWarpTile + mt * P::kM + P::CRow(lane, rs);
      if (t >= p.rows) continue;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int cs = 0; cs < P::kColSlots; ++cs) {
          const int64_t o =
              col0 + wn * kWarpTile + nt * P::kN + P::CCol(lane, cs);
          if (o < p.out) {
            StoreF(p.y, p.y_type, t * p.y_row_stride + o,
                   acc[mt][nt][rs * P::kColSlots + cs]);
          }
        }
      }
    }
  }
}

}  // namespace

LaunchResult Fp8GemmTiledLaunch(const Fp8GemmParams& p, void* stream) {
  constexpr const char* op = "fp8_block_gemm";
  if (p.rows < 0 || p.in < 0 || p.out < 0) return Invalid(op, "negative size");
  if (p.rows == 0 || p.out == 0) return LaunchResult();
  if (p.x_q == nullptr || p.x_scales == nullptr || p.w == nullptr ||
      p.w_scales == nullptr || p.y == nullptr) {
    return Invalid(op, "a device pointer is null");
  }
  const int64_t grid_x = (p.out + kTile - 1) / kTile;
  const int64_t grid_y = (p.rows + kTile - 1) / kTile;
  if (grid_x > 0x7fffffff || grid_y > 65535) {
    return Invalid(op, "%lld x %lld is too large for one launch",
                   static_cast<long long>(p.rows),
                   static_cast<long long>(p.out));
  }
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y));
  const hipStream_t s = static_cast<hipStream_t>(stream);
  if (p.fnuz) {
    hipLaunchKernelGGL(Fp8GemmKernel<Fp8Format::kE4m3fnuz>, grid,
                       dim3(kThreads), 0, s, p);
  } else {
    hipLaunchKernelGGL(Fp8GemmKernel<Fp8Format::kE4m3fn>, grid, dim3(kThreads),
                       0, s, p);
  }
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
