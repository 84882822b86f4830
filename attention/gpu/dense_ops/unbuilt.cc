// dense_ops/launch.h for a build without a GPU backend: every launch answers
// kNotBuilt.
#include "attention/gpu/dense_ops/launch.h"

namespace dsa::attention::gpu {
LaunchResult GemmTiledLaunch(const GemmParams&, void*) {
  return NotBuiltResult("gemm");
}
LaunchResult RmsNormLaunch(const RmsNormParams&, void*) {
  return NotBuiltResult("rms_norm");
}
LaunchResult RopeLaunch(const RopeParams&, void*) {
  return NotBuiltResult("rope");
}
LaunchResult ElementwiseLaunch(const ElementwiseParams& p, void*) {
  return NotBuiltResult(p.accumulate ? "residual_add" : "cast");
}
LaunchResult RandomFillLaunch(const RandomFillParams&, void*) {
  return NotBuiltResult("random_fill");
}
LaunchResult Fp8QuantLaunch(const Fp8QuantParams&, void*) {
  return NotBuiltResult("fp8_block_quant");
}
LaunchResult Fp8GemmTiledLaunch(const Fp8GemmParams&, void*) {
  return NotBuiltResult("fp8_block_gemm");
}

}  // namespace dsa::attention::gpu
