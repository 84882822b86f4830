// The steps the matrix kernel's two bodies (warp_body.h, warpgroup_body.h)
// share: the runs of a block's rows that belong to one request (each run
// walks the union of its rows' windows in 64-key tiles), fetching the next
// key tile into registers, and storing a tile's logits from the warps'
// partial sums. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_INDEXER_MATRIX_TILES_H_
#define DSA_ATTENTION_GPU_INDEXER_MATRIX_TILES_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/params.h"
#include "attention/gpu/indexer/windows.h"

namespace dsa::attention::gpu::indexer {

// The matrix kernel's block: 256 NVIDIA threads, 512 AMD.
inline constexpr int kThreads = kWarps * kDsaWarpSize;
inline constexpr int kChunksPerThread = kTileChunks / kThreads;  // 2 / 1
static_assert(kTileChunks % kThreads == 0, "tile chunks per thread");

// The run of the block's `rows` windows that starts at row run_begin: rows
// [run_begin, *run_end) of one request (its return value), and the union
// [*lo, *hi) of their windows (nothing to score when the request is
// invalid or *lo >= *hi). Rows of one request share key tiles; a block
// whose rows span several requests walks each run in turn.
__device__ __forceinline__ int32_t FindRowRun(const RowWindow* window, int rows,
                                              int run_begin, int* run_end,
                                              int32_t* lo, int32_t* hi) {
  const int32_t request = window[run_begin].request;
  int end = run_begin + 1;
  while (end < rows && window[end].request == request) ++end;
  *run_end = end;
  *lo = 0x7fffffff;
  *hi = 0;
  for (int r = run_begin; r < end; ++r) {
    if (window[r].start < window[r].end) {
      *lo = min(*lo, window[r].start);
      *hi = max(*hi, window[r].end);
    }
  }
  return request;
}

// The key tile at tile_start of a run of `request` (keys below hi) on its
// way to shared memory: thread `tid`'s 16-byte chunks of it (chunk
// tid + i * kThreads, placed by Layout::Of) into `chunks` and, in the first
// 64 threads, key tid's scale into `scale`. Keys at or past hi, or on an
// invalid page, read as zeros. (The arguments come in the order the code
// uses them: with another order nvcc lays the bodies' fetch closures out
// differently and emits other machine code for both bodies.)
template <typename Layout>
__device__ __forceinline__ void FetchKeyTile(int32_t tile_start, int tid,
                                             uint4 (&chunks)[kChunksPerThread],
                                             int32_t hi,
                                             const IndexerLogitsParams& p,
                                             int32_t request, float& scale) {
#pragma unroll
  for (int i = 0; i < kChunksPerThread; ++i) {
    const ChunkPos pos = Layout::Of(tid + i * kThreads);
    const int32_t key = tile_start + pos.row;
    chunks[i] = make_uint4(0, 0, 0, 0);
    int64_t values, key_scale;
    if (key < hi && LocateKey(p, request, key, &values, &key_scale)) {
      chunks[i] = *reinterpret_cast<const uint4*>(p.k_cache + values +
                                                  pos.part * kChunk);
    }
  }
  if (tid < kTileKeys) {
    const int32_t key = tile_start + tid;
    scale = 0.0f;
    int64_t values, key_scale;
    if (key < hi && LocateKey(p, request, key, &values, &key_scale)) {
      scale = *reinterpret_cast<const float*>(p.k_cache + key_scale);
    }
  }
}

// The tile's logits of the run's rows [run_begin, run_end): the partial
// sums of each row's warps (chunks_per_row of them, 32 heads each) added
// up, stored for the tile's keys that fall inside the row's window.
__device__ __forceinline__ void StoreRunLogits(
    const IndexerLogitsParams& p, int64_t row0, const RowWindow* window,
    const float (&partial)[kWarps][kTileKeys], int run_begin, int run_end,
    int32_t tile_start, int chunks_per_row, int tid) {
  for (int idx = tid; idx < (run_end - run_begin) * kTileKeys;
       idx += kThreads) {
    const int r = run_begin + idx / kTileKeys;
    const int kk = idx % kTileKeys;
    const int32_t key = tile_start + kk;
    const RowWindow w = window[r];
    if (key >= w.start && key < w.end) {
      float v = 0.0f;
      for (int c = 0; c < chunks_per_row; ++c) {
        v += partial[r * chunks_per_row + c][kk];
      }
      p.logits[(row0 + r) * p.logits_stride + key] = v;
    }
  }
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_MATRIX_TILES_H_
