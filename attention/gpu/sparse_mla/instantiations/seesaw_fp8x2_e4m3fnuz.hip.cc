// The sm_90a seesaw body over an fp8_ds_mla cache of format e4m3fnuz in
// clusters of two blocks (a row's two head groups), each producer
// dequantising half of every key tile into both blocks' buffers.
#include "attention/gpu/sparse_mla/seesaw_body.h"

namespace dsa::attention::gpu::sparse_mla {

template LaunchResult LaunchSeesawBody<true, Fp8Format::kE4m3fnuz, true>(
    const SparseMlaParams&, int64_t, int64_t, const MmaOutput&, int,
    hipStream_t);

}  // namespace dsa::attention::gpu::sparse_mla
