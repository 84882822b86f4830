// The persistent logits kernel on narrow blocks (128 columns: 1, 2 or 4 rows
// of 128, 64 or 32 heads), key tiles by TMA and by cp.async
// (persistent_kernel.h). Nothing on AMD.
#include "attention/gpu/indexer/persistent_kernel.h"

#if defined(DSA_GPU_CUDA)
namespace dsa::attention::gpu::indexer {

#define DSA_INDEXER_PERSISTENT(R, kTma)                                  \
  template LaunchResult LaunchPersistent<R, false, kTma>(                \
      const IndexerLogitsParams&, const LogitsPlan&, const CUtensorMap&, \
      const CUtensorMap&, int, hipStream_t);
DSA_INDEXER_PERSISTENT(1, false)
DSA_INDEXER_PERSISTENT(1, true)
DSA_INDEXER_PERSISTENT(2, false)
DSA_INDEXER_PERSISTENT(2, true)
DSA_INDEXER_PERSISTENT(4, false)
DSA_INDEXER_PERSISTENT(4, true)
#undef DSA_INDEXER_PERSISTENT

}  // namespace dsa::attention::gpu::indexer
#endif  // DSA_GPU_CUDA
