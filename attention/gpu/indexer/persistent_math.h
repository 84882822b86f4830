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
  static_assert(kTileGroups * WG::kN == L::kBlockCols,
                "the groups of a tile cover its block");
  constexpr int kTurns = kGroups / kTileGroups;
  static_assert(kTurns == 1 || kTurns == 2, "a turn's tiles by count parity");
  // Two groups on every tile take turns to issue; on alternate tiles (four
  // groups) each group's own product and epilogue alternate, which
  // staggers the groups.
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
  // The descriptors of key stage 0 and of query stage 0's columns of this
  // group: a tile's are these moved by whole stages (one add each).
  const uint64_t key_desc0 =
      WG::template DescriptorAt<kTma>(SharedAddress(smem + L::kKeyOffset));
  const uint64_t query_desc0 = WG::template DescriptorAt<true>(
      SharedAddress(smem + L::kQOffset + half * Persistent::kCols * kHeadDim));
  const float* scale_ring =
      reinterpret_cast<const float*>(smem + L::kScaleOffset);
  uint32_t g = 0;                              // key tiles of this CTA
  uint32_t j = 0;                              // items
  if constexpr (kPingPong) ping_pong.Start();  // group 0 issues first
  for (int64_t round = 0; walk.More(round); ++round) {
    const int64_t item = PsItemIndex(round);
    if (item >= walk.items) continue;
    const int64_t block = walk.Block(item);
    const int chunk = walk.Chunk(item);
    const PsItem<R> it = LoadPsItem<R, kTma>(p, block, chunk, walk.splits);
    if (it.tile_begin >= it.tile_end) continue;
    const PsStore store = StoreOf<Rw>(
        p, it, MineOf<R>(it, row_off + OutputRow<Rw>(lane.quad)), lane);
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
    const uint64_t query_desc =
        WG::DescriptorPlus(query_desc0, qs * L::kQBytes);

    // This group's tiles of the item: every kTurns-th from the first whose
    // count (gt, over the CTA) is of its turn.
    const int32_t first =
        it.tile_begin + static_cast<int32_t>((turn - g) % kTurns);
    uint32_t gt = g + static_cast<uint32_t>(first - it.tile_begin);
    for (int32_t t = first; t < it.tile_end; t += kTurns, gt += kTurns) {
      const int s = KeyRing::Stage(gt);
      MbarWait(bars.FullKeys(s), KeyRing::FullParity(gt));
      __syncwarp();  // wgmma is .aligned: the warp issues it converged
      if constexpr (!kWide && kHeads == 32) {
        const uint8_t* k_tile =
            smem + L::kKeyOffset + s * Persistent::kKeyBytes;
        if (OneRowTile<R, kWide, kTma, WG>(p, it, t, s, smem, k_tile, q_tile,
                                           wsm, bars, lane)) {
          continue;
        }
      }
      // Ping-pong: wait for this group's turn, issue, pass the turn.
      if constexpr (kPingPong) ping_pong.WaitTurn();
      WG::template IssueFromDescriptors<kTma, true>(
          acc, WG::DescriptorPlus(key_desc0, s * Persistent::kKeyBytes),
          query_desc, /*accumulate=*/false);
      if constexpr (kPingPong) ping_pong.PassTurn();
      // The tile's key scales, and whether the warp's keys all have
      // positive ones (a real cache's ue8m0 do): the epilogue's short form.
      TileScales<Rw> scales;
      scales.Load(scale_ring + s * kTileKeys, lane);
      const bool positive = scales.Positive();
      WG::Wait(acc);
      MbarArrive(bars.EmptyKeys(s));
      if constexpr (Roles::kWeightsInRegisters) {
        Epilogue<Rw>(store, lane, acc, weight, scales, positive, t);
      } else {
        Epilogue<Rw>(store, lane, acc, shared_weight, scales, positive, t);
      }
    }
    g += static_cast<uint32_t>(it.tile_end - it.tile_begin);
    MbarArrive(bars.EmptyQueries(qs));
    ++j;
  }
  if constexpr (kPingPong) ping_pong.Finish();
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_PERSISTENT_MATH_H_
