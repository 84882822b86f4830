// cache/launch.h for a build without a GPU backend (neither --config=cuda
// nor --config=rocm): every launcher answers kNotBuilt, so host code that
// links them builds everywhere and finds out at run time.
#include "attention/gpu/cache/launch.h"

namespace dsa::attention::gpu {
LaunchResult IndexerKWriteLaunch(const IndexerKWriteParams&, void*) {
  return NotBuiltResult("indexer_k_write");
}
LaunchResult IndexerQLaunch(const IndexerQParams&, void*) {
  return NotBuiltResult("indexer_q");
}
LaunchResult MlaCacheWriteLaunch(const MlaCacheWriteParams&, void*) {
  return NotBuiltResult("mla_cache_write");
}
const char* IndexerKWritePath(const IndexerKWriteParams&) { return "none"; }
const char* IndexerQPath(const IndexerQParams&) { return "none"; }
LaunchResult Fp8EncodeForTesting(const float*, uint8_t*, int64_t, Fp8Encoding,
                                 void*) {
  return NotBuiltResult("fp8_encode");
}

}  // namespace dsa::attention::gpu
