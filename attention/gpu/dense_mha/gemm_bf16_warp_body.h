// gemm_bf16's warp-level body (Bf16WarpMma: mma.sync, MFMA), which every
// device can run: a block computes a 128 x 128 tile of C with 256 threads
// (8 warps of 32 on NVIDIA, each a 64 x 32 sub-tile of 4 x 4 m16n8k16
// products; 4 wavefronts of 64 on AMD, each 64 x 64 of 2 x 2 32x32x8
// products). K runs in steps of 32 through a 4-stage ring of shared-memory
// tiles, filled with cp.async where the target has it, so the loads of step
// s + 3 overlap the products of step s. Rows are padded by 8 elements (16
// bytes), which puts the 8 rows an ldmatrix reads in 8 different bank
// groups. Layout: Bf16GemmTiles (config.h). Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_GEMM_BF16_WARP_BODY_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_GEMM_BF16_WARP_BODY_H_

#include <cstdint>

#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"

namespace dsa::attention::gpu::dense_mha {

// Logical rows of an operand, in groups (see Bf16GemmParams).
struct RowMap {
  int64_t group_rows;  // 0: no groups
  int64_t group_stride;
  __device__ __forceinline__ int64_t operator()(int64_t row) const {
    return group_rows > 0 ? (row / group_rows) * group_stride + row % group_rows
                          : row;
  }
};

// Loads rows [row0, row0 + kRows) x k columns [k0, k0 + kBK) of a
// row-major matrix into `dst` (row stride kLd elements). Rows past `rows`
// repeat the last row (their results are never stored); columns past `k` are
// zero.
template <int kRows>
__device__ __forceinline__ void GemmLoadTile(uint16_t* dst, const uint16_t* src,
                                             int64_t ld, RowMap map,
                                             int64_t row0, int64_t rows,
                                             int64_t k0, int64_t k) {
  constexpr int kLd = Bf16GemmTiles::kLd;
  constexpr int kThreads = Bf16GemmTiles::kThreads;
  constexpr int kChunksPerRow = Bf16GemmTiles::kBK / 8;  // 16-byte chunks
  for (int c = threadIdx.x; c < kRows * kChunksPerRow; c += kThreads) {
    const int r = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * 8;
    uint16_t* d = dst + r * kLd + col;
    if (k0 + col < k) {
      const int64_t row = map(row0 + r < rows ? row0 + r : rows - 1);
      CopyAsync16(d, src + row * ld + k0 + col);
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
}

__device__ __forceinline__ void WarpGemmBody(const uint16_t* __restrict__ a,
                                             int64_t lda, RowMap a_map,
                                             const uint16_t* __restrict__ b,
                                             int64_t ldb, RowMap b_map,
                                             uint16_t* __restrict__ c,
                                             int64_t ldc, int64_t m, int64_t n,
                                             int64_t k, uint16_t* smem) {
  using Mma = ::dsa::gpu::Bf16WarpMma;
  constexpr int kBM = Bf16GemmTiles::kBM;
  constexpr int kBN = Bf16GemmTiles::kBN;
  constexpr int kBK = Bf16GemmTiles::kBK;
  constexpr int kStages = Bf16GemmTiles::kStages;
  constexpr int kLd = Bf16GemmTiles::kLd;
  constexpr int kStageElems = Bf16GemmTiles::kStageElems;
  constexpr int kWarps = Bf16GemmTiles::kThreads / kDsaWarpSize;
  constexpr int kWarpsM = Bf16GemmTiles::kWarpsM;
  constexpr int kWarpsN = kWarps / kWarpsM;
  constexpr int kWM = kBM / kWarpsM;
  constexpr int kWN = kBN / kWarpsN;
  constexpr int kFragM = kWM / Mma::kM;
  constexpr int kFragN = kWN / Mma::kN;
  static_assert(kWM % Mma::kM == 0 && kWN % Mma::kN == 0, "warp tile");
  static_assert(kBK % Mma::kK == 0, "k step");
  static_assert(Mma::kCPerLane % 2 == 0, "the epilogue takes slots in pairs");
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int warp_m = warp / kWarpsN;
  const int warp_n = warp % kWarpsN;
  // blockIdx.x walks n fastest, so consecutive blocks share their A tile.
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int k_steps = static_cast<int>((k + kBK - 1) / kBK);

  auto load_stage = [&](int step) {
    uint16_t* s = smem + (step % kStages) * kStageElems;
    GemmLoadTile<kBM>(s, a, lda, a_map, m0, m, static_cast<int64_t>(step) * kBK,
                      k);
    GemmLoadTile<kBN>(s + kBM * kLd, b, ldb, b_map, n0, n,
                      static_cast<int64_t>(step) * kBK, k);
  };

  Mma::C acc[kFragM][kFragN];
#pragma unroll
  for (int i = 0; i < kFragM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragN; ++j) Mma::Zero(acc[i][j]);
  }

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_steps) load_stage(s);
    CopyAsyncCommit();
  }
  for (int step = 0; step < k_steps; ++step) {
    CopyAsyncWait<kStages - 2>();
    __syncthreads();
    // The slot refilled here was read in step - 1, which every warp has
    // finished (barrier above).
    if (step + kStages - 1 < k_steps) load_stage(step + kStages - 1);
    CopyAsyncCommit();
    const uint16_t* s = smem + (step % kStages) * kStageElems;
    const uint16_t* sa = s + warp_m * kWM * kLd;
    const uint16_t* sb = s + kBM * kLd + warp_n * kWN * kLd;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += Mma::kK) {
      Mma::A fa[kFragM];
      Mma::B fb[kFragN];
#pragma unroll
      for (int i = 0; i < kFragM; ++i) {
        Mma::LoadA(fa[i], sa + i * Mma::kM * kLd + kk, kLd, lane);
      }
#pragma unroll
      for (int j = 0; j < kFragN; ++j) {
        Mma::LoadB(fb[j], sb + j * Mma::kN * kLd + kk, kLd, lane);
      }
#pragma unroll
      for (int i = 0; i < kFragM; ++i) {
#pragma unroll
        for (int j = 0; j < kFragN; ++j) Mma::Run(acc[i][j], fa[i], fb[j]);
      }
    }
  }
  CopyAsyncWait<0>();

  // Epilogue: C rounded to bf16; adjacent columns of one row go out as one
  // 4-byte store where the fragment layout has them in one lane.
#pragma unroll
  for (int i = 0; i < kFragM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragN; ++j) {
      const int64_t rb = m0 + warp_m * kWM + i * Mma::kM;
      const int64_t cb = n0 + warp_n * kWN + j * Mma::kN;
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; e += 2) {
        const float v0 = acc[i][j].v[e];
        const float v1 = acc[i][j].v[e + 1];
        const int64_t r0 = rb + Mma::CRow(lane, e);
        const int64_t c0 = cb + Mma::CCol(lane, e);
        const int64_t r1 = rb + Mma::CRow(lane, e + 1);
        const int64_t c1 = cb + Mma::CCol(lane, e + 1);
        if (r1 == r0 && c1 == c0 + 1 && c0 % 2 == 0 && r0 < m && c1 < n) {
          *reinterpret_cast<uint32_t*>(c + r0 * ldc + c0) =
              ::dsa::gpu::PackBf16x2(v0, v1);
        } else {
          if (r0 < m && c0 < n) c[r0 * ldc + c0] = ::dsa::gpu::FloatToBf16(v0);
          if (r1 < m && c1 < n) c[r1 * ldc + c1] = ::dsa::gpu::FloatToBf16(v1);
        }
      }
    }
  }
}

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_GEMM_BF16_WARP_BODY_H_
