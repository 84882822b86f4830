// The sparse MLA's sm_90a warpgroup body (wgmma, HGMMA in SASS), for 64 or
// more heads: one block of two warpgroups per (query row, 64 heads, top-k
// split). Q, two 64-key tiles and P sit in shared memory in the 128-byte
// swizzled layout (config.h: warpgroup::SharedMemory), one tile serving as
// the K-major B of S and the MN-major B of P V. Roles: warp 0 compacts the
// row's valid indices into tiles of cache offsets (tile t + 2's while tile t
// computes), every thread gathers (cp.async) the next tile, warpgroup 0
// computes S = Q K^T (m64n64) and the online softmax and hands each row's
// rescale factor to warpgroup 1 with P, and warpgroup g computes O_g += P V_g
// over dims [256 g, 256 g + 256) (m64n256). The steps of a tile:
// IssueScores, GatherTile and CompactIndices while S runs, SoftmaxTile,
// RescaleOutput, IssueValues; then StoreOutput. An fp8_ds_mla cache (the
// comparison variant, SparseMlaParams::fp8_cache_on_warpgroup) has its codes
// dequantised through registers into the bf16 tile (DequantTileHalf) while
// the products run. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_WARPGROUP_BODY_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_WARPGROUP_BODY_H_

#include <cstdint>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/softmax.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/kernels.h"
#include "attention/gpu/sparse_mla/row_access.h"

namespace dsa::attention::gpu::sparse_mla {

#if defined(DSA_GPU_CUDA)
namespace warpgroup {

template <bool kFp8, Fp8Format F>
struct Body {
  using C = Config;
  using WgS = ::dsa::gpu::WarpgroupBf16Mma<C::kKeys>;      // S: m64n64
  using WgO = ::dsa::gpu::WarpgroupBf16Mma<C::kHalfDims>;  // P V: m64n256
  using Softmax = OnlineSoftmax<2, QuadRowReduce>;  // rows row0, row0 + 8
  using Scores = float[WgS::kAccPerThread];
  using Output = float[WgO::kAccPerThread];

  const SparseMlaParams& p;
  SharedMemory& s;
  const int64_t t;  // the query row
  const int h0;     // its first head
  const int tid, lane, warp;
  const int group;  // the warpgroup
  const int row0;   // this thread's accumulator rows: row0 and row0 + 8
  const RowRequest rr;
  const int32_t* const row_idx;
  const SplitRange range;
  const float scale_log2;
  int cursor;  // warp 0: the next top-k index to compact

  __device__ __forceinline__ Body(const SparseMlaParams& params,
                                  SharedMemory& smem, int64_t token_begin,
                                  int splits)
      : p(params),
        s(smem),
        t(token_begin + blockIdx.x),
        h0(blockIdx.y * C::kHeads),
        tid(threadIdx.x),
        lane(threadIdx.x % 32),
        warp(threadIdx.x / 32),
        // Through a shuffle: a value the compiler knows is warp-uniform, so
        // a branch on it around wgmma is not serialised.
        group(__shfl_sync(0xffffffffu, warp / 4, 0)),
        row0(16 * (warp % 4) + lane / 4),
        rr(LoadRowRequest(params, t)),
        row_idx(params.topk_indices + t * params.topk_stride),
        range(BlockSplitRange(params.topk, splits)),
        scale_log2(params.softmax_scale * kLog2e),
        cursor(range.begin) {}

  __device__ __forceinline__ bool IsIndexWarp() const { return warp == 0; }
  __device__ __forceinline__ bool IsScoreGroup() const { return group == 0; }

  // Byte offset of 16-byte chunk c (dims 8c .. 8c + 7) of row r (a key or a
  // head) in a key tile or Q; of P's element (row, key k).
  __device__ __forceinline__ static uint32_t TileOffset(int r, int c) {
    return (c / 8) * C::kAtomBytes + r * 128 + (((c % 8) ^ (r % 8)) * 16);
  }
  __device__ __forceinline__ static uint32_t POffset(int row, int k) {
    return row * 128 + (((k / 8) ^ (row % 8)) * 16) + (k % 8) * 2;
  }

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

  // Warpgroup 0: S = Q K^T over tile j's 64 keys (36 k-steps).
  __device__ __forceinline__ void IssueScores(int j, Scores& sc) {
    WgS::template IssueSw128<kDim>(sc, s.q, C::kAtomBytes, s.keys[j % 2],
                                   C::kAtomBytes, false);
  }

  // Warpgroup 0, once S is in: scores scaled into the log2 domain (invalid
  // keys -inf), the online softmax's update (alpha: the rows' rescale
  // factors), P (bf16) into s.p.
  __device__ __forceinline__ void SoftmaxTile(int j, Scores& sc,
                                              Softmax& softmax,
                                              float (&alpha)[2]) {
    const int64_t* offs = s.slots[j % C::kSlots];
    float mx[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int i = 0; i < WgS::kAccPerThread; ++i) {
      const int key = WgS::AccCol(lane, i);
      sc[i] = offs[key] >= 0 ? sc[i] * scale_log2 : kNegInf;
      mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], sc[i]);
    }
    float base[2];
    softmax.Update(mx, base, alpha);
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < WgS::kAccPerThread; i += 2) {
      const int r = (i / 2) % 2;
      const uint32_t pair = ::dsa::gpu::PackBf16x2(exp2f(sc[i] - base[r]),
                                                   exp2f(sc[i + 1] - base[r]));
      // The sum uses the rounded probabilities, the ones P V multiplies.
      sum[r] +=
          __uint_as_float(pair << 16) + __uint_as_float(pair & 0xffff0000u);
      const int k = WgS::AccCol(lane, i);
      *reinterpret_cast<uint32_t*>(s.p + POffset(row0 + 8 * r, k)) = pair;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) softmax.row_sum[r] += sum[r];
  }

  // O *= alpha; most tiles leave every row maximum as it was (alpha exactly
  // 1) and skip it.
  __device__ __forceinline__ static void RescaleOutput(
      Output& o, const float (&alpha)[2]) {
    if (alpha[0] != 1.0f || alpha[1] != 1.0f) {
#pragma unroll
      for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] *= alpha[(e / 2) % 2];
    }
  }

  // Warpgroup g: O_g += P V_g, V_g the tile's dims [256 g, 256 g + 256)
  // (64-dim atoms 4 g on), read MN-major from the key tile.
  __device__ __forceinline__ void IssueValues(int j, Output& o) {
    WgO::template IssueSw128MnB<C::kKeys>(
        o, s.p, C::kAtomBytes,
        s.keys[j % 2] + group * (C::kHalfDims / 64) * C::kAtomBytes,
        C::kAtomBytes, true);
  }

  // Normalises O by the row sums (a row without a valid key outputs zeros)
  // and stores it: fp32 straight to the split's part (and warpgroup 0 the
  // log2-sum-exp), or bf16 staged through the free key buffers as whole
  // 16-byte chunks.
  __device__ __forceinline__ void StoreOutput(const Output& o,
                                              const Softmax& softmax,
                                              int64_t token_begin,
                                              const MmaOutput& out) {
    // Row sums: warpgroup 0 (which holds every key's probability) sums its
    // quads and publishes them.
    if (IsScoreGroup()) {
      float l_quad[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        l_quad[r] = QuadRowReduce::Sum(softmax.row_sum[r]);
      }
      if (lane % 4 == 0) {
        s.rows[row0] = l_quad[0];
        s.rows[row0 + 8] = l_quad[1];
      }
    }
    __syncthreads();
    float l_total[2], inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_total[r] = s.rows[row0 + 8 * r];
      inv[r] = l_total[r] > 0.0f ? 1.0f / l_total[r] : 0.0f;
    }
    const int rows_here = p.heads - h0 < C::kHeads ? p.heads - h0 : C::kHeads;
    const int64_t out_row0 = BlockOutputRow(p, t, token_begin, h0);
    if (out.part_o != nullptr) {  // a split of few rows: fp32, direct
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 8 * r;
        if (row >= rows_here) continue;
        if (lane % 4 == 0 && IsScoreGroup()) {
          out.part_lse[out_row0 + row] =
              l_total[r] > 0.0f ? softmax.row_max[r] + __log2f(l_total[r])
                                : kNegInf;
        }
        float* dst =
            out.part_o + (out_row0 + row) * kLora + group * C::kHalfDims;
#pragma unroll
        for (int e = 2 * r; e < WgO::kAccPerThread; e += 4) {
          const int col = WgO::AccCol(lane, e);
          *reinterpret_cast<float2*>(dst + col) =
              make_float2(o[e] * inv[r], o[e + 1] * inv[r]);
        }
      }
      return;
    }
    uint16_t* stage = reinterpret_cast<uint16_t*>(s.keys);
#pragma unroll
    for (int e = 0; e < WgO::kAccPerThread; e += 2) {
      const int r = (e / 2) % 2;
      const int row = row0 + 8 * r;
      const int col = group * C::kHalfDims + WgO::AccCol(lane, e);
      *reinterpret_cast<uint32_t*>(stage + row * C::kStageLd + col) =
          ::dsa::gpu::PackBf16x2(o[e] * inv[r], o[e + 1] * inv[r]);
    }
    __syncthreads();
    constexpr int kRowChunks = kLora / 8;
    for (int c = tid; c < rows_here * kRowChunks; c += C::kThreads) {
      const int row = c / kRowChunks, part = c % kRowChunks;
      *reinterpret_cast<uint4*>(out.latent + (out_row0 + row) * kLora +
                                part * 8) =
          *reinterpret_cast<const uint4*>(stage + row * C::kStageLd + part * 8);
    }
  }

  __device__ __forceinline__ void Run(int64_t token_begin,
                                      const MmaOutput& out) {
    // Prologue: tiles 0 and 1's offsets, Q, tile 0.
    if (IsIndexWarp()) {
      CompactIndices(0);
      CompactIndices(1);
    }
    LoadQ();
    __syncthreads();  // slots 0 and 1 written
    GatherTile(0);
    DequantTileHalf(0, 0);
    DequantTileHalf(0, 1);
    CopyAsyncWaitAll();
    WgO::FenceStores();
    // The loop's condition comes out of a barrier reduction, so the compiler
    // sees it block-uniform (wgmma under a condition it cannot prove
    // uniform is serialised).
    bool more = __syncthreads_or(tid == 0 && s.counts[0] > 0);

    Output o;
#pragma unroll
    for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] = 0.0f;
    Softmax softmax;
    softmax.Init();
    for (int j = 0; more; ++j) {
      Scores sc;
      float alpha[2];
      if (IsScoreGroup()) IssueScores(j, sc);
      // While S runs: tile j + 1's gather (all zeros, without reads, past
      // the row's last key), tile j + 2's offsets, half of tile j + 1's
      // dequantisation.
      GatherTile(j + 1);
      if (IsIndexWarp()) CompactIndices(j + 2);
      DequantTileHalf(j + 1, 0);
      if (IsScoreGroup()) {
        WgS::Wait(sc);
        SoftmaxTile(j, sc, softmax, alpha);
        if (lane % 4 == 0) {  // the factors, for warpgroup 1
          s.rows[row0] = alpha[0];
          s.rows[row0 + 8] = alpha[1];
        }
      }
      WgO::FenceStores();
      __syncthreads();  // P complete, and warpgroup 0's factors
      if (!IsScoreGroup()) {
        alpha[0] = s.rows[row0];
        alpha[1] = s.rows[row0 + 8];
      }
      RescaleOutput(o, alpha);
      IssueValues(j, o);
      DequantTileHalf(j + 1, 1);
      WgO::Wait(o);
      CopyAsyncWaitAll();
      WgO::FenceStores();
      // Tile j + 1 in; tile j, P and the factors free.
      more = __syncthreads_or(tid == 0 && s.counts[(j + 1) % C::kSlots] > 0);
    }
    StoreOutput(o, softmax, token_begin, out);
  }
};

}  // namespace warpgroup
#endif  // DSA_GPU_CUDA

// Grid: (rows, ceil(heads / 64), splits). Chosen by the heuristics only for
// sm_90a device code; elsewhere the kernel traps.
template <bool kFp8, Fp8Format F>
__global__ void __launch_bounds__(warpgroup::Config::kThreads, 1)
    SparseMlaWgmmaKernel(SparseMlaParams p, int64_t token_begin,
                         MmaOutput out) {
#if defined(DSA_GPU_CUDA)
  if constexpr (!::dsa::gpu::kHasWarpgroupBf16Mma) {
    __trap();
  } else {
    extern __shared__ __align__(16) uint8_t smem[];
    // Swizzle atoms must start 1024-byte aligned.
    if ((static_cast<uint32_t>(__cvta_generic_to_shared(smem)) & 1023u) != 0u) {
      __trap();
    }
    warpgroup::Body<kFp8, F> body(
        p, *reinterpret_cast<warpgroup::SharedMemory*>(smem), token_begin,
        out.splits);
    body.Run(token_begin, out);
  }
#endif
}

template <bool kFp8, Fp8Format F>
LaunchResult LaunchWarpgroupBody(const SparseMlaParams& p, int64_t begin,
                                 int64_t rows, const MmaOutput& out,
                                 hipStream_t stream) {
  using C = warpgroup::Config;
  constexpr int kBytes = sizeof(warpgroup::SharedMemory);
  constexpr auto kernel = &SparseMlaWgmmaKernel<kFp8, F>;
  const LaunchResult r =
      OptInSharedMemory<kernel, kBytes>("sparse_mla: shared memory opt-in");
  if (!r.ok()) return r;
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((p.heads + C::kHeads - 1) / C::kHeads),
                  static_cast<unsigned>(out.splits));
  hipLaunchKernelGGL(kernel, grid, dim3(C::kThreads), kBytes, stream, p, begin,
                     out);
  return CheckLaunch(kOp);
}

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_WARPGROUP_BODY_H_
