// Indexer logits on the GPU; see launch.h.
//
// The product is a GEMM per request: keys [n, 128] times the queries of a
// block of rows, [rows * heads, 128]^T, followed by an epilogue that scales
// each score by its key's scale, applies relu, weights it by the head's
// weight and sums over heads. A block owns 256 (row, head) columns (8 rows of
// 32 heads, 4 rows of 64, ...) and walks the union of its rows' key windows
// in tiles of 64 keys, fetching tile t + 1 from the paged cache into
// registers while tile t computes. Partial sums per 32 heads go through
// shared memory, so that the heads of a row split over several warps add up,
// and leave as coalesced rows of logits.
//
// On Hopper (sm_90a, e4m3fn data, 32 / 64 / 128 heads) a persistent,
// warp-specialised kernel runs instead (a producer warp and a ring of key
// tiles, described where it is defined); the launcher asks the loaded device
// code whether it holds that kernel. Everything else runs the kernel above,
// whose two bodies share one launch configuration (256 NVIDIA threads, 512
// AMD), picked at compile time through device/mma.h:
//   - warpgroup (sm_90a, e4m3fn): each warpgroup multiplies the fp8 key tile
//     by its 128 query columns with wgmma straight from shared memory; two
//     blocks fit on a multiprocessor.
//   - warp level (every other target): each warp keeps its 32 heads' query
//     fragments in registers and multiplies the staged key tile with
//     mma.sync (HMMA), MFMA or the FMA fallback.
// Shapes the matrix kernel does not take run on a plain FMA kernel.
//
// Blocks start with the last rows: with causal windows they have the most
// keys, and running them first keeps the tail of the grid short.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/sm90_pipeline.h"
#include "attention/gpu/indexer/launch.h"

// On targets where mma.h falls back to FMAs (gfx90a), the unrolled key-tile
// loop grows past clang's unroll limit and it says so; the loop is still
// correct, and those targets are not the fast path.
#if defined(__clang__) && !defined(__CUDA__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

namespace dsa::attention::gpu {
namespace {

using ::dsa::gpu::DecodeFp8;
using ::dsa::gpu::Fp8Format;
using ::dsa::gpu::Fp8WarpMma;

constexpr int kHeadDim = 128;   // the matrix kernel's head_dim
constexpr int kTileKeys = 64;   // keys per step, shared by every warp
constexpr int kWarpHeads = 32;  // (row, head) columns per warp
constexpr int kWarps = 8;
constexpr int kBlockCols = kWarps * kWarpHeads;  // 256
constexpr int kThreads = kWarps * kDsaWarpSize;
constexpr float kNegInf = -__builtin_huge_valf();

// Bytes of one key's values and the chunk a thread moves at a time.
constexpr int kChunk = 16;
constexpr int kChunksPerKey = kHeadDim / kChunk;          // 8
constexpr int kTileChunks = kTileKeys * kChunksPerKey;    // 512
constexpr int kChunksPerThread = kTileChunks / kThreads;  // 2 (NV), 1 (AMD)
static_assert(kTileChunks % kThreads == 0, "tile chunks per thread");

// A row's request and key window, clamped so that nothing outside the
// buffers is ever touched: an invalid request gives an empty window.
struct RowWindow {
  int32_t request;
  int32_t start;
  int32_t end;
};

__device__ __forceinline__ RowWindow LoadWindow(const IndexerLogitsParams& p,
                                                int64_t row) {
  RowWindow w{-1, 0, 0};
  if (row >= p.rows) return w;
  const int32_t request = p.row_request[row];
  if (request < 0 || request >= p.num_requests) return w;
  const int64_t capacity =
      static_cast<int64_t>(p.max_blocks_per_request) * p.block_size;
  const int64_t limit = capacity < p.width ? capacity : p.width;
  int64_t start = p.row_key_start[row];
  int64_t end = p.row_key_end[row];
  start = start < 0 ? 0 : (start > limit ? limit : start);
  end = end < start ? start : (end > limit ? limit : end);
  w.request = request;
  w.start = static_cast<int32_t>(start);
  w.end = static_cast<int32_t>(end);
  return w;
}

// Byte offsets in the cache of a request's key: its values and its scale.
// False for a block id outside the cache (the key then reads as zeros).
// Keys are below 2^31, so 32-bit division suffices; the usual power-of-two
// block sizes take a shift.
__device__ __forceinline__ bool LocateKey(const IndexerLogitsParams& p,
                                          int32_t request, int32_t key,
                                          int64_t* values, int64_t* scale) {
  const int32_t bs = p.block_size;
  int32_t block, within;
  if ((bs & (bs - 1)) == 0) {
    const int shift = __ffs(bs) - 1;
    block = key >> shift;
    within = key & (bs - 1);
  } else {
    block = key / bs;
    within = key - block * bs;
  }
  const int32_t page = p.block_table[request * p.block_table_stride + block];
  if (page < 0 || page >= p.num_blocks) return false;
  const int64_t base = static_cast<int64_t>(page) * bs * (p.head_dim + 4);
  *values = base + static_cast<int64_t>(within) * p.head_dim;
  *scale = base + static_cast<int64_t>(bs) * p.head_dim + within * 4;
  return true;
}

// Writes -inf over [0, start) and [end, width) of a row.
__device__ __forceinline__ void FillOutsideWindow(const IndexerLogitsParams& p,
                                                  int64_t row,
                                                  const RowWindow& w) {
  float* out = p.logits + row * p.logits_stride;
  for (int64_t j = threadIdx.x; j < w.start; j += blockDim.x) out[j] = kNegInf;
  for (int64_t j = w.end + threadIdx.x; j < p.width; j += blockDim.x) {
    out[j] = kNegInf;
  }
}

template <Fp8Format F>
struct LogitsShared {
  using Elem = typename Fp8WarpMma<F>::Elem;
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

// The body for sm_80+ NVIDIA and AMD: warp-level fragments (mma.sync /
// MFMA), query fragments in registers.
template <Fp8Format F>
__device__ __forceinline__ void LogitsWarpMmaBody(
    const IndexerLogitsParams& p) {
  using P = Fp8WarpMma<F>;
  using Elem = typename P::Elem;
  using S = LogitsShared<F>;
  constexpr int kLd = S::kLd;
  constexpr int kMT = kTileKeys / P::kM;
  constexpr int kNT = kWarpHeads / P::kN;
  constexpr int kKT = kHeadDim / P::kK;
  static_assert(kTileKeys % P::kM == 0 && kWarpHeads % P::kN == 0 &&
                    kHeadDim % P::kK == 0,
                "warp tile must be whole fragments");
  __shared__ S sm;

  const int tid = threadIdx.x;
  const int warp = tid / kDsaWarpSize;
  const int lane = tid % kDsaWarpSize;
  const int chunks_per_row = p.heads / kWarpHeads;
  const int rows_per_block = kBlockCols / p.heads;
  const int64_t row0 =
      static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * rows_per_block;
  const int my_r = warp / chunks_per_row;
  const int my_chunk = warp % chunks_per_row;
  const int64_t my_row = row0 + my_r;

  if (tid < rows_per_block) sm.window[tid] = LoadWindow(p, row0 + tid);
  __syncthreads();
  for (int r = 0; r < rows_per_block; ++r) {
    if (row0 + r < p.rows) FillOutsideWindow(p, row0 + r, sm.window[r]);
  }

  // Query fragments: the block's 256 columns are 32 KB of contiguous fp8
  // (rows past the end read as zeros), staged 128 columns at a time.
  typename P::B qfrag[kNT][kKT];
  const uint8_t* q_block = p.q_fp8 + row0 * p.heads * kHeadDim;
  const int64_t q_bytes_valid =
      (p.rows - row0) * static_cast<int64_t>(p.heads) * kHeadDim;
  Elem* stage = &sm.keys[0][0];
  for (int half = 0; half < 2; ++half) {
    constexpr int kHalfChunks = kBlockCols / 2 * kChunksPerKey;  // 1024
    for (int c = tid; c < kHalfChunks; c += kThreads) {
      const int64_t byte = (half * kHalfChunks + c) * int64_t{kChunk};
      uint4 codes = make_uint4(0, 0, 0, 0);
      if (byte < q_bytes_valid) {
        codes = *reinterpret_cast<const uint4*>(q_block + byte);
      }
      P::Convert16(codes, stage + (c / kChunksPerKey) * kLd +
                              (c % kChunksPerKey) * kChunk);
    }
    __syncthreads();
    if (warp / (kWarps / 2) == half) {
      const Elem* cols = stage + (warp % (kWarps / 2)) * kWarpHeads * kLd;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt) {
          P::LoadB(qfrag[nt][kt], cols + nt * P::kN * kLd + kt * P::kK, kLd,
                   lane);
        }
      }
    }
    __syncthreads();
  }

  // This lane's head weights, one per C column it holds.
  float weight[kNT][P::kColSlots];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int cs = 0; cs < P::kColSlots; ++cs) {
      const int head = my_chunk * kWarpHeads + nt * P::kN + P::CCol(lane, cs);
      weight[nt][cs] =
          my_row < p.rows ? p.head_weights[my_row * p.heads + head] : 0.0f;
    }
  }

  // Rows of one request share key tiles; a block whose rows span several
  // requests walks each run of equal requests in turn.
  int run_begin = 0;
  while (run_begin < rows_per_block) {
    const int32_t request = sm.window[run_begin].request;
    int run_end = run_begin + 1;
    while (run_end < rows_per_block && sm.window[run_end].request == request) {
      ++run_end;
    }
    int32_t lo = 0x7fffffff, hi = 0;
    for (int r = run_begin; r < run_end; ++r) {
      if (sm.window[r].start < sm.window[r].end) {
        lo = min(lo, sm.window[r].start);
        hi = max(hi, sm.window[r].end);
      }
    }
    if (request < 0 || lo >= hi) {
      run_begin = run_end;
      continue;
    }
    const bool warp_in_run = my_r >= run_begin && my_r < run_end;
    const RowWindow my_window = sm.window[my_r];
    const int num_tiles = (hi - lo + kTileKeys - 1) / kTileKeys;

    uint4 next[kChunksPerThread];
    float next_scale = 0.0f;
    auto fetch = [&](int tile) {
      const int32_t tile_start = lo + tile * kTileKeys;
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        const int c = tid + i * kThreads;
        const int32_t key = tile_start + c / kChunksPerKey;
        next[i] = make_uint4(0, 0, 0, 0);
        int64_t values, scale;
        if (key < hi && LocateKey(p, request, key, &values, &scale)) {
          next[i] = *reinterpret_cast<const uint4*>(
              p.k_cache + values + (c % kChunksPerKey) * kChunk);
        }
      }
      if (tid < kTileKeys) {
        const int32_t key = tile_start + tid;
        next_scale = 0.0f;
        int64_t values, scale;
        if (key < hi && LocateKey(p, request, key, &values, &scale)) {
          next_scale = *reinterpret_cast<const float*>(p.k_cache + scale);
        }
      }
    };
    auto store = [&](int buf) {
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        const int c = tid + i * kThreads;
        P::Convert16(next[i], &sm.keys[buf][(c / kChunksPerKey) * kLd +
                                            (c % kChunksPerKey) * kChunk]);
      }
      if (tid < kTileKeys) sm.scale[buf][tid] = next_scale;
    };

    fetch(0);
    store(0);
    __syncthreads();
    for (int tile = 0; tile < num_tiles; ++tile) {
      const int buf = tile & 1;
      const int32_t tile_start = lo + tile * kTileKeys;
      if (tile + 1 < num_tiles) fetch(tile + 1);

      if (warp_in_run && tile_start < my_window.end &&
          tile_start + kTileKeys > my_window.start) {
        typename P::C acc[kMT][kNT];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) P::Zero(acc[mt][nt]);
        }
        const Elem* tile_keys = sm.keys[buf];
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            typename P::A a;
            P::LoadA(a, tile_keys + mt * P::kM * kLd + kt * P::kK, kLd, lane);
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
              P::Run(acc[mt][nt], a, qfrag[nt][kt]);
          }
        }
        // Epilogue: relu(score * key scale) * head weight, summed over this
        // lane's heads, then over the lanes that share the key.
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int rs = 0; rs < P::kRowSlots; ++rs) {
            const int key = mt * P::kM + P::CRow(lane, rs);
            const float key_scale = sm.scale[buf][key];
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
              for (int cs = 0; cs < P::kColSlots; ++cs) {
                const float s =
                    acc[mt][nt].v[rs * P::kColSlots + cs] * key_scale;
                if (s > 0.0f) sum += s * weight[nt][cs];
              }
            }
            sum = P::ReduceRowLanes(sum);
            if (P::IsRowLeader(lane)) sm.partial[buf][warp][key] = sum;
          }
        }
      }

      if (tile + 1 < num_tiles) store(buf ^ 1);
      __syncthreads();

      // Rows of the run: sum the partials of their warps and store the
      // tile's keys that fall inside each row's window.
      for (int idx = tid; idx < (run_end - run_begin) * kTileKeys;
           idx += kThreads) {
        const int r = run_begin + idx / kTileKeys;
        const int kk = idx % kTileKeys;
        const int32_t key = tile_start + kk;
        const RowWindow w = sm.window[r];
        if (key >= w.start && key < w.end) {
          float v = 0.0f;
          for (int c = 0; c < chunks_per_row; ++c) {
            v += sm.partial[buf][r * chunks_per_row + c][kk];
          }
          p.logits[(row0 + r) * p.logits_stride + key] = v;
        }
      }
    }
    run_begin = run_end;
  }
}

// Byte offset of a tile's 16-byte chunk c (0 .. rows * 8): chunks are
// numbered so that 8 consecutive threads fill one 128-byte core matrix
// (conflict-free shared stores; the global reads stay within 1 KB).
struct ChunkPos {
  int row;
  int part;
};
[[maybe_unused]] __device__ __forceinline__ ChunkPos CoreChunk(int c) {
  return {(c % 8) + 8 * (c / 64), (c / 8) % 8};
}

// The body for sm_90a (Hopper) with e4m3fn data: each warpgroup multiplies
// the 64-key tile by its 128 query columns with wgmma straight from the fp8
// bytes in shared memory (no conversion, no register copy of the queries).
template <Fp8Format F>
__device__ __forceinline__ void LogitsWarpgroupBody(
    const IndexerLogitsParams& p) {
  // Dependent on F, so that targets without wgmma never instantiate it.
  using WG = ::dsa::gpu::WarpgroupFp8Mma<kHeadDim + 0 * static_cast<int>(F)>;
  static_assert(WG::kM == kTileKeys && 2 * WG::kN == kBlockCols,
                "two warpgroups cover the block's columns");
  constexpr int kAcc = WG::kAccPerThread;
  constexpr int kSegments =
      WG::kN / kWarpHeads;  // 32-column segments per group
  alignas(128) __shared__ uint8_t q_smem[kBlockCols * kHeadDim];
  alignas(128) __shared__ uint8_t k_smem[kTileKeys * kHeadDim];
  __shared__ float scale_smem[kTileKeys];
  alignas(16) __shared__ float weight_smem[kBlockCols];
  __shared__ float partial[2][kWarps][kTileKeys];
  __shared__ RowWindow window[kWarps];

  const int tid = threadIdx.x;
  const int warp = tid / kDsaWarpSize;
  const int lane = tid % kDsaWarpSize;
  const int group = warp / 4;
  const int warp_in_group = warp % 4;
  const int chunks_per_row = p.heads / kWarpHeads;
  const int rows_per_block = kBlockCols / p.heads;
  const int64_t row0 =
      static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * rows_per_block;

  if (tid < rows_per_block) window[tid] = LoadWindow(p, row0 + tid);
  __syncthreads();
  for (int r = 0; r < rows_per_block; ++r) {
    if (row0 + r < p.rows) FillOutsideWindow(p, row0 + r, window[r]);
  }

  // Queries: 256 columns x 128 bytes, contiguous in global memory.
  const uint8_t* q_block = p.q_fp8 + row0 * p.heads * kHeadDim;
  const int64_t q_bytes_valid =
      (p.rows - row0) * static_cast<int64_t>(p.heads) * kHeadDim;
  for (int c = tid; c < kBlockCols * kChunksPerKey; c += kThreads) {
    const ChunkPos pos = CoreChunk(c);
    const int64_t byte = (int64_t{pos.row} * kHeadDim) + pos.part * kChunk;
    uint4 codes = make_uint4(0, 0, 0, 0);
    if (byte < q_bytes_valid) {
      codes = *reinterpret_cast<const uint4*>(q_block + byte);
    }
    *reinterpret_cast<uint4*>(q_smem + WG::Offset(pos.row, pos.part * kChunk)) =
        codes;
  }
  WG::FenceStores();

  // This thread's head weights: column 8n + 2(l%4) + (i%2) of its group.
  // Head weights of the block's columns (registers are kept for the
  // accumulators, so that two blocks fit on a multiprocessor).
  for (int col = tid; col < kBlockCols; col += kThreads) {
    const int64_t row = row0 + col / p.heads;
    weight_smem[col] =
        row < p.rows ? p.head_weights[row * p.heads + col % p.heads] : 0.0f;
  }

  int run_begin = 0;
  while (run_begin < rows_per_block) {
    const int32_t request = window[run_begin].request;
    int run_end = run_begin + 1;
    while (run_end < rows_per_block && window[run_end].request == request) {
      ++run_end;
    }
    int32_t lo = 0x7fffffff, hi = 0;
    for (int r = run_begin; r < run_end; ++r) {
      if (window[r].start < window[r].end) {
        lo = min(lo, window[r].start);
        hi = max(hi, window[r].end);
      }
    }
    if (request < 0 || lo >= hi) {
      run_begin = run_end;
      continue;
    }
    const int num_tiles = (hi - lo + kTileKeys - 1) / kTileKeys;

    uint4 next[kChunksPerThread];
    float next_scale = 0.0f;
    auto fetch = [&](int tile) {
      const int32_t tile_start = lo + tile * kTileKeys;
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        const ChunkPos pos = CoreChunk(tid + i * kThreads);
        const int32_t key = tile_start + pos.row;
        next[i] = make_uint4(0, 0, 0, 0);
        int64_t values, scale;
        if (key < hi && LocateKey(p, request, key, &values, &scale)) {
          next[i] = *reinterpret_cast<const uint4*>(p.k_cache + values +
                                                    pos.part * kChunk);
        }
      }
      if (tid < kTileKeys) {
        const int32_t key = tile_start + tid;
        next_scale = 0.0f;
        int64_t values, scale;
        if (key < hi && LocateKey(p, request, key, &values, &scale)) {
          next_scale = *reinterpret_cast<const float*>(p.k_cache + scale);
        }
      }
    };
    auto store = [&]() {
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        const ChunkPos pos = CoreChunk(tid + i * kThreads);
        *reinterpret_cast<uint4*>(
            k_smem + WG::Offset(pos.row, pos.part * kChunk)) = next[i];
      }
      if (tid < kTileKeys) scale_smem[tid] = next_scale;
      WG::FenceStores();
    };

    // Rows of the run: sum the partials of their warps and store the tile's
    // keys that fall inside each row's window.
    auto finalize = [&](int tile) {
      const int32_t tile_start = lo + tile * kTileKeys;
      const int buf = tile & 1;
      for (int idx = tid; idx < (run_end - run_begin) * kTileKeys;
           idx += kThreads) {
        const int r = run_begin + idx / kTileKeys;
        const int kk = idx % kTileKeys;
        const int32_t key = tile_start + kk;
        const RowWindow w = window[r];
        if (key >= w.start && key < w.end) {
          float v = 0.0f;
          for (int c = 0; c < chunks_per_row; ++c) {
            v += partial[buf][r * chunks_per_row + c][kk];
          }
          p.logits[(row0 + r) * p.logits_stride + key] = v;
        }
      }
    };

    fetch(0);
    __syncthreads();  // the previous run's last tile is no longer read
    store();
    __syncthreads();
    const uint8_t* q_group = q_smem + group * (WG::kN / 8) * WG::kRowGroupBytes;
    for (int tile = 0; tile < num_tiles; ++tile) {
      // The product runs asynchronously while this thread fetches the next
      // tile and stores the previous tile's logits.
      float acc[kAcc];
      WG::Issue(acc, k_smem, q_group, /*accumulate=*/false);
      if (tile + 1 < num_tiles) fetch(tile + 1);
      if (tile > 0) finalize(tile - 1);
      WG::Wait(acc);
      // relu(score * key scale) * head weight, summed over each 32-column
      // segment: this thread's 8 columns of it, then the 4 lanes that share
      // the key. A cache's scales are positive (ue8m0 powers of two), so
      // relu(score * scale) = scale * relu(score) and the scale applies once
      // per sum; any other scale takes the literal form.
      const float* wcol = weight_smem + group * WG::kN + 2 * (lane % 4);
#pragma unroll
      for (int rs = 0; rs < 2; ++rs) {
        const int key = WG::AccRow(warp_in_group, lane, 2 * rs);
        const float key_scale = scale_smem[key];
        const bool positive = key_scale > 0.0f;
#pragma unroll
        for (int seg = 0; seg < kSegments; ++seg) {
          float sum = 0.0f;
#pragma unroll
          for (int n = 4 * seg; n < 4 * seg + 4; ++n) {
            const float2 w2 = *reinterpret_cast<const float2*>(wcol + 8 * n);
            const float a0 = acc[4 * n + 2 * rs];
            const float a1 = acc[4 * n + 2 * rs + 1];
            if (positive) {
              sum += fmaxf(a0, 0.0f) * w2.x;
              sum += fmaxf(a1, 0.0f) * w2.y;
            } else {
              const float s0 = a0 * key_scale, s1 = a1 * key_scale;
              if (s0 > 0.0f) sum += s0 * w2.x;
              if (s1 > 0.0f) sum += s1 * w2.y;
            }
          }
          if (positive) sum *= key_scale;
          sum += DSA_SHFL_XOR(sum, 1, kDsaWarpSize);
          sum += DSA_SHFL_XOR(sum, 2, kDsaWarpSize);
          if (lane % 4 == 0)
            partial[tile & 1][group * kSegments + seg][key] = sum;
        }
      }
      __syncthreads();  // keys consumed, partials written
      if (tile + 1 < num_tiles) store();
      __syncthreads();  // next keys stored
    }
    finalize(num_tiles - 1);
    run_begin = run_end;
  }
}

#if defined(DSA_GPU_CUDA)

// ---------------------------------------------------------------------------
// The persistent, warp-specialised body for sm_90a with e4m3fn data (what
// Hopper runs for 32, 64 and 128 heads). Counted for GLM-5.1's 32 x 128 at
// T = 8192 causal: 2.75e11 FLOPs and 0.27 GB of logits written; the key
// tiles streamed from L2 are the window sizes x 128 bytes per block of rows
// (~1.1 GB with 4-row blocks), and measurement showed that stream, not the
// matrix cores, pacing the first version. Hence, as in DeepGEMM's
// fp8_mqa_logits:
//   - a producer warpgroup fills a ring of kPsStages key tiles (64 keys x
//     128 bytes + their scales). When the block size is a multiple of 64, a
//     tile is a slice of one page and one thread moves it with two TMA
//     copies (values with 128-byte swizzle, scales), counted on the stage's
//     mbarrier; otherwise the warpgroup copies it with cp.async (16 keys a
//     warp, one page lookup per key), keeps kPsLag copy groups in flight
//     and signals each stage once its copies have landed. The queries and
//     head weights of a block sit in a second, two-deep ring (cp.async);
//   - two math warpgroups multiply 64-key tiles by 128 (row, head) columns
//     each (wgmma m64n128k32, 4 back to back) and run the epilogue (relu,
//     head weight, sum over the row's heads, quad shuffles, stores) without
//     any block-wide barrier. Wide blocks (prefill: 256 columns, 8 rows of
//     32 heads) give every group every tile, so a tile read from L2 serves
//     both (half the key traffic of 128-column blocks: 0.75 -> 0.51 ms at
//     T = 8192); narrow blocks (decode, rows of different requests) give
//     the groups alternate tiles, and a tile whose rows are one 32-head row
//     multiplies only that row's 32 columns (m64n32);
//   - a CTA per multiprocessor walks (row block, key chunk) items, longest
//     first, in a zigzag so that the causal triangle spreads evenly; when
//     rows are few (decode), a block's keys are split into chunks so that
//     every multiprocessor gets work.
// The producer writes -inf outside the rows' windows while it waits.

// Math warpgroups: two keep the head weights in registers (384 threads with
// the producer: up to 168 registers a thread); three fit 128 registers only
// with the weights read from shared memory in the epilogue. The
// DSA_LOGITS_PS_* macros are for measuring variants (-D on the nvcc line); the
// defaults are what ships.
#ifndef DSA_LOGITS_PS_GROUPS
#define DSA_LOGITS_PS_GROUPS 2
#endif
#ifndef DSA_LOGITS_PS_STAGES
#define DSA_LOGITS_PS_STAGES 16
#endif
// cp.async groups a producer thread keeps in flight before it waits for the
// oldest and signals its stage: the ring's depth in flight is what hides the
// L2 latency (with 2 in flight, the first version ran at 0.79 ms).
#ifndef DSA_LOGITS_PS_LAG
#define DSA_LOGITS_PS_LAG 8
#endif
// DSA_LOGITS_PS_BANKS=2 splits a tile's 128 columns into two products of 64
// (m64n64k32) and sums the first while the second runs.
#ifndef DSA_LOGITS_PS_BANKS
#define DSA_LOGITS_PS_BANKS 1
#endif
// Wide blocks: kPsMathGroups x 128 columns, every math group multiplies
// every key tile (by its own 128 columns), so a tile read from L2 serves
// kPsMathGroups times the work; narrow blocks (128 columns, the groups on
// alternate tiles) suit rows of many requests (decode). DSA_LOGITS_PS_WIDE:
// -1 picks per launch (the default), 0 / 1 force one (for measuring).
#ifndef DSA_LOGITS_PS_WIDE
#define DSA_LOGITS_PS_WIDE -1
#endif
// DSA_LOGITS_PS_PINGPONG=1 (the default): on wide blocks the two math
// groups take turns to issue their products (named barriers), so that one
// group's epilogue runs under the other's products rather than both at
// once. Measured on the H200 with TMA key tiles: 32 heads T=8192 0.448 ->
// 0.436 ms, 64 heads 0.788 -> 0.777 ms (with cp.async tiles it lost at 32
// heads: the producer's copies competed for the same issue slots).
#ifndef DSA_LOGITS_PS_PINGPONG
#define DSA_LOGITS_PS_PINGPONG 1
#endif
// DSA_LOGITS_PS_DOUBLE=1 (with DSA_LOGITS_PS_PINGPONG=0; measured slower:
// 0.509 against 0.476 ms at 32 heads): on wide blocks each math group keeps two
// accumulator sets and issues tile t + 1's product before it runs tile t's
// epilogue, so that the matrix cores and the epilogue overlap within a group
// (as FlashAttention-3 overlaps softmax with the next product). The 128
// accumulators a thread need more than 384 threads' even share of the
// register file: the producer warpgroup gives registers back (setmaxnreg)
// and the head weights are read from shared memory.
#ifndef DSA_LOGITS_PS_DOUBLE
#define DSA_LOGITS_PS_DOUBLE 0
#endif
// DSA_LOGITS_PS_NARROW_DECODE=1 (the default): on narrow blocks of 32-head
// rows, a tile whose run is one row multiplies only that row's 32 columns.
#ifndef DSA_LOGITS_PS_NARROW_DECODE
#define DSA_LOGITS_PS_NARROW_DECODE 1
#endif
constexpr bool kPsNarrowDecode = DSA_LOGITS_PS_NARROW_DECODE != 0;
// DSA_LOGITS_PS_SWIZZLE_Q=1 (the default): the queries are staged in the
// 128-byte swizzled layout too (each column's 128 bytes contiguous, 16-byte
// chunks permuted), not in 8 x 16-byte core matrices. Measured on the H200:
// 32 heads T=8192 0.436 -> 0.430 ms, 64 heads 0.777 -> 0.770, T=1900
// 0.0475 -> 0.0443, decode 0.0258 -> 0.0250 ms.
#ifndef DSA_LOGITS_PS_SWIZZLE_Q
#define DSA_LOGITS_PS_SWIZZLE_Q 1
#endif
constexpr bool kPsSwizzleQ = DSA_LOGITS_PS_SWIZZLE_Q != 0;
constexpr int kPsMathGroups = DSA_LOGITS_PS_GROUPS;
constexpr int kPsBanks = DSA_LOGITS_PS_BANKS;
static_assert(kPsBanks == 1 || !DSA_LOGITS_PS_SWIZZLE_Q,
              "the 64-column banks read unswizzled queries");
static_assert(kPsBanks == 1 || (kPsBanks == 2 && kPsMathGroups == 2),
              "two banks keep the weights in registers (two groups)");
constexpr bool kPsDouble = DSA_LOGITS_PS_DOUBLE != 0 && kPsBanks == 1 &&
                           kPsMathGroups == 2 && !DSA_LOGITS_PS_PINGPONG;
constexpr bool kPsSharedWeights = kPsMathGroups > 2 || kPsDouble;
// Registers a thread of the producer / a math group holds after setmaxnreg
// (kPsDouble only; 128 * producer + 256 * math <= 64 K). Blocks of 8 rows
// (32 heads) need more in the producer (the item's arrays); below these
// figures ptxas spills.
template <int R>
constexpr int kPsProducerRegs = R >= 8 ? 112 : 96;
template <int R>
constexpr int kPsMathRegs = R >= 8 ? 192 : 200;
static_assert(128 * kPsProducerRegs<8> + 256 * kPsMathRegs<8> <= 65536 &&
                  128 * kPsProducerRegs<4> + 256 * kPsMathRegs<4> <= 65536,
              "register file");
constexpr int kPsMathThreads = kPsMathGroups * 128;
// The producer is a warpgroup too: four warps (one per scheduler) share a
// tile's copies, so that no single warp's issue rate paces the ring. A
// block's warps round up to multiples of four for registers anyway.
constexpr int kPsProducerThreads = 128;
constexpr int kPsThreads = kPsMathThreads + kPsProducerThreads;
constexpr int kPsStages = DSA_LOGITS_PS_STAGES;
constexpr int kPsLag = DSA_LOGITS_PS_LAG;
static_assert(kPsLag >= 1 && kPsLag < kPsStages, "lag below the ring depth");
constexpr int kPsCols = 128;  // (row, head) columns of a math group
constexpr int kPsKeyBytes = kTileKeys * kHeadDim;  // 8 KB a stage

// full / empty per key stage, then full / empty per query stage.
constexpr int kPsBarriers = 2 * kPsStages + 4;

// Dynamic shared memory, in bytes from its (1 KB aligned) start.
template <bool kWide>
struct PsLayout {
  static constexpr int kBlockCols = kWide ? kPsMathGroups * kPsCols : kPsCols;
  static constexpr int kQBytes = kBlockCols * kHeadDim;  // a query stage
  static constexpr int kQOffset = 0;
  static constexpr int kKeyOffset = kQOffset + 2 * kQBytes;
  static constexpr int kScaleOffset = kKeyOffset + kPsStages * kPsKeyBytes;
  static constexpr int kWeightOffset = kScaleOffset + kPsStages * kTileKeys * 4;
  static constexpr int kBarrierOffset = kWeightOffset + 2 * kBlockCols * 4;
  // The kernel aligns its base to 1 KB (128-byte swizzled key tiles need
  // it), so it asks for 1 KB more than it uses.
  static constexpr int kSmemBytes = kBarrierOffset + kPsBarriers * 8 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "fits Hopper's shared memory");
  static_assert(kKeyOffset % 1024 == 0 && kPsKeyBytes % 1024 == 0 &&
                    kScaleOffset % 128 == 0,
                "key stages on 1 KB, scale stages on 128 bytes");
};

// out[from, to) = -inf by `threads` threads (thread `tid`), 16-byte stores
// where aligned: a causal prefill's rows are half -inf (134 MB at T = 8192),
// and the producer's store instructions share issue slots with the math
// warps.
[[maybe_unused]] __device__ __forceinline__ void FillNegInf(float* out,
                                                            int64_t from,
                                                            int64_t to, int tid,
                                                            int threads) {
  if (from >= to) return;
  const int64_t misaligned =
      static_cast<int64_t>((16 - reinterpret_cast<uintptr_t>(out + from) % 16) %
                           16) /
      4;
  const int64_t head = from + misaligned < to ? from + misaligned : to;
  if (from + tid < head) out[from + tid] = kNegInf;
  const int64_t quads = (to - head) / 4;
  float4* out4 = reinterpret_cast<float4*>(out + head);
  const float4 ninf = make_float4(kNegInf, kNegInf, kNegInf, kNegInf);
  for (int64_t i = tid; i < quads; i += threads) out4[i] = ninf;
  const int64_t tail = head + 4 * quads;
  if (tail + tid < to) out[tail + tid] = kNegInf;
}

// One work item: a block of R rows (R * heads = 128 columns) and the chunk
// [tile_begin, tile_end) of its key tiles. Its rows' windows, grouped into
// runs of equal requests (each run walks the union of its rows' windows in
// 64-key tiles), are what the producer and the consumers both derive. A run
// is kept in the slot of its first row, so that every index is known at
// compile time and the item stays in registers.
template <int R>
struct PsItem {
  int64_t row0;
  int32_t start[R], end[R];
  int32_t request[R];
  int32_t run_lo[R], run_hi[R], run_tiles[R];  // run_tiles 0: no run here
  int32_t run_end[R];
  int32_t tile_begin, tile_end;
};

// kAligned: runs start on a multiple of 64 keys (the TMA path, whose tiles
// are whole 64-key slices of one page; the keys added in front fall outside
// every row's window and are not stored).
template <int R, bool kAligned = false>
__device__ __forceinline__ PsItem<R> LoadPsItem(const IndexerLogitsParams& p,
                                                int64_t block, int chunk,
                                                int splits) {
  PsItem<R> it;
  it.row0 = block * R;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const RowWindow w = LoadWindow(p, it.row0 + r);
    it.request[r] = w.request;
    it.start[r] = w.start;
    it.end[r] = w.end;
  }
  int32_t total = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const bool starts = r == 0 || it.request[r] != it.request[r - 1];
    int32_t e = R;
#pragma unroll
    for (int i = R - 1; i > r; --i) {
      if (it.request[i] != it.request[i - 1]) e = i;
    }
    int32_t lo = 0x7fffffff, hi = 0;
#pragma unroll
    for (int i = r; i < R; ++i) {
      if (i < e && it.start[i] < it.end[i]) {
        lo = min(lo, it.start[i]);
        hi = max(hi, it.end[i]);
      }
    }
    const bool used = starts && it.request[r] >= 0 && lo < hi;
    if (kAligned) lo &= ~(kTileKeys - 1);
    it.run_lo[r] = used ? lo : 0;
    it.run_hi[r] = used ? hi : 0;
    it.run_tiles[r] = used ? (hi - lo + kTileKeys - 1) / kTileKeys : 0;
    it.run_end[r] = e;
    total += it.run_tiles[r];
  }
  it.tile_begin = static_cast<int32_t>(int64_t{total} * chunk / splits);
  it.tile_end = static_cast<int32_t>(int64_t{total} * (chunk + 1) / splits);
  return it;
}

// Tile t of an item: its request, first key, the end of the keys its run
// reads, and the rows [rb, re) it serves.
struct PsTile {
  int32_t request;
  int32_t key0;
  int32_t hi;
  int rb, re;
};
template <int R>
__device__ __forceinline__ PsTile TileOf(const PsItem<R>& it, int32_t t) {
  PsTile tile{-1, 0, 0, 0, 0};
  int32_t before = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (it.run_tiles[r] > 0 && t >= before && t < before + it.run_tiles[r]) {
      tile = {it.request[r], it.run_lo[r] + (t - before) * kTileKeys,
              it.run_hi[r], r, it.run_end[r]};
    }
    before += it.run_tiles[r];
  }
  return tile;
}

// Item i of this CTA's sequence: a zigzag over the items sorted longest
// first (row blocks from the last), so that CTA c's rounds add up to about
// the same number of keys as every other CTA's.
__device__ __forceinline__ int64_t PsItemIndex(int64_t round) {
  const int64_t ctas = gridDim.x;
  const int64_t c = blockIdx.x;
  return round * ctas + ((round & 1) ? ctas - 1 - c : c);
}

// The row of its math group's Rw rows whose logits a lane of quad position
// `quad` stores (after the quad's reduce-scatter, see the epilogue).
template <int Rw>
__device__ __forceinline__ int OutputRow(int quad) {
  return Rw == 4 ? quad : (Rw == 2 ? quad % 2 : 0);
}

// What a math thread needs of an item for its stores, in a few registers
// (the item's arrays would take 7 R): the tiles [t0, t1) of its row's run,
// the run's first key, and the row's window.
struct PsMine {
  int row;
  int32_t t0, t1, lo, start, end;
};
template <int R>
__device__ __forceinline__ PsMine MineOf(const PsItem<R>& it, int row) {
  PsMine m{row, 0, 0, 0, 0, 0};
  int32_t before = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (it.run_tiles[r] > 0 && r <= row && row < it.run_end[r]) {
      m.t0 = before;
      m.t1 = before + it.run_tiles[r];
      m.lo = it.run_lo[r];
    }
    if (r == row) {
      m.start = it.start[r];
      m.end = it.end[r];
    }
    before += it.run_tiles[r];
  }
  return m;
}

// Adds to v[rs][r] this thread's relu(score) * weight terms of the 8-column
// blocks [kN0, kN0 + kCount) (block n's accumulators at a[4 (n - kN0) ..]),
// positive scales (applied later) or the literal relu(score * scale) form.
template <int R, int kN0, int kCount, bool kPositive, int kAcc>
__device__ __forceinline__ void AddBlocks(const float (&a)[kAcc],
                                          const float2 (&weight)[16],
                                          const float (&sc)[2],
                                          float (&v)[2][R]) {
  constexpr int kBlocksPerRow = 16 / R;
#pragma unroll
  for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
    for (int n = kN0; n < kN0 + kCount; ++n) {
      const int r = n / kBlocksPerRow;
      const float a0 = a[4 * (n - kN0) + 2 * rs];
      const float a1 = a[4 * (n - kN0) + 2 * rs + 1];
      if constexpr (kPositive) {
        v[rs][r] = fmaf(fmaxf(a0, 0.0f), weight[n].x, v[rs][r]);
        v[rs][r] = fmaf(fmaxf(a1, 0.0f), weight[n].y, v[rs][r]);
      } else {
        const float x0 = a0 * sc[rs], x1 = a1 * sc[rs];
        if (x0 > 0.0f) v[rs][r] += x0 * weight[n].x;
        if (x1 > 0.0f) v[rs][r] += x1 * weight[n].y;
      }
    }
  }
}

// kTma: key tiles and scales arrive by TMA through key_map / scale_map
// (block_size a multiple of 64; see MakeKeyMaps), else by cp.async.
template <Fp8Format F, int R, bool kWide, bool kTma>
__global__ void __launch_bounds__(kPsThreads, 1) IndexerLogitsPersistentKernel(
    IndexerLogitsParams p, int splits,
    const __grid_constant__ CUtensorMap key_map,
    const __grid_constant__ CUtensorMap scale_map) {
  using L = PsLayout<kWide>;
  if constexpr (::dsa::gpu::kHasWarpgroupFp8Mma && F == Fp8Format::kE4m3fn) {
    using WG = ::dsa::gpu::WarpgroupFp8Mma<kHeadDim + 0 * static_cast<int>(F)>;
    static_assert(WG::kM == kTileKeys && WG::kN == kPsCols,
                  "a warpgroup covers a tile's keys and a block's columns");
    static_assert(!kTma || kPsBanks == 1, "TMA tiles take one bank");
    constexpr int kHeads = L::kBlockCols / R;
    // Rows of a math group's 128 columns, and the first of them.
    constexpr int Rw = kWide ? R / kPsMathGroups : R;
    static_assert(Rw >= 1, "a math group holds whole rows");
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    // 1 KB aligned whatever the runtime gives (the layout has the slack).
    const uint32_t raw_base = SharedAddress(smem_raw);
    const uint32_t base = (raw_base + 1023u) & ~1023u;
    uint8_t* const smem = smem_raw + (base - raw_base);
    const uint32_t bar0 = base + L::kBarrierOffset;
    auto full_k = [&](int s) { return bar0 + 8 * s; };
    auto empty_k = [&](int s) { return bar0 + 8 * (kPsStages + s); };
    auto full_q = [&](int s) { return bar0 + 8 * (2 * kPsStages + s); };
    auto empty_q = [&](int s) { return bar0 + 8 * (2 * kPsStages + 2 + s); };

    const int tid = threadIdx.x;
    const int warp = tid / kDsaWarpSize;
    const int lane = tid % kDsaWarpSize;
    if (tid == 0) {
      for (int s = 0; s < kPsStages; ++s) {
        MbarInit(full_k(s), kTma ? 1 : kPsProducerThreads);
        MbarInit(empty_k(s), kWide ? kPsMathThreads : 128);
      }
      for (int s = 0; s < 2; ++s) {
        MbarInit(full_q(s), kPsProducerThreads);
        MbarInit(empty_q(s), kPsMathThreads);
      }
      MbarFenceInit();
    }
    __syncthreads();

    const int64_t blocks = (p.rows + R - 1) / R;
    const int64_t items = blocks * splits;

    if (tid >= kPsMathThreads) {
      // ---- Producer warpgroup.
      constexpr bool kDouble = kWide && kPsDouble;
      if constexpr (kDouble) WarpgroupRegsDecrease<kPsProducerRegs<R>>();
      const int ptid = tid - kPsMathThreads;
      const int pwarp = ptid / kDsaWarpSize;
      if (kTma && ptid == 0) {
        TmaPrefetchMap(&key_map);
        TmaPrefetchMap(&scale_map);
      }
      // Each lane's copies go in commit groups; a group's stage is
      // signalled (after the writes are complete and fenced for wgmma's
      // async proxy) once kPsLag newer groups are in flight, or before the
      // warp would block.
      uint32_t ring[kPsLag];  // barriers of the groups in flight, oldest first
      int pending = 0;
#pragma unroll
      for (int i = 0; i < kPsLag; ++i) ring[i] = 0;
      auto push = [&](uint32_t bar) {
        CopyAsyncCommit();
        if (pending == kPsLag) {
          CopyAsyncWait<kPsLag>();
          WG::FenceStores();
          MbarArrive(ring[0]);
#pragma unroll
          for (int i = 0; i + 1 < kPsLag; ++i) ring[i] = ring[i + 1];
          ring[kPsLag - 1] = bar;
        } else {
#pragma unroll
          for (int i = 0; i < kPsLag; ++i) {
            if (i == pending) ring[i] = bar;
          }
          ++pending;
        }
      };
      auto flush = [&]() {
        if (pending == 0) return;
        CopyAsyncWait<0>();
        WG::FenceStores();
#pragma unroll
        for (int i = 0; i < kPsLag; ++i) {
          if (i < pending) MbarArrive(ring[i]);
        }
        pending = 0;
      };
      auto acquire = [&](uint32_t bar, uint32_t parity) {
        if (!MbarTryWait(bar, parity)) {
          flush();
          MbarWait(bar, parity);
        }
      };

      int64_t g = 0;  // key tiles issued by this CTA
      int64_t j = 0;  // items
      for (int64_t round = 0; round * gridDim.x < items; ++round) {
        const int64_t idx = PsItemIndex(round);
        if (idx >= items) continue;
        const int64_t block = blocks - 1 - idx / splits;
        const int chunk = static_cast<int>(idx % splits);
        const PsItem<R> it = LoadPsItem<R, kTma>(p, block, chunk, splits);
        if (chunk == 0) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            if (it.row0 + r >= p.rows) continue;
            float* out = p.logits + (it.row0 + r) * p.logits_stride;
            FillNegInf(out, 0, it.start[r], ptid, kPsProducerThreads);
            FillNegInf(out, it.end[r], p.width, ptid, kPsProducerThreads);
          }
        }
        if (it.tile_begin >= it.tile_end) continue;  // consumers skip it too

        // Queries (zeros past the last row) and head weights.
        const int qs = static_cast<int>(j & 1);
        acquire(empty_q(qs), static_cast<uint32_t>((j >> 1) & 1) ^ 1u);
        const uint8_t* q_block = p.q_fp8 + it.row0 * kHeads * kHeadDim;
        const int64_t q_valid =
            (p.rows - it.row0) * static_cast<int64_t>(kHeads) * kHeadDim;
        const uint32_t q_dst = base + L::kQOffset + qs * L::kQBytes;
#pragma unroll 4
        for (int c = ptid; c < L::kBlockCols * kChunksPerKey;
             c += kPsProducerThreads) {
          const ChunkPos pos = CoreChunk(c);
          // Swizzled: 8 threads copy one column's 128 bytes (chunk c at
          // c ^ (row % 8)); else core matrices as CoreChunk numbers them.
          const int row = kPsSwizzleQ ? c / kChunksPerKey : pos.row;
          const int part = kPsSwizzleQ ? c % kChunksPerKey : pos.part;
          const int64_t byte = int64_t{row} * kHeadDim + part * kChunk;
          const bool valid = byte < q_valid;
          const uint32_t off =
              kPsSwizzleQ ? row * kHeadDim + ((part ^ (row & 7)) * kChunk)
                          : WG::Offset(row, part * kChunk);
          CopyAsync16(q_dst + off, valid ? q_block + byte : p.q_fp8, valid);
        }
        const uint32_t w_dst = base + L::kWeightOffset + qs * L::kBlockCols * 4;
#pragma unroll
        for (int i = 0; i < L::kBlockCols / kPsProducerThreads; ++i) {
          const int col = ptid + i * kPsProducerThreads;
          const int64_t row = it.row0 + col / kHeads;
          const bool valid = row < p.rows;
          CopyAsync4(w_dst + col * 4,
                     valid ? p.head_weights + row * kHeads + col % kHeads
                           : p.head_weights,
                     valid);
        }
        push(full_q(qs));

        if constexpr (kTma) {
          // One thread moves each tile: keys [key0, key0 + 64) are rows
          // `within`.. of one page (block_size a multiple of 64, runs
          // aligned to 64). A block past the table or an invalid page reads
          // as zeros (coordinate -1 is outside the tensor). The other
          // threads signal their query copies at once (no key copies follow
          // to push them out of the lag window); thread 0 after its tiles.
          if (ptid != 0) flush();
          if (ptid == 0) {
            for (int32_t t = it.tile_begin; t < it.tile_end; ++t, ++g) {
              const int s = static_cast<int>(g % kPsStages);
              acquire(empty_k(s),
                      static_cast<uint32_t>((g / kPsStages) & 1) ^ 1u);
              const PsTile tile = TileOf<R>(it, t);
              const int32_t bs = p.block_size;
              const int32_t blk = tile.key0 / bs;
              const int32_t within = tile.key0 - blk * bs;
              int32_t page = -1;
              if (tile.request >= 0 && blk < p.max_blocks_per_request) {
                page = p.block_table[tile.request * p.block_table_stride + blk];
                if (page < 0 || page >= p.num_blocks) page = -1;
              }
              MbarExpectTx(full_k(s), kPsKeyBytes + kTileKeys * 4);
              TmaLoad3d(base + L::kKeyOffset + s * kPsKeyBytes, &key_map, 0,
                        within, page, full_k(s));
              TmaLoad2d(base + L::kScaleOffset + s * kTileKeys * 4, &scale_map,
                        within, page, full_k(s));
            }
            flush();
          }
        } else {
          for (int32_t t = it.tile_begin; t < it.tile_end; ++t, ++g) {
            const int s = static_cast<int>(g % kPsStages);
            acquire(empty_k(s),
                    static_cast<uint32_t>((g / kPsStages) & 1) ^ 1u);
            const PsTile tile = TileOf<R>(it, t);
            // Warp w copies keys [16 w, 16 w + 16) of the tile. Lane l < 16
            // locates key 16 w + l; a key past the run's union of windows, or
            // on an invalid page, reads as zeros.
            const int32_t my_key = tile.key0 + 16 * pwarp + lane;
            int64_t values = 0, scale = 0;
            const bool ok = lane < 16 && my_key < tile.hi &&
                            LocateKey(p, tile.request, my_key, &values, &scale);
            if (!ok) values = scale = 0;
            const uint32_t k_dst = base + L::kKeyOffset + s * kPsKeyBytes;
#if !defined(DSA_LOGITS_PS_DIAG_NO_KEYS)  // diagnostic: skip the key loads
            // Copy i moves, for lanes 8a + b, chunk 4(i % 2) + a of the warp's
            // key 8(i / 2) + b: 8 lanes fill one 128-byte core matrix, and
            // each key's 64 bytes are whole 32-byte sectors of one
            // instruction.
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int key = 8 * (i / 2) + lane % 8;
              const int part = 4 * (i % 2) + lane / 8;
              const int64_t v = __shfl_sync(DSA_FULL_WARP_MASK, values, key);
              const int valid = __shfl_sync(DSA_FULL_WARP_MASK, int{ok}, key);
              CopyAsync16(k_dst + WG::Offset(16 * pwarp + key, part * kChunk),
                          p.k_cache + v + part * kChunk, valid != 0);
            }
            if (lane < 16) {
              CopyAsync4(base + L::kScaleOffset + s * kTileKeys * 4 +
                             (16 * pwarp + lane) * 4,
                         p.k_cache + scale, ok);
            }
#else
            (void)k_dst;
#endif
            push(full_k(s));
          }
        }
        ++j;
      }
      flush();
      return;
    }

    // ---- Math warpgroups.
    constexpr bool kDouble = kWide && kPsDouble;
    if constexpr (kDouble) WarpgroupRegsIncrease<kPsMathRegs<R>>();
    const int group = warp / 4;
    const int warp_in_group = warp % 4;
    const int key_row = 16 * warp_in_group + lane / 4;  // and key_row + 8
    const int row_off = kWide ? group * Rw : 0;  // this group's first row
    const int quad = lane % 4;
    using WG64 =
        ::dsa::gpu::WarpgroupFp8Mma64<kHeadDim + 0 * static_cast<int>(F)>;
    float acc[kPsBanks == 1 ? WG::kAccPerThread : 1];
    float acc2[kDouble ? WG::kAccPerThread : 1];
    float acc_a[kPsBanks == 2 ? WG64::kAccPerThread : 1];
    float acc_b[kPsBanks == 2 ? WG64::kAccPerThread : 1];
    int64_t g = 0;
    int64_t j = 0;
    if constexpr (kWide && DSA_LOGITS_PS_PINGPONG && kPsMathGroups == 2) {
      if (group == 1) NamedBarrierArrive<256>(1);  // group 0 issues first
    }
    for (int64_t round = 0; round * gridDim.x < items; ++round) {
      const int64_t idx = PsItemIndex(round);
      if (idx >= items) continue;
      const int64_t block = blocks - 1 - idx / splits;
      const int chunk = static_cast<int>(idx % splits);
      const PsItem<R> it = LoadPsItem<R, kTma>(p, block, chunk, splits);
      if (it.tile_begin >= it.tile_end) continue;
      const PsMine mine = MineOf<R>(it, row_off + OutputRow<Rw>(quad));
      const int qs = static_cast<int>(j & 1);
      MbarWait(full_q(qs), static_cast<uint32_t>((j >> 1) & 1));
      // This thread's head weights: columns 8n + 2 quad + e.
      const float* wsm =
          reinterpret_cast<const float*>(smem + L::kWeightOffset) +
          qs * L::kBlockCols + (kWide ? group * kPsCols : 0);
      float2 weight_reg[16];
      if constexpr (!kPsSharedWeights) {
#pragma unroll
        for (int n = 0; n < 16; ++n) {
          weight_reg[n] =
              *reinterpret_cast<const float2*>(wsm + 8 * n + 2 * quad);
        }
      }
      auto weight2 = [&](int n) {
        if constexpr (kPsSharedWeights) {
          return *reinterpret_cast<const float2*>(wsm + 8 * n + 2 * quad);
        } else {
          return weight_reg[n];
        }
      };
      const uint8_t* q_tile = smem + L::kQOffset + qs * L::kQBytes +
                              (kWide ? group * kPsCols * kHeadDim : 0);

      // The tile's sums v (per row slot and row of this group), scaled,
      // summed over the quad and stored inside the rows' windows.
      auto finish = [&](float(&v)[2][Rw], const float(&sc)[2], bool positive,
                        int32_t t) {
        if (positive) {
#pragma unroll
          for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
            for (int r = 0; r < Rw; ++r) v[rs][r] *= sc[rs];
          }
        }

        // Sum over the quad; lane `quad` then stores pairs (rs, r) with
        // rs * Rw + r == quad (mod 4).
        float out[2];
        int out_r[2], out_rs[2], outs;
        if constexpr (Rw == 4) {
          // Reduce-scatter: rows {0,1} / {2,3} by lane bit 1, then one row
          // by lane bit 0.
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
            out[rs] =
                (odd ? keep[1] : keep[0]) + DSA_SHFL_XOR(send, 1, kDsaWarpSize);
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
        (void)out_r;  // always mine.row (see OutputRow)
        if (t < mine.t0 || t >= mine.t1) return;  // not my row's run
        const int32_t key0 = mine.lo + (t - mine.t0) * kTileKeys + key_row;
#pragma unroll
        for (int o = 0; o < 2; ++o) {
          if (o >= outs) break;
          const int32_t key = key0 + 8 * out_rs[o];
          if (key >= mine.start && key < mine.end) {
            p.logits[(it.row0 + mine.row) * p.logits_stride + key] = out[o];
          }
        }
      };
      if constexpr (kDouble) {
        // Tile i + 1's product runs while tile i's epilogue does; the two
        // accumulator sets alternate (unrolled by two so that they stay in
        // registers).
        auto issue = [&](float(&a)[WG::kAccPerThread], int64_t gg) {
          const int s = static_cast<int>(gg % kPsStages);
          MbarWait(full_k(s), static_cast<uint32_t>((gg / kPsStages) & 1));
          __syncwarp();  // wgmma is .aligned: the warp issues it converged
          const uint8_t* k_tile = smem + L::kKeyOffset + s * kPsKeyBytes;
          if constexpr (kTma) {
            WG::template IssueAs<true, kPsSwizzleQ>(a, k_tile, q_tile,
                                                    /*accumulate=*/false);
          } else {
            WG::template IssueAs<false, kPsSwizzleQ>(a, k_tile, q_tile,
                                                     /*accumulate=*/false);
          }
        };
        auto consume = [&](float(&a)[WG::kAccPerThread], int32_t t,
                           int64_t gg) {
          const int s = static_cast<int>(gg % kPsStages);
          const float* scales =
              reinterpret_cast<const float*>(smem + L::kScaleOffset) +
              s * kTileKeys;
          const float sc[2] = {scales[key_row], scales[key_row + 8]};
          MbarArrive(empty_k(s));
          float v[2][Rw];
#pragma unroll
          for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
            for (int r = 0; r < Rw; ++r) v[rs][r] = 0.0f;
          }
          const bool positive =
              __all_sync(DSA_FULL_WARP_MASK, sc[0] > 0.0f && sc[1] > 0.0f);
          float2 w[16];
#pragma unroll
          for (int n = 0; n < 16; ++n) w[n] = weight2(n);
          if (positive) {
            AddBlocks<Rw, 0, 16, true>(a, w, sc, v);
          } else {
            AddBlocks<Rw, 0, 16, false>(a, w, sc, v);
          }
          finish(v, sc, positive, t);
        };
        // As FlashAttention-3 overlaps softmax with the next product: no
        // product is in flight across the loop's back edge (ptxas would
        // serialise the products otherwise), so each step waits for the
        // product it issued once the previous tile's epilogue is done.
        const int32_t n = it.tile_end - it.tile_begin;
        issue(acc, g);
        WG::Wait(acc);
        // The waits are unconditional (a no-op with nothing in flight):
        // ptxas cannot match a conditional wait to a conditional issue.
        for (int32_t i = 0; i < n; i += 2) {
          if (i + 1 < n) issue(acc2, g + i + 1);
          consume(acc, it.tile_begin + i, g + i);
          WG::Wait(acc2);
          if (i + 1 >= n) break;
          if (i + 2 < n) issue(acc, g + i + 2);
          consume(acc2, it.tile_begin + i + 1, g + i + 1);
          WG::Wait(acc);
        }
        g += n;
      } else {
        for (int32_t t = it.tile_begin; t < it.tile_end; ++t, ++g) {
          if (!kWide && static_cast<int>(g % kPsMathGroups) != group) continue;
          const int s = static_cast<int>(g % kPsStages);
          MbarWait(full_k(s), static_cast<uint32_t>((g / kPsStages) & 1));
          __syncwarp();  // wgmma is .aligned: the warp issues it converged
          const uint8_t* k_tile = smem + L::kKeyOffset + s * kPsKeyBytes;
          if constexpr (kPsNarrowDecode && !kWide && kHeads == 32) {
            // A run of one row (decode: rows of different requests) needs
            // only that row's 32 columns: an m64n32 product and a quarter of
            // the epilogue, instead of discarding three quarters of both.
            const PsTile tile = TileOf<R>(it, t);
            if (tile.re - tile.rb == 1) {
              using WG32 =
                  ::dsa::gpu::WarpgroupFp8Mma32<kHeadDim +
                                                0 * static_cast<int>(F)>;
              float a[WG32::kAccPerThread];
              const int rb = tile.rb;
              WG32::template Issue<kTma, kPsSwizzleQ>(
                  a, k_tile, q_tile + rb * (32 / 8) * WG::kRowGroupBytes,
                  /*accumulate=*/false);
              const float* scales =
                  reinterpret_cast<const float*>(smem + L::kScaleOffset) +
                  s * kTileKeys;
              const float sc[2] = {scales[key_row], scales[key_row + 8]};
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
                w[n] = *reinterpret_cast<const float2*>(wsm + 32 * rb + 8 * n +
                                                        2 * quad);
              }
              WG32::Wait(a);
              MbarArrive(empty_k(s));
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
              // Lane quad 0 stores the key of row slot 0, quad 1 slot 1.
              if (quad < 2) {
                const int32_t key = tile.key0 + key_row + 8 * quad;
                if (key >= start && key < end) {
                  p.logits[(it.row0 + rb) * p.logits_stride + key] =
                      quad == 0 ? v[0] : v[1];
                }
              }
              continue;
            }
          }
          if constexpr (kPsBanks == 2) {
            WG64::Issue(acc_a, k_tile, q_tile, /*accumulate=*/false);
            WG64::Issue(acc_b, k_tile, q_tile + 64 * kHeadDim,
                        /*accumulate=*/false);
          } else {
            // Ping-pong: wait for this group's turn, issue, pass the turn.
            constexpr bool kPingPong =
                kWide && DSA_LOGITS_PS_PINGPONG && kPsMathGroups == 2;
            if constexpr (kPingPong) NamedBarrierSync<256>(1 + group);
            if constexpr (kTma) {
              WG::template IssueAs<true, kPsSwizzleQ>(acc, k_tile, q_tile,
                                                      /*accumulate=*/false);
            } else {
              WG::template IssueAs<false, kPsSwizzleQ>(acc, k_tile, q_tile,
                                                       /*accumulate=*/false);
            }
            if constexpr (kPingPong) NamedBarrierArrive<256>(2 - group);
          }
          const float* scales =
              reinterpret_cast<const float*>(smem + L::kScaleOffset) +
              s * kTileKeys;
          const float sc[2] = {scales[key_row], scales[key_row + 8]};

          // relu(score * key scale) * head weight summed over each row's
          // heads: first this thread's 2 columns of each 8-column block, then
          // the 4 lanes of the quad. Scales are positive in a real cache
          // (ue8m0), so relu(s * scale) = scale * relu(s) and the scale
          // applies once per sum; otherwise the literal form.
#if defined(DSA_LOGITS_PS_DIAG_NO_EPILOGUE)  // diagnostic: products only
          if constexpr (kPsBanks == 2) {
            WG64::template WaitPending<0>(acc_a);
            WG64::template WaitPending<0>(acc_b);
          } else {
            WG::Wait(acc);
          }
          MbarArrive(empty_k(s));
          if (sc[0] == 12345.0f) p.logits[t] = acc[0];  // keep acc live
          continue;
#endif
          float v[2][Rw];
#pragma unroll
          for (int rs = 0; rs < 2; ++rs) {
#pragma unroll
            for (int r = 0; r < Rw; ++r) v[rs][r] = 0.0f;
          }
          const bool positive =
              __all_sync(DSA_FULL_WARP_MASK, sc[0] > 0.0f && sc[1] > 0.0f);
          if constexpr (kPsBanks == 2) {
            // Columns 0-63 while the product of 64-127 still runs.
            WG64::template WaitPending<1>(acc_a);
            if (positive) {
              AddBlocks<Rw, 0, 8, true>(acc_a, weight_reg, sc, v);
            } else {
              AddBlocks<Rw, 0, 8, false>(acc_a, weight_reg, sc, v);
            }
            WG64::template WaitPending<0>(acc_b);
            MbarArrive(empty_k(s));
            if (positive) {
              AddBlocks<Rw, 8, 8, true>(acc_b, weight_reg, sc, v);
            } else {
              AddBlocks<Rw, 8, 8, false>(acc_b, weight_reg, sc, v);
            }
          } else {
            WG::Wait(acc);
            MbarArrive(empty_k(s));
            if constexpr (kPsSharedWeights) {
              float2 w[16];
#pragma unroll
              for (int n = 0; n < 16; ++n) w[n] = weight2(n);
              if (positive) {
                AddBlocks<Rw, 0, 16, true>(acc, w, sc, v);
              } else {
                AddBlocks<Rw, 0, 16, false>(acc, w, sc, v);
              }
            } else {
              if (positive) {
                AddBlocks<Rw, 0, 16, true>(acc, weight_reg, sc, v);
              } else {
                AddBlocks<Rw, 0, 16, false>(acc, weight_reg, sc, v);
              }
            }
          }
          finish(v, sc, positive, t);
        }
      }
      MbarArrive(empty_q(qs));
      ++j;
    }
    // Ping-pong: group 1 gave group 0 its first turn up front, so group 0
    // takes the last one, leaving both barriers balanced.
    if constexpr (kWide && DSA_LOGITS_PS_PINGPONG && kPsMathGroups == 2) {
      if (group == 0) NamedBarrierSync<256>(1);
    }
  } else {
    (void)p;
    (void)splits;
    (void)key_map;
    (void)scale_map;
  }
}

#endif  // DSA_GPU_CUDA

// Two blocks per multiprocessor for the warpgroup body (one's epilogue runs
// while the other's wgmma does); the warp-level body keeps its query
// fragments in registers and fits one.
template <Fp8Format F>
constexpr int kMinBlocks = (::dsa::gpu::kHasWarpgroupFp8Mma &&
                            F == Fp8Format::kE4m3fn)
                               ? 2
                               : 1;

template <Fp8Format F>
__global__ void __launch_bounds__(kThreads, kMinBlocks<F>)
    IndexerLogitsMmaKernel(IndexerLogitsParams p) {
  if constexpr (::dsa::gpu::kHasWarpgroupFp8Mma && F == Fp8Format::kE4m3fn) {
    LogitsWarpgroupBody<F>(p);
  } else {
    LogitsWarpMmaBody<F>(p);
  }
}

// Any shape: one block per row, one key per thread at a time, FMAs over the
// decoded values.
template <Fp8Format F>
__global__ void IndexerLogitsFmaKernel(IndexerLogitsParams p) {
  const int64_t row = blockIdx.x;
  const RowWindow w = LoadWindow(p, row);
  FillOutsideWindow(p, row, w);
  if (w.request < 0) return;
  const uint8_t* q = p.q_fp8 + row * p.heads * p.head_dim;
  const float* weights = p.head_weights + row * p.heads;
  for (int32_t key = w.start + threadIdx.x; key < w.end; key += blockDim.x) {
    int64_t values, scale;
    float logit = 0.0f;
    if (LocateKey(p, w.request, key, &values, &scale)) {
      const uint8_t* k = p.k_cache + values;
      float key_scale;
      __builtin_memcpy(&key_scale, p.k_cache + scale, sizeof(float));
      for (int h = 0; h < p.heads; ++h) {
        float dot = 0.0f;
        for (int d = 0; d < p.head_dim; ++d) {
          dot += DecodeFp8<F>(q[h * p.head_dim + d]) * DecodeFp8<F>(k[d]);
        }
        const float s = dot * key_scale;
        if (s > 0.0f) logit += s * weights[h];
      }
    }
    p.logits[row * p.logits_stride + key] = logit;
  }
}

bool UsesMma(const IndexerLogitsParams& p) {
  return p.head_dim == kHeadDim && p.heads >= kWarpHeads &&
         p.heads <= kBlockCols && kBlockCols % p.heads == 0 &&
         p.block_size % 4 == 0 &&
         reinterpret_cast<uintptr_t>(p.q_fp8) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.k_cache) % 16 == 0;
}

#if defined(DSA_GPU_CUDA)
// Grants the persistent kernels of one block width their shared memory.
template <bool kWide, bool kTma>
bool SetPersistentSmem() {
  using K = void (*)(IndexerLogitsParams, int, CUtensorMap, CUtensorMap);
  constexpr int kR = PsLayout<kWide>::kBlockCols / kPsCols;  // at 128 heads
  const K kernels[] = {
      IndexerLogitsPersistentKernel<Fp8Format::kE4m3fn, kR, kWide, kTma>,
      IndexerLogitsPersistentKernel<Fp8Format::kE4m3fn, 2 * kR, kWide, kTma>,
      IndexerLogitsPersistentKernel<Fp8Format::kE4m3fn, 4 * kR, kWide, kTma>};
  bool ok = true;
  for (K k : kernels) {
    ok = ok && hipFuncSetAttribute(reinterpret_cast<const void*>(k),
                                   hipFuncAttributeMaxDynamicSharedMemorySize,
                                   PsLayout<kWide>::kSmemBytes) == hipSuccess;
  }
  return ok;
}

// Whether the device code loaded for this device holds the persistent body
// (built for sm_90a): set by the device pass, read once per device.
__device__ int g_persistent_logits_built =
#if defined(DSA_MMA_HAS_WGMMA_FP8)
    1;
#else
    0;
#endif

// The multiprocessor count when the persistent kernel can run on the current
// device (its shared memory granted), else 0. Cached per device; the first
// call per device reads a device symbol (a synchronous copy), which a stream
// being captured into a graph must not see: until a call outside capture has
// asked, captured calls take the other kernel.
int PersistentCtas(hipStream_t stream) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices];  // 0 unknown, -1 no, else SMs
  int device = 0;
  if (hipGetDevice(&device) != hipSuccess || device < 0 ||
      device >= kMaxDevices) {
    (void)hipGetLastError();
    return 0;
  }
  int state = cached[device].load(std::memory_order_relaxed);
  if (state == 0) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
        capture != cudaStreamCaptureStatusNone) {
      (void)hipGetLastError();
      return 0;
    }
    int built = 0, sms = 0;
    bool ok = cudaMemcpyFromSymbol(&built, g_persistent_logits_built,
                                   sizeof(int)) == cudaSuccess &&
              built == 1 &&
              hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount,
                                    device) == hipSuccess &&
              sms > 0;
    ok = ok && SetPersistentSmem<false, false>() &&
         SetPersistentSmem<true, false>();
    if constexpr (kPsBanks == 1) {
      ok = ok && SetPersistentSmem<false, true>() &&
           SetPersistentSmem<true, true>();
    }
    (void)hipGetLastError();  // a failed query leaves no error behind
    state = ok ? sms : -1;
    cached[device].store(state, std::memory_order_relaxed);
  }
  return state > 0 ? state : 0;
}

// DSA_LOGITS_PS_TMA=0 keeps the cp.async key path everywhere; 1 (the
// default) moves key tiles by TMA when the cache allows. The environment
// variable of the same name, "0", turns it off at run time (read once; for
// measuring both paths in one process and as a way back).
#ifndef DSA_LOGITS_PS_TMA
#define DSA_LOGITS_PS_TMA 1
#endif
bool TmaKeysEnabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("DSA_LOGITS_PS_TMA");
    return DSA_LOGITS_PS_TMA != 0 && !(env != nullptr && env[0] == '0');
  }();
  return enabled;
}

// Tensor maps over the paged cache for the TMA path: the key values as
// [num_blocks][block_size][128] bytes (pages block_size * 132 bytes apart),
// read in 64-key boxes with 128-byte swizzle (the layout wgmma's
// DescriptorSwizzle128 reads), and the scales as [num_blocks][block_size]
// floats (from byte block_size * 128 of each page), read 64 at a time.
// False when the cache does not allow it: block_size not a multiple of 64,
// more pages than a coordinate holds, or no encoder.
bool EncodeKeyMaps(const IndexerLogitsParams& p, CUtensorMap* key_map,
                   CUtensorMap* scale_map);
// The maps of the cache last used by this thread are kept: encoding costs
// host time between the launches (decode steps take ~30 us on the device).
bool MakeKeyMaps(const IndexerLogitsParams& p, CUtensorMap* key_map,
                 CUtensorMap* scale_map) {
  if (!TmaKeysEnabled() || p.block_size % kTileKeys != 0 ||
      p.num_blocks > 0x7fffffff || p.head_dim != kHeadDim) {
    return false;
  }
  struct Cached {
    const uint8_t* cache = nullptr;
    int64_t num_blocks = 0;
    int32_t block_size = 0;
    CUtensorMap key_map, scale_map;
  };
  thread_local Cached last;
  if (last.cache != p.k_cache || last.num_blocks != p.num_blocks ||
      last.block_size != p.block_size) {
    last.cache = nullptr;
    if (!EncodeKeyMaps(p, &last.key_map, &last.scale_map)) return false;
    last.cache = p.k_cache;
    last.num_blocks = p.num_blocks;
    last.block_size = p.block_size;
  }
  *key_map = last.key_map;
  *scale_map = last.scale_map;
  return true;
}
bool EncodeKeyMaps(const IndexerLogitsParams& p, CUtensorMap* key_map,
                   CUtensorMap* scale_map) {
  const EncodeTiledFn encode = TensorMapEncoder();
  if (encode == nullptr) return false;
  const cuuint64_t page_bytes =
      static_cast<cuuint64_t>(p.block_size) * (kHeadDim + 4);
  const cuuint64_t key_dims[3] = {kHeadDim,
                                  static_cast<cuuint64_t>(p.block_size),
                                  static_cast<cuuint64_t>(p.num_blocks)};
  const cuuint64_t key_strides[2] = {kHeadDim, page_bytes};
  const cuuint32_t key_box[3] = {kHeadDim, kTileKeys, 1};
  const cuuint32_t unit[3] = {1, 1, 1};
  uint8_t* cache = const_cast<uint8_t*>(p.k_cache);
  if (encode(key_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, cache, key_dims,
             key_strides, key_box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    return false;
  }
  const cuuint64_t scale_dims[2] = {static_cast<cuuint64_t>(p.block_size),
                                    static_cast<cuuint64_t>(p.num_blocks)};
  const cuuint64_t scale_strides[1] = {page_bytes};
  const cuuint32_t scale_box[2] = {kTileKeys, 1};
  return encode(scale_map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2,
                cache + static_cast<int64_t>(p.block_size) * kHeadDim,
                scale_dims, scale_strides, scale_box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                CU_TENSOR_MAP_L2_PROMOTION_NONE,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <Fp8Format F, bool kWide>
void LaunchPersistentAs(const IndexerLogitsParams& p, int sms,
                        hipStream_t stream) {
  using L = PsLayout<kWide>;
  const int rows_per_block = L::kBlockCols / p.heads;
  constexpr int kR = L::kBlockCols / kPsCols;  // rows a block at 128 heads
  const int64_t blocks = (p.rows + rows_per_block - 1) / rows_per_block;
  // Few blocks (decode): split each block's keys so that every
  // multiprocessor gets a chunk, chunks of at least 8 tiles (a run's keys
  // per DSA_LOGITS_PS_SPLIT_KEYS, for measuring).
#ifndef DSA_LOGITS_PS_SPLIT_KEYS
#define DSA_LOGITS_PS_SPLIT_KEYS 512
#endif
  int64_t splits =
      std::min<int64_t>(sms / blocks, p.width / DSA_LOGITS_PS_SPLIT_KEYS);
  splits = std::max<int64_t>(splits, 1);
  const int64_t items = blocks * splits;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(items, sms));
  const int s = static_cast<int>(splits);
  CUtensorMap key_map{}, scale_map{};
  const bool tma = kPsBanks == 1 && MakeKeyMaps(p, &key_map, &scale_map);
  auto launch = [&](auto tma_tag) {
    constexpr bool kTma = decltype(tma_tag)::value;
    if (rows_per_block == kR) {
      IndexerLogitsPersistentKernel<F, kR, kWide, kTma>
          <<<grid, kPsThreads, L::kSmemBytes, stream>>>(p, s, key_map,
                                                        scale_map);
    } else if (rows_per_block == 2 * kR) {
      IndexerLogitsPersistentKernel<F, 2 * kR, kWide, kTma>
          <<<grid, kPsThreads, L::kSmemBytes, stream>>>(p, s, key_map,
                                                        scale_map);
    } else {
      IndexerLogitsPersistentKernel<F, 4 * kR, kWide, kTma>
          <<<grid, kPsThreads, L::kSmemBytes, stream>>>(p, s, key_map,
                                                        scale_map);
    }
  };
  if constexpr (kPsBanks == 1) {
    if (tma) {
      launch(std::true_type{});
      return;
    }
  }
  launch(std::false_type{});
}

// Launches the persistent kernel when it applies; false otherwise.
template <Fp8Format F>
bool LaunchPersistent(const IndexerLogitsParams& p, hipStream_t stream) {
  if constexpr (F != Fp8Format::kE4m3fn) {
    return false;
  } else {
    if (p.heads > kPsCols) return false;
    const int sms = PersistentCtas(stream);
    if (sms == 0) return false;
    // Wide blocks when a block's rows are mostly of one request (prefill):
    // on rows of as many requests as rows (decode) they would multiply
    // most tiles by other requests' columns for nothing.
    const int64_t wide_rows = PsLayout<true>::kBlockCols / p.heads;
    const bool wide = DSA_LOGITS_PS_WIDE >= 0
                          ? DSA_LOGITS_PS_WIDE > 0
                          : p.rows >= wide_rows * int64_t{p.num_requests};
    if (wide) {
      LaunchPersistentAs<F, true>(p, sms, stream);
    } else {
      LaunchPersistentAs<F, false>(p, sms, stream);
    }
    return true;
  }
}
#endif  // DSA_GPU_CUDA

template <Fp8Format F>
LaunchResult Launch(const IndexerLogitsParams& p, hipStream_t stream) {
  if (UsesMma(p)) {
#if defined(DSA_GPU_CUDA)
    if (LaunchPersistent<F>(p, stream)) return CheckLaunch("indexer_logits");
#endif
    const int rows_per_block = kBlockCols / p.heads;
    const int64_t blocks = (p.rows + rows_per_block - 1) / rows_per_block;
    hipLaunchKernelGGL(IndexerLogitsMmaKernel<F>,
                       dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                       stream, p);
  } else {
    hipLaunchKernelGGL(IndexerLogitsFmaKernel<F>,
                       dim3(static_cast<unsigned>(p.rows)), dim3(256), 0,
                       stream, p);
  }
  return CheckLaunch("indexer_logits");
}

}  // namespace

const char* IndexerLogitsPath(const IndexerLogitsParams& p) {
  return UsesMma(p) ? "mma" : "fma";
}

LaunchResult IndexerLogitsLaunch(const IndexerLogitsParams& p, void* stream) {
  constexpr const char* op = "indexer_logits";
  if (p.rows == 0) return LaunchResult{};
  if (p.rows < 0 || p.heads < 1 || p.head_dim < 1 || p.num_blocks < 1 ||
      p.block_size < 1 || p.num_requests < 1 || p.max_blocks_per_request < 1 ||
      p.block_table_stride < p.max_blocks_per_request || p.width < 0 ||
      p.logits_stride < p.width) {
    return Invalid(op,
                   "sizes: rows %lld, heads %d, head_dim %d, num_blocks %lld, "
                   "block_size %d, num_requests %d, max_blocks %d, "
                   "block_table_stride %lld, width %lld, logits_stride %lld",
                   static_cast<long long>(p.rows), p.heads, p.head_dim,
                   static_cast<long long>(p.num_blocks), p.block_size,
                   p.num_requests, p.max_blocks_per_request,
                   static_cast<long long>(p.block_table_stride),
                   static_cast<long long>(p.width),
                   static_cast<long long>(p.logits_stride));
  }
  if (p.rows > 0x7fffffff) {
    return Invalid(op, "%lld rows, at most 2^31 - 1 per launch",
                   static_cast<long long>(p.rows));
  }
  if (p.q_fp8 == nullptr || p.head_weights == nullptr || p.k_cache == nullptr ||
      p.block_table == nullptr || p.row_request == nullptr ||
      p.row_key_start == nullptr || p.row_key_end == nullptr ||
      p.logits == nullptr) {
    return Invalid(op, "a device pointer is null");
  }
  if (reinterpret_cast<uintptr_t>(p.k_cache) % 4 != 0) {
    return Invalid(op, "k_cache is not 4-byte aligned (its fp32 scales)");
  }
  auto s = static_cast<hipStream_t>(stream);
  return p.encoding == Fp8Encoding::kE4m3fnuz
             ? Launch<Fp8Format::kE4m3fnuz>(p, s)
             : Launch<Fp8Format::kE4m3fn>(p, s);
}

}  // namespace dsa::attention::gpu
