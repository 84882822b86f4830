// The persistent kernel's math warpgroups (persistent_kernel.h): each takes
// its key tiles of the ring (narrow blocks, two groups: alternate tiles;
// wide blocks: a pair of groups on every kGroups / 2-th tile, each by its
// own 128 columns), multiplies them by the item's queries with wgmma m64n128k32
// (4 back to back), and runs the epilogue (persistent_epilogue.h) without any
// block-wide barrier. With two groups on wide blocks the groups take turns
// to issue their products (PingPong), so that one group's epilogue runs
// under the other's products; with four, three groups' epilogues run under
// the fourth's products. On narrow blocks of
// 32-head rows, a tile whose run is one row (decode) multiplies only that
// row's 32 columns (m64n32). Device-compiler sources only (NVIDIA).
#ifndef DSA_ATTENTION_GPU_INDEXER_PERSISTENT_MATH_H_
#define DSA_ATTENTION_GPU_INDEXER_PERSISTENT_MATH_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/sm90_pipeline.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/params.h"
#include "attention/gpu/indexer/persistent_epilogue.h"
#include "attention/gpu/indexer/persistent_producer.h"
#include "attention/gpu/indexer/persistent_work.h"

namespace dsa::attention::gpu::indexer {

// This thread's head weights of its group's 128 columns: columns 8n +
// 2 quad + e.
__device__ __forceinline__ void LoadWeights(const float* wsm,
                                            const PsLane& lane,
                                            float2 (&weight)[16]) {
#pragma unroll
  for (int n = 0; n < 16; ++n) {
    weight[n] = *reinterpret_cast<const float2*>(wsm + 8 * n + 2 * lane.quad);
  }
}

// A tile whose run is one 32-head row (decode: rows of different
// requests): an m64n32 product of that row's columns and a quarter of the
// epilogue, instead of discarding three quarters of both. False (nothing
// done) for a tile of several rows.
template <int R, bool kWide, bool kTma, typename WG>
__device__ __forceinline__ bool OneRowTile(
    const IndexerLogitsParams& p, const PsItem<R>& it, int32_t t, int s,
    const uint8_t* smem, const uint8_t* k_tile, const uint8_t* q_tile,
    const float* wsm, const PsBarriers& bars, const PsLane& lane) {
  using L = PersistentSmem<kWide>;
  using WG32 = typename WG::template OfWidth<32>;
  const PsTile tile = TileOf<R>(it, t);
  if (tile.re - tile.rb != 1) return false;
  float a[WG32::kAccPerThread];
  const int rb = tile.rb;
  WG32::template IssueAs<kTma, true>(
      a, k_tile, q_tile + rb * (32 / 8) * WG::kRowGroupBytes,
      /*accumulate=*/false);
  const float* scales =
      reinterpret_cast<const float*>(smem + L::kScaleOffset) + s * kTileKeys;
  const float sc[2] = {scales[lane.key_row], scales[lane.key_row + 8]};
  int32_t start = 0, end = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r == rb) {
      start = it.start[r];
      end = it.end[r];
    }
  }
  float2 w[4];
#pragma unroll
  for (int n = 0; n < 4; ++n) {  // shared: rb is not static
    w[n] =
        *reinterpret_cast<const float2*>(wsm + 32 * rb + 8 * n + 2 * lane.quad);
  }
  WG32::Wait(a);
  MbarArrive(bars.EmptyKeys(s));
  StoreRowLogits(p, it, rb, tile.key0, start, end, lane, a, w, sc);
  return true;
}

// The math role of warpgroup `group`: every item of this CTA's walk, in
// the producer's order.
template <int R, bool kWide, bool kTma, int kGroups, typename WG>
__device__ __forceinline__ void MathGroup(const IndexerLogitsParams& p,
                                          const PsWalk& walk,
                                          const uint8_t* smem,
                                          const PsBarriers& bars) {
  using L = PersistentSmem<kWide>;
  using Roles = PersistentRoles<kGroups>;
  constexpr int kHeads = L::kBlockCols / R;
  // Groups on each tile (each its own 128 columns), and the turns of the
  // tiles: tile g goes to the groups of turn g % kTurns.
  constexpr int kTileGroups = kWide ? Persistent::kWideGroups : 1;
  constexpr int kTurns = kGroups / kTileGroups;
  constexpr bool kPingPong = kWide && kGroups == 2;
  // Rows of a math group's 128 columns.
  constexpr int Rw = R / kTileGroups;
  static_assert(Rw >= 1, "a math group holds whole rows");
  const int tid = threadIdx.x;
  const int lane_id = tid % kDsaWarpSize;
  const int warp = tid / kDsaWarpSize;
  const int group = warp / 4;
  const int half = group % kTileGroups;  // which 128 columns of the block
  const int turn = group / kTileGroups;
  const int warp_in_group = warp % 4;
  const int key_row = 16 * warp_in_group + lane_id / 4;
  const int row_off = half * Rw;  // this group's first row
  const PsLane lane{key_row, lane_id % 4};
  const PingPong<Roles::kMathThreads> ping_pong{group};
  float acc[WG::kAccPerThread];
  int64_t g = 0;                               // key tiles of this CTA
  uint64_t j = 0;                              // items
  if constexpr (kPingPong) ping_pong.Start();  // group 0 issues first
  for (int64_t round = 0; walk.More(round); ++round) {
    const int64_t item = PsItemIndex(round);
    if (item >= walk.items) continue;
    const int64_t block = walk.Block(item);
    const int chunk = walk.Chunk(item);
    const PsItem<R> it = LoadPsItem<R, kTma>(p, block, chunk, walk.splits);
    if (it.tile_begin >= it.tile_end) continue;
    const PsMine mine = MineOf<R>(it, row_off + OutputRow<Rw>(lane.quad));
    const int qs = QueryRing::Stage(j);
    MbarWait(bars.FullQueries(qs), QueryRing::FullParity(j));
    // This thread's head weights: columns 8n + 2 quad + e.
    const float* wsm = reinterpret_cast<const float*>(smem + L::kWeightOffset) +
                       qs * L::kBlockCols + half * Persistent::kCols;
    // With two groups they stay in registers for the item; with four (fewer
    // registers a thread) they are read again at each tile, where used.
    float2 weight[16];
    if constexpr (Roles::kWeightsInRegisters) LoadWeights(wsm, lane, weight);
    const SharedWeights shared_weight{wsm, lane.quad};
    const uint8_t* q_tile = smem + L::kQOffset + qs * L::kQBytes +
                            half * Persistent::kCols * kHeadDim;

    for (int32_t t = it.tile_begin; t < it.tile_end; ++t, ++g) {
      if (kTurns > 1 && static_cast<int>(g % kTurns) != turn) continue;
      const int s = KeyRing::Stage(g);
      MbarWait(bars.FullKeys(s), KeyRing::FullParity(g));
      __syncwarp();  // wgmma is .aligned: the warp issues it converged
      const uint8_t* k_tile = smem + L::kKeyOffset + s * Persistent::kKeyBytes;
      if constexpr (!kWide && kHeads == 32) {
        if (OneRowTile<R, kWide, kTma, WG>(p, it, t, s, smem, k_tile, q_tile,
                                           wsm, bars, lane)) {
          continue;
        }
      }
      // Ping-pong: wait for this group's turn, issue, pass the turn.
      if constexpr (kPingPong) ping_pong.WaitTurn();
      WG::template IssueAs<kTma, true>(acc, k_tile, q_tile,
                                       /*accumulate=*/false);
      if constexpr (kPingPong) ping_pong.PassTurn();
      const float* scales =
          reinterpret_cast<const float*>(smem + L::kScaleOffset) +
          s * kTileKeys;
      const float sc[2] = {scales[lane.key_row], scales[lane.key_row + 8]};

      // The epilogue's sums, and whether the warp's keys all have positive
      // scales (a real cache's ue8m0 do): its short form.
      float v[2][Rw];
#pragma unroll
      for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
        for (int r = 0; r < Rw; ++r) v[rs][r] = 0.0f;
      }
      const bool positive =
          __all_sync(DSA_FULL_WARP_MASK, sc[0] > 0.0f && sc[1] > 0.0f);
      WG::Wait(acc);
      MbarArrive(bars.EmptyKeys(s));
      if constexpr (Roles::kWeightsInRegisters) {
        Epilogue(p, it, mine, lane, acc, weight, sc, positive, t, v);
      } else {
        Epilogue(p, it, mine, lane, acc, shared_weight, sc, positive, t, v);
      }
    }
    MbarArrive(bars.EmptyQueries(qs));
    ++j;
  }
  if constexpr (kPingPong) ping_pong.Finish();
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_PERSISTENT_MATH_H_
