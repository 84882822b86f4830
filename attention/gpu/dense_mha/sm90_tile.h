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
// checks), so the maximum of the scaled scores is the scaled maximum.
template <class Wg>
__device__ __forceinline__ void MaskRowMax(float (&s)[Wg::kAccPerThread],
                                           bool masked, int key0, int row_pos0,
                                           int warp_in_group, int lane,
                                           float (&mx)[kSm90RowSlots]) {
  constexpr float kNegInf = -__builtin_huge_valf();
  mx[0] = kNegInf;
  mx[1] = kNegInf;
#pragma unroll
  for (int e = 0; e < Wg::kAccPerThread; ++e) {
    float x = s[e];
    if (masked) {
      const int key = key0 + Wg::AccCol(lane, e);
      const int pos = row_pos0 + Wg::AccRow(warp_in_group, lane, e);
      if (key > pos) x = kNegInf;
    }
    s[e] = x;
    mx[(e / 2) % 2] = fmaxf(mx[(e / 2) % 2], x);
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

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_GPU_CUDA

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_SM90_TILE_H_
