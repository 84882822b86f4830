// The sparse MLA seesaw body's block state and its producer (seesaw_body.h
// describes the whole body): the swizzled offsets of Q, K and P in shared
// memory, Block (what every role of a block knows: its row, its split, its
// barriers, and for the crossover its cluster peer) and Producer (Q, then
// the row's key tiles: gathered by cp.async from a bf16 cache, dequantised
// from an fp8 one, or, in the crossover, half of each tile dequantised into
// both blocks' buffers). Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_SEESAW_PRODUCER_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_SEESAW_PRODUCER_H_

#include <cstdint>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/sm90_pipeline.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/kernels.h"
#include "attention/gpu/sparse_mla/row_access.h"

namespace dsa::attention::gpu::sparse_mla {

#if defined(DSA_GPU_CUDA)
namespace seesaw {

using C = Config;

// Byte offset of 16-byte chunk c (dims 8 c .. 8 c + 7) of row r (a head of
// Q or a key of a tile) in the swizzled layout; of P's element (row, key).
__device__ __forceinline__ uint32_t ChunkOffset(int r, int c) {
  return (c / 8) * C::kAtomBytes + r * 128 + (((c % 8) ^ (r % 8)) * 16);
}
__device__ __forceinline__ uint32_t POffset(int row, int key) {
  return row * 128 + (((key / 8) ^ (row % 8)) * 16) + (key % 8) * 2;
}

// Q by TMA: a 3-D map over q {576 dims, heads, tokens} (bf16, 128-byte
// swizzle), boxes of 64 dims x 64 heads x 1 token, each one swizzle atom of
// the block's Q, heads past the last landing as zeros; `tma` 0 where q is
// not bf16 at 16-byte strides or the driver encodes no maps (Q then comes
// by the producer threads' cp.async).
struct QMap {
  CUtensorMap map;
  int32_t tma;
};

// What every role of a block knows (kFp8: the keys come from an fp8_ds_mla
// cache, dequantised by the producer; kCrossover: by the producers of a
// cluster of two blocks, the row's two head groups, each half of every
// tile into both blocks' buffers).
template <bool kFp8, bool kCrossover = false>
struct Block {
  const SparseMlaParams& p;
  SharedMemory& s;
  const uint32_t base;  // shared address of s
  const int64_t t;      // the query row
  const int h0;         // its first head
  const RowRequest rr;
  const int32_t* const row_idx;
  const SplitRange range;
  // kCrossover: this block's rank in the cluster (which half of each tile
  // its producer dequantises) and s in the peer's shared memory.
  const uint32_t rank;
  const uint32_t peer_base;
  const QMap& qmap;

  __device__ __forceinline__ Block(const SparseMlaParams& params,
                                   SharedMemory& smem, int64_t token_begin,
                                   int splits, const QMap& q_map)
      : p(params),
        s(smem),
        base(SharedAddress(&smem)),
        t(token_begin + blockIdx.y),
        h0(blockIdx.x * C::kHeads),
        rr(LoadRowRequest(params, token_begin + blockIdx.y)),
        row_idx(params.topk_indices +
                (token_begin + blockIdx.y) * params.topk_stride),
        range(BlockSplitRange(params.topk, splits)),
        rank(kCrossover ? ClusterRank() : 0),
        peer_base(kCrossover ? ClusterAddress(base, rank ^ 1u) : 0),
        qmap(q_map) {}

  __device__ __forceinline__ uint32_t Addr(const void* field) const {
    return base + static_cast<uint32_t>(static_cast<const uint8_t*>(field) -
                                        reinterpret_cast<uint8_t*>(&s));
  }
  __device__ __forceinline__ uint32_t QAddr() const { return Addr(s.q); }
  __device__ __forceinline__ uint32_t KeysAddr(int b) const {
    return Addr(s.keys[b]);
  }
  // Consumer 0's P: the rope atom of keys[0].
  __device__ __forceinline__ uint8_t* P0() {
    return s.keys[0] + 8 * C::kAtomBytes;
  }
  __device__ __forceinline__ uint32_t KeysReady(int b, int part) const {
    return Addr(&s.keys_ready[b][part]);
  }
  __device__ __forceinline__ uint32_t KeysFree(int b, int part) const {
    return Addr(&s.keys_free[b][part]);
  }
  // kCrossover: the shared address `local` of this block as the same place
  // in the peer's shared memory.
  __device__ __forceinline__ uint32_t Peer(uint32_t local) const {
    return peer_base + (local - base);
  }
  // A consumer thread done reading part `part` of buffer b (kCrossover: the
  // peer's producer writes it too, so each warp of this consumer also
  // arrives on the peer's barrier, once all its lanes are done).
  __device__ __forceinline__ void ReleaseKeys(int b, int part) const {
    MbarArrive(KeysFree(b, part));
    if constexpr (kCrossover) {
      __syncwarp();
      if (threadIdx.x % 32 == 0) MbarArrivePeer(Peer(KeysFree(b, part)));
    }
  }
  // Consumer g's maxima are in s.row_max (phase i: tile pair i).
  __device__ __forceinline__ uint32_t MaximaReady(int g) const {
    return Addr(&s.maxima_ready[g]);
  }
  // The part of buffer b its consumer waits for first (and whose barrier
  // also covers the buffer's `valid` flags).
  __device__ __forceinline__ static int FirstPart(int b) { return b; }

  // One thread, before anything else.
  __device__ __forceinline__ void InitBarriers() {
    // One thread's TMA loads, else every producer thread's copies.
    MbarInit(Addr(&s.q_ready), qmap.tma ? 1 : C::kProducerThreads);
    for (int b = 0; b < 2; ++b) {
      for (int part = 0; part < 2; ++part) {
        // Every producer thread's copies (fp8: its stores, and on the
        // second part its copies of the rope too; kCrossover: its stores,
        // the rope among them, one thread's arrival also expecting the
        // peer's stores as bytes); the flag writers (one thread a row
        // group) on the first part.
        const int copiers =
            C::kProducerThreads * (kFp8 && !kCrossover && part == 1 ? 2 : 1);
        MbarInit(KeysReady(b, part),
                 copiers + (part == FirstPart(b)
                                ? C::kProducerThreads / C::kRowThreads
                                : 0));
        // The consumer that reads it (kCrossover: and one arrival a warp of
        // the peer's).
        MbarInit(KeysFree(b, part),
                 C::kConsumerThreads / 2 +
                     (kCrossover ? C::kConsumerThreads / 2 / 32 : 0));
      }
      MbarInit(MaximaReady(b), C::kConsumerThreads / 2);
    }
    s.last_valid = -1;
    MbarFenceInit();
  }

  // Every thread: the tiles of 64 top-k positions the row needs, from the
  // split's first position to the tile of its last valid index (0 when
  // none). Warp-uniform (through a shuffle), as the products' loop needs.
  // The consumers scan the indices (the producer resolves the first pair's
  // meanwhile).
  __device__ __forceinline__ int CountTiles() {
    int last = -1;
    if (rr.request >= 0 && threadIdx.x < C::kConsumerThreads) {
#pragma unroll 4
      for (int i = range.begin + static_cast<int>(threadIdx.x); i < range.end;
           i += C::kConsumerThreads) {
        const int32_t idx = __ldg(row_idx + i);
        if (idx >= 0 && idx < rr.seq_len) last = i;
      }
    }
    last = __reduce_max_sync(0xffffffffu, last);
    if (threadIdx.x % 32 == 0 && last >= 0) atomicMax(&s.last_valid, last);
    __syncthreads();
    const int all = __shfl_sync(0xffffffffu, s.last_valid, 0);
    return all < 0 ? 0 : (all - range.begin) / C::kKeys + 1;
  }
};

// The producer warpgroup: Q, then the tiles (fp8: each thread's codes
// loaded into registers before its part of the buffer is free, then
// dequantised into it; the rope copied as over a bf16 cache; kCrossover:
// this block's half of each tile, rope included, through registers into
// both blocks' buffers).
template <bool kFp8, Fp8Format F, bool kCrossover = false>
struct Producer {
  Block<kFp8, kCrossover>& blk;
  const int tid;        // 0 .. 127
  const int row_group;  // the tile rows row_group + 16 r
  const int chunk;      // the 16-byte chunk of each atom this thread copies

  __device__ __forceinline__ explicit Producer(Block<kFp8, kCrossover>& b)
      : blk(b),
        tid(static_cast<int>(threadIdx.x) - C::kConsumerThreads),
        row_group(tid / C::kRowThreads),
        chunk(tid % C::kRowThreads) {}

  // Q (bf16, swizzled; heads past the last zeros), completing q_ready: by
  // TMA, one box an atom from one thread, where the map is there; else
  // cp.async straight from a 16-byte aligned bf16 q, else converted through
  // registers.
  __device__ __forceinline__ void LoadQ() {
    const SparseMlaParams& p = blk.p;
    if (blk.qmap.tma) {
      if (tid == 0) {
        const uint32_t bar = blk.Addr(&blk.s.q_ready);
        MbarExpectTx(bar, C::kHeads * kDim * 2);
#pragma unroll
        for (int a = 0; a < C::kAtoms; ++a) {
          TmaLoad3d(blk.QAddr() + a * C::kAtomBytes, &blk.qmap.map, 64 * a,
                    blk.h0, static_cast<int32_t>(blk.t), bar);
        }
      }
      return;
    }
    const bool direct = p.q_format == FloatFormat::kBFloat16 &&
                        reinterpret_cast<uintptr_t>(p.q) % 16 == 0 &&
                        p.q_token_stride % 8 == 0 && p.q_head_stride % 8 == 0;
    const uint32_t q = blk.QAddr();
    constexpr int kChunks = kDim / 8;
    for (int c = tid; c < C::kHeads * kChunks; c += C::kProducerThreads) {
      const int hh = c / kChunks, part = c % kChunks;
      const bool in = blk.h0 + hh < p.heads;
      const int64_t at = blk.t * p.q_token_stride +
                         static_cast<int64_t>(blk.h0 + hh) * p.q_head_stride +
                         part * 8;
      if (direct) {
        CopyAsync16(q + ChunkOffset(hh, part),
                    static_cast<const uint16_t*>(p.q) + (in ? at : 0), in);
      } else {
        uint32_t packed[4] = {0, 0, 0, 0};
        if (in) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            packed[e] = ::dsa::gpu::PackBf16x2(
                LoadFloat(p.q, p.q_format, at + 2 * e),
                LoadFloat(p.q, p.q_format, at + 2 * e + 1));
          }
        }
        *reinterpret_cast<uint4*>(blk.s.q + ChunkOffset(hh, part)) =
            make_uint4(packed[0], packed[1], packed[2], packed[3]);
      }
    }
    if (direct) {
      CopyAsyncArriveOnMbar(blk.Addr(&blk.s.q_ready));
    } else {
      ::dsa::gpu::WarpgroupBf16Mma<64>::FenceStores();
      MbarArrive(blk.Addr(&blk.s.q_ready));
    }
  }

  // The cache offsets of this thread's rows of pair i's two tiles (-1: not
  // a valid key).
  __device__ __forceinline__ void Resolve(
      int i, int64_t (&off)[2][C::kRowsPerThread]) {
    const SparseMlaParams& p = blk.p;
    int32_t idx[2][C::kRowsPerThread];
#pragma unroll
    for (int b = 0; b < 2; ++b) {
#pragma unroll
      for (int r = 0; r < C::kRowsPerThread; ++r) {
        const int pos = blk.range.begin + (2 * i + b) * C::kKeys +
                        r * (C::kProducerThreads / C::kRowThreads) + row_group;
        idx[b][r] = pos < blk.range.end ? __ldg(blk.row_idx + pos) : -1;
      }
    }
#pragma unroll
    for (int b = 0; b < 2; ++b) {
#pragma unroll
      for (int r = 0; r < C::kRowsPerThread; ++r) {
        off[b][r] = EntryOffset(p, blk.rr, idx[b][r]);
      }
    }
  }

  // fp8: this thread's share of the entries at `off` fetched into L2 ahead
  // of their loads (8 threads a row, 96 bytes apart: every 128-byte line of
  // a 656-byte entry at least once).
  __device__ __forceinline__ void PrefetchRows(
      const int64_t (&off)[C::kRowsPerThread]) const {
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      if (off[r] < 0) continue;
      const uint8_t* at = blk.p.kv_cache + off[r] + chunk * 96;
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(at));
    }
  }

  // fp8: the codes of atoms [kA0, kA0 + 4) (dims 64 kA0 .. 64 kA0 + 255,
  // the 8 of each atom this thread writes) and the scales of their two
  // tiles, for this thread's rows (zeros for rows that are not valid keys).
  template <int kA0>
  struct Codes {
    uint2 c[C::kRowsPerThread][4];
    float2 scale[C::kRowsPerThread];
  };
  // One entry's codes of atoms kA0 .. kA0 + 3 for this thread's chunk and
  // their two tiles' scales, from the entry at `src`.
  template <int kA0>
  __device__ __forceinline__ void LoadEntryCodes(const uint8_t* src,
                                                 uint2 (&c)[4],
                                                 float2& scale) const {
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      c[a] = __ldg(
          reinterpret_cast<const uint2*>(src + (kA0 + a) * 64 + chunk * 8));
    }
    scale = __ldg(reinterpret_cast<const float2*>(src + kLora + 4 * (kA0 / 2)));
  }
  template <int kA0>
  __device__ __forceinline__ void LoadCodes(
      const int64_t (&off)[C::kRowsPerThread], Codes<kA0>& k) const {
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      k.scale[r] = make_float2(0.0f, 0.0f);
#pragma unroll
      for (int a = 0; a < 4; ++a) k.c[r][a] = make_uint2(0u, 0u);
      if (off[r] < 0) continue;
      LoadEntryCodes<kA0>(blk.p.kv_cache + off[r], k.c[r], k.scale[r]);
    }
  }
  // fp8: those codes times their scales, as bf16, into buffer b (ordinary
  // stores, fenced for the products' reads): Fp8Fast where this thread's
  // scales fold and its codes hold no NaN, else Fp8PairToBf16.
  template <int kA0>
  __device__ __forceinline__ void StoreCodes(int b, const Codes<kA0>& k) {
    using Fast = Fp8Fast<F>;
    bool fast = true;
    uint32_t nan = 0;
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      fast = fast & Fast::Folds(k.scale[r].x) & Fast::Folds(k.scale[r].y);
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        nan |= Fast::NanBytes(k.c[r][a].x) | Fast::NanBytes(k.c[r][a].y);
      }
    }
    // Both forms inlined: ptxas spills 52 bytes at the producer's 88
    // registers (88 before the fast form); the general form out of line
    // (__noinline__, no spills) measured 1.85x slower on the H200, its
    // codes passed through the stack.
    if (fast && nan == 0) {
      StoreCodesAs<true>(b, k);
    } else {
      StoreCodesAs<false>(b, k);
    }
    ::dsa::gpu::WarpgroupBf16Mma<64>::FenceStores();
  }
  template <bool kFast, int kA0>
  __device__ __forceinline__ void StoreCodesAs(int b, const Codes<kA0>& k) {
    uint8_t* keys = blk.s.keys[b];
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      const int row = r * (C::kProducerThreads / C::kRowThreads) + row_group;
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const float sc = a < 2 ? k.scale[r].x : k.scale[r].y;
        *reinterpret_cast<uint4*>(keys + (kA0 + a) * C::kAtomBytes +
                                  ChunkOffset(row, chunk)) =
            ToBf16x8<kFast>(k.c[r][a], sc);
      }
    }
  }
  // Eight codes times their scale as eight bf16: Fp8Fast (kFast) or
  // Fp8PairToBf16.
  template <bool kFast>
  __device__ __forceinline__ static uint4 ToBf16x8(uint2 w, float scale) {
    if constexpr (kFast) {
      using Fast = Fp8Fast<F>;
      const float folded = Fast::Fold(scale);
      return make_uint4(Fast::template Pair<0>(w.x, folded),
                        Fast::template Pair<1>(w.x, folded),
                        Fast::template Pair<0>(w.y, folded),
                        Fast::template Pair<1>(w.y, folded));
    } else {
      return make_uint4(
          Fp8PairToBf16<F>(w.x, scale), Fp8PairToBf16<F>(w.x >> 16, scale),
          Fp8PairToBf16<F>(w.y, scale), Fp8PairToBf16<F>(w.y >> 16, scale));
    }
  }
  // fp8: the rope (atom 8, bf16 in the entry) of this thread's rows into
  // buffer b, zeros for rows that are not valid keys.
  __device__ __forceinline__ void CopyRope(
      int b, const int64_t (&off)[C::kRowsPerThread], uint64_t policy) {
    const uint32_t keys = blk.KeysAddr(b);
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      const int row = r * (C::kProducerThreads / C::kRowThreads) + row_group;
      const bool valid = off[r] >= 0;
      const uint8_t* src = blk.p.kv_cache + (valid ? off[r] : 0) + kLora +
                           4 * kFp8Tiles + chunk * 16;
      CopyAsync16L2(keys + 8 * C::kAtomBytes + ChunkOffset(row, chunk), src,
                    valid, policy);
    }
  }

  // Atoms [kA0, kA1) of this thread's rows into buffer b.
  template <int kA0, int kA1>
  __device__ __forceinline__ void CopyPart(
      int b, const int64_t (&off)[C::kRowsPerThread], uint64_t policy) {
    const uint32_t keys = blk.KeysAddr(b);
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      const int row = r * (C::kProducerThreads / C::kRowThreads) + row_group;
      const bool valid = off[r] >= 0;
      const uint8_t* src = blk.p.kv_cache + (valid ? off[r] : 0) + chunk * 16;
      const uint32_t dst = keys + ChunkOffset(row, chunk);
#pragma unroll
      for (int a = kA0; a < kA1; ++a) {
        CopyAsync16L2(dst + a * C::kAtomBytes, src + a * 128, valid, policy);
      }
    }
  }

  // Buffer b's flags (one thread per row group), then its arrival on the
  // barrier of the buffer's first part.
  __device__ __forceinline__ void PublishValid(
      int b, const int64_t (&off)[C::kRowsPerThread]) {
    if (chunk != 0) return;
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      blk.s.valid[b][r * (C::kProducerThreads / C::kRowThreads) + row_group] =
          off[r] >= 0 ? 1 : 0;
    }
    MbarArrive(blk.KeysReady(b, Block<kFp8, kCrossover>::FirstPart(b)));
  }

  // kCrossover: this block's rows of each tile are 32 rank + 16 j +
  // row_group (j = 0, 1), the peer's the other 32. A pair's resolved
  // offsets: this thread's rows of tiles 2 i and 2 i + 1 (-1: not a valid
  // key), and bit 4 b + r set where row 16 r + row_group of tile 2 i + b is
  // a valid key (the flags of every row: each block publishes all 64).
  struct HalfPair {
    int64_t off[2][2];
    uint32_t valid_bits;
  };
  __device__ __forceinline__ void ResolveHalf(int i, HalfPair& h) {
    int64_t off[2][C::kRowsPerThread];
    Resolve(i, off);
    h.valid_bits = 0;
#pragma unroll
    for (int b = 0; b < 2; ++b) {
#pragma unroll
      for (int r = 0; r < C::kRowsPerThread; ++r) {
        if (off[b][r] >= 0) h.valid_bits |= 1u << (4 * b + r);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        h.off[b][j] = blk.rank != 0 ? off[b][2 + j] : off[b][j];
      }
    }
  }
  // kCrossover: buffer b's flags from the bits (one thread per row group),
  // then its arrival on the barrier of the buffer's first part.
  __device__ __forceinline__ void PublishValidBits(int b, uint32_t bits) {
    if (chunk != 0) return;
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      blk.s.valid[b][r * (C::kProducerThreads / C::kRowThreads) + row_group] =
          (bits >> (4 * b + r)) & 1u;
    }
    MbarArrive(blk.KeysReady(b, Block<kFp8, kCrossover>::FirstPart(b)));
  }
  // kCrossover: this thread's rows' share of the entries at `off` fetched
  // into L2 ahead of their loads.
  __device__ __forceinline__ void PrefetchHalf(const int64_t (&off)[2]) const {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      if (off[j] < 0) continue;
      const uint8_t* at = blk.p.kv_cache + off[j] + chunk * 96;
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(at));
    }
  }
  // kCrossover: the codes of atoms [kA0, kA0 + 4) (the 8 of each atom this
  // thread writes), the scales of their two tiles and (kA0 = 4) this
  // thread's 16 bytes of the rope, for its two rows (zeros for rows that
  // are not valid keys).
  template <int kA0>
  struct HalfCodes {
    uint2 c[2][4];
    float2 scale[2];
    uint4 rope[kA0 == 4 ? 2 : 1];
  };
  template <int kA0>
  __device__ __forceinline__ void LoadHalf(const int64_t (&off)[2],
                                           HalfCodes<kA0>& k) const {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      k.scale[j] = make_float2(0.0f, 0.0f);
#pragma unroll
      for (int a = 0; a < 4; ++a) k.c[j][a] = make_uint2(0u, 0u);
      if constexpr (kA0 == 4) k.rope[j] = make_uint4(0u, 0u, 0u, 0u);
      if (off[j] < 0) continue;
      const uint8_t* src = blk.p.kv_cache + off[j];
      LoadEntryCodes<kA0>(src, k.c[j], k.scale[j]);
      if constexpr (kA0 == 4) {
        k.rope[j] = __ldg(reinterpret_cast<const uint4*>(
            src + kLora + 4 * kFp8Tiles + chunk * 16));
      }
    }
  }
  // kCrossover: those codes times their scales, as bf16 (Fp8Fast where this
  // thread's scales fold and its codes hold no NaN, else Fp8PairToBf16; and
  // the rope), into buffer b of both blocks: ordinary stores here, fenced
  // for the products' reads, then this thread's arrival on the part's
  // barrier (one thread's also expecting the peer's stores into this
  // block); stores that complete on the peer's barrier there.
  template <int kA0>
  __device__ __forceinline__ void StoreHalf(int b, const HalfCodes<kA0>& k) {
    using Fast = Fp8Fast<F>;
    bool fast = true;
    uint32_t nan = 0;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      fast = fast & Fast::Folds(k.scale[j].x) & Fast::Folds(k.scale[j].y);
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        nan |= Fast::NanBytes(k.c[j][a].x) | Fast::NanBytes(k.c[j][a].y);
      }
    }
    if (fast && nan == 0) {
      StoreHalfAs<true>(b, k);
    } else {
      StoreHalfAs<false>(b, k);
    }
    constexpr int kPart = kA0 == 0 ? 0 : 1;
    // The bytes the peer stores into a part of this block's buffer: its 32
    // rows of the part's atoms.
    constexpr uint32_t kPeerBytes =
        (C::kKeys / 2) * 128 *
        (kPart == 0 ? C::kFirstPartAtoms : C::kAtoms - C::kFirstPartAtoms);
    ::dsa::gpu::WarpgroupBf16Mma<64>::FenceStores();
    if (tid == 0) {
      MbarExpectTx(blk.KeysReady(b, kPart), kPeerBytes);
    } else {
      MbarArrive(blk.KeysReady(b, kPart));
    }
  }
  template <bool kFast, int kA0>
  __device__ __forceinline__ void StoreHalfAs(int b, const HalfCodes<kA0>& k) {
    constexpr int kPart = kA0 == 0 ? 0 : 1;
    uint8_t* keys = blk.s.keys[b];
    const uint32_t peer_keys = blk.Peer(blk.KeysAddr(b));
    const uint32_t peer_ready = blk.Peer(blk.KeysReady(b, kPart));
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int row = static_cast<int>(blk.rank) * (C::kKeys / 2) +
                      j * (C::kProducerThreads / C::kRowThreads) + row_group;
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const float sc = a < 2 ? k.scale[j].x : k.scale[j].y;
        const uint4 v = ToBf16x8<kFast>(k.c[j][a], sc);
        const uint32_t at = (kA0 + a) * C::kAtomBytes + ChunkOffset(row, chunk);
        *reinterpret_cast<uint4*>(keys + at) = v;
        StoreToPeer(peer_keys + at, v, peer_ready);
      }
      if constexpr (kA0 == 4) {
        const uint32_t at = 8 * C::kAtomBytes + ChunkOffset(row, chunk);
        *reinterpret_cast<uint4*>(keys + at) = k.rope[j];
        StoreToPeer(peer_keys + at, k.rope[j], peer_ready);
      }
    }
  }

  // kCrossover: every pair in the order of Run, this block's half of each
  // part loaded before the part's wait and dequantised into both blocks
  // after it; a buffer part is free once both blocks' consumers are done
  // with it (the peer's arrivals acquired at cluster scope); the next
  // pair's offsets resolved and its rows prefetched into L2 after the last
  // part. (The next part's loads issued before this part's stores measured
  // slower: 176 bytes spilled at 88 registers, RESULTS.md.) `h`: pair 0's
  // (ResolveHalf before the tiles are counted).
  __device__ __forceinline__ void RunCrossover(int pairs, HalfPair& h) {
    static_assert(C::kFirstPartAtoms == 4 && C::kAtoms == 9,
                  "parts: atoms 0-3, then 4-7 and the rope");
    static_assert(2 * (C::kProducerThreads / C::kRowThreads) == C::kKeys / 2,
                  "two rows a thread of each block's half");
    if (pairs == 0) return;
    PrefetchHalf(h.off[0]);
    PrefetchHalf(h.off[1]);
    for (int i = 0; i < pairs; ++i) {
      const uint32_t parity = (i & 1) ^ 1;
      {
        HalfCodes<0> k;
        LoadHalf(h.off[0], k);
        MbarWaitCluster(blk.KeysFree(0, 0), parity);
        StoreHalf(0, k);
        PublishValidBits(0, h.valid_bits);
      }
      {
        HalfCodes<4> k;
        LoadHalf(h.off[1], k);
        MbarWaitCluster(blk.KeysFree(1, 1), parity);
        StoreHalf(1, k);
        PublishValidBits(1, h.valid_bits);
      }
      {
        HalfCodes<4> k;
        LoadHalf(h.off[0], k);
        MbarWaitCluster(blk.KeysFree(0, 1), parity);
        StoreHalf(0, k);
      }
      {
        HalfCodes<0> k;
        LoadHalf(h.off[1], k);
        MbarWaitCluster(blk.KeysFree(1, 0), parity);
        StoreHalf(1, k);
      }
      if (i + 1 < pairs) {
        ResolveHalf(i + 1, h);
        PrefetchHalf(h.off[0]);
        PrefetchHalf(h.off[1]);
      }
    }
  }

  // Every pair: each part once its buffer is free, in the order the
  // consumers need them (tile 2 i's first part, 2 i + 1's first part, then
  // the second parts); the next pair's offsets resolved while the
  // consumers work. `off`: pair 0's (Resolve before the tiles are counted).
  __device__ __forceinline__ void Run(int pairs,
                                      int64_t (&off)[2][C::kRowsPerThread]) {
    if constexpr (kFp8) {
      RunFp8(pairs, off);
      return;
    }
    constexpr int kSplit = C::kFirstPartAtoms;
    const uint64_t policy = L2EvictLastPolicy();
    for (int i = 0; i < pairs; ++i) {
      const uint32_t parity = (i & 1) ^ 1;
      MbarWait(blk.KeysFree(0, 0), parity);
      CopyPart<0, kSplit>(0, off[0], policy);
      CopyAsyncArriveOnMbar(blk.KeysReady(0, 0));
      PublishValid(0, off[0]);

      MbarWait(blk.KeysFree(1, 1), parity);
      CopyPart<kSplit, C::kAtoms>(1, off[1], policy);
      CopyAsyncArriveOnMbar(blk.KeysReady(1, 1));
      PublishValid(1, off[1]);

      MbarWait(blk.KeysFree(0, 1), parity);
      CopyPart<kSplit, C::kAtoms>(0, off[0], policy);
      CopyAsyncArriveOnMbar(blk.KeysReady(0, 1));

      MbarWait(blk.KeysFree(1, 0), parity);
      CopyPart<0, kSplit>(1, off[1], policy);
      CopyAsyncArriveOnMbar(blk.KeysReady(1, 0));

      if (i + 1 < pairs) Resolve(i + 1, off);
    }
  }

  // Part `part` of buffer b over an fp8 cache, atoms from kA0 (0: the first
  // part; else the second, with the rope): its codes loaded before the
  // buffer's wait, dequantised into it after, then announced (the second
  // part's rope by its copies' arrival as well).
  template <int kA0>
  __device__ __forceinline__ void Fp8Part(
      int b, int part, const int64_t (&row_off)[C::kRowsPerThread],
      uint32_t parity, uint64_t policy) {
    Codes<kA0> k;
    LoadCodes(row_off, k);
    MbarWait(blk.KeysFree(b, part), parity);
    if constexpr (kA0 != 0) {
      CopyRope(b, row_off, policy);
      CopyAsyncArriveOnMbar(blk.KeysReady(b, part));
    }
    StoreCodes(b, k);
    MbarArrive(blk.KeysReady(b, part));
  }

  // The same order over an fp8 cache, a part at a time (Fp8Part); the next
  // pair's offsets resolved and their rows prefetched into L2 after the
  // last part of this pair.
  __device__ __forceinline__ void RunFp8(int pairs,
                                         int64_t (&off)[2][C::kRowsPerThread]) {
    static_assert(C::kFirstPartAtoms == 4 && C::kAtoms == 9,
                  "parts: atoms 0-3, then 4-7 and the rope");
    constexpr int kSplit = C::kFirstPartAtoms;
    const uint64_t policy = L2EvictLastPolicy();
    PrefetchRows(off[0]);
    PrefetchRows(off[1]);
    for (int i = 0; i < pairs; ++i) {
      const uint32_t parity = (i & 1) ^ 1;
      Fp8Part<0>(0, 0, off[0], parity, policy);
      PublishValid(0, off[0]);
      Fp8Part<kSplit>(1, 1, off[1], parity, policy);
      PublishValid(1, off[1]);
      Fp8Part<kSplit>(0, 1, off[0], parity, policy);
      Fp8Part<0>(1, 0, off[1], parity, policy);
      if (i + 1 < pairs) {
        Resolve(i + 1, off);
        PrefetchRows(off[0]);
        PrefetchRows(off[1]);
      }
    }
  }
};

}  // namespace seesaw
#else
namespace seesaw {
// AMD has no TMA; the seesaw body runs on sm_90a only (its kernels trap).
struct QMap {
  int32_t tma;
};
}  // namespace seesaw
#endif  // DSA_GPU_CUDA

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_SEESAW_PRODUCER_H_
