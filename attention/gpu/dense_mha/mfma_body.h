// The warp body's AMD form: the same FlashAttention-style causal loop as
// warp_body.h on v_mfma_f32_32x32x8bf16_1k, with both products transposed so
// that only K and V^T live in LDS (MfmaBodySmem: 37 KiB at qk 256, v 256,
// within AMD's 64 KiB a workgroup). Each warp owns Mma::kM = 32 query rows,
// which are the N (columns) of both of its products:
//   S^T = K_t Q^T     A: K rows from LDS, B: Q, loaded once into registers
//                     (64 VGPRs at qk 256);
//   softmax           a lane's accumulator slots are one query's scores
//                     (lane % 32), so its max and sum are the lane's own
//                     slots and one exchange with lane ^ 32;
//   O^T += V_t^T P^T  A: V^T rows from LDS, B: P straight from S^T's slots
//                     (Bf16WarpMma::CSlotsAsB), never stored.
// Per key tile t (from the diagonal down, as warp_body.h): wait K_t; load
// V_t^T; S^T; softmax; wait V_t^T; load K_{t-1}; O^T += V^T P^T. The LDS is
// static (its size is in the code object's metadata and the compiler checks
// it against the target's limit). AMD only; device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_MFMA_BODY_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_MFMA_BODY_H_

#include <cstdint>

#include "attention/gpu/dense_mha/attention_args.h"
#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/softmax.h"

#if defined(DSA_GPU_ROCM)

namespace dsa::attention::gpu::dense_mha {

template <int kQk, int kV>
using MfmaSmem = MfmaBodySmem<Tiles, kQk, kV>;

// The two lanes that hold one query's scores (a column of S^T).
struct MfmaColumnReduce {
  __device__ __forceinline__ static float Max(float x) {
    return Mma::ColumnMax(x);
  }
  __device__ __forceinline__ static float Sum(float x) {
    return Mma::ColumnSum(x);
  }
};

template <int kQk, int kV>
__device__ __forceinline__ void MfmaBody(const AttentionArgs& a,
                                         uint16_t* smem) {
  using L = MfmaSmem<kQk, kV>;
  // B fragments (8 keys) per key block of S^T.
  constexpr int kPSteps = Mma::kCPerLane / Mma::kCSlotsPerBStep;
  static_assert(Mma::kM == Mma::kN && kBlockN % Mma::kM == 0 &&
                    kPSteps * Mma::kK == Mma::kM,
                "S^T's slots are P^T's B fragments (warp_amd.h)");
  constexpr int kLdQ = L::kLdQ;
  constexpr int kLdVt = L::kLdVt;
  constexpr int kSBlocks = kBlockN / Mma::kM;  // key blocks of S^T
  constexpr int kOBlocks = kV / Mma::kM;       // value-dim blocks of O^T
  constexpr int kQSteps = kQk / Mma::kK;
  constexpr float kNegInf = -__builtin_huge_valf();
  uint16_t* k_s = smem + L::kK;
  uint16_t* vt_s = smem + L::kVt;
  uint16_t* q_stage = smem + L::kQStage;
  const BlockWork w = GetWork(a);
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int qk = a.nope + a.rope;
  const int row_base = warp * Mma::kM;
  // This lane's query row in the block (the column of its slots).
  const int my_row = row_base + Mma::CCol(lane, 0);

  // Q through LDS once (columns [qk, kQk) zero), then into registers.
  const int q_chunks = qk / 8;
  for (int c = qk + threadIdx.x; c < kQk; c += kThreads) {
    for (int r = 0; r < kBlockM; ++r) q_stage[r * kLdQ + c] = 0;
  }
  for (int c = threadIdx.x; c < kBlockM * q_chunks; c += kThreads) {
    const int r = c / q_chunks;
    const int col = (c % q_chunks) * 8;
    uint16_t* d = q_stage + r * kLdQ + col;
    if (r < w.rows) {
      CopyAsync16(d, QSrc(a, w, r, col));
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
  CopyAsyncCommit();
  CopyAsyncWait<0>();
  __syncthreads();
  Mma::B q_frag[kQSteps];
#pragma unroll
  for (int i = 0; i < kQSteps; ++i) {
    Mma::LoadB(q_frag[i], q_stage + row_base * kLdQ + i * Mma::kK, kLdQ, lane);
  }
  __syncthreads();  // the stage is K's and V^T's from here

  // Columns [qk, kQk) of K and rows [v, kV) of V^T are zero (no tile load
  // writes them).
  for (int c = qk + threadIdx.x; c < kQk; c += kThreads) {
    for (int r = 0; r < kBlockN; ++r) k_s[r * kLdQ + c] = 0;
  }
  for (int i = threadIdx.x; i < (kV - a.v) * kBlockN; i += kThreads) {
    vt_s[(a.v + i / kBlockN) * kLdVt + i % kBlockN] = 0;
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

  Mma::C o[kOBlocks];  // O^T: value dims x this warp's 32 query rows
#pragma unroll
  for (int b = 0; b < kOBlocks; ++b) Mma::Zero(o[b]);
  OnlineSoftmax<1, MfmaColumnReduce> softmax;
  softmax.Init();
  const int pos = w.first_pos + my_row;

  load_k(w.num_tiles - 1);
  CopyAsyncCommit();
  for (int t = w.num_tiles - 1; t >= 0; --t) {
    CopyAsyncWait<0>();
    __syncthreads();  // K_t visible; every warp is done with V_{t+1}^T
    load_vt(t);
    CopyAsyncCommit();

    // S^T = K_t Q^T: keys (rows) x this warp's query rows (columns).
    Mma::C s[kSBlocks];
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) Mma::Zero(s[b]);
#pragma unroll
    for (int i = 0; i < kQSteps; ++i) {
#pragma unroll
      for (int b = 0; b < kSBlocks; ++b) {
        Mma::A ka;
        Mma::LoadA(ka, k_s + b * Mma::kM * kLdQ + i * Mma::kK, kLdQ, lane);
        Mma::Run(s[b], ka, q_frag[i]);
      }
    }

    // Scores in the log2 domain; keys after the row's position masked (only
    // tiles reaching past the block's first row need it).
    const int key0 = t * kBlockN;
    const bool masked = key0 + kBlockN - 1 > w.first_pos;
    float mx[1] = {kNegInf};
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; ++e) {
        float x = s[b].v[e] * a.scale_log2;
        if (masked && key0 + b * Mma::kM + Mma::CRow(lane, e) > pos) {
          x = kNegInf;
        }
        s[b].v[e] = x;
        mx[0] = fmaxf(mx[0], x);
      }
    }
    float base[1], alpha[1];
    softmax.Update(mx, base, alpha);
#pragma unroll
    for (int b = 0; b < kOBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; ++e) o[b].v[e] *= alpha[0];
    }
    // P^T's B fragments, straight from the slots.
    Mma::B p_frag[kSBlocks * kPSteps];
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) {
#pragma unroll
      for (int j = 0; j < kPSteps; ++j) {
        float p[Mma::kCSlotsPerBStep];
#pragma unroll
        for (int k = 0; k < Mma::kCSlotsPerBStep; ++k) {
          p[k] = exp2f(s[b].v[j * Mma::kCSlotsPerBStep + k] - base[0]);
          softmax.row_sum[0] += p[k];
        }
        Mma::CSlotsAsB(p_frag[b * kPSteps + j], p);
      }
    }

    CopyAsyncWait<0>();
    __syncthreads();  // V_t^T visible; K_t no longer read
    if (t > 0) load_k(t - 1);
    CopyAsyncCommit();
    // O^T += V_t^T P^T over the tile's keys.
#pragma unroll
    for (int j = 0; j < kSBlocks * kPSteps; ++j) {
#pragma unroll
      for (int b = 0; b < kOBlocks; ++b) {
        Mma::A va;
        Mma::LoadA(va, vt_s + b * Mma::kM * kLdVt + j * Mma::kK, kLdVt, lane);
        Mma::Run(o[b], va, p_frag[j]);
      }
    }
  }

  // Epilogue: O / row sum. Slots e and e + 1 (e even) are adjacent value
  // dims of this lane's row.
  float inv[1];
  softmax.Finalize(inv);
  if (my_row >= w.rows) return;
  const int64_t out_base = OutBase(a, w, my_row);
#pragma unroll
  for (int b = 0; b < kOBlocks; ++b) {
#pragma unroll
    for (int e = 0; e < Mma::kCPerLane; e += 2) {
      const int d0 = b * Mma::kM + Mma::CRow(lane, e);
      StoreOut(a, out_base, d0, o[b].v[e] * inv[0], d0 + 1,
               o[b].v[e + 1] * inv[0], true);
    }
  }
}

}  // namespace dsa::attention::gpu::dense_mha

#endif  // defined(DSA_GPU_ROCM)

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_MFMA_BODY_H_
