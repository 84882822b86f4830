// indexer/launch.h for a build without a GPU backend (neither
// --config=cuda nor --config=rocm): every call answers kNotBuilt, so host
// code that links the launchers builds everywhere and finds out at run time.
#include "attention/gpu/indexer/launch.h"

namespace dsa::attention::gpu {
LaunchResult IndexerLogitsLaunch(const IndexerLogitsParams&, void*,
                                 const IndexerLogitsOptions&) {
  return NotBuiltResult("indexer_logits");
}
const char* IndexerLogitsPath(const IndexerLogitsParams&,
                              const IndexerLogitsOptions&) {
  return "none";
}
SmallCacheStats IndexerLogitsKeyMapStats() { return SmallCacheStats(); }
LaunchResult IndexerTopKLaunch(const IndexerTopKParams&, void*,
                               const IndexerTopKOptions&) {
  return NotBuiltResult("indexer_topk");
}
const char* IndexerTopKPathName(const IndexerTopKParams&,
                                const IndexerTopKOptions&) {
  return "none";
}

}  // namespace dsa::attention::gpu
