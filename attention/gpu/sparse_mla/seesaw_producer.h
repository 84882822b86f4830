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

  // fp8: the entries of a pair are resolved a lane each. Lane l of producer
  // warp w resolves row 16 ((l / 4) % 4) + 4 w + l % 4 of the pair's tile
  // l / 16: the rows of the warp's four row groups, so that the thread of
  // row group 4 w + g finds its row r of tile b at lane 16 b + 4 r + g
  // (TileOffsets). One index and one block-table load a lane a pair, where
  // each of a row's 8 threads made all of them.
  __device__ __forceinline__ int LanePosition(int i) const {
    const int lane = tid % 32;
    const int row = ((lane / 4) % 4) * (C::kProducerThreads / C::kRowThreads) +
                    4 * (tid / 32) + lane % 4;
    return blk.range.begin + (2 * i + lane / 16) * C::kKeys + row;
  }
  // This lane's top-k index of pair i (-1 past the split).
  __device__ __forceinline__ int32_t LaneIndex(int i) const {
    const int pos = LanePosition(i);
    return pos < blk.range.end ? __ldg(blk.row_idx + pos) : -1;
  }
  // This lane's entry of pair i: its cache offset, -1 for none.
  __device__ __forceinline__ int64_t ResolveLane(int i) const {
    return EntryOffset(blk.p, blk.rr, LaneIndex(i));
  }
  // This thread's rows of tile b of the pair whose entries the warp's lanes
  // hold in `lane_off` (kRowsPerThread rows, from row r0).
  template <int kRows = C::kRowsPerThread>
  __device__ __forceinline__ void TileOffsets(int64_t lane_off, int b, int r0,
                                              int64_t (&off)[kRows]) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      off[r] = __shfl_sync(0xffffffffu, lane_off,
                           16 * b + 4 * (r0 + r) + GroupInWarp());
    }
  }
  // This thread's row group's place among its warp's four.
  __device__ __forceinline__ int GroupInWarp() const { return (tid % 32) / 8; }
  // This lane's entry fetched into L2 whole (one bulk prefetch), a pair
  // ahead of its loads.
  __device__ __forceinline__ void PrefetchLane(int64_t lane_off) const {
    if (lane_off < 0) return;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(
                     blk.p.kv_cache + lane_off),
                 "n"(kFp8EntryBytes)
                 : "memory");
  }

  // fp8: codes of atoms [kA0, kA0 + 4) (dims 64 kA0 .. 64 kA0 + 255) and
  // their tiles' scales, for kRows of this thread's rows (zeros for rows
  // that are not valid keys): 16-byte loads, load j of a row (j = 0, 1)
  // being 16 codes of atom kA0 + chunk / 4 + 2 j (scale j of the two),
  // chunks 2 (chunk % 4) and 2 (chunk % 4) + 1 of it, so that a row's 8
  // threads read its 256 codes as one contiguous run a load.
  template <int kA0, int kRows = C::kRowsPerThread>
  struct Codes {
    uint4 c[kRows][2];
    float scale[kRows][2];
  };
  __device__ __forceinline__ int CodeAtom(int j) const {
    return chunk / 4 + 2 * j;
  }
  template <int kA0, int kRows>
  __device__ __forceinline__ void LoadCodes(const int64_t (&off)[kRows],
                                            Codes<kA0, kRows>& k) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        k.c[r][j] = make_uint4(0u, 0u, 0u, 0u);
        k.scale[r][j] = 0.0f;
      }
      if (off[r] < 0) continue;
      const uint8_t* src = blk.p.kv_cache + off[r];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        k.c[r][j] = __ldg(reinterpret_cast<const uint4*>(
            src + (kA0 + CodeAtom(j)) * 64 + (chunk % 4) * 16));
      }
      const float2 both =
          __ldg(reinterpret_cast<const float2*>(src + kLora + 4 * (kA0 / 2)));
      k.scale[r][0] = both.x;
      k.scale[r][1] = both.y;
    }
  }
  // Which conversion a thread's codes take: Fp8Bf16Form where its scales
  // are bf16 and in range (the cache writer's ue8m0 scales) and its codes
  // hold no NaN, else Fp8Fast where the scales fold, else Fp8PairToBf16.
  enum class Form { kBf16, kFast, kGeneral };
  template <int kA0, int kRows>
  __device__ __forceinline__ static Form FormOf(const Codes<kA0, kRows>& k) {
    using Fast = Fp8Fast<F>;
    bool bf16 = true, fast = true;
    uint32_t nan = 0;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        bf16 = bf16 & Fp8Bf16Form<F>::Folds(k.scale[r][j]);
        fast = fast & Fast::Folds(k.scale[r][j]);
        nan |= Fast::NanBytes(k.c[r][j].x) | Fast::NanBytes(k.c[r][j].y) |
               Fast::NanBytes(k.c[r][j].z) | Fast::NanBytes(k.c[r][j].w);
      }
    }
    if (nan != 0) return Form::kGeneral;
    return bf16 ? Form::kBf16 : fast ? Form::kFast : Form::kGeneral;
  }
  // Sixteen codes times their scale as sixteen bf16 (two 16-byte chunks).
  template <Form kForm>
  __device__ __forceinline__ static void ToBf16x16(const uint4& w, float scale,
                                                   uint4 (&out)[2]) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    uint32_t v[8];
    if constexpr (kForm == Form::kBf16) {
      using B = Fp8Bf16Form<F>;
      const uint32_t folded = B::Fold(scale);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        v[2 * k] = B::template Pair<0>(words[k], folded);
        v[2 * k + 1] = B::template Pair<1>(words[k], folded);
      }
    } else if constexpr (kForm == Form::kFast) {
      using Fast = Fp8Fast<F>;
      const float folded = Fast::Fold(scale);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        v[2 * k] = Fast::template Pair<0>(words[k], folded);
        v[2 * k + 1] = Fast::template Pair<1>(words[k], folded);
      }
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        v[2 * k] = Fp8PairToBf16<F>(words[k], scale);
        v[2 * k + 1] = Fp8PairToBf16<F>(words[k] >> 16, scale);
      }
    }
    out[0] = make_uint4(v[0], v[1], v[2], v[3]);
    out[1] = make_uint4(v[4], v[5], v[6], v[7]);
  }
  // The byte offset, in a buffer, of chunk `half` (0, 1) of the two that
  // a load of atom a's codes writes for tile row `row`.
  __device__ __forceinline__ uint32_t CodeChunkOffset(int row, int a,
                                                      int half) const {
    return a * C::kAtomBytes + ChunkOffset(row, 2 * (chunk % 4) + half);
  }
  // fp8: those codes times their scales, as bf16, into buffer b at tile
  // rows row(r) (ordinary stores, fenced for the products' reads; `peer`:
  // also into the peer's buffer by st.async, completing on `peer_ready`).
  template <bool kPeer, int kA0, int kRows, typename RowOf>
  __device__ __forceinline__ void StoreCodes(int b, const Codes<kA0, kRows>& k,
                                             RowOf row_of,
                                             uint32_t peer_ready = 0) {
    const Form form = FormOf(k);
    // Each form inline: the general one out of line measured 1.85x slower
    // on the H200 (its codes passed through the stack).
    if (form == Form::kBf16) {
      StoreCodesAs<Form::kBf16, kPeer>(b, k, row_of, peer_ready);
    } else if (form == Form::kFast) {
      StoreCodesAs<Form::kFast, kPeer>(b, k, row_of, peer_ready);
    } else {
      StoreCodesAs<Form::kGeneral, kPeer>(b, k, row_of, peer_ready);
    }
  }
  template <Form kForm, bool kPeer, int kA0, int kRows, typename RowOf>
  __device__ __forceinline__ void StoreCodesAs(int b,
                                               const Codes<kA0, kRows>& k,
                                               RowOf row_of,
                                               uint32_t peer_ready) {
    uint8_t* keys = blk.s.keys[b];
    const uint32_t peer_keys = kPeer ? blk.Peer(blk.KeysAddr(b)) : 0;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = row_of(r);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        uint4 v[2];
        ToBf16x16<kForm>(k.c[r][j], k.scale[r][j], v);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t at = CodeChunkOffset(row, kA0 + CodeAtom(j), h);
          *reinterpret_cast<uint4*>(keys + at) = v[h];
          if constexpr (kPeer) StoreToPeer(peer_keys + at, v[h], peer_ready);
        }
      }
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
  // barrier of the buffer's first part: from this thread's rows' offsets
  // (a bf16 cache), or from the warp's lanes' entries of the pair (fp8,
  // ResolveLane: every row of the tile, the crossover's peer's half too).
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
  __device__ __forceinline__ void PublishValidLanes(int b, int64_t lane_off) {
    const uint32_t valid = __ballot_sync(0xffffffffu, lane_off >= 0);
    if (chunk != 0) return;
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      blk.s.valid[b][r * (C::kProducerThreads / C::kRowThreads) + row_group] =
          (valid >> (16 * b + 4 * r + GroupInWarp())) & 1u;
    }
    MbarArrive(blk.KeysReady(b, Block<kFp8, kCrossover>::FirstPart(b)));
  }

  // kCrossover: this block's rows of each tile are 32 rank + 16 j +
  // row_group (j = 0, 1: the thread's rows r = 2 rank + j), the peer's the
  // other 32. Part `part` of buffer b, atoms from kA0 (the second part with
  // the rope: this thread's 16 bytes of it for each row): this block's
  // half loaded before the part's wait, dequantised into both blocks'
  // buffers after it (ordinary stores here, fenced for the products'
  // reads, then this thread's arrival on the part's barrier, one thread's
  // also expecting the peer's stores into this block; stores that complete
  // on the peer's barrier there). A part is free once both blocks'
  // consumers are done with it (the peer's arrivals acquired at cluster
  // scope).
  template <int kA0>
  __device__ __forceinline__ void HalfPart(int b, int64_t lane_off,
                                           uint32_t parity) {
    constexpr int kPart = kA0 == 0 ? 0 : 1;
    const int r0 = 2 * static_cast<int>(blk.rank);
    int64_t off[2];
    TileOffsets<2>(lane_off, b, r0, off);
    Codes<kA0, 2> k;
    LoadCodes(off, k);
    uint4 rope[2];
    if constexpr (kA0 != 0) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        rope[j] = off[j] < 0 ? make_uint4(0u, 0u, 0u, 0u)
                             : __ldg(reinterpret_cast<const uint4*>(
                                   blk.p.kv_cache + off[j] + kLora +
                                   4 * kFp8Tiles + chunk * 16));
      }
    }
    MbarWaitCluster(blk.KeysFree(b, kPart), parity);
    const uint32_t peer_ready = blk.Peer(blk.KeysReady(b, kPart));
    const auto row_of = [&](int j) {
      return (r0 + j) * (C::kProducerThreads / C::kRowThreads) + row_group;
    };
    StoreCodes<true>(b, k, row_of, peer_ready);
    if constexpr (kA0 != 0) {
      uint8_t* keys = blk.s.keys[b];
      const uint32_t peer_keys = blk.Peer(blk.KeysAddr(b));
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t at = 8 * C::kAtomBytes + ChunkOffset(row_of(j), chunk);
        *reinterpret_cast<uint4*>(keys + at) = rope[j];
        StoreToPeer(peer_keys + at, rope[j], peer_ready);
      }
    }
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

  // fp8, every pair in the order of Run, a part at a time: its codes
  // loaded before the part's wait, dequantised into the buffer after it
  // (Fp8Part; kCrossover: HalfPart, this block's half into both blocks);
  // this lane's entries a pair and two ahead resolved meanwhile (pair
  // i + 2's index loaded before pair i's first part, its block-table entry
  // after the second, checked only at the pair's end: EntryBlock,
  // EntryOffsetOf). `own`: this lane's entry of pair 0 (ResolveLane before the
  // tiles are counted). kCrossover: this block's rows of pair i + 1 also
  // fetched into L2 whole once pair i's are loaded (PrefetchLane: the lanes
  // of this block's rows).
  //
  // Measured on the H200 (RESULTS.md, "... lane-resolved entries"): the
  // prefetch 1-1.5 % faster in the crossover, 3 % slower at one head group,
  // which has none. Loading the next part before this part's stores
  // measured slower everywhere: in the crossover 1-2 % within a pair
  // (10-20 % across pairs too, 108 bytes spilled), at one head group 40 %
  // with each of a row's next loads just before the same load of this part
  // converts (84 bytes spilled).
  __device__ __forceinline__ void RunFp8(int pairs, int64_t own) {
    static_assert(C::kFirstPartAtoms == 4 && C::kAtoms == 9,
                  "parts: atoms 0-3, then 4-7 and the rope");
    static_assert(2 * (C::kProducerThreads / C::kRowThreads) == C::kKeys / 2,
                  "two rows a thread of each crossover block's half");
    static_assert(
        C::kProducerThreads / C::kRowThreads == 16 && C::kRowsPerThread == 4,
        "a warp's 32 lanes resolve its 4 row groups' rows of a pair");
    constexpr int kSplit = C::kFirstPartAtoms;
    if (pairs == 0) return;
    const uint64_t policy = L2EvictLastPolicy();
    int64_t next = pairs > 1 ? ResolveLane(1) : -1;
    if constexpr (kCrossover) {
      const bool prefetches =
          ((tid % 32) / 4) % 4 / 2 == static_cast<int>(blk.rank);
      if (prefetches) {
        PrefetchLane(own);
        PrefetchLane(next);
      }
      for (int i = 0; i < pairs; ++i) {
        const uint32_t parity = (i & 1) ^ 1;
        const int32_t idx2 = i + 2 < pairs ? LaneIndex(i + 2) : -1;
        HalfPart<0>(0, own, parity);
        PublishValidLanes(0, own);
        HalfPart<kSplit>(1, own, parity);
        PublishValidLanes(1, own);
        const int32_t block2 = EntryBlock(blk.p, blk.rr, idx2);
        HalfPart<kSplit>(0, own, parity);
        HalfPart<0>(1, own, parity);
        own = next;
        next = EntryOffsetOf(blk.p, blk.rr, idx2, block2);
        if (prefetches) PrefetchLane(next);
      }
    } else {
      for (int i = 0; i < pairs; ++i) {
        const uint32_t parity = (i & 1) ^ 1;
        const int32_t idx2 = i + 2 < pairs ? LaneIndex(i + 2) : -1;
        Fp8Part<0>(0, 0, own, parity, policy);
        PublishValidLanes(0, own);
        Fp8Part<kSplit>(1, 1, own, parity, policy);
        PublishValidLanes(1, own);
        const int32_t block2 = EntryBlock(blk.p, blk.rr, idx2);
        Fp8Part<kSplit>(0, 1, own, parity, policy);
        Fp8Part<0>(1, 0, own, parity, policy);
        own = next;
        next = EntryOffsetOf(blk.p, blk.rr, idx2, block2);
      }
    }
  }

  // Every pair: each part once its buffer is free, in the order the
  // consumers need them (tile 2 i's first part, 2 i + 1's first part, then
  // the second parts); the next pair's offsets resolved while the
  // consumers work. `off`: pair 0's (Resolve before the tiles are counted).
  // A bf16 cache: 16-byte cp.async straight into the buffers.
  __device__ __forceinline__ void Run(int pairs,
                                      int64_t (&off)[2][C::kRowsPerThread]) {
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
  // part; else the second, with the rope): this thread's rows' offsets from
  // the warp's lanes, their codes loaded before the buffer's wait,
  // dequantised into it after, then announced (the second part's rope by
  // its copies' arrival as well).
  template <int kA0>
  __device__ __forceinline__ void Fp8Part(int b, int part, int64_t lane_off,
                                          uint32_t parity, uint64_t policy) {
    int64_t off[C::kRowsPerThread];
    TileOffsets(lane_off, b, 0, off);
    Codes<kA0> k;
    LoadCodes(off, k);
    MbarWait(blk.KeysFree(b, part), parity);
    if constexpr (kA0 != 0) {
      CopyRope(b, off, policy);
      CopyAsyncArriveOnMbar(blk.KeysReady(b, part));
    }
    StoreCodes<false>(b, k, [&](int r) {
      return r * (C::kProducerThreads / C::kRowThreads) + row_group;
    });
    ::dsa::gpu::WarpgroupBf16Mma<64>::FenceStores();
    MbarArrive(blk.KeysReady(b, part));
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
