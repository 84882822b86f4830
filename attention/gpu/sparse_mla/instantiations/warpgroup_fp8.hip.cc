// The sm_90a warpgroup body over fp8_ds_mla caches (the comparison variant
// SparseMlaParams::fp8_cache_on_warpgroup).
#include "attention/gpu/sparse_mla/warpgroup_body.h"

namespace dsa::attention::gpu::sparse_mla {

template LaunchResult LaunchWarpgroupBody<true, Fp8Format::kE4m3fn>(
    const SparseMlaParams&, int64_t, int64_t, const MmaOutput&, int,
    hipStream_t);
template LaunchResult LaunchWarpgroupBody<true, Fp8Format::kE4m3fnuz>(
    const SparseMlaParams&, int64_t, int64_t, const MmaOutput&, int,
    hipStream_t);

}  // namespace dsa::attention::gpu::sparse_mla
