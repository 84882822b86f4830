// The persistent kernel's producer warps (persistent_kernel.h): for each
// item they write -inf outside the rows' windows, stage the item's queries
// and head weights (cp.async, a two-deep ring) and stream its key tiles
// into the ring of Persistent::kStages stages: by TMA when the cache's block
// size is a multiple of 64 (warp 0 alone, two bulk tensor copies a tile:
// values with 128-byte swizzle, scales; its lanes look up 32 tiles' pages
// at once, so that no copy waits on its own table load), else by cp.async
// (16 keys a warp at a time, one page lookup a key). Device-compiler
// sources only (NVIDIA).
#ifndef DSA_ATTENTION_GPU_INDEXER_PERSISTENT_PRODUCER_H_
#define DSA_ATTENTION_GPU_INDEXER_PERSISTENT_PRODUCER_H_

#include <cstdint>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/sm90_pipeline.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/params.h"
#include "attention/gpu/indexer/persistent_work.h"
#include "attention/gpu/indexer/windows.h"

namespace dsa::attention::gpu::indexer {

// The mbarriers of the persistent kernel's rings, 8 bytes each from `base`:
// full / empty per key stage, then full / empty per query stage.
struct PsBarriers {
  uint32_t base;
  __device__ __forceinline__ uint32_t FullKeys(int s) const {
    return base + 8 * s;
  }
  __device__ __forceinline__ uint32_t EmptyKeys(int s) const {
    return base + 8 * (Persistent::kStages + s);
  }
  __device__ __forceinline__ uint32_t FullQueries(int s) const {
    return base + 8 * (2 * Persistent::kStages + s);
  }
  __device__ __forceinline__ uint32_t EmptyQueries(int s) const {
    return base + 8 * (2 * Persistent::kStages + Persistent::kQueryStages + s);
  }
};
// Key tile g of a CTA (counted over its items) and query stage j, counted
// in 32 bits: the stages and parities repeat every 32 (a divisor of 2^32),
// so the counts may wrap.
using KeyRing = RingStage<Persistent::kStages, uint32_t>;
using QueryRing = RingStage<Persistent::kQueryStages, uint32_t>;

// A producer thread's cp.async commit groups in flight, oldest first, each
// to complete a stage's barrier: a group's barrier is signalled (after its
// writes are complete and fenced for wgmma's async proxy) once kLag newer
// groups are in flight, or before the thread would block. A view of the
// producer's own ring and fill count (with the array a member instead,
// nvcc kept three copies of the ring: 12 more registers a thread).
template <typename WG>
struct CopyGroupsInFlight {
  static constexpr int kLag = Persistent::kLag;
  uint32_t (&ring)[kLag];
  int& pending;
  // Commits the copies issued since the last call as the group of `bar`.
  __device__ __forceinline__ void Push(uint32_t bar) {
    CopyAsyncCommit();
    if (pending == kLag) {
      CopyAsyncWait<kLag>();
      WG::FenceStores();
      MbarArrive(ring[0]);
#pragma unroll
      for (int i = 0; i + 1 < kLag; ++i) ring[i] = ring[i + 1];
      ring[kLag - 1] = bar;
    } else {
#pragma unroll
      for (int i = 0; i < kLag; ++i) {
        if (i == pending) ring[i] = bar;
      }
      ++pending;
    }
  }
  // Signals every group in flight once its copies have landed.
  __device__ __forceinline__ void Flush() {
    if (pending == 0) return;
    CopyAsyncWait<0>();
    WG::FenceStores();
#pragma unroll
    for (int i = 0; i < kLag; ++i) {
      if (i < pending) MbarArrive(ring[i]);
    }
    pending = 0;
  }
  // Waits for a stage's empty phase; flushes first if it would block (the
  // consumers may be waiting for the groups in flight).
  __device__ __forceinline__ void Acquire(uint32_t bar, uint32_t parity) {
    if (!MbarTryWait(bar, parity)) {
      Flush();
      MbarWait(bar, parity);
    }
  }
};

// The producer threads that copy an item's queries and write its -inf
// (each arrives on the queries' full barrier): with TMA keys all but warp 0
// (which streams the keys), with cp.async keys all.
template <bool kTma, int kGroups>
__host__ __device__ constexpr int QueryCopiers() {
  return PersistentRoles<kGroups>::kProducerThreads - (kTma ? 32 : 0);
}
template <int kGroups>
inline constexpr int kProducerWarps =
    PersistentRoles<kGroups>::kProducerThreads / 32;

// The item's queries (zeros past the last row), 128-byte swizzled (8
// threads copy one column's 128 bytes, chunk c at c ^ (column % 8)), and
// its head weights, into query stage qs, by kCopiers threads (this one
// ctid).
template <int R, bool kWide, int kCopiers>
__device__ __forceinline__ void StageQueries(const IndexerLogitsParams& p,
                                             const PsItem<R>& it, uint32_t base,
                                             int qs, int ctid) {
  using L = PersistentSmem<kWide>;
  constexpr int kHeads = L::kBlockCols / R;
  const uint8_t* q_block = p.q_fp8 + it.row0 * kHeads * kHeadDim;
  const int64_t q_valid =
      (p.rows - it.row0) * static_cast<int64_t>(kHeads) * kHeadDim;
  const uint32_t q_dst = base + L::kQOffset + qs * L::kQBytes;
#pragma unroll 4
  for (int c = ctid; c < L::kBlockCols * kChunksPerKey; c += kCopiers) {
    const int row = c / kChunksPerKey;
    const int part = c % kChunksPerKey;
    const int64_t byte = int64_t{row} * kHeadDim + part * kChunk;
    const bool valid = byte < q_valid;
    const uint32_t off = row * kHeadDim + ((part ^ (row & 7)) * kChunk);
    CopyAsync16(q_dst + off, valid ? q_block + byte : p.q_fp8, valid);
  }
  const uint32_t w_dst = base + L::kWeightOffset + qs * L::kBlockCols * 4;
#pragma unroll
  for (int col = ctid; col < L::kBlockCols; col += kCopiers) {
    const int64_t row = it.row0 + col / kHeads;
    const bool valid = row < p.rows;
    CopyAsync4(
        w_dst + col * 4,
        valid ? p.head_weights + row * kHeads + col % kHeads : p.head_weights,
        valid);
  }
}

// Key tiles by TMA, producer warp 0: keys [key0, key0 + 64) are rows
// `within`.. of one page (block_size a multiple of 64, runs aligned to 64).
// Lane l looks up the page of tile t0 + l, then lane 0 issues the warp's
// tiles in order: decode's few tiles a CTA each wait on one table load
// otherwise. A block past the table or an invalid page reads as zeros
// (coordinate -1 lies outside the tensor).
template <int R, bool kWide>
__device__ __forceinline__ void ProduceKeyTilesTma(
    const IndexerLogitsParams& p, const PsItem<R>& it, uint32_t base,
    const PsBarriers& bars, const CUtensorMap& key_map,
    const CUtensorMap& scale_map, int lane, uint32_t& g) {
  using L = PersistentSmem<kWide>;
  for (int32_t t0 = it.tile_begin; t0 < it.tile_end; t0 += kDsaWarpSize) {
    int32_t page = -1, within = 0;
    if (t0 + lane < it.tile_end) {
      const PsTile tile = TileOf<R>(it, t0 + lane);
      const int32_t bs = p.block_size;
      const int32_t blk = tile.key0 / bs;
      within = tile.key0 - blk * bs;
      if (tile.request >= 0 && blk < p.max_blocks_per_request) {
        page = p.block_table[tile.request * p.block_table_stride + blk];
        if (page < 0 || page >= p.num_blocks) page = -1;
      }
    }
    const int n = min(kDsaWarpSize, it.tile_end - t0);
    for (int i = 0; i < n; ++i, ++g) {
      const int32_t tile_page = __shfl_sync(DSA_FULL_WARP_MASK, page, i);
      const int32_t tile_within = __shfl_sync(DSA_FULL_WARP_MASK, within, i);
      if (lane == 0) {
        const int s = KeyRing::Stage(g);
        MbarWait(bars.EmptyKeys(s), KeyRing::EmptyParity(g));
        MbarExpectTx(bars.FullKeys(s), Persistent::kKeyBytes + kTileKeys * 4);
        TmaLoad3d(base + L::kKeyOffset + s * Persistent::kKeyBytes, &key_map, 0,
                  tile_within, tile_page, bars.FullKeys(s));
        TmaLoad2d(base + L::kScaleOffset + s * kTileKeys * 4, &scale_map,
                  tile_within, tile_page, bars.FullKeys(s));
      }
      __syncwarp();
    }
  }
}

// Key tiles by cp.async, every producer thread: warp w copies the quarters
// [16 q, 16 q + 16) of each tile with q = w mod kWarps. Lane l < 16 locates
// key 16 q + l; a key past the run's union of windows, or on an invalid
// page, reads as zeros.
// Copy i moves, for lanes 8a + b, chunk 4(i % 2) + a of the warp's key
// 8(i / 2) + b: 8 lanes fill one 128-byte core matrix, and each key's 64
// bytes are whole 32-byte sectors of one instruction.
template <int R, bool kWide, int kWarps, typename WG>
__device__ __forceinline__ void ProduceKeyTilesCpAsync(
    const IndexerLogitsParams& p, const PsItem<R>& it, uint32_t base,
    const PsBarriers& bars, int pwarp, int lane, CopyGroupsInFlight<WG>& copies,
    uint32_t& g) {
  using L = PersistentSmem<kWide>;
  for (int32_t t = it.tile_begin; t < it.tile_end; ++t, ++g) {
    const int s = KeyRing::Stage(g);
    copies.Acquire(bars.EmptyKeys(s), KeyRing::EmptyParity(g));
    const PsTile tile = TileOf<R>(it, t);
    const uint32_t k_dst = base + L::kKeyOffset + s * Persistent::kKeyBytes;
#pragma unroll
    for (int quarter = pwarp; quarter < 4; quarter += kWarps) {
      const int32_t my_key = tile.key0 + 16 * quarter + lane;
      int64_t scale = 0, values = 0;
      const bool ok = lane < 16 && my_key < tile.hi &&
                      LocateKey(p, tile.request, my_key, &values, &scale);
      if (!ok) values = scale = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = 8 * (i / 2) + lane % 8;
        const int part = 4 * (i % 2) + lane / 8;
        const int64_t v = __shfl_sync(DSA_FULL_WARP_MASK, values, key);
        const int valid = __shfl_sync(DSA_FULL_WARP_MASK, int{ok}, key);
        CopyAsync16(k_dst + WG::Offset(16 * quarter + key, part * kChunk),
                    p.k_cache + v + part * kChunk, valid != 0);
      }
      if (lane < 16) {
        CopyAsync4(base + L::kScaleOffset + s * kTileKeys * 4 +
                       (16 * quarter + lane) * 4,
                   p.k_cache + scale, ok);
      }
    }
    copies.Push(bars.FullKeys(s));
  }
}

// -inf outside the rows' windows of a row block's first chunk, by kCopiers
// threads (this one ctid).
template <int R, int kCopiers>
__device__ __forceinline__ void FillOutsideWindows(const IndexerLogitsParams& p,
                                                   const PsItem<R>& it,
                                                   int ctid) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (it.row0 + r >= p.rows) continue;
    float* out = p.logits + (it.row0 + r) * p.logits_stride;
    FillNegInf(out, 0, it.start[r], ctid, kCopiers);
    FillNegInf(out, it.end[r], p.width, ctid, kCopiers);
  }
}

// With TMA keys, the producer warps but 0: each item's -inf and queries,
// every copy group signalled as soon as it lands (no key copies follow).
template <int R, bool kWide, int kCopiers, typename WG>
__device__ __forceinline__ void QueryCopier(const IndexerLogitsParams& p,
                                            const PsWalk& walk, uint32_t base,
                                            const PsBarriers& bars, int ctid) {
  uint32_t j = 0;  // items
  for (int64_t round = 0; walk.More(round); ++round) {
    const int64_t item = PsItemIndex(round);
    if (item >= walk.items) continue;
    const int chunk = walk.Chunk(item);
    const PsItem<R> it =
        LoadPsItem<R, true>(p, walk.Block(item), chunk, walk.splits);
    if (chunk == 0) FillOutsideWindows<R, kCopiers>(p, it, ctid);
    if (it.tile_begin >= it.tile_end) continue;  // consumers skip it too
    const int qs = QueryRing::Stage(j);
    MbarWait(bars.EmptyQueries(qs), QueryRing::EmptyParity(j));
    StageQueries<R, kWide, kCopiers>(p, it, base, qs, ctid);
    CopyAsyncCommit();
    CopyAsyncWait<0>();
    WG::FenceStores();
    MbarArrive(bars.FullQueries(qs));
    ++j;
  }
}

// The producer role: every item of this CTA's walk, in order. With TMA
// keys, warp 0 streams the key tiles and the other warps write -inf and
// stage the queries, each at its own pace (the rings order them); with
// cp.async keys every warp does all three.
template <int R, bool kWide, bool kTma, int kGroups, typename WG>
__device__ __forceinline__ void Producer(const IndexerLogitsParams& p,
                                         const PsWalk& walk, uint32_t base,
                                         const PsBarriers& bars,
                                         const CUtensorMap& key_map,
                                         const CUtensorMap& scale_map, int ptid,
                                         int lane) {
  const int pwarp = ptid / kDsaWarpSize;
  if (kTma && pwarp == 0) {
    if (lane == 0) {
      TmaPrefetchMap(&key_map);
      TmaPrefetchMap(&scale_map);
    }
    uint32_t g = 0;  // key tiles issued by this CTA
    for (int64_t round = 0; walk.More(round); ++round) {
      const int64_t item = PsItemIndex(round);
      if (item >= walk.items) continue;
      const PsItem<R> it = LoadPsItem<R, true>(p, walk.Block(item),
                                               walk.Chunk(item), walk.splits);
      ProduceKeyTilesTma<R, kWide>(p, it, base, bars, key_map, scale_map, lane,
                                   g);
    }
    return;
  }
  constexpr int kCopiers = QueryCopiers<kTma, kGroups>();
  const int ctid = kTma ? ptid - kDsaWarpSize : ptid;
  if constexpr (kTma) {  // warps 1.. (warp 0 took the keys above)
    QueryCopier<R, kWide, kCopiers, WG>(p, walk, base, bars, ctid);
    return;
  }
  uint32_t ring[Persistent::kLag];
  int pending = 0;
#pragma unroll
  for (int i = 0; i < Persistent::kLag; ++i) ring[i] = 0;
  CopyGroupsInFlight<WG> copies{ring, pending};
  uint32_t g = 0;  // key tiles issued by this CTA
  uint32_t j = 0;  // items
  for (int64_t round = 0; walk.More(round); ++round) {
    const int64_t item = PsItemIndex(round);
    if (item >= walk.items) continue;
    const int64_t block = walk.Block(item);
    const int chunk = walk.Chunk(item);
    const PsItem<R> it = LoadPsItem<R, kTma>(p, block, chunk, walk.splits);
    if (chunk == 0) FillOutsideWindows<R, kCopiers>(p, it, ctid);
    if (it.tile_begin >= it.tile_end) continue;  // consumers skip it too

    const int qs = QueryRing::Stage(j);
    copies.Acquire(bars.EmptyQueries(qs), QueryRing::EmptyParity(j));
    StageQueries<R, kWide, kCopiers>(p, it, base, qs, ctid);
    copies.Push(bars.FullQueries(qs));
    ProduceKeyTilesCpAsync<R, kWide, kProducerWarps<kGroups>>(
        p, it, base, bars, pwarp, lane, copies, g);
    ++j;
  }
  copies.Flush();
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_PERSISTENT_PRODUCER_H_
