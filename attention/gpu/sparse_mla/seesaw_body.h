// The sparse MLA's sm_90a seesaw body over a bf16 cache (or an fp8_ds_mla
// cache, kFp8), for 64 heads or more: one block of three warpgroups per
// (query row, 64 heads, top-k split), FlashMLA's sm_90 sparse prefill
// schedule over the paged latent cache.
//
// Roles. The producer warpgroup (72 registers) loads Q, then gathers the
// row's key tiles of 64 top-k entries with 16-byte cp.async into two
// buffers (tile 2 i of pair i into keys[0], 2 i + 1 into keys[1]), each
// tile in two parts with their own mbarriers (atoms 0-3: dims 0-255;
// atoms 4-8: dims 256-575), invalid keys zero-filled and flagged in
// `valid`. Over an fp8 cache (88 producer registers, 208 consumer) each
// producer thread loads a part's codes and scales into registers before
// the part is free, then writes them as bf16 with ordinary stores fenced
// for the products (Fp8PairToBf16), the rope still by cp.async; measured
// 3.6x slower than the bf16 cache at T = 8192, faster than the gathered
// workspace only at 64 heads and many decode rows (heuristics.h). At an
// even number of head groups (kCrossover, FlashMLA's "crossover") a row's
// two head-group blocks run as one cluster, each producer dequantising its
// half of every tile (codes, scales and rope through registers) into its
// own buffers and, by st.async, the peer's: at 128 heads 1.04-1.21x faster
// than the gathered workspace from 128 rows (8K contexts), slower below.
// Consumer g (216 registers) owns O[:, 256 g, 256 g + 256); per
// pair it computes S = Q K^T of buffer g's tile, starting on the part it
// waits for first, runs the online softmax with the running maxima handed
// from consumer to consumer through shared memory (announced on an
// mbarrier a consumer), multiplies its own P
// (registers, wgmma RS) by its half of its tile's values, and the other
// consumer's P (shared memory, rescaled to the pair's maxima) by its half
// of the other tile's values: the "seesaw".
//
// Tiles. The row's valid indices end at its last valid top-k position,
// found by the whole block first; tiles run from the split's first
// position to there, so -1 padding after the last valid index costs
// nothing, and scattered -1 or invalid indices are masked. Layout:
// seesaw::SharedMemory (config.h). Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_SEESAW_BODY_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_SEESAW_BODY_H_

#include <cstdint>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/sm90_pipeline.h"
#include "attention/gpu/device/softmax.h"
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

// The crossover's cluster of two blocks (the two head groups of a row):
// this block's rank in it; an address of this block's shared memory as the
// same place in block `rank`'s; a 16-byte store into the peer's shared
// memory that completes `bytes` on the peer's mbarrier `bar` (both
// shared::cluster addresses); an arrival on the peer's mbarrier, releasing
// this thread's reads and writes at cluster scope; a wait that acquires at
// cluster scope (what the peer's arrivals released); every thread of both
// blocks at a barrier.
__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t r = 0;
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}
__device__ __forceinline__ uint32_t ClusterAddress(uint32_t addr,
                                                   uint32_t rank) {
  uint32_t r = addr;
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(r)
               : "r"(addr), "r"(rank));
#endif
  return r;
}
__device__ __forceinline__ void StoreToPeer(uint32_t addr, const uint4& v,
                                            uint32_t bar) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], "
      "{%1, %2, %3, %4}, [%5];\n" ::"r"(addr),
      "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar)
      : "memory");
#endif
}
__device__ __forceinline__ void MbarArrivePeer(uint32_t bar) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(
          bar)
      : "memory");
#endif
}
__device__ __forceinline__ void MbarWaitCluster(uint32_t bar, uint32_t parity) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  uint32_t done = 0;
  while (done == 0) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], "
        "%2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
#endif
}
__device__ __forceinline__ void ClusterSync() {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
#endif
}

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

  __device__ __forceinline__ Block(const SparseMlaParams& params,
                                   SharedMemory& smem, int64_t token_begin,
                                   int splits)
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
        peer_base(kCrossover ? ClusterAddress(base, rank ^ 1u) : 0) {}

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
    MbarInit(Addr(&s.q_ready), C::kProducerThreads);
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

  // Q (bf16, swizzled; heads past the last zeros), completing q_ready:
  // cp.async straight from a 16-byte aligned bf16 q, else converted through
  // registers.
  __device__ __forceinline__ void LoadQ() {
    const SparseMlaParams& p = blk.p;
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
  template <int kA0>
  __device__ __forceinline__ void LoadCodes(
      const int64_t (&off)[C::kRowsPerThread], Codes<kA0>& k) const {
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      k.scale[r] = make_float2(0.0f, 0.0f);
#pragma unroll
      for (int a = 0; a < 4; ++a) k.c[r][a] = make_uint2(0u, 0u);
      if (off[r] < 0) continue;
      const uint8_t* src = blk.p.kv_cache + off[r];
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        k.c[r][a] = __ldg(
            reinterpret_cast<const uint2*>(src + (kA0 + a) * 64 + chunk * 8));
      }
      k.scale[r] =
          __ldg(reinterpret_cast<const float2*>(src + kLora + 4 * (kA0 / 2)));
    }
  }
  // fp8: those codes times their scales, as bf16, into buffer b (ordinary
  // stores, fenced for the products' reads).
  template <int kA0>
  __device__ __forceinline__ void StoreCodes(int b, const Codes<kA0>& k) {
    uint8_t* keys = blk.s.keys[b];
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      const int row = r * (C::kProducerThreads / C::kRowThreads) + row_group;
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const float sc = a < 2 ? k.scale[r].x : k.scale[r].y;
        const uint2 w = k.c[r][a];
        *reinterpret_cast<uint4*>(keys + (kA0 + a) * C::kAtomBytes +
                                  ChunkOffset(row, chunk)) =
            make_uint4(
                Fp8PairToBf16<F>(w.x, sc), Fp8PairToBf16<F>(w.x >> 16, sc),
                Fp8PairToBf16<F>(w.y, sc), Fp8PairToBf16<F>(w.y >> 16, sc));
      }
    }
    ::dsa::gpu::WarpgroupBf16Mma<64>::FenceStores();
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
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        k.c[j][a] = __ldg(
            reinterpret_cast<const uint2*>(src + (kA0 + a) * 64 + chunk * 8));
      }
      k.scale[j] =
          __ldg(reinterpret_cast<const float2*>(src + kLora + 4 * (kA0 / 2)));
      if constexpr (kA0 == 4) {
        k.rope[j] = __ldg(reinterpret_cast<const uint4*>(
            src + kLora + 4 * kFp8Tiles + chunk * 16));
      }
    }
  }
  // kCrossover: those codes times their scales, as bf16 (and the rope),
  // into buffer b of both blocks: ordinary stores here, fenced for the
  // products' reads, then this thread's arrival on the part's barrier (one
  // thread's also expecting the peer's stores into this block); stores that
  // complete on the peer's barrier there.
  template <int kA0>
  __device__ __forceinline__ void StoreHalf(int b, const HalfCodes<kA0>& k) {
    constexpr int kPart = kA0 == 0 ? 0 : 1;
    // The bytes the peer stores into a part of this block's buffer: its 32
    // rows of the part's atoms.
    constexpr uint32_t kPeerBytes =
        (C::kKeys / 2) * 128 *
        (kPart == 0 ? C::kFirstPartAtoms : C::kAtoms - C::kFirstPartAtoms);
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
        const uint2 w = k.c[j][a];
        const uint4 v = make_uint4(
            Fp8PairToBf16<F>(w.x, sc), Fp8PairToBf16<F>(w.x >> 16, sc),
            Fp8PairToBf16<F>(w.y, sc), Fp8PairToBf16<F>(w.y >> 16, sc));
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
    ::dsa::gpu::WarpgroupBf16Mma<64>::FenceStores();
    if (tid == 0) {
      MbarExpectTx(blk.KeysReady(b, kPart), kPeerBytes);
    } else {
      MbarArrive(blk.KeysReady(b, kPart));
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

  // The same order over an fp8 cache: each part's codes loaded before its
  // wait, dequantised into the buffer after it, then announced (the rope
  // of the second parts by its copies' arrival as well); the next pair's
  // offsets resolved and their rows prefetched into L2 after the last part
  // of this pair.
  __device__ __forceinline__ void RunFp8(int pairs,
                                         int64_t (&off)[2][C::kRowsPerThread]) {
    static_assert(C::kFirstPartAtoms == 4 && C::kAtoms == 9,
                  "parts: atoms 0-3, then 4-7 and the rope");
    const uint64_t policy = L2EvictLastPolicy();
    PrefetchRows(off[0]);
    PrefetchRows(off[1]);
    for (int i = 0; i < pairs; ++i) {
      const uint32_t parity = (i & 1) ^ 1;
      {
        Codes<0> k;
        LoadCodes(off[0], k);
        MbarWait(blk.KeysFree(0, 0), parity);
        StoreCodes(0, k);
        MbarArrive(blk.KeysReady(0, 0));
        PublishValid(0, off[0]);
      }
      {
        Codes<4> k;
        LoadCodes(off[1], k);
        MbarWait(blk.KeysFree(1, 1), parity);
        CopyRope(1, off[1], policy);
        CopyAsyncArriveOnMbar(blk.KeysReady(1, 1));
        StoreCodes(1, k);
        MbarArrive(blk.KeysReady(1, 1));
        PublishValid(1, off[1]);
      }
      {
        Codes<4> k;
        LoadCodes(off[0], k);
        MbarWait(blk.KeysFree(0, 1), parity);
        CopyRope(0, off[0], policy);
        CopyAsyncArriveOnMbar(blk.KeysReady(0, 1));
        StoreCodes(0, k);
        MbarArrive(blk.KeysReady(0, 1));
      }
      {
        Codes<0> k;
        LoadCodes(off[1], k);
        MbarWait(blk.KeysFree(1, 0), parity);
        StoreCodes(1, k);
        MbarArrive(blk.KeysReady(1, 0));
      }
      if (i + 1 < pairs) {
        Resolve(i + 1, off);
        PrefetchRows(off[0]);
        PrefetchRows(off[1]);
      }
    }
  }
};

// A consumer warpgroup (kG: 0 or 1) and its share of the output.
template <int kG, bool kFp8, bool kCrossover = false>
struct Consumer {
  using WgS = ::dsa::gpu::WarpgroupBf16Mma<C::kKeys>;          // S: m64n64
  using WgP = ::dsa::gpu::WarpgroupBf16MmaRegA<C::kHalfDims>;  // own P
  using WgO = ::dsa::gpu::WarpgroupBf16Mma<C::kHalfDims>;      // other's P
  static constexpr int kPSteps = C::kKeys / 16;

  Block<kFp8, kCrossover>& blk;
  const int lane;
  const int row0;  // this thread's accumulator rows: row0 and row0 + 8
  const float scale_log2;
  float o[WgO::kAccPerThread];
  float sc[WgS::kAccPerThread];  // S, then P in fp32
  uint32_t pf[kPSteps][4];       // P in bf16: the A of the RS product
  float row_max[2];              // the pair's maxima (log2 domain)
  float row_sum[2];              // this consumer's share of the row sums

  __device__ __forceinline__ explicit Consumer(Block<kFp8, kCrossover>& b)
      : blk(b),
        lane(threadIdx.x % 32),
        row0(16 * ((threadIdx.x / 32) % 4) + (threadIdx.x % 32) / 4),
        scale_log2(b.p.softmax_scale * kLog2e) {
#pragma unroll
    for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] = 0.0f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = C::kMaxInit;
      row_sum[r] = 0.0f;
    }
  }

  // The products read the part with no proxy fence after the wait: its
  // copies have landed once the phase completes, which FlashMLA's consumers
  // rely on too. (PTX's memory model orders cp.async's writes, made in the
  // generic proxy, before wgmma's reads, in the async proxy, only through
  // fence.proxy.async. Every H200 run of the suites passed without it;
  // dropping it measured within the run-to-run spread, and the fastest
  // build measured has none: RESULTS.md.)
  __device__ __forceinline__ void WaitKeys(int b, int part, int parity) {
    MbarWait(blk.KeysReady(b, part), static_cast<uint32_t>(parity));
  }

  // sc (+)= Q K^T over atoms [kA0, kA1) of buffer b.
  template <int kA0, int kA1>
  __device__ __forceinline__ void IssueScores(int b, bool accumulate) {
    using ::dsa::gpu::Bf16Sw128Descriptor;
    const uint32_t q = blk.QAddr() + kA0 * C::kAtomBytes;
    const uint32_t k = blk.KeysAddr(b) + kA0 * C::kAtomBytes;
    WgS::template IssueWith<(kA1 - kA0) * 4>(
        sc,
        [&](int j) {
          return Bf16Sw128Descriptor(q + (j / 4) * C::kAtomBytes +
                                     (j % 4) * 32);
        },
        [&](int j) {
          return Bf16Sw128Descriptor(k + (j / 4) * C::kAtomBytes +
                                     (j % 4) * 32);
        },
        accumulate);
  }

  // The values of this consumer's half of buffer b (atoms 4 g .. 4 g + 3),
  // MN-major: k-step j is keys 16 j .. 16 j + 15.
  __device__ __forceinline__ uint64_t ValuesDesc(int b, int j) const {
    return WgO::DescriptorSw128(
        blk.KeysAddr(b) + 4 * kG * C::kAtomBytes + j * 16 * 128, C::kAtomBytes,
        1024);
  }
  // o += P V over buffer b, P this consumer's (registers).
  __device__ __forceinline__ void IssueOwnValues(int b) {
    WgP::template IssueWith<::dsa::gpu::kBMnMajor>(
        o, pf, [&](int j) { return ValuesDesc(b, j); }, true);
  }
  // o += P V over buffer b, P the other consumer's (shared memory).
  __device__ __forceinline__ void IssueOtherValues(const uint8_t* other_p,
                                                   int b) {
    using ::dsa::gpu::Bf16Sw128Descriptor;
    const uint32_t pa = blk.Addr(other_p);
    WgO::template IssueWith<kPSteps, ::dsa::gpu::kBMnMajor>(
        o, [&](int j) { return Bf16Sw128Descriptor(pa + j * 32); },
        [&](int j) { return ValuesDesc(b, j); }, true);
  }

  // Keys of buffer b that are not valid score -inf.
  __device__ __forceinline__ void MaskScores(int b) {
    const uint8_t* valid = blk.s.valid[b];
#pragma unroll
    for (int c = 0; c < C::kKeys / 8; ++c) {
      const uint16_t v2 =
          *reinterpret_cast<const uint16_t*>(valid + 8 * c + 2 * (lane % 4));
      if ((v2 & 0xffu) == 0) sc[4 * c] = sc[4 * c + 2] = kNegInf;
      if ((v2 >> 8) == 0) sc[4 * c + 1] = sc[4 * c + 3] = kNegInf;
    }
  }

  // The online softmax of the tile in sc against `prior` (the maxima so
  // far: this consumer's own for consumer 0, consumer 0's for consumer
  // 1): the new maxima into row_max and shared memory (published on
  // maxima_ready[kG]), o and the row sums rescaled, sc = P (fp32) and pf =
  // P (bf16).
  __device__ __forceinline__ void Softmax(const float (&prior)[2]) {
    float cur[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int i = 0; i < WgS::kAccPerThread; ++i) {
      cur[(i / 2) % 2] = fmaxf(cur[(i / 2) % 2], sc[i]);
    }
    float next[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The maximum before the scale: softmax_scale > 0 (the heuristics).
      next[r] = fmaxf(prior[r], QuadRowReduce::Max(cur[r]) * scale_log2);
      alpha[r] = Exp2Ftz(row_max[r] - next[r]);
      row_max[r] = next[r];
    }
    RescaleOutput(alpha);
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < WgS::kAccPerThread; ++i) {
      const int r = (i / 2) % 2;
      sc[i] = Exp2Ftz(fmaf(sc[i], scale_log2, -next[r]));
      sum[r] += sc[i];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * alpha[r] + sum[r];
    WgP::template FromAccumulator<C::kKeys>(sc, pf);
    // Every lane of the warp has read `prior` (consumer 1 reads it from
    // the same words) before one lane of each quad overwrites them.
    __syncwarp();
    if (lane % 4 == 0) {
      blk.s.row_max[row0] = next[0];
      blk.s.row_max[row0 + 8] = next[1];
    }
    MbarArrive(blk.MaximaReady(kG));
  }

  // o and the row sums *= alpha; most tiles leave every maximum as it was
  // (alpha exactly 1) and skip it.
  __device__ __forceinline__ void RescaleOutput(const float (&alpha)[2]) {
    if (alpha[0] != 1.0f || alpha[1] != 1.0f) {
#pragma unroll
      for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] *= alpha[(e / 2) % 2];
    }
  }

  // pf into `dst` (64 rows x 64 keys, swizzled) for the other consumer: one
  // stmatrix.x4 per 16 keys, pf[j][q] being the 8 x 8 matrix of rows
  // 8 (q % 2) and keys 16 j + 8 (q / 2) of the warp's 16 rows; lane l
  // addresses row l % 8 of matrix l / 8.
  __device__ __forceinline__ void StoreP(uint8_t* dst) const {
    const int m = lane / 8;
    const int row = row0 - lane / 4 + 8 * (m % 2) + lane % 8;
    const uint32_t base = blk.Addr(dst);
#pragma unroll
    for (int j = 0; j < kPSteps; ++j) {
      ::dsa::gpu::StoreMatrixX4(base + POffset(row, 16 * j + 8 * (m / 2)),
                                pf[j]);
    }
  }

  // Consumer 0, once consumer 1 published the pair's maxima (pair i): P (fp32
  // in sc, at this consumer's maxima) rescaled to them into P0 for consumer 1;
  // the factors, to rescale o once the product over the own values is done.
  __device__ __forceinline__ void RescaleAndStoreP0(int i, float (&factor)[2]) {
    MbarWait(blk.MaximaReady(1), static_cast<uint32_t>(i & 1));
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m = blk.s.row_max[row0 + 8 * r];
      factor[r] = Exp2Ftz(row_max[r] - m);
      row_max[r] = m;
    }
#pragma unroll
    for (int i = 0; i < WgS::kAccPerThread; ++i) sc[i] *= factor[(i / 2) % 2];
    WgP::template FromAccumulator<C::kKeys>(sc, pf);
    StoreP(blk.P0());
    WgS::FenceStores();
  }

  __device__ __forceinline__ void Run0(int pairs) {
    constexpr int kSplit = C::kFirstPartAtoms;
    if (pairs > 0) {
      WaitKeys(0, 0, 0);
      IssueScores<0, kSplit>(0, false);
      WaitKeys(0, 1, 0);
      IssueScores<kSplit, C::kAtoms>(0, true);
      WgS::Wait(sc);
    }
    for (int i = 0; i < pairs; ++i) {
      MaskScores(0);
      const float prior[2] = {row_max[0], row_max[1]};
      Softmax(prior);
      IssueOwnValues(0);
      WgP::Wait(o, pf);
      blk.ReleaseKeys(0, 0);
      float factor[2];
      RescaleAndStoreP0(i, factor);
      NamedBarrierArrive<C::kConsumerThreads>(kP0Ready);
      RescaleOutput(factor);
#pragma unroll
      for (int r = 0; r < 2; ++r) row_sum[r] *= factor[r];
      NamedBarrierSync<C::kConsumerThreads>(kP1Ready);
      IssueOtherValues(blk.s.p1, 1);
      if (i + 1 < pairs) {
        const int parity = (i + 1) & 1;
        WaitKeys(0, 0, parity);
        IssueScores<0, kSplit>(0, false);
        ::dsa::gpu::WarpgroupWait<1>();
        WgO::FenceOperands(o);
        blk.ReleaseKeys(1, 0);
        WaitKeys(0, 1, parity);
        IssueScores<kSplit, C::kAtoms>(0, true);
        WgS::Wait(sc);
      } else {
        WgO::Wait(o);
        blk.ReleaseKeys(1, 0);
      }
    }
  }

  __device__ __forceinline__ void Run1(int pairs) {
    constexpr int kSplit = C::kFirstPartAtoms;
    for (int i = 0; i < pairs; ++i) {
      const int parity = i & 1;
      WaitKeys(1, 1, parity);
      IssueScores<kSplit, C::kAtoms>(1, false);
      WaitKeys(1, 0, parity);
      IssueScores<0, kSplit>(1, true);
      WgS::Wait(sc);
      MaskScores(1);
      MbarWait(blk.MaximaReady(0), static_cast<uint32_t>(parity));
      const float prior[2] = {blk.s.row_max[row0], blk.s.row_max[row0 + 8]};
      Softmax(prior);
      IssueOwnValues(1);
      StoreP(blk.s.p1);  // while the product runs (both only read pf)
      NamedBarrierSync<C::kConsumerThreads>(kP0Ready);
      IssueOtherValues(blk.P0(), 0);
      WgS::FenceStores();
      NamedBarrierArrive<C::kConsumerThreads>(kP1Ready);
      ::dsa::gpu::WarpgroupWait<1>();
      blk.ReleaseKeys(1, 1);
      WgO::Wait(o);
      blk.ReleaseKeys(0, 1);
    }
  }

  // Normalises o by the row sums (a row without a valid key outputs zeros)
  // and stores it: fp32 straight to the split's part (and consumer 0 the
  // log2-sum-exp), or bf16 staged through Q's buffer as whole 16-byte
  // chunks.
  __device__ __forceinline__ void StoreOutput(int64_t token_begin,
                                              const MmaOutput& out) {
    SharedMemory& s = blk.s;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = QuadRowReduce::Sum(row_sum[r]);
      if (lane % 4 == 0) s.row_sum[kG][row0 + 8 * r] = l;
    }
    NamedBarrierSync<C::kConsumerThreads>(kSumsReady);
    float total[2], inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      total[r] = s.row_sum[0][row0 + 8 * r] + s.row_sum[1][row0 + 8 * r];
      inv[r] = total[r] > 0.0f ? 1.0f / total[r] : 0.0f;
    }
    const SparseMlaParams& p = blk.p;
    const int rows_here =
        p.heads - blk.h0 < C::kHeads ? p.heads - blk.h0 : C::kHeads;
    const int64_t out_row0 = BlockOutputRow(p, blk.t, token_begin, blk.h0);
    if (out.part_o != nullptr) {  // a split of few rows: fp32, direct
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        if (row >= rows_here) continue;
        if (kG == 0 && lane % 4 == 0) {
          out.part_lse[out_row0 + row] =
              total[r] > 0.0f ? row_max[r] + __log2f(total[r]) : kNegInf;
        }
        float* dst = out.part_o + (out_row0 + row) * kLora + kG * C::kHalfDims;
#pragma unroll
        for (int e = 2 * r; e < WgO::kAccPerThread; e += 4) {
          const int col = WgO::AccCol(lane, e);
          *reinterpret_cast<float2*>(dst + col) =
              make_float2(o[e] * inv[r], o[e + 1] * inv[r]);
        }
      }
      return;
    }
    // Q is free: every product that read it is done (kSumsReady).
    uint16_t* stage = reinterpret_cast<uint16_t*>(s.q);
#pragma unroll
    for (int e = 0; e < WgO::kAccPerThread; e += 2) {
      const int r = (e / 2) % 2;
      const int row = row0 + 8 * r;
      const int col = kG * C::kHalfDims + WgO::AccCol(lane, e);
      *reinterpret_cast<uint32_t*>(stage + row * C::kStageLd + col) =
          ::dsa::gpu::PackBf16x2(o[e] * inv[r], o[e + 1] * inv[r]);
    }
    NamedBarrierSync<C::kConsumerThreads / 2>(kStaged0 + kG);
    constexpr int kRowChunks = C::kHalfDims / 8;
    const int tid = static_cast<int>(threadIdx.x) % 128;
    for (int c = tid; c < rows_here * kRowChunks; c += 128) {
      const int row = c / kRowChunks;
      const int col = kG * C::kHalfDims + (c % kRowChunks) * 8;
      *reinterpret_cast<uint4*>(out.latent + (out_row0 + row) * kLora + col) =
          *reinterpret_cast<const uint4*>(stage + row * C::kStageLd + col);
    }
  }
};

}  // namespace seesaw
#endif  // DSA_GPU_CUDA

#if defined(DSA_GPU_CUDA)
namespace seesaw {

// One block of the body (kCrossover: one of the cluster's two, whose
// producers share each tile's dequantisation).
template <bool kFp8, Fp8Format F, bool kCrossover>
__device__ __forceinline__ void RunBlock(const SparseMlaParams& p,
                                         int64_t token_begin,
                                         const MmaOutput& out) {
  extern __shared__ __align__(1024) uint8_t smem[];
  // Swizzle atoms must start 1024-byte aligned.
  if ((SharedAddress(smem) & 1023u) != 0u) __trap();
  Block<kFp8, kCrossover> block(p, *reinterpret_cast<SharedMemory*>(smem),
                                token_begin, out.splits);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  // Through a shuffle: a value the compiler knows is warp-uniform, so a
  // branch on it around wgmma is not serialised.
  const int role = __shfl_sync(0xffffffffu, warp / 4, 0);
  if (threadIdx.x == 0) block.InitBarriers();
  __syncthreads();
  // The peer's barriers are initialised before any store or arrival on
  // them.
  if constexpr (kCrossover) ClusterSync();
  // Q's copies and pair 0's offsets first, while the consumers count the
  // row's tiles.
  int64_t off[2][C::kRowsPerThread];
  typename Producer<kFp8, F, kCrossover>::HalfPair half;
  if (role == 2) {
    Producer<kFp8, F, kCrossover> producer(block);
    producer.LoadQ();
    if constexpr (kCrossover) {
      producer.ResolveHalf(0, half);
    } else {
      producer.Resolve(0, off);
    }
  }
  const int pairs = (block.CountTiles() + 1) / 2;
  if (role == 2) {
    WarpgroupRegsDecrease<kFp8 ? C::kFp8ProducerRegs : C::kProducerRegs>();
    if constexpr (kCrossover) {
      Producer<kFp8, F, kCrossover>(block).RunCrossover(pairs, half);
    } else {
      Producer<kFp8, F, kCrossover>(block).Run(pairs, off);
    }
  } else {
    WarpgroupRegsIncrease<kFp8 ? C::kFp8ConsumerRegs : C::kConsumerRegs>();
    MbarWait(block.Addr(&block.s.q_ready), 0);
    ::dsa::gpu::WarpgroupBf16Mma<64>::FenceStores();
    if (role == 0) {
      Consumer<0, kFp8, kCrossover> consumer(block);
      consumer.Run0(pairs);
      consumer.StoreOutput(token_begin, out);
    } else {
      Consumer<1, kFp8, kCrossover> consumer(block);
      consumer.Run1(pairs);
      consumer.StoreOutput(token_begin, out);
    }
  }
  // The consumers' last arrivals on the peer's barriers land before either
  // block exits.
  if constexpr (kCrossover) ClusterSync();
}

}  // namespace seesaw
#endif  // DSA_GPU_CUDA

// Grid: (ceil(heads / 64), rows, splits), 384 threads: a row's head groups
// neighbours in the launch order (as FlashMLA's), so that they gather the
// same cache rows at about the same time. Chosen by the
// heuristics only for sm_90a device code; elsewhere the kernel traps.
template <bool kFp8, Fp8Format F>
__global__ void __launch_bounds__(seesaw::Config::kThreads, 1)
    SparseMlaSeesawKernel(SparseMlaParams p, int64_t token_begin,
                          MmaOutput out) {
#if defined(DSA_GPU_CUDA)
  if constexpr (!::dsa::gpu::kHasWarpgroupBf16Mma) {
    __trap();
  } else {
    seesaw::RunBlock<kFp8, F, false>(p, token_begin, out);
  }
#endif
}

// The fp8 crossover (FlashMLA's sm_90 sparse fp8 decode at 128 heads): the
// same grid, an even number of head groups, each two neighbours (a row's
// head groups 2 c and 2 c + 1) one cluster whose producers dequantise half
// of every tile each into both blocks' shared memory.
#if defined(DSA_GPU_CUDA)
#define DSA_SPARSE_MLA_CLUSTER_OF_TWO __cluster_dims__(2, 1, 1)
#else
#define DSA_SPARSE_MLA_CLUSTER_OF_TWO
#endif
template <Fp8Format F>
__global__ void __launch_bounds__(seesaw::Config::kThreads,
                                  1) DSA_SPARSE_MLA_CLUSTER_OF_TWO
    SparseMlaSeesawCrossoverKernel(SparseMlaParams p, int64_t token_begin,
                                   MmaOutput out) {
#if defined(DSA_GPU_CUDA)
  if constexpr (!::dsa::gpu::kHasWarpgroupBf16Mma) {
    __trap();
  } else {
    seesaw::RunBlock<true, F, true>(p, token_begin, out);
  }
#endif
}
#undef DSA_SPARSE_MLA_CLUSTER_OF_TWO

template <bool kFp8, Fp8Format F, bool kCrossover>
LaunchResult LaunchSeesawBody(const SparseMlaParams& p, int64_t begin,
                              int64_t rows, const MmaOutput& out, int device,
                              hipStream_t stream) {
  static_assert(kFp8 || !kCrossover, "the crossover reads an fp8 cache");
  using C = seesaw::Config;
  constexpr int kBytes = sizeof(seesaw::SharedMemory);
  constexpr auto kernel = [] {
    if constexpr (kCrossover) {
      return &SparseMlaSeesawCrossoverKernel<F>;
    } else {
      return &SparseMlaSeesawKernel<kFp8, F>;
    }
  }();
  const LaunchResult r = OptInSharedMemory<kernel, kBytes>(
      device, "sparse_mla: shared memory opt-in");
  if (!r.ok()) return r;
  const unsigned groups =
      static_cast<unsigned>((p.heads + C::kHeads - 1) / C::kHeads);
  if (kCrossover && groups % 2 != 0) {
    return Invalid(kOp,
                   "sparse_mla: the crossover needs an even number of "
                   "head groups of %d, got %d heads",
                   C::kHeads, p.heads);
  }
  const dim3 grid(groups, static_cast<unsigned>(rows),
                  static_cast<unsigned>(out.splits));
  hipLaunchKernelGGL(kernel, grid, dim3(C::kThreads), kBytes, stream, p, begin,
                     out);
  return CheckLaunch(kOp);
}

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_SEESAW_BODY_H_
