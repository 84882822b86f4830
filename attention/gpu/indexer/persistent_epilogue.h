// The persistent kernel's epilogue (persistent_math.h runs it after each
// product): relu(score * key scale) * head weight summed over each row's
// heads, first over this thread's columns, then over the four lanes of its
// quad (a reduce-scatter: each lane ends with the sums it stores), and the
// row's logits stored inside its window. A math thread holds accumulator
// rows key_row and key_row + 8 (the two row slots rs) and, in each 8-column
// block n, columns 8n + 2 quad (+ 1); a row of the group's Rw rows is
// 16 / Rw such blocks of 128 columns.
//
// Counted for the issue slots, which bind the kernel on long prefill (the
// tensor pipe is idle half the time): per accumulator one max or one add
// of |x| and one FMA, alternately, so that the half-rate ALU pipe (max) and
// the FMA pipe share the relu; the key scale applied once per stored sum
// (positive scales, what a real cache's ue8m0 are), after the quad's
// reduction; the stores' addresses and window tests from per-item values
// (PsStore), one add and one compare a tile. Device-compiler sources only
// (NVIDIA).
#ifndef DSA_ATTENTION_GPU_INDEXER_PERSISTENT_EPILOGUE_H_
#define DSA_ATTENTION_GPU_INDEXER_PERSISTENT_EPILOGUE_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/params.h"
#include "attention/gpu/indexer/persistent_work.h"

namespace dsa::attention::gpu::indexer {

// This thread's head weights read from shared memory where they are used
// (weight[n]: columns 8n + 2 quad + e of its group's 128), in place of an
// array of them in registers.
struct SharedWeights {
  const float* wsm;
  int quad;
  __device__ __forceinline__ float2 operator[](int n) const {
    return *reinterpret_cast<const float2*>(wsm + 8 * n + 2 * quad);
  }
};

// What a math thread's lane stores: its row of the group (see OutputRow),
// its key of a tile (key_row), its quad position.
struct PsLane {
  int key_row;  // and key_row + 8
  int quad;
};

// The sums a lane stores a tile after the quad's reduce-scatter: both row
// slots of its row when a group holds 4 rows (32 heads), else one: row
// slot quad / 2 of row quad % 2 (2 rows), row slot quad of the one row
// (lanes 0 and 1; 1 row).
template <int Rw>
inline constexpr int kLaneOutputs = Rw == 4 ? 2 : 1;
template <int Rw>
__device__ __forceinline__ int OutputSlot(int quad) {
  return Rw == 2 ? quad / 2 : quad % 2;
}

// The key scales a lane needs of a tile: with two outputs both row slots'
// (two shared loads), else its output's slot (one load; the literal form's
// other slot comes from the lane holding it, `Partner` lanes away).
template <int Rw>
struct TileScales {
  static constexpr int kLoads = kLaneOutputs<Rw>;
  static constexpr int kPartner = Rw == 2 ? 2 : 1;
  float own[kLoads];
  __device__ __forceinline__ void Load(const float* scales,
                                       const PsLane& lane) {
    if constexpr (kLoads == 2) {
      own[0] = scales[lane.key_row];
      own[1] = scales[lane.key_row + 8];
    } else {
      own[0] = scales[lane.key_row + 8 * OutputSlot<Rw>(lane.quad)];
    }
  }
  // Every key of the warp: each is some lane's own.
  __device__ __forceinline__ bool Positive() const {
    bool all = own[0] > 0.0f;
    if constexpr (kLoads == 2) all = all && own[1] > 0.0f;
    return __all_sync(DSA_FULL_WARP_MASK, all);
  }
  // Both row slots' scales (every lane of the warp calls it).
  __device__ __forceinline__ void Slots(int quad, float (&sc)[2]) const {
    if constexpr (kLoads == 2) {
      sc[0] = own[0];
      sc[1] = own[1];
    } else {
      const float other = DSA_SHFL_XOR(own[0], kPartner, kDsaWarpSize);
      const bool mine_is_1 = OutputSlot<Rw>(quad) == 1;
      sc[0] = mine_is_1 ? other : own[0];
      sc[1] = mine_is_1 ? own[0] : other;
    }
  }
};

// Adds to v[rs][r] this thread's relu(score) * weight terms of its
// 8-column blocks (16 or 32; block n's accumulators at a[4 n ..]) for positive
// scales (applied later): even blocks as max(x, 0) * w, odd ones as
// (x + |x|) * w into u, halved at the end (exact: a power of two), so that
// the max instructions (ALU pipe, half rate) and the adds (FMA pipe) each
// take half. Weights: float2 [16] in registers, or SharedWeights.
template <int R, int kAcc, typename Weights>
__device__ __forceinline__ void AddBlocksPositive(const float (&a)[kAcc],
                                                  const Weights& weight,
                                                  float (&v)[2][R]) {
  constexpr int kBlocks = kAcc / 4;
  constexpr int kBlocksPerRow = kBlocks / R;
  float u[2][R];
#pragma unroll
  for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
    for (int r = 0; r < R; ++r) u[rs][r] = 0.0f;
  }
#pragma unroll
  for (int n = 0; n < kBlocks; ++n) {
    const int r = n / kBlocksPerRow;
    const float2 w = weight[n];
#pragma unroll
    for (int rs = 0; rs < 2; ++rs) {
      const float a0 = a[4 * n + 2 * rs];
      const float a1 = a[4 * n + 2 * rs + 1];
      if (n % 2 == 0) {
        v[rs][r] = fmaf(fmaxf(a0, 0.0f), w.x, v[rs][r]);
        v[rs][r] = fmaf(fmaxf(a1, 0.0f), w.y, v[rs][r]);
      } else {
        u[rs][r] = fmaf(a0 + fabsf(a0), w.x, u[rs][r]);
        u[rs][r] = fmaf(a1 + fabsf(a1), w.y, u[rs][r]);
      }
    }
  }
#pragma unroll
  for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
    for (int r = 0; r < R; ++r) v[rs][r] = fmaf(u[rs][r], 0.5f, v[rs][r]);
  }
}

// The same terms in the literal form relu(score * scale) * weight (any
// scale's sign).
template <int R, int kAcc, typename Weights>
__device__ __forceinline__ void AddBlocksLiteral(const float (&a)[kAcc],
                                                 const Weights& weight,
                                                 const float (&sc)[2],
                                                 float (&v)[2][R]) {
  constexpr int kBlocks = kAcc / 4;
  constexpr int kBlocksPerRow = kBlocks / R;
#pragma unroll
  for (int n = 0; n < kBlocks; ++n) {
    const int r = n / kBlocksPerRow;
    const float2 w = weight[n];
#pragma unroll
    for (int rs = 0; rs < 2; ++rs) {
      const float x0 = a[4 * n + 2 * rs] * sc[rs];
      const float x1 = a[4 * n + 2 * rs + 1] * sc[rs];
      if (x0 > 0.0f) v[rs][r] += x0 * w.x;
      if (x1 > 0.0f) v[rs][r] += x1 * w.y;
    }
  }
}

// The quad's sums of v, reduce-scattered: out[o] is the sum over the quad's
// four lanes of the (row slot, row) pair this lane stores (kLaneOutputs,
// OutputSlot, OutputRow): with 4 or 2 rows three or two rounds of halving
// (each lane sends the half it does not keep), with 1 row a full sum of
// both slots, then the slot of quad % 2.
template <int Rw>
__device__ __forceinline__ void ReduceQuad(const float (&v)[2][Rw], int quad,
                                           float (&out)[kLaneOutputs<Rw>]) {
  const bool upper = quad & 2, odd = quad & 1;
  if constexpr (Rw == 4) {
    // Rows {0,1} / {2,3} by lane bit 1, then one row by lane bit 0.
#pragma unroll
    for (int rs = 0; rs < 2; ++rs) {
      float keep[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float send = upper ? v[rs][i] : v[rs][i + 2];
        keep[i] = (upper ? v[rs][i + 2] : v[rs][i]) +
                  DSA_SHFL_XOR(send, 2, kDsaWarpSize);
      }
      const float send = odd ? keep[0] : keep[1];
      out[rs] = (odd ? keep[1] : keep[0]) + DSA_SHFL_XOR(send, 1, kDsaWarpSize);
    }
  } else if constexpr (Rw == 2) {
    // Pairs (rs, r) numbered 2 rs + r: slot 1 / slot 0 by lane bit 1, then
    // row r by lane bit 0; lane quad keeps pair quad.
    float keep[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float send = upper ? v[0][r] : v[1][r];
      keep[r] =
          (upper ? v[1][r] : v[0][r]) + DSA_SHFL_XOR(send, 2, kDsaWarpSize);
    }
    const float send = odd ? keep[0] : keep[1];
    out[0] = (odd ? keep[1] : keep[0]) + DSA_SHFL_XOR(send, 1, kDsaWarpSize);
  } else {
    static_assert(Rw == 1, "a group holds 1, 2 or 4 rows");
    float keep[2];
#pragma unroll
    for (int rs = 0; rs < 2; ++rs) {
      keep[rs] = v[rs][0] + DSA_SHFL_XOR(v[rs][0], 2, kDsaWarpSize);
    }
    const float send = odd ? keep[0] : keep[1];
    out[0] = (odd ? keep[1] : keep[0]) + DSA_SHFL_XOR(send, 1, kDsaWarpSize);
  }
}

// Where a math thread stores an item's logits, set once per item: its
// row's output row, the key of its first output in tile t = 0 (the key of
// tile t is key0 + 64 t, of output o 8 o further), and the row's window.
// The window test alone suffices: a tile outside the row's run puts every
// key before the run's first or past its last (the run's union of windows
// holds the row's), so no tile range is tested.
struct PsStore {
  float* row;
  int32_t key0;
  int32_t start;
  uint32_t width;  // end - start; 0: this lane stores nothing
};
template <int Rw, int R>
__device__ __forceinline__ PsStore StoreOf(const IndexerLogitsParams& p,
                                           const PsItem<R>& it,
                                           const PsMine& mine,
                                           const PsLane& lane) {
  PsStore s;
  s.row = p.logits + (it.row0 + mine.row) * p.logits_stride;
  s.key0 = mine.lo - mine.t0 * kTileKeys + lane.key_row +
           (kLaneOutputs<Rw> == 1 ? 8 * OutputSlot<Rw>(lane.quad) : 0);
  s.start = mine.start;
  const bool stores = Rw != 1 || lane.quad < 2;
  s.width = stores && mine.end > mine.start
                ? static_cast<uint32_t>(mine.end - mine.start)
                : 0u;
  return s;
}

// The epilogue of tile t's product (acc, this group's 128 columns): each
// row's sum over its heads of relu(score * scale) * weight, stored inside
// the row's window. Positive scales take the short form relu(s * scale) =
// scale * relu(s), the scale applied once per stored sum; any other the
// literal one.
template <int Rw, int kAcc, typename Weights>
__device__ __forceinline__ void Epilogue(const PsStore& store,
                                         const PsLane& lane,
                                         const float (&acc)[kAcc],
                                         const Weights& weight,
                                         const TileScales<Rw>& scales,
                                         bool positive, int32_t t) {
  float v[2][Rw];
#pragma unroll
  for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
    for (int r = 0; r < Rw; ++r) v[rs][r] = 0.0f;
  }
  if (positive) {
    AddBlocksPositive<Rw>(acc, weight, v);
  } else {
    float sc[2];
    scales.Slots(lane.quad, sc);
    AddBlocksLiteral<Rw>(acc, weight, sc, v);
  }
  float out[kLaneOutputs<Rw>];
  ReduceQuad<Rw>(v, lane.quad, out);
  const int32_t key = store.key0 + t * kTileKeys;
#pragma unroll
  for (int o = 0; o < kLaneOutputs<Rw>; ++o) {
    const int32_t k = key + 8 * o;
    if (static_cast<uint32_t>(k - store.start) < store.width) {
      store.row[k] = positive ? out[o] * scales.own[o] : out[o];
    }
  }
}

// The epilogue of a product of one 32-head row's 32 columns (m64n32: 16
// accumulators, 4 blocks) of row rb of the item: the literal relu(score *
// scale) form, summed over the quad; lane quad 0 stores the key of row slot
// 0, quad 1 slot 1.
template <int R>
__device__ __forceinline__ void StoreRowLogits(
    const IndexerLogitsParams& p, const PsItem<R>& it, int rb, int32_t key0,
    int32_t start, int32_t end, const PsLane& lane, const float (&a)[16],
    const float2 (&w)[4], const float (&sc)[2]) {
  float v[2] = {0.0f, 0.0f};
#pragma unroll
  for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const float x0 = a[4 * n + 2 * rs] * sc[rs];
      const float x1 = a[4 * n + 2 * rs + 1] * sc[rs];
      if (x0 > 0.0f) v[rs] += x0 * w[n].x;
      if (x1 > 0.0f) v[rs] += x1 * w[n].y;
    }
    v[rs] += DSA_SHFL_XOR(v[rs], 1, kDsaWarpSize);
    v[rs] += DSA_SHFL_XOR(v[rs], 2, kDsaWarpSize);
  }
  if (lane.quad < 2) {
    const int32_t key = key0 + lane.key_row + 8 * lane.quad;
    if (key >= start && key < end) {
      p.logits[(it.row0 + rb) * p.logits_stride + key] =
          lane.quad == 0 ? v[0] : v[1];
    }
  }
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_PERSISTENT_EPILOGUE_H_
