// dense_kernels.h for a build without a GPU backend: every launch answers
// kNotBuilt (see indexer_kernels_unbuilt.cc).
#include <cstdio>

#include "attention/gpu/dense_kernels.h"

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

LaunchResult GemmTiledLaunch(const GemmParams&, void*) {
  return NotBuilt("gemm");
}
LaunchResult RmsNormLaunch(const RmsNormParams&, void*) {
  return NotBuilt("rms_norm");
}
LaunchResult RopeLaunch(const RopeParams&, void*) { return NotBuilt("rope"); }
LaunchResult ElementwiseLaunch(const ElementwiseParams& p, void*) {
  return NotBuilt(p.accumulate ? "residual_add" : "cast");
}
LaunchResult RandomFillLaunch(const RandomFillParams&, void*) {
  return NotBuilt("random_fill");
}

}  // namespace dsa::attention::gpu
