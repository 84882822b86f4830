// Which of the sparse MLA's kernels runs, and how it is cut into launches:
// the one place that decides, from the call's parameters and the device's
// features (device/features.h). Plain C++, called by the launcher
// (launch.hip.cc) and tested without a device (heuristics_test.cc).
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_HEURISTICS_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_HEURISTICS_H_

#include <cstdint>

#include "attention/gpu/device/features.h"
#include "attention/gpu/sparse_mla/params.h"

namespace dsa::attention::gpu::sparse_mla {

enum class Body {
  kFma,        // the FMA kernels (plain_kernels.hip.cc): any shape
  kWarp,       // the warp-level matrix body (warp_body.h)
  kWarpgroup,  // the sm_90a warpgroup body (warpgroup_body.h)
  kSeesaw,     // the sm_90a seesaw body (seesaw_body.h)
};

// The body that runs:
// - kFma unless the shape is the matrix bodies' (kv_lora_rank 512, rope_dim
//   64, 16-byte aligned cache entries) and the device gives a block the
//   warp body's shared memory (features with no shared-memory figure, as
//   without a device, are taken to have it);
// - on sm_90a device code, for 64 heads or more, with the shared memory
//   for it: kSeesaw over a bf16 cache (softmax_scale > 0, which its
//   softmax takes the maximum before the scale by); kWarpgroup over an fp8
//   cache when params.fp8_cache_on_warpgroup asks for it;
// - kWarp otherwise (AMD, other NVIDIA targets, fewer heads, fp8 caches).
Body ChooseBody(const SparseMlaParams& params, const DeviceFeatures& features);

// What SparseMlaPath reports for a body: "fma", "mma", "wgmma" or
// "seesaw".
const char* BodyName(Body body);

// A call's launches.
struct Plan {
  Body body = Body::kFma;
  // Heads per block of a matrix body (the M of its products).
  int heads_per_block = 1;
  // Query rows per pass through the latent scratch (one launch of each
  // kernel per pass).
  int64_t chunk_rows = 0;
  // Parts each row's top-k list is split into (matrix bodies, few rows: so
  // that the grid covers every multiprocessor); 1 is no split.
  int splits = 1;
};

Plan MakePlan(const SparseMlaParams& params, const DeviceFeatures& features);

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_HEURISTICS_H_
