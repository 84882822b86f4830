// The MLA latent cache write's kernel (MlaCacheWriteLaunch, launch.h): per
// token, kv_c | k_pe into its paged cache entry, in bf16 or in the
// fp8_ds_mla layout (kv_lora_rank fp8 codes in tiles of 128, a float ue8m0
// scale per tile, then k_pe in bf16).
//
// Bytes bound it (1152 B read, 1152 B bf16 or 656 B fp8 written a token).
// One group of 32 lanes a token stages its row in shared memory (16-byte
// loads when aligned: staged_row.h), so that the stores of consecutive
// lanes are contiguous (16-byte bf16 stores when the entry is aligned).
// The row is read whether or not the slot is valid, so its load does not
// wait on the slot's.
#include <cstdint>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "attention/gpu/cache/config.h"
#include "attention/gpu/cache/heuristics.h"
#include "attention/gpu/cache/launch.h"
#include "attention/gpu/cache/row_group.h"
#include "attention/gpu/cache/staged_row.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace cache {

__global__ void __launch_bounds__(kThreads)
    MlaCacheWriteKernel(MlaCacheWriteParams p, Fp8Traits traits, int groups) {
  extern __shared__ float staged[];
  const int group = threadIdx.x / kLanes;
  const int lane = threadIdx.x % kLanes;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * groups + group;
  const int lora = p.kv_lora_rank;
  const int rope = p.rope_dim;
  float* y = staged + group * (lora + rope);
  int64_t slot = -1;
  const bool in_range = group < groups && t < p.tokens;
  if (in_range) {
    slot = p.slot_mapping[t * p.slot_mapping_stride];
  }
  const bool active = slot >= 0 && slot < p.num_blocks * p.block_size;
  if (in_range) {  // not waiting for the slot
    const int kv_esize = p.kv_c_type == FloatFormat::kFloat32 ? 4 : 2;
    const int pe_esize = p.k_pe_type == FloatFormat::kFloat32 ? 4 : 2;
    StageRow(static_cast<const char*>(p.kv_c) + t * p.kv_c_stride * kv_esize,
             p.kv_c_type, lora, y, lane);
    StageRow(static_cast<const char*>(p.k_pe) + t * p.k_pe_stride * pe_esize,
             p.k_pe_type, rope, y + lora, lane);
  }
  __syncthreads();
  if (!active) return;  // no barrier follows
  uint8_t* entry = p.kv_cache + (slot / p.block_size) * p.block_stride_bytes +
                   (slot % p.block_size) * p.slot_stride_bytes;
  if (p.layout == LatentLayout::kBFloat16) {
    const int n = lora + rope;
    if ((reinterpret_cast<uintptr_t>(entry) & 15) == 0 && n % 8 == 0) {
      uint4* out = reinterpret_cast<uint4*>(entry);
      for (int u = lane; u < n / 8; u += kLanes) {
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          w[k] = uint32_t{FloatToBf16(y[8 * u + 2 * k])} |
                 (uint32_t{FloatToBf16(y[8 * u + 2 * k + 1])} << 16);
        }
        out[u] = make_uint4(w[0], w[1], w[2], w[3]);
      }
    } else {
      for (int i = lane; i < n; i += kLanes)
        StoreBf16Bytes(entry + 2 * i, y[i]);
    }
    return;
  }
  const int tiles = lora / 128;
  for (int tile = 0; tile < tiles; ++tile) {
    const float* x = y + tile * 128;
    const float scale = GroupScale(x, 128, traits.max, lane);
    StoreCodes(x, 128, 1.0f / scale, traits, entry + tile * 128, lane);
    if (lane == 0) StoreFloatBytes(entry + lora + 4 * tile, scale);
  }
  uint8_t* pe = entry + lora + 4 * tiles;
  for (int i = lane; i < rope; i += kLanes)
    StoreBf16Bytes(pe + 2 * i, y[lora + i]);
}

}  // namespace cache

LaunchResult MlaCacheWriteLaunch(const MlaCacheWriteParams& p, void* stream) {
  cache::LaunchPlan plan;
  const LaunchResult planned = cache::PlanMlaCacheWrite(p, &plan);
  if (!planned.ok() || plan.blocks == 0) return planned;
  hipLaunchKernelGGL(cache::MlaCacheWriteKernel, dim3(plan.blocks),
                     dim3(plan.threads), plan.shared_bytes,
                     static_cast<hipStream_t>(stream), p,
                     cache::TraitsOf(p.encoding), plan.groups);
  return CheckLaunch("mla_cache_write");
}

}  // namespace dsa::attention::gpu
