// The sm_90a attention body for head dims the TMA body cannot take (not
// multiples of 64): two warpgroups of 64 query rows on wgmma, operands in
// the no-swizzle core-matrix layout (Sm90PipelinedSmem) staged by cp.async
// as in FlashAttention-2, with FlashAttention-3's intra-warpgroup overlap:
// tile t's O += P V runs on the tensor cores while tile t - 1's S = Q K^T
// is issued and its softmax computed. K, V^T and P are double-buffered, P
// goes through shared memory, and one block barrier per tile orders the
// buffers:
//   iteration i (tile t = last - i):
//     wait K_t, V_{t+1}; barrier
//     load V_t, K_{t-1} (into the buffers tile t + 2 / t + 1 used)
//     issue S_t; issue PV_{t+1}; wait S_t (PV_{t+1} may still run)
//     softmax of tile t -> P_t (the other P buffer)
//     wait PV_{t+1}; rescale O for tile t's new row maxima
//   then PV_0.
// CUDA device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_SM90_PIPELINED_BODY_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_SM90_PIPELINED_BODY_H_

#include <cstdint>

#include "attention/gpu/dense_mha/attention_args.h"
#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/dense_mha/sm90_tile.h"
#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"

#if defined(DSA_GPU_CUDA)

namespace dsa::attention::gpu::dense_mha {

// 16-byte chunk `c` of an operand of `rows` rows x kCols columns in the
// core-matrix layout: (row, column) of its first element. Consecutive
// threads take the two chunks of a 32-byte global segment, then the next
// row of the same core matrix, so shared-memory stores spread over the banks
// while global loads stay sector-sized.
template <int kCols>
__device__ __forceinline__ void CoreChunk(int c, int* row, int* col) {
  constexpr int kPerGroup = 8 * (kCols / 8);  // chunks per 8 rows
  const int group = c / kPerGroup;
  const int i = c % kPerGroup;
  *row = group * 8 + (i / 2) % 8;
  *col = ((i % 2) + 2 * (i / 16)) * 8;
}

template <int kQk, int kV>
__device__ __forceinline__ void Sm90PipelinedBody(const AttentionArgs& a,
                                                  uint16_t* smem_u16) {
  static_assert(kBlockM == kSm90BlockM && kBlockN == 64,
                "two warpgroups of 64 rows, 64-key tiles");
  using L = Sm90PipelinedSmem<kQk, kV>;
  using WgS = ::dsa::gpu::WarpgroupBf16Mma<kBlockN>;
  using WgO = ::dsa::gpu::WarpgroupBf16Mma<kV>;
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_u16);
  uint8_t* q_s = smem + L::kQ;
  const BlockWork w = GetWork(a);
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int group = warp / 4;
  const int warp_in_group = warp % 4;
  const int qk = a.nope + a.rope;
  const int row_base = group * kSm90GroupRows;
  auto k_buf = [&](int b) { return smem + L::kK + b * L::kKBytes; };
  auto vt_buf = [&](int b) { return smem + L::kVt + b * L::kVtBytes; };
  auto p_buf = [&](int b) {
    return smem + L::kP + (b * 2 + group) * L::kPBytes;
  };

  // Zero the padding of both K and both V^T buffers (never loaded).
  for (int b = 0; b < 2; ++b) {
    for (int c = threadIdx.x; c < kBlockN * (kQk / 8); c += kThreads) {
      int r, col;
      CoreChunk<kQk>(c, &r, &col);
      if (col >= qk) {
        *reinterpret_cast<uint4*>(k_buf(b) + WgS::Offset(r, col, L::kQkGroup)) =
            make_uint4(0, 0, 0, 0);
      }
    }
    for (int c = threadIdx.x; c < kV * (kBlockN / 8); c += kThreads) {
      int d, key;
      CoreChunk<kBlockN>(c, &d, &key);
      if (d >= a.v) {
        *reinterpret_cast<uint4*>(vt_buf(b) +
                                  WgS::Offset(d, key, L::kKeyGroup)) =
            make_uint4(0, 0, 0, 0);
      }
    }
  }
  for (int c = threadIdx.x; c < kBlockM * (kQk / 8); c += kThreads) {
    int r, col;
    CoreChunk<kQk>(c, &r, &col);
    uint8_t* d = q_s + WgS::Offset(r, col, L::kQkGroup);
    if (r < w.rows && col < qk) {
      CopyAsync16(d, QSrc(a, w, r, col));
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
  auto load_k = [&](int t, uint8_t* dst) {
    for (int c = threadIdx.x; c < kBlockN * (kQk / 8); c += kThreads) {
      int r, col;
      CoreChunk<kQk>(c, &r, &col);
      if (col < qk) {
        CopyAsync16(dst + WgS::Offset(r, col, L::kQkGroup),
                    KSrc(a, w, t * kBlockN + r, col));
      }
    }
  };
  auto load_vt = [&](int t, uint8_t* dst) {
    for (int c = threadIdx.x; c < kV * (kBlockN / 8); c += kThreads) {
      int d, key;
      CoreChunk<kBlockN>(c, &d, &key);
      if (d < a.v) {
        CopyAsync16(dst + WgS::Offset(d, key, L::kKeyGroup),
                    VtSrc(a, w, d, t * kBlockN + key));
      }
    }
  };

  float o[WgO::kAccPerThread];
#pragma unroll
  for (int i = 0; i < WgO::kAccPerThread; ++i) o[i] = 0.0f;
  Sm90Softmax softmax;
  softmax.Init();
  const uint8_t* q_group = q_s + group * 8 * L::kQkGroup;
  const int last = w.num_tiles - 1;

  load_k(last, k_buf(0));
  CopyAsyncCommit();
  for (int i = 0; i <= last; ++i) {
    const int t = last - i;
    const int cur = i % 2;
    CopyAsyncWait<0>();
    WgS::FenceStores();  // cp.async and P stores, for wgmma
    __syncthreads();
    load_vt(t, vt_buf(cur));
    if (t > 0) load_k(t - 1, k_buf(cur ^ 1));
    CopyAsyncCommit();

    float s[WgS::kAccPerThread];
    WgS::template Issue<kQk>(s, q_group, L::kQkGroup, k_buf(cur), L::kQkGroup,
                             false);
    if (i > 0) {
      WgO::template Issue<kBlockN>(o, p_buf(cur ^ 1), L::kKeyGroup,
                                   vt_buf(cur ^ 1), L::kKeyGroup, true);
      // S_t was committed first: waiting for all but the newest group
      // leaves PV_{t+1} running.
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      WgS::FenceOperands(s);
    } else {
      WgS::Wait(s);
    }

    const int key0 = t * kBlockN;
    float mx[kSm90RowSlots], base[kSm90RowSlots], alpha[kSm90RowSlots];
    ScaleMaskRowMax<WgS>(a, s, key0 + kBlockN - 1 > w.first_pos, key0,
                         w.first_pos + row_base, warp_in_group, lane, mx);
    softmax.Update(mx, base, alpha);
    uint8_t* p_s = p_buf(cur);
#pragma unroll
    for (int e = 0; e < WgS::kAccPerThread; e += 2) {
      const int slot = (e / 2) % 2;
      const float p0 = exp2f(s[e] - base[slot]);
      const float p1 = exp2f(s[e + 1] - base[slot]);
      softmax.row_sum[slot] += p0 + p1;
      const int r = WgS::AccRow(warp_in_group, lane, e);
      const int col = WgS::AccCol(lane, e);
      *reinterpret_cast<uint32_t*>(p_s + WgS::Offset(r, col, L::kKeyGroup)) =
          ::dsa::gpu::PackBf16x2(p0, p1);
    }
    WgO::Wait(o);  // PV_{t+1} done: O may be rescaled
#pragma unroll
    for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] *= alpha[(e / 2) % 2];
  }
  CopyAsyncWait<0>();
  WgS::FenceStores();
  __syncthreads();
  WgO::template Issue<kBlockN>(o, p_buf(last % 2), L::kKeyGroup,
                               vt_buf(last % 2), L::kKeyGroup, true);
  WgO::Wait(o);

  float inv[kSm90RowSlots];
  softmax.Finalize(inv);
  StoreRows<WgO>(a, w, o, inv, row_base, warp_in_group, lane);
}

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_GPU_CUDA

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_SM90_PIPELINED_BODY_H_
