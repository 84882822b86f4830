// The sm_90a seesaw body over a bf16 cache in clusters of two blocks (a
// row's two head groups), each producer gathering half of every key tile
// into both blocks' buffers.
#include "attention/gpu/sparse_mla/seesaw_body.h"

namespace dsa::attention::gpu::sparse_mla {

template LaunchResult LaunchSeesawBody<false, Fp8Format::kE4m3fn, true>(
    const SparseMlaParams&, int64_t, int64_t, const MmaOutput&, int,
    hipStream_t);

}  // namespace dsa::attention::gpu::sparse_mla
