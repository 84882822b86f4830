// The sparse MLA's warp-level matrix body (Bf16WarpMma: mma.sync on NVIDIA,
// MFMA on AMD), as FlashMLA's sparse prefill: one block per query row and
// group of HC heads (the M of both products), for every backend, fp8 caches
// and fewer than 64 heads. The row's top-k indices are checked and compacted
// into cache-entry offsets (chunks of kIndexChunk), then the block walks them
// in tiles of kTileKeys keys, gathering tile t + 1 (cp.async) while tile t
// computes:
//   1. S = Q K^T: warp (head group, key slice) multiplies Q and the staged
//      keys from shared memory, scaled scores (log2 domain) to shared memory;
//   2. online softmax in fp32, kRowThreads threads per head row; P back as
//      bf16 with each row's rescale factor;
//   3. O += P V: V is the first 512 dims of the same staged tile; every warp
//      owns all HC heads times 512 / warps value dims.
// An fp8_ds_mla tile is gathered raw and dequantised into the bf16 tile
// (exact: fp8 times a power-of-two scale is a bf16). On AMD (Layout's
// kLdsForm, within 64 KiB of LDS) Q stays in registers, split over the
// warps of a head group by dims, each writing its share of S, which the
// softmax adds; one key buffer, filled at the start of its tile; the LDS is
// static. The loads are in warp_loads.h; shapes and shared memory in
// config.h (warp::Config, warp::Layout). Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_WARP_BODY_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_WARP_BODY_H_

#include <cstdint>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/kernels.h"
#include "attention/gpu/sparse_mla/row_access.h"
#include "attention/gpu/sparse_mla/warp_loads.h"

namespace dsa::attention::gpu::sparse_mla {
namespace warp {

// The body of block (blockIdx.x: row token_begin + blockIdx.x, blockIdx.y:
// heads [blockIdx.y * HC, ...), blockIdx.z: top-k split).
template <int HC, bool kFp8, Fp8Format F>
__device__ __forceinline__ void Body(const SparseMlaParams& p,
                                     int64_t token_begin, const MmaOutput& out,
                                     uint8_t* amd_lds) {
  using L = Layout<kDsaWarpSize, HC, kFp8>;
  constexpr int kQRegisterSteps = C::kQRegisterSteps;
  constexpr int kQkChains = C::kQkChains;
#if defined(DSA_GPU_ROCM)
  uint8_t* smem = amd_lds;  // the kernel's static LDS
#else
  extern __shared__ __align__(16) uint8_t smem[];
#endif
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem + L::kQOff);
  uint8_t* key_base = smem + L::kKeyOff;
  uint8_t* raw_base = smem + L::kRawLandingOff;
  float* s_s = reinterpret_cast<float*>(smem + L::kSOff);
  uint16_t* p_s = reinterpret_cast<uint16_t*>(smem + L::kPOff);
  float* alpha_s = reinterpret_cast<float*>(smem + L::kAlphaOff);
  int64_t* slots = reinterpret_cast<int64_t*>(smem + L::kSlotOff);
  int* scan = reinterpret_cast<int*>(smem + L::kScanOff);

  const int64_t t = token_begin + blockIdx.x;
  const int h0 = blockIdx.y * HC;
  const int tid = threadIdx.x;
  const int lane = tid % kDsaWarpSize, warp = tid / kDsaWarpSize;

  // Q, rounded to bf16 once; heads past the last are zeros.
  if constexpr (!L::kLdsForm) {
    for (int i = tid; i < HC * kDim; i += kThreads) {
      const int hh = i / kDim, d = i % kDim;
      float v = 0.0f;
      if (h0 + hh < p.heads) {
        v = LoadFloat(p.q, p.q_format,
                      t * p.q_token_stride + (h0 + hh) * p.q_head_stride + d);
      }
      q_s[hh * kLd + d] = FloatToBf16(v);
    }
  }
  const RowRequest rr = LoadRowRequest(p, t);
  const float scale_log2 = p.softmax_scale * kLog2e;

  // Softmax state of head row sm_row, kept (identically) by its kRowThreads
  // threads. (Not device/softmax.h's OnlineSoftmax: that keeps each lane's
  // share of a row sum until the end, where this body sums the row every
  // tile; switching would reorder the additions.)
  const int sm_row = tid / L::kRowThreads, sm_part = tid % L::kRowThreads;
  float m_run = kNegInf, l_run = 0.0f;

  Mma::C o[L::kMTiles][L::kPvNTiles];
#pragma unroll
  for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < L::kPvNTiles; ++nt) Mma::Zero(o[mt][nt]);
  }
  // Q K^T k-steps of a warp (its slice of the dims), those whose Q
  // fragments it keeps in registers (all of them on AMD), and the dims it
  // reads Q from shared memory for (before those).
  constexpr int kQSteps = L::kQkDims / Mma::kK;
  constexpr int kQRegs = L::kLdsForm                 ? kQSteps
                         : kQRegisterSteps < kQSteps ? kQRegisterSteps
                                                     : kQSteps;
  constexpr int kQSmemDim = L::kQkDims - kQRegs * Mma::kK;
  // The warp's Q K^T share: head group, key slice, dim slice.
  const int qk_group = warp % L::kQkGroups;
  const int qk_keys = warp / L::kQkGroups % L::kQkSplits;
  const int qk_dims = warp / (L::kQkGroups * L::kQkSplits);
  Mma::A q_reg[kQRegs > 0 ? kQRegs : 1];
  if constexpr (L::kLdsForm) {
    LoadQFragments<Mma, L>(p, t, h0, qk_group, qk_dims, lane, q_reg);
  } else if constexpr (kQRegs > 0) {
    __syncthreads();  // q_s written
    const uint16_t* qa = q_s + (warp % L::kQkGroups) * Mma::kM * kLd;
#pragma unroll
    for (int i = 0; i < kQRegs; ++i) {
      Mma::LoadA(q_reg[i], qa + kQSmemDim + i * Mma::kK, kLd, lane);
    }
  }

  const int per_split = (p.topk + out.splits - 1) / out.splits;
  const int range_begin = blockIdx.z * per_split;
  const int range_end =
      p.topk - range_begin < per_split ? p.topk : range_begin + per_split;
  // 1. S = Q K^T over `keys`, scaled into the log2 domain; keys past
  // `valid` -inf.
  auto qk = [&](const uint16_t* keys, int valid) {
    if (warp >= L::kQkGroups * L::kQkSplits * L::kQkDimSplits) return;
    const int hg = warp % L::kQkGroups;
    const int ks = L::kLdsForm ? qk_keys : warp / L::kQkGroups;
    const uint16_t* qa = q_s + hg * Mma::kM * kLd;
    // AMD: this warp's dim slice of the keys, and its own score buffer.
    const uint16_t* kb =
        keys + ks * L::kQkKeys * kLd + (L::kLdsForm ? qk_dims * L::kQkDims : 0);
    float* s_out = s_s + (L::kLdsForm ? qk_dims * HC * kSLd : 0);
    static_assert(kQSmemDim % (kQkChains * Mma::kK) == 0,
                  "Q K^T k-steps in whole rounds of the accumulator sets");
    Mma::C sc[kQkChains][L::kQkNTiles];
#pragma unroll
    for (int c = 0; c < kQkChains; ++c) {
#pragma unroll
      for (int nt = 0; nt < L::kQkNTiles; ++nt) Mma::Zero(sc[c][nt]);
    }
#pragma unroll 2
    for (int k_round = 0; k_round < kQSmemDim; k_round += kQkChains * Mma::kK) {
#pragma unroll
      for (int c = 0; c < kQkChains; ++c) {
        const int k0 = k_round + c * Mma::kK;
        Mma::A a;
        Mma::LoadA(a, qa + k0, kLd, lane);
#pragma unroll
        for (int nt = 0; nt < L::kQkNTiles; ++nt) {
          Mma::B b;
          Mma::LoadB(b, kb + nt * Mma::kN * kLd + k0, kLd, lane);
          Mma::Run(sc[c][nt], a, b);
        }
      }
    }
    if constexpr (kQRegs > 0) {
#pragma unroll
      for (int i = 0; i < kQRegs; ++i) {
#pragma unroll
        for (int nt = 0; nt < L::kQkNTiles; ++nt) {
          Mma::B b;
          Mma::LoadB(b, kb + nt * Mma::kN * kLd + kQSmemDim + i * Mma::kK, kLd,
                     lane);
          Mma::Run(sc[i % kQkChains][nt], q_reg[i], b);
        }
      }
    }
    Mma::C s[L::kQkNTiles];
#pragma unroll
    for (int nt = 0; nt < L::kQkNTiles; ++nt) {
      s[nt] = sc[0][nt];
#pragma unroll
      for (int c = 1; c < kQkChains; ++c) {
#pragma unroll
        for (int i = 0; i < Mma::kCPerLane; ++i) s[nt].v[i] += sc[c][nt].v[i];
      }
    }
#pragma unroll
    for (int nt = 0; nt < L::kQkNTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < Mma::kCPerLane; ++i) {
        const int row = hg * Mma::kM + Mma::CRow(lane, i);
        const int col = ks * L::kQkKeys + nt * Mma::kN + Mma::CCol(lane, i);
        s_out[row * kSLd + col] =
            col < valid ? s[nt].v[i] * scale_log2 : kNegInf;
      }
    }
  };

  // 2. Online softmax of row sm_row over the scores in s_s: probabilities
  // (bf16) to p_buf, the rescale factor of the running output to alpha_buf.
  auto softmax = [&](uint16_t* p_buf, float* alpha_buf) {
    float sv[L::kRowKeys];
    float mx = kNegInf;
#pragma unroll
    for (int j = 0; j < L::kRowKeys; ++j) {
      sv[j] = s_s[sm_row * kSLd + sm_part * L::kRowKeys + j];
#pragma unroll
      for (int sp = 1; sp < L::kQkDimSplits; ++sp) {  // AMD: the dim slices
        sv[j] += s_s[(sp * HC + sm_row) * kSLd + sm_part * L::kRowKeys + j];
      }
      mx = fmaxf(mx, sv[j]);
    }
#pragma unroll
    for (int d = 1; d < L::kRowThreads; d *= 2) {
      mx = fmaxf(mx, DSA_SHFL_XOR(mx, d, kDsaWarpSize));
    }
    const float m_new = fmaxf(m_run, mx);
    // A row still at -inf (no finite score yet) subtracts 0 instead.
    const float m_use = m_new == kNegInf ? 0.0f : m_new;
    const float alpha = exp2f(m_run - m_use);
    float sum = 0.0f;
    uint32_t* prow = reinterpret_cast<uint32_t*>(p_buf + sm_row * kPLd +
                                                 sm_part * L::kRowKeys);
#pragma unroll
    for (int j = 0; j < L::kRowKeys; j += 2) {
      // The sum uses the rounded probabilities, the ones P V multiplies.
      const uint32_t pair = ::dsa::gpu::PackBf16x2(exp2f(sv[j] - m_use),
                                                   exp2f(sv[j + 1] - m_use));
      sum += __uint_as_float(pair << 16) + __uint_as_float(pair & 0xffff0000u);
      prow[j / 2] = pair;
    }
#pragma unroll
    for (int d = 1; d < L::kRowThreads; d *= 2) {
      sum += DSA_SHFL_XOR(sum, d, kDsaWarpSize);
    }
    l_run = l_run * alpha + sum;
    m_run = m_new;
    if (sm_part == 0) alpha_buf[sm_row] = alpha;
  };

  // 3. O = O * alpha + P V over this warp's value dims.
  auto pv = [&](const uint16_t* keys, const uint16_t* p_buf,
                const float* alpha_buf) {
    // Most tiles leave every row maximum as it was (alpha exactly 1): the
    // rescale is skipped unless a row of this lane moved.
    float alpha[L::kMTiles][Mma::kCPerLane];
    bool moved = false;
#pragma unroll
    for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
      for (int i = 0; i < Mma::kCPerLane; ++i) {
        alpha[mt][i] = alpha_buf[mt * Mma::kM + Mma::CRow(lane, i)];
        moved |= alpha[mt][i] != 1.0f;
      }
    }
    if (moved) {
#pragma unroll
      for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
        for (int i = 0; i < Mma::kCPerLane; ++i) {
#pragma unroll
          for (int nt = 0; nt < L::kPvNTiles; ++nt) {
            o[mt][nt].v[i] *= alpha[mt][i];
          }
        }
      }
    }
    const uint16_t* vb = keys + warp * L::kPvDims;
#pragma unroll
    for (int kk = 0; kk < kTileKeys; kk += Mma::kK) {
      Mma::A pa[L::kMTiles];
#pragma unroll
      for (int mt = 0; mt < L::kMTiles; ++mt) {
        Mma::LoadA(pa[mt], p_buf + mt * Mma::kM * kPLd + kk, kPLd, lane);
      }
#pragma unroll
      for (int nt = 0; nt < L::kPvNTiles; ++nt) {
        Mma::B b;
        Mma::LoadBTrans(b, vb + kk * kLd + nt * Mma::kN, kLd, lane);
#pragma unroll
        for (int mt = 0; mt < L::kMTiles; ++mt) Mma::Run(o[mt][nt], pa[mt], b);
      }
    }
  };

  auto key_buffer = [&](int tile) {
    return reinterpret_cast<uint16_t*>(key_base +
                                       (tile % L::kKeyBuffers) * L::kKeyBytes);
  };
  auto raw_buffer = [&](int tile) {
    return raw_base + (tile % L::kRawLandings) * L::kRawBytes;
  };
  // Where tile `tile`'s gather lands.
  auto landing = [&](int tile) {
    return kFp8 ? raw_buffer(tile)
                : reinterpret_cast<uint8_t*>(key_buffer(tile));
  };

  for (int chunk = range_begin; chunk < range_end; chunk += L::kChunk) {
    const int count = CompactChunk<L::kIndicesPerThread>(
        p, t, rr, chunk, range_end, slots, scan);
    const int tiles = (count + kTileKeys - 1) / kTileKeys;
    if (tiles == 0) continue;
    if constexpr (!L::kPrefetch) {
      // AMD: each tile gathered at its start into the one key buffer (an
      // fp8 tile onto the score and probability buffers).
      for (int tile = 0; tile < tiles; ++tile) {
        __syncthreads();  // the last tile's P V is done with keys and P
        GatherTile<kFp8>(p, slots, tile * kTileKeys, count, landing(tile));
        CopyAsyncWaitAll();
        __syncthreads();  // tile `tile` is in
        uint16_t* keys = key_buffer(tile);
        if constexpr (kFp8) {
          DequantTile<F>(raw_buffer(tile), keys);
          __syncthreads();  // and the raw entries are dead
        }
        qk(keys, count - tile * kTileKeys);
        __syncthreads();
        softmax(p_s, alpha_s);
        __syncthreads();
        pv(keys, p_s, alpha_s);
      }
      continue;
    }
    GatherTile<kFp8>(p, slots, 0, count, landing(0));
    for (int tile = 0; tile < tiles; ++tile) {
      CopyAsyncWaitAll();
      __syncthreads();  // tile `tile` is in; tile - 1 is no longer read
      if (tile + 1 < tiles) {
        GatherTile<kFp8>(p, slots, (tile + 1) * kTileKeys, count,
                         landing(tile + 1));
      }
      uint16_t* keys = key_buffer(tile);
      if constexpr (kFp8) {
        DequantTile<F>(raw_buffer(tile), keys);
        __syncthreads();
      }
      qk(keys, count - tile * kTileKeys);
      __syncthreads();
      softmax(p_s, alpha_s);
      __syncthreads();
      pv(keys, p_s, alpha_s);
    }
  }

  // Normalise (a row without any valid key has l = 0 and outputs zeros) and
  // store the latent output.
  __syncthreads();
  if (sm_part == 0) alpha_s[sm_row] = l_run > 0.0f ? 1.0f / l_run : 0.0f;
  // (token, head) index of this block's output row `row`.
  const int64_t out_row0 =
      (static_cast<int64_t>(blockIdx.z) * gridDim.x + (t - token_begin)) *
          p.heads +
      h0;
  if (out.part_o != nullptr && sm_part == 0 && h0 + sm_row < p.heads) {
    out.part_lse[out_row0 + sm_row] =
        l_run > 0.0f ? m_run + __log2f(l_run) : kNegInf;
  }
  __syncthreads();
  if (out.part_o != nullptr) {  // a split of few rows: fp32, direct
#pragma unroll
    for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
      for (int i = 0; i < Mma::kCPerLane; ++i) {
        const int row = mt * Mma::kM + Mma::CRow(lane, i);
        if (h0 + row >= p.heads) continue;
        const float inv = alpha_s[row];
        const int64_t at = (out_row0 + row) * kLora + warp * L::kPvDims;
#pragma unroll
        for (int nt = 0; nt < L::kPvNTiles; ++nt) {
          out.part_o[at + nt * Mma::kN + Mma::CCol(lane, i)] =
              o[mt][nt].v[i] * inv;
        }
      }
    }
    return;
  }
  // bf16 through shared memory (the key buffers, free now), then whole
  // 16-byte chunks per thread: coalesced rows instead of 2-byte scatter.
  constexpr int kStageLd = C::kStageLd;
  uint16_t* stage = reinterpret_cast<uint16_t*>(key_base);
  constexpr int kRowChunks = kLora / 8;
  if constexpr (L::kStageRows < HC) {
    const int rows_here = p.heads - h0 < HC ? p.heads - h0 : HC;
    // AMD: one M tile of heads at a time (over the key, score and
    // probability buffers).
    static_assert(L::kStageRows == Mma::kM, "a round per M tile");
#pragma unroll
    for (int mt = 0; mt < L::kMTiles; ++mt) {
      if (mt > 0) __syncthreads();  // the last round's rows are stored
#pragma unroll
      for (int i = 0; i < Mma::kCPerLane; ++i) {
        const int row = Mma::CRow(lane, i);
        const float inv = alpha_s[mt * Mma::kM + row];
        uint16_t* dst = stage + row * kStageLd + warp * L::kPvDims;
#pragma unroll
        for (int nt = 0; nt < L::kPvNTiles; ++nt) {
          dst[nt * Mma::kN + Mma::CCol(lane, i)] =
              FloatToBf16(o[mt][nt].v[i] * inv);
        }
      }
      __syncthreads();
      const int round_rows = rows_here - mt * Mma::kM;
      if (round_rows <= 0) continue;
      const int n = round_rows < Mma::kM ? round_rows : Mma::kM;
      for (int c = tid; c < n * kRowChunks; c += kThreads) {
        const int row = c / kRowChunks, part = c % kRowChunks;
        *reinterpret_cast<uint4*>(
            out.latent + (out_row0 + mt * Mma::kM + row) * kLora + part * 8) =
            *reinterpret_cast<const uint4*>(stage + row * kStageLd + part * 8);
      }
    }
    return;
  }
#pragma unroll
  for (int mt = 0; mt < L::kMTiles; ++mt) {
#pragma unroll
    for (int i = 0; i < Mma::kCPerLane; ++i) {
      const int row = mt * Mma::kM + Mma::CRow(lane, i);
      const float inv = alpha_s[row];
      uint16_t* dst = stage + row * kStageLd + warp * L::kPvDims;
#pragma unroll
      for (int nt = 0; nt < L::kPvNTiles; ++nt) {
        dst[nt * Mma::kN + Mma::CCol(lane, i)] =
            FloatToBf16(o[mt][nt].v[i] * inv);
      }
    }
  }
  __syncthreads();
  const int rows_here = p.heads - h0 < HC ? p.heads - h0 : HC;
  for (int c = tid; c < rows_here * kRowChunks; c += kThreads) {
    const int row = c / kRowChunks, part = c % kRowChunks;
    *reinterpret_cast<uint4*>(out.latent + (out_row0 + row) * kLora +
                              part * 8) =
        *reinterpret_cast<const uint4*>(stage + row * kStageLd + part * 8);
  }
}

}  // namespace warp

// Grid: (rows, ceil(heads / HC), splits).
template <int HC, bool kFp8, Fp8Format F>
__global__ void __launch_bounds__(warp::kThreads, 1)
    SparseMlaMmaKernel(SparseMlaParams p, int64_t token_begin, MmaOutput out) {
#if defined(DSA_GPU_ROCM)
  // Static LDS: its size is in the code object's metadata, and the compiler
  // holds it to the target's 64 KiB.
  __shared__ __align__(16)
      uint8_t lds[warp::Layout<kDsaWarpSize, HC, kFp8>::kBytes];
  warp::Body<HC, kFp8, F>(p, token_begin, out, lds);
#else
  warp::Body<HC, kFp8, F>(p, token_begin, out, nullptr);  // dynamic
#endif
}

template <int HC, bool kFp8, Fp8Format F>
LaunchResult LaunchWarpBodyInstance(const SparseMlaParams& p, int64_t begin,
                                    int64_t rows, const MmaOutput& out,
                                    int device, hipStream_t stream) {
  using L = warp::Layout<kDsaWarpSize, HC, kFp8>;
  constexpr auto kernel = &SparseMlaMmaKernel<HC, kFp8, F>;
  // Dynamic shared memory on NVIDIA (opted in); AMD's is static.
  constexpr int kDynamicBytes = L::kLdsForm ? 0 : L::kBytes;
  if constexpr (kDynamicBytes > 0) {
    const LaunchResult r = OptInSharedMemory<kernel, kDynamicBytes>(
        device, "sparse_mla: shared memory opt-in");
    if (!r.ok()) return r;
  }
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((p.heads + HC - 1) / HC),
                  static_cast<unsigned>(out.splits));
  hipLaunchKernelGGL(kernel, grid, dim3(warp::kThreads), kDynamicBytes, stream,
                     p, begin, out);
  return CheckLaunch(kOp);
}

template <int HC, bool kFp8, Fp8Format F>
LaunchResult LaunchWarpBody(const SparseMlaParams& p, int64_t begin,
                            int64_t rows, const MmaOutput& out, int device,
                            hipStream_t stream) {
  if constexpr (HC != warp::HeadsPerBlock(kDsaWarpSize, HC)) {
    // AMD builds no 64-head instance (config.h's HeadsPerBlock).
    return Invalid(kOp, "no %d-head warp body on this backend", HC);
  } else {
    return LaunchWarpBodyInstance<HC, kFp8, F>(p, begin, rows, out, device,
                                               stream);
  }
}

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_WARP_BODY_H_
