// The warp-level body over a bf16 cache, 32 and 64 heads per block.
#include "attention/gpu/sparse_mla/warp_body.h"

namespace dsa::attention::gpu::sparse_mla {

template LaunchResult LaunchWarpBody<32, false, Fp8Format::kE4m3fn>(
    const SparseMlaParams&, int64_t, int64_t, const MmaOutput&, int,
    hipStream_t);
template LaunchResult LaunchWarpBody<64, false, Fp8Format::kE4m3fn>(
    const SparseMlaParams&, int64_t, int64_t, const MmaOutput&, int,
    hipStream_t);

}  // namespace dsa::attention::gpu::sparse_mla
