// The persistent kernel's work (persistent_kernel.h): the items a CTA walks
// (a block of R rows and a chunk of its key tiles), the tiles of an item,
// the order of the items, and -inf outside the rows' windows. The producer
// and the math warpgroups derive the same items independently, so nothing
// about an item crosses between them but the tiles in the ring.
// Device-compiler sources only (NVIDIA).
#ifndef DSA_ATTENTION_GPU_INDEXER_PERSISTENT_WORK_H_
#define DSA_ATTENTION_GPU_INDEXER_PERSISTENT_WORK_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/params.h"
#include "attention/gpu/indexer/windows.h"

namespace dsa::attention::gpu::indexer {

// out[from, to) = -inf by `threads` threads (thread `tid`), 16-byte stores
// where aligned: a causal prefill's rows are half -inf (134 MB at T = 8192),
// and the producer's store instructions share issue slots with the math
// warps.
__device__ __forceinline__ void FillNegInf(float* out, int64_t from, int64_t to,
                                           int tid, int threads) {
  if (from >= to) return;
  const int64_t misaligned =
      static_cast<int64_t>((16 - reinterpret_cast<uintptr_t>(out + from) % 16) %
                           16) /
      4;
  const int64_t head = from + misaligned < to ? from + misaligned : to;
  if (from + tid < head) out[from + tid] = kNegInf;
  const int64_t quads = (to - head) / 4;
  float4* out4 = reinterpret_cast<float4*>(out + head);
  const float4 ninf = make_float4(kNegInf, kNegInf, kNegInf, kNegInf);
  for (int64_t i = tid; i < quads; i += threads) out4[i] = ninf;
  const int64_t tail = head + 4 * quads;
  if (tail + tid < to) out[tail + tid] = kNegInf;
}

// One work item: a block of R rows (R * heads = the block's columns) and the
// chunk [tile_begin, tile_end) of its key tiles. Its rows' windows, grouped
// into runs of equal requests (each run walks the union of its rows'
// windows in 64-key tiles). A run is kept in the slot of its first row, so
// that every index is known at compile time and the item stays in
// registers.
template <int R>
struct PsItem {
  int64_t row0;
  int32_t start[R], end[R];
  int32_t request[R];
  int32_t run_lo[R], run_hi[R], run_tiles[R];  // run_tiles 0: no run here
  int32_t run_end[R];
  int32_t tile_begin, tile_end;
};

// kAligned: runs start on a multiple of 64 keys (the TMA path, whose tiles
// are whole 64-key slices of one page; the keys added in front fall outside
// every row's window and are not stored).
template <int R, bool kAligned = false>
__device__ __forceinline__ PsItem<R> LoadPsItem(const IndexerLogitsParams& p,
                                                int64_t block, int chunk,
                                                int splits) {
  PsItem<R> it;
  it.row0 = block * R;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const RowWindow w = LoadWindow(p, it.row0 + r);
    it.request[r] = w.request;
    it.start[r] = w.start;
    it.end[r] = w.end;
  }
  int32_t total = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const bool starts = r == 0 || it.request[r] != it.request[r - 1];
    int32_t e = R;
#pragma unroll
    for (int i = R - 1; i > r; --i) {
      if (it.request[i] != it.request[i - 1]) e = i;
    }
    int32_t lo = 0x7fffffff, hi = 0;
#pragma unroll
    for (int i = r; i < R; ++i) {
      if (i < e && it.start[i] < it.end[i]) {
        lo = min(lo, it.start[i]);
        hi = max(hi, it.end[i]);
      }
    }
    const bool used = starts && it.request[r] >= 0 && lo < hi;
    if (kAligned) lo &= ~(kTileKeys - 1);
    it.run_lo[r] = used ? lo : 0;
    it.run_hi[r] = used ? hi : 0;
    it.run_tiles[r] = used ? (hi - lo + kTileKeys - 1) / kTileKeys : 0;
    it.run_end[r] = e;
    total += it.run_tiles[r];
  }
  it.tile_begin = static_cast<int32_t>(int64_t{total} * chunk / splits);
  it.tile_end = static_cast<int32_t>(int64_t{total} * (chunk + 1) / splits);
  return it;
}

// Tile t of an item: its request, first key, the end of the keys its run
// reads, and the rows [rb, re) it serves.
struct PsTile {
  int32_t request;
  int32_t key0;
  int32_t hi;
  int rb, re;
};
template <int R>
__device__ __forceinline__ PsTile TileOf(const PsItem<R>& it, int32_t t) {
  PsTile tile{-1, 0, 0, 0, 0};
  int32_t before = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (it.run_tiles[r] > 0 && t >= before && t < before + it.run_tiles[r]) {
      tile = {it.request[r], it.run_lo[r] + (t - before) * kTileKeys,
              it.run_hi[r], r, it.run_end[r]};
    }
    before += it.run_tiles[r];
  }
  return tile;
}

// Item i of this CTA's sequence: a zigzag over the items sorted longest
// first (row blocks from the last), so that CTA c's rounds add up to about
// the same number of keys as every other CTA's.
__device__ __forceinline__ int64_t PsItemIndex(int64_t round) {
  const int64_t ctas = gridDim.x;
  const int64_t c = blockIdx.x;
  return round * ctas + ((round & 1) ? ctas - 1 - c : c);
}

// The items of a launch, in the order every role walks them: round r of
// this CTA is item PsItemIndex(r) (while below `items`), of row block
// Block(item) and key chunk Chunk(item).
struct PsWalk {
  int64_t blocks;  // row blocks of R rows
  int64_t items;   // blocks * splits
  int splits;
  __device__ __forceinline__ bool More(int64_t round) const {
    return round * gridDim.x < items;
  }
  __device__ __forceinline__ int64_t Block(int64_t item) const {
    return blocks - 1 - item / splits;
  }
  __device__ __forceinline__ int Chunk(int64_t item) const {
    return static_cast<int>(item % splits);
  }
};
template <int R>
__device__ __forceinline__ PsWalk WalkOf(const IndexerLogitsParams& p,
                                         int splits) {
  const int64_t blocks = (p.rows + R - 1) / R;
  return {blocks, blocks * splits, splits};
}

// The row of its math group's Rw rows whose logits a lane of quad position
// `quad` stores (after the quad's reduce-scatter, see the epilogue).
template <int Rw>
__device__ __forceinline__ int OutputRow(int quad) {
  return Rw == 4 ? quad : (Rw == 2 ? quad % 2 : 0);
}

// What a math thread needs of an item for its stores, in a few registers
// (the item's arrays would take 7 R): the tiles [t0, t1) of its row's run,
// the run's first key, and the row's window.
struct PsMine {
  int row;
  int32_t t0, t1, lo, start, end;
};
template <int R>
__device__ __forceinline__ PsMine MineOf(const PsItem<R>& it, int row) {
  PsMine m{row, 0, 0, 0, 0, 0};
  int32_t before = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (it.run_tiles[r] > 0 && r <= row && row < it.run_end[r]) {
      m.t0 = before;
      m.t1 = before + it.run_tiles[r];
      m.lo = it.run_lo[r];
    }
    if (r == row) {
      m.start = it.start[r];
      m.end = it.end[r];
    }
    before += it.run_tiles[r];
  }
  return m;
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_PERSISTENT_WORK_H_
