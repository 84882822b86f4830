// What every attention body reads: the kernel arguments, the block's share
// of the work (BlockWork: one query tile of one request and head), where
// its operands are in global memory, and the output stores. The scratch
// layout (plan.h): latent rows kv_c | k_pe [S, lat_ld], K_nope row-major
// [S, heads * nope], V transposed [heads * v, S], each request's rows from
// a multiple of kKeyAlign, so that both products read K-major operands.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_ATTENTION_ARGS_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_ATTENTION_ARGS_H_

#include <cstdint>

#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/dense_mha/plan.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"

namespace dsa::attention::gpu::dense_mha {

using Mma = ::dsa::gpu::Bf16WarpMma;
using Tiles = BlockTiles<kDsaWarpSize>;
constexpr int kBlockM = Tiles::kBlockM;
constexpr int kBlockN = Tiles::kBlockN;
// The cp.async bodies' blocks: warps of Mma::kM rows (on sm_90a the same
// 256 threads form the two warpgroups).
constexpr int kWarps = kBlockM / Mma::kM;
constexpr int kThreads = kWarps * kDsaWarpSize;
static_assert(kBlockM % Mma::kM == 0 && kBlockN % Mma::kN == 0 &&
                  kBlockN % Mma::kK == 0,
              "tiles must hold whole fragments");

#if defined(DSA_GPU_ROCM)
// AMD: clang copies a by-value kernel parameter to scratch (3 KiB a lane
// here), and the copy stays when an inline entry and a device-array entry
// are loaded through one pointer, which LLVM makes of two loads in the same
// address space. Loading the device arrays through the global address space
// keeps the loads apart: the inline entries are then read from the kernel
// arguments, and nothing is copied.
template <typename T>
__device__ __forceinline__ T LoadGlobal(const T* p) {
  static_assert(sizeof(T) % 4 == 0, "whole 32-bit words");
  const auto* words = (const __attribute__((address_space(1))) int32_t*)p;
  int32_t w[sizeof(T) / 4];
#pragma unroll
  for (int k = 0; k < static_cast<int>(sizeof(T) / 4); ++k) w[k] = words[k];
  T value;
  __builtin_memcpy(&value, w, sizeof(T));
  return value;
}
__device__ __forceinline__ RequestInfo MetaRequest(const Meta& m, int i) {
  return m.is_inline ? m.req[i] : LoadGlobal(m.requests + i);
}
__device__ __forceinline__ WorkItem MetaItem(const Meta& m, int i) {
  return m.is_inline ? m.item[i] : LoadGlobal(m.items + i);
}
#else
__device__ __forceinline__ RequestInfo MetaRequest(const Meta& m, int i) {
  return m.is_inline ? m.req[i] : m.requests[i];
}
__device__ __forceinline__ WorkItem MetaItem(const Meta& m, int i) {
  return m.is_inline ? m.item[i] : m.items[i];
}
#endif

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
  // bf16 output 16-byte aligned: the TMA body stores 8 columns at a time
  // (sm90_tile.h's StoreRowsBf16Chunks).
  bool out_chunks;
  // The persistent TMA body's tiles (config.h's TmaTileOrder): work items x
  // heads, and the counter its CTAs take tiles from after their first (zero
  // at launch: the gather kernel clears it).
  int32_t num_items;
  int32_t num_tiles;
  int32_t heads_per_section;
  int32_t* tile_counter;
};

// Writes output elements (col0, v0) and (col1, v1) of one (token, head) row
// starting at element `base`; `pair`: col1 == col0 + 1.
__device__ __forceinline__ void StoreOut(const AttentionArgs& a, int64_t base,
                                         int col0, float v0, int col1, float v1,
                                         bool pair) {
  if (a.out_bf16) {
    uint16_t* o = static_cast<uint16_t*>(a.out) + base;
    if (pair && col0 % 2 == 0 && col1 < a.v) {
      *reinterpret_cast<uint32_t*>(o + col0) = ::dsa::gpu::PackBf16x2(v0, v1);
      return;
    }
    if (col0 < a.v) o[col0] = ::dsa::gpu::FloatToBf16(v0);
    if (col1 < a.v) o[col1] = ::dsa::gpu::FloatToBf16(v1);
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

// What a block works on. Key/value tiles are visited from the last
// (diagonal) one down, so only the first one or two need the causal mask.
struct BlockWork {
  RequestInfo req;
  int head;
  int i0;              // first query row of the block (within the request)
  int rows;            // query rows in the block (<= kBlockM)
  int first_pos;       // position of row 0
  int num_tiles;       // key tiles [0, num_tiles) of kBlockN keys
  int64_t head_knope;  // column of this head in knope
  int64_t head_vt;     // row of this head's first value dim in vt
};

// Work item `item_index` (plan.h) of head `head`.
__device__ __forceinline__ BlockWork WorkAt(const AttentionArgs& a,
                                            int item_index, int head) {
  BlockWork w;
  w.head = head;
  const WorkItem item = MetaItem(a.meta, item_index);
  w.req = MetaRequest(a.meta, item.request);
  w.i0 = item.q_tile * kBlockM;
  w.rows = min(kBlockM, w.req.n - w.i0);
  w.first_pos = w.req.seq_len - w.req.n + w.i0;
  w.num_tiles = (w.first_pos + w.rows - 1) / kBlockN + 1;
  w.head_knope = static_cast<int64_t>(w.head) * a.nope;
  w.head_vt = static_cast<int64_t>(w.head) * a.v;
  return w;
}

// The block's work in the (items, heads) grid of the cp.async bodies. Query
// tiles of one head are consecutive blocks: the blocks running at the same
// time read the same head's K and V, which then stay in L2 (a head's K/V
// is 7 MiB at T = 8192; all heads' 470 MB are not).
__device__ __forceinline__ BlockWork GetWork(const AttentionArgs& a) {
  return WorkAt(a, blockIdx.x, blockIdx.y);
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

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_ATTENTION_ARGS_H_
