// sparse_mla/launch.h for a build without a GPU backend (neither
// --config=cuda nor --config=rocm): the launcher answers kNotBuilt, so host
// code that links it builds everywhere and finds out at run time.
#include "attention/gpu/sparse_mla/launch.h"

namespace dsa::attention::gpu {

LaunchResult SparseMlaLaunch(const SparseMlaParams&, void*) {
  return NotBuiltResult("sparse_mla");
}

LaunchResult SparseMlaLaunchOnPath(const SparseMlaParams&, const char*, void*) {
  return NotBuiltResult("sparse_mla");
}

LaunchResult SparseMlaDequantiseCacheWorkspace(const SparseMlaParams&, void*,
                                               int32_t*, void*) {
  return NotBuiltResult("sparse_mla");
}

LaunchResult SparseMlaGatherWorkspace(const SparseMlaParams&, int64_t, int64_t,
                                      int, void*, int32_t*, void*) {
  return NotBuiltResult("sparse_mla");
}

const char* SparseMlaPath(const SparseMlaParams&) { return "none"; }

}  // namespace dsa::attention::gpu
