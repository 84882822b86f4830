// The sm_90a attention body where nope, rope and v are multiples of 64 (the
// default there), FlashAttention-3's structure: a producer warpgroup, one
// lane of which streams K and V^T tiles of kN keys with TMA copies into
// rings of shared-memory stages (RingStage; full / empty mbarriers per
// stage; V^T of an 80-key tile as a 64-key box and a 16-key one), and two
// consumer warpgroups of 64 query rows that multiply on
// wgmma straight from the 128-byte swizzled layout the copies write, with P
// in registers (the wgmma RS form). A consumer issues tile t's Q K^T, then
// tile t + 1's P V, and runs t's softmax while P V is still on the tensor
// cores; the two consumers take turns to issue (PingPong), so that one's
// softmax runs under the other's products. The math warps issue no loads,
// compute no addresses and never wait on a block-wide barrier. A TMA box of
// 64 columns covers one swizzle block of one source (K_nope, k_pe or V^T),
// hence the head dims. Probabilities are exp2(s * scale - base) in one FFMA
// and the hardware's exponential (scores stay unscaled; the row maxima are
// scaled); a warpgroup skips the leading key tile its rows cannot see (the
// diagonal tile of the first 64 rows with 64-key tiles), taking its turn
// without issuing; a bf16 output leaves in 16-byte stores. The math warps'
// integer work is kept off the tiles: the wgmma descriptors are built once
// and moved by 32-bit adds, and the causal mask's branch is taken once per
// tile (MaskRowMax), so only the diagonal tiles pay for it. The kernel is
// persistent: a CTA per multiprocessor
// takes (query tile, head) tiles, longest first, in config.h's
// TmaTileOrder, the first by its index and the rest from an atomic counter;
// the producer loads a tile's Q while the consumers finish the last one.
// Layout: Sm90TmaSmem (config.h).
// CUDA device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_SM90_TMA_BODY_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_SM90_TMA_BODY_H_

#include <cstdint>

#include "attention/gpu/dense_mha/attention_args.h"
#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/dense_mha/sm90_tile.h"
#include "attention/gpu/dense_mha/tma_maps.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/sm90_pipeline.h"
#include "attention/gpu/device/softmax.h"

#if defined(DSA_GPU_CUDA)

namespace dsa::attention::gpu::dense_mha {

template <int kQk, int kV, int kN>
struct Sm90TmaBody {
  using L = Sm90TmaSmem<kQk, kV, kN>;
  using Ring = RingStage<L::kStages>;
  using Roles = Sm90TmaRoles;
  using WgS = ::dsa::gpu::WarpgroupBf16Mma<kN>;
  using WgO = ::dsa::gpu::WarpgroupBf16MmaRegA<kV>;
  using WgOAcc = ::dsa::gpu::WarpgroupBf16Mma<kV>;  // accumulator layout
  static constexpr int kPSteps = kN / 16;
  static constexpr int kConsumerWarps = Roles::kConsumerThreads / kDsaWarpSize;

  // Shared-memory addresses of the tiles and barriers; `base` is 1024-byte
  // aligned (the swizzle's period).
  struct Smem {
    uint32_t base;
    __device__ uint32_t q() const { return base + L::kQ; }
    __device__ uint32_t k(int s) const { return base + L::kK + s * L::kKBytes; }
    __device__ uint32_t v(int s) const {
      return base + L::kV0 + s * L::kVBytes;
    }
    __device__ uint32_t full_q() const { return base + L::kBar; }
    __device__ uint32_t empty_q() const { return base + L::kBar + 8; }
    __device__ uint32_t full_k(int s) const {
      return base + L::kBar + 8 * (2 + s);
    }
    __device__ uint32_t empty_k(int s) const {
      return base + L::kBar + 8 * (2 + L::kStages + s);
    }
    __device__ uint32_t full_v(int s) const {
      return base + L::kBar + 8 * (2 + 2 * L::kStages + s);
    }
    __device__ uint32_t empty_v(int s) const {
      return base + L::kBar + 8 * (2 + 3 * L::kStages + s);
    }
  };

  __device__ __forceinline__ static void Run(const AttentionArgs& a,
                                             const TmaMaps& maps,
                                             uint8_t* smem_raw) {
    static_assert(kBlockM == kSm90BlockM, "two warpgroups of 64 rows");
    const uint32_t raw =
        static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
    const uint32_t base = (raw + 1023u) & ~1023u;
    const Smem sm{base};
    // The tile slot, as a generic pointer for plain loads and stores.
    volatile int32_t* slot = reinterpret_cast<volatile int32_t*>(
        smem_raw + (base - raw) + L::kTileSlot);
    const int warp = threadIdx.x / kDsaWarpSize;
    const int lane = threadIdx.x % kDsaWarpSize;
    if (threadIdx.x == 0) InitBarriers(sm);
    __syncthreads();
    if (warp >= kConsumerWarps) {
      WarpgroupRegsDecrease<Roles::kProducerRegs>();
      if (warp != kConsumerWarps || lane != 0) return;  // one lane copies
      Producer(a, maps, sm, slot);
      return;
    }
    WarpgroupRegsIncrease<Roles::kConsumerRegs>();
    Consumer(a, sm, slot, warp, lane);
  }

  __device__ __forceinline__ static void InitBarriers(const Smem& sm) {
    MbarInit(sm.full_q(), 1);
    // Lane 0 of each consumer warp releases Q and the ring's stages.
    MbarInit(sm.empty_q(), kConsumerWarps);
    for (int s = 0; s < L::kStages; ++s) {
      MbarInit(sm.full_k(s), 1);
      MbarInit(sm.full_v(s), 1);
      MbarInit(sm.empty_k(s), kConsumerWarps);
      MbarInit(sm.empty_v(s), kConsumerWarps);
    }
    MbarFenceInit();
  }

  // Key tiles [0, last] of kN keys that a block's rows see.
  __device__ __forceinline__ static int LastKeyTile(const BlockWork& w) {
    return (w.first_pos + w.rows - 1) / kN;
  }

  // The producer (one lane), per tile of the CTA: once the consumers have
  // released the previous tile's Q, the tile's index into the slot and its
  // Q, then its K and V^T of key tiles last .. 0 into the rings, each stage
  // once the consumers have released it (the rings run on across tiles).
  // After the last tile, -1 into the slot. The slot's store is ordered
  // before the consumers' reads by full_q (an arrive releases, a wait
  // acquires).
  __device__ __forceinline__ static void Producer(const AttentionArgs& a,
                                                  const TmaMaps& maps,
                                                  const Smem& sm,
                                                  volatile int32_t* slot) {
    const int nope_boxes = a.nope / 64;
    int tile = blockIdx.x;
    int ring = 0;  // ring items issued so far
    for (int n = 0;; ++n) {
      MbarWait(sm.empty_q(), (n & 1) ^ 1);
      if (tile >= a.num_tiles) {
        *slot = -1;
        MbarArrive(sm.full_q());
        return;
      }
      // The next tile's index, fetched now so that the atomic's latency
      // passes while this tile's copies are issued.
      const int next =
          atomicAdd(a.tile_counter, 1) + static_cast<int>(gridDim.x);
      *slot = tile;
      const TmaTile tt =
          TmaTileOrder(tile, a.num_items, a.heads, a.heads_per_section);
      const BlockWork w = WorkAt(a, tt.item, tt.head);
      const int last = LastKeyTile(w);
      const int token0 = w.req.q_begin + w.i0;
      MbarExpectTx(sm.full_q(), L::kQBytes);
#pragma unroll
      for (int b = 0; b < kQk / 64; ++b) {
        TmaLoad3d(sm.q() + b * kBlockM * 128, &maps.q, 64 * b, w.head, token0,
                  sm.full_q());
      }
      for (int i = 0; i <= last; ++i) {
        const int t = last - i;
        const int s = Ring::Stage(ring + i);
        const uint32_t parity = Ring::EmptyParity(ring + i);
        const int key_row = w.req.kv_row + t * kN;
        MbarWait(sm.empty_k(s), parity);
        MbarExpectTx(sm.full_k(s), L::kKBytes);
#pragma unroll
        for (int b = 0; b < kQk / 64; ++b) {
          const uint32_t dst = sm.k(s) + b * kN * 128;
          if (b < nope_boxes) {
            TmaLoad2d(dst, &maps.knope,
                      static_cast<int32_t>(w.head_knope) + 64 * b, key_row,
                      sm.full_k(s));
          } else {
            TmaLoad2d(dst, &maps.kpe, a.lora + 64 * (b - nope_boxes), key_row,
                      sm.full_k(s));
          }
        }
        MbarWait(sm.empty_v(s), parity);
        MbarExpectTx(sm.full_v(s), L::kVBytes);
#pragma unroll
        for (int b = 0; b < L::kVBoxes64; ++b) {
          TmaLoad2d(sm.v(s) + b * kV * 128, &maps.vt, key_row + 64 * b,
                    static_cast<int32_t>(w.head_vt), sm.full_v(s));
        }
        if constexpr (L::kVTail) {
          TmaLoad2d(sm.v(s) + L::kVTailOffset, &maps.vt_tail,
                    key_row + 64 * L::kVBoxes64,
                    static_cast<int32_t>(w.head_vt), sm.full_v(s));
        }
      }
      ring += last + 1;
      tile = next;
    }
  }

  // A descriptor moved by `bytes` of shared memory (a multiple of 16): one
  // 32-bit add. The start address is the low 14 bits (addresses below
  // 256 KB), which no move inside the allocation carries out of; the other
  // fields stay. Each product's descriptors are its operands' stage
  // descriptors (built once, outside the tile loop) moved by constants,
  // rather than a mask, a shift and two ORs a step.
  __device__ __forceinline__ static uint64_t DescPlus(uint64_t desc,
                                                      uint32_t bytes) {
    const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
    return (desc & 0xffffffff00000000ull) | lo;
  }

  // S = Q K^T of the tile in K stage `k_desc` (the stage's descriptor);
  // `q_desc`: this warpgroup's 64 rows of Q (64 rows into each 128-row
  // block of 64 columns).
  __device__ __forceinline__ static void IssueScores(
      float (&sc)[WgS::kAccPerThread], uint64_t q_desc, uint64_t k_desc) {
    WgS::template IssueWith<kQk / 16>(
        sc,
        [&](int j) {
          return DescPlus(q_desc, (j / 4) * kBlockM * 128 + (j % 4) * 32);
        },
        [&](int j) {
          return DescPlus(k_desc, (j / 4) * kN * 128 + (j % 4) * 32);
        },
        false);
  }

  // O += P V of the tile in V stage `v_desc` (128-byte swizzle) /
  // `v_tail_desc` (the 32-byte swizzled 16-key box of an 80-key tile):
  // steps of 16 keys in the 64-key boxes, then the tail box's one step.
  __device__ __forceinline__ static void IssuePV(float (&o)[WgO::kAccPerThread],
                                                 uint32_t (&p_frag)[kPSteps][4],
                                                 uint64_t v_desc,
                                                 uint64_t v_tail_desc) {
    WgO::IssueWith(
        o, p_frag,
        [&](int j) {
          return j < 4 * L::kVBoxes64
                     ? DescPlus(v_desc, (j / 4) * kV * 128 + (j % 4) * 32)
                     : v_tail_desc;
        },
        true);
  }

  // The stage descriptors: K and V^T of stage s (V^T's tail box too, for
  // 80-key tiles), from stage 0's moved by whole stages.
  struct StageDescs {
    uint64_t k0, v0, v_tail0;
    __device__ __forceinline__ uint64_t k(int s) const {
      return DescPlus(k0, s * L::kKBytes);
    }
    __device__ __forceinline__ uint64_t v(int s) const {
      return DescPlus(v0, s * L::kVBytes);
    }
    __device__ __forceinline__ uint64_t v_tail(int s) const {
      return DescPlus(v_tail0, s * L::kVBytes);
    }
  };

  // A consumer warpgroup, per tile the producer hands it: its 64 query rows
  // against every key tile, then the epilogue (which runs while the
  // producer loads the next tile's Q and first key tiles).
  __device__ __forceinline__ static void Consumer(const AttentionArgs& a,
                                                  const Smem& sm,
                                                  volatile int32_t* slot,
                                                  int warp, int lane) {
    const int group = warp / 4;
    const int warp_in_group = warp % 4;
    const int row_base = group * kSm90GroupRows;
    const uint64_t q_desc =
        ::dsa::gpu::Bf16Sw128Descriptor(sm.q() + row_base * 128);
    const StageDescs stage{
        ::dsa::gpu::Bf16Sw128Descriptor(sm.k(0)),
        ::dsa::gpu::Bf16Sw128Descriptor(sm.v(0)),
        ::dsa::gpu::Bf16Sw32Descriptor(sm.v(0) + L::kVTailOffset)};
    // Group 0 issues first; the turns run on across tiles, and group 0
    // takes the last one group 1 passes (Finish).
    const PingPong<Roles::kConsumerThreads> turn{group};
    turn.Start();
    int ring = 0;  // ring items consumed so far
    for (int n = 0;; ++n) {
      MbarWait(sm.full_q(), n & 1);
      const int tile = *slot;
      if (tile < 0) break;
      const TmaTile tt =
          TmaTileOrder(tile, a.num_items, a.heads, a.heads_per_section);
      const BlockWork w = WorkAt(a, tt.item, tt.head);
      const int last = LastKeyTile(w);
      float o[WgO::kAccPerThread];
#pragma unroll
      for (int e = 0; e < WgO::kAccPerThread; ++e) o[e] = 0.0f;
      Sm90Softmax softmax;
      softmax.Init();
      uint32_t p_frag[kPSteps][4];

      // Leading key tiles that start past this warpgroup's last row see
      // none of its rows (with 64-key tiles, the diagonal tile of group 0
      // in a full query tile): the group takes its turn there without
      // issuing and releases the stages unread, and its products start at
      // tile `first`. The last tile (keys from 0) is never skipped.
      const int group_last_pos = w.first_pos + row_base + kSm90GroupRows - 1;
      int first = 0;
      while (first < last && (last - first) * kN > group_last_pos) ++first;

      for (int i = 0; i <= last; ++i) {
        const int t = last - i;
        const int s = Ring::Stage(ring + i);
        MbarWait(sm.full_k(s), Ring::FullParity(ring + i));
        if (i < first) {
          turn.WaitTurn();
          turn.PassTurn();
          // The V stage is released only once filled, so that no release
          // runs ahead of the other group's for the stage's previous use.
          MbarWait(sm.full_v(s), Ring::FullParity(ring + i));
          if (lane == 0) {
            MbarArrive(sm.empty_k(s));
            MbarArrive(sm.empty_v(s));
          }
          continue;
        }
        turn.WaitTurn();
        float sc[WgS::kAccPerThread];
        IssueScores(sc, q_desc, stage.k(s));
        const bool pv_pending = i > first;
        if (pv_pending) {
          const int sp = Ring::Stage(ring + i - 1);
          MbarWait(sm.full_v(sp), Ring::FullParity(ring + i - 1));
          IssuePV(o, p_frag, stage.v(sp), stage.v_tail(sp));
          turn.PassTurn();
          // S_t was committed first: waiting for all but the newest group
          // leaves PV_{t+1} running.
          asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
          WgS::FenceOperands(sc);
        } else {
          turn.PassTurn();
          WgS::Wait(sc);
        }
        // Q K^T of tile t has read K_t: the stage may be refilled; after
        // the last, Q may be too.
        if (lane == 0) {
          MbarArrive(sm.empty_k(s));
          if (i == last) MbarArrive(sm.empty_q());
        }

        // Probabilities exp2(s * scale_log2 - base): the scale folded into
        // one FFMA per score, the row maxima scaled once (scale > 0).
        const int key0 = t * kN;
        float mx[kSm90RowSlots], base[kSm90RowSlots], alpha[kSm90RowSlots];
        MaskRowMax<WgS>(sc, key0 + kN - 1 > w.first_pos, key0,
                        w.first_pos + row_base, warp_in_group, lane, mx);
#pragma unroll
        for (int r = 0; r < kSm90RowSlots; ++r) mx[r] *= a.scale_log2;
        softmax.Update(mx, base, alpha);
#pragma unroll
        for (int e = 0; e < WgS::kAccPerThread; e += 2) {
          const int slot_e = (e / 2) % 2;
          sc[e] = Exp2Ftz(fmaf(sc[e], a.scale_log2, -base[slot_e]));
          sc[e + 1] = Exp2Ftz(fmaf(sc[e + 1], a.scale_log2, -base[slot_e]));
          softmax.row_sum[slot_e] += sc[e] + sc[e + 1];
        }
        // PV_{t+1} done (unconditional wait: nothing pends at i = first,
        // and a wait ptxas cannot pair with its issue serialises every
        // wgmma).
        WgO::Wait(o, p_frag);
        if (pv_pending && lane == 0) {
          MbarArrive(sm.empty_v(Ring::Stage(ring + i - 1)));
        }
        // O rescaled by alpha, unless no row of the warp changed its
        // maximum (alpha exactly exp2(0) = 1 on every lane): then the 128
        // multiplies a thread would leave O as it is, bit for bit.
        bool same_max = true;
#pragma unroll
        for (int r = 0; r < kSm90RowSlots; ++r) {
          same_max = same_max && alpha[r] == 1.0f;
        }
        if (!__all_sync(0xffffffffu, same_max)) {
#pragma unroll
          for (int e = 0; e < WgO::kAccPerThread; ++e) {
            o[e] *= alpha[(e / 2) % 2];
          }
        }
        WgO::template FromAccumulator<kN>(sc, p_frag);
      }
      const int sp = Ring::Stage(ring + last);
      MbarWait(sm.full_v(sp), Ring::FullParity(ring + last));
      IssuePV(o, p_frag, stage.v(sp), stage.v_tail(sp));
      WgO::Wait(o, p_frag);
      if (lane == 0) MbarArrive(sm.empty_v(sp));
      ring += last + 1;

      float inv[kSm90RowSlots];
      softmax.Finalize(inv);
      if (a.out_chunks) {
        StoreRowsBf16Chunks<WgOAcc>(a, w, o, inv, row_base, warp_in_group,
                                    lane);
      } else {
        StoreRows<WgOAcc>(a, w, o, inv, row_base, warp_in_group, lane);
      }
    }
    turn.Finish();
  }
};

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_GPU_CUDA

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_SM90_TMA_BODY_H_
