// The persistent, warp-specialised logits kernel for sm_90a with e4m3fn data
// (what Hopper runs for 32, 64 and 128 heads), and its launcher
// (launchers.h; instantiated in instantiations/persistent_*.hip.cc).
//
// Why: at GLM-5.1's 32 x 128, T = 8192 causal, the key tiles streamed from
// L2 (the window sizes x 128 bytes per block of rows), not the matrix cores,
// paced the matrix kernel. So, as in DeepGEMM's fp8_mqa_logits, a CTA per
// multiprocessor walks (row block, key chunk) items, longest first, in a
// zigzag (persistent_work.h), with warps in roles (PersistentRoles,
// config.h):
//   - Producer (persistent_producer.h): -inf outside the rows' windows, the
//     item's queries and head weights into a two-deep ring, its key tiles
//     into a ring of Persistent::kStages stages (TMA or cp.async);
//   - two or four MathGroups (persistent_math.h): wgmma products of each
//     tile by 128 (row, head) columns, then the Epilogue
//     (persistent_epilogue.h).
// Layout of the dynamic shared memory: PersistentSmem (config.h).
// Device-compiler sources only (NVIDIA).
#ifndef DSA_ATTENTION_GPU_INDEXER_PERSISTENT_KERNEL_H_
#define DSA_ATTENTION_GPU_INDEXER_PERSISTENT_KERNEL_H_

#if defined(DSA_GPU_CUDA)

#include <cuda.h>

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/device/sm90_pipeline.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/heuristics.h"
#include "attention/gpu/indexer/launchers.h"
#include "attention/gpu/indexer/params.h"
#include "attention/gpu/indexer/persistent_math.h"
#include "attention/gpu/indexer/persistent_producer.h"
#include "attention/gpu/indexer/persistent_work.h"

namespace dsa::attention::gpu::indexer {

// kTma: key tiles and scales arrive by TMA through key_map / scale_map
// (block_size a multiple of 64; see logits_launch.hip.cc), else by cp.async.
template <::dsa::gpu::Fp8Format F, int R, bool kWide, bool kTma, int kGroups>
__global__ void __launch_bounds__(PersistentRoles<kGroups>::kThreads, 1)
    IndexerLogitsPersistentKernel(IndexerLogitsParams p, int splits,
                                  const __grid_constant__ CUtensorMap key_map,
                                  const __grid_constant__ CUtensorMap
                                      scale_map) {
  using L = PersistentSmem<kWide>;
  using Roles = PersistentRoles<kGroups>;
  static_assert(kWide || kGroups == 2, "four math groups take wide blocks");
  if constexpr (::dsa::gpu::kHasWarpgroupFp8Mma &&
                F == ::dsa::gpu::Fp8Format::kE4m3fn) {
    using WG = ::dsa::gpu::WarpgroupFp8Mma<kDependent<kHeadDim, F>>;
    static_assert(WG::kM == kTileKeys && WG::kN == Persistent::kCols,
                  "a warpgroup covers a tile's keys and a block's columns");
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    // 1 KB aligned whatever the runtime gives (the layout has the slack).
    const uint32_t raw_base = SharedAddress(smem_raw);
    const uint32_t base = (raw_base + 1023u) & ~1023u;
    uint8_t* const smem = smem_raw + (base - raw_base);
    const PsBarriers bars{base + L::kBarrierOffset};

    const int tid = threadIdx.x;
    const int lane = tid % kDsaWarpSize;
    if (tid == 0) {
      for (int s = 0; s < Persistent::kStages; ++s) {
        MbarInit(bars.FullKeys(s), kTma ? 1 : Roles::kProducerThreads);
        MbarInit(bars.EmptyKeys(s),
                 (kWide ? Persistent::kWideGroups : 1) * 128);
      }
      for (int s = 0; s < Persistent::kQueryStages; ++s) {
        MbarInit(bars.FullQueries(s), QueryCopiers<kTma, kGroups>());
        MbarInit(bars.EmptyQueries(s), Roles::kMathThreads);
      }
      MbarFenceInit();
    }
    __syncthreads();

    const PsWalk walk = WalkOf<R>(p, splits);
    if (tid >= Roles::kMathThreads) {
      if constexpr (Roles::kReallocate) {
        WarpgroupRegsDecrease<Roles::kProducerRegisters>();
      }
      Producer<R, kWide, kTma, kGroups, WG>(p, walk, base, bars, key_map,
                                            scale_map,
                                            tid - Roles::kMathThreads, lane);
      return;
    }
    if constexpr (Roles::kReallocate) {
      WarpgroupRegsIncrease<Roles::kMathRegisters>();
    }
    MathGroup<R, kWide, kTma, kGroups, WG>(p, walk, smem, bars);
  } else {
    (void)p;
    (void)splits;
    (void)key_map;
    (void)scale_map;
  }
}

template <int R, bool kWide, bool kTma, int kGroups>
LaunchResult LaunchPersistent(const IndexerLogitsParams& p,
                              const LogitsPlan& plan,
                              const CUtensorMap& key_map,
                              const CUtensorMap& scale_map, int device,
                              hipStream_t stream) {
  constexpr auto kernel =
      &IndexerLogitsPersistentKernel<::dsa::gpu::Fp8Format::kE4m3fn, R, kWide,
                                     kTma, kGroups>;
  constexpr int kBytes = PersistentSmem<kWide>::kSmemBytes;
  const LaunchResult r = OptInSharedMemory<kernel, kBytes>(
      device, "indexer_logits: shared memory opt-in");
  if (!r.ok()) return r;
  kernel<<<static_cast<unsigned>(plan.grid), PersistentRoles<kGroups>::kThreads,
           kBytes, stream>>>(p, plan.splits, key_map, scale_map);
  return CheckLaunch("indexer_logits");
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_GPU_CUDA

#endif  // DSA_ATTENTION_GPU_INDEXER_PERSISTENT_KERNEL_H_
