// The block, group and register-path constants of the memory-bound ops'
// kernels (cache/launch.h), in plain C++: the kernels are built with them
// and the heuristics (host code) choose by them, so the choice of a body and
// the body agree.
//
// Layout: a group (kLanes lanes, one row) and a block (kThreads); the
// staged path's shared memory (a row of floats a group); the register paths
// at head_dim 128, the K write's (4 dims a lane: the canonical LayerNorm
// lanes) and Q's (8 lanes a row, 4 rows a group at once, 2 passes), with the
// rope dims each takes. How they measured: testing/bench/RESULTS.md ("GPU
// memory-bound ops on the H200").
#ifndef DSA_ATTENTION_GPU_CACHE_CONFIG_H_
#define DSA_ATTENTION_GPU_CACHE_CONFIG_H_

#include <cstdint>

#include "attention/dtypes/layer_norm.h"

namespace dsa::attention::gpu::cache {

// Lanes of a group, which owns one row: the canonical LayerNorm order is
// defined for 32 lanes (attention/dtypes/layer_norm.h); on 64-wide AMD
// wavefronts two groups share one, and every shuffle stays within its
// 32-lane half.
inline constexpr int kLanes = kLayerNormLanes;
inline constexpr int kThreads = 256;  // a block of every kernel
inline constexpr int kMaxGroups = kThreads / kLanes;
static_assert(kLanes == 32 && kThreads % kLanes == 0, "whole groups a block");

// The staged path: each group stages its row (head_dim floats; for the MLA
// write kv_lora_rank + rope_dim) in dynamic shared memory, with as many
// groups a block as this budget holds (1 to kMaxGroups); no row is longer.
inline constexpr int kMaxStagedFloats = 12 * 1024;
static_assert(kMaxStagedFloats * sizeof(float) <= 48 * 1024,
              "the default dynamic shared memory: no opt-in");
static_assert(kMaxStagedFloats >= kMaxGroups * 576,
              "a full block of MLA rows (512 + 64)");

// Groups a block for staged rows of `floats` floats each.
constexpr int StagedGroups(int64_t floats) {
  const int64_t g = kMaxStagedFloats / (floats > 0 ? floats : 1);
  return static_cast<int>(g < 1 ? 1 : (g > kMaxGroups ? kMaxGroups : g));
}

// The register paths' head_dim (every preset's indexer).
inline constexpr int kRegisterDim = 128;

// The K write's register path: lane l of a group holds dims 4l..4l+3 of its
// token's row, which is also the canonical LayerNorm lane assignment, so the
// statistics need no shared memory; NeoX rope partners (dim i < rope/2 and
// i + rope/2) are rope/8 lanes apart, exchanged by one xor shuffle;
// interleaved partners share a lane. No block barriers: a group works alone.
struct KWriteRegister {
  static constexpr int kDimsPerLane = kLayerNormChunk;       // 4
  static constexpr int kTokensPerBlock = kThreads / kLanes;  // 8
  static_assert(kDimsPerLane * kLanes == kRegisterDim,
                "one round of the canonical LayerNorm order");
  // rope_dim / 8 (the NeoX partner's lane distance) a power of two.
  static constexpr bool TakesRope(int rope_dim) {
    if (rope_dim < 8 || rope_dim > kRegisterDim || rope_dim % 8 != 0) {
      return false;
    }
    const int d = rope_dim / 8;
    return (d & (d - 1)) == 0;
  }
};

// Q's register path: 8 lanes a row, 16 dims a lane, so a group works on 4
// rows at once and the per-row work (index math, the scale, the head weight)
// is spread over lanes instead of repeated by all 32; two passes keep 8 rows
// of a group in flight. Row indices are 32-bit.
struct QRegister {
  static constexpr int kLanesPerRow = 8;
  static constexpr int kDimsPerLane = kRegisterDim / kLanesPerRow;  // 16
  static constexpr int kRowsAtOnce = kLanes / kLanesPerRow;         // 4
  static constexpr int kPasses = 2;
  static constexpr int64_t kRowsPerBlock =
      kThreads / kLanes * kRowsAtOnce * kPasses;  // 64
  static constexpr int64_t kMaxRows = 0x7fffffff;
  static_assert(kDimsPerLane == 16, "a lane's codes are one 16-byte store");
  static_assert((kLanesPerRow & (kLanesPerRow - 1)) == 0,
                "the amax's xor butterfly stays within a row's lanes");
  // NeoX partners rope/2 dims apart must be whole lanes apart, a power of
  // two of them within the row's 8 lanes (one xor shuffle).
  static constexpr bool TakesRope(int rope_dim) {
    return rope_dim == 32 || rope_dim == 64 || rope_dim == 128;
  }
};

}  // namespace dsa::attention::gpu::cache

#endif  // DSA_ATTENTION_GPU_CACHE_CONFIG_H_
