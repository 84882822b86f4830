// Device side of launch.h: latent gather, key/value decompression
// (two GEMMs: the platform's vendor GEMM through vendor_gemm.h, or
// gemm_bf16.h) and FlashAttention-style causal attention.
//
// Scratch: each request's latent rows start at a multiple of 128 and run to
// a multiple of 128 (rows past seq_len are zero), so key tiles never leave
// their request and every value a tile reads is finite. The decompression
// writes K_nope row-major [S, heads * nope] and V transposed [heads * v, S],
// so that both attention products read K-major operands.
//
// Attention work per block: 128 query rows (64 on AMD) of one request and
// one head, key/value tiles visited from the last (diagonal) one down, so
// only the first one or two visited need the causal mask. Bodies:
//   - sm_90a, head dims multiples of 64 (the default there): warp-
//     specialised, FlashAttention-3's structure (WarpgroupTmaBody below):
//     TMA copies of 128-byte swizzled tiles into mbarrier rings, a producer
//     warpgroup and two consumer warpgroups on wgmma, P in registers;
//   - sm_90a otherwise: two warpgroups of 64 rows on wgmma (operands in the
//     no-swizzle core-matrix layout, staged by cp.async as in
//     FlashAttention-2: K of tile t - 1 fetched while P V of tile t runs),
//     with or without the intra-warpgroup overlap, P through shared memory
//     or in registers;
//   - everything else: warps of Mma::kM rows on Bf16WarpMma (mma.sync /
//     MFMA), operands in padded row-major tiles, P through shared memory.
//
// FLOPs and bytes (GLM-5.1: 64 heads, qk 256, v 256, T = 8192): attention
// 2 * 64 * 8192^2 / 2 * 512 = 2.2 TFLOP; decompression 2 * 8192 * 512 * 64
// * 448 = 0.24 TFLOP; K/V scratch 8192 * 64 * 448 * 2 = 470 MB written once,
// then each (query tile, head) block reads its keys' K and V from L2.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "attention/gpu/dense_mha/gemm_bf16.h"
#include "attention/gpu/dense_mha/launch.h"
#include "attention/gpu/dense_mha/vendor_gemm.h"
#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/stream_scratch.h"

// CUtensorMap and the TMA body's plumbing (CUDA only); the tensor map's
// encoder is the driver's, looked up at run time (nothing links libcuda).
#include "attention/gpu/device/sm90_pipeline.h"

namespace dsa::attention::gpu {
namespace {

using Mma = ::dsa::gpu::Bf16WarpMma;
using ::dsa::gpu::Bf16ToFloat;
using ::dsa::gpu::DecodeFp8;
using ::dsa::gpu::FloatToBf16;
using ::dsa::gpu::Fp8Format;
using ::dsa::gpu::PackBf16x2;

constexpr const char* kOp = "dense_mha_prefill";

// Query rows per block and keys per tile. AMD's 64 KiB of LDS per
// workgroup asks for smaller tiles than the H100/H200's 227 KiB.
constexpr int kBlockM = kDsaWarpSize == 32 ? 128 : 64;
constexpr int kBlockN = kDsaWarpSize == 32 ? 64 : 32;
constexpr int kWarps = kBlockM / Mma::kM;
constexpr int kThreads = kWarps * kDsaWarpSize;
constexpr int kPad = 8;  // elements: 16 bytes, spreads ldmatrix rows over banks
constexpr int kMaxHeadDim = 256;
constexpr int kRows = Mma::kCRowsPerLane;
static_assert(kBlockM % Mma::kM == 0 && kBlockN % Mma::kN == 0 &&
                  kBlockN % Mma::kK == 0,
              "tiles must hold whole fragments");
static_assert(Mma::kCPerLane % 2 == 0, "stores take slots in pairs");
// Scratch rows of a request start at (and are padded to) this multiple.
// 128: the TMA body's tiles of 128 keys (DeepSeek-V3.2's shape).
constexpr int kKeyAlign = 128;
static_assert(kKeyAlign % kBlockN == 0, "tiles stay inside a request");

// One request with query tokens, in the order of the scratch rows.
struct RequestInfo {
  int32_t q_begin;    // first query token (row of q / output)
  int32_t n;          // query tokens
  int32_t seq_len;    // latent rows: context + n
  int32_t kv_row;     // first scratch row (a multiple of kKeyAlign)
  int32_t table_row;  // the request's block-table row
  int32_t pad[3];
};
// One block of attention work: query tile `q_tile` of request `request`
// (an index into the RequestInfo array).
struct WorkItem {
  int32_t request;
  int32_t q_tile;
};

// Per-call metadata, in the kernel parameters when it fits (no upload, so
// the launch does not wait for the host), else in device memory.
constexpr int kInlineRequests = 16;
constexpr int kInlineItems = 320;
struct Meta {
  const RequestInfo* requests;  // device arrays, when not inline
  const WorkItem* items;
  int32_t is_inline;
  RequestInfo req[kInlineRequests];
  WorkItem item[kInlineItems];
#if defined(DSA_GPU_ROCM)
  // AMD: clang copies a by-value kernel parameter to scratch (3 KiB a lane
  // here), and the copy stays when an inline entry and a device-array entry
  // are loaded through one pointer, which LLVM makes of two loads in the
  // same address space. Loading the device arrays through the global
  // address space keeps the loads apart: the inline entries are then read
  // from the kernel arguments, and nothing is copied.
  __device__ __forceinline__ RequestInfo Request(int i) const {
    return is_inline ? req[i] : LoadGlobal(requests + i);
  }
  __device__ __forceinline__ WorkItem Item(int i) const {
    return is_inline ? item[i] : LoadGlobal(items + i);
  }
  template <typename T>
  __device__ __forceinline__ static T LoadGlobal(const T* p) {
    static_assert(sizeof(T) % 4 == 0, "whole 32-bit words");
    const auto* words = (const __attribute__((address_space(1))) int32_t*)p;
    int32_t w[sizeof(T) / 4];
#pragma unroll
    for (int k = 0; k < static_cast<int>(sizeof(T) / 4); ++k) w[k] = words[k];
    T value;
    __builtin_memcpy(&value, w, sizeof(T));
    return value;
  }
#else
  __device__ __forceinline__ RequestInfo Request(int i) const {
    return is_inline ? req[i] : requests[i];
  }
  __device__ __forceinline__ WorkItem Item(int i) const {
    return is_inline ? item[i] : items[i];
  }
#endif
};

constexpr int kGatherRows = 8;
constexpr int kGatherThreads = 256;

// Latent entries -> bf16 rows kv_c | k_pe (lat_ld elements apart); rows
// from seq_len to the next multiple of kKeyAlign are zero. Grid: (latent
// rows / kGatherRows, requests).
template <int kEncoding>
__global__ void __launch_bounds__(kGatherThreads)
    GatherLatentKernel(const uint8_t* __restrict__ cache, int64_t entry_bytes,
                       int64_t num_blocks, int32_t block_size,
                       const int32_t* __restrict__ block_table,
                       int64_t table_stride, int32_t max_blocks,
                       const Meta meta, int32_t lora, int32_t rope,
                       uint16_t* __restrict__ lat, int64_t lat_ld) {
  const RequestInfo req = meta.Request(blockIdx.y);
  const int words = (lora + rope) / 2;  // bf16 pairs per row
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kGatherRows;
  const int64_t padded = (static_cast<int64_t>(req.seq_len) + kKeyAlign - 1) /
                         kKeyAlign * kKeyAlign;
  for (int idx = threadIdx.x; idx < kGatherRows * words;
       idx += kGatherThreads) {
    const int64_t j = j0 + idx / words;
    if (j >= padded) break;  // rows are in increasing order
    uint32_t* dst =
        reinterpret_cast<uint32_t*>(lat + (req.kv_row + j) * lat_ld);
    if (j >= req.seq_len) {
      dst[idx % words] = 0;
      continue;
    }
    const int w = idx % words;
    const int64_t col = j / block_size;
    int64_t block = block_table[req.table_row * table_stride +
                                (col < max_blocks ? col : max_blocks - 1)];
    block = block < 0 ? 0 : (block >= num_blocks ? num_blocks - 1 : block);
    const uint8_t* entry =
        cache + (block * block_size + j % block_size) * entry_bytes;
    uint32_t out;
    if constexpr (kEncoding == static_cast<int>(LatentCacheType::kBFloat16)) {
      out = reinterpret_cast<const uint32_t*>(entry)[w];
    } else {
      constexpr Fp8Format kF =
          kEncoding == static_cast<int>(LatentCacheType::kFp8E4m3fn)
              ? Fp8Format::kE4m3fn
              : Fp8Format::kE4m3fnuz;
      const int e = 2 * w;
      const int tiles = lora / 128;
      if (e < lora) {
        const uint32_t codes = reinterpret_cast<const uint16_t*>(entry)[w];
        const float scale =
            reinterpret_cast<const float*>(entry + lora)[e / 128];
        // fp8 times a power of two: exact in bf16.
        out = PackBf16x2(DecodeFp8<kF>(codes & 0xffu) * scale,
                         DecodeFp8<kF>(codes >> 8) * scale);
      } else {
        out = reinterpret_cast<const uint32_t*>(entry + lora +
                                                4 * tiles)[(e - lora) / 2];
      }
    }
    dst[w] = out;
  }
}

// n values -> bf16 bits (fp32 rounded to nearest even, bf16 copied).
template <typename T>
__global__ void ToBf16Kernel(const T* __restrict__ in,
                             uint16_t* __restrict__ out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(T) == 4) {
      out[i] = FloatToBf16(in[i]);
    } else {
      out[i] = in[i];
    }
  }
}

// kv_b_proj [heads, nope + v, lora] (fp32 or bf16, any alignment) -> bf16
// W_UK [heads * nope, lora] and W_UV [heads * v, lora], both contiguous, for
// the vendor GEMM (which takes one row stride per operand, not row groups).
// Each thread moves 8 consecutive elements of a row (lora % 8 == 0).
template <typename T>
__global__ void SplitWeightsKernel(const T* __restrict__ w,
                                   uint16_t* __restrict__ wk,
                                   uint16_t* __restrict__ wv, int64_t rows,
                                   int32_t nope, int32_t v, int32_t lora) {
  const int64_t chunks_per_row = lora / 8;
  const int64_t total = rows * chunks_per_row;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       c < total; c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = c / chunks_per_row;
    const int col = static_cast<int>(c % chunks_per_row) * 8;
    const int64_t head = row / (nope + v);
    const int j = static_cast<int>(row % (nope + v));
    uint16_t* dst = j < nope ? wk + (head * nope + j) * lora + col
                             : wv + (head * v + (j - nope)) * lora + col;
    const T* src = w + row * lora + col;
    uint32_t packed[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (sizeof(T) == 4) {
        packed[i] = PackBf16x2(src[2 * i], src[2 * i + 1]);
      } else {
        packed[i] = static_cast<uint32_t>(src[2 * i]) |
                    (static_cast<uint32_t>(src[2 * i + 1]) << 16);
      }
    }
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

struct AttentionArgs {
  const uint16_t* q;      // bf16 [tokens, heads, qk]
  const uint16_t* knope;  // bf16 [S, heads * nope]
  const uint16_t* vt;     // bf16 [heads * v, S]: V transposed
  const uint16_t* lat;    // bf16 [S, lat_ld]: kv_c | k_pe
  void* out;              // [tokens, heads, v]
  Meta meta;
  int64_t knope_ld;
  int64_t vt_ld;
  int64_t lat_ld;
  int32_t heads, nope, rope, v, lora;
  int64_t tokens;
  float scale_log2;  // softmax_scale * log2(e)
  bool out_bf16;
  bool out_pairs;  // output 8-byte aligned: adjacent fp32 pairs in one store
  bool pingpong;   // TMA body: the consumer warpgroups take turns to issue
};

// Shared memory of the warp-level body: padded row-major tiles.
template <int kQk, int kV>
struct WarpSmem {
  static constexpr int kLdQ = kQk + kPad;
  static constexpr int kLdVt = kBlockN + kPad;
  static constexpr int kLdP = kBlockN + kPad;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kBlockM * kLdQ;
  static constexpr int kVt = kK + kBlockN * kLdQ;
  static constexpr int kP = kVt + kV * kLdVt;
  static constexpr int kElems = kP + kWarps * Mma::kM * kLdP;
  static constexpr size_t kBytes = sizeof(uint16_t) * kElems;
};

// Shared memory of the pipelined warpgroup body: Q, two K and two V^T
// buffers, and two P buffers per warpgroup (byte offsets).
template <int kQk, int kV>
struct PipelinedSmem {
  static constexpr int kQkGroup = kQk * 16;
  static constexpr int kKeyGroup = kBlockN * 16;
  static constexpr int kKBytes = kBlockN * kQk * 2;
  static constexpr int kVtBytes = kV * kBlockN * 2;
  static constexpr int kPBytes = 64 * kBlockN * 2;  // one warpgroup's P
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kBlockM * kQk * 2;
  static constexpr int kVt = kK + 2 * kKBytes;
  static constexpr int kP = kVt + 2 * kVtBytes;
  static constexpr size_t kBytes = kP + 2 * 2 * kPBytes;
  static constexpr size_t kBytesRegP = kP;  // P stays in registers
};

// Shared memory of the warpgroup body: core-matrix layout (mma.h), byte
// offsets. Q: 128 x kQk, K: 64 x kQk, V^T: kV x 64, P: 2 x 64 x 64.
template <int kQk, int kV>
struct WarpgroupSmem {
  static constexpr int kQkGroup = kQk * 16;       // bytes per 8 rows of Q, K
  static constexpr int kKeyGroup = kBlockN * 16;  // of V^T and P
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kBlockM * kQk * 2;
  static constexpr int kVt = kK + kBlockN * kQk * 2;
  static constexpr int kP = kVt + kV * kBlockN * 2;
  static constexpr size_t kBytes = kP + 2 * 64 * kBlockN * 2;
};

// Writes output elements (col0, v0) and (col1, v1) of one (token, head) row
// starting at element `base`; `pair`: col1 == col0 + 1.
__device__ __forceinline__ void StoreOut(const AttentionArgs& a, int64_t base,
                                         int col0, float v0, int col1, float v1,
                                         bool pair) {
  if (a.out_bf16) {
    uint16_t* o = static_cast<uint16_t*>(a.out) + base;
    if (pair && col0 % 2 == 0 && col1 < a.v) {
      *reinterpret_cast<uint32_t*>(o + col0) = PackBf16x2(v0, v1);
      return;
    }
    if (col0 < a.v) o[col0] = FloatToBf16(v0);
    if (col1 < a.v) o[col1] = FloatToBf16(v1);
  } else {
    float* o = static_cast<float*>(a.out) + base;
    if (pair && a.out_pairs && col0 % 2 == 0 && col1 < a.v) {
      *reinterpret_cast<float2*>(o + col0) = make_float2(v0, v1);
      return;
    }
    if (col0 < a.v) o[col0] = v0;
    if (col1 < a.v) o[col1] = v1;
  }
}

// What a block works on.
struct BlockWork {
  RequestInfo req;
  int head;
  int i0;              // first query row of the block (within the request)
  int rows;            // query rows in the block (<= kBlockM)
  int first_pos;       // position of row 0
  int num_tiles;       // key tiles [0, num_tiles)
  int64_t head_knope;  // column of this head in knope
  int64_t head_vt;     // row of this head's first value dim in vt
};

__device__ __forceinline__ BlockWork GetWork(const AttentionArgs& a) {
  BlockWork w;
  // Query tiles of one head are consecutive blocks: the blocks running at
  // the same time read the same head's K and V, which then stay in L2
  // (a head's K/V is 7 MiB at T = 8192; all heads' 470 MB are not).
  w.head = blockIdx.y;
  const WorkItem item = a.meta.Item(blockIdx.x);
  w.req = a.meta.Request(item.request);
  w.i0 = item.q_tile * kBlockM;
  w.rows = min(kBlockM, w.req.n - w.i0);
  w.first_pos = w.req.seq_len - w.req.n + w.i0;
  w.num_tiles = (w.first_pos + w.rows - 1) / kBlockN + 1;
  w.head_knope = static_cast<int64_t>(w.head) * a.nope;
  w.head_vt = static_cast<int64_t>(w.head) * a.v;
  return w;
}

// Global address of 8 elements of the query row `r` of the block.
__device__ __forceinline__ const uint16_t* QSrc(const AttentionArgs& a,
                                                const BlockWork& w, int r,
                                                int col) {
  const int qk = a.nope + a.rope;
  return a.q +
         (static_cast<int64_t>(w.req.q_begin + w.i0 + r) * a.heads + w.head) *
             qk +
         col;
}
// ... of key `key` (within the request), dims [col, col + 8) of K_nope|k_pe.
__device__ __forceinline__ const uint16_t* KSrc(const AttentionArgs& a,
                                                const BlockWork& w, int key,
                                                int col) {
  const int64_t row = w.req.kv_row + key;
  return col < a.nope ? a.knope + row * a.knope_ld + w.head_knope + col
                      : a.lat + row * a.lat_ld + a.lora + (col - a.nope);
}
// ... of value dim d, keys [key, key + 8).
__device__ __forceinline__ const uint16_t* VtSrc(const AttentionArgs& a,
                                                 const BlockWork& w, int d,
                                                 int key) {
  return a.vt + (w.head_vt + d) * a.vt_ld + w.req.kv_row + key;
}

__device__ __forceinline__ int64_t OutBase(const AttentionArgs& a,
                                           const BlockWork& w, int r) {
  return (static_cast<int64_t>(w.req.q_begin + w.i0 + r) * a.heads + w.head) *
         a.v;
}

// ---------------------------------------------------------------------------
// Warp-level body: each warp owns Mma::kM query rows.

template <int kQk, int kV>
__device__ __forceinline__ void WarpBody(const AttentionArgs& a,
                                         uint16_t* smem) {
  using L = WarpSmem<kQk, kV>;
  constexpr int kLdQ = L::kLdQ;
  constexpr int kLdVt = L::kLdVt;
  constexpr int kLdP = L::kLdP;
  constexpr int kSBlocks = kBlockN / Mma::kN;
  constexpr int kOBlocks = kV / Mma::kN;
  constexpr float kNegInf = -__builtin_huge_valf();
  uint16_t* q_s = smem + L::kQ;
  uint16_t* k_s = smem + L::kK;
  uint16_t* vt_s = smem + L::kVt;
  const BlockWork w = GetWork(a);
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  uint16_t* p_s = smem + L::kP + warp * Mma::kM * kLdP;
  const int qk = a.nope + a.rope;

  // Columns [qk, kQk) of Q and K and rows [v, kV) of V^T are zero.
  for (int c = qk + threadIdx.x; c < kQk; c += kThreads) {
    for (int r = 0; r < kBlockM; ++r) q_s[r * kLdQ + c] = 0;
    for (int r = 0; r < kBlockN; ++r) k_s[r * kLdQ + c] = 0;
  }
  for (int i = threadIdx.x; i < (kV - a.v) * kBlockN; i += kThreads) {
    vt_s[(a.v + i / kBlockN) * kLdVt + i % kBlockN] = 0;
  }
  const int q_chunks = qk / 8;
  for (int c = threadIdx.x; c < kBlockM * q_chunks; c += kThreads) {
    const int r = c / q_chunks;
    const int col = (c % q_chunks) * 8;
    uint16_t* d = q_s + r * kLdQ + col;
    if (r < w.rows) {
      CopyAsync16(d, QSrc(a, w, r, col));
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
  auto load_k = [&](int t) {
    for (int c = threadIdx.x; c < kBlockN * q_chunks; c += kThreads) {
      const int r = c / q_chunks;
      const int col = (c % q_chunks) * 8;
      CopyAsync16(k_s + r * kLdQ + col, KSrc(a, w, t * kBlockN + r, col));
    }
  };
  auto load_vt = [&](int t) {
    constexpr int kChunks = kBlockN / 8;
    for (int c = threadIdx.x; c < a.v * kChunks; c += kThreads) {
      const int d = c / kChunks;
      const int key = (c % kChunks) * 8;
      CopyAsync16(vt_s + d * kLdVt + key, VtSrc(a, w, d, t * kBlockN + key));
    }
  };

  Mma::C o[kOBlocks];
#pragma unroll
  for (int b = 0; b < kOBlocks; ++b) Mma::Zero(o[b]);
  float m[kRows], l[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = kNegInf;
    l[r] = 0.0f;
  }
  const uint16_t* q_w = q_s + warp * Mma::kM * kLdQ;
  const int row_base = warp * Mma::kM;

  load_k(w.num_tiles - 1);
  CopyAsyncCommit();
  for (int t = w.num_tiles - 1; t >= 0; --t) {
    CopyAsyncWait<0>();
    __syncthreads();  // K_t (and Q) visible; every warp is done with V_{t+1}
    load_vt(t);
    CopyAsyncCommit();

    Mma::C s[kSBlocks];
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) Mma::Zero(s[b]);
#pragma unroll
    for (int kk = 0; kk < kQk; kk += Mma::kK) {
      Mma::A qa;
      Mma::LoadA(qa, q_w + kk, kLdQ, lane);
#pragma unroll
      for (int b = 0; b < kSBlocks; ++b) {
        Mma::B kb;
        Mma::LoadB(kb, k_s + b * Mma::kN * kLdQ + kk, kLdQ, lane);
        Mma::Run(s[b], qa, kb);
      }
    }

    // Online softmax in the log2 domain. Keys after a row's position are
    // masked; only tiles reaching past the block's first row need it.
    const int key0 = t * kBlockN;
    const bool masked = key0 + kBlockN - 1 > w.first_pos;
    float mx[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) mx[r] = kNegInf;
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; ++e) {
        float x = s[b].v[e] * a.scale_log2;
        if (masked) {
          const int key = key0 + b * Mma::kN + Mma::CCol(lane, e);
          const int pos = w.first_pos + row_base + Mma::CRow(lane, e);
          if (key > pos) x = kNegInf;
        }
        s[b].v[e] = x;
        mx[Mma::CRowSlot(e)] = fmaxf(mx[Mma::CRowSlot(e)], x);
      }
    }
    float base[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float tile_max = Mma::RowMax(mx[r]);
      const float new_max = fmaxf(m[r], tile_max);
      // A row with no unmasked key yet keeps max -inf; 0 as the base keeps
      // exp2(-inf - base) = 0 instead of NaN.
      base[r] = new_max == kNegInf ? 0.0f : new_max;
      const float alpha = exp2f(m[r] - base[r]);
      m[r] = new_max;
      l[r] *= alpha;
      mx[r] = alpha;
    }
#pragma unroll
    for (int b = 0; b < kOBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; ++e) {
        o[b].v[e] *= mx[Mma::CRowSlot(e)];
      }
    }
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; e += 2) {
        const float p0 = exp2f(s[b].v[e] - base[Mma::CRowSlot(e)]);
        const float p1 = exp2f(s[b].v[e + 1] - base[Mma::CRowSlot(e + 1)]);
        l[Mma::CRowSlot(e)] += p0;
        l[Mma::CRowSlot(e + 1)] += p1;
        const int r0 = Mma::CRow(lane, e);
        const int c0 = b * Mma::kN + Mma::CCol(lane, e);
        const int r1 = Mma::CRow(lane, e + 1);
        const int c1 = b * Mma::kN + Mma::CCol(lane, e + 1);
        if (r1 == r0 && c1 == c0 + 1 && c0 % 2 == 0) {
          *reinterpret_cast<uint32_t*>(p_s + r0 * kLdP + c0) =
              PackBf16x2(p0, p1);
        } else {
          p_s[r0 * kLdP + c0] = FloatToBf16(p0);
          p_s[r1 * kLdP + c1] = FloatToBf16(p1);
        }
      }
    }

    CopyAsyncWait<0>();
    __syncthreads();  // V_t and every warp's P visible; K_t no longer read
    if (t > 0) load_k(t - 1);
    CopyAsyncCommit();
#pragma unroll
    for (int kk = 0; kk < kBlockN; kk += Mma::kK) {
      Mma::A pa;
      Mma::LoadA(pa, p_s + kk, kLdP, lane);
#pragma unroll
      for (int b = 0; b < kOBlocks; ++b) {
        Mma::B vb;
        Mma::LoadB(vb, vt_s + b * Mma::kN * kLdVt + kk, kLdVt, lane);
        Mma::Run(o[b], pa, vb);
      }
    }
  }

  float inv[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = Mma::RowSum(l[r]);
    inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
#pragma unroll
  for (int b = 0; b < kOBlocks; ++b) {
#pragma unroll
    for (int e = 0; e < Mma::kCPerLane; e += 2) {
      const int r0 = row_base + Mma::CRow(lane, e);
      const int r1 = row_base + Mma::CRow(lane, e + 1);
      const int c0 = b * Mma::kN + Mma::CCol(lane, e);
      const int c1 = b * Mma::kN + Mma::CCol(lane, e + 1);
      const float v0 = o[b].v[e] * inv[Mma::CRowSlot(e)];
      const float v1 = o[b].v[e + 1] * inv[Mma::CRowSlot(e + 1)];
      if (r1 == r0 && c1 == c0 + 1) {
        if (r0 < w.rows) StoreOut(a, OutBase(a, w, r0), c0, v0, c1, v1, true);
      } else {
        if (r0 < w.rows) {
          StoreOut(a, OutBase(a, w, r0), c0, v0, a.v, 0.0f, false);
        }
        if (r1 < w.rows) {
          StoreOut(a, OutBase(a, w, r1), c1, v1, a.v, 0.0f, false);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Warpgroup body (sm_90a): two warpgroups, 64 query rows each, on wgmma.

#if defined(DSA_GPU_CUDA)
// 16-byte chunk `c` of an operand of `rows` rows x kCols columns in the
// core-matrix layout: (row, column) of its first element. Consecutive
// threads take the two chunks of a 32-byte global segment, then the next
// row of the same core matrix, so shared-memory stores spread over the banks
// while global loads stay sector-sized.
template <int kCols>
__device__ __forceinline__ void CoreChunk(int c, int* row, int* col) {
  constexpr int kPerGroup = 8 * (kCols / 8);  // chunks per 8 rows
  const int group = c / kPerGroup;
  const int i = c % kPerGroup;
  *row = group * 8 + (i / 2) % 8;
  *col = ((i % 2) + 2 * (i / 16)) * 8;
}

template <int kQk, int kV>
__device__ __forceinline__ void WarpgroupBody(const AttentionArgs& a,
                                              uint16_t* smem_u16) {
  static_assert(kBlockM == 128 && kBlockN == 64, "two warpgroups of 64 rows");
  static_assert(kQk % 16 == 0 && kV % 8 == 0, "core-matrix tiles");
  using L = WarpgroupSmem<kQk, kV>;
  using WgS = ::dsa::gpu::WarpgroupBf16Mma<kBlockN>;
  using WgO = ::dsa::gpu::WarpgroupBf16Mma<kV>;
  constexpr float kNegInf = -__builtin_huge_valf();
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_u16);
  uint8_t* q_s = smem + L::kQ;
  uint8_t* k_s = smem + L::kK;
  uint8_t* vt_s = smem + L::kVt;
  const BlockWork w = GetWork(a);
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int group = warp / 4;  // warpgroup: query rows 64 group ..
  const int warp_in_group = warp % 4;
  uint8_t* p_s = smem + L::kP + group * 64 * kBlockN * 2;
  const int qk = a.nope + a.rope;
  const int row_base = group * 64;

  // Zero columns [qk, kQk) of K (rows of Q past qk are zeroed when loaded)
  // and rows [v, kV) of V^T.
  for (int c = threadIdx.x; c < kBlockN * (kQk / 8); c += kThreads) {
    int r, col;
    CoreChunk<kQk>(c, &r, &col);
    if (col >= qk) {
      *reinterpret_cast<uint4*>(k_s + WgS::Offset(r, col, L::kQkGroup)) =
          make_uint4(0, 0, 0, 0);
    }
  }
  for (int c = threadIdx.x; c < kV * (kBlockN / 8); c += kThreads) {
    int d, key;
    CoreChunk<kBlockN>(c, &d, &key);
    if (d >= a.v) {
      *reinterpret_cast<uint4*>(vt_s + WgS::Offset(d, key, L::kKeyGroup)) =
          make_uint4(0, 0, 0, 0);
    }
  }
  for (int c = threadIdx.x; c < kBlockM * (kQk / 8); c += kThreads) {
    int r, col;
    CoreChunk<kQk>(c, &r, &col);
    uint8_t* d = q_s + WgS::Offset(r, col, L::kQkGroup);
    if (r < w.rows && col < qk) {
      CopyAsync16(d, QSrc(a, w, r, col));
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
  auto load_k = [&](int t) {
    for (int c = threadIdx.x; c < kBlockN * (kQk / 8); c += kThreads) {
      int r, col;
      CoreChunk<kQk>(c, &r, &col);
      if (col < qk) {
        CopyAsync16(k_s + WgS::Offset(r, col, L::kQkGroup),
                    KSrc(a, w, t * kBlockN + r, col));
      }
    }
  };
  auto load_vt = [&](int t) {
    for (int c = threadIdx.x; c < kV * (kBlockN / 8); c += kThreads) {
      int d, key;
      CoreChunk<kBlockN>(c, &d, &key);
      if (d < a.v) {
        CopyAsync16(vt_s + WgS::Offset(d, key, L::kKeyGroup),
                    VtSrc(a, w, d, t * kBlockN + key));
      }
    }
  };

  float o[WgO::kAccPerThread];
#pragma unroll
  for (int i = 0; i < WgO::kAccPerThread; ++i) o[i] = 0.0f;
  // Rows 16 w + lane / 4 (slot 0) and + 8 (slot 1) of the warpgroup.
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};
  const uint8_t* q_group = q_s + group * 8 * L::kQkGroup;

  load_k(w.num_tiles - 1);
  CopyAsyncCommit();
  for (int t = w.num_tiles - 1; t >= 0; --t) {
    CopyAsyncWait<0>();
    WgS::FenceStores();
    __syncthreads();
    load_vt(t);
    CopyAsyncCommit();

    float s[WgS::kAccPerThread];
    WgS::template Issue<kQk>(s, q_group, L::kQkGroup, k_s, L::kQkGroup, false);
    WgS::Wait(s);

    const int key0 = t * kBlockN;
    const bool masked = key0 + kBlockN - 1 > w.first_pos;
    float mx[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int i = 0; i < WgS::kAccPerThread; ++i) {
      float x = s[i] * a.scale_log2;
      if (masked) {
        const int key = key0 + WgS::AccCol(lane, i);
        const int pos =
            w.first_pos + row_base + WgS::AccRow(warp_in_group, lane, i);
        if (key > pos) x = kNegInf;
      }
      s[i] = x;
      mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], x);
    }
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = mx[r];
      tile_max = fmaxf(tile_max, DSA_SHFL_XOR(tile_max, 1, kDsaWarpSize));
      tile_max = fmaxf(tile_max, DSA_SHFL_XOR(tile_max, 2, kDsaWarpSize));
      const float new_max = fmaxf(m[r], tile_max);
      base[r] = new_max == kNegInf ? 0.0f : new_max;
      alpha[r] = exp2f(m[r] - base[r]);
      m[r] = new_max;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int i = 0; i < WgO::kAccPerThread; ++i) o[i] *= alpha[(i / 2) % 2];
#pragma unroll
    for (int i = 0; i < WgS::kAccPerThread; i += 2) {
      const int slot = (i / 2) % 2;
      const float p0 = exp2f(s[i] - base[slot]);
      const float p1 = exp2f(s[i + 1] - base[slot]);
      l[slot] += p0 + p1;
      const int r = WgS::AccRow(warp_in_group, lane, i);
      const int col = WgS::AccCol(lane, i);
      *reinterpret_cast<uint32_t*>(p_s + WgS::Offset(r, col, L::kKeyGroup)) =
          PackBf16x2(p0, p1);
    }

    CopyAsyncWait<0>();
    WgS::FenceStores();  // P (st.shared) and V^T (cp.async) for wgmma
    __syncthreads();
    if (t > 0) load_k(t - 1);
    CopyAsyncCommit();
    WgO::template Issue<kBlockN>(o, p_s, L::kKeyGroup, vt_s, L::kKeyGroup,
                                 true);
    WgO::Wait(o);
  }

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += DSA_SHFL_XOR(sum, 1, kDsaWarpSize);
    sum += DSA_SHFL_XOR(sum, 2, kDsaWarpSize);
    inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < WgO::kAccPerThread; i += 2) {
    const int r = row_base + WgO::AccRow(warp_in_group, lane, i);
    const int col = WgO::AccCol(lane, i);
    const float inv_r = inv[(i / 2) % 2];
    if (r < w.rows) {
      StoreOut(a, OutBase(a, w, r), col, o[i] * inv_r, col + 1,
               o[i + 1] * inv_r, true);
    }
  }
}

// The warpgroup body with FlashAttention-3's intra-warpgroup overlap: tile
// t's O += P V runs on the tensor cores while tile t - 1's S = Q K^T is
// issued and its softmax computed. K, V^T and P are double-buffered, and
// one block barrier per tile (instead of two) orders the buffers:
//   iteration i (tile t = last - i):
//     wait K_t, V_{t+1}; barrier
//     load V_t, K_{t-1} (into the buffers tile t + 2 / t + 1 used)
//     issue S_t; issue PV_{t+1}; wait S_t (PV_{t+1} may still run)
//     softmax of tile t -> P_t (the other P buffer)
//     wait PV_{t+1}; rescale O for tile t's new row maxima
//   then PV_0.
//
// kRegP: P stays in registers as the A operand of P V (the wgmma RS form,
// WarpgroupBf16MmaRegA): no shared-memory P buffers, stores or reads.
template <int kQk, int kV, bool kRegP>
__device__ __forceinline__ void WarpgroupPipelinedBody(const AttentionArgs& a,
                                                       uint16_t* smem_u16) {
  static_assert(kBlockM == 128 && kBlockN == 64, "two warpgroups of 64 rows");
  using L = PipelinedSmem<kQk, kV>;
  using WgS = ::dsa::gpu::WarpgroupBf16Mma<kBlockN>;
  using WgO = ::dsa::gpu::WarpgroupBf16Mma<kV>;
  using WgORegA = ::dsa::gpu::WarpgroupBf16MmaRegA<kV>;
  constexpr int kPSteps = kBlockN / 16;
  constexpr float kNegInf = -__builtin_huge_valf();
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_u16);
  uint8_t* q_s = smem + L::kQ;
  const BlockWork w = GetWork(a);
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int group = warp / 4;
  const int warp_in_group = warp % 4;
  const int qk = a.nope + a.rope;
  const int row_base = group * 64;
  auto k_buf = [&](int b) { return smem + L::kK + b * L::kKBytes; };
  auto vt_buf = [&](int b) { return smem + L::kVt + b * L::kVtBytes; };
  auto p_buf = [&](int b) {
    return smem + L::kP + (b * 2 + group) * L::kPBytes;
  };

  // Zero the padding of both K and both V^T buffers (never loaded).
  for (int b = 0; b < 2; ++b) {
    for (int c = threadIdx.x; c < kBlockN * (kQk / 8); c += kThreads) {
      int r, col;
      CoreChunk<kQk>(c, &r, &col);
      if (col >= qk) {
        *reinterpret_cast<uint4*>(k_buf(b) + WgS::Offset(r, col, L::kQkGroup)) =
            make_uint4(0, 0, 0, 0);
      }
    }
    for (int c = threadIdx.x; c < kV * (kBlockN / 8); c += kThreads) {
      int d, key;
      CoreChunk<kBlockN>(c, &d, &key);
      if (d >= a.v) {
        *reinterpret_cast<uint4*>(vt_buf(b) +
                                  WgS::Offset(d, key, L::kKeyGroup)) =
            make_uint4(0, 0, 0, 0);
      }
    }
  }
  for (int c = threadIdx.x; c < kBlockM * (kQk / 8); c += kThreads) {
    int r, col;
    CoreChunk<kQk>(c, &r, &col);
    uint8_t* d = q_s + WgS::Offset(r, col, L::kQkGroup);
    if (r < w.rows && col < qk) {
      CopyAsync16(d, QSrc(a, w, r, col));
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
  auto load_k = [&](int t, uint8_t* dst) {
    for (int c = threadIdx.x; c < kBlockN * (kQk / 8); c += kThreads) {
      int r, col;
      CoreChunk<kQk>(c, &r, &col);
      if (col < qk) {
        CopyAsync16(dst + WgS::Offset(r, col, L::kQkGroup),
                    KSrc(a, w, t * kBlockN + r, col));
      }
    }
  };
  auto load_vt = [&](int t, uint8_t* dst) {
    for (int c = threadIdx.x; c < kV * (kBlockN / 8); c += kThreads) {
      int d, key;
      CoreChunk<kBlockN>(c, &d, &key);
      if (d < a.v) {
        CopyAsync16(dst + WgS::Offset(d, key, L::kKeyGroup),
                    VtSrc(a, w, d, t * kBlockN + key));
      }
    }
  };

  float o[WgO::kAccPerThread];
#pragma unroll
  for (int i = 0; i < WgO::kAccPerThread; ++i) o[i] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};
  const uint8_t* q_group = q_s + group * 8 * L::kQkGroup;
  const int last = w.num_tiles - 1;
  uint32_t p_frag[kPSteps][4];  // kRegP: P of the previous tile

  load_k(last, k_buf(0));
  CopyAsyncCommit();
  for (int i = 0; i <= last; ++i) {
    const int t = last - i;
    const int cur = i % 2;
    CopyAsyncWait<0>();
    WgS::FenceStores();  // cp.async and P stores, for wgmma
    __syncthreads();
    load_vt(t, vt_buf(cur));
    if (t > 0) load_k(t - 1, k_buf(cur ^ 1));
    CopyAsyncCommit();

    float s[WgS::kAccPerThread];
    WgS::template Issue<kQk>(s, q_group, L::kQkGroup, k_buf(cur), L::kQkGroup,
                             false);
    if (i > 0) {
      if constexpr (kRegP) {
        WgORegA::Issue(o, p_frag, vt_buf(cur ^ 1), L::kKeyGroup, true);
      } else {
        WgO::template Issue<kBlockN>(o, p_buf(cur ^ 1), L::kKeyGroup,
                                     vt_buf(cur ^ 1), L::kKeyGroup, true);
      }
      // S_t was committed first: waiting for all but the newest group
      // leaves PV_{t+1} running.
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      WgS::FenceOperands(s);
    } else {
      WgS::Wait(s);
    }

    const int key0 = t * kBlockN;
    const bool masked = key0 + kBlockN - 1 > w.first_pos;
    float mx[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int e = 0; e < WgS::kAccPerThread; ++e) {
      float x = s[e] * a.scale_log2;
      if (masked) {
        const int key = key0 + WgS::AccCol(lane, e);
        const int pos =
            w.first_pos + row_base + WgS::AccRow(warp_in_group, lane, e);
        if (key > pos) x = kNegInf;
      }
      s[e] = x;
      mx[(e / 2) % 2] = fmaxf(mx[(e / 2) % 2], x);
    }
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = mx[r];
      tile_max = fmaxf(tile_max, DSA_SHFL_XOR(tile_max, 1, kDsaWarpSize));
      tile_max = fmaxf(tile_max, DSA_SHFL_XOR(tile_max, 2, kDsaWarpSize));
      const float new_max = fmaxf(m[r], tile_max);
      base[r] = new_max == kNegInf ? 0.0f : new_max;
      alpha[r] = exp2f(m[r] - base[r]);
      m[r] = new_max;
      l[r] *= alpha[r];
    }
    if constexpr (kRegP) {
#pragma unroll
      for (int e = 0; e < WgS::kAccPerThread; e += 2) {
        const int slot = (e / 2) % 2;
        s[e] = exp2f(s[e] - base[slot]);
        s[e + 1] = exp2f(s[e + 1] - base[slot]);
        l[slot] += s[e] + s[e + 1];
      }
      // PV_{t+1} done: O may be rescaled and P_{t+1}'s registers reused.
      // Unconditional (nothing is pending at i = 0): a wait ptxas cannot
      // pair with the issue would make it serialise every wgmma.
      WgORegA::Wait(o, p_frag);
      WgORegA::template FromAccumulator<kBlockN>(s, p_frag);
    } else {
      uint8_t* p_s = p_buf(cur);
#pragma unroll
      for (int e = 0; e < WgS::kAccPerThread; e += 2) {
        const int slot = (e / 2) % 2;
        const float p0 = exp2f(s[e] - base[slot]);
        const float p1 = exp2f(s[e + 1] - base[slot]);
        l[slot] += p0 + p1;
        const int r = WgS::AccRow(warp_in_group, lane, e);
        const int col = WgS::AccCol(lane, e);
        *reinterpret_cast<uint32_t*>(p_s + WgS::Offset(r, col, L::kKeyGroup)) =
            PackBf16x2(p0, p1);
      }
      WgO::Wait(o);  // PV_{t+1} done: O may be rescaled
    }
#pragma unroll
    for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] *= alpha[(e / 2) % 2];
  }
  CopyAsyncWait<0>();
  WgS::FenceStores();
  __syncthreads();
  if constexpr (kRegP) {
    WgORegA::Issue(o, p_frag, vt_buf(last % 2), L::kKeyGroup, true);
    WgORegA::Wait(o, p_frag);
  } else {
    WgO::template Issue<kBlockN>(o, p_buf(last % 2), L::kKeyGroup,
                                 vt_buf(last % 2), L::kKeyGroup, true);
    WgO::Wait(o);
  }

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += DSA_SHFL_XOR(sum, 1, kDsaWarpSize);
    sum += DSA_SHFL_XOR(sum, 2, kDsaWarpSize);
    inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
#pragma unroll
  for (int e = 0; e < WgO::kAccPerThread; e += 2) {
    const int r = row_base + WgO::AccRow(warp_in_group, lane, e);
    const int col = WgO::AccCol(lane, e);
    const float inv_r = inv[(e / 2) % 2];
    if (r < w.rows) {
      StoreOut(a, OutBase(a, w, r), col, o[e] * inv_r, col + 1,
               o[e + 1] * inv_r, true);
    }
  }
}
#endif  // DSA_GPU_CUDA

#if defined(DSA_GPU_CUDA)
inline constexpr bool kWarpgroupAttention = ::dsa::gpu::kHasWarpgroupBf16Mma;
#else
inline constexpr bool kWarpgroupAttention = false;
#endif

// ---------------------------------------------------------------------------
// The warp-specialised body (sm_90a, FlashAttention-3's structure): a
// producer warp streams K and V^T tiles with TMA copies into rings of
// shared-memory stages, signalled on mbarriers; two consumer warpgroups (64
// query rows each) multiply on wgmma from the 128-byte swizzled layout the
// copies write, with P in registers (WarpgroupBf16MmaRegA) and tile t's
// P V beside tile t - 1's Q K^T and softmax, and never wait on a block-wide
// barrier. The math warps issue no loads and compute no addresses, which
// the cp.async bodies above spend many of their issue slots on. Needs
// nope, rope and v multiples of 64 (a TMA box of 64 columns covers one
// swizzle block of one source); the launcher picks another body otherwise.
//
// Per CTA: Q (128 x qk) once; for every key tile (64 keys), K (64 x qk:
// nope / 64 boxes of K_nope, rope / 64 of k_pe) and V^T (v x 64).
// GLM-5.1: Q 64 KiB + 2 stages x (32 + 32) KiB; DeepSeek-V3.2: 48 KiB + 4 x
// (24 + 16) KiB.
#if defined(DSA_GPU_CUDA)
// A producer warpgroup (one lane of it issues the copies): with 12 warps,
// each scheduler's register file holds one producer and two consumer warps,
// and setmaxnreg moves the producer's registers to the consumers (40 + 2 x
// 232 <= 512 per scheduler slot): GLM-5.1's O alone is 128 registers.
constexpr int kTmaConsumerThreads = 256;
constexpr int kTmaThreads = kTmaConsumerThreads + 128;
constexpr int kTmaProducerRegs = 40;
constexpr int kTmaConsumerRegs = 232;

struct TmaMaps {
  CUtensorMap q;      // 3-D {qk, heads, tokens}, box {64, 1, 128}
  CUtensorMap knope;  // 2-D {heads * nope, S}, box {64, kN}
  CUtensorMap kpe;    // 2-D {lora + rope, S} (the latent rows), box {64, kN}
  CUtensorMap vt;     // 2-D {S, heads * v}, box {64, v} (kN / 64 a tile)
};

template <int kQk, int kV, int kN>
struct TmaSmem {
  static constexpr int kQBytes = kBlockM * kQk * 2;
  static constexpr int kKBytes = kN * kQk * 2;
  static constexpr int kVBytes = kV * kN * 2;
  static constexpr int kBudget = 227 * 1024 - 1024 - 256;  // align + barriers
  static constexpr int kStagesFit = (kBudget - kQBytes) / (kKBytes + kVBytes);
  static constexpr int kStages = kStagesFit > 4 ? 4 : kStagesFit;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQBytes;
  static constexpr int kV0 = kK + kStages * kKBytes;
  static constexpr int kBar = kV0 + kStages * kVBytes;  // 8-byte barriers
  // full_q, full_k[s], empty_k[s], full_v[s], empty_v[s]
  static constexpr int kBarriers = 1 + 4 * kStages;
  static constexpr size_t kBytes = 1024 + kBar + kBarriers * 8;
};

// kN: keys per tile, 64 or 128 (DeepSeek-V3.2's v = 128 leaves the
// registers for 128: S and P of a tile at 64 + 32 a thread, O at 64).
template <int kQk, int kV, int kN>
__device__ __forceinline__ void WarpgroupTmaBody(const AttentionArgs& a,
                                                 const TmaMaps& maps,
                                                 uint8_t* smem_raw) {
  static_assert(kBlockM == 128, "two warpgroups of 64 rows");
  static_assert(kN == 64 || kN == 128, "instantiated tile widths");
  static_assert(kKeyAlign % kN == 0, "tiles stay inside a request");
  static_assert(kQk % 64 == 0 && kV % 64 == 0, "whole swizzle blocks");
  using L = TmaSmem<kQk, kV, kN>;
  static_assert(L::kStages >= 2, "at least a double buffer");
  using WgS = ::dsa::gpu::WarpgroupBf16Mma<kN>;
  using WgO = ::dsa::gpu::WarpgroupBf16MmaRegA<kV>;
  using WgOAcc = ::dsa::gpu::WarpgroupBf16Mma<kV>;  // accumulator layout
  using ::dsa::gpu::Bf16Sw128Descriptor;
  constexpr int kStages = L::kStages;
  constexpr int kPSteps = kN / 16;
  constexpr float kNegInf = -__builtin_huge_valf();
  const uint32_t raw =
      static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t q_s = base + L::kQ;
  auto k_s = [&](int s) { return base + L::kK + s * L::kKBytes; };
  auto v_s = [&](int s) { return base + L::kV0 + s * L::kVBytes; };
  const uint32_t bar = base + L::kBar;
  const uint32_t full_q = bar;
  auto full_k = [&](int s) { return bar + 8 * (1 + s); };
  auto empty_k = [&](int s) { return bar + 8 * (1 + kStages + s); };
  auto full_v = [&](int s) { return bar + 8 * (1 + 2 * kStages + s); };
  auto empty_v = [&](int s) { return bar + 8 * (1 + 3 * kStages + s); };

  const BlockWork w = GetWork(a);
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  // Key tiles of kN (GetWork counts tiles of kBlockN).
  const int last = (w.first_pos + w.rows - 1) / kN;
  if (threadIdx.x == 0) {
    MbarInit(full_q, 1);
    for (int s = 0; s < kStages; ++s) {
      MbarInit(full_k(s), 1);
      MbarInit(full_v(s), 1);
      // Lane 0 of each of the 8 consumer warps releases a stage.
      MbarInit(empty_k(s), kTmaConsumerThreads / kDsaWarpSize);
      MbarInit(empty_v(s), kTmaConsumerThreads / kDsaWarpSize);
    }
    MbarFenceInit();
  }
  __syncthreads();

  if (warp >= kTmaConsumerThreads / kDsaWarpSize) {
    // ---- Producer warpgroup: one lane issues every copy.
    WarpgroupRegsDecrease<kTmaProducerRegs>();
    if (warp != kTmaConsumerThreads / kDsaWarpSize || lane != 0) return;
    const int token0 = w.req.q_begin + w.i0;
    MbarExpectTx(full_q, L::kQBytes);
#pragma unroll
    for (int b = 0; b < kQk / 64; ++b) {
      TmaLoad3d(q_s + b * kBlockM * 128, &maps.q, 64 * b, w.head, token0,
                full_q);
    }
    const int nope_boxes = a.nope / 64;
    for (int i = 0; i <= last; ++i) {
      const int t = last - i;
      const int s = i % kStages;
      const uint32_t parity = ((i / kStages) & 1) ^ 1u;
      const int key_row = w.req.kv_row + t * kN;
      MbarWait(empty_k(s), parity);
      MbarExpectTx(full_k(s), L::kKBytes);
#pragma unroll
      for (int b = 0; b < kQk / 64; ++b) {
        const uint32_t dst = k_s(s) + b * kN * 128;
        if (b < nope_boxes) {
          TmaLoad2d(dst, &maps.knope,
                    static_cast<int32_t>(w.head_knope) + 64 * b, key_row,
                    full_k(s));
        } else {
          TmaLoad2d(dst, &maps.kpe, a.lora + 64 * (b - nope_boxes), key_row,
                    full_k(s));
        }
      }
      MbarWait(empty_v(s), parity);
      MbarExpectTx(full_v(s), L::kVBytes);
#pragma unroll
      for (int b = 0; b < kN / 64; ++b) {
        TmaLoad2d(v_s(s) + b * kV * 128, &maps.vt, key_row + 64 * b,
                  static_cast<int32_t>(w.head_vt), full_v(s));
      }
    }
    return;
  }

  // ---- Consumers: warpgroup `group` owns query rows 64 group ...
  WarpgroupRegsIncrease<kTmaConsumerRegs>();
  const int group = warp / 4;
  const int warp_in_group = warp % 4;
  const int row_base = group * 64;
  float o[WgO::kAccPerThread];
#pragma unroll
  for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};
  uint32_t p_frag[kPSteps][4];
  // Q rows of this warpgroup: 64 rows into each 128-row block of 64 columns.
  const uint32_t q_rows = q_s + row_base * 128;
  auto q_desc = [&](int j) {
    return Bf16Sw128Descriptor(q_rows + (j / 4) * kBlockM * 128 + (j % 4) * 32);
  };
  MbarWait(full_q, 0);
  // Ping-pong: group 0 goes first. Group 1 arrives once here and once per
  // round but its last, group 0 once per round: every sync is matched.
  if (a.pingpong && group == 1) NamedBarrierArrive<256>(1);

  for (int i = 0; i <= last; ++i) {
    const int t = last - i;
    const int s = i % kStages;
    const uint32_t parity = (i / kStages) & 1;
    MbarWait(full_k(s), parity);
    // Ping-pong: wait for the other warpgroup to have issued its products
    // of this round, so that one group's softmax runs under the other's
    // products (named barriers 1 and 2, the two consumer groups).
    if (a.pingpong) NamedBarrierSync<256>(1 + group);
    float sc[WgS::kAccPerThread];
    const uint32_t k_base = k_s(s);
    WgS::template IssueWith<kQk / 16>(
        sc, q_desc,
        [&](int j) {
          return Bf16Sw128Descriptor(k_base + (j / 4) * kN * 128 +
                                     (j % 4) * 32);
        },
        false);
    if (i > 0) {
      const int sp = (i - 1) % kStages;
      MbarWait(full_v(sp), ((i - 1) / kStages) & 1);
      const uint32_t v_base = v_s(sp);
      WgO::IssueWith(
          o, p_frag,
          [&](int j) {
            return Bf16Sw128Descriptor(v_base + (j / 4) * kV * 128 +
                                       (j % 4) * 32);
          },
          true);
      if (a.pingpong && !(group == 1 && i == last))
        NamedBarrierArrive<256>(2 - group);
      // S_t was committed first: waiting for all but the newest group
      // leaves PV_{t+1} running.
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      WgS::FenceOperands(sc);
    } else {
      if (a.pingpong && !(group == 1 && i == last))
        NamedBarrierArrive<256>(2 - group);
      WgS::Wait(sc);
    }
    // Q K^T of tile t has read K_t: the stage may be refilled.
    if (lane == 0) MbarArrive(empty_k(s));

    const int key0 = t * kN;
    const bool masked = key0 + kN - 1 > w.first_pos;
    float mx[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int e = 0; e < WgS::kAccPerThread; ++e) {
      float x = sc[e] * a.scale_log2;
      if (masked) {
        const int key = key0 + WgS::AccCol(lane, e);
        const int pos =
            w.first_pos + row_base + WgS::AccRow(warp_in_group, lane, e);
        if (key > pos) x = kNegInf;
      }
      sc[e] = x;
      mx[(e / 2) % 2] = fmaxf(mx[(e / 2) % 2], x);
    }
    float base_r[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = mx[r];
      tile_max = fmaxf(tile_max, DSA_SHFL_XOR(tile_max, 1, kDsaWarpSize));
      tile_max = fmaxf(tile_max, DSA_SHFL_XOR(tile_max, 2, kDsaWarpSize));
      const float new_max = fmaxf(m[r], tile_max);
      base_r[r] = new_max == kNegInf ? 0.0f : new_max;
      alpha[r] = exp2f(m[r] - base_r[r]);
      m[r] = new_max;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int e = 0; e < WgS::kAccPerThread; e += 2) {
      const int slot = (e / 2) % 2;
      sc[e] = exp2f(sc[e] - base_r[slot]);
      sc[e + 1] = exp2f(sc[e + 1] - base_r[slot]);
      l[slot] += sc[e] + sc[e + 1];
    }
    // PV_{t+1} done (unconditional wait: nothing pends at i = 0, and a wait
    // ptxas cannot pair with its issue serialises every wgmma).
    WgO::Wait(o, p_frag);
    if (i > 0 && lane == 0) MbarArrive(empty_v((i - 1) % kStages));
#pragma unroll
    for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] *= alpha[(e / 2) % 2];
    WgO::template FromAccumulator<kN>(sc, p_frag);
  }
  {
    const int sp = last % kStages;
    MbarWait(full_v(sp), (last / kStages) & 1);
    const uint32_t v_base = v_s(sp);
    WgO::IssueWith(
        o, p_frag,
        [&](int j) {
          return Bf16Sw128Descriptor(v_base + (j / 4) * kV * 128 +
                                     (j % 4) * 32);
        },
        true);
    WgO::Wait(o, p_frag);
  }

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += DSA_SHFL_XOR(sum, 1, kDsaWarpSize);
    sum += DSA_SHFL_XOR(sum, 2, kDsaWarpSize);
    inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
#pragma unroll
  for (int e = 0; e < WgO::kAccPerThread; e += 2) {
    const int r = row_base + WgOAcc::AccRow(warp_in_group, lane, e);
    const int col = WgOAcc::AccCol(lane, e);
    const float inv_r = inv[(e / 2) % 2];
    if (r < w.rows) {
      StoreOut(a, OutBase(a, w, r), col, o[e] * inv_r, col + 1,
               o[e + 1] * inv_r, true);
    }
  }
}

template <int kQk, int kV, int kN>
__global__ void __launch_bounds__(kTmaThreads, 1)
    DenseAttentionTmaKernel(const __grid_constant__ AttentionArgs a,
                            const __grid_constant__ TmaMaps maps) {
  extern __shared__ __align__(1024) uint8_t tma_smem[];
  if constexpr (kWarpgroupAttention && kQk % 64 == 0 && kV % 64 == 0) {
    WarpgroupTmaBody<kQk, kV, kN>(a, maps, tma_smem);
  }
}
#endif  // DSA_GPU_CUDA

// The attention bodies: the warp-level one off sm_90a; on sm_90a the plain
// warpgroup body, the pipelined one with P through shared memory, and the
// pipelined one with P in registers.
enum AttentionBody : int {
  kBodyPlain = 0,      // WarpgroupBody on sm_90a, WarpBody elsewhere
  kBodyPipelined = 1,  // WarpgroupPipelinedBody<.., false>
  kBodyRegP = 2,       // WarpgroupPipelinedBody<.., true>
  kBodyTma = 3,        // WarpgroupTmaBody (head dims multiples of 64)
};

// Two blocks per multiprocessor where registers and shared memory allow
// (the plain warpgroup body with v <= 128); one otherwise.
template <int kQk, int kV, int kBody>
constexpr int kAttentionMinBlocks =
    kWarpgroupAttention&& kBody == kBodyPlain&& kV <= 128 ? 2 : 1;

// kBody picks the body on sm_90a; elsewhere every instantiation runs the
// warp-level body (and only kBodyPlain is launched).
template <int kQk, int kV, int kBody>
__global__ void __launch_bounds__(kThreads,
                                  (kAttentionMinBlocks<kQk, kV, kBody>))
    DenseAttentionKernel(const AttentionArgs a) {
  extern __shared__ __align__(128) uint16_t smem[];
#if defined(DSA_GPU_CUDA)
  if constexpr (kWarpgroupAttention && kBody == kBodyRegP) {
    WarpgroupPipelinedBody<kQk, kV, true>(a, smem);
  } else if constexpr (kWarpgroupAttention && kBody == kBodyPipelined) {
    WarpgroupPipelinedBody<kQk, kV, false>(a, smem);
  } else if constexpr (kWarpgroupAttention) {
    WarpgroupBody<kQk, kV>(a, smem);
  } else {
    WarpBody<kQk, kV>(a, smem);
  }
#else
  WarpBody<kQk, kV>(a, smem);
#endif
}

// The TMA body's consumer warpgroups take turns to issue their products
// (on the H200 at T = 8192: GLM-5.1 4.91 -> 4.72 ms, DeepSeek-V3.2 5.92 ->
// 5.85 ms); DSA_DENSE_TMA_PINGPONG=0 turns it off.
bool TmaPingPong() {
  static const bool on = [] {
    const char* env = std::getenv("DSA_DENSE_TMA_PINGPONG");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return on;
}

// Which warpgroup body to run (sm_90a): the warp-specialised TMA body by
// default (where the head dims allow; measured on the H200 at T = 8192:
// GLM-5.1 4.54 ms, DeepSeek-V3.2 5.50 ms of attention without ping-pong,
// against 9.79 and 12.39 for the pipelined body); DSA_DENSE_ATTENTION=plain,
// pipelined (P through shared memory) or regp (P in registers) picks a cp.async
// body, for comparisons.
AttentionBody WantedBody() {
  static const AttentionBody body = [] {
    const char* env = std::getenv("DSA_DENSE_ATTENTION");
    if (env != nullptr && std::strcmp(env, "plain") == 0) return kBodyPlain;
    if (env != nullptr && std::strcmp(env, "regp") == 0) return kBodyRegP;
    if (env != nullptr && std::strcmp(env, "pipelined") == 0) {
      return kBodyPipelined;
    }
    return kBodyTma;
  }();
  return body;
}

// Whether the attention kernels of this build run the warpgroup body on the
// current device (sm_90a code): asked of the device once per device.
__global__ void ProbeWarpgroupKernel(int* out) {
  *out = kWarpgroupAttention ? 1 : 0;
}

LaunchResult UsesWarpgroupBody(bool* result) {
  static std::atomic<int> cache[64];  // 0 unknown, 1 no, 2 yes
  int device = 0;
  LaunchResult r =
      FromError(hipGetDevice(&device), "dense_mha_prefill: device");
  if (!r.ok()) return r;
  const int slot = device & 63;
  const int known = cache[slot].load(std::memory_order_relaxed);
  if (known != 0) {
    *result = known == 2;
    return r;
  }
  int* flag = nullptr;
  r = FromError(hipMalloc(reinterpret_cast<void**>(&flag), sizeof(int)),
                "dense_mha_prefill: probe");
  if (!r.ok()) return r;
  hipLaunchKernelGGL(ProbeWarpgroupKernel, dim3(1), dim3(1), 0, 0, flag);
  int host = 0;
  r = CheckLaunch("dense_mha_prefill: probe launch");
  if (r.ok()) {
    r = FromError(hipMemcpy(&host, flag, sizeof(int), hipMemcpyDeviceToHost),
                  "dense_mha_prefill: probe result");
  }
  (void)hipFree(flag);
  if (!r.ok()) return r;
  cache[slot].store(host ? 2 : 1, std::memory_order_relaxed);
  *result = host != 0;
  return r;
}

using AttentionFn = void (*)(AttentionArgs);

#if defined(DSA_GPU_CUDA)

// A bf16 tensor map with 128-byte swizzle: dims innermost first, strides
// (bytes) of dims 1.., the box in elements.
LaunchResult MakeMap(CUtensorMap* map, const void* base, int rank,
                     const cuuint64_t* dims, const cuuint64_t* strides,
                     const cuuint32_t* box, const char* what) {
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = TensorMapEncoder()(
      map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base),
      dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS) return LaunchResult{};
  LaunchResult out;
  out.code = LaunchCode::kRuntimeError;
  std::snprintf(out.message, sizeof(out.message),
                "dense_mha_prefill: cuTensorMapEncodeTiled (%s) failed: %d",
                what, static_cast<int>(r));
  return out;
}

// Whether the TMA body can run these head dims on this build and device.
bool TmaBodyFits(const AttentionArgs& a) {
  return a.nope % 64 == 0 && a.rope % 64 == 0 && a.v % 64 == 0 &&
         TensorMapEncoder() != nullptr;
}

using AttentionTmaFn = void (*)(AttentionArgs, TmaMaps);

template <int kQk, int kV>
LaunchResult LaunchTmaAttention(const AttentionArgs& a, int items, int heads,
                                hipStream_t stream) {
  if constexpr (kQk % 64 != 0 || kV % 64 != 0) {
    return Invalid(kOp, "TMA body: head dims %d / %d", kQk, kV);
  } else {
    // 128-key tiles where the registers (v <= 128) and a double buffer in
    // shared memory allow, unless DSA_DENSE_TMA_N=64.
    static const bool narrow = [] {
      const char* env = std::getenv("DSA_DENSE_TMA_N");
      return env != nullptr && std::strcmp(env, "64") == 0;
    }();
    constexpr int kWideN =
        kV <= 128 && TmaSmem<kQk, kV, 128>::kStagesFit >= 2 ? 128 : 64;
    const bool wide = kWideN == 128 && !narrow;
    const size_t bytes =
        wide ? TmaSmem<kQk, kV, kWideN>::kBytes : TmaSmem<kQk, kV, 64>::kBytes;
    const AttentionTmaFn fn = wide ? &DenseAttentionTmaKernel<kQk, kV, kWideN>
                                   : &DenseAttentionTmaKernel<kQk, kV, 64>;
    const cuuint32_t tile_keys = wide ? kWideN : 64;
    TmaMaps maps;
    const int qk = a.nope + a.rope;
    const int64_t kv_rows = a.vt_ld;
    {
      const cuuint64_t dims[3] = {static_cast<cuuint64_t>(qk),
                                  static_cast<cuuint64_t>(a.heads),
                                  static_cast<cuuint64_t>(a.tokens)};
      const cuuint64_t strides[2] = {static_cast<cuuint64_t>(qk) * 2,
                                     static_cast<cuuint64_t>(qk) * a.heads * 2};
      const cuuint32_t box[3] = {64, 1, kBlockM};
      LaunchResult r = MakeMap(&maps.q, a.q, 3, dims, strides, box, "q");
      if (!r.ok()) return r;
    }
    {
      const cuuint64_t dims[2] = {static_cast<cuuint64_t>(a.knope_ld),
                                  static_cast<cuuint64_t>(kv_rows)};
      const cuuint64_t strides[1] = {static_cast<cuuint64_t>(a.knope_ld) * 2};
      const cuuint32_t box[2] = {64, tile_keys};
      LaunchResult r = a.nope > 0 ? MakeMap(&maps.knope, a.knope, 2, dims,
                                            strides, box, "K_nope")
                                  : LaunchResult{};
      if (!r.ok()) return r;
    }
    {
      const cuuint64_t dims[2] = {static_cast<cuuint64_t>(a.lat_ld),
                                  static_cast<cuuint64_t>(kv_rows)};
      const cuuint64_t strides[1] = {static_cast<cuuint64_t>(a.lat_ld) * 2};
      const cuuint32_t box[2] = {64, tile_keys};
      LaunchResult r = MakeMap(&maps.kpe, a.lat, 2, dims, strides, box, "k_pe");
      if (!r.ok()) return r;
    }
    {
      const cuuint64_t dims[2] = {static_cast<cuuint64_t>(kv_rows),
                                  static_cast<cuuint64_t>(a.heads) * a.v};
      const cuuint64_t strides[1] = {static_cast<cuuint64_t>(kv_rows) * 2};
      const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(kV)};
      LaunchResult r = MakeMap(&maps.vt, a.vt, 2, dims, strides, box, "V^T");
      if (!r.ok()) return r;
    }
    int device = 0, max_smem = 0;
    LaunchResult r =
        FromError(hipGetDevice(&device), "dense_mha_prefill: device");
    if (!r.ok()) return r;
    r = FromError(
        hipDeviceGetAttribute(
            &max_smem, hipDeviceAttributeMaxSharedMemoryPerBlock, device),
        "dense_mha_prefill: shared memory limit");
    if (!r.ok()) return r;
    if (static_cast<size_t>(max_smem) < bytes) {
      return Invalid(kOp,
                     "TMA body: head dims qk %d v %d need %zu bytes of shared "
                     "memory per block; this device allows %d",
                     kQk, kV, bytes, max_smem);
    }
    r = FromError(
        hipFuncSetAttribute(reinterpret_cast<const void*>(fn),
                            hipFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(bytes)),
        "dense_mha_prefill: shared memory opt-in");
    if (!r.ok()) return r;
    hipLaunchKernelGGL(fn, dim3(items, heads), dim3(kTmaThreads), bytes, stream,
                       a, maps);
    return CheckLaunch("dense_mha_prefill attention (TMA)");
  }
}
#endif  // DSA_GPU_CUDA

template <int kQk, int kV>
LaunchResult LaunchAttention(const AttentionArgs& args, int items, int heads,
                             hipStream_t stream) {
  bool warpgroup = false;
  LaunchResult r = UsesWarpgroupBody(&warpgroup);
  if (!r.ok()) return r;
  AttentionBody body = warpgroup ? WantedBody() : kBodyPlain;
#if defined(DSA_GPU_CUDA)
  if (body == kBodyTma && TmaBodyFits(args)) {
    return LaunchTmaAttention<kQk, kV>(args, items, heads, stream);
  }
#endif
  // Head dims the TMA body cannot take run on the pipelined body.
  if (body == kBodyTma) body = kBodyPipelined;
  AttentionFn fn = &DenseAttentionKernel<kQk, kV, kBodyPlain>;
  size_t bytes =
      warpgroup ? WarpgroupSmem<kQk, kV>::kBytes : WarpSmem<kQk, kV>::kBytes;
#if defined(DSA_GPU_CUDA)
  if (body == kBodyPipelined) {
    fn = &DenseAttentionKernel<kQk, kV, kBodyPipelined>;
    bytes = PipelinedSmem<kQk, kV>::kBytes;
  } else if (body == kBodyRegP) {
    fn = &DenseAttentionKernel<kQk, kV, kBodyRegP>;
    bytes = PipelinedSmem<kQk, kV>::kBytesRegP;
  }
#endif
  int device = 0, max_smem = 0;
  r = FromError(hipGetDevice(&device), "dense_mha_prefill: device");
  if (!r.ok()) return r;
  r = FromError(
      hipDeviceGetAttribute(&max_smem,
                            hipDeviceAttributeMaxSharedMemoryPerBlock, device),
      "dense_mha_prefill: shared memory limit");
  if (!r.ok()) return r;
  if (static_cast<size_t>(max_smem) < bytes) {
    return Invalid(kOp,
                   "head dims qk<=%d v<=%d need %zu bytes of shared memory per "
                   "block; this device allows %d",
                   kQk, kV, bytes, max_smem);
  }
  r = FromError(hipFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                    hipFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)),
                "dense_mha_prefill: shared memory opt-in");
  if (!r.ok()) return r;
  hipLaunchKernelGGL(fn, dim3(items, heads), dim3(kThreads), bytes, stream,
                     args);
  return CheckLaunch("dense_mha_prefill attention");
}

// Head dims rounded up to the instantiated tile widths.
int PadQk(int qk) {
  return qk <= 64 ? 64 : qk <= 128 ? 128 : qk <= 192 ? 192 : 256;
}
int PadV(int v) { return v <= 64 ? 64 : v <= 128 ? 128 : 256; }

LaunchResult DispatchAttention(const AttentionArgs& args, int qk, int v,
                               int items, int heads, hipStream_t stream) {
#define DSA_DENSE_CASE(Q, V)                                  \
  if (PadQk(qk) == Q && PadV(v) == V) {                       \
    return LaunchAttention<Q, V>(args, items, heads, stream); \
  }
  DSA_DENSE_CASE(64, 64)
  DSA_DENSE_CASE(64, 128)
  DSA_DENSE_CASE(64, 256)
  DSA_DENSE_CASE(128, 64)
  DSA_DENSE_CASE(128, 128)
  DSA_DENSE_CASE(128, 256)
  DSA_DENSE_CASE(192, 64)
  DSA_DENSE_CASE(192, 128)
  DSA_DENSE_CASE(192, 256)
  DSA_DENSE_CASE(256, 64)
  DSA_DENSE_CASE(256, 128)
  DSA_DENSE_CASE(256, 256)
#undef DSA_DENSE_CASE
  return Invalid(kOp, "qk %d / v %d: no kernel for these head dims", qk, v);
}

template <typename T>
LaunchResult ConvertToBf16(const T* in, uint16_t* out, int64_t n,
                           hipStream_t stream) {
  if (n == 0) return LaunchResult{};
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 8192);
  hipLaunchKernelGGL(ToBf16Kernel<T>, dim3(static_cast<unsigned>(blocks)),
                     dim3(256), 0, stream, in, out, n);
  return CheckLaunch("dense_mha_prefill bf16 conversion");
}

// Whether the decompression runs on the platform's vendor GEMM (cuBLASLt /
// rocBLAS, when loaded) instead of gemm_bf16.h; asked once per process.
// DSA_DENSE_DECOMPRESS=own forces the project's GEMM.
const char* DecompressionBackend() {
  static const char* const backend = []() -> const char* {
    const char* env = std::getenv("DSA_DENSE_DECOMPRESS");
    if (env != nullptr && std::strcmp(env, "own") == 0) return "gemm_bf16";
    const char* vendor = DenseMhaVendorGemmBackend();
    return vendor != nullptr ? vendor : "gemm_bf16";
  }();
  return backend;
}
bool VendorDecompression() {
  return std::strcmp(DecompressionBackend(), "gemm_bf16") != 0;
}

// The decompression on the vendor GEMM: W_UK and W_UV are first split
// out of kv_b_proj into contiguous bf16 scratch (the vendor GEMM takes one
// row stride per operand), then K_nope [S, heads * nope] = lat W_UK^T and
// V^T [heads * v, S] = W_UV lat^T, each one plain GEMM (a weight copy of
// 2 * heads * (nope + v) * lora bytes, ~10-30 us, buys one large product
// instead of a batch of per-head ones).
LaunchResult DecompressOnVendorGemm(const DenseMhaPrefillParams& p,
                                    const uint16_t* lat, int64_t lat_ld,
                                    int64_t kv_rows, uint16_t* knope,
                                    uint16_t* vt, StreamScratch& scratch,
                                    hipStream_t stream) {
  const int64_t nope = p.qk_nope_head_dim, v = p.v_head_dim;
  const int64_t lora = p.kv_lora_rank, heads = p.heads;
  const int64_t w_rows = heads * (nope + v);
  uint16_t* wk = nullptr;
  uint16_t* wv = nullptr;
  LaunchResult r;
  if (nope > 0) {
    r = scratch.Get(&wk, static_cast<size_t>(heads * nope * lora * 2),
                    "dense_mha_prefill W_UK scratch");
    if (!r.ok()) return r;
  }
  r = scratch.Get(&wv, static_cast<size_t>(heads * v * lora * 2),
                  "dense_mha_prefill W_UV scratch");
  if (!r.ok()) return r;
  const int64_t chunks = w_rows * (lora / 8);
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((chunks + 255) / 256, 16384));
  if (p.kv_b_proj_format == FloatFormat::kFloat32) {
    hipLaunchKernelGGL(SplitWeightsKernel<float>, dim3(blocks), dim3(256), 0,
                       stream, static_cast<const float*>(p.kv_b_proj), wk, wv,
                       w_rows, static_cast<int32_t>(nope),
                       static_cast<int32_t>(v), static_cast<int32_t>(lora));
  } else {
    hipLaunchKernelGGL(SplitWeightsKernel<uint16_t>, dim3(blocks), dim3(256), 0,
                       stream, static_cast<const uint16_t*>(p.kv_b_proj), wk,
                       wv, w_rows, static_cast<int32_t>(nope),
                       static_cast<int32_t>(v), static_cast<int32_t>(lora));
  }
  r = CheckLaunch("dense_mha_prefill weight split");
  if (!r.ok()) return r;
  if (nope > 0) {
    Bf16GemmParams g;
    g.a = lat;
    g.lda = lat_ld;
    g.b = wk;
    g.ldb = lora;
    g.c = knope;
    g.ldc = heads * nope;
    g.m = kv_rows;
    g.n = heads * nope;
    g.k = lora;
    r = DenseMhaVendorGemmLaunch(g, stream);
    if (!r.ok()) return r;
  }
  Bf16GemmParams g;
  g.a = wv;
  g.lda = lora;
  g.b = lat;
  g.ldb = lat_ld;
  g.c = vt;
  g.ldc = kv_rows;
  g.m = heads * v;
  g.n = kv_rows;
  g.k = lora;
  return DenseMhaVendorGemmLaunch(g, stream);
}

}  // namespace

LaunchResult DenseMhaPrefillLaunch(const DenseMhaPrefillParams& p,
                                   void* stream_ptr) {
  const hipStream_t stream = static_cast<hipStream_t>(stream_ptr);
  const int64_t nope = p.qk_nope_head_dim, rope = p.rope_dim, v = p.v_head_dim;
  const int64_t lora = p.kv_lora_rank;
  const int64_t qk = nope + rope;
  const bool fp8 = p.cache_encoding != LatentCacheType::kBFloat16;
  if (p.tokens < 0 || p.heads <= 0 || p.heads > 65535 || p.num_requests < 0) {
    return Invalid(kOp, "tokens=%lld heads=%d num_requests=%d out of range",
                   static_cast<long long>(p.tokens), p.heads, p.num_requests);
  }
  if (nope < 0 || nope % 8 != 0 || rope <= 0 || rope % 8 != 0 || v <= 0 ||
      v % 8 != 0 || qk > kMaxHeadDim || v > kMaxHeadDim) {
    return Invalid(kOp,
                   "qk_nope %lld, rope %lld, v %lld: the GPU kernel needs "
                   "multiples of 8 with nope + rope <= %d and v <= %d",
                   static_cast<long long>(nope), static_cast<long long>(rope),
                   static_cast<long long>(v), kMaxHeadDim, kMaxHeadDim);
  }
  if (lora <= 0 || lora % 8 != 0 || (fp8 && lora % 128 != 0)) {
    return Invalid(kOp,
                   "kv_lora_rank %lld: needs a positive multiple of 8 (of 128 "
                   "for an fp8 cache)",
                   static_cast<long long>(lora));
  }
  if (p.tokens == 0) return LaunchResult{};
  if (p.q == nullptr || p.kv_cache == nullptr || p.block_table == nullptr ||
      p.kv_b_proj == nullptr || p.output == nullptr ||
      p.host_seq_lens == nullptr || p.host_query_start_loc == nullptr) {
    return Invalid(kOp, "a pointer argument is null");
  }
  if (p.num_blocks <= 0 || p.block_size <= 0 || p.max_blocks_per_request <= 0 ||
      p.block_table_stride < p.max_blocks_per_request) {
    return Invalid(kOp,
                   "num_blocks %lld, block_size %d, max_blocks %d, block table "
                   "stride %lld: need positive sizes and stride >= max_blocks",
                   static_cast<long long>(p.num_blocks), p.block_size,
                   p.max_blocks_per_request,
                   static_cast<long long>(p.block_table_stride));
  }
  const int64_t entry_bytes =
      fp8 ? lora + 4 * (lora / 128) + 2 * rope : 2 * (lora + rope);

  // Requests with queries, their scratch rows, and the work items.
  if (p.host_query_start_loc[0] != 0 ||
      p.host_query_start_loc[p.num_requests] != p.tokens) {
    return Invalid(
        kOp, "query_start_loc runs from %d to %d, expected 0 to %lld",
        p.host_query_start_loc[0], p.host_query_start_loc[p.num_requests],
        static_cast<long long>(p.tokens));
  }
  std::vector<RequestInfo> requests;
  std::vector<std::pair<int64_t, WorkItem>> work;  // (keys, item)
  int64_t kv_rows = 0, max_len = 0;
  const int64_t capacity =
      static_cast<int64_t>(p.max_blocks_per_request) * p.block_size;
  for (int32_t r = 0; r < p.num_requests; ++r) {
    const int64_t n = static_cast<int64_t>(p.host_query_start_loc[r + 1]) -
                      p.host_query_start_loc[r];
    const int64_t len = p.host_seq_lens[r];
    if (n < 0 || n > len) {
      return Invalid(kOp,
                     "request %d has %lld query tokens (query_start_loc), "
                     "expected 0 to its seq_len %lld",
                     r, static_cast<long long>(n), static_cast<long long>(len));
    }
    if (len > capacity) {
      return Invalid(kOp,
                     "request %d: seq_len %lld exceeds its block table's %lld "
                     "slots",
                     r, static_cast<long long>(len),
                     static_cast<long long>(capacity));
    }
    if (n == 0) continue;
    RequestInfo info{};
    info.q_begin = p.host_query_start_loc[r];
    info.n = static_cast<int32_t>(n);
    info.seq_len = static_cast<int32_t>(len);
    info.kv_row = static_cast<int32_t>(kv_rows);
    const int64_t padded = (len + kKeyAlign - 1) / kKeyAlign * kKeyAlign;
    info.table_row = r;
    const int32_t index = static_cast<int32_t>(requests.size());
    requests.push_back(info);
    for (int64_t tile = 0; tile * kBlockM < n; ++tile) {
      const int64_t keys = len - n + std::min<int64_t>((tile + 1) * kBlockM, n);
      work.push_back({keys, WorkItem{index, static_cast<int32_t>(tile)}});
    }
    kv_rows += padded;
    max_len = std::max(max_len, padded);
    if (kv_rows > 0x7fffffff) {
      return Invalid(kOp, "more than 2^31 latent rows in one call");
    }
  }
  // Longest blocks first (within each head), so the short ones fill the
  // tail.
  std::stable_sort(work.begin(), work.end(), [](const auto& x, const auto& y) {
    return x.first > y.first;
  });
  if (requests.size() > 65535 || work.size() > 0x7fffffff) {
    return Invalid(kOp,
                   "%zu requests with queries / %zu query tiles: more than "
                   "one launch holds",
                   requests.size(), work.size());
  }
  Meta meta{};
  meta.is_inline =
      requests.size() <= kInlineRequests && work.size() <= kInlineItems;
  std::vector<uint8_t> meta_bytes;
  if (meta.is_inline) {
    std::copy(requests.begin(), requests.end(), meta.req);
    for (size_t i = 0; i < work.size(); ++i) meta.item[i] = work[i].second;
  } else {
    meta_bytes.resize(requests.size() * sizeof(RequestInfo) +
                      work.size() * sizeof(WorkItem));
    std::memcpy(meta_bytes.data(), requests.data(),
                requests.size() * sizeof(RequestInfo));
    for (size_t i = 0; i < work.size(); ++i) {
      std::memcpy(meta_bytes.data() + requests.size() * sizeof(RequestInfo) +
                      i * sizeof(WorkItem),
                  &work[i].second, sizeof(WorkItem));
    }
  }

  StreamScratch scratch(stream);
  const int64_t lat_ld = lora + rope;
  const int64_t knope_ld = static_cast<int64_t>(p.heads) * nope;
  const int64_t vt_rows = static_cast<int64_t>(p.heads) * v;
  uint16_t* lat = nullptr;
  uint16_t* knope = nullptr;
  uint16_t* vt = nullptr;
  LaunchResult r;
  if (!meta.is_inline) {
    uint8_t* meta_dev = nullptr;
    r = scratch.Get(&meta_dev, meta_bytes.size(), "dense_mha_prefill metadata");
    if (!r.ok()) return r;
    // From pageable memory: the runtime stages it before returning.
    r = FromError(hipMemcpyAsync(meta_dev, meta_bytes.data(), meta_bytes.size(),
                                 hipMemcpyHostToDevice, stream),
                  "dense_mha_prefill metadata upload");
    if (!r.ok()) return r;
    meta.requests = reinterpret_cast<const RequestInfo*>(meta_dev);
    meta.items = reinterpret_cast<const WorkItem*>(
        meta_dev + requests.size() * sizeof(RequestInfo));
  }
  r = scratch.Get(&lat, static_cast<size_t>(kv_rows * lat_ld * 2),
                  "dense_mha_prefill latent scratch");
  if (!r.ok()) return r;
  r = scratch.Get(&knope, static_cast<size_t>(kv_rows * knope_ld * 2),
                  "dense_mha_prefill K scratch");
  if (!r.ok()) return r;
  r = scratch.Get(&vt, static_cast<size_t>(vt_rows * kv_rows * 2),
                  "dense_mha_prefill V scratch");
  if (!r.ok()) return r;

  // 1. Gather.
  {
    const dim3 grid(
        static_cast<unsigned>((max_len + kGatherRows - 1) / kGatherRows),
        static_cast<unsigned>(requests.size()));
    const uint8_t* cache = static_cast<const uint8_t*>(p.kv_cache);
#define DSA_GATHER(E)                                                      \
  hipLaunchKernelGGL(GatherLatentKernel<static_cast<int>(E)>, grid,        \
                     dim3(kGatherThreads), 0, stream, cache, entry_bytes,  \
                     p.num_blocks, p.block_size, p.block_table,            \
                     p.block_table_stride, p.max_blocks_per_request, meta, \
                     p.kv_lora_rank, p.rope_dim, lat, lat_ld)
    switch (p.cache_encoding) {
      case LatentCacheType::kBFloat16:
        DSA_GATHER(LatentCacheType::kBFloat16);
        break;
      case LatentCacheType::kFp8E4m3fn:
        DSA_GATHER(LatentCacheType::kFp8E4m3fn);
        break;
      case LatentCacheType::kFp8E4m3fnuz:
        DSA_GATHER(LatentCacheType::kFp8E4m3fnuz);
        break;
      default:
        return Invalid(kOp, "unknown cache encoding %d",
                       static_cast<int>(p.cache_encoding));
    }
#undef DSA_GATHER
    r = CheckLaunch("dense_mha_prefill gather");
    if (!r.ok()) return r;
  }

  // 2. Decompression: K_nope = lat[:, :lora] x W_UK^T and
  // V^T = W_UV x lat[:, :lora]^T, W_UK / W_UV the per-head row groups of
  // kv_b_proj.
  const int64_t w_rows = static_cast<int64_t>(p.heads) * (nope + v);
  if (!p.own_decompression_gemm && VendorDecompression()) {
    r = DecompressOnVendorGemm(p, lat, lat_ld, kv_rows, knope, vt, scratch,
                               stream);
    if (!r.ok()) return r;
  } else {
    const uint16_t* w = static_cast<const uint16_t*>(p.kv_b_proj);
    if (p.kv_b_proj_format == FloatFormat::kFloat32 ||
        reinterpret_cast<uintptr_t>(p.kv_b_proj) % 16 != 0) {
      uint16_t* wb = nullptr;
      r = scratch.Get(&wb, static_cast<size_t>(w_rows * lora * 2),
                      "dense_mha_prefill weight scratch");
      if (!r.ok()) return r;
      r = p.kv_b_proj_format == FloatFormat::kFloat32
              ? ConvertToBf16(static_cast<const float*>(p.kv_b_proj), wb,
                              w_rows * lora, stream)
              : ConvertToBf16(static_cast<const uint16_t*>(p.kv_b_proj), wb,
                              w_rows * lora, stream);
      if (!r.ok()) return r;
      w = wb;
    }
    if (nope > 0) {
      Bf16GemmParams g;
      g.a = lat;
      g.lda = lat_ld;
      g.b = w;
      g.ldb = lora;
      g.b_group_rows = nope;
      g.b_group_stride = nope + v;
      g.c = knope;
      g.ldc = knope_ld;
      g.m = kv_rows;
      g.n = knope_ld;
      g.k = lora;
      r = Bf16GemmLaunch(g, stream);
      if (!r.ok()) return r;
    }
    Bf16GemmParams g;
    g.a = w + nope * lora;
    g.lda = lora;
    g.a_group_rows = v;
    g.a_group_stride = nope + v;
    g.b = lat;
    g.ldb = lat_ld;
    g.c = vt;
    g.ldc = kv_rows;
    g.m = vt_rows;
    g.n = kv_rows;
    g.k = lora;
    r = Bf16GemmLaunch(g, stream);
    if (!r.ok()) return r;
  }

  // 3. Attention.
  const uint16_t* qb = static_cast<const uint16_t*>(p.q);
  if (p.q_format == FloatFormat::kFloat32 ||
      reinterpret_cast<uintptr_t>(p.q) % 16 != 0) {
    uint16_t* conv = nullptr;
    const int64_t n = p.tokens * p.heads * qk;
    r = scratch.Get(&conv, static_cast<size_t>(n * 2),
                    "dense_mha_prefill query scratch");
    if (!r.ok()) return r;
    r = p.q_format == FloatFormat::kFloat32
            ? ConvertToBf16(static_cast<const float*>(p.q), conv, n, stream)
            : ConvertToBf16(static_cast<const uint16_t*>(p.q), conv, n, stream);
    if (!r.ok()) return r;
    qb = conv;
  }
  AttentionArgs args;
  args.q = qb;
  args.knope = knope;
  args.vt = vt;
  args.lat = lat;
  args.out = p.output;
  args.meta = meta;
  args.knope_ld = knope_ld;
  args.vt_ld = kv_rows;
  args.lat_ld = lat_ld;
  args.heads = p.heads;
  args.nope = static_cast<int32_t>(nope);
  args.rope = static_cast<int32_t>(rope);
  args.v = static_cast<int32_t>(v);
  args.lora = static_cast<int32_t>(lora);
  args.tokens = p.tokens;
  args.pingpong = TmaPingPong();
  args.scale_log2 = p.softmax_scale * 1.4426950408889634f;
  args.out_bf16 = p.output_format == FloatFormat::kBFloat16;
  args.out_pairs = reinterpret_cast<uintptr_t>(p.output) % 8 == 0;
  return DispatchAttention(args, static_cast<int>(qk), static_cast<int>(v),
                           static_cast<int>(work.size()), p.heads, stream);
}

const char* DenseMhaDecompressionPath() { return DecompressionBackend(); }

const char* DenseMhaAttentionPath() {
  bool warpgroup = false;
  if (!UsesWarpgroupBody(&warpgroup).ok()) return "none";
  if (!warpgroup) return "warp";
  switch (WantedBody()) {
    case kBodyPipelined:
      return "warpgroup-pipelined";
    case kBodyRegP:
      return "warpgroup-pipelined-regp";
    case kBodyTma:
      return "warpgroup-tma (pipelined where a head dim is not a multiple of "
             "64)";
    default:
      return "warpgroup";
  }
}

}  // namespace dsa::attention::gpu
