// cache_kernels.h for a build without a GPU backend (neither --config=cuda
// nor --config=rocm): every launcher answers kNotBuilt, so host code that
// links them builds everywhere and finds out at run time.
#include <cstdio>

#include "attention/gpu/cache_kernels.h"

namespace dsa::attention::gpu {
namespace {

LaunchResult NotBuilt(const char* what) {
  LaunchResult r;
  r.code = LaunchCode::kNotBuilt;
  std::snprintf(r.message, sizeof(r.message),
                "%s: built without a GPU backend (use --config=cuda or "
                "--config=rocm)",
                what);
  return r;
}

}  // namespace

LaunchResult IndexerKWriteLaunch(const IndexerKWriteParams&, void*) {
  return NotBuilt("indexer_k_write");
}
LaunchResult IndexerQLaunch(const IndexerQParams&, void*) {
  return NotBuilt("indexer_q");
}
LaunchResult MlaCacheWriteLaunch(const MlaCacheWriteParams&, void*) {
  return NotBuilt("mla_cache_write");
}
LaunchResult Fp8EncodeForTesting(const float*, uint8_t*, int64_t, Fp8Encoding,
                                 void*) {
  return NotBuilt("fp8_encode");
}

}  // namespace dsa::attention::gpu
