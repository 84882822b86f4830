// Sparse MLA on the GPU; see launch.h.
//
// Cost model (GLM-5.1 / DeepSeek-V3.2, kv_lora 512, rope 64, top-k 2048):
// per query row and head, 2 * topk * (576 + 512) FLOPs (Q K^T over the 576
// latent + rope dims, P V over the 512 latent dims); per row, topk * 1152
// bytes of gathered cache, read ONCE for all heads (MQA: every head shares
// the same keys and values). At 64 heads that is ~61 FLOPs per gathered byte
// from L2/HBM, so the gather is not the limit. What is (Nsight Compute on the
// H200, first version): one 170 KiB block per multiprocessor leaves 8 warps
// to hide latencies with, and each warp's Q K^T fragment was one 36-deep
// chain of dependent mma.sync; shared-memory throughput sat at ~50%, the
// matrix pipe at ~25%. Measured on the H200 against each other (64 heads,
// 8192 rows, top-k 2048): 32-key tiles 18.0 ms, 48-key tiles with Q of the
// last 8 k-steps in registers 16.3 ms (the defaults); 1, 2 or 4 independent
// Q K^T accumulator sets, a software pipeline (Q K^T of tile t + 1 beside
// P V of tile t) and 512-thread blocks all within +-6%: per-tile costs
// (barriers, softmax, gathers) and shared-memory traffic, not matrix-pipe
// latency, set the pace. FlashMLA's 3.6 ms comes from wgmma, whose operands
// stay in shared memory: hence the warpgroup kernel below (SparseMlaWgmma-
// Kernel), which sm_90a builds run for 64 heads or more. Its budget: per
// 64-key tile, Q (73.7 KB) and the tile (73.7 KB) are read from shared
// memory by S, the tile's values (64 KB) and P by P V, at ~128 bytes per
// clock (~2400 clocks); the gathered bytes (8192 rows x 2048 x 1152 = 19 GB
// at 64 heads) come from L2; both would allow ~3-4 ms at T = 8192, as
// FlashMLA. Measured on the H200 (W_UV included): 12.3 ms at 64 heads, i.e.
// ~6 us (~11000 clocks) per tile and block, with the 128-byte swizzled
// layout (the unswizzled one: 14.1 ms), all of S on warpgroup 0 (S split
// over both: 12.9 ms); the software-pipelined loop and the gather issued
// before S made no difference. The per-tile time is thus not the matrix
// work or shared-memory bandwidth but latency: the 4608 16-byte gathers of
// a tile, the warp-0 index compaction (two dependent global loads) and
// two block barriers per tile (next steps: fewer, larger gather requests
// and the compaction off the critical path, e.g. a producer warp).
//
// Warp-level attention kernel (as FlashMLA's sparse prefill): one block per
// query row and group of HC heads (HC = 64, or 32/16 for small head counts),
// the group's heads being the M dimension of both products. The row's top-k
// indices are checked and compacted into a list of cache-entry offsets in
// shared memory (chunks of 1024), then the block walks that list in tiles of
// 48 keys (DSA_SPARSE_MLA_TILE_KEYS; on the H200 48 beat 32 by ~9%: per-tile
// costs are a large share), gathering tile t + 1 (cp.async, 16 bytes per
// copy) while tile t computes:
//   1. S = Q K^T: warp (head group of kM heads, key slice) multiplies Q and
//      the staged keys from shared memory on Bf16WarpMma and stores scaled
//      scores (log2 domain) to shared memory;
//   2. online softmax in fp32, a few threads per head row; P goes back as
//      bf16, with the factor that rescales each row's running output;
//   3. O += P V: V is the first 512 dims of the same staged tile (LoadBTrans);
//      every warp owns all HC heads times 512 / warps value dims, so each V
//      fragment loaded feeds HC / kM products.
// The fp8 cache (vLLM's fp8_ds_mla) is gathered raw and dequantised into the
// bf16 tile in shared memory: fp8 * power-of-two scale is exact in bf16.
// The normalised latent output o (bf16) goes to stream scratch; W_UV is then
// one strided-batched bf16 GEMM over heads on the platform's GEMM
// (wuv.h: cuBLASLt on CUDA).
//
// Other shapes (kv_lora / rope other than 512 / 64, or cache entries that
// are not 16-byte aligned) run on a plain FMA kernel pair with the same
// semantics.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/stream_scratch.h"
#include "attention/gpu/sparse_mla/launch.h"
#include "attention/gpu/sparse_mla/wuv.h"

#if defined(__clang__) && !defined(__CUDA__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

namespace dsa::attention::gpu {
namespace {

using ::dsa::gpu::Bf16ToFloat;
using ::dsa::gpu::Bf16WarpMma;
using ::dsa::gpu::DecodeFp8;
using ::dsa::gpu::FloatToBf16;
using ::dsa::gpu::Fp8Format;
using Mma = Bf16WarpMma;

constexpr const char* kOp = "sparse_mla";
constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kLog2e = 1.4426950408889634f;

// The matrix kernel's shape.
constexpr int kLora = 512;
constexpr int kRope = 64;
constexpr int kDim = kLora + kRope;  // 576
// Shared-memory rows of Q and of keys: 1168 bytes, so that the 8 rows one
// ldmatrix reads fall on 8 different 16-byte bank groups.
constexpr int kLd = kDim + 8;
// Keys per tile (a multiple of 16): more keys per tile mean fewer reloads
// of Q per key and fewer barriers, but less room for double buffering.
#ifndef DSA_SPARSE_MLA_TILE_KEYS
#define DSA_SPARSE_MLA_TILE_KEYS 48
#endif
// Whole N tiles of the matrix instruction (AMD's 32-wide MFMA takes 32).
constexpr int kTileKeys =
    DSA_SPARSE_MLA_TILE_KEYS % Mma::kN == 0 ? DSA_SPARSE_MLA_TILE_KEYS : 32;
// Threads of the attention block: 8 NVIDIA warps, 128 output floats per
// thread. (512 threads, 64 floats each, measured 6% slower on the H200: the
// extra reloads of Q and P cost more than the extra warps hide.)
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kDsaWarpSize;
constexpr int kIndexChunk = 1024;  // top-k indices compacted at a time
constexpr int kIndicesPerThread = kIndexChunk / kThreads;
constexpr int kFp8Tiles = kLora / 128;
constexpr int kFp8EntryBytes = kLora + 4 * kFp8Tiles + 2 * kRope;  // 656
// Q K^T k-steps whose Q fragments a warp keeps in registers for the whole
// row (the last ones), instead of reloading them from shared memory for
// every key tile (Q is the same for every tile). Limited by the registers
// the 128 output floats per thread leave: 8 with 48-key tiles.
#ifndef DSA_SPARSE_MLA_Q_REGISTER_STEPS
#define DSA_SPARSE_MLA_Q_REGISTER_STEPS 8
#endif
constexpr int kQRegisterSteps = DSA_SPARSE_MLA_Q_REGISTER_STEPS;
// Independent accumulator sets of a warp's Q K^T (consecutive k-steps go to
// different sets, summed at the end), so that the products of a score
// fragment do not form one dependent chain; each set costs 4 floats per
// fragment. 1, 2 and 4 measured the same on the H200.
#ifndef DSA_SPARSE_MLA_QK_CHAINS
#define DSA_SPARSE_MLA_QK_CHAINS 2
#endif
constexpr int kQkChains = DSA_SPARSE_MLA_QK_CHAINS;
constexpr int kSLd = kTileKeys + 1;  // fp32 scores, + 1 against conflicts
constexpr int kPLd = kTileKeys + 8;  // bf16 probabilities; rows 16 bytes
                                     // off the bank period (ldmatrix)
static_assert(kIndexChunk % kThreads == 0, "index chunk per thread");
static_assert(kFp8EntryBytes % 16 == 0, "fp8 entries in 16-byte copies");
static_assert(kLora % (kWarps * Mma::kN) == 0, "value dims per warp");
static_assert(kDim % Mma::kK == 0 && kTileKeys % Mma::kK == 0, "k steps");

// --------------------------------------------------------------------------
// Small device helpers.

__device__ __forceinline__ float LoadFloat(const void* base, FloatFormat f,
                                           int64_t i) {
  return f == FloatFormat::kBFloat16
             ? Bf16ToFloat(static_cast<const uint16_t*>(base)[i])
             : static_cast<const float*>(base)[i];
}

// The row's request and the number of its tokens the block table can hold;
// an invalid request gives no tokens.
struct RowRequest {
  int32_t request;
  int64_t seq_len;
};

__device__ __forceinline__ RowRequest LoadRowRequest(const SparseMlaParams& p,
                                                     int64_t t) {
  RowRequest rr{-1, 0};
  const int32_t r = p.token_request[t];
  if (r < 0 || r >= p.num_requests) return rr;
  int64_t len = p.seq_lens[r];
  const int64_t capacity =
      static_cast<int64_t>(p.max_blocks_per_request) * p.block_size;
  if (len > capacity) len = capacity;
  if (len < 0) len = 0;
  rr.request = r;
  rr.seq_len = len;
  return rr;
}

// Byte offset of the cache entry of top-k index `idx`, or -1 when the index
// is padding or invalid (outside the request, or its block outside the
// cache).
__device__ __forceinline__ int64_t EntryOffset(const SparseMlaParams& p,
                                               const RowRequest& rr,
                                               int32_t idx) {
  if (idx < 0 || idx >= rr.seq_len) return -1;
  const int32_t block =
      p.block_table[rr.request * p.block_table_stride + idx / p.block_size];
  if (block < 0 || block >= p.num_blocks) return -1;
  return block * p.cache_block_stride +
         static_cast<int64_t>(idx % p.block_size) * p.cache_token_stride;
}

// --------------------------------------------------------------------------
// The matrix attention kernel.

// The largest divisor of n that is at most most.
constexpr int LargestDivisorAtMost(int n, int most) {
  int d = most < n ? most : n;
  while (d > 1 && n % d != 0) --d;
  return d;
}

template <int HC, bool kFp8>
struct MmaLayout {
  static constexpr int kMTiles = HC / Mma::kM;
  // Q K^T: kQkGroups head groups (one M tile each) x kQkSplits key slices.
  static constexpr int kQkGroups = kMTiles;
  static constexpr int kQkSplits =
      LargestDivisorAtMost(kTileKeys / Mma::kN, kWarps / kQkGroups);
  static constexpr int kQkKeys = kTileKeys / kQkSplits;
  static constexpr int kQkNTiles = kQkKeys / Mma::kN;
  // P V: every warp owns all HC heads x kPvDims value dims.
  static constexpr int kPvDims = kLora / kWarps;
  static constexpr int kPvNTiles = kPvDims / Mma::kN;
  // Softmax: kRowThreads threads per head row.
  static constexpr int kRowThreads = kThreads / HC;
  static constexpr int kRowKeys = kTileKeys / kRowThreads;
  // bf16: tiles land in the key buffers (t computing, t + 1 arriving).
  // fp8: raw tiles land in two raw buffers and are dequantised into one
  // key buffer. (A software pipeline with Q K^T of t + 1 beside P V of t, a
  // third buffer and two barriers per tile, measured no faster.)
  static constexpr int kKeyBuffers = kFp8 ? 1 : 2;
  static constexpr int kRawBuffers = kFp8 ? 2 : 0;

  static_assert(HC % Mma::kM == 0, "heads per block: whole M tiles");
  static_assert(kWarps % kQkGroups == 0, "Q K^T warps");
  static_assert(kQkKeys % Mma::kN == 0, "Q K^T key slices");
  static_assert(kThreads % HC == 0 && kRowThreads <= kDsaWarpSize &&
                    kTileKeys % kRowThreads == 0 && kRowKeys % 2 == 0,
                "softmax rows: whole bf16 pairs per thread");

  // Shared memory, in bytes (every offset a multiple of 16).
  static constexpr int kQBytes = HC * kLd * 2;
  static constexpr int kKeyBytes = kTileKeys * kLd * 2;
  static constexpr int kRawBytes = kTileKeys * kFp8EntryBytes;
  static constexpr int kSBytes = (HC * kSLd * 4 + 15) / 16 * 16;
  static constexpr int kPBytes = HC * kPLd * 2;
  static constexpr int kQOff = 0;
  static constexpr int kKeyOff = kQOff + kQBytes;
  static constexpr int kRawOff = kKeyOff + kKeyBuffers * kKeyBytes;
  static constexpr int kSOff = kRawOff + kRawBuffers * kRawBytes;
  static constexpr int kPOff = kSOff + kSBytes;
  static constexpr int kAlphaOff = kPOff + kPBytes;
  static constexpr int kSlotOff = kAlphaOff + HC * 4;
  static constexpr int kScanOff = kSlotOff + kIndexChunk * 8;
  static constexpr int kBytes = kScanOff + (kWarps + 1) * 4;
};

// Compacts top-k indices [begin, min(begin + kIndexChunk, end)) of row t
// into slots[] (cache-entry byte offsets, in index order) and returns
// their number. Starts and ends with a barrier.
__device__ __forceinline__ int CompactChunk(const SparseMlaParams& p, int64_t t,
                                            const RowRequest& rr, int begin,
                                            int end, int64_t* slots,
                                            int* scan) {
  const int tid = threadIdx.x;
  const int lane = tid % kDsaWarpSize, warp = tid / kDsaWarpSize;
  int64_t off[kIndicesPerThread];
  int n = 0;
  const int32_t* row = p.topk_indices + t * p.topk_stride;
#pragma unroll
  for (int j = 0; j < kIndicesPerThread; ++j) {
    const int i = begin + tid * kIndicesPerThread + j;
    if (i < end && rr.request >= 0) {
      const int64_t o = EntryOffset(p, rr, row[i]);
      if (o >= 0) off[n++] = o;
    }
  }
  // Block-wide exclusive scan of n.
  int inclusive = n;
#pragma unroll
  for (int d = 1; d < kDsaWarpSize; d *= 2) {
    const int v = DSA_SHFL_UP(inclusive, d, kDsaWarpSize);
    if (lane >= d) inclusive += v;
  }
  __syncthreads();  // the previous chunk's slots and scan are no longer read
  if (lane == kDsaWarpSize - 1) scan[warp] = inclusive;
  __syncthreads();
  int base = 0, total = 0;
  for (int w = 0; w < kWarps; ++w) {
    const int s = scan[w];
    if (w < warp) base += s;
    total += s;
  }
  base += inclusive - n;
#pragma unroll
  for (int j = 0; j < kIndicesPerThread; ++j) {
    if (j < n) slots[base + j] = off[j];
  }
  __syncthreads();
  return total;
}

// Starts the gather of keys [first, first + kTileKeys) of the compacted list
// (count entries valid) into the tile at `dst` (bf16 cache: the bf16 tile;
// fp8 cache: the raw entries). Keys past count are zero-filled.
template <bool kFp8>
__device__ __forceinline__ void GatherTile(const SparseMlaParams& p,
                                           const int64_t* slots, int first,
                                           int count, uint8_t* dst) {
  constexpr int kChunks = (kFp8 ? kFp8EntryBytes : kDim * 2) / 16;
  constexpr int kDstStride = kFp8 ? kFp8EntryBytes : kLd * 2;
  // A warp copies whole entries, its lanes consecutive 16-byte chunks: one
  // slot lookup per entry and no index division.
  const int lane = threadIdx.x % kDsaWarpSize,
            warp = threadIdx.x / kDsaWarpSize;
  for (int key = warp; key < kTileKeys; key += kWarps) {
    const bool valid = first + key < count;
    const uint8_t* src = valid ? p.kv_cache + slots[first + key] : p.kv_cache;
    uint8_t* d = dst + key * kDstStride;
#pragma unroll
    for (int c = lane; c < kChunks; c += kDsaWarpSize) {
      CopyAsync16(d + c * 16, valid ? src + c * 16 : src, valid);
    }
  }
  CopyAsyncCommit();
}

// Two fp8 codes (bits 0-7 and 8-15 of `pair`) times `scale`, as two bf16
// (PackBf16x2). The 7 magnitude bits go to float bits 20-26, which reads
// them as a float of exponent field eeee and mantissa mmm, normal or
// subnormal alike; a multiply by 2^(127 - bias) gives the value exactly, a
// second by the scale (kept apart so that no scale can overflow it). About 5
// instructions per value instead of DecodeFp8's branches; NaN codes stay NaN.
template <Fp8Format F>
__device__ __forceinline__ uint32_t Fp8PairToBf16(uint32_t pair, float scale) {
  // 2^(127 - exponent bias): 2^120 (e4m3fn), 2^119 (e4m3fnuz).
  constexpr float kRebias = F == Fp8Format::kE4m3fn ? 0x1p120f : 0x1p119f;
  float v[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t code = (pair >> (8 * i)) & 0xffu;
    const float mag = __uint_as_float((code & 0x7fu) << 20) * kRebias * scale;
    const bool nan =
        F == Fp8Format::kE4m3fn ? (code & 0x7fu) == 0x7fu : code == 0x80u;
    v[i] = nan ? __uint_as_float(0x7fc00000u)
               : __uint_as_float(__float_as_uint(mag) | ((code & 0x80u) << 24));
  }
  return ::dsa::gpu::PackBf16x2(v[0], v[1]);
}

// Dequantises a raw fp8_ds_mla tile into the bf16 key tile (exact: fp8
// values times power-of-two scales fit bf16). 16 codes per step; the bf16
// rope part is copied.
template <Fp8Format F>
__device__ __forceinline__ void DequantTile(const uint8_t* raw,
                                            uint16_t* keys) {
  constexpr int kCodeChunks = kLora / 16;
  for (int w = threadIdx.x; w < kTileKeys * kCodeChunks; w += kThreads) {
    const int key = w / kCodeChunks, part = w % kCodeChunks;
    const uint8_t* entry = raw + key * kFp8EntryBytes;
    const uint4 codes = *reinterpret_cast<const uint4*>(entry + part * 16);
    const float scale =
        *reinterpret_cast<const float*>(entry + kLora + 4 * (part * 16 / 128));
    const uint32_t in[4] = {codes.x, codes.y, codes.z, codes.w};
    uint32_t out[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      out[i] = Fp8PairToBf16<F>(in[i / 2] >> (16 * (i % 2)), scale);
    }
    uint4* d = reinterpret_cast<uint4*>(keys + key * kLd + part * 16);
    d[0] = make_uint4(out[0], out[1], out[2], out[3]);
    d[1] = make_uint4(out[4], out[5], out[6], out[7]);
  }
  constexpr int kRopeChunks = kRope / 8;
  for (int w = threadIdx.x; w < kTileKeys * kRopeChunks; w += kThreads) {
    const int key = w / kRopeChunks, r = w % kRopeChunks;
    *reinterpret_cast<uint4*>(keys + key * kLd + kLora + r * 8) =
        *reinterpret_cast<const uint4*>(raw + key * kFp8EntryBytes + kLora +
                                        4 * kFp8Tiles + r * 16);
  }
}

// Where the attention kernel puts its result. One split (part_o null):
// latent[t, h, :] = the normalised output (bf16). Several (few rows: the
// top-k list is split over blockIdx.z so that the grid fills the GPU): each
// split's own normalised output, fp32, at part_o[split][t][h][:], and its
// log2-sum-exp at part_lse[split][t][h] (-inf when it saw no key), merged
// by CombineSplitsKernel.
struct MmaOutput {
  uint16_t* latent;
  float* part_o;
  float* part_lse;
  int splits;
};

// Grid: (tokens, ceil(heads / HC), splits); heads [blockIdx.y * HC, ...).
template <int HC, bool kFp8, Fp8Format F>
__global__ void __launch_bounds__(kThreads, 1)
    SparseMlaMmaKernel(SparseMlaParams p, int64_t token_begin, MmaOutput out) {
  using L = MmaLayout<HC, kFp8>;
  extern __shared__ __align__(16) uint8_t smem[];
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem + L::kQOff);
  uint8_t* key_base = smem + L::kKeyOff;
  uint8_t* raw_base = smem + L::kRawOff;
  float* s_s = reinterpret_cast<float*>(smem + L::kSOff);
  uint16_t* p_s = reinterpret_cast<uint16_t*>(smem + L::kPOff);
  float* alpha_s = reinterpret_cast<float*>(smem + L::kAlphaOff);
  int64_t* slots = reinterpret_cast<int64_t*>(smem + L::kSlotOff);
  int* scan = reinterpret_cast<int*>(smem + L::kScanOff);

  const int64_t t = token_begin + blockIdx.x;
  const int h0 = blockIdx.y * HC;
  const int tid = threadIdx.x;
  const int lane = tid % kDsaWarpSize, warp = tid / kDsaWarpSize;

  // Q, rounded to bf16 once; heads past the last are zeros.
  for (int i = tid; i < HC * kDim; i += kThreads) {
    const int hh = i / kDim, d = i % kDim;
    float v = 0.0f;
    if (h0 + hh < p.heads) {
      v = LoadFloat(p.q, p.q_format,
                    t * p.q_token_stride + (h0 + hh) * p.q_head_stride + d);
    }
    q_s[hh * kLd + d] = FloatToBf16(v);
  }
  const RowRequest rr = LoadRowRequest(p, t);
  const float scale_log2 = p.softmax_scale * kLog2e;

  // Softmax state of head row sm_row, kept (identically) by its kRowThreads
  // threads.
  const int sm_row = tid / L::kRowThreads, sm_part = tid % L::kRowThreads;
  float m_run = kNegInf, l_run = 0.0f;

  Mma::C o[L::kMTiles][L::kPvNTiles];
#pragma unroll
  for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < L::kPvNTiles; ++nt) Mma::Zero(o[mt][nt]);
  }
  constexpr int kQSteps = kDim / Mma::kK;
  constexpr int kQRegs = kQRegisterSteps < kQSteps ? kQRegisterSteps : kQSteps;
  constexpr int kQSmemDim = kDim - kQRegs * Mma::kK;
  Mma::A q_reg[kQRegs > 0 ? kQRegs : 1];
  if constexpr (kQRegs > 0) {
    __syncthreads();  // q_s written
    const uint16_t* qa = q_s + (warp % L::kQkGroups) * Mma::kM * kLd;
#pragma unroll
    for (int i = 0; i < kQRegs; ++i) {
      Mma::LoadA(q_reg[i], qa + kQSmemDim + i * Mma::kK, kLd, lane);
    }
  }

  const int per_split = (p.topk + out.splits - 1) / out.splits;
  const int range_begin = blockIdx.z * per_split;
  const int range_end =
      p.topk - range_begin < per_split ? p.topk : range_begin + per_split;
  // 1. S = Q K^T over `keys`, scaled into the log2 domain; keys past
  // `valid` -inf.
  auto qk = [&](const uint16_t* keys, int valid) {
    if (warp >= L::kQkGroups * L::kQkSplits) return;
    const int hg = warp % L::kQkGroups, ks = warp / L::kQkGroups;
    const uint16_t* qa = q_s + hg * Mma::kM * kLd;
    const uint16_t* kb = keys + ks * L::kQkKeys * kLd;
    static_assert(kQSmemDim % (kQkChains * Mma::kK) == 0,
                  "Q K^T k-steps in whole rounds of the accumulator sets");
    Mma::C sc[kQkChains][L::kQkNTiles];
#pragma unroll
    for (int c = 0; c < kQkChains; ++c) {
#pragma unroll
      for (int nt = 0; nt < L::kQkNTiles; ++nt) Mma::Zero(sc[c][nt]);
    }
#pragma unroll 2
    for (int k_round = 0; k_round < kQSmemDim; k_round += kQkChains * Mma::kK) {
#pragma unroll
      for (int c = 0; c < kQkChains; ++c) {
        const int k0 = k_round + c * Mma::kK;
        Mma::A a;
        Mma::LoadA(a, qa + k0, kLd, lane);
#pragma unroll
        for (int nt = 0; nt < L::kQkNTiles; ++nt) {
          Mma::B b;
          Mma::LoadB(b, kb + nt * Mma::kN * kLd + k0, kLd, lane);
          Mma::Run(sc[c][nt], a, b);
        }
      }
    }
    if constexpr (kQRegs > 0) {
#pragma unroll
      for (int i = 0; i < kQRegs; ++i) {
#pragma unroll
        for (int nt = 0; nt < L::kQkNTiles; ++nt) {
          Mma::B b;
          Mma::LoadB(b, kb + nt * Mma::kN * kLd + kQSmemDim + i * Mma::kK, kLd,
                     lane);
          Mma::Run(sc[i % kQkChains][nt], q_reg[i], b);
        }
      }
    }
    Mma::C s[L::kQkNTiles];
#pragma unroll
    for (int nt = 0; nt < L::kQkNTiles; ++nt) {
      s[nt] = sc[0][nt];
#pragma unroll
      for (int c = 1; c < kQkChains; ++c) {
#pragma unroll
        for (int i = 0; i < Mma::kCPerLane; ++i) s[nt].v[i] += sc[c][nt].v[i];
      }
    }
#pragma unroll
    for (int nt = 0; nt < L::kQkNTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < Mma::kCPerLane; ++i) {
        const int row = hg * Mma::kM + Mma::CRow(lane, i);
        const int col = ks * L::kQkKeys + nt * Mma::kN + Mma::CCol(lane, i);
        s_s[row * kSLd + col] = col < valid ? s[nt].v[i] * scale_log2 : kNegInf;
      }
    }
  };

  // 2. Online softmax of row sm_row over the scores in s_s: probabilities
  // (bf16) to p_buf, the rescale factor of the running output to alpha_buf.
  auto softmax = [&](uint16_t* p_buf, float* alpha_buf) {
    float sv[L::kRowKeys];
    float mx = kNegInf;
#pragma unroll
    for (int j = 0; j < L::kRowKeys; ++j) {
      sv[j] = s_s[sm_row * kSLd + sm_part * L::kRowKeys + j];
      mx = fmaxf(mx, sv[j]);
    }
#pragma unroll
    for (int d = 1; d < L::kRowThreads; d *= 2) {
      mx = fmaxf(mx, DSA_SHFL_XOR(mx, d, kDsaWarpSize));
    }
    const float m_new = fmaxf(m_run, mx);
    // A row still at -inf (no finite score yet) subtracts 0 instead.
    const float m_use = m_new == kNegInf ? 0.0f : m_new;
    const float alpha = exp2f(m_run - m_use);
    float sum = 0.0f;
    uint32_t* prow = reinterpret_cast<uint32_t*>(p_buf + sm_row * kPLd +
                                                 sm_part * L::kRowKeys);
#pragma unroll
    for (int j = 0; j < L::kRowKeys; j += 2) {
      // The sum uses the rounded probabilities, the ones P V multiplies.
      const uint32_t pair = ::dsa::gpu::PackBf16x2(exp2f(sv[j] - m_use),
                                                   exp2f(sv[j + 1] - m_use));
      sum += __uint_as_float(pair << 16) + __uint_as_float(pair & 0xffff0000u);
      prow[j / 2] = pair;
    }
#pragma unroll
    for (int d = 1; d < L::kRowThreads; d *= 2) {
      sum += DSA_SHFL_XOR(sum, d, kDsaWarpSize);
    }
    l_run = l_run * alpha + sum;
    m_run = m_new;
    if (sm_part == 0) alpha_buf[sm_row] = alpha;
  };

  // 3. O = O * alpha + P V over this warp's value dims.
  auto pv = [&](const uint16_t* keys, const uint16_t* p_buf,
                const float* alpha_buf) {
    // Most tiles leave every row maximum as it was (alpha exactly 1): the
    // rescale is skipped unless a row of this lane moved.
    float alpha[L::kMTiles][Mma::kCPerLane];
    bool moved = false;
#pragma unroll
    for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
      for (int i = 0; i < Mma::kCPerLane; ++i) {
        alpha[mt][i] = alpha_buf[mt * Mma::kM + Mma::CRow(lane, i)];
        moved |= alpha[mt][i] != 1.0f;
      }
    }
    if (moved) {
#pragma unroll
      for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
        for (int i = 0; i < Mma::kCPerLane; ++i) {
#pragma unroll
          for (int nt = 0; nt < L::kPvNTiles; ++nt) {
            o[mt][nt].v[i] *= alpha[mt][i];
          }
        }
      }
    }
    const uint16_t* vb = keys + warp * L::kPvDims;
#pragma unroll
    for (int kk = 0; kk < kTileKeys; kk += Mma::kK) {
      Mma::A pa[L::kMTiles];
#pragma unroll
      for (int mt = 0; mt < L::kMTiles; ++mt) {
        Mma::LoadA(pa[mt], p_buf + mt * Mma::kM * kPLd + kk, kPLd, lane);
      }
#pragma unroll
      for (int nt = 0; nt < L::kPvNTiles; ++nt) {
        Mma::B b;
        Mma::LoadBTrans(b, vb + kk * kLd + nt * Mma::kN, kLd, lane);
#pragma unroll
        for (int mt = 0; mt < L::kMTiles; ++mt) Mma::Run(o[mt][nt], pa[mt], b);
      }
    }
  };

  auto key_buffer = [&](int tile) {
    return reinterpret_cast<uint16_t*>(key_base +
                                       (tile % L::kKeyBuffers) * L::kKeyBytes);
  };
  auto raw_buffer = [&](int tile) {
    return raw_base + (tile % 2) * L::kRawBytes;
  };
  // Where tile `tile`'s gather lands.
  auto landing = [&](int tile) {
    return kFp8 ? raw_buffer(tile)
                : reinterpret_cast<uint8_t*>(key_buffer(tile));
  };

  for (int chunk = range_begin; chunk < range_end; chunk += kIndexChunk) {
    const int count = CompactChunk(p, t, rr, chunk, range_end, slots, scan);
    const int tiles = (count + kTileKeys - 1) / kTileKeys;
    if (tiles == 0) continue;
    GatherTile<kFp8>(p, slots, 0, count, landing(0));
    for (int tile = 0; tile < tiles; ++tile) {
      CopyAsyncWaitAll();
      __syncthreads();  // tile `tile` is in; tile - 1 is no longer read
      if (tile + 1 < tiles) {
        GatherTile<kFp8>(p, slots, (tile + 1) * kTileKeys, count,
                         landing(tile + 1));
      }
      uint16_t* keys = key_buffer(tile);
      if constexpr (kFp8) {
        DequantTile<F>(raw_buffer(tile), keys);
        __syncthreads();
      }
      qk(keys, count - tile * kTileKeys);
      __syncthreads();
      softmax(p_s, alpha_s);
      __syncthreads();
      pv(keys, p_s, alpha_s);
    }
  }

  // Normalise (a row without any valid key has l = 0 and outputs zeros) and
  // store the latent output.
  __syncthreads();
  if (sm_part == 0) alpha_s[sm_row] = l_run > 0.0f ? 1.0f / l_run : 0.0f;
  // (token, head) index of this block's output row `row`.
  const int64_t out_row0 =
      (static_cast<int64_t>(blockIdx.z) * gridDim.x + (t - token_begin)) *
          p.heads +
      h0;
  if (out.part_o != nullptr && sm_part == 0 && h0 + sm_row < p.heads) {
    out.part_lse[out_row0 + sm_row] =
        l_run > 0.0f ? m_run + __log2f(l_run) : kNegInf;
  }
  __syncthreads();
  if (out.part_o != nullptr) {  // a split of few rows: fp32, direct
#pragma unroll
    for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
      for (int i = 0; i < Mma::kCPerLane; ++i) {
        const int row = mt * Mma::kM + Mma::CRow(lane, i);
        if (h0 + row >= p.heads) continue;
        const float inv = alpha_s[row];
        const int64_t at = (out_row0 + row) * kLora + warp * L::kPvDims;
#pragma unroll
        for (int nt = 0; nt < L::kPvNTiles; ++nt) {
          out.part_o[at + nt * Mma::kN + Mma::CCol(lane, i)] =
              o[mt][nt].v[i] * inv;
        }
      }
    }
    return;
  }
  // bf16 through shared memory (the key buffers, free now), then whole
  // 16-byte chunks per thread: coalesced rows instead of 2-byte scatter.
  constexpr int kStageLd = kLora + 8;
  static_assert(HC * kStageLd * 2 <= L::kSOff - L::kKeyOff,
                "output staging fits the key buffers");
  uint16_t* stage = reinterpret_cast<uint16_t*>(key_base);
#pragma unroll
  for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
    for (int i = 0; i < Mma::kCPerLane; ++i) {
      const int row = mt * Mma::kM + Mma::CRow(lane, i);
      const float inv = alpha_s[row];
      uint16_t* dst = stage + row * kStageLd + warp * L::kPvDims;
#pragma unroll
      for (int nt = 0; nt < L::kPvNTiles; ++nt) {
        dst[nt * Mma::kN + Mma::CCol(lane, i)] =
            FloatToBf16(o[mt][nt].v[i] * inv);
      }
    }
  }
  __syncthreads();
  constexpr int kRowChunks = kLora / 8;
  const int rows_here = p.heads - h0 < HC ? p.heads - h0 : HC;
  for (int c = tid; c < rows_here * kRowChunks; c += kThreads) {
    const int row = c / kRowChunks, part = c % kRowChunks;
    *reinterpret_cast<uint4*>(out.latent + (out_row0 + row) * kLora +
                              part * 8) =
        *reinterpret_cast<const uint4*>(stage + row * kStageLd + part * 8);
  }
}

// latent[t, h, :] = the splits' outputs weighted by their share of the
// softmax mass (exp2 of their log2-sum-exp); zeros when no split saw a key.
// Grid: (rows, heads); 128 threads, 4 dims each.
__global__ void __launch_bounds__(128)
    CombineSplitsKernel(int64_t rows, int heads, int splits,
                        const float* part_o, const float* part_lse,
                        uint16_t* latent) {
  const int64_t th = blockIdx.x * static_cast<int64_t>(heads) + blockIdx.y;
  const int64_t stride = rows * heads;
  float m = kNegInf;
  for (int s = 0; s < splits; ++s) m = fmaxf(m, part_lse[s * stride + th]);
  float acc[kLora / 128] = {};
  float total = 0.0f;
  if (m != kNegInf) {
    for (int s = 0; s < splits; ++s) {
      const float w = exp2f(part_lse[s * stride + th] - m);
      if (w == 0.0f) continue;
      total += w;
      const float* o = part_o + (s * stride + th) * kLora;
#pragma unroll
      for (int k = 0; k < kLora / 128; ++k)
        acc[k] += w * o[threadIdx.x + 128 * k];
    }
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
#pragma unroll
  for (int k = 0; k < kLora / 128; ++k) {
    latent[th * kLora + threadIdx.x + 128 * k] = FloatToBf16(acc[k] * inv);
  }
}

// --------------------------------------------------------------------------
// The warpgroup attention kernel (sm_90a: wgmma, HGMMA in SASS), for a bf16
// cache and 64 or more heads. One block of two warpgroups per (query row,
// group of 64 heads, top-k split); the 64 heads are the M of both products.
// Shared memory holds Q [64 x 576], two 64-key tiles and P [64 x 64], all
// bf16 in the core-matrix layout of WarpgroupBf16Mma (8 rows x 16 bytes per
// 128-byte core matrix, row groups of 8 keys or heads 576 * 16 bytes apart).
// Per tile:
//   1. warpgroup g: S_g = Q K_g^T over the tile's keys [32 g, 32 g + 32)
//      (wgmma m64n32k16, 36 k-steps; both operands K-major in shared
//      memory);
//   2. while those run, both warpgroups start the gather of tile t + 1
//      (cp.async, 16 bytes a copy, core-matrix rows: 8 consecutive threads
//      fill one 128-byte core matrix, so the shared-memory writes do not
//      conflict) and warp 0 resolves the cache offsets of tile t + 2;
//   3. online softmax: row maxima exchanged through shared memory (both
//      warpgroups then hold the same running maximum, so their partial row
//      sums add up at the end), P_g (bf16) into its 32 columns of P;
//   4. warpgroup g: O_g += P V_g with V_g the tile's dims [256 g, 256 g +
//      256): wgmma m64n256k16 with B read MN-major straight from the key
//      tile (IssueMnB), no transposed copy.
// Warp 0 compacts the row's valid indices into those tiles as it goes
// (tile t + 2's cache offsets while tile t's products run; slot t % 3 holds
// tile t's), so -1 padding and invalid indices cost nothing, and the last
// tile is the only partial one.
namespace wg {
constexpr int kHeads = 64;
constexpr int kKeys = 64;
constexpr int kThreads = 256;
constexpr int kHalfKeys = kKeys / 2;  // S columns of a warpgroup
constexpr int kHalfDims = kLora / 2;  // O columns of a warpgroup
constexpr int kChunks = kDim / 8;     // 16-byte chunks of a bf16 entry: 72
constexpr int kRowGroup = kDim * 16;  // bytes between 8-row groups: 9216
// 128-byte swizzled layout: a 64-dim atom of a 64-row tile (Q or keys).
constexpr int kAtomBytes = 64 * 128;
constexpr int kPRowGroup = kKeys * 16;  // of P: 1024
constexpr int kTileBytes = kKeys * kDim * 2;
constexpr int kQOff = 0;
constexpr int kKeyOff = kQOff + kHeads * kDim * 2;
constexpr int kPOff = kKeyOff + 2 * kTileBytes;
constexpr int kMaxOff = kPOff + kHeads * kKeys * 2;
constexpr int kSlotOff = kMaxOff + 2 * kHeads * 4;
constexpr int kCountOff = kSlotOff + 3 * kKeys * 8;
constexpr int kBytes = kCountOff + 4 * 4;  // 231440 of the H200's 232448
constexpr int kStageLd = kLora + 8;        // output staging rows (bf16)
static_assert(kHeads * kStageLd * 2 <= 2 * kTileBytes, "staging fits");
static_assert(kKeys * kChunks % kThreads == 0, "whole gather rounds");
}  // namespace wg

#if defined(DSA_GPU_CUDA)
inline constexpr bool kWarpgroupAttention = ::dsa::gpu::kHasWarpgroupBf16Mma;
#else
inline constexpr bool kWarpgroupAttention = false;
#endif

// Grid: (tokens, ceil(heads / 64), splits). kOneWgScores: warpgroup 0
// computes all of S (m64n64, Q read from shared memory once per tile
// instead of twice, the softmax without an exchange) and hands the row
// rescale factors to warpgroup 1 with P; otherwise both warpgroups compute
// their half of the keys as in step 2 above.
// kFp8: an fp8_ds_mla cache; the 512 fp8 codes of each entry are loaded
// into registers and dequantised (exactly, Fp8PairToBf16) into the bf16 tile
// in two halves, while tile t's S and P V products run; the bf16 rope part
// is gathered with cp.async as for a bf16 cache.
// kSw128: Q, the key tiles and P in the 128-byte swizzled layout
// (WarpgroupBf16Mma::OffsetSw128, the same tile serving as K-major B of S
// and MN-major B of P V), instead of the unswizzled core-matrix layout.
template <bool kOneWgScores, bool kFp8, Fp8Format F, bool kPipelined,
          bool kSw128>
__global__ void __launch_bounds__(wg::kThreads, 1)
    SparseMlaWgmmaKernel(SparseMlaParams p, int64_t token_begin, MmaOutput out,
                         bool gather_first) {
#if defined(DSA_GPU_CUDA)
  if constexpr (!kWarpgroupAttention) {
    __trap();  // the launcher probes the device code first
  } else {
    // Keys of S per computing warpgroup.
    constexpr int kSKeys = kOneWgScores ? wg::kKeys : wg::kHalfKeys;
    using WgS = ::dsa::gpu::WarpgroupBf16Mma<kSKeys>;
    using WgO = ::dsa::gpu::WarpgroupBf16Mma<wg::kHalfDims>;
    extern __shared__ __align__(16) uint8_t smem[];
    uint8_t* q_s = smem + wg::kQOff;
    uint8_t* key_s = smem + wg::kKeyOff;
    uint8_t* p_s = smem + wg::kPOff;
    float* max_s = reinterpret_cast<float*>(smem + wg::kMaxOff);
    int64_t* slot_s = reinterpret_cast<int64_t*>(smem + wg::kSlotOff);
    int* count_s = reinterpret_cast<int*>(smem + wg::kCountOff);
    if constexpr (kSw128) {
      // Swizzle atoms must start 1024-byte aligned.
      if ((static_cast<uint32_t>(__cvta_generic_to_shared(smem)) & 1023u) !=
          0u) {
        __trap();
      }
    }
    // Byte offset of 16-byte chunk c (dims 8c .. 8c + 7) of row r (a key or
    // a head) in a key tile or Q; of P's element (row, key k).
    auto tile_off = [](int r, int c) -> uint32_t {
      if constexpr (kSw128) {
        return (c / 8) * wg::kAtomBytes + r * 128 + (((c % 8) ^ (r % 8)) * 16);
      } else {
        return (r / 8) * wg::kRowGroup + c * 128 + (r % 8) * 16;
      }
    };
    auto p_off = [](int row, int k) -> uint32_t {
      if constexpr (kSw128) {
        return row * 128 + (((k / 8) ^ (row % 8)) * 16) + (k % 8) * 2;
      } else {
        return (row / 8) * wg::kPRowGroup + (k / 8) * 128 + (row % 8) * 16 +
               (k % 8) * 2;
      }
    };

    const int64_t t = token_begin + blockIdx.x;
    const int h0 = blockIdx.y * wg::kHeads;
    const int tid = threadIdx.x;
    const int lane = tid % 32, warp = tid / 32;
    // The warpgroup index through a shuffle: a value the compiler knows is
    // warp-uniform, so a branch on it around wgmma is not serialised.
    const int group = __shfl_sync(0xffffffffu, warp / 4, 0);
    const int warp_in_group = warp % 4;
    const bool scores = !kOneWgScores || group == 0;  // computes S
    const RowRequest rr = LoadRowRequest(p, t);
    const int32_t* row_idx = p.topk_indices + t * p.topk_stride;
    const int per_split = (p.topk + out.splits - 1) / out.splits;
    const int range_begin = blockIdx.z * per_split;
    const int range_end =
        p.topk - range_begin < per_split ? p.topk : range_begin + per_split;
    // Warp 0 compacts the row's valid top-k indices, in order, into tiles
    // of 64 cache offsets: resolve(j) fills slot j % 3 with the next (up to)
    // 64 valid keys' offsets (-1 after them) and their count, reading the
    // index list 64 entries a step from `cursor` (the same in every lane).
    // A -1 or invalid index thus costs no product, and a row's tiles end
    // with its valid indices (a tile of count 0: the loop ends).
    int cursor = range_begin;
    auto resolve = [&](int j) {
      int64_t* slot = slot_s + (j % 3) * wg::kKeys;
      int filled = 0;
      while (filled < wg::kKeys && cursor < range_end) {
        int64_t off[2];
        bool valid[2];
        unsigned ballot[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = cursor + 32 * h + lane;
          off[h] = -1;
          if (i < range_end && rr.request >= 0) {
            off[h] = EntryOffset(p, rr, row_idx[i]);
          }
          valid[h] = off[h] >= 0;
          ballot[h] = __ballot_sync(0xffffffffu, valid[h]);
        }
        const int room = wg::kKeys - filled;
        const int n0 = __popc(ballot[0]), n = n0 + __popc(ballot[1]);
        const unsigned below = (1u << lane) - 1u;
        const int rank[2] = {__popc(ballot[0] & below),
                             n0 + __popc(ballot[1] & below)};
        unsigned last[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (valid[h] && rank[h] < room) slot[filled + rank[h]] = off[h];
          last[h] = __ballot_sync(0xffffffffu, valid[h] && rank[h] == room - 1);
        }
        if (n > room) {  // the tile is full inside this step: stop after
                         // its last key (__ffs counts from 1)
          cursor += last[0] != 0u ? __ffs(last[0]) : 32 + __ffs(last[1]);
          filled = wg::kKeys;
        } else {
          cursor += 64;
          filled += n;
        }
      }
      for (int k = filled + lane; k < wg::kKeys; k += 32) slot[k] = -1;
      if (lane == 0) count_s[j % 3] = filled;
    };
    // Starts the gather of tile j into key buffer j % 2; invalid keys are
    // zero-filled without a read.
    // (fp8: the rope chunks only; `dequant` does the rest.)
    auto gather = [&](int j) {
      uint8_t* dst = key_s + (j % 2) * wg::kTileBytes;
      const int64_t* offs = slot_s + (j % 3) * wg::kKeys;
      constexpr int kFirst = kFp8 ? kLora / 8 : 0;  // first chunk copied
      constexpr int kCopied = wg::kChunks - kFirst;
      // Chunk `part` (>= kFirst) of the bf16 tile comes from byte kSrc0 +
      // 16 part of the entry (fp8: the rope after the codes and scales).
      constexpr int kSrc0 = kFp8 ? kLora + 4 * kFp8Tiles - kFirst * 16 : 0;
#pragma unroll 6
      for (int c = tid; c < wg::kKeys * kCopied; c += wg::kThreads) {
        const int key_lo = c % 8, rest = c / 8;
        const int part = kFirst + rest % kCopied, key_hi = rest / kCopied;
        const int64_t off = offs[key_hi * 8 + key_lo];
        const bool valid = off >= 0;
        CopyAsync16(dst + tile_off(key_hi * 8 + key_lo, part),
                    p.kv_cache + (valid ? off + kSrc0 + part * 16 : 0), valid);
      }
      CopyAsyncCommit();
    };
    // fp8: half `half` of tile j's 64 x 32 chunks of 16 codes, from the
    // cache through registers into key buffer j % 2 (zeros for keys that
    // are not valid).
    auto dequant = [&](int j, int half) {
      if constexpr (kFp8) {
        uint8_t* dst = key_s + (j % 2) * wg::kTileBytes;
        const int64_t* offs = slot_s + (j % 3) * wg::kKeys;
        constexpr int kCodeChunks = kLora / 16;  // per entry
        constexpr int kPerThread = wg::kKeys * kCodeChunks / wg::kThreads / 2;
        uint4 codes[kPerThread];
        float scale[kPerThread];
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) {
          const int c = tid + wg::kThreads * (half * kPerThread + i);
          const int key = (c / 8 / kCodeChunks) * 8 + c % 8;
          const int part = (c / 8) % kCodeChunks;
          const int64_t off = offs[key];
          codes[i] = make_uint4(0, 0, 0, 0);
          scale[i] = 0.0f;
          if (off >= 0) {
            const uint8_t* e = p.kv_cache + off;
            codes[i] = *reinterpret_cast<const uint4*>(e + part * 16);
            scale[i] = *reinterpret_cast<const float*>(e + kLora +
                                                       4 * (part * 16 / 128));
          }
        }
#pragma unroll
        for (int i = 0; i < kPerThread; ++i) {
          const int c = tid + wg::kThreads * (half * kPerThread + i);
          const int key_lo = c % 8, key_hi = c / 8 / kCodeChunks;
          const int part = (c / 8) % kCodeChunks;
          const uint32_t in[4] = {codes[i].x, codes[i].y, codes[i].z,
                                  codes[i].w};
          uint32_t bf[8];
#pragma unroll
          for (int w = 0; w < 8; ++w) {
            bf[w] = Fp8PairToBf16<F>(in[w / 2] >> (16 * (w % 2)), scale[i]);
          }
          const int key = key_hi * 8 + key_lo;
          *reinterpret_cast<uint4*>(dst + tile_off(key, 2 * part)) =
              make_uint4(bf[0], bf[1], bf[2], bf[3]);
          *reinterpret_cast<uint4*>(dst + tile_off(key, 2 * part + 1)) =
              make_uint4(bf[4], bf[5], bf[6], bf[7]);
        }
      } else {
        (void)j;
        (void)half;
      }
    };

    // Prologue: offsets of tiles 0 and 1, Q (bf16; heads past the last are
    // zeros) in the same layout, tile 0.
    if (warp == 0) {
      resolve(0);
      resolve(1);
    }
    for (int c = tid; c < wg::kHeads * wg::kChunks; c += wg::kThreads) {
      const int h_lo = c % 8, rest = c / 8;
      const int part = rest % wg::kChunks, h_hi = rest / wg::kChunks;
      const int hh = h_hi * 8 + h_lo;
      uint32_t packed[4] = {0, 0, 0, 0};
      if (h0 + hh < p.heads) {
        const int64_t base =
            t * p.q_token_stride + (h0 + hh) * p.q_head_stride + part * 8;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          packed[e] = ::dsa::gpu::PackBf16x2(
              LoadFloat(p.q, p.q_format, base + 2 * e),
              LoadFloat(p.q, p.q_format, base + 2 * e + 1));
        }
      }
      *reinterpret_cast<uint4*>(q_s + tile_off(hh, part)) =
          make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
    __syncthreads();  // slots 0 and 1 written
    gather(0);
    dequant(0, 0);
    dequant(0, 1);
    CopyAsyncWaitAll();
    WgO::FenceStores();
    // The loop's condition comes out of a barrier reduction, so the compiler
    // sees it block-uniform (wgmma under a condition it cannot prove uniform
    // is serialised).
    bool more = __syncthreads_or(tid == 0 && count_s[0] > 0);

    const float scale_log2 = p.softmax_scale * kLog2e;
    const int row0 = 16 * warp_in_group + lane / 4;  // and row0 + 8
    float o[WgO::kAccPerThread];
#pragma unroll
    for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] = 0.0f;
    float m_run[2] = {kNegInf, kNegInf};
    float l_run[2] = {0.0f, 0.0f};  // this thread's columns only

    // Tile j's S (this warpgroup's part; a warpgroup that computes S
    // only) into scores: scaled into the log2 domain, invalid keys -inf;
    // the online softmax's running maximum, row sums and rescale factors
    // `alpha`; P (bf16) into p_s. The split variant exchanges the row
    // maxima through max_s around a barrier (which all threads reach).
    auto softmax = [&](int j, float(&sc)[WgS::kAccPerThread],
                       float(&alpha)[2]) {
      const int64_t* offs = slot_s + (j % 3) * wg::kKeys;
      const int key0 = kOneWgScores ? 0 : group * kSKeys;
      float mx[2] = {kNegInf, kNegInf};
#pragma unroll
      for (int i = 0; i < WgS::kAccPerThread; ++i) {
        const int key = key0 + WgS::AccCol(lane, i);
        sc[i] = offs[key] >= 0 ? sc[i] * scale_log2 : kNegInf;
        mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], sc[i]);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      }
      if constexpr (!kOneWgScores) {
        if (lane % 4 == 0) {
          max_s[group * wg::kHeads + row0] = mx[0];
          max_s[group * wg::kHeads + row0 + 8] = mx[1];
        }
        __syncthreads();  // both warpgroups' maxima
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          mx[r] = fmaxf(mx[r], max_s[(1 - group) * wg::kHeads + row0 + 8 * r]);
        }
      }
      float m_use[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m_new = fmaxf(m_run[r], mx[r]);
        // A row still at -inf (no finite score yet) subtracts 0 instead.
        m_use[r] = m_new == kNegInf ? 0.0f : m_new;
        alpha[r] = exp2f(m_run[r] - m_use[r]);
        m_run[r] = m_new;
      }
      float sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < WgS::kAccPerThread; i += 2) {
        const int r = (i / 2) % 2;
        const uint32_t pair = ::dsa::gpu::PackBf16x2(
            exp2f(sc[i] - m_use[r]), exp2f(sc[i + 1] - m_use[r]));
        // The sum uses the rounded probabilities, the ones P V multiplies.
        sum[r] +=
            __uint_as_float(pair << 16) + __uint_as_float(pair & 0xffff0000u);
        const int row = row0 + 8 * r;
        const int k = key0 + WgS::AccCol(lane, i);
        *reinterpret_cast<uint32_t*>(p_s + p_off(row, k)) = pair;
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * alpha[r] + sum[r];
    };
    auto issue_s = [&](int j, float(&sc)[WgS::kAccPerThread]) {
      const uint8_t* keys = key_s + (j % 2) * wg::kTileBytes;
      // The split variant's keys [32 g, 32 g + 32): rows 32 g on.
      const int first = kOneWgScores ? 0 : group * kSKeys;
      if constexpr (kSw128) {
        WgS::template IssueSw128<kDim>(
            sc, q_s, wg::kAtomBytes, keys + first * 128, wg::kAtomBytes, false);
      } else {
        WgS::template Issue<kDim>(sc, q_s, wg::kRowGroup,
                                  keys + (first / 8) * wg::kRowGroup,
                                  wg::kRowGroup, false);
      }
    };
    auto issue_pv = [&](int j) {
      const uint8_t* keys = key_s + (j % 2) * wg::kTileBytes;
      if constexpr (kSw128) {
        // Dims [256 g, 256 g + 256): 64-dim atoms 4 g on.
        WgO::template IssueSw128MnB<wg::kKeys>(
            o, p_s, wg::kAtomBytes,
            keys + group * (wg::kHalfDims / 64) * wg::kAtomBytes,
            wg::kAtomBytes, true);
      } else {
        WgO::template IssueMnB<wg::kKeys>(
            o, p_s, wg::kPRowGroup, keys + group * (wg::kHalfDims / 8) * 128,
            wg::kRowGroup, 128, true);
      }
    };
    // Most tiles leave every row maximum as it was (alpha exactly 1).
    auto rescale = [&](const float(&alpha)[2]) {
      if (alpha[0] != 1.0f || alpha[1] != 1.0f) {
#pragma unroll
        for (int e = 0; e < WgO::kAccPerThread; ++e) {
          o[e] *= alpha[(e / 2) % 2];
        }
      }
    };

    if constexpr (!kPipelined) {
      for (int j = 0; more; ++j) {
        float sc[WgS::kAccPerThread];
        float alpha[2];
        // Tile j + 1's gather (all zeros, without reads, past the row's last
        // key), issued while S runs (or, gather_first, just before).
        if (gather_first) gather(j + 1);
        if (scores) issue_s(j, sc);
        if (!gather_first) gather(j + 1);
        if (warp == 0) resolve(j + 2);  // tile j + 2's offsets
        dequant(j + 1, 0);
        if (scores) {
          WgS::Wait(sc);
          softmax(j, sc, alpha);
          if constexpr (kOneWgScores) {
            if (lane % 4 == 0) {  // for warpgroup 1
              max_s[row0] = alpha[0];
              max_s[row0 + 8] = alpha[1];
            }
          }
        }
        WgO::FenceStores();
        __syncthreads();  // P complete (and warpgroup 0's factors)
        if (!scores) {
          alpha[0] = max_s[row0];
          alpha[1] = max_s[row0 + 8];
        }
        rescale(alpha);
        issue_pv(j);
        dequant(j + 1, 1);
        WgO::Wait(o);
        CopyAsyncWaitAll();
        WgO::FenceStores();
        // Tile j + 1 in; tile j, P and the maxima free.
        more = __syncthreads_or(tid == 0 && count_s[(j + 1) % 3] > 0);
      }
    } else {
      // Software pipeline: P V of tile j and S of tile j + 1 run back to
      // back on the matrix cores, the softmax of tile j + 1 after both.
      // Tile j + 2's gather starts once both warpgroups' P V of tile j (the
      // last reader of its buffer) is done, and has the softmax and the
      // next P V to land. Tile 0's S and softmax come first, tile j's P V
      // last; an empty row runs them on zeros (all masked).
      static_assert(!kOneWgScores && !kFp8, "pipelined: split S, bf16");
      float sc[WgS::kAccPerThread];
      float alpha[2];
      issue_s(0, sc);
      gather(1);
      if (warp == 0) resolve(2);
      WgS::Wait(sc);
      softmax(0, sc, alpha);
      WgO::FenceStores();
      more = __syncthreads_or(tid == 0 && count_s[1] > 0);  // P of tile 0
      int j = 0;
      for (; more; ++j) {
        issue_pv(j);
        CopyAsyncWaitAll();
        WgO::FenceStores();
        __syncthreads();  // tile j + 1 in
        issue_s(j + 1, sc);
        if (warp == 0) resolve(j + 3);
        WgO::Wait(o);
        WgS::Wait(sc);
        softmax(j + 1, sc, alpha);  // its barrier: both P V of tile j done
        gather(j + 2);
        rescale(alpha);
        WgO::FenceStores();
        more = __syncthreads_or(tid == 0 && count_s[(j + 2) % 3] > 0);
      }
      issue_pv(j);
      WgO::Wait(o);
      CopyAsyncWaitAll();  // the (empty) gather of tile j + 1
    }

    // Row sums: the quad's columns, then both warpgroups'.
    float l_total[2], inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    if (lane % 4 == 0) {
      max_s[group * wg::kHeads + row0] = l_run[0];
      max_s[group * wg::kHeads + row0 + 8] = l_run[1];
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_total[r] = max_s[row0 + 8 * r] + max_s[wg::kHeads + row0 + 8 * r];
      inv[r] = l_total[r] > 0.0f ? 1.0f / l_total[r] : 0.0f;
    }
    const int rows_here = p.heads - h0 < wg::kHeads ? p.heads - h0 : wg::kHeads;
    const int64_t out_row0 =
        (static_cast<int64_t>(blockIdx.z) * gridDim.x + (t - token_begin)) *
            p.heads +
        h0;
    if (out.part_o != nullptr) {  // a split of few rows: fp32, direct
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        if (row >= rows_here) continue;
        if (lane % 4 == 0 && group == 0) {
          out.part_lse[out_row0 + row] =
              l_total[r] > 0.0f ? m_run[r] + __log2f(l_total[r]) : kNegInf;
        }
        float* dst =
            out.part_o + (out_row0 + row) * kLora + group * wg::kHalfDims;
#pragma unroll
        for (int e = 2 * r; e < WgO::kAccPerThread; e += 4) {
          const int col = WgO::AccCol(lane, e);
          *reinterpret_cast<float2*>(dst + col) =
              make_float2(o[e] * inv[r], o[e + 1] * inv[r]);
        }
      }
      return;
    }
    // bf16 through shared memory (the key buffers, free now), then whole
    // 16-byte chunks per thread.
    uint16_t* stage = reinterpret_cast<uint16_t*>(key_s);
#pragma unroll
    for (int e = 0; e < WgO::kAccPerThread; e += 2) {
      const int r = (e / 2) % 2;
      const int row = row0 + 8 * r;
      const int col = group * wg::kHalfDims + WgO::AccCol(lane, e);
      *reinterpret_cast<uint32_t*>(stage + row * wg::kStageLd + col) =
          ::dsa::gpu::PackBf16x2(o[e] * inv[r], o[e + 1] * inv[r]);
    }
    __syncthreads();
    constexpr int kRowChunks = kLora / 8;
    for (int c = tid; c < rows_here * kRowChunks; c += wg::kThreads) {
      const int row = c / kRowChunks, part = c % kRowChunks;
      *reinterpret_cast<uint4*>(out.latent + (out_row0 + row) * kLora +
                                part * 8) =
          *reinterpret_cast<const uint4*>(stage + row * wg::kStageLd +
                                          part * 8);
    }
  }
#endif
}

// Whether this build's attention kernels carry the warpgroup body for the
// current device (sm_90a code): asked of the device once per device.
__global__ void ProbeWgmmaKernel(int* out) { *out = kWarpgroupAttention; }

bool DeviceHasWgmma() {
  static std::atomic<int> cache[64];  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (hipGetDevice(&device) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  const int slot = device & 63;
  const int known = cache[slot].load(std::memory_order_relaxed);
  if (known != 0) return known == 2;
  int* flag = nullptr;
  if (hipMalloc(reinterpret_cast<void**>(&flag), sizeof(int)) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  int host = 0;
  hipLaunchKernelGGL(ProbeWgmmaKernel, dim3(1), dim3(1), 0, 0, flag);
  const bool ok =
      hipGetLastError() == hipSuccess &&
      hipMemcpy(&host, flag, sizeof(int), hipMemcpyDeviceToHost) == hipSuccess;
  (void)hipFree(flag);
  if (!ok) {
    (void)hipGetLastError();
    return false;
  }
  cache[slot].store(host != 0 ? 2 : 1, std::memory_order_relaxed);
  return host != 0;
}

// The warpgroup kernel's variants, chosen by environment variables read
// once per process (for comparisons on a device; the defaults are the
// fastest variants measured correct on the H200: swizzled, S on one
// warpgroup, gather after the S issue, fp8 caches on the warp-level kernel
// (the warpgroup kernel's fp8 path passed the gtests and memcheck there but
// was not timed)):
//   DSA_SPARSE_MLA=warp         the warp-level kernel everywhere;
//   DSA_SPARSE_MLA_SCORES=one|split   all of S on warpgroup 0 (bf16 cache)
//                               or each warpgroup its half of the keys;
//   DSA_SPARSE_MLA_PIPE=1|0     the software-pipelined loop (bf16, split);
//   DSA_SPARSE_MLA_SWIZZLE=1|0  the 128-byte swizzled layout;
//   DSA_SPARSE_MLA_FP8=wgmma|warp   fp8 caches on the warpgroup kernel;
//   DSA_SPARSE_MLA_GATHER=first|late   next tile gathered before S (or after).
// `value` is the variable's setting that turns the choice on, `off` the
// one that turns it off; unset (or anything else) gives `default_on`.
bool EnvChoice(const char* name, const char* value, const char* off,
               bool default_on) {
  const char* env = std::getenv(name);
  if (env != nullptr && std::strcmp(env, value) == 0) return true;
  if (env != nullptr && std::strcmp(env, off) == 0) return false;
  return default_on;
}
bool OneWgScores() {
  static const bool on =
      EnvChoice("DSA_SPARSE_MLA_SCORES", "one", "split", true);
  return on;
}
bool Sw128Wanted() {
  static const bool on = EnvChoice("DSA_SPARSE_MLA_SWIZZLE", "1", "0", true);
  return on;
}
bool PipelinedWanted() {
  static const bool on = EnvChoice("DSA_SPARSE_MLA_PIPE", "1", "0", false);
  return on;
}
bool Fp8WgmmaWanted() {
  static const bool on =
      EnvChoice("DSA_SPARSE_MLA_FP8", "wgmma", "warp", false);
  return on;
}
// DSA_SPARSE_MLA_GATHER=first|late: the next tile's gather issued before
// the S products or while they run (the plain loop).
bool GatherFirst() {
  static const bool on =
      EnvChoice("DSA_SPARSE_MLA_GATHER", "first", "late", false);
  return on;
}
bool WgmmaWanted() {
  static const bool on = EnvChoice("DSA_SPARSE_MLA", "wgmma", "warp", true);
  return on;
}

// --------------------------------------------------------------------------
// W_UV: w[h, o, c] = bf16(kv_b_proj[h * (nope + v) + nope + o, c]).
__global__ void ConvertWuvKernel(SparseMlaParams p, int lora, uint16_t* w) {
  const int64_t total = static_cast<int64_t>(p.heads) * p.v_head_dim * lora;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % lora;
    const int64_t ho = i / lora;
    const int64_t h = ho / p.v_head_dim, o = ho % p.v_head_dim;
    const int64_t row =
        h * (p.qk_nope_head_dim + p.v_head_dim) + p.qk_nope_head_dim + o;
    w[i] = FloatToBf16(LoadFloat(p.kv_b_proj, p.kv_b_proj_format,
                                 row * p.kv_b_proj_row_stride + c));
  }
}

// W_UV as the GEMM reads it: row o of head h at rows + h * head_stride +
// o * row_stride (bf16, rows 16-byte aligned): kv_b_proj itself when it is
// such, else a converted copy.
struct WuvWeights {
  const uint16_t* rows;
  int64_t head_stride;
  int64_t row_stride;
};

// --------------------------------------------------------------------------
// FMA kernels for every other shape: one block per (row, head), the keys one
// after another, everything in fp32.
constexpr int kFmaThreads = 128;

template <Fp8Format F>
__device__ __forceinline__ float CacheValue(const SparseMlaParams& p,
                                            const uint8_t* entry, int d) {
  if (p.cache_type == LatentCacheType::kBFloat16) {
    return Bf16ToFloat(reinterpret_cast<const uint16_t*>(entry)[d]);
  }
  const int lora = p.kv_lora_rank;
  if (d >= lora) {
    const uint8_t* rope = entry + lora + 4 * (lora / 128) + 2 * (d - lora);
    return Bf16ToFloat(static_cast<uint16_t>(rope[0] | (rope[1] << 8)));
  }
  float scale;
  __builtin_memcpy(&scale, entry + lora + 4 * (d / 128), 4);
  return DecodeFp8<F>(entry[d]) * scale;
}

// latent[t, h, :] (fp32). Dynamic shared memory: q and the running output,
// (kv_lora + rope) + kv_lora floats, then the reduction scratch.
template <Fp8Format F>
__global__ void __launch_bounds__(kFmaThreads)
    SparseMlaFmaKernel(SparseMlaParams p, int64_t token_begin, float* latent) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int lora = p.kv_lora_rank;
  const int dim = lora + p.rope_dim;
  float* q = reinterpret_cast<float*>(smem);
  float* acc = q + dim;
  float* red = acc + lora;
  const int64_t t = token_begin + blockIdx.x;
  const int h = blockIdx.y;
  const int tid = threadIdx.x;
  constexpr int kWarpsFma = kFmaThreads / kDsaWarpSize;
  for (int d = tid; d < dim; d += kFmaThreads) {
    q[d] = LoadFloat(p.q, p.q_format,
                     t * p.q_token_stride + h * p.q_head_stride + d);
  }
  for (int d = tid; d < lora; d += kFmaThreads) acc[d] = 0.0f;
  const RowRequest rr = LoadRowRequest(p, t);
  float m = kNegInf, l = 0.0f;
  __syncthreads();
  const int32_t* row = p.topk_indices + t * p.topk_stride;
  for (int j = 0; j < p.topk && rr.request >= 0; ++j) {
    const int64_t off = EntryOffset(p, rr, row[j]);
    if (off < 0) continue;
    const uint8_t* entry = p.kv_cache + off;
    float part = 0.0f;
    for (int d = tid; d < dim; d += kFmaThreads) {
      part += q[d] * CacheValue<F>(p, entry, d);
    }
    for (int d = kDsaWarpSize / 2; d > 0; d /= 2) {
      part += DSA_SHFL_XOR(part, d, kDsaWarpSize);
    }
    if (tid % kDsaWarpSize == 0) red[tid / kDsaWarpSize] = part;
    __syncthreads();
    float s = 0.0f;
    for (int w = 0; w < kWarpsFma; ++w) s += red[w];
    __syncthreads();  // red is rewritten by the next key
    s *= p.softmax_scale;
    const float m_new = fmaxf(m, s);
    const float m_use = m_new == kNegInf ? 0.0f : m_new;
    const float alpha = expf(m - m_use);
    const float pr = expf(s - m_use);
    l = l * alpha + pr;
    m = m_new;
    for (int d = tid; d < lora; d += kFmaThreads) {
      acc[d] = acc[d] * alpha + pr * CacheValue<F>(p, entry, d);
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  float* out = latent + ((t - token_begin) * p.heads + h) * lora;
  for (int d = tid; d < lora; d += kFmaThreads) out[d] = acc[d] * inv;
}

// output[t, h, :] = W_UV[h] latent[t, h, :], one block per (row, head).
__global__ void __launch_bounds__(kFmaThreads)
    WuvFmaKernel(SparseMlaParams p, int64_t token_begin, const float* latent) {
  extern __shared__ __align__(16) uint8_t smem[];
  float* x = reinterpret_cast<float*>(smem);
  const int lora = p.kv_lora_rank;
  const int64_t t = token_begin + blockIdx.x;
  const int h = blockIdx.y;
  const float* in =
      latent + (blockIdx.x * static_cast<int64_t>(p.heads) + h) * lora;
  for (int c = threadIdx.x; c < lora; c += kFmaThreads) x[c] = in[c];
  __syncthreads();
  for (int o = threadIdx.x; o < p.v_head_dim; o += kFmaThreads) {
    const int64_t row =
        static_cast<int64_t>(h) * (p.qk_nope_head_dim + p.v_head_dim) +
        p.qk_nope_head_dim + o;
    float sum = 0.0f;
    for (int c = 0; c < lora; ++c) {
      sum += LoadFloat(p.kv_b_proj, p.kv_b_proj_format,
                       row * p.kv_b_proj_row_stride + c) *
             x[c];
    }
    const int64_t at = t * p.output_token_stride + h * p.output_head_stride + o;
    if (p.output_format == FloatFormat::kBFloat16) {
      static_cast<uint16_t*>(p.output)[at] = FloatToBf16(sum);
    } else {
      static_cast<float*>(p.output)[at] = sum;
    }
  }
}

// --------------------------------------------------------------------------
// Launch.

bool UsesMma(const SparseMlaParams& p) {
  return p.kv_lora_rank == kLora && p.rope_dim == kRope &&
         reinterpret_cast<uintptr_t>(p.kv_cache) % 16 == 0 &&
         p.cache_block_stride % 16 == 0 && p.cache_token_stride % 16 == 0 &&
         p.topk <= 0x7fffffff - kIndexChunk;
}

// Latent scratch is limited to about this many bytes: longer batches run in
// token chunks.
constexpr int64_t kLatentScratchBytes = int64_t{256} << 20;

// The current device's id and its multiprocessor count and opt-in shared
// memory per block, queried once per device (launches on the decode path
// must not pay for driver queries). An unknown device gives zeros.
struct DeviceInfo {
  int device = -1;
  int sms = 0;
  int smem_per_block = 0;
};
DeviceInfo CurrentDevice() {
  DeviceInfo info;
  if (hipGetDevice(&info.device) != hipSuccess) {
    (void)hipGetLastError();
    info.device = -1;
    return info;
  }
  constexpr int kMaxDevices = 64;
  // value + 1, so that 0 means not yet known; racing first calls store the
  // same values.
  static std::atomic<int> sms[kMaxDevices];
  static std::atomic<int> smem[kMaxDevices];
  if (info.device < 0 || info.device >= kMaxDevices) return info;
  if (sms[info.device].load(std::memory_order_relaxed) == 0) {
    int n = 0, bytes = 0;
    if (hipDeviceGetAttribute(&n, hipDeviceAttributeMultiprocessorCount,
                              info.device) != hipSuccess ||
        hipDeviceGetAttribute(&bytes, hipDeviceAttributeMaxSharedMemoryPerBlock,
                              info.device) != hipSuccess) {
      (void)hipGetLastError();
      return info;
    }
    smem[info.device].store(bytes + 1, std::memory_order_relaxed);
    sms[info.device].store(n + 1, std::memory_order_relaxed);
  }
  info.sms = sms[info.device].load(std::memory_order_relaxed) - 1;
  info.smem_per_block = smem[info.device].load(std::memory_order_relaxed) - 1;
  return info;
}

template <int HC, bool kFp8, Fp8Format F>
LaunchResult LaunchMmaAttention(const SparseMlaParams& p, int64_t begin,
                                int64_t rows, const MmaOutput& out,
                                hipStream_t stream) {
  using L = MmaLayout<HC, kFp8>;
  constexpr auto kernel = &SparseMlaMmaKernel<HC, kFp8, F>;
  const LaunchResult r =
      OptInSharedMemory<kernel, L::kBytes>("sparse_mla: shared memory opt-in");
  if (!r.ok()) return r;
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((p.heads + HC - 1) / HC),
                  static_cast<unsigned>(out.splits));
  hipLaunchKernelGGL(kernel, grid, dim3(kThreads), L::kBytes, stream, p, begin,
                     out);
  return CheckLaunch(kOp);
}

// Whether blocks of 16 heads exist: whole M tiles, and whole bf16 pairs of
// probabilities per softmax thread.
constexpr bool kHeads16 = Mma::kM <= 16 && kThreads / 16 <= kDsaWarpSize &&
                          (kTileKeys * 16 / kThreads) % 2 == 0;

// Heads per attention block (LaunchMmaAttentionHeads' choice).
int HeadsPerBlock(int heads) {
  if (kHeads16 && heads <= 16) return 16;
  return heads <= 32 ? 32 : 64;
}

// Whether the device gives a block the matrix kernel's shared memory
// (~170 KiB: an H100/H200 gives 227 KiB, AMD CDNA2/3 64 KiB). Without it
// the FMA kernels run. A failed query (no device) answers yes: the launch
// then reports the missing device.
template <int HC>
int MmaSharedBytes(bool fp8) {
  return fp8 ? MmaLayout<HC, true>::kBytes : MmaLayout<HC, false>::kBytes;
}

bool MmaFits(const SparseMlaParams& p) {
  const bool fp8 = p.cache_type != LatentCacheType::kBFloat16;
  int bytes = 0;
  switch (HeadsPerBlock(p.heads)) {
    case 16:  // only where kM <= 16
      bytes = MmaSharedBytes<(kHeads16 ? 16 : 32)>(fp8);
      break;
    case 32:
      bytes = MmaSharedBytes<32>(fp8);
      break;
    default:
      bytes = MmaSharedBytes<64>(fp8);
      break;
  }
  const DeviceInfo info = CurrentDevice();
  return info.smem_per_block == 0 || bytes <= info.smem_per_block;
}

template <bool kFp8, Fp8Format F>
LaunchResult LaunchMmaAttentionHeads(const SparseMlaParams& p, int64_t begin,
                                     int64_t rows, const MmaOutput& latent,
                                     hipStream_t stream) {
  if constexpr (kHeads16) {
    if (p.heads <= 16) {
      return LaunchMmaAttention<16, kFp8, F>(p, begin, rows, latent, stream);
    }
  }
  if (p.heads <= 32) {
    return LaunchMmaAttention<32, kFp8, F>(p, begin, rows, latent, stream);
  }
  return LaunchMmaAttention<64, kFp8, F>(p, begin, rows, latent, stream);
}

// Whether the warpgroup kernel runs: bf16 cache, 64 heads or more, sm_90a
// device code and the shared memory for it (UsesMma holds already).
bool UsesWgmma(const SparseMlaParams& p) {
  const bool cache_ok =
      p.cache_type == LatentCacheType::kBFloat16 || Fp8WgmmaWanted();
  return cache_ok && p.heads >= wg::kHeads && WgmmaWanted() &&
         CurrentDevice().smem_per_block >= wg::kBytes && DeviceHasWgmma();
}

template <bool kOneWgScores, bool kFp8, Fp8Format F, bool kPipelined,
          bool kSw128>
LaunchResult LaunchWgmmaKernel(const SparseMlaParams& p, int64_t begin,
                               int64_t rows, const MmaOutput& out,
                               hipStream_t stream) {
  constexpr auto kernel =
      &SparseMlaWgmmaKernel<kOneWgScores, kFp8, F, kPipelined, kSw128>;
  const LaunchResult r =
      OptInSharedMemory<kernel, wg::kBytes>("sparse_mla: shared memory opt-in");
  if (!r.ok()) return r;
  const dim3 grid(
      static_cast<unsigned>(rows),
      static_cast<unsigned>((p.heads + wg::kHeads - 1) / wg::kHeads),
      static_cast<unsigned>(out.splits));
  hipLaunchKernelGGL(kernel, grid, dim3(wg::kThreads), wg::kBytes, stream, p,
                     begin, out, GatherFirst());
  return CheckLaunch(kOp);
}

template <bool kSw128>
LaunchResult LaunchWgmmaVariant(const SparseMlaParams& p, int64_t begin,
                                int64_t rows, const MmaOutput& out,
                                hipStream_t stream) {
  switch (p.cache_type) {
    case LatentCacheType::kFp8E4m3fn:
      return LaunchWgmmaKernel<false, true, Fp8Format::kE4m3fn, false, kSw128>(
          p, begin, rows, out, stream);
    case LatentCacheType::kFp8E4m3fnuz:
      return LaunchWgmmaKernel<false, true, Fp8Format::kE4m3fnuz, false,
                               kSw128>(p, begin, rows, out, stream);
    default:
      if (PipelinedWanted()) {
        return LaunchWgmmaKernel<false, false, Fp8Format::kE4m3fn, true,
                                 kSw128>(p, begin, rows, out, stream);
      }
      if (OneWgScores()) {
        return LaunchWgmmaKernel<true, false, Fp8Format::kE4m3fn, false,
                                 kSw128>(p, begin, rows, out, stream);
      }
      return LaunchWgmmaKernel<false, false, Fp8Format::kE4m3fn, false, kSw128>(
          p, begin, rows, out, stream);
  }
}

LaunchResult LaunchWgmmaAttention(const SparseMlaParams& p, int64_t begin,
                                  int64_t rows, const MmaOutput& out,
                                  hipStream_t stream) {
  return Sw128Wanted() ? LaunchWgmmaVariant<true>(p, begin, rows, out, stream)
                       : LaunchWgmmaVariant<false>(p, begin, rows, out, stream);
}

LaunchResult RunMma(const SparseMlaParams& p, hipStream_t stream) {
  StreamScratch scratch(stream);
  LaunchResult r;
  const bool wgmma = UsesWgmma(p);
  // bf16 kv_b_proj with 16-byte aligned rows is read in place; anything
  // else is converted once per call.
  WuvWeights w;
  if (p.kv_b_proj_format == FloatFormat::kBFloat16 &&
      reinterpret_cast<uintptr_t>(p.kv_b_proj) % 16 == 0 &&
      p.kv_b_proj_row_stride % 8 == 0) {
    w.rows = static_cast<const uint16_t*>(p.kv_b_proj) +
             p.qk_nope_head_dim * p.kv_b_proj_row_stride;
    w.head_stride = static_cast<int64_t>(p.qk_nope_head_dim + p.v_head_dim) *
                    p.kv_b_proj_row_stride;
    w.row_stride = p.kv_b_proj_row_stride;
  } else {
    uint16_t* converted = nullptr;
    r = scratch.Get(&converted,
                    static_cast<size_t>(p.heads) * p.v_head_dim * kLora * 2,
                    "sparse_mla: W_UV scratch");
    if (!r.ok()) return r;
    const int64_t total = static_cast<int64_t>(p.heads) * p.v_head_dim * kLora;
    const int64_t blocks = (total + 255) / 256;
    hipLaunchKernelGGL(
        ConvertWuvKernel,
        dim3(static_cast<unsigned>(blocks < 4096 ? blocks : 4096)), dim3(256),
        0, stream, p, kLora, converted);
    r = CheckLaunch(kOp);
    if (!r.ok()) return r;
    w.rows = converted;
    w.head_stride = static_cast<int64_t>(p.v_head_dim) * kLora;
    w.row_stride = kLora;
  }
  const int64_t row_bytes = static_cast<int64_t>(p.heads) * kLora * 2;
  int64_t chunk = kLatentScratchBytes / row_bytes;
  if (chunk < 1) chunk = 1;
  if (chunk > 65535) chunk = 65535;  // grid.x of the attention kernel
  if (chunk > p.tokens) chunk = p.tokens;
  uint16_t* latent = nullptr;
  r = scratch.Get(&latent, static_cast<size_t>(chunk * row_bytes),
                  "sparse_mla: latent scratch");
  if (!r.ok()) return r;
  // Few rows (decode): split each row's top-k list so that the grid covers
  // every multiprocessor, at least 256 indices per split.
  MmaOutput out{latent, nullptr, nullptr, 1};
  const int64_t blocks = p.tokens * ((p.heads + HeadsPerBlock(p.heads) - 1) /
                                     HeadsPerBlock(p.heads));
  const int sms = CurrentDevice().sms;  // 0 (unknown): no split
  if (p.tokens == chunk && 2 * blocks <= sms) {
    // Whole waves: floor, not ceil (132 SMs, 32 blocks: 4 splits, not 5).
    int64_t splits = sms / blocks;
    const int64_t most = p.topk / 256;
    if (splits > most) splits = most;
    if (splits > 32) splits = 32;
    if (splits > 1) {
      out.splits = static_cast<int>(splits);
      const size_t rows_heads = static_cast<size_t>(p.tokens) * p.heads;
      r = scratch.Get(&out.part_o, splits * rows_heads * kLora * 4,
                      "sparse_mla: split outputs");
      if (!r.ok()) return r;
      r = scratch.Get(&out.part_lse, splits * rows_heads * 4,
                      "sparse_mla: split log-sum-exps");
      if (!r.ok()) return r;
    }
  }
  for (int64_t begin = 0; begin < p.tokens; begin += chunk) {
    const int64_t rows = p.tokens - begin < chunk ? p.tokens - begin : chunk;
    switch (p.cache_type) {
      case LatentCacheType::kBFloat16:
        r = wgmma ? LaunchWgmmaAttention(p, begin, rows, out, stream)
                  : LaunchMmaAttentionHeads<false, Fp8Format::kE4m3fn>(
                        p, begin, rows, out, stream);
        break;
      case LatentCacheType::kFp8E4m3fn:
        r = wgmma ? LaunchWgmmaAttention(p, begin, rows, out, stream)
                  : LaunchMmaAttentionHeads<true, Fp8Format::kE4m3fn>(
                        p, begin, rows, out, stream);
        break;
      case LatentCacheType::kFp8E4m3fnuz:
        r = wgmma ? LaunchWgmmaAttention(p, begin, rows, out, stream)
                  : LaunchMmaAttentionHeads<true, Fp8Format::kE4m3fnuz>(
                        p, begin, rows, out, stream);
        break;
    }
    if (!r.ok()) return r;
    if (out.splits > 1) {
      hipLaunchKernelGGL(
          CombineSplitsKernel,
          dim3(static_cast<unsigned>(rows), static_cast<unsigned>(p.heads)),
          dim3(128), 0, stream, rows, p.heads, out.splits, out.part_o,
          out.part_lse, latent);
      r = CheckLaunch(kOp);
      if (!r.ok()) return r;
    }
    SparseMlaWuvArgs wuv;
    wuv.latent = latent;
    wuv.rows = rows;
    wuv.heads = p.heads;
    wuv.lora = kLora;
    wuv.w = w.rows;
    wuv.w_head_stride = w.head_stride;
    wuv.w_row_stride = w.row_stride;
    wuv.v = p.v_head_dim;
    wuv.output_format = p.output_format;
    wuv.output_token_stride = p.output_token_stride;
    wuv.output_head_stride = p.output_head_stride;
    const int64_t out_at = begin * p.output_token_stride;
    wuv.output =
        p.output_format == FloatFormat::kBFloat16
            ? static_cast<void*>(static_cast<uint16_t*>(p.output) + out_at)
            : static_cast<void*>(static_cast<float*>(p.output) + out_at);
    r = SparseMlaWuvGemm(wuv, stream);
    if (!r.ok()) return r;
  }
  return r;
}

LaunchResult RunFma(const SparseMlaParams& p, hipStream_t stream) {
  StreamScratch scratch(stream);
  const int64_t row_bytes = static_cast<int64_t>(p.heads) * p.kv_lora_rank * 4;
  int64_t chunk = kLatentScratchBytes / row_bytes;
  if (chunk < 1) chunk = 1;
  if (chunk > 65535) chunk = 65535;
  if (chunk > p.tokens) chunk = p.tokens;
  float* latent = nullptr;
  LaunchResult r = scratch.Get(&latent, static_cast<size_t>(chunk * row_bytes),
                               "sparse_mla: latent scratch");
  if (!r.ok()) return r;
  const size_t attn_smem =
      (2 * static_cast<size_t>(p.kv_lora_rank) + p.rope_dim + kFmaThreads) * 4;
  const size_t wuv_smem = static_cast<size_t>(p.kv_lora_rank) * 4;
  auto attn = p.cache_type == LatentCacheType::kFp8E4m3fnuz
                  ? &SparseMlaFmaKernel<Fp8Format::kE4m3fnuz>
                  : &SparseMlaFmaKernel<Fp8Format::kE4m3fn>;
  r = FromError(hipFuncSetAttribute(reinterpret_cast<const void*>(attn),
                                    hipFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(attn_smem)),
                "sparse_mla: shared memory opt-in");
  if (!r.ok()) return r;
  r = FromError(
      hipFuncSetAttribute(reinterpret_cast<const void*>(&WuvFmaKernel),
                          hipFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(wuv_smem)),
      "sparse_mla: shared memory opt-in");
  if (!r.ok()) return r;
  for (int64_t begin = 0; begin < p.tokens; begin += chunk) {
    const int64_t rows = p.tokens - begin < chunk ? p.tokens - begin : chunk;
    const dim3 grid(static_cast<unsigned>(rows),
                    static_cast<unsigned>(p.heads));
    hipLaunchKernelGGL(attn, grid, dim3(kFmaThreads), attn_smem, stream, p,
                       begin, latent);
    r = CheckLaunch(kOp);
    if (!r.ok()) return r;
    hipLaunchKernelGGL(WuvFmaKernel, grid, dim3(kFmaThreads), wuv_smem, stream,
                       p, begin, latent);
    r = CheckLaunch(kOp);
    if (!r.ok()) return r;
  }
  return r;
}

}  // namespace

const char* SparseMlaPath(const SparseMlaParams& params) {
  if (!UsesMma(params) || !MmaFits(params)) return "fma";
  return UsesWgmma(params) ? "wgmma" : "mma";
}

LaunchResult SparseMlaLaunch(const SparseMlaParams& p, void* stream) {
  if (p.tokens == 0) return LaunchResult{};
  const bool fp8 = p.cache_type != LatentCacheType::kBFloat16;
  const int64_t entry =
      fp8 ? p.kv_lora_rank + 4 * (p.kv_lora_rank / 128) + 2 * p.rope_dim
          : 2 * (static_cast<int64_t>(p.kv_lora_rank) + p.rope_dim);
  if (p.tokens < 0 || p.heads < 1 || p.kv_lora_rank < 1 || p.rope_dim < 0 ||
      p.num_blocks < 1 || p.block_size < 1 || p.num_requests < 1 ||
      p.max_blocks_per_request < 1 ||
      p.block_table_stride < p.max_blocks_per_request || p.topk < 0 ||
      p.topk_stride < p.topk || p.qk_nope_head_dim < 0 || p.v_head_dim < 1 ||
      p.cache_token_stride < entry ||
      p.cache_block_stride < p.cache_token_stride * p.block_size) {
    return Invalid(kOp,
                   "sizes: tokens %lld, heads %d, kv_lora_rank %d, rope_dim "
                   "%d, num_blocks %lld, block_size %d, num_requests %d, "
                   "max_blocks %d, block_table_stride %lld, topk %d, "
                   "topk_stride %lld, qk_nope %d, v_head_dim %d, cache "
                   "strides %lld/%lld (entry %lld bytes)",
                   static_cast<long long>(p.tokens), p.heads, p.kv_lora_rank,
                   p.rope_dim, static_cast<long long>(p.num_blocks),
                   p.block_size, p.num_requests, p.max_blocks_per_request,
                   static_cast<long long>(p.block_table_stride), p.topk,
                   static_cast<long long>(p.topk_stride), p.qk_nope_head_dim,
                   p.v_head_dim, static_cast<long long>(p.cache_block_stride),
                   static_cast<long long>(p.cache_token_stride),
                   static_cast<long long>(entry));
  }
  if (fp8 && p.kv_lora_rank % 128 != 0) {
    return Invalid(kOp,
                   "fp8 cache needs kv_lora_rank a multiple of 128, not %d",
                   p.kv_lora_rank);
  }
  if (p.heads > 65535) {
    return Invalid(kOp, "%d heads, at most 65535", p.heads);
  }
  if (p.q == nullptr || p.kv_cache == nullptr || p.block_table == nullptr ||
      p.seq_lens == nullptr || p.token_request == nullptr ||
      (p.topk > 0 && p.topk_indices == nullptr) || p.kv_b_proj == nullptr ||
      p.output == nullptr) {
    return Invalid(kOp, "a device pointer is null");
  }
  if (fp8 && (reinterpret_cast<uintptr_t>(p.kv_cache) % 4 != 0 ||
              p.cache_block_stride % 4 != 0 || p.cache_token_stride % 4 != 0)) {
    return Invalid(kOp, "fp8 cache entries are not 4-byte aligned (scales)");
  }
  if (!fp8 &&
      (reinterpret_cast<uintptr_t>(p.kv_cache) % 2 != 0 ||
       p.cache_block_stride % 2 != 0 || p.cache_token_stride % 2 != 0)) {
    return Invalid(kOp, "bf16 cache entries are not 2-byte aligned");
  }
  auto s = static_cast<hipStream_t>(stream);
  return UsesMma(p) && MmaFits(p) ? RunMma(p, s) : RunFma(p, s);
}

}  // namespace dsa::attention::gpu
