// Tiles and shared-memory layouts of the dense MHA prefill's kernels, as
// constexpr structs with the legal space asserted. Plain C++, so that the
// host plan (plan.h) and the heuristics (heuristics.h) read the numbers the
// kernels are built with.
//
//   head-dim widths      the (qk, v) instantiations (instantiations/)
//   BlockTiles           query rows per attention block, keys per tile
//   WarpBodySmem         warp_body.h: padded row-major tiles
//   Sm90PipelinedSmem    sm90_pipelined_body.h: core-matrix layout
//   Sm90TmaRoles, Sm90TmaSmem, TmaTileKeys
//                        sm90_tma_body.h: warpgroup roles, stage rings
//   TmaTileOrder, kL2SectionBytes
//                        its persistent tile order
//   Bf16GemmTiles        gemm_bf16.hip.cc
// Offsets and sizes are in bytes unless a name says elements.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_CONFIG_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_CONFIG_H_

#include <cstddef>

#include "attention/dtypes/host_device.h"

namespace dsa::attention::gpu::dense_mha {

// --- Head dims. qk = nope + rope and v are rounded up to one of these
// widths, each (qk, v) pair an instantiation of the attention kernels
// (X(QK) / X(QK, V) for each).
#define DSA_DENSE_MHA_QK_WIDTHS(X) X(64) X(128) X(192) X(256)
#define DSA_DENSE_MHA_V_WIDTHS(X, QK) X(QK, 64) X(QK, 128) X(QK, 256)

inline constexpr int kMaxHeadDim = 256;

#define DSA_DENSE_MHA_WIDTH_ITEM(W) W,
inline constexpr int kQkWidths[] = {
    DSA_DENSE_MHA_QK_WIDTHS(DSA_DENSE_MHA_WIDTH_ITEM)};
#undef DSA_DENSE_MHA_WIDTH_ITEM
#define DSA_DENSE_MHA_WIDTH_ITEM(QK, V) V,
inline constexpr int kVWidths[] = {
    DSA_DENSE_MHA_V_WIDTHS(DSA_DENSE_MHA_WIDTH_ITEM, 0)};
#undef DSA_DENSE_MHA_WIDTH_ITEM

// The instantiated width a head dim (1 .. kMaxHeadDim) runs at.
template <size_t kCount>
constexpr int RoundUpToWidth(int dim, const int (&widths)[kCount]) {
  for (int w : widths) {
    if (dim <= w) return w;
  }
  return widths[kCount - 1];
}
constexpr int QkWidth(int qk) { return RoundUpToWidth(qk, kQkWidths); }
constexpr int VWidth(int v) { return RoundUpToWidth(v, kVWidths); }
static_assert(kQkWidths[sizeof(kQkWidths) / sizeof(int) - 1] == kMaxHeadDim &&
                  kVWidths[sizeof(kVWidths) / sizeof(int) - 1] == kMaxHeadDim,
              "the widest instantiation takes the largest head dims");

// --- Scratch rows. Each request's latent (and K_nope, V^T) rows start at a
// multiple of this and are padded to one, so that every value a key tile
// reads is finite (rows past seq_len are zero). Tiles of a width dividing
// it (64, 128) never leave their request; the TMA body's 80-key tiles may
// read the next request's first rows (or, past the scratch, the copies'
// zeros), keys past every row's position, which the causal mask drops.
inline constexpr int kKeyAlign = 128;

// --- The latent gather: rows per block, threads per block.
inline constexpr int kGatherRows = 4;
inline constexpr int kGatherThreads = 256;

// --- Attention blocks: kBlockM query rows of one request and head; the
// cp.async bodies visit keys in tiles of kBlockN. AMD's 64 KiB of LDS per
// workgroup asks for smaller tiles than the H100/H200's 227 KiB.
template <int kWarpSize>
struct BlockTiles {
  static_assert(kWarpSize == 32 || kWarpSize == 64, "NVIDIA or AMD");
  static constexpr int kBlockM = kWarpSize == 32 ? 128 : 64;
  static constexpr int kBlockN = kWarpSize == 32 ? 64 : 32;
  static_assert(kKeyAlign % kBlockN == 0, "tiles stay inside a request");
};

// Elements of padding per row of the warp body's tiles (16 bytes): spreads
// the rows an ldmatrix reads over the banks.
inline constexpr int kRowPad = 8;

// The warp-level body: Q (kBlockM x kQk), K (kBlockN x kQk), V^T (kV x
// kBlockN) and one P tile per warp (kWarpRows x kBlockN), bf16, padded
// row-major; offsets in elements.
template <class Tiles, int kWarpRows, int kQk, int kV>
struct WarpBodySmem {
  static_assert(Tiles::kBlockM % kWarpRows == 0, "whole warps");
  static constexpr int kWarps = Tiles::kBlockM / kWarpRows;
  static constexpr int kLdQ = kQk + kRowPad;
  static constexpr int kLdVt = Tiles::kBlockN + kRowPad;
  static constexpr int kLdP = Tiles::kBlockN + kRowPad;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + Tiles::kBlockM * kLdQ;
  static constexpr int kVt = kK + Tiles::kBlockN * kLdQ;
  static constexpr int kP = kVt + kV * kLdVt;
  static constexpr int kElems = kP + kWarps * kWarpRows * kLdP;
  static constexpr size_t kBytes = sizeof(unsigned short) * kElems;
};

// The warp body's AMD form (mfma_body.h): S^T = K Q^T and O^T += V^T P^T,
// so that Q (as the B operand) and P (the accumulator's slots, which are
// the next product's B fragments on MFMA) stay in registers, and LDS holds
// one K tile (kBlockN x kQk) and one V^T tile (kV x kBlockN), padded
// row-major; Q passes through the same bytes once, before the first tile.
// Offsets in elements. AMD's 64 KiB of LDS per workgroup: 37,376 bytes at
// GLM's widest (qk 256, v 256), where WarpBodySmem needs 76,288.
inline constexpr int kAmdLdsBytesPerWorkgroup = 64 * 1024;
template <class Tiles, int kQk, int kV>
struct MfmaBodySmem {
  static constexpr int kLdQ = kQk + kRowPad;  // Q and K rows
  static constexpr int kLdVt = Tiles::kBlockN + kRowPad;
  static constexpr int kK = 0;
  static constexpr int kVt = kK + Tiles::kBlockN * kLdQ;
  static constexpr int kTileElems = kVt + kV * kLdVt;
  static constexpr int kQStage = 0;  // before the first tile only
  static constexpr int kQStageElems = Tiles::kBlockM * kLdQ;
  static constexpr int kElems =
      kTileElems > kQStageElems ? kTileElems : kQStageElems;
  static constexpr size_t kBytes = sizeof(unsigned short) * kElems;
  static_assert(kBytes <= kAmdLdsBytesPerWorkgroup, "fits a workgroup's LDS");
};
static_assert(MfmaBodySmem<BlockTiles<64>, 256, 256>::kBytes == 37376 &&
                  WarpBodySmem<BlockTiles<64>, 32, 256, 256>::kBytes == 76288,
              "GLM's widths on AMD: the MFMA form's LDS, the row-major form's");

// --- sm_90a. Both warpgroup bodies: 128 query rows, two math warpgroups of
// 64 rows each.
inline constexpr int kSm90BlockM = 128;
inline constexpr int kSm90GroupRows = 64;
static_assert(kSm90BlockM == BlockTiles<32>::kBlockM &&
                  kSm90BlockM == 2 * kSm90GroupRows,
              "the NVIDIA block: two warpgroups of 64 rows");

// The pipelined cp.async body: Q, two K and two V^T buffers (64-key tiles),
// and two P buffers per warpgroup, in the core-matrix layout.
template <int kQk, int kV>
struct Sm90PipelinedSmem {
  static constexpr int kBlockN = BlockTiles<32>::kBlockN;
  static_assert(kBlockN == 64, "P of a warpgroup: 64 x 64");
  static_assert(kQk % 16 == 0 && kV % 8 == 0, "core-matrix tiles");
  static constexpr int kQkGroup = kQk * 16;       // per 8 rows of Q, K
  static constexpr int kKeyGroup = kBlockN * 16;  // per 8 rows of V^T, P
  static constexpr int kKBytes = kBlockN * kQk * 2;
  static constexpr int kVtBytes = kV * kBlockN * 2;
  static constexpr int kPBytes = kSm90GroupRows * kBlockN * 2;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kSm90BlockM * kQk * 2;
  static constexpr int kVt = kK + 2 * kKBytes;
  static constexpr int kP = kVt + 2 * kVtBytes;
  static constexpr size_t kBytes = kP + 2 * 2 * kPBytes;
};

// The warp-specialised TMA body: a producer warpgroup (one lane issues the
// copies) and two consumer warpgroups. With 12 warps each scheduler's
// register file holds one producer and two consumer warps, and setmaxnreg
// moves the producer's registers to the consumers: GLM-5.1's O alone is 128
// registers a thread.
struct Sm90TmaRoles {
  static constexpr int kConsumerThreads = 2 * 128;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;
  static_assert(kProducerRegs + 2 * kConsumerRegs <= 512,
                "one producer and two consumer warps per scheduler slot");
};

// Per CTA: Q (128 x qk) of the tile in hand, then rings of kStages stages
// of K (kN x qk) and V^T (v x kN), 128-byte swizzled, their mbarriers
// (full_q, empty_q, then full_k, empty_k, full_v, empty_v of each stage) and
// the tile index the producer hands the consumers; the base is aligned to
// 1024 bytes (the swizzle's period) inside the dynamic allocation.
inline constexpr int kSm90TmaBudget =
    227 * 1024 - 1024 - 256;  // - align, barriers
constexpr int Sm90TmaStagesFit(int qk, int v, int tile_keys) {
  return (kSm90TmaBudget - kSm90BlockM * qk * 2) /
         (tile_keys * qk * 2 + v * tile_keys * 2);
}
// V^T of a tile: kN / 64 boxes of 64 keys (128-byte swizzle, v x 128 bytes
// each), then for 80-key tiles a box of the last 16 keys (32-byte swizzle,
// v x 32 bytes), so that the 16 keys past a 64 cost no padding.
template <int kQk, int kV, int kN>
struct Sm90TmaSmem {
  static_assert(kQk % 64 == 0 && kV % 64 == 0, "whole swizzle blocks");
  static_assert(kN == 64 || kN == 80 || kN == 128, "tile widths of the body");
  static_assert(kN % 64 == 0 || kN % 64 == 16, "64-key boxes and a 16 tail");
  static constexpr int kQBytes = kSm90BlockM * kQk * 2;
  static constexpr int kKBytes = kN * kQk * 2;
  static constexpr int kVBoxes64 = kN / 64;
  static constexpr bool kVTail = kN % 64 != 0;
  static constexpr int kVTailOffset = kVBoxes64 * kV * 128;  // 256-aligned
  static constexpr int kVBytes = kV * kN * 2;
  static_assert(kKBytes % 1024 == 0 && kVBytes % 1024 == 0,
                "stages on the swizzle's period");
  static constexpr int kStagesFit = Sm90TmaStagesFit(kQk, kV, kN);
  static constexpr int kStages = kStagesFit > 4 ? 4 : kStagesFit;
  static_assert(kStages >= 2, "at least a double buffer");
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQBytes;
  static constexpr int kV0 = kK + kStages * kKBytes;
  static constexpr int kBar = kV0 + kStages * kVBytes;  // 8-byte barriers
  static constexpr int kBarriers = 2 + 4 * kStages;
  static constexpr int kTileSlot = kBar + kBarriers * 8;  // int32
  static constexpr size_t kBytes = 1024 + kTileSlot + 8;
  static_assert(kTileSlot + 8 - kBar <= 256, "inside the budget's 256 bytes");
};

// Keys per tile of the TMA body at widths (qk, v): 128 where the registers
// allow (v <= 128: S and P of a tile at 64 + 32 a thread, O at 64) and a
// double buffer fits; else 80 where a double buffer of those fits (v = 256:
// S 40 + P 20 + O 128 a thread; FlashAttention-3's tile at head dim 256),
// else 64. Wider tiles read less shared memory per product: Q K^T from
// shared memory on both sides moves (64 + kN) x 32 bytes per 16-deep step
// of kN / 2 tensor cycles, 128 bytes a cycle (the shared memory's rate) at
// 64 keys, 115 at 80.
constexpr int TmaTileKeys(int qk, int v) {
  return v <= 128 && Sm90TmaStagesFit(qk, v, 128) >= 2 ? 128
         : Sm90TmaStagesFit(qk, v, 80) >= 2            ? 80
                                                       : 64;
}
static_assert(TmaTileKeys(192, 128) == 128 && TmaTileKeys(256, 256) == 80,
              "DeepSeek-V3.2 on 128-key tiles, GLM-5.1 on 80");

// --- The TMA body is persistent: one CTA per multiprocessor (or fewer,
// where the call has fewer tiles), each taking (query tile, head) tiles in
// this order until none are left, the next one from an atomic counter, so
// that a CTA that finishes early takes the next tile (FlashAttention-3's
// dynamic persistent scheduler). The order: heads in sections whose K and
// V together fit in kL2SectionBytes of L2; in each section the work items
// (plan.h: the query tiles, longest first), and for each item the section's
// heads. So the longest tiles start first and the shortest fill the tail,
// and the CTAs running at one time read the K/V of a few heads, which stay
// in L2.
inline constexpr long long kL2SectionBytes = 32ll << 20;

struct TmaTile {
  int item;  // index into the work items
  int head;
};
// Tile `tile` of items x heads in the order above.
DSA_HOST_DEVICE inline TmaTile TmaTileOrder(int tile, int items, int heads,
                                            int heads_per_section) {
  const int per_section = items * heads_per_section;
  const int section = tile / per_section;
  const int rest = tile - section * per_section;
  const int head0 = section * heads_per_section;
  const int left = heads - head0;
  const int section_heads = left < heads_per_section ? left : heads_per_section;
  return TmaTile{rest / section_heads, head0 + rest % section_heads};
}

// --- gemm_bf16: 128 x 128 tiles of C, 256 threads. The warp body walks k in
// steps of 32 through a 4-stage ring of rows padded by kRowPad; the sm_90a
// body (two warpgroups of 64 rows) in steps of 64 through 3 stages in the
// core-matrix layout.
struct Bf16GemmTiles {
  static constexpr int kBM = 128;
  static constexpr int kBN = 128;
  static constexpr int kThreads = 256;
  static constexpr int kWarpsM = 2;
  static constexpr int kBK = 32;
  static constexpr int kStages = 4;
  static constexpr int kLd = kBK + kRowPad;  // elements
  static constexpr int kStageElems = (kBM + kBN) * kLd;
  static constexpr size_t kSmemBytes =
      sizeof(unsigned short) * kStageElems * kStages;
  static constexpr int kSm90BK = 64;
  static constexpr int kSm90Stages = 3;
  static constexpr int kSm90Group = kSm90BK * 16;  // per 8 rows
  static constexpr int kSm90TileBytes = kBM * kSm90BK * 2;
  static constexpr int kSm90StageBytes = 2 * kSm90TileBytes;
  static constexpr size_t kSm90SmemBytes =
      static_cast<size_t>(kSm90StageBytes) * kSm90Stages;
  static_assert(kBM == kBN && kBM == 2 * kSm90GroupRows,
                "the sm_90a body: two warpgroups of 64 rows, square tiles");
  static_assert(kBK % 8 == 0 && kSm90BK % 8 == 0, "16-byte chunks");
};

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_CONFIG_H_
