// The warp-level body over an e4m3fnuz fp8_ds_mla cache, 32 and 64 heads per
// block.
#include "attention/gpu/sparse_mla/warp_body.h"

namespace dsa::attention::gpu::sparse_mla {

template LaunchResult LaunchWarpBody<32, true, Fp8Format::kE4m3fnuz>(
    const SparseMlaParams&, int64_t, int64_t, const MmaOutput&, int,
    hipStream_t);
template LaunchResult LaunchWarpBody<64, true, Fp8Format::kE4m3fnuz>(
    const SparseMlaParams&, int64_t, int64_t, const MmaOutput&, int,
    hipStream_t);

}  // namespace dsa::attention::gpu::sparse_mla
