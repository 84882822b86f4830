// The matrix kernel's body for sm_90a with e4m3fn data: each warpgroup
// multiplies the 64-key tile by its 128 query columns with wgmma straight
// from the fp8 bytes in shared memory (no conversion, no register copy of
// the queries). The product runs asynchronously while the block fetches the
// next tile and stores the previous tile's logits; the head weights stay in
// shared memory so that the accumulators fit two blocks a multiprocessor.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_INDEXER_WARPGROUP_BODY_H_
#define DSA_ATTENTION_GPU_INDEXER_WARPGROUP_BODY_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/matrix_tiles.h"
#include "attention/gpu/indexer/params.h"
#include "attention/gpu/indexer/windows.h"

namespace dsa::attention::gpu::indexer {

template <::dsa::gpu::Fp8Format F>
__device__ __forceinline__ void LogitsWarpgroupBody(
    const IndexerLogitsParams& p) {
  using WG = ::dsa::gpu::WarpgroupFp8Mma<kDependent<kHeadDim, F>>;
  static_assert(WG::kM == kTileKeys && 2 * WG::kN == kBlockCols,
                "two warpgroups cover the block's columns");
  constexpr int kAcc = WG::kAccPerThread;
  constexpr int kSegments =
      WG::kN / kWarpHeads;  // 32-column segments per group
  alignas(128) __shared__ uint8_t q_smem[kBlockCols * kHeadDim];
  alignas(128) __shared__ uint8_t k_smem[kTileKeys * kHeadDim];
  __shared__ float scale_smem[kTileKeys];
  alignas(16) __shared__ float weight_smem[kBlockCols];
  __shared__ float partial[2][kWarps][kTileKeys];
  __shared__ RowWindow window[kWarps];

  const int tid = threadIdx.x;
  const int warp = tid / kDsaWarpSize;
  const int lane = tid % kDsaWarpSize;
  const int group = warp / 4;
  const int warp_in_group = warp % 4;
  const int chunks_per_row = p.heads / kWarpHeads;
  const int rows_per_block = kBlockCols / p.heads;
  const int64_t row0 =
      static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * rows_per_block;

  if (tid < rows_per_block) window[tid] = LoadWindow(p, row0 + tid);
  __syncthreads();
  for (int r = 0; r < rows_per_block; ++r) {
    if (row0 + r < p.rows) FillOutsideWindow(p, row0 + r, window[r]);
  }

  // Queries: 256 columns x 128 bytes, contiguous in global memory.
  const uint8_t* q_block = p.q_fp8 + row0 * p.heads * kHeadDim;
  const int64_t q_bytes_valid =
      (p.rows - row0) * static_cast<int64_t>(p.heads) * kHeadDim;
  for (int c = tid; c < kBlockCols * kChunksPerKey; c += kThreads) {
    const ChunkPos pos = CoreMatrixChunks::Of(c);
    const int64_t byte = (int64_t{pos.row} * kHeadDim) + pos.part * kChunk;
    uint4 codes = make_uint4(0, 0, 0, 0);
    if (byte < q_bytes_valid) {
      codes = *reinterpret_cast<const uint4*>(q_block + byte);
    }
    *reinterpret_cast<uint4*>(q_smem + WG::Offset(pos.row, pos.part * kChunk)) =
        codes;
  }
  WG::FenceStores();

  // Head weights of the block's columns (registers are kept for the
  // accumulators, so that two blocks fit on a multiprocessor).
  for (int col = tid; col < kBlockCols; col += kThreads) {
    const int64_t row = row0 + col / p.heads;
    weight_smem[col] =
        row < p.rows ? p.head_weights[row * p.heads + col % p.heads] : 0.0f;
  }

  int run_begin = 0;
  while (run_begin < rows_per_block) {
    int run_end;
    int32_t lo, hi;
    const int32_t request =
        FindRowRun(window, rows_per_block, run_begin, &run_end, &lo, &hi);
    if (request < 0 || lo >= hi) {
      run_begin = run_end;
      continue;
    }
    const int num_tiles = (hi - lo + kTileKeys - 1) / kTileKeys;

    uint4 next[kChunksPerThread];
    float next_scale = 0.0f;
    auto fetch = [&](int tile) {
      FetchKeyTile<CoreMatrixChunks>(lo + tile * kTileKeys, tid, next, hi, p,
                                     request, next_scale);
    };
    auto store = [&]() {
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        const ChunkPos pos = CoreMatrixChunks::Of(tid + i * kThreads);
        *reinterpret_cast<uint4*>(
            k_smem + WG::Offset(pos.row, pos.part * kChunk)) = next[i];
      }
      if (tid < kTileKeys) scale_smem[tid] = next_scale;
      WG::FenceStores();
    };
    // Rows of the run: sum the partials of their warps and store the tile's
    // keys that fall inside each row's window.
    auto finalize = [&](int tile) {
      StoreRunLogits(p, row0, window, partial[tile & 1], run_begin, run_end,
                     lo + tile * kTileKeys, chunks_per_row, tid);
    };

    fetch(0);
    __syncthreads();  // the previous run's last tile is no longer read
    store();
    __syncthreads();
    const uint8_t* q_group = q_smem + group * (WG::kN / 8) * WG::kRowGroupBytes;
    for (int tile = 0; tile < num_tiles; ++tile) {
      // The product runs asynchronously while this thread fetches the next
      // tile and stores the previous tile's logits.
      float acc[kAcc];
      WG::Issue(acc, k_smem, q_group, /*accumulate=*/false);
      if (tile + 1 < num_tiles) fetch(tile + 1);
      if (tile > 0) finalize(tile - 1);
      WG::Wait(acc);
      // relu(score * key scale) * head weight, summed over each 32-column
      // segment: this thread's 8 columns of it, then the 4 lanes that share
      // the key. A cache's scales are positive (ue8m0 powers of two), so
      // relu(score * scale) = scale * relu(score) and the scale applies once
      // per sum; any other scale takes the literal form.
      const float* wcol = weight_smem + group * WG::kN + 2 * (lane % 4);
#pragma unroll
      for (int rs = 0; rs < 2; ++rs) {
        const int key = WG::AccRow(warp_in_group, lane, 2 * rs);
        const float key_scale = scale_smem[key];
        const bool positive = key_scale > 0.0f;
#pragma unroll
        for (int seg = 0; seg < kSegments; ++seg) {
          float sum = 0.0f;
#pragma unroll
          for (int n = 4 * seg; n < 4 * seg + 4; ++n) {
            const float2 w2 = *reinterpret_cast<const float2*>(wcol + 8 * n);
            const float a0 = acc[4 * n + 2 * rs];
            const float a1 = acc[4 * n + 2 * rs + 1];
            if (positive) {
              sum += fmaxf(a0, 0.0f) * w2.x;
              sum += fmaxf(a1, 0.0f) * w2.y;
            } else {
              const float s0 = a0 * key_scale, s1 = a1 * key_scale;
              if (s0 > 0.0f) sum += s0 * w2.x;
              if (s1 > 0.0f) sum += s1 * w2.y;
            }
          }
          if (positive) sum *= key_scale;
          sum += DSA_SHFL_XOR(sum, 1, kDsaWarpSize);
          sum += DSA_SHFL_XOR(sum, 2, kDsaWarpSize);
          if (lane % 4 == 0)
            partial[tile & 1][group * kSegments + seg][key] = sum;
        }
      }
      __syncthreads();  // keys consumed, partials written
      if (tile + 1 < num_tiles) store();
      __syncthreads();  // next keys stored
    }
    finalize(num_tiles - 1);
    run_begin = run_end;
  }
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_WARPGROUP_BODY_H_
