// sparse_mla_kernels.h for a build without a GPU backend (neither
// --config=cuda nor --config=rocm): the launcher answers kNotBuilt, so host
// code that links it builds everywhere and finds out at run time.
#include <cstdio>

#include "attention/gpu/sparse_mla_kernels.h"

namespace dsa::attention::gpu {

LaunchResult SparseMlaLaunch(const SparseMlaParams&, void*) {
  LaunchResult r;
  r.code = LaunchCode::kNotBuilt;
  std::snprintf(r.message, sizeof(r.message),
                "sparse_mla: built without a GPU backend (use --config=cuda "
                "or --config=rocm)");
  return r;
}

const char* SparseMlaPath(const SparseMlaParams&) { return "none"; }

}  // namespace dsa::attention::gpu
