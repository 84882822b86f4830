// The indexer logits kernels' tile constants and shared-memory layouts, with
// the legal space stated as static_asserts. Plain C++: the heuristics (host
// code, heuristics.cc) choose by the same numbers the kernels are built with.
//
//   - every matrix body: 64-key tiles of 128-byte keys (head_dim 128);
//   - the matrix kernel (warp_body.h, warpgroup_body.h): 8 warps, 256
//     (row, head) columns a block, two key tiles in flight;
//   - the persistent sm_90a kernel (persistent_*.h): producer warps, two or
//     four math warpgroups of 128 columns each, a ring of 16 key stages.
#ifndef DSA_ATTENTION_GPU_INDEXER_CONFIG_H_
#define DSA_ATTENTION_GPU_INDEXER_CONFIG_H_

#include <cstdint>

namespace dsa::attention::gpu::indexer {

// kValue, made to depend on a template parameter: a type named with it
// (WarpgroupFp8Mma<kDependent<kHeadDim, F>>) is instantiated only with its
// template, so targets without wgmma never instantiate it in a branch that
// `if constexpr` discards.
template <int kValue, auto kParameter>
inline constexpr int kDependent = kValue;

// --- Every matrix body.
inline constexpr int kHeadDim = 128;  // the matrix bodies' only head_dim
inline constexpr int kTileKeys = 64;  // keys a tile, shared by every warp
inline constexpr int kChunk = 16;     // bytes a thread moves at a time
inline constexpr int kChunksPerKey = kHeadDim / kChunk;  // 8

// --- The matrix kernel: each warp owns 32 (row, head) columns, so a block
// owns 8 rows of 32 heads, 4 of 64, 2 of 128 or 1 of 256.
inline constexpr int kWarpHeads = 32;
inline constexpr int kWarps = 8;
inline constexpr int kBlockCols = kWarps * kWarpHeads;         // 256
inline constexpr int kTileChunks = kTileKeys * kChunksPerKey;  // 512
static_assert(kBlockCols % kWarpHeads == 0 && kWarps % 4 == 0,
              "whole warps, whole warpgroups");

// Heads whose rows tile a block of the matrix kernel.
constexpr bool MatrixTakesHeads(int heads) {
  return heads >= kWarpHeads && heads <= kBlockCols && kBlockCols % heads == 0;
}

// A row's request and key window, clamped so that nothing outside the
// buffers is ever touched: an invalid request gives an empty window.
struct RowWindow {
  int32_t request;
  int32_t start;
  int32_t end;
};

// Shared memory of the warp-level body (Elem: the warp product's staged
// element type).
template <typename Elem>
struct MatrixWarpShared {
  // Row stride of a staged operand: 16 bytes of padding keep the fragment
  // loads of consecutive rows in different banks.
  static constexpr int kLd = kHeadDim + 16 / static_cast<int>(sizeof(Elem));
  // Two key tiles; before the walk, the same space stages 128 query columns
  // at a time.
  alignas(16) Elem keys[2][kTileKeys * kLd];
  float scale[2][kTileKeys];
  float partial[2][kWarps][kTileKeys];
  RowWindow window[kWarps];
};
// The warpgroup body's shared memory is six arrays (warpgroup_body.h): the
// block's queries (kBlockCols x 128 bytes), one key tile, its scales, the
// block's head weights, partial sums and windows: 47 KB, so that two blocks
// fit on a multiprocessor.

// --- The persistent sm_90a kernel.
struct Persistent {
  // Math groups sharing each tile of a wide block (each its own 128
  // columns); a narrow block's tile goes to one group.
  static constexpr int kWideGroups = 2;
  // Key tiles in the ring, and the cp.async commit groups a producer thread
  // keeps in flight before it waits for the oldest and signals its stage
  // (the depth in flight hides the L2 latency).
  static constexpr int kStages = 16;
  static constexpr int kLag = 8;
  static constexpr int kQueryStages = 2;  // queries and weights of an item
  static constexpr int kCols = 128;       // (row, head) columns a math group
  static constexpr int kKeyBytes = kTileKeys * kHeadDim;  // 8 KB a stage
  // full / empty per key stage, then full / empty per query stage.
  static constexpr int kBarriers = 2 * kStages + 2 * kQueryStages;
  // Decode (few row blocks): a block's keys are split into chunks so that
  // every multiprocessor gets one, each chunk at least this many keys.
  static constexpr int kSplitKeys = 512;
  // Wide launches of at least this many 256-column tiles a multiprocessor
  // (counted over full rows: causal ones hold about half) take four math
  // groups, fewer two (as measured on the H200: RESULTS.md).
  static constexpr int64_t kFourGroupTiles = 64;

  static_assert(kLag >= 1 && kLag < kStages, "lag below the ring depth");
  static_assert(kCols % kWarpHeads == 0 && kSplitKeys % kTileKeys == 0,
                "whole rows of 32 heads, whole tiles a chunk");
};

// The persistent kernel's warps by role, for kGroups math warpgroups and a
// producer warpgroup (with TMA keys its warp 0 streams the key tiles and
// the others write -inf and stage the queries; with cp.async keys every
// producer warp does all three):
//   - 2 groups (ping-pong on wide blocks): 384 threads, 168 registers each,
//     which the math groups' 64 accumulators and 16 weight pairs need;
//   - 4 groups on wide blocks, each pair on its own tiles: while one
//     group's product runs, three others can run their epilogues. 640
//     threads, five warps a scheduler: 96 registers each at launch, then
//     the producer gives kProducerRegisters back and the math groups take
//     kMathRegisters (setmaxnreg); the head weights are read from shared
//     memory at each tile.
template <int kGroups>
struct PersistentRoles {
  static constexpr int kMathThreads = kGroups * 128;
  static constexpr int kProducerThreads = 128;
  static constexpr int kThreads = kMathThreads + kProducerThreads;
  // A scheduler's share of the register file (16384) over its warps.
  static constexpr int kLaunchRegisters = 16384 / 32 / (kThreads / 128) / 8 * 8;
  static constexpr bool kReallocate = kGroups == 4;
  static constexpr int kProducerRegisters = 64;
  static constexpr int kMathRegisters =
      (kLaunchRegisters + (kLaunchRegisters - kProducerRegisters) / kGroups) /
      8 * 8;
  static constexpr bool kWeightsInRegisters = kGroups == 2;
  static_assert(kGroups == 2 || kGroups == 4, "2 or 4 math groups");
  static_assert(kLaunchRegisters == (kGroups == 2 ? 168 : 96),
                "the register split");
};

// Heads the persistent kernel takes (a row within one math group's columns).
constexpr bool PersistentTakesHeads(int heads) {
  return MatrixTakesHeads(heads) && heads <= Persistent::kCols;
}

// The persistent kernel's dynamic shared memory, in bytes from its (1 KB
// aligned) start: two query stages, the key ring, its scales, two weight
// stages, the barriers. Wide blocks: kWideGroups x 128 columns, a pair of
// math groups on each key tile; narrow blocks: 128 columns.
template <bool kWide>
struct PersistentSmem {
  static constexpr int kBlockCols =
      kWide ? Persistent::kWideGroups * Persistent::kCols : Persistent::kCols;
  static constexpr int kQBytes = kBlockCols * kHeadDim;  // a query stage
  static constexpr int kQOffset = 0;
  static constexpr int kKeyOffset =
      kQOffset + Persistent::kQueryStages * kQBytes;
  static constexpr int kScaleOffset =
      kKeyOffset + Persistent::kStages * Persistent::kKeyBytes;
  static constexpr int kWeightOffset =
      kScaleOffset + Persistent::kStages * kTileKeys * 4;
  static constexpr int kBarrierOffset =
      kWeightOffset + Persistent::kQueryStages * kBlockCols * 4;
  // The kernel aligns its base to 1 KB (128-byte swizzled key tiles need
  // it), so it asks for 1 KB more than it uses.
  static constexpr int kSmemBytes =
      kBarrierOffset + Persistent::kBarriers * 8 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "fits Hopper's shared memory");
  static_assert(kKeyOffset % 1024 == 0 && Persistent::kKeyBytes % 1024 == 0 &&
                    kScaleOffset % 128 == 0,
                "key stages on 1 KB, scale stages on 128 bytes");
};

// --- The top-k kernel (topk.hip.cc): one block a row, keys read four at a
// time (a quad, 16 bytes), kSlots quads a thread per chunk of the row.
inline constexpr int kTopKBins = 2048;  // coarse bins; radix digits of 11 bits
// Rows of up to this many keys are staged in shared memory by the staged
// instances (8192: DeepSeek-V3.2's prefill rows up to T = 8192).
inline constexpr int kTopKStageKeys = 8192;
// A threshold bin of at most this many keys is resolved by ranking its keys
// against each other (count^2 comparisons); a larger one by radix rounds.
inline constexpr int kTopKRankMax = 256;
// A sampled row's window spans this many standard deviations of the
// sample's count above the threshold, either side (topk.hip.cc).
inline constexpr float kTopKSampleSpread = 3.0f;
// The widest rows a launch takes (row-local positions stay in 32 bits).
inline constexpr int64_t kTopKMaxWidth = int64_t{1} << 30;

template <int kThreadsV, int kSlotsV, int kLoadSlotsV, bool kStagedV,
          int kCandidatesV, int kBitmapKeysV, int kMinBlocksV,
          int kSampleShiftV>
struct TopKShape {
  static constexpr int kThreads = kThreadsV;
  // Quads a thread a chunk of the ordered walks (the compaction, the
  // gather without a bitmap), and a chunk of the histogram's walk (the
  // loads a thread keeps in flight there; the order does not matter).
  static constexpr int kSlots = kSlotsV;
  static constexpr int kLoadSlots = kLoadSlotsV;
  static constexpr int kChunkQuads = kThreads * kSlots;
  // Staged instances take launches of width <= kTopKStageKeys only, and
  // stage every window (one may start mid-quad); the others read each row
  // from global memory at every walk.
  static constexpr bool kStaged = kStagedV;
  static constexpr int kStageQuads = kStagedV ? kTopKStageKeys / 4 + 2 : 0;
  // Threshold-bin keys gathered into shared memory (key and index).
  static constexpr int kCandidates = kCandidatesV;
  // Rows of up to kBitmapKeys positions (the window from its quad's start)
  // whose threshold bin was gathered are written from a bitmap of the
  // selected keys, built on the walk that gathers (one walk fewer); the
  // others by an ordered compaction over the row. 0: never. The bitmap
  // holds whole wavefronts of bits (64 on AMD), hence the 2 spare words.
  static constexpr int kBitmapKeys = kBitmapKeysV;
  static constexpr int kBitmapWords =
      kBitmapKeysV > 0 ? kBitmapKeysV / 32 + 2 : 0;
  // Blocks a multiprocessor should hold (caps the registers a thread).
  static constexpr int kMinBlocks = kMinBlocksV;
  // Rows with a bitmap first guess their threshold from a sample: the key
  // at every 2^kSampleShift-th position (from the window's first quad).
  // 0: never.
  static constexpr int kSampleShift = kSampleShiftV;
  static constexpr int kSampleStride = 1 << kSampleShiftV;
  static_assert(kThreads % 64 == 0 && kThreads <= 1024 &&
                    (kTopKBins / 2) % kThreads == 0,
                "whole wavefronts; every thread owns whole radix bins");
  static_assert(kSlots * 4 <= 32 && kLoadSlots * 4 <= 32,
                "a chunk's flags fit a word a thread");
  static_assert(kChunkQuads * 4 < 65536, "a chunk's counts fit 16 bits");
  static_assert(kCandidates > kTopKRankMax, "ranking takes the small bins");
  static_assert(kBitmapKeys % 64 == 0 || kBitmapKeys == kStageQuads * 4,
                "whole words");
  static_assert(kSampleShift == 0 || (kSampleShift >= 2 && kBitmapKeys > 0),
                "a sample of whole quads' first keys, for rows with a bitmap");
};

// The kernel's shared memory (dynamic; its size is the launch's).
template <typename Shape>
struct TopKShared {
  // The staged window's keys, quad by quad (read as 16-byte vectors).
  alignas(
      16) uint32_t stage[4 * (Shape::kStageQuads > 0 ? Shape::kStageQuads : 1)];
  uint32_t hist[kTopKBins];
  uint64_t candidates[Shape::kCandidates];
  uint32_t selected[Shape::kBitmapWords > 0 ? Shape::kBitmapWords : 1];
  // Warp sums of a prefix sum, per slot, and its total last (sized for
  // 32-wide warps, the narrower).
  uint32_t scan[Shape::kSlots * (Shape::kThreads / 32) + 1];
  uint32_t candidate_count;
  // Keys above the sampled window, a warp's count each (sized for 32-wide
  // warps).
  uint32_t warp_above[Shape::kThreads / 32];
  // SelectBin's answer (and SelectWindow's: bins bin_lo..bin).
  uint32_t bin_lo;
  uint32_t bin;
  uint32_t bin_above;
  uint32_t bin_count;
  // RankResolve's answer.
  uint32_t threshold;
  uint32_t take_equal;
};

// The instances (params.h's DSA_INDEXER_TOPK_PATHS). Bitmaps: every staged
// window; decode rows of up to 256K keys (1024 threads) or 128K (512). The
// streamed ones guess their threshold from every 8th key; the staged one
// counts every key (a sample measured slower there: RESULTS.md).
using TopKStaged512 = TopKShape<512, 4, 4, true, 512, 8200, 4, 0>;
using TopKStreamed1024 = TopKShape<1024, 2, 4, false, 2048, 262144, 1, 3>;
using TopKStreamed512 = TopKShape<512, 2, 2, false, 2048, 131072, 4, 3>;

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_CONFIG_H_
