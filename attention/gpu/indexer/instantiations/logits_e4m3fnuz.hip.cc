// The FMA and matrix logits kernels for e4m3fnuz data (matrix_kernels.h).
#include "attention/gpu/indexer/matrix_kernels.h"

namespace dsa::attention::gpu::indexer {

template LaunchResult LaunchFma<::dsa::gpu::Fp8Format::kE4m3fnuz>(
    const IndexerLogitsParams&, const LogitsPlan&, hipStream_t);
template LaunchResult LaunchMatrix<::dsa::gpu::Fp8Format::kE4m3fnuz>(
    const IndexerLogitsParams&, const LogitsPlan&, hipStream_t);

}  // namespace dsa::attention::gpu::indexer
