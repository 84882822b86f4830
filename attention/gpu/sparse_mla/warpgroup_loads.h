// The sparse MLA warpgroup body's loads (warpgroup_body.h): the row's valid
// top-k indices compacted into tiles of cache offsets (warp 0, two tiles
// ahead), the gather of a key tile into the 128-byte swizzled layout
// (cp.async, every thread), the dequantisation of an fp8_ds_mla tile's codes
// through registers, and Q. Device-compiler sources only (sm_90a bodies).
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_WARPGROUP_LOADS_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_WARPGROUP_LOADS_H_

#include <cstdint>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/row_access.h"

namespace dsa::attention::gpu::sparse_mla {

#if defined(DSA_GPU_CUDA)
namespace warpgroup {

// Byte offset of 16-byte chunk c (dims 8c .. 8c + 7) of row r (a key or a
// head) in a key tile or Q; of P's element (row, key k).
__device__ __forceinline__ uint32_t TileOffset(int r, int c) {
  return (c / 8) * Config::kAtomBytes + r * 128 + (((c % 8) ^ (r % 8)) * 16);
}
__device__ __forceinline__ uint32_t POffset(int row, int k) {
  return row * 128 + (((k / 8) ^ (row % 8)) * 16) + (k % 8) * 2;
}

// The loads of one block (query row `row`, heads from blockIdx.y * 64, top-k
// split blockIdx.z of `splits`) into its shared memory.
template <bool kFp8, Fp8Format F>
struct TileLoads {
  using C = Config;

  const SparseMlaParams& p;
  SharedMemory& s;
  const int64_t t;  // the query row
  const int h0;     // its first head
  const int tid, lane;
  const RowRequest rr;
  const int32_t* const row_idx;
  const SplitRange range;
  int cursor;  // warp 0: the next top-k index to compact

  __device__ __forceinline__ TileLoads(const SparseMlaParams& params,
                                       SharedMemory& smem, int64_t row,
                                       int splits)
      : p(params),
        s(smem),
        t(row),
        h0(blockIdx.y * C::kHeads),
        tid(threadIdx.x),
        lane(threadIdx.x % 32),
        rr(LoadRowRequest(params, row)),
        row_idx(params.topk_indices + row * params.topk_stride),
        range(BlockSplitRange(params.topk, splits)),
        cursor(range.begin) {}

  // Warp 0: fills slot j % 3 with the cache offsets of the next (up to) 64
  // valid keys of the row, in order, -1 after them, and their count,
  // reading the index list 64 entries a step from `cursor` (the same in
  // every lane). A -1 or invalid index thus costs no product, and a row's
  // tiles end with its valid indices (a tile of count 0 ends the loop).
  __device__ __forceinline__ void CompactIndices(int j) {
    int64_t* slot = s.slots[j % C::kSlots];
    int filled = 0;
    while (filled < C::kKeys && cursor < range.end) {
      int64_t off[2];
      bool valid[2];
      unsigned ballot[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = cursor + 32 * h + lane;
        off[h] = -1;
        if (i < range.end && rr.request >= 0) {
          off[h] = EntryOffset(p, rr, row_idx[i]);
        }
        valid[h] = off[h] >= 0;
        ballot[h] = __ballot_sync(0xffffffffu, valid[h]);
      }
      const int room = C::kKeys - filled;
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
      if (n > room) {  // the tile is full inside this step: stop after its
                       // last key (__ffs counts from 1)
        cursor += last[0] != 0u ? __ffs(last[0]) : 32 + __ffs(last[1]);
        filled = C::kKeys;
      } else {
        cursor += 64;
        filled += n;
      }
    }
    for (int k = filled + lane; k < C::kKeys; k += 32) slot[k] = -1;
    if (lane == 0) s.counts[j % C::kSlots] = filled;
  }

  // Q (bf16; heads past the last are zeros) in the tiles' layout.
  __device__ __forceinline__ void LoadQ() {
    for (int c = tid; c < C::kHeads * C::kChunks; c += C::kThreads) {
      const int h_lo = c % 8, rest = c / 8;
      const int part = rest % C::kChunks, h_hi = rest / C::kChunks;
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
      *reinterpret_cast<uint4*>(s.q + TileOffset(hh, part)) =
          make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
  }

  // Starts the gather of tile j into key buffer j % 2 (8 consecutive
  // threads fill one 128-byte row: no conflicting shared-memory writes);
  // invalid keys are zero-filled without a read. fp8: the rope chunks only
  // (DequantTileHalf does the rest).
  __device__ __forceinline__ void GatherTile(int j) {
    uint8_t* dst = s.keys[j % 2];
    const int64_t* offs = s.slots[j % C::kSlots];
    constexpr int kFirst = kFp8 ? kLora / 8 : 0;  // first chunk copied
    constexpr int kCopied = C::kChunks - kFirst;
    // Chunk `part` (>= kFirst) of the bf16 tile comes from byte kSrc0 +
    // 16 part of the entry (fp8: the rope after the codes and scales).
    constexpr int kSrc0 = kFp8 ? kLora + 4 * kFp8Tiles - kFirst * 16 : 0;
#pragma unroll 6
    for (int c = tid; c < C::kKeys * kCopied; c += C::kThreads) {
      const int key_lo = c % 8, rest = c / 8;
      const int part = kFirst + rest % kCopied, key_hi = rest / kCopied;
      const int64_t off = offs[key_hi * 8 + key_lo];
      const bool valid = off >= 0;
      CopyAsync16(dst + TileOffset(key_hi * 8 + key_lo, part),
                  p.kv_cache + (valid ? off + kSrc0 + part * 16 : 0), valid);
    }
    CopyAsyncCommit();
  }

  // fp8: half `half` of tile j's 64 x 32 chunks of 16 codes, from the cache
  // through registers into key buffer j % 2 (zeros for keys that are not
  // valid). A bf16 cache: nothing.
  __device__ __forceinline__ void DequantTileHalf(int j, int half) {
    if constexpr (kFp8) {
      uint8_t* dst = s.keys[j % 2];
      const int64_t* offs = s.slots[j % C::kSlots];
      constexpr int kCodeChunks = kLora / 16;  // per entry
      constexpr int kPerThread = C::kKeys * kCodeChunks / C::kThreads / 2;
      uint4 codes[kPerThread];
      float scale[kPerThread];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int c = tid + C::kThreads * (half * kPerThread + i);
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
        const int c = tid + C::kThreads * (half * kPerThread + i);
        const int key_lo = c % 8, key_hi = c / 8 / kCodeChunks;
        const int part = (c / 8) % kCodeChunks;
        const uint32_t in[4] = {codes[i].x, codes[i].y, codes[i].z, codes[i].w};
        uint32_t bf[8];
#pragma unroll
        for (int w = 0; w < 8; ++w) {
          bf[w] = Fp8PairToBf16<F>(in[w / 2] >> (16 * (w % 2)), scale[i]);
        }
        const int key = key_hi * 8 + key_lo;
        *reinterpret_cast<uint4*>(dst + TileOffset(key, 2 * part)) =
            make_uint4(bf[0], bf[1], bf[2], bf[3]);
        *reinterpret_cast<uint4*>(dst + TileOffset(key, 2 * part + 1)) =
            make_uint4(bf[4], bf[5], bf[6], bf[7]);
      }
    } else {
      (void)j;
      (void)half;
    }
  }
};

}  // namespace warpgroup
#endif  // DSA_GPU_CUDA

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_WARPGROUP_LOADS_H_
