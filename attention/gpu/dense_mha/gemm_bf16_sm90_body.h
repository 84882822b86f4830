// gemm_bf16's sm_90a body: two warpgroups, each 64 rows x 128 columns of
// the tile on wgmma (WarpgroupBf16Mma<128>), operands in the core-matrix
// layout; k in steps of 64 through a 3-stage ring of 32 KiB stages filled
// by cp.async. Layout: Bf16GemmTiles (config.h).
// CUDA device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_GEMM_BF16_SM90_BODY_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_GEMM_BF16_SM90_BODY_H_

#include <cstdint>

#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/dense_mha/gemm_bf16_warp_body.h"
#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"

#if defined(DSA_GPU_CUDA)

namespace dsa::attention::gpu::dense_mha {

// Chunk c of a 128-row x kSm90BK tile: pairs of threads cover a 32-byte
// global segment, eight pairs the eight rows of a core matrix.
__device__ __forceinline__ void Sm90GemmChunk(int c, int* row, int* col) {
  constexpr int kPerGroup = 8 * (Bf16GemmTiles::kSm90BK / 8);
  const int group = c / kPerGroup;
  const int i = c % kPerGroup;
  *row = group * 8 + (i / 2) % 8;
  *col = ((i % 2) + 2 * (i / 16)) * 8;
}

__device__ __forceinline__ void Sm90GemmBody(const uint16_t* __restrict__ a,
                                             int64_t lda, RowMap a_map,
                                             const uint16_t* __restrict__ b,
                                             int64_t ldb, RowMap b_map,
                                             uint16_t* __restrict__ c,
                                             int64_t ldc, int64_t m, int64_t n,
                                             int64_t k, uint8_t* smem) {
  using Wg = ::dsa::gpu::WarpgroupBf16Mma<128>;
  constexpr int kBM = Bf16GemmTiles::kBM;
  constexpr int kBN = Bf16GemmTiles::kBN;
  constexpr int kThreads = Bf16GemmTiles::kThreads;
  constexpr int kWgBK = Bf16GemmTiles::kSm90BK;
  constexpr int kWgStages = Bf16GemmTiles::kSm90Stages;
  constexpr int kWgGroup = Bf16GemmTiles::kSm90Group;
  constexpr int kWgTileBytes = Bf16GemmTiles::kSm90TileBytes;
  constexpr int kWgStageBytes = Bf16GemmTiles::kSm90StageBytes;
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int group = warp / 4;
  const int warp_in_group = warp % 4;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int k_steps = static_cast<int>((k + kWgBK - 1) / kWgBK);
  // This thread's chunks (same rows and column in every k step): source
  // rows found once.
  constexpr int kPerThread = 128 * (kWgBK / 8) / kThreads;
  const uint16_t* a_src[kPerThread];
  const uint16_t* b_src[kPerThread];
  uint32_t dst_off[kPerThread];
  int chunk_col = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    int r;
    Sm90GemmChunk(threadIdx.x + i * kThreads, &r, &chunk_col);
    dst_off[i] = Wg::Offset(r, chunk_col, kWgGroup);
    a_src[i] = a + a_map(m0 + r < m ? m0 + r : m - 1) * lda + chunk_col;
    b_src[i] = b + b_map(n0 + r < n ? n0 + r : n - 1) * ldb + chunk_col;
  }
  auto load_stage = [&](int step) {
    uint8_t* s = smem + (step % kWgStages) * kWgStageBytes;
    const int64_t k0 = static_cast<int64_t>(step) * kWgBK;
    const bool in_k = k0 + chunk_col < k;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      uint8_t* da = s + dst_off[i];
      uint8_t* db = da + kWgTileBytes;
      if (in_k) {
        CopyAsync16(da, a_src[i] + k0);
        CopyAsync16(db, b_src[i] + k0);
      } else {
        *reinterpret_cast<uint4*>(da) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(db) = make_uint4(0, 0, 0, 0);
      }
    }
  };
  float acc[Wg::kAccPerThread];
#pragma unroll
  for (int i = 0; i < Wg::kAccPerThread; ++i) acc[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < kWgStages - 1; ++s) {
    if (s < k_steps) load_stage(s);
    CopyAsyncCommit();
  }
  for (int step = 0; step < k_steps; ++step) {
    CopyAsyncWait<kWgStages - 2>();
    Wg::FenceStores();
    __syncthreads();
    if (step + kWgStages - 1 < k_steps) load_stage(step + kWgStages - 1);
    CopyAsyncCommit();
    const uint8_t* s = smem + (step % kWgStages) * kWgStageBytes;
    Wg::Issue<kWgBK>(acc, s + group * 8 * kWgGroup, kWgGroup, s + kWgTileBytes,
                     kWgGroup, true);
    Wg::Wait(acc);
  }
  CopyAsyncWait<0>();
#pragma unroll
  for (int i = 0; i < Wg::kAccPerThread; i += 2) {
    const int64_t row = m0 + group * 64 + Wg::AccRow(warp_in_group, lane, i);
    const int64_t col = n0 + Wg::AccCol(lane, i);
    if (row >= m) continue;
    if (col + 1 < n) {
      *reinterpret_cast<uint32_t*>(c + row * ldc + col) =
          ::dsa::gpu::PackBf16x2(acc[i], acc[i + 1]);
    } else if (col < n) {
      c[row * ldc + col] = ::dsa::gpu::FloatToBf16(acc[i]);
    }
  }
}

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_GPU_CUDA

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_GEMM_BF16_SM90_BODY_H_
