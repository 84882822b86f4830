// indexer_kernels.h for a build without a GPU backend (neither
// --config=cuda nor --config=rocm): every call answers kNotBuilt, so host
// code that links the launchers builds everywhere and finds out at run time.
#include <cstdio>

#include "attention/gpu/indexer_kernels.h"

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

LaunchResult IndexerLogitsLaunch(const IndexerLogitsParams&, void*) {
  return NotBuilt("indexer_logits");
}
const char* IndexerLogitsPath(const IndexerLogitsParams&) { return "none"; }
LaunchResult IndexerTopKLaunch(const IndexerTopKParams&, void*) {
  return NotBuilt("indexer_topk");
}
LaunchResult DeviceMalloc(void** ptr, size_t) {
  *ptr = nullptr;
  return NotBuilt("DeviceMalloc");
}
LaunchResult DeviceFree(void*) { return NotBuilt("DeviceFree"); }
LaunchResult CopyToDevice(void*, const void*, size_t) {
  return NotBuilt("CopyToDevice");
}
LaunchResult CopyToHost(void*, const void*, size_t) {
  return NotBuilt("CopyToHost");
}
LaunchResult DeviceMemset(void*, int, size_t) {
  return NotBuilt("DeviceMemset");
}
LaunchResult DeviceSynchronize() { return NotBuilt("DeviceSynchronize"); }
LaunchResult TimeMedianMs(LaunchResult (*)(void*), void*, int, int, float*) {
  return NotBuilt("TimeMedianMs");
}
const char* GpuBackend() { return "none"; }

}  // namespace dsa::attention::gpu
