// dense_mha_kernels.h and gemm_bf16.h for a build without a GPU backend
// (neither --config=cuda nor --config=rocm): every call answers kNotBuilt.
#include <cstdio>

#include "attention/gpu/dense_mha_kernels.h"
#include "attention/gpu/gemm_bf16.h"

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

const char* Bf16GemmPath() { return "none"; }
LaunchResult Bf16GemmLaunch(const Bf16GemmParams&, void*) {
  return NotBuilt("bf16_gemm");
}
LaunchResult DenseMhaPrefillLaunch(const DenseMhaPrefillParams&, void*) {
  return NotBuilt("dense_mha_prefill");
}
const char* DenseMhaAttentionPath() { return "none"; }
LaunchResult CopyToHostOnStream(void*, const void*, size_t, void*) {
  return NotBuilt("copy to host");
}

}  // namespace dsa::attention::gpu
