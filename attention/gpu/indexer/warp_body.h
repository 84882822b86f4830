// The matrix kernel's body for every target but sm_90a with e4m3fn data
// (sm_80+ NVIDIA: mma.sync; AMD: MFMA or its FMA fallback): each warp keeps
// its 32 heads' query fragments in registers and multiplies the staged key
// tile with warp-level products (device/mma.h's Fp8WarpMma). Partial sums
// per 32 heads go through shared memory, so that the heads of a row split
// over several warps add up, and leave as coalesced rows of logits.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_INDEXER_WARP_BODY_H_
#define DSA_ATTENTION_GPU_INDEXER_WARP_BODY_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/matrix_tiles.h"
#include "attention/gpu/indexer/params.h"
#include "attention/gpu/indexer/windows.h"

namespace dsa::attention::gpu::indexer {

template <::dsa::gpu::Fp8Format F>
__device__ __forceinline__ void LogitsWarpMmaBody(
    const IndexerLogitsParams& p) {
  using P = ::dsa::gpu::Fp8WarpMma<F>;
  using Elem = typename P::Elem;
  using S = MatrixWarpShared<Elem>;
  constexpr int kLd = S::kLd;
  constexpr int kMT = kTileKeys / P::kM;
  constexpr int kNT = kWarpHeads / P::kN;
  constexpr int kKT = kHeadDim / P::kK;
  static_assert(kTileKeys % P::kM == 0 && kWarpHeads % P::kN == 0 &&
                    kHeadDim % P::kK == 0,
                "warp tile must be whole fragments");
  __shared__ S sm;

  const int tid = threadIdx.x;
  const int warp = tid / kDsaWarpSize;
  const int lane = tid % kDsaWarpSize;
  const int chunks_per_row = p.heads / kWarpHeads;
  const int rows_per_block = kBlockCols / p.heads;
  const int64_t row0 =
      static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * rows_per_block;
  const int my_r = warp / chunks_per_row;
  const int my_chunk = warp % chunks_per_row;
  const int64_t my_row = row0 + my_r;

  if (tid < rows_per_block) sm.window[tid] = LoadWindow(p, row0 + tid);
  __syncthreads();
  for (int r = 0; r < rows_per_block; ++r) {
    if (row0 + r < p.rows) FillOutsideWindow(p, row0 + r, sm.window[r]);
  }

  // Query fragments: the block's 256 columns are 32 KB of contiguous fp8
  // (rows past the end read as zeros), staged 128 columns at a time.
  typename P::B qfrag[kNT][kKT];
  const uint8_t* q_block = p.q_fp8 + row0 * p.heads * kHeadDim;
  const int64_t q_bytes_valid =
      (p.rows - row0) * static_cast<int64_t>(p.heads) * kHeadDim;
  Elem* stage = &sm.keys[0][0];
  for (int half = 0; half < 2; ++half) {
    constexpr int kHalfChunks = kBlockCols / 2 * kChunksPerKey;  // 1024
    for (int c = tid; c < kHalfChunks; c += kThreads) {
      const int64_t byte = (half * kHalfChunks + c) * int64_t{kChunk};
      uint4 codes = make_uint4(0, 0, 0, 0);
      if (byte < q_bytes_valid) {
        codes = *reinterpret_cast<const uint4*>(q_block + byte);
      }
      P::Convert16(codes, stage + (c / kChunksPerKey) * kLd +
                              (c % kChunksPerKey) * kChunk);
    }
    __syncthreads();
    if (warp / (kWarps / 2) == half) {
      const Elem* cols = stage + (warp % (kWarps / 2)) * kWarpHeads * kLd;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt) {
          P::LoadB(qfrag[nt][kt], cols + nt * P::kN * kLd + kt * P::kK, kLd,
                   lane);
        }
      }
    }
    __syncthreads();
  }

  // This lane's head weights, one per C column it holds.
  float weight[kNT][P::kColSlots];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int cs = 0; cs < P::kColSlots; ++cs) {
      const int head = my_chunk * kWarpHeads + nt * P::kN + P::CCol(lane, cs);
      weight[nt][cs] =
          my_row < p.rows ? p.head_weights[my_row * p.heads + head] : 0.0f;
    }
  }

  int run_begin = 0;
  while (run_begin < rows_per_block) {
    int run_end;
    int32_t lo, hi;
    const int32_t request =
        FindRowRun(sm.window, rows_per_block, run_begin, &run_end, &lo, &hi);
    if (request < 0 || lo >= hi) {
      run_begin = run_end;
      continue;
    }
    const bool warp_in_run = my_r >= run_begin && my_r < run_end;
    const RowWindow my_window = sm.window[my_r];
    const int num_tiles = (hi - lo + kTileKeys - 1) / kTileKeys;

    uint4 next[kChunksPerThread];
    float next_scale = 0.0f;
    auto fetch = [&](int tile) {
      FetchKeyTile<RowMajorChunks>(lo + tile * kTileKeys, tid, next, hi, p,
                                   request, next_scale);
    };
    auto store = [&](int buf) {
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        const int c = tid + i * kThreads;
        P::Convert16(next[i], &sm.keys[buf][(c / kChunksPerKey) * kLd +
                                            (c % kChunksPerKey) * kChunk]);
      }
      if (tid < kTileKeys) sm.scale[buf][tid] = next_scale;
    };

    fetch(0);
    store(0);
    __syncthreads();
    for (int tile = 0; tile < num_tiles; ++tile) {
      const int buf = tile & 1;
      const int32_t tile_start = lo + tile * kTileKeys;
      if (tile + 1 < num_tiles) fetch(tile + 1);

      if (warp_in_run && tile_start < my_window.end &&
          tile_start + kTileKeys > my_window.start) {
        typename P::C acc[kMT][kNT];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) P::Zero(acc[mt][nt]);
        }
        const Elem* tile_keys = sm.keys[buf];
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            typename P::A a;
            P::LoadA(a, tile_keys + mt * P::kM * kLd + kt * P::kK, kLd, lane);
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
              P::Run(acc[mt][nt], a, qfrag[nt][kt]);
          }
        }
        // Epilogue: relu(score * key scale) * head weight, summed over this
        // lane's heads, then over the lanes that share the key.
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int rs = 0; rs < P::kRowSlots; ++rs) {
            const int key = mt * P::kM + P::CRow(lane, rs);
            const float key_scale = sm.scale[buf][key];
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
              for (int cs = 0; cs < P::kColSlots; ++cs) {
                const float s =
                    acc[mt][nt].v[rs * P::kColSlots + cs] * key_scale;
                if (s > 0.0f) sum += s * weight[nt][cs];
              }
            }
            sum = P::ReduceRowLanes(sum);
            if (P::IsRowLeader(lane)) sm.partial[buf][warp][key] = sum;
          }
        }
      }

      if (tile + 1 < num_tiles) store(buf ^ 1);
      __syncthreads();
      // Rows of the run: sum the partials of their warps and store the
      // tile's keys that fall inside each row's window.
      StoreRunLogits(p, row0, sm.window, sm.partial[buf], run_begin, run_end,
                     tile_start, chunks_per_row, tid);
    }
    run_begin = run_end;
  }
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_WARP_BODY_H_
