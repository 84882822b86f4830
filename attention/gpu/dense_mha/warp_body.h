// The portable attention body (AMD's MFMA, NVIDIA without sm_90a, and on
// sm_90a where a test asks for it): each warp owns Mma::kM query rows and
// multiplies on Bf16WarpMma, the block stages Q, one K tile and one V^T
// tile in padded row-major tiles (WarpBodySmem) with cp.async, and P goes
// through shared memory. Per key tile t: wait K_t; load V_t; S = Q K_t^T;
// online softmax -> P; wait V_t; load K_{t-1}; O += P V_t.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_WARP_BODY_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_WARP_BODY_H_

#include <cstdint>

#include "attention/gpu/dense_mha/attention_args.h"
#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/softmax.h"

namespace dsa::attention::gpu::dense_mha {

static_assert(Mma::kCPerLane % 2 == 0, "stores take slots in pairs");

template <int kQk, int kV>
using WarpSmem = WarpBodySmem<Tiles, Mma::kM, kQk, kV>;

template <int kQk, int kV>
__device__ __forceinline__ void WarpBody(const AttentionArgs& a,
                                         uint16_t* smem) {
  using L = WarpSmem<kQk, kV>;
  constexpr int kLdQ = L::kLdQ;
  constexpr int kLdVt = L::kLdVt;
  constexpr int kLdP = L::kLdP;
  constexpr int kSBlocks = kBlockN / Mma::kN;
  constexpr int kOBlocks = kV / Mma::kN;
  constexpr int kRows = Mma::kCRowsPerLane;
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
  OnlineSoftmax<kRows, MmaRowReduce<Mma>> softmax;
  softmax.Init();
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

    // Scores in the log2 domain. Keys after a row's position are masked;
    // only tiles reaching past the block's first row need it.
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
    float base[kRows], alpha[kRows];
    softmax.Update(mx, base, alpha);
#pragma unroll
    for (int b = 0; b < kOBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; ++e) {
        o[b].v[e] *= alpha[Mma::CRowSlot(e)];
      }
    }
    // P = exp2(S - base), added to the row sums, to shared memory in bf16.
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; e += 2) {
        const float p0 = exp2f(s[b].v[e] - base[Mma::CRowSlot(e)]);
        const float p1 = exp2f(s[b].v[e + 1] - base[Mma::CRowSlot(e + 1)]);
        softmax.row_sum[Mma::CRowSlot(e)] += p0;
        softmax.row_sum[Mma::CRowSlot(e + 1)] += p1;
        const int r0 = Mma::CRow(lane, e);
        const int c0 = b * Mma::kN + Mma::CCol(lane, e);
        const int r1 = Mma::CRow(lane, e + 1);
        const int c1 = b * Mma::kN + Mma::CCol(lane, e + 1);
        if (r1 == r0 && c1 == c0 + 1 && c0 % 2 == 0) {
          *reinterpret_cast<uint32_t*>(p_s + r0 * kLdP + c0) =
              ::dsa::gpu::PackBf16x2(p0, p1);
        } else {
          p_s[r0 * kLdP + c0] = ::dsa::gpu::FloatToBf16(p0);
          p_s[r1 * kLdP + c1] = ::dsa::gpu::FloatToBf16(p1);
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

  // Epilogue: O / row sum.
  float inv[kRows];
  softmax.Finalize(inv);
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

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_WARP_BODY_H_
