// Indexer logits on the GPU; see indexer_kernels.h.
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
// Two bodies share that structure and one launch configuration (256 NVIDIA
// threads, 512 AMD), picked at compile time through platform/gpu/mma.h:
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
#include <cstdint>
#include <cstdio>

#include "attention/gpu/indexer_kernels.h"
#include "attention/gpu/launch_util.h"
#include "platform/gpu/hip_compat.h"
#include "platform/gpu/mma.h"

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

template <Fp8Format F>
LaunchResult Launch(const IndexerLogitsParams& p, hipStream_t stream) {
  if (UsesMma(p)) {
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
