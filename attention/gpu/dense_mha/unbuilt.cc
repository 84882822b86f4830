// dense_mha/launch.h and gemm_bf16.h for a build without a GPU backend
// (neither --config=cuda nor --config=rocm): every call answers kNotBuilt.
#include "attention/gpu/dense_mha/gemm_bf16.h"
#include "attention/gpu/dense_mha/launch.h"

namespace dsa::attention::gpu {
const char* Bf16GemmPath(const Bf16GemmParams&) { return "none"; }
LaunchResult Bf16GemmLaunch(const Bf16GemmParams&, void*) {
  return NotBuiltResult("bf16_gemm");
}
LaunchResult DenseMhaPrefillLaunch(const DenseMhaPrefillParams&, void*) {
  return NotBuiltResult("dense_mha_prefill");
}
const char* DenseMhaAttentionPath(const DenseMhaPrefillParams&) {
  return "none";
}
const char* DenseMhaDecompressionPath() { return "none"; }
SmallCacheStats DenseMhaTensorMapStats() { return SmallCacheStats(); }

}  // namespace dsa::attention::gpu
