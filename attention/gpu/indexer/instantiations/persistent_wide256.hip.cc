// The persistent logits kernel on wide blocks (256 columns: 2 or 4 rows of
// 128 or 64 heads) with two math groups of 256 columns each (m64n256
// products, each group on alternate key tiles), key tiles by TMA and by
// cp.async (persistent_kernel.h). Nothing on AMD.
#include "attention/gpu/indexer/persistent_kernel.h"

#if defined(DSA_GPU_CUDA)
namespace dsa::attention::gpu::indexer {

#define DSA_INDEXER_PERSISTENT(R, kTma)                                  \
  template LaunchResult LaunchPersistent<R, true, kTma, 2, 256>(         \
      const IndexerLogitsParams&, const LogitsPlan&, const CUtensorMap&, \
      const CUtensorMap&, int, hipStream_t);
DSA_INDEXER_PERSISTENT(2, false)
DSA_INDEXER_PERSISTENT(2, true)
DSA_INDEXER_PERSISTENT(4, false)
DSA_INDEXER_PERSISTENT(4, true)
#undef DSA_INDEXER_PERSISTENT

}  // namespace dsa::attention::gpu::indexer
#endif  // DSA_GPU_CUDA
