// The persistent logits kernel on wide blocks (256 columns: 2, 4 or 8 rows
// of 128, 64 or 32 heads), key tiles by TMA and by cp.async, two math
// groups (persistent_kernel.h). Nothing on AMD.
#include "attention/gpu/indexer/persistent_kernel.h"

#if defined(DSA_GPU_CUDA)
namespace dsa::attention::gpu::indexer {

#define DSA_INDEXER_PERSISTENT(R, kTma, kGroups)                         \
  template LaunchResult LaunchPersistent<R, true, kTma, kGroups>(        \
      const IndexerLogitsParams&, const LogitsPlan&, const CUtensorMap&, \
      const CUtensorMap&, int, hipStream_t);
DSA_INDEXER_PERSISTENT(2, false, 2)
DSA_INDEXER_PERSISTENT(2, true, 2)
DSA_INDEXER_PERSISTENT(4, false, 2)
DSA_INDEXER_PERSISTENT(4, true, 2)
DSA_INDEXER_PERSISTENT(8, false, 2)
DSA_INDEXER_PERSISTENT(8, true, 2)
#undef DSA_INDEXER_PERSISTENT

}  // namespace dsa::attention::gpu::indexer
#endif  // DSA_GPU_CUDA
