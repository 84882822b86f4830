// The attention kernels (the __global__ wrappers of the bodies) and their
// launch for one (qk, v) width pair, LaunchAttention<kQk, kV>:
//   DenseAttentionKernel<kQk, kV, kBody>   kBody: DenseMhaBody::kWarp
//     (warp_body.h; on AMD its MFMA form, mfma_body.h, in static LDS) or
//     kSm90Pipelined (sm90_pipelined_body.h), kThreads threads, shared
//     memory as their layouts say;
//   DenseAttentionTmaKernel<kQk, kV, kN>   sm90_tma_body.h, kN keys a tile
//     (TmaTileKeys), its three warpgroups, the tensor maps as parameters.
// The cp.async bodies run a block per (work item, head); the TMA body is
// persistent, on the CTAs of its schedule (heuristics.h). Included by
// instantiations/ only. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_ATTENTION_KERNELS_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_ATTENTION_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "attention/gpu/dense_mha/attention_args.h"
#include "attention/gpu/dense_mha/attention_launch.h"
#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/dense_mha/mfma_body.h"
#include "attention/gpu/dense_mha/warp_body.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"

#if defined(DSA_GPU_CUDA)
#include "attention/gpu/dense_mha/sm90_pipelined_body.h"
#include "attention/gpu/dense_mha/sm90_tma_body.h"
#endif

namespace dsa::attention::gpu::dense_mha {

constexpr int kWarpBody = static_cast<int>(DenseMhaBody::kWarp);
constexpr int kSm90PipelinedBody =
    static_cast<int>(DenseMhaBody::kSm90Pipelined);

// The warp body's shared memory: dynamic on NVIDIA (WarpSmem, opted in at
// launch); static on AMD (MfmaSmem, in the code object's metadata).
#if defined(DSA_GPU_ROCM)
template <int kQk, int kV>
constexpr size_t kWarpBodyDynamicBytes = 0;
template <int kQk, int kV>
constexpr size_t kWarpBodyBytes = MfmaSmem<kQk, kV>::kBytes;
#else
template <int kQk, int kV>
constexpr size_t kWarpBodyDynamicBytes = WarpSmem<kQk, kV>::kBytes;
template <int kQk, int kV>
constexpr size_t kWarpBodyBytes = WarpSmem<kQk, kV>::kBytes;
#endif

template <int kQk, int kV, int kBody>
__global__ void __launch_bounds__(kThreads, 1)
    DenseAttentionKernel(const AttentionArgs a) {
#if defined(DSA_GPU_ROCM)
  static_assert(kBody == kWarpBody, "AMD runs the warp body only");
  __shared__ __align__(16) uint16_t lds[MfmaSmem<kQk, kV>::kElems];
  MfmaBody<kQk, kV>(a, lds);
#else
  extern __shared__ __align__(128) uint16_t smem[];
  if constexpr (kBody == kWarpBody) {
    WarpBody<kQk, kV>(a, smem);
  } else {
    static_assert(kBody == kSm90PipelinedBody, "a cp.async body");
#if defined(DSA_GPU_CUDA)
    if constexpr (::dsa::gpu::kHasWarpgroupBf16Mma) {
      Sm90PipelinedBody<kQk, kV>(a, smem);
    }
#endif
  }
#endif
}

#if defined(DSA_GPU_CUDA)
template <int kQk, int kV, int kN>
__global__ void __launch_bounds__(Sm90TmaRoles::kThreads, 1)
    DenseAttentionTmaKernel(const __grid_constant__ AttentionArgs a,
                            const __grid_constant__ TmaMaps maps) {
  extern __shared__ __align__(1024) uint8_t tma_smem[];
  if constexpr (::dsa::gpu::kHasWarpgroupBf16Mma) {
    Sm90TmaBody<kQk, kV, kN>::Run(a, maps, tma_smem);
  }
}
#endif

// Launches `kKernel`, whose block needs kBytes of shared memory, kDynamic
// of them dynamic (the rest static), once the device allows that much.
template <auto kKernel, size_t kBytes, size_t kDynamic = kBytes,
          typename... Args>
LaunchResult LaunchWithSharedMemory(const AttentionLaunch& l, dim3 grid,
                                    int threads, const char* body,
                                    Args... args) {
  if (static_cast<size_t>(l.features.max_shared_bytes_per_block) < kBytes) {
    return Invalid("dense_mha_prefill",
                   "the %s body at head dims qk<=%d v<=%d needs %zu bytes of "
                   "shared memory per block; this device allows %d",
                   body, l.choice.qk_width, l.choice.v_width, kBytes,
                   l.features.max_shared_bytes_per_block);
  }
  if constexpr (kDynamic > 0) {
    LaunchResult r = OptInSharedMemory<kKernel, static_cast<int>(kDynamic)>(
        l.features.device, "dense_mha_prefill: shared memory opt-in");
    if (!r.ok()) return r;
  }
  hipLaunchKernelGGL(kKernel, grid, dim3(threads), kDynamic, l.stream, args...);
  return CheckLaunch("dense_mha_prefill attention");
}

template <int kQk, int kV>
LaunchResult LaunchAttention(const AttentionLaunch& l) {
  // The cp.async bodies: a block per (work item, head).
  const dim3 blocks(l.items, l.args.heads);
  switch (l.choice.body) {
    case DenseMhaBody::kWarp:
      return LaunchWithSharedMemory<&DenseAttentionKernel<kQk, kV, kWarpBody>,
                                    kWarpBodyBytes<kQk, kV>,
                                    kWarpBodyDynamicBytes<kQk, kV>>(
          l, blocks, kThreads, "warp", l.args);
#if defined(DSA_GPU_CUDA)
    case DenseMhaBody::kSm90Pipelined:
      return LaunchWithSharedMemory<
          &DenseAttentionKernel<kQk, kV, kSm90PipelinedBody>,
          Sm90PipelinedSmem<kQk, kV>::kBytes>(l, blocks, kThreads,
                                              "sm90-pipelined", l.args);
    case DenseMhaBody::kSm90Tma: {
      constexpr int kN = TmaTileKeys(kQk, kV);
      if (l.choice.tma_tile_keys != kN) break;
      TmaMaps maps;
      LaunchResult r = CachedTmaMaps(l.args, kN, kV, &maps);
      if (!r.ok()) return r;
      // Persistent: the schedule's CTAs (heuristics.h).
      return LaunchWithSharedMemory<&DenseAttentionTmaKernel<kQk, kV, kN>,
                                    Sm90TmaSmem<kQk, kV, kN>::kBytes>(
          l, dim3(l.schedule.ctas), Sm90TmaRoles::kThreads, "sm90-tma", l.args,
          maps);
    }
#endif
    default:
      break;
  }
  return Invalid("dense_mha_prefill",
                 "no %s kernel in this build for head dims qk<=%d v<=%d",
                 AttentionPathName(l.choice), kQk, kV);
}

#define DSA_DENSE_MHA_INSTANTIATE_ATTENTION(QK, V) \
  template LaunchResult LaunchAttention<QK, V>(const AttentionLaunch&);

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_ATTENTION_KERNELS_H_
