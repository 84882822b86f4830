// The attention kernels (the __global__ wrappers of the bodies) and their
// launch for one (qk, v) width pair, LaunchAttention<kQk, kV>:
//   DenseAttentionKernel<kQk, kV, kBody>   kBody: DenseMhaBody::kWarp
//     (warp_body.h) or kSm90Pipelined (sm90_pipelined_body.h), kThreads
//     threads, shared memory as their layouts say;
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

template <int kQk, int kV, int kBody>
__global__ void __launch_bounds__(kThreads, 1)
    DenseAttentionKernel(const AttentionArgs a) {
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

// Launches `kKernel` with kBytes of dynamic shared memory, once the device
// allows that much.
template <auto kKernel, size_t kBytes, typename... Args>
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
  LaunchResult r = OptInSharedMemory<kKernel, static_cast<int>(kBytes)>(
      "dense_mha_prefill: shared memory opt-in");
  if (!r.ok()) return r;
  hipLaunchKernelGGL(kKernel, grid, dim3(threads), kBytes, l.stream, args...);
  return CheckLaunch("dense_mha_prefill attention");
}

#if defined(DSA_GPU_CUDA)
// A bf16 tensor map with 128-byte swizzle: dims innermost first, strides
// (bytes) of dims 1.., the box in elements.
inline LaunchResult MakeTensorMap(CUtensorMap* map, const void* base, int rank,
                                  const cuuint64_t* dims,
                                  const cuuint64_t* strides,
                                  const cuuint32_t* box, const char* what) {
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = TensorMapEncoder()(
      map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base),
      dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS) return LaunchResult{};
  LaunchResult out;
  out.code = LaunchCode::kRuntimeError;
  std::snprintf(out.message, sizeof(out.message),
                "dense_mha_prefill: cuTensorMapEncodeTiled (%s) failed: %d",
                what, static_cast<int>(r));
  return out;
}

// The TMA body's tensor maps over q and the scratch (attention_args.h),
// boxes of 64 columns by kBlockM queries / tile_keys keys / v value dims.
template <int kV>
LaunchResult MakeTmaMaps(const AttentionArgs& a, int tile_keys, TmaMaps* maps) {
  const int qk = a.nope + a.rope;
  const int64_t kv_rows = a.vt_ld;
  const cuuint32_t keys = static_cast<cuuint32_t>(tile_keys);
  {
    const cuuint64_t dims[3] = {static_cast<cuuint64_t>(qk),
                                static_cast<cuuint64_t>(a.heads),
                                static_cast<cuuint64_t>(a.tokens)};
    const cuuint64_t strides[2] = {static_cast<cuuint64_t>(qk) * 2,
                                   static_cast<cuuint64_t>(qk) * a.heads * 2};
    const cuuint32_t box[3] = {64, 1, kBlockM};
    LaunchResult r = MakeTensorMap(&maps->q, a.q, 3, dims, strides, box, "q");
    if (!r.ok()) return r;
  }
  if (a.nope > 0) {
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(a.knope_ld),
                                static_cast<cuuint64_t>(kv_rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(a.knope_ld) * 2};
    const cuuint32_t box[2] = {64, keys};
    LaunchResult r =
        MakeTensorMap(&maps->knope, a.knope, 2, dims, strides, box, "K_nope");
    if (!r.ok()) return r;
  }
  {
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(a.lat_ld),
                                static_cast<cuuint64_t>(kv_rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(a.lat_ld) * 2};
    const cuuint32_t box[2] = {64, keys};
    LaunchResult r =
        MakeTensorMap(&maps->kpe, a.lat, 2, dims, strides, box, "k_pe");
    if (!r.ok()) return r;
  }
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(kv_rows),
                              static_cast<cuuint64_t>(a.heads) * a.v};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(kv_rows) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(kV)};
  return MakeTensorMap(&maps->vt, a.vt, 2, dims, strides, box, "V^T");
}
#endif  // DSA_GPU_CUDA

template <int kQk, int kV>
LaunchResult LaunchAttention(const AttentionLaunch& l) {
  // The cp.async bodies: a block per (work item, head).
  const dim3 blocks(l.items, l.args.heads);
  switch (l.choice.body) {
    case DenseMhaBody::kWarp:
      return LaunchWithSharedMemory<&DenseAttentionKernel<kQk, kV, kWarpBody>,
                                    WarpSmem<kQk, kV>::kBytes>(
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
      LaunchResult r = MakeTmaMaps<kV>(l.args, kN, &maps);
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
