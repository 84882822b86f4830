// The sm_90a seesaw body over a bf16 cache (the default for 64 heads or
// more).
#include "attention/gpu/sparse_mla/seesaw_body.h"

namespace dsa::attention::gpu::sparse_mla {

template LaunchResult LaunchSeesawBody<false, Fp8Format::kE4m3fn>(
    const SparseMlaParams&, int64_t, int64_t, const MmaOutput&, int,
    hipStream_t);

}  // namespace dsa::attention::gpu::sparse_mla
