// Steps both sm_90a attention bodies take on a tile in the wgmma
// accumulator layout (WarpgroupBf16Mma: a thread of warp w of its
// warpgroup holds rows 16 w + lane / 4 (row slot 0) and + 8 (slot 1),
// columns AccCol): the masked scores (scaled, or raw for the TMA body) and
// their row maxima, and the normalised output's stores. The online softmax
// between them is device/softmax.h's, over QuadRowReduce (the four lanes of a
// row). CUDA device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_SM90_TILE_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_SM90_TILE_H_

#include "attention/gpu/dense_mha/attention_args.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/softmax.h"

#if defined(DSA_GPU_CUDA)

namespace dsa::attention::gpu::dense_mha {

// Row slots of a thread in the accumulator layout.
constexpr int kSm90RowSlots = 2;
using Sm90Softmax = OnlineSoftmax<kSm90RowSlots, QuadRowReduce>;

// Scores S (a tile of keys [key0, ...)) times a.scale_log2, keys after a
// row's position set to -inf where `masked` (the tile reaches past the
// block's first row), and this thread's maximum of each row slot.
// `row_pos0`: the position of the warpgroup's first row.
template <class Wg>
__device__ __forceinline__ void ScaleMaskRowMax(const AttentionArgs& a,
                                                float (&s)[Wg::kAccPerThread],
                                                bool masked, int key0,
                                                int row_pos0, int warp_in_group,
                                                int lane,
                                                float (&mx)[kSm90RowSlots]) {
  constexpr float kNegInf = -__builtin_huge_valf();
  mx[0] = kNegInf;
  mx[1] = kNegInf;
#pragma unroll
  for (int e = 0; e < Wg::kAccPerThread; ++e) {
    float x = s[e] * a.scale_log2;
    if (masked) {
      const int key = key0 + Wg::AccCol(lane, e);
      const int pos = row_pos0 + Wg::AccRow(warp_in_group, lane, e);
      if (key > pos) x = kNegInf;
    }
    s[e] = x;
    mx[(e / 2) % 2] = fmaxf(mx[(e / 2) % 2], x);
  }
}

// As ScaleMaskRowMax, without the scale: the masked scores stay raw and
// the maxima are of raw scores, for a body that folds the softmax scale
// into its exponentials (one FFMA each). The scale is positive (plan.h
// checks), so the maximum of the scaled scores is the scaled maximum. The
// branch on `masked` (uniform across the warpgroup) is taken once per tile,
// outside the loops: inside, the compiler turns it into a compare, a
// predicate AND and a select per score on every tile, unmasked ones too.
template <class Wg>
__device__ __forceinline__ void MaskRowMax(float (&s)[Wg::kAccPerThread],
                                           bool masked, int key0, int row_pos0,
                                           int warp_in_group, int lane,
                                           float (&mx)[kSm90RowSlots]) {
  constexpr float kNegInf = -__builtin_huge_valf();
  mx[0] = kNegInf;
  mx[1] = kNegInf;
  if (masked) {
#pragma unroll
    for (int e = 0; e < Wg::kAccPerThread; ++e) {
      const int key = key0 + Wg::AccCol(lane, e);
      const int pos = row_pos0 + Wg::AccRow(warp_in_group, lane, e);
      if (key > pos) s[e] = kNegInf;
      mx[(e / 2) % 2] = fmaxf(mx[(e / 2) % 2], s[e]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < Wg::kAccPerThread; ++e) {
      mx[(e / 2) % 2] = fmaxf(mx[(e / 2) % 2], s[e]);
    }
  }
}

// The epilogue: O (in WgAcc's accumulator layout) times each row's
// 1 / sum, the block's rows stored as column pairs.
template <class WgAcc>
__device__ __forceinline__ void StoreRows(
    const AttentionArgs& a, const BlockWork& w,
    const float (&o)[WgAcc::kAccPerThread], const float (&inv)[kSm90RowSlots],
    int row_base, int warp_in_group, int lane) {
#pragma unroll
  for (int e = 0; e < WgAcc::kAccPerThread; e += 2) {
    const int r = row_base + WgAcc::AccRow(warp_in_group, lane, e);
    const int col = WgAcc::AccCol(lane, e);
    const float inv_r = inv[(e / 2) % 2];
    if (r < w.rows) {
      StoreOut(a, OutBase(a, w, r), col, o[e] * inv_r, col + 1,
               o[e + 1] * inv_r, true);
    }
  }
}

// The epilogue for a bf16 output 16 bytes aligned (a.out_chunks): each
// quad's pieces of a row (a bf16 pair a lane in each 8-column block)
// regrouped by two shuffle steps (xor 1, then xor 2) so that lane q of the
// quad holds all 8 columns of block 4k + q, and each lane stores them as
// one 16-byte chunk: a quarter of the store instructions and of the cache
// lines they touch per row, which otherwise hold both warpgroups' epilogue
// while the tensor cores wait. Every lane shuffles, stored or not.
template <class WgAcc>
__device__ __forceinline__ void StoreRowsBf16Chunks(
    const AttentionArgs& a, const BlockWork& w,
    const float (&o)[WgAcc::kAccPerThread], const float (&inv)[kSm90RowSlots],
    int row_base, int warp_in_group, int lane) {
  static_assert(WgAcc::kAccPerThread % 16 == 0, "whole groups of 4 blocks");
  const int q = lane % 4;
  const bool odd = (q & 1) != 0;
  const bool upper = (q & 2) != 0;
  // The pair of block n, row slot s: elements 4 n + 2 s and + 1.
  const auto pair = [&](int n, int s) {
    return ::dsa::gpu::PackBf16x2(o[4 * n + 2 * s] * inv[s],
                                  o[4 * n + 2 * s + 1] * inv[s]);
  };
#pragma unroll
  for (int s = 0; s < kSm90RowSlots; ++s) {
    const int r = row_base + WgAcc::AccRow(warp_in_group, lane, 2 * s);
#pragma unroll
    for (int n = 0; n < WgAcc::kAccPerThread / 4; n += 4) {
      // Step 1, within blocks (n, n + 1) and within (n + 2, n + 3): an
      // even lane takes its odd partner's pair of the first block, an odd
      // lane its even partner's of the second; so lane q holds, of block
      // n + (q & 1) and of block n + 2 + (q & 1), columns 0-3 (q < 2) or
      // 4-7.
      uint32_t x[2][2];  // [block pair][half]
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const uint32_t first = pair(n + 2 * b, s);
        const uint32_t second = pair(n + 2 * b + 1, s);
        const uint32_t got =
            DSA_SHFL_XOR(odd ? first : second, 1, kDsaWarpSize);
        x[b][0] = odd ? got : first;
        x[b][1] = odd ? second : got;
      }
      // Step 2: lanes q and q ^ 2 hold the two halves of blocks n + (q & 1)
      // and n + 2 + (q & 1); the lower lane keeps the first block's, the
      // upper the second's.
      const uint32_t send0 = upper ? x[0][0] : x[1][0];
      const uint32_t send1 = upper ? x[0][1] : x[1][1];
      const uint32_t got0 = DSA_SHFL_XOR(send0, 2, kDsaWarpSize);
      const uint32_t got1 = DSA_SHFL_XOR(send1, 2, kDsaWarpSize);
      const uint4 chunk = upper ? make_uint4(got0, got1, x[1][0], x[1][1])
                                : make_uint4(x[0][0], x[0][1], got0, got1);
      if (r < w.rows) {
        uint16_t* out = static_cast<uint16_t*>(a.out) + OutBase(a, w, r);
        *reinterpret_cast<uint4*>(out + 8 * (n + q)) = chunk;
      }
    }
  }
}

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_GPU_CUDA

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_SM90_TILE_H_
