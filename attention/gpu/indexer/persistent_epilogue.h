// The persistent kernel's epilogue (persistent_math.h runs it after each
// product): relu(score * key scale) * head weight summed over each row's
// heads, first over this thread's columns, then over the four lanes of its
// quad, and the row's logits stored inside its window. A math thread holds
// accumulator rows key_row and key_row + 8 (the two row slots rs) and, in
// each 8-column block n, columns 8n + 2 quad (+ 1); a row of the group's Rw
// rows is 16 / Rw such blocks. Device-compiler sources only (NVIDIA).
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

// Adds to v[rs][r] this thread's relu(score) * weight terms of the 16
// 8-column blocks (block n's accumulators at a[4 n ..]), positive scales
// (applied later) or the literal relu(score * scale) form. Weights: float2
// [16] in registers or SharedWeights.
template <int R, bool kPositive, int kAcc, typename Weights>
__device__ __forceinline__ void AddBlocks(const float (&a)[kAcc],
                                          const Weights& weight,
                                          const float (&sc)[2],
                                          float (&v)[2][R]) {
  constexpr int kBlocksPerRow = 16 / R;
#pragma unroll
  for (int n = 0; n < 16; ++n) {
    const int r = n / kBlocksPerRow;
    const float2 w = weight[n];
#pragma unroll
    for (int rs = 0; rs < 2; ++rs) {
      const float a0 = a[4 * n + 2 * rs];
      const float a1 = a[4 * n + 2 * rs + 1];
      if constexpr (kPositive) {
        v[rs][r] = fmaf(fmaxf(a0, 0.0f), w.x, v[rs][r]);
        v[rs][r] = fmaf(fmaxf(a1, 0.0f), w.y, v[rs][r]);
      } else {
        const float x0 = a0 * sc[rs], x1 = a1 * sc[rs];
        if (x0 > 0.0f) v[rs][r] += x0 * w.x;
        if (x1 > 0.0f) v[rs][r] += x1 * w.y;
      }
    }
  }
}

// What a math thread's lane stores: its row of the group (see OutputRow),
// its key of a tile (key_row), its quad position.
struct PsLane {
  int key_row;  // and key_row + 8
  int quad;
};

// Tile t's sums v (per row slot and row of this group), scaled, summed over
// the quad and stored inside the rows' windows: lane `quad` stores pairs
// (rs, r) with rs * Rw + r == quad (mod 4), of row mine.row.
template <int Rw, int R>
__device__ __forceinline__ void StoreTileLogits(
    const IndexerLogitsParams& p, const PsItem<R>& it, const PsMine& mine,
    const PsLane& lane, float (&v)[2][Rw], const float (&sc)[2], bool positive,
    int32_t t) {
  const int quad = lane.quad;
  if (positive) {
#pragma unroll
    for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
      for (int r = 0; r < Rw; ++r) v[rs][r] *= sc[rs];
    }
  }

  float out[2];
  int out_r[2], out_rs[2], outs;
  if constexpr (Rw == 4) {
    // Reduce-scatter: rows {0,1} / {2,3} by lane bit 1, then one row by
    // lane bit 0.
    const bool upper = quad & 2, odd = quad & 1;
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
      out_r[rs] = quad;
      out_rs[rs] = rs;
    }
    outs = 2;
  } else {
#pragma unroll
    for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
      for (int r = 0; r < Rw; ++r) {
        v[rs][r] += DSA_SHFL_XOR(v[rs][r], 1, kDsaWarpSize);
        v[rs][r] += DSA_SHFL_XOR(v[rs][r], 2, kDsaWarpSize);
      }
    }
    outs = 0;
#pragma unroll
    for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
      for (int r = 0; r < Rw; ++r) {
        if ((rs * Rw + r) % 4 == quad) {
          out[0] = v[rs][r];
          out_r[0] = r;
          out_rs[0] = rs;
          outs = 1;
        }
      }
    }
  }
  (void)out_r;                              // always mine.row (see OutputRow)
  if (t < mine.t0 || t >= mine.t1) return;  // not my row's run
  const int32_t key0 = mine.lo + (t - mine.t0) * kTileKeys + lane.key_row;
#pragma unroll
  for (int o = 0; o < 2; ++o) {
    if (o >= outs) break;
    const int32_t key = key0 + 8 * out_rs[o];
    if (key >= mine.start && key < mine.end) {
      p.logits[(it.row0 + mine.row) * p.logits_stride + key] = out[o];
    }
  }
}

// The epilogue of tile t's product (acc, this group's 128 columns): each
// row's sum over its heads of relu(score * scale) * weight, added up in v
// (zeros), stored inside the row's window. Positive scales (a real cache's
// ue8m0) take the short form relu(s * scale) = scale * relu(s), the scale
// applied once per sum; any other the literal one.
template <int Rw, int R, int kAcc, typename Weights>
__device__ __forceinline__ void Epilogue(
    const IndexerLogitsParams& p, const PsItem<R>& it, const PsMine& mine,
    const PsLane& lane, const float (&acc)[kAcc], const Weights& weight,
    const float (&sc)[2], bool positive, int32_t t, float (&v)[2][Rw]) {
  if (positive) {
    AddBlocks<Rw, true>(acc, weight, sc, v);
  } else {
    AddBlocks<Rw, false>(acc, weight, sc, v);
  }
  StoreTileLogits<Rw>(p, it, mine, lane, v, sc, positive, t);
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
