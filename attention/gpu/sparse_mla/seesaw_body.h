// The sparse MLA's sm_90a seesaw body over a bf16 cache (or an fp8_ds_mla
// cache, kFp8), for 64 heads or more: one block of three warpgroups per
// (query row, 64 heads, top-k split), FlashMLA's sm_90 sparse prefill
// schedule over the paged latent cache.
//
// Roles. The producer warpgroup (72 registers) loads Q (by TMA, nine boxes
// from one thread, where q is bf16 at 16-byte strides: QMap), then gathers the
// row's key tiles of 64 top-k entries with 16-byte cp.async into two
// buffers (tile 2 i of pair i into keys[0], 2 i + 1 into keys[1]), each
// tile in two parts with their own mbarriers (atoms 0-3: dims 0-255;
// atoms 4-8: dims 256-575), invalid keys zero-filled and flagged in
// `valid`. Over an fp8 cache (104 producer registers, 200 consumer) each
// producer thread loads a part's codes and scales into registers before
// the part is free (16-byte loads; the pair's entries resolved a lane
// each), then writes them as bf16 with ordinary stores fenced for the
// products (Fp8Bf16Form, row_access.h), the rope still by cp.async;
// faster than the gathered workspace from 32 decode rows (heuristics.h). At an
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
// seesaw::SharedMemory (config.h). The block's state and the producer are
// in seesaw_producer.h; the consumers, a block's run and the kernels here.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_SEESAW_BODY_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_SEESAW_BODY_H_

#include <cstdint>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/sm90_pipeline.h"
#include "attention/gpu/device/small_cache.h"
#include "attention/gpu/device/softmax.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/kernels.h"
#include "attention/gpu/sparse_mla/row_access.h"
#include "attention/gpu/sparse_mla/seesaw_producer.h"

namespace dsa::attention::gpu::sparse_mla {

#if defined(DSA_GPU_CUDA)
namespace seesaw {

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
                                         const MmaOutput& out,
                                         const QMap& qmap) {
  extern __shared__ __align__(1024) uint8_t smem[];
  // Swizzle atoms must start 1024-byte aligned.
  if ((SharedAddress(smem) & 1023u) != 0u) __trap();
  Block<kFp8, kCrossover> block(p, *reinterpret_cast<SharedMemory*>(smem),
                                token_begin, out.splits, qmap);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  // Through a shuffle: a value the compiler knows is warp-uniform, so a
  // branch on it around wgmma is not serialised.
  const int role = __shfl_sync(0xffffffffu, warp / 4, 0);
  if (threadIdx.x == 0) block.InitBarriers();
  __syncthreads();
  // The peer's barriers are initialised before any store or arrival on
  // them.
  if constexpr (kCrossover) ClusterSync();
  // Q's copies and pair 0's offsets first (fp8: this lane's entry of it),
  // while the consumers count the row's tiles.
  int64_t off[2][C::kRowsPerThread];
  int64_t own = -1;
  if (role == 2) {
    Producer<kFp8, F, kCrossover> producer(block);
    producer.LoadQ();
    if constexpr (kFp8) {
      own = producer.ResolveLane(0);
    } else {
      producer.Resolve(0, off);
    }
  }
  const int pairs = (block.CountTiles() + 1) / 2;
  if (role == 2) {
    WarpgroupRegsDecrease<kFp8 ? C::kFp8ProducerRegs : C::kProducerRegs>();
    if constexpr (kFp8) {
      Producer<kFp8, F, kCrossover>(block).RunFp8(pairs, own);
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

#if defined(DSA_GPU_CUDA)
#define DSA_SEESAW_GRID_CONSTANT __grid_constant__
#else
#define DSA_SEESAW_GRID_CONSTANT
#endif

// Grid: (ceil(heads / 64), rows, splits), 384 threads: a row's head groups
// neighbours in the launch order (as FlashMLA's), so that they gather the
// same cache rows at about the same time. Chosen by the
// heuristics only for sm_90a device code; elsewhere the kernel traps.
template <bool kFp8, Fp8Format F>
__global__ void __launch_bounds__(seesaw::Config::kThreads, 1)
    SparseMlaSeesawKernel(SparseMlaParams p, int64_t token_begin, MmaOutput out,
                          const DSA_SEESAW_GRID_CONSTANT seesaw::QMap qmap) {
#if defined(DSA_GPU_CUDA)
  if constexpr (!::dsa::gpu::kHasWarpgroupBf16Mma) {
    __trap();
  } else {
    seesaw::RunBlock<kFp8, F, false>(p, token_begin, out, qmap);
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
    SparseMlaSeesawCrossoverKernel(
        SparseMlaParams p, int64_t token_begin, MmaOutput out,
        const DSA_SEESAW_GRID_CONSTANT seesaw::QMap qmap) {
#if defined(DSA_GPU_CUDA)
  if constexpr (!::dsa::gpu::kHasWarpgroupBf16Mma) {
    __trap();
  } else {
    seesaw::RunBlock<true, F, true>(p, token_begin, out, qmap);
  }
#endif
}
#undef DSA_SPARSE_MLA_CLUSTER_OF_TWO

#if defined(DSA_GPU_CUDA)
namespace seesaw {

// What a QMap encodes.
struct QMapKey {
  const void* q = nullptr;
  int64_t tokens = 0, token_stride = 0, head_stride = 0;
  int32_t heads = 0;
  bool operator==(const QMapKey& o) const {
    return q == o.q && tokens == o.tokens && token_stride == o.token_stride &&
           head_stride == o.head_stride && heads == o.heads;
  }
};

// The QMap of the call's q (its p.tokens rows; every chunk's launch finds
// the same map) through the calling thread's cache of its last few
// (encoding is a driver call; a step's layers pass the same q buffer), or
// null where Q goes by cp.async: q not bf16, not at 16-byte strides, or no
// encoder.
inline const QMap* CachedQMap(const SparseMlaParams& p) {
  const int64_t tokens = p.tokens;
  if (p.q_format != FloatFormat::kBFloat16 ||
      reinterpret_cast<uintptr_t>(p.q) % 16 != 0 || p.q_token_stride % 8 != 0 ||
      p.q_head_stride % 8 != 0 || TensorMapEncoder() == nullptr) {
    return nullptr;
  }
  static thread_local SmallCache<QMapKey, QMap, 4> cache;
  QMapKey key;
  key.q = p.q;
  key.tokens = tokens;
  key.token_stride = p.q_token_stride;
  key.head_stride = p.q_head_stride;
  key.heads = p.heads;
  return cache.Find(key, [&](QMap* m) {
    const cuuint64_t dims[3] = {static_cast<cuuint64_t>(kDim),
                                static_cast<cuuint64_t>(p.heads),
                                static_cast<cuuint64_t>(tokens)};
    const cuuint64_t strides[2] = {
        static_cast<cuuint64_t>(p.q_head_stride) * 2,
        static_cast<cuuint64_t>(p.q_token_stride) * 2};
    const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(Config::kHeads), 1};
    const cuuint32_t unit[3] = {1, 1, 1};
    m->tma = 1;
    return TensorMapEncoder()(
               &m->map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
               const_cast<void*>(p.q), dims, strides, box, unit,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  });
}

}  // namespace seesaw
#endif  // DSA_GPU_CUDA

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
  seesaw::QMap qmap{};
#if defined(DSA_GPU_CUDA)
  if (const seesaw::QMap* cached = seesaw::CachedQMap(p)) {
    qmap = *cached;
  }
#endif
  hipLaunchKernelGGL(kernel, grid, dim3(C::kThreads), kBytes, stream, p, begin,
                     out, qmap);
  return CheckLaunch(kOp);
}

#undef DSA_SEESAW_GRID_CONSTANT

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_SEESAW_BODY_H_
