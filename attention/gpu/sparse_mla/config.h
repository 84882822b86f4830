// Tile constants and shared-memory plans of the sparse MLA's kernels
// (sparse_mla/launch.h), in plain C++: the device bodies take their shapes
// from here, and the heuristics (host code) the bytes a body needs, so the
// choice of a body and the body agree.
//
// Layout: the latent shape of the matrix bodies; the warp-level body
// (warp::Config per backend, warp::Layout per heads-per-block and cache:
// its work split and shared-memory offsets); the sm_90a seesaw body
// (seesaw::Config, seesaw::SharedMemory, whose sizeof is the budget); an fp8
// cache's bf16 workspace for the seesaw body (dequantised::: every
// position; gathered::: each row's top-k entries, decode); the FMA
// kernels' block; the latent scratch. The measurements behind the
// constants are in testing/bench/RESULTS.md ("Sparse MLA on wgmma").
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_CONFIG_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_CONFIG_H_

#include <cstddef>
#include <cstdint>

namespace dsa::attention::gpu::sparse_mla {

// ---------------------------------------------------------------------------
// The latent shape of the matrix bodies (DeepSeek-V3.2, GLM-5); other shapes
// run on the FMA kernels.
inline constexpr int kLora = 512;           // kv_lora_rank: P V's width
inline constexpr int kRope = 64;            // rope_dim
inline constexpr int kDim = kLora + kRope;  // 576: the depth of Q K^T
// An fp8_ds_mla entry: 512 e4m3 codes, a float scale per 128 of them, then
// the 64 rope values in bf16.
inline constexpr int kFp8Tiles = kLora / 128;
inline constexpr int kFp8EntryBytes = kLora + 4 * kFp8Tiles + 2 * kRope;
static_assert(kFp8EntryBytes == 656 && kFp8EntryBytes % 16 == 0,
              "fp8 entries in 16-byte copies");

// Top-k indices the warp body checks and compacts at a time (at most: AMD's
// layout takes half, warp::Layout::kChunk).
inline constexpr int kIndexChunk = 1024;

// The latent output between the attention and W_UV lives in stream scratch
// of about this size; longer batches run in token chunks, each at most one
// launch's grid.y of rows (the seesaw body's grid: head groups, rows,
// splits).
inline constexpr int64_t kLatentScratchBytes = int64_t{256} << 20;
inline constexpr int64_t kMaxRowsPerLaunch = 65535;

// The opt-in shared memory of an H100 / H200 block, which both matrix
// bodies are sized for on NVIDIA.
inline constexpr int kSm90SharedBytesPerBlock = 232448;
// The LDS of an AMD CDNA workgroup (gfx90a, gfx942), which the warp body is
// sized for on AMD.
inline constexpr int kAmdLdsBytesPerWorkgroup = 64 * 1024;

// The largest divisor of n that is at most `most`.
constexpr int LargestDivisorAtMost(int n, int most) {
  int d = most < n ? most : n;
  while (d > 1 && n % d != 0) --d;
  return d;
}

// ---------------------------------------------------------------------------
// The warp-level body (warp_body.h): one block per (query row, HC heads,
// top-k split), Q K^T and P V on the backend's warp-level bf16 product.
namespace warp {

// The shape of each backend's Bf16WarpMma (device/mma.h), by warp width.
template <int kWarpSize>
struct MmaShape;
template <>
struct MmaShape<32> {  // NVIDIA mma.sync m16n8k16
  static constexpr int kM = 16, kN = 8, kK = 16;
};
template <>
struct MmaShape<64> {  // AMD MFMA 32x32x8
  static constexpr int kM = 32, kN = 32, kK = 8;
};

template <int kWarpSize>
struct Config {
  using Mma = MmaShape<kWarpSize>;
  // 8 NVIDIA warps, 128 output floats per thread (512 threads measured 6%
  // slower on the H200: more reloads of Q and P than latency hidden).
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / kWarpSize;
  // Shared-memory rows of Q and of keys: 1168 bytes, so that the 8 rows one
  // ldmatrix reads fall on 8 different 16-byte bank groups.
  static constexpr int kLd = kDim + 8;
  // Keys per tile: 48 (beat 32 by ~9% on the H200), or 32 where the matrix
  // instruction's N is 32 (AMD).
  static constexpr int kTileKeys = 48 % Mma::kN == 0 ? 48 : 32;
  // Q K^T k-steps whose Q fragments a warp keeps in registers for the whole
  // row (the last ones): what the 128 output floats per thread leave.
  static constexpr int kQRegisterSteps = 8;
  // Independent accumulator sets of a warp's Q K^T, so that the products of
  // a score fragment are not one dependent chain (1, 2 and 4 measured the
  // same on the H200). AMD: 1, the 16 registers a second set takes are what
  // 64 heads' Q fragments and output leave (2 spills there).
  static constexpr int kQkChains = 2;
  static constexpr int kSLd = kTileKeys + 1;  // fp32 scores, + 1: banks
  static constexpr int kPLd = kTileKeys + 8;  // bf16 probabilities: rows 16
                                              // bytes off the bank period
  // The latent output staged in bf16 rows for coalesced stores.
  static constexpr int kStageLd = kLora + 8;

  static_assert(kLora % (kWarps * Mma::kN) == 0, "value dims per warp");
  static_assert(kDim % Mma::kK == 0 && kTileKeys % Mma::kK == 0, "k steps");
  static_assert(kTileKeys % Mma::kN == 0, "whole N tiles per key tile");
};

// Heads per block on a backend of `warp_size`-wide warps: 32 for up to 32
// heads, else 64; always 32 on AMD (64), where 64 heads' Q fragments and
// output (72 + 128 registers a lane) leave too few for the rest: the
// 64-head instance spilled 6 VGPRs on gfx90a and gfx942.
constexpr int HeadsPerBlock(int warp_size, int heads) {
  return warp_size == 64 || heads <= 32 ? 32 : 64;
}

// One instance's work split and shared memory: HC heads per block, a bf16
// (kFp8 false) or fp8_ds_mla cache.
//
// NVIDIA (kWarpSize 32): Q in shared memory (its last kQRegisterSteps
// k-steps also in registers), the next tile gathered (cp.async) while this
// one computes, into a second key buffer (bf16) or raw buffer (fp8).
// AMD (64, kLdsForm): within a workgroup's 64 KiB of LDS. Q lives in
// registers only, its 576 dims split over the kQkDimSplits warps of a head
// group (each sums its share of S into its own fp32 score buffer, and the
// softmax adds the shares); one key buffer, filled at the start of each
// tile (AMD's 16-byte copies are plain loads and stores, so a second buffer
// would overlap nothing); an fp8 tile's raw entries land on the score and
// probability buffers, dead until its dequantisation is done; half the
// index chunk; the output staged one M tile of heads at a time.
template <int kWarpSize, int HC, bool kFp8>
struct Layout {
  using C = Config<kWarpSize>;
  using Mma = typename C::Mma;
  static constexpr bool kLdsForm = kWarpSize == 64;
  static constexpr int kMTiles = HC / Mma::kM;
  // Q K^T: kQkGroups head groups (one M tile each) x kQkSplits key slices
  // (x kQkDimSplits slices of the 576 dims on AMD).
  static constexpr int kQkGroups = kMTiles;
  static constexpr int kQkSplits =
      LargestDivisorAtMost(C::kTileKeys / Mma::kN, C::kWarps / kQkGroups);
  static constexpr int kQkKeys = C::kTileKeys / kQkSplits;
  static constexpr int kQkNTiles = kQkKeys / Mma::kN;
  static constexpr int kQkDimSplits =
      kLdsForm ? C::kWarps / (kQkGroups * kQkSplits) : 1;
  static constexpr int kQkDims = kDim / kQkDimSplits;  // per warp
  // P V: every warp owns all HC heads x kPvDims value dims.
  static constexpr int kPvDims = kLora / C::kWarps;
  static constexpr int kPvNTiles = kPvDims / Mma::kN;
  // Softmax: kRowThreads threads per head row.
  static constexpr int kRowThreads = C::kThreads / HC;
  static constexpr int kRowKeys = C::kTileKeys / kRowThreads;
  // Top-k indices checked and compacted at a time.
  static constexpr int kChunk = kLdsForm ? kIndexChunk / 2 : kIndexChunk;
  static constexpr int kIndicesPerThread = kChunk / C::kThreads;
  // Tile t + 1 is gathered while tile t computes (NVIDIA).
  static constexpr bool kPrefetch = !kLdsForm;
  // bf16: tiles land in the key buffers (t computing, t + 1 arriving).
  // fp8: raw tiles land in two raw buffers and are dequantised into one key
  // buffer. AMD: one key buffer, raw tiles on the score buffers.
  static constexpr int kKeyBuffers = kFp8 || kLdsForm ? 1 : 2;
  static constexpr int kRawBuffers = kFp8 && !kLdsForm ? 2 : 0;
  static constexpr int kRawLandings = kLdsForm ? 1 : 2;  // raw tiles in turn
  // Rows of the latent output staged (bf16) at a time.
  static constexpr int kStageRows = kLdsForm ? Mma::kM : HC;

  static_assert(HC == 32 || HC == 64, "heads per block (HeadsPerBlock)");
  static_assert(HC % Mma::kM == 0, "heads per block: whole M tiles");
  static_assert(C::kWarps % kQkGroups == 0, "Q K^T warps");
  static_assert(kQkKeys % Mma::kN == 0, "Q K^T key slices");
  static_assert(C::kThreads % HC == 0 && kRowThreads <= kWarpSize &&
                    C::kTileKeys % kRowThreads == 0 && kRowKeys % 2 == 0,
                "softmax rows: whole bf16 pairs per thread");
  static_assert(kQkDimSplits * kQkGroups * kQkSplits <= C::kWarps &&
                    kDim % (kQkDimSplits * Mma::kK) == 0,
                "Q K^T dim slices: whole k-steps, one warp each");
  static_assert(kChunk % C::kThreads == 0 && kChunk <= kIndexChunk,
                "index chunk per thread");
  static_assert(HC % kStageRows == 0, "whole staging rounds");

  // Shared memory, in bytes (every offset a multiple of 16): Q, the key
  // tiles, the raw fp8 tiles, scores (kQkDimSplits buffers), probabilities,
  // the rescale factors, the compacted cache offsets of a chunk, the
  // compaction's scan.
  static constexpr int kQBytes = kLdsForm ? 0 : HC * C::kLd * 2;
  static constexpr int kKeyBytes = C::kTileKeys * C::kLd * 2;
  static constexpr int kRawBytes = C::kTileKeys * kFp8EntryBytes;
  static constexpr int kPBytes = HC * C::kPLd * 2;
  static constexpr int kScoreBytes =
      (kQkDimSplits * HC * C::kSLd * 4 + 15) / 16 * 16;
  // AMD, fp8: the scores' buffers grown where a raw tile needs more than
  // they and P hold.
  static constexpr int kSBytes =
      kLdsForm && kFp8 && kScoreBytes + kPBytes < kRawBytes
          ? (kRawBytes - kPBytes + 15) / 16 * 16
          : kScoreBytes;
  static constexpr int kQOff = 0;
  static constexpr int kKeyOff = kQOff + kQBytes;
  static constexpr int kRawOff = kKeyOff + kKeyBuffers * kKeyBytes;
  static constexpr int kSOff = kRawOff + kRawBuffers * kRawBytes;
  // Where raw fp8 tiles land: their buffers, or (AMD) the scores'.
  static constexpr int kRawLandingOff = kLdsForm ? kSOff : kRawOff;
  static constexpr int kPOff = kSOff + kSBytes;
  static constexpr int kAlphaOff = kPOff + kPBytes;
  static constexpr int kSlotOff = kAlphaOff + HC * 4;
  static constexpr int kScanOff = kSlotOff + kChunk * 8;
  static constexpr int kBytes = kScanOff + (C::kWarps + 1) * 4;

  static_assert(kStageRows * C::kStageLd * 2 <=
                    (kLdsForm ? kAlphaOff : kSOff) - kKeyOff,
                "output staging fits the key buffers (AMD: and the scores "
                "and probabilities)");
  static_assert(!kLdsForm || !kFp8 || kRawBytes <= kAlphaOff - kSOff,
                "AMD: a raw fp8 tile fits the score and probability buffers");
  static_assert(kWarpSize != 32 || kBytes <= kSm90SharedBytesPerBlock,
                "fits an H100 / H200 block");
  static_assert(!kLdsForm || kBytes <= kAmdLdsBytesPerWorkgroup,
                "fits an AMD workgroup's 64 KiB of LDS");
};

// The shared memory of the instance that runs `heads` heads over a bf16 or
// fp8 cache on a backend of `warp_size`-wide warps (64: AMD, else NVIDIA).
constexpr int SharedBytes(int warp_size, int heads, bool fp8) {
  const bool wide = HeadsPerBlock(warp_size, heads) == 64;
  if (warp_size == 64) {
    return wide ? (fp8 ? Layout<64, 64, true>::kBytes
                       : Layout<64, 64, false>::kBytes)
                : (fp8 ? Layout<64, 32, true>::kBytes
                       : Layout<64, 32, false>::kBytes);
  }
  return wide ? (fp8 ? Layout<32, 64, true>::kBytes
                     : Layout<32, 64, false>::kBytes)
              : (fp8 ? Layout<32, 32, true>::kBytes
                     : Layout<32, 32, false>::kBytes);
}

}  // namespace warp

// ---------------------------------------------------------------------------
// The sm_90a seesaw body (seesaw_body.h): one block of three warpgroups per
// (query row, 64 heads, top-k split). A producer warpgroup gathers the
// row's key tiles of 64 keys into two buffers; consumer warpgroup g owns
// O[:, 256 g, 256 g + 256) and computes the scores of buffer g's tile, and
// the two exchange their bf16 P tiles (FlashMLA's sm_90 sparse prefill
// schedule). Q, the key tiles and P in the 128-byte swizzled layout.
namespace seesaw {

struct Config {
  static constexpr int kHeads = 64;  // per block: the M of every product
  static constexpr int kKeys = 64;   // per tile: the N of S, the K of P V
  static constexpr int kConsumerThreads = 256;
  static constexpr int kProducerThreads = 128;
  static constexpr int kThreads = kConsumerThreads + kProducerThreads;
  static constexpr int kHalfDims = kLora / 2;  // O columns of a consumer
  // A swizzle atom column: 64 rows (keys or heads) x 64 bf16.
  static constexpr int kAtomBytes = 64 * 128;
  static constexpr int kAtoms = kDim / 64;  // 9 along the 576 dims
  // A tile arrives in two parts with their own barriers: atoms [0, 4)
  // (dims 0-255, the first consumer's values) and [4, 9) (the second's
  // values and the rope), so that S starts on the part its consumer waits
  // for first.
  static constexpr int kFirstPartAtoms = 4;
  static constexpr int kTileBytes = kKeys * kDim * 2;
  // Producer: 8 threads per key row (one 16-byte chunk of each atom), so
  // 16 rows at a time and 4 rows of a tile per thread.
  static constexpr int kRowThreads = 8;
  static constexpr int kRowsPerThread =
      kKeys / (kProducerThreads / kRowThreads);
  // Registers after the reallocation (setmaxnreg); the launch gives 168 a
  // thread, and 2 x 128 x 216 + 128 x 72 = 384 x 168.
  static constexpr int kProducerRegs = 72;
  static constexpr int kConsumerRegs = 216;
  // Over an fp8 cache the producer holds a part's codes between their loads
  // and its stores (40 registers) and its lanes' entries two pairs ahead:
  // 104, the consumers 200 (no spills; at 88 / 208 ptxas spilled 72
  // bytes, at 120 / 192 the consumers 72).
  static constexpr int kFp8ProducerRegs = 104;
  static constexpr int kFp8ConsumerRegs = 200;
  static constexpr int kStageLd = kLora + 8;  // output staging rows (bf16)
  // The running row maximum before any key: finite, so that a tile whose
  // keys are all masked rescales by exp2(0) = 1, not NaN.
  static constexpr float kMaxInit = -1e30f;

  static_assert(kRowsPerThread * (kProducerThreads / kRowThreads) == kKeys,
                "whole rows per producer thread");
  static_assert(kConsumerRegs * kConsumerThreads +
                            kProducerRegs * kProducerThreads ==
                        168 * kThreads &&
                    kFp8ConsumerRegs * kConsumerThreads +
                            kFp8ProducerRegs * kProducerThreads ==
                        168 * kThreads,
                "the register file of one block a multiprocessor");
};

// Named barriers of the consumers (0 is __syncthreads). The row maxima go
// from consumer to consumer through mbarriers instead (maxima_ready): the
// writer's arrival releases its stores and the reader's wait acquires them,
// an ordering compute-sanitizer's racecheck follows, which it does not for
// a bar.arrive / bar.sync pair.
enum NamedBarriers : int {
  kP0Ready = 1,    // consumer 0's P (rescaled) is in shared memory
  kP1Ready = 2,    // consumer 1's P is in shared memory
  kSumsReady = 3,  // both consumers' row sums published
  kStaged0 = 4,    // consumer g's output staged (128 threads): 4 + g
};

// The block's shared memory (sizeof is the budget). Tile pair i: tile 2 i
// in keys[0], 2 i + 1 in keys[1]. Consumer 0's P lives in the rope atom of
// keys[0], which its S has read by then.
struct SharedMemory {
  uint8_t q[Config::kHeads * kDim * 2];            // bf16, swizzled; the output
                                                   // staging at the end
  uint8_t keys[2][Config::kTileBytes];             // bf16, swizzled
  uint8_t p1[Config::kHeads * Config::kKeys * 2];  // consumer 1's P
  float row_max[Config::kHeads];     // the running maxima, consumer to consumer
  float row_sum[2][Config::kHeads];  // each consumer's, at the end
  uint8_t valid[2][Config::kKeys];   // the keys of each buffer
  uint64_t q_ready;                  // mbarriers
  uint64_t keys_ready[2][2];         // [buffer][part]
  uint64_t keys_free[2][2];
  // Consumer g published the maxima in row_max (every thread of it
  // arrives, once a tile pair).
  uint64_t maxima_ready[2];
  int last_valid;  // the row's last valid top-k position (the prologue)
};
static_assert(offsetof(SharedMemory, keys) % 1024 == 0 &&
                  offsetof(SharedMemory, p1) % 1024 == 0 &&
                  Config::kTileBytes % 1024 == 0 &&
                  offsetof(SharedMemory, q_ready) % 8 == 0,
              "swizzle atoms 1024-byte aligned, mbarriers 8");
static_assert(Config::kHeads * Config::kStageLd * 2 <=
                  static_cast<int>(sizeof(SharedMemory::q)),
              "output staging fits Q");
static_assert(sizeof(SharedMemory) <= kSm90SharedBytesPerBlock,
              "fits an H100 / H200 block");

}  // namespace seesaw

// ---------------------------------------------------------------------------
// An fp8_ds_mla cache on the seesaw body (heuristics.h:
// Body::kSeesawDequantised): every position of the call's requests
// dequantised first (dequantise.hip.cc) into a bf16 workspace from the
// stream's arena, then the seesaw body over that workspace as over a bf16
// cache. Workspace row r * capacity + pos holds request r's position pos
// (capacity = max_blocks_per_request * block_size), its block table names
// workspace block r * max_blocks_per_request + j for the request's block j
// (-1 where the cache's table names no block of the cache), so the body's
// index checks and masking stay those of the fp8 cache.
namespace dequantised {

inline constexpr int64_t kRowBytes = 2 * kDim;  // a bf16 entry: 1152
// The most a call carves: 233016 rows, so that one request of GLM-5.1's
// 202752 or DeepSeek-V3.2's 163840 positions fits.
inline constexpr int64_t kMaxBytes = int64_t{256} << 20;
inline constexpr int64_t kMaxRows = kMaxBytes / kRowBytes;
// The dequantisation: 32 threads a row (16 codes each, the rope on 8 of
// them), 8 rows a block.
inline constexpr int kThreads = 256;
inline constexpr int kRowThreads = 32;
inline constexpr int kRowsPerBlock = kThreads / kRowThreads;

static_assert(kRowThreads * 16 == kLora && kRope * 2 / 16 <= kRowThreads,
              "one 16-byte code chunk a thread; the rope in 16-byte chunks");
static_assert(kFp8EntryBytes - 2 * kRope == kLora + 4 * kFp8Tiles &&
                  (kLora + 4 * kFp8Tiles) % 16 == 0,
              "the rope of an fp8 entry 16-byte aligned");

}  // namespace dequantised

// ---------------------------------------------------------------------------
// An fp8_ds_mla cache whose requests name more positions than the workspace
// holds (decode: 32 requests x 8K positions for 32 rows of top-k 2048), on
// the seesaw body (heuristics.h: Body::kSeesawGathered): per chunk of query
// rows, each row's top-k entries dequantised in top-k order into the same
// bf16 workspace (gather_dequantise.hip.cc), then the seesaw body over it,
// each row its own request of topk positions. Workspace row r * topk + i
// holds chunk row r's i-th top-k entry; the table (int32) holds the
// rewritten top-k list (i, or -1 where the index names no entry of the
// cache) at [r * topk + i], then the rows' request ids (r) and lengths
// (topk), rows at most a chunk, so 3 ints a workspace row bound it.
namespace gathered {

// A chunk holds at most dequantised::kMaxRows / topk query rows.
inline constexpr int64_t kTableIntsPerRow = 3;
// The gather pass: a block of kThreads resolves the cache offsets of its
// (row, top-k entry) pairs at once (the dependent loads of row request,
// length, index and block-table entry in parallel across the block, into
// shared memory), then each group of 32 threads (any warp width) copies
// `batches` batches of kPairsInFlight of those entries (heuristics.cc picks
// 1 .. kMaxBatches: Plan::gather_batches), every load of a batch issued
// before the first conversion. A lane reads 8-byte code chunks (codes 8 lane
// .. 8 lane + 7 of each half of 256) and a 4-byte piece of the rope, so that
// each load and store instruction of a group covers contiguous bytes.
inline constexpr int kThreads = 128;
inline constexpr int kGroupThreads = 32;
inline constexpr int kGroups = kThreads / kGroupThreads;
inline constexpr int kPairsInFlight = 8;
inline constexpr int kMaxBatches = 4;
// Pairs a block: kGroups * kPairsInFlight * batches, at most kThreads.
inline constexpr int kPairsPerBatch = kGroups * kPairsInFlight;

static_assert(kGroupThreads * 8 * 2 == kLora && kGroupThreads * 4 == 2 * kRope,
              "two 8-code chunks and 4 bytes of the rope a lane");
static_assert(kPairsPerBatch * kMaxBatches <= kThreads,
              "one pair resolved a thread at most");

}  // namespace gathered

// ---------------------------------------------------------------------------
// The FMA kernels (plain_kernels.hip.cc): one block per (row, head), with
// q, the running output and a reduction scratch in dynamic shared memory,
// which must stay within what a block gets without opting in.
inline constexpr int kFmaThreads = 128;
constexpr int64_t FmaSharedBytes(int kv_lora_rank, int rope_dim) {
  return (2 * int64_t{kv_lora_rank} + rope_dim + kFmaThreads) * 4;
}
inline constexpr int64_t kFmaMaxSharedBytes = 48 * 1024;

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_CONFIG_H_
