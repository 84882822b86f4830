// IndexerLogitsLaunch and IndexerLogitsPath (launch.h): the argument checks,
// the plan (heuristics.h) for this device, the TMA tensor maps over the
// paged cache, and the launch of the planned kernel instance (launchers.h).
//
// The product is a GEMM per request: keys [n, 128] times the queries of a
// block of rows, [rows * heads, 128]^T, followed by an epilogue that scales
// each score by its key's scale, applies relu, weights it by the head's
// weight and sums over heads. The bodies: matrix_kernels.h (the matrix and
// FMA kernels), persistent_kernel.h (sm_90a).
#include <cstdint>
#include <cstdio>

#include "attention/gpu/device/features.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/small_cache.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/heuristics.h"
#include "attention/gpu/indexer/launch.h"
#include "attention/gpu/indexer/launchers.h"

namespace dsa::attention::gpu {
namespace indexer {
namespace {

constexpr const char* kOp = "indexer_logits";

LaunchResult CheckParams(const IndexerLogitsParams& p) {
  if (p.rows < 0 || p.heads < 1 || p.head_dim < 1 || p.num_blocks < 1 ||
      p.block_size < 1 || p.num_requests < 1 || p.max_blocks_per_request < 1 ||
      p.block_table_stride < p.max_blocks_per_request || p.width < 0 ||
      p.logits_stride < p.width) {
    return Invalid(kOp,
                   "sizes: rows %lld, heads %d, head_dim %d, num_blocks %lld, "
                   "block_size %d, num_requests %d, max_blocks %d, "
                   "block_table_stride %lld, width %lld, logits_stride %lld",
                   static_cast<long long>(p.rows), p.heads, p.head_dim,
                   static_cast<long long>(p.num_blocks), p.block_size,
                   p.num_requests, p.max_blocks_per_request,
                   static_cast<long long>(p.block_table_stride),
                   static_cast<long long>(p.width),
                   static_cast<long long>(p.logits_stride));
  }
  if (p.rows > 0x7fffffff) {
    return Invalid(kOp, "%lld rows, at most 2^31 - 1 per launch",
                   static_cast<long long>(p.rows));
  }
  if (p.q_fp8 == nullptr || p.head_weights == nullptr || p.k_cache == nullptr ||
      p.block_table == nullptr || p.row_request == nullptr ||
      p.row_key_start == nullptr || p.row_key_end == nullptr ||
      p.logits == nullptr) {
    return Invalid(kOp, "a device pointer is null");
  }
  if (reinterpret_cast<uintptr_t>(p.k_cache) % 4 != 0) {
    return Invalid(kOp, "k_cache is not 4-byte aligned (its fp32 scales)");
  }
  return LaunchResult{};
}

#if defined(DSA_GPU_CUDA)
// Tensor maps over the paged cache for TMA key tiles: the key values as
// [num_blocks][block_size][128] bytes (pages block_size * 132 bytes apart),
// read in 64-key boxes with 128-byte swizzle (the layout wgmma's
// DescriptorSwizzle128 reads), and the scales as [num_blocks][block_size]
// floats (from byte block_size * 128 of each page), read 64 at a time.
// False when the driver refuses them.
bool EncodeKeyMaps(const IndexerLogitsParams& p, CUtensorMap* key_map,
                   CUtensorMap* scale_map) {
  const EncodeTiledFn encode = TensorMapEncoder();
  if (encode == nullptr) return false;
  const cuuint64_t page_bytes =
      static_cast<cuuint64_t>(p.block_size) * (kHeadDim + 4);
  const cuuint64_t key_dims[3] = {kHeadDim,
                                  static_cast<cuuint64_t>(p.block_size),
                                  static_cast<cuuint64_t>(p.num_blocks)};
  const cuuint64_t key_strides[2] = {kHeadDim, page_bytes};
  const cuuint32_t key_box[3] = {kHeadDim, kTileKeys, 1};
  const cuuint32_t unit[3] = {1, 1, 1};
  uint8_t* cache = const_cast<uint8_t*>(p.k_cache);
  if (encode(key_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, cache, key_dims,
             key_strides, key_box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    return false;
  }
  const cuuint64_t scale_dims[2] = {static_cast<cuuint64_t>(p.block_size),
                                    static_cast<cuuint64_t>(p.num_blocks)};
  const cuuint64_t scale_strides[1] = {page_bytes};
  const cuuint32_t scale_box[2] = {kTileKeys, 1};
  return encode(scale_map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2,
                cache + static_cast<int64_t>(p.block_size) * kHeadDim,
                scale_dims, scale_strides, scale_box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                CU_TENSOR_MAP_L2_PROMOTION_NONE,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The maps of the caches this thread used recently are kept, one entry per
// indexer K cache (each layer has its own; 128 entries hold every layer of
// the largest model, so that a step's calls all find theirs): encoding
// costs host time between the launches (decode steps take ~30 us on the
// device).
struct KeyMapsKey {
  const uint8_t* cache = nullptr;
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  bool operator==(const KeyMapsKey& o) const {
    return cache == o.cache && num_blocks == o.num_blocks &&
           block_size == o.block_size;
  }
};
struct KeyMaps {
  CUtensorMap key_map, scale_map;
};
using KeyMapsCache = SmallCache<KeyMapsKey, KeyMaps, 128>;

bool MakeKeyMaps(const IndexerLogitsParams& p, CUtensorMap* key_map,
                 CUtensorMap* scale_map) {
  const KeyMaps* maps = ThreadCache<KeyMapsCache>().Find(
      KeyMapsKey{p.k_cache, p.num_blocks, p.block_size}, [&](KeyMaps* made) {
        return EncodeKeyMaps(p, &made->key_map, &made->scale_map);
      });
  if (maps == nullptr) return false;
  *key_map = maps->key_map;
  *scale_map = maps->scale_map;
  return true;
}

// The persistent kernel instance of the plan: rows a block are 1, 2 or 4
// times those of 128 heads (narrow blocks 1, wide 2); four math groups on
// wide blocks only.
LaunchResult LaunchPersistentPlan(const IndexerLogitsParams& p,
                                  const LogitsPlan& plan,
                                  const CUtensorMap& key_map,
                                  const CUtensorMap& scale_map, int device,
                                  hipStream_t stream) {
  using Launcher = LaunchResult (*)(const IndexerLogitsParams&,
                                    const LogitsPlan&, const CUtensorMap&,
                                    const CUtensorMap&, int, hipStream_t);
  // [narrow, wide two groups, wide four][tma][log2(rows a block / rows at
  // 128 heads)]
  static constexpr Launcher kLaunchers[3][2][3] = {
      {{LaunchPersistent<1, false, false, 2>,
        LaunchPersistent<2, false, false, 2>,
        LaunchPersistent<4, false, false, 2>},
       {LaunchPersistent<1, false, true, 2>,
        LaunchPersistent<2, false, true, 2>,
        LaunchPersistent<4, false, true, 2>}},
      {{LaunchPersistent<2, true, false, 2>,
        LaunchPersistent<4, true, false, 2>,
        LaunchPersistent<8, true, false, 2>},
       {LaunchPersistent<2, true, true, 2>, LaunchPersistent<4, true, true, 2>,
        LaunchPersistent<8, true, true, 2>}},
      {{LaunchPersistent<2, true, false, 4>,
        LaunchPersistent<4, true, false, 4>,
        LaunchPersistent<8, true, false, 4>},
       {LaunchPersistent<2, true, true, 4>, LaunchPersistent<4, true, true, 4>,
        LaunchPersistent<8, true, true, 4>}}};
  const int rows_at_128_heads = plan.wide ? 2 : 1;
  const int step = plan.rows_per_block == rows_at_128_heads       ? 0
                   : plan.rows_per_block == 2 * rows_at_128_heads ? 1
                                                                  : 2;
  const int kind = plan.math_groups == 4 ? 2 : plan.wide ? 1 : 0;
  return kLaunchers[kind][plan.tma_keys][step](p, plan, key_map, scale_map,
                                               device, stream);
}
#endif  // DSA_GPU_CUDA

template <::dsa::gpu::Fp8Format F>
LaunchResult LaunchPlan(const IndexerLogitsParams& p, const LogitsPlan& plan,
                        hipStream_t stream) {
  switch (plan.body) {
    case IndexerLogitsBody::kFma:
      return LaunchFma<F>(p, plan, stream);
    case IndexerLogitsBody::kWarpMma:
    case IndexerLogitsBody::kWarpgroupMma:
      return LaunchMatrix<F>(p, plan, stream);
    default:
      return Invalid(kOp, "body %s is not built for this encoding",
                     BodyName(plan.body));
  }
}

}  // namespace
}  // namespace indexer

SmallCacheStats IndexerLogitsKeyMapStats() {
#if defined(DSA_GPU_CUDA)
  return ThreadCache<indexer::KeyMapsCache>().stats();
#else
  return SmallCacheStats();
#endif
}

const char* IndexerLogitsPath(const IndexerLogitsParams& params,
                              const IndexerLogitsOptions& options) {
  DeviceFeatures features;
  indexer::LogitsPlan plan;
  if (!CurrentDeviceFeatures(&features).ok() ||
      !indexer::PlanIndexerLogits(params, options, features, &plan).ok()) {
    return "none";
  }
  return indexer::LogitsPathName(plan);
}

LaunchResult IndexerLogitsLaunch(const IndexerLogitsParams& p, void* stream,
                                 const IndexerLogitsOptions& options) {
  using indexer::kOp;
  if (p.rows == 0) return LaunchResult{};
  LaunchResult r = indexer::CheckParams(p);
  if (!r.ok()) return r;
  DeviceFeatures features;
  r = CurrentDeviceFeatures(&features);
  if (!r.ok()) return r;
  indexer::LogitsPlan plan;
  r = indexer::PlanIndexerLogits(p, options, features, &plan);
  if (!r.ok()) return r;
  auto s = static_cast<hipStream_t>(stream);
  if (plan.body == IndexerLogitsBody::kPersistent) {
#if defined(DSA_GPU_CUDA)
    CUtensorMap key_map{}, scale_map{};
    if (plan.tma_keys && !indexer::MakeKeyMaps(p, &key_map, &scale_map)) {
      if (options.keys == IndexerLogitsKeys::kTma) {
        r.code = LaunchCode::kRuntimeError;
        std::snprintf(r.message, sizeof(r.message),
                      "%s: the driver refused the key tiles' tensor maps", kOp);
        return r;
      }
      // The driver refused the maps: the same plan with cp.async keys.
      IndexerLogitsOptions cp_async = options;
      cp_async.keys = IndexerLogitsKeys::kCpAsync;
      r = indexer::PlanIndexerLogits(p, cp_async, features, &plan);
      if (!r.ok()) return r;
    }
    return indexer::LaunchPersistentPlan(p, plan, key_map, scale_map,
                                         features.device, s);
#else
    return Invalid(kOp, "the persistent body is NVIDIA's");
#endif
  }
  return p.encoding == Fp8Encoding::kE4m3fnuz
             ? indexer::LaunchPlan<::dsa::gpu::Fp8Format::kE4m3fnuz>(p, plan, s)
             : indexer::LaunchPlan<::dsa::gpu::Fp8Format::kE4m3fn>(p, plan, s);
}

}  // namespace dsa::attention::gpu
