// The sparse MLA's sm_90a warpgroup body (wgmma, HGMMA in SASS), for 64 or
// more heads: one block of two warpgroups per (query row, 64 heads, top-k
// split). Q, two 64-key tiles and P sit in shared memory in the 128-byte
// swizzled layout (config.h: warpgroup::SharedMemory), one tile serving as
// the K-major B of S and the MN-major B of P V. Roles: the loads
// (warpgroup_loads.h: warp 0 compacts the row's valid indices two tiles
// ahead, every thread gathers the next tile); warpgroup 0 computes
// S = Q K^T (m64n64) and the online softmax and hands each row's rescale
// factor to warpgroup 1 with P; warpgroup g computes O_g += P V_g over dims
// [256 g, 256 g + 256) (m64n256). A tile: IssueScores, the next tile's
// loads while S runs, SoftmaxTile, RescaleOutput, IssueValues; then
// StoreOutput. It runs only an fp8_ds_mla cache (the comparison variant,
// SparseMlaParams::fp8_cache_on_warpgroup), dequantised through registers
// into the bf16 tile while the products run; a bf16 cache runs on the
// seesaw body (seesaw_body.h), which measured 2.4x faster (its instance
// here is deleted: testing/bench/RESULTS.md, "Sparse MLA prefill: the
// seesaw body"). Device-compiler sources only.
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
#include "attention/gpu/sparse_mla/warpgroup_loads.h"

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

  TileLoads<kFp8, F> loads;  // the tiles' role (every thread; warp 0 the
                             // index compaction)
  const SparseMlaParams& p;
  SharedMemory& s;
  const int64_t t;  // the query row
  const int h0;     // its first head
  const int tid, lane, warp;
  const int group;  // the warpgroup
  const int row0;   // this thread's accumulator rows: row0 and row0 + 8
  const float scale_log2;

  __device__ __forceinline__ Body(const SparseMlaParams& params,
                                  SharedMemory& smem, int64_t token_begin,
                                  int splits)
      : loads(params, smem, token_begin + blockIdx.x, splits),
        p(params),
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
        scale_log2(params.softmax_scale * kLog2e) {}

  __device__ __forceinline__ bool IsIndexWarp() const { return warp == 0; }
  __device__ __forceinline__ bool IsScoreGroup() const { return group == 0; }

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
      loads.CompactIndices(0);
      loads.CompactIndices(1);
    }
    loads.LoadQ();
    __syncthreads();  // slots 0 and 1 written
    loads.GatherTile(0);
    loads.DequantTileHalf(0, 0);
    loads.DequantTileHalf(0, 1);
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
      loads.GatherTile(j + 1);
      if (IsIndexWarp()) loads.CompactIndices(j + 2);
      loads.DequantTileHalf(j + 1, 0);
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
      loads.DequantTileHalf(j + 1, 1);
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
                                 int64_t rows, const MmaOutput& out, int device,
                                 hipStream_t stream) {
  using C = warpgroup::Config;
  constexpr int kBytes = sizeof(warpgroup::SharedMemory);
  constexpr auto kernel = &SparseMlaWgmmaKernel<kFp8, F>;
  const LaunchResult r = OptInSharedMemory<kernel, kBytes>(
      device, "sparse_mla: shared memory opt-in");
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
