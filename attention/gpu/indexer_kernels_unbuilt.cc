// indexer_kernels.h for a build without a GPU backend (neither
// --config=cuda nor --config=rocm): every call answers kNotBuilt, so host
// code that links the launchers builds everywhere and finds out at run time.
#include "attention/gpu/indexer_kernels.h"

namespace dsa::attention::gpu {
LaunchResult IndexerLogitsLaunch(const IndexerLogitsParams&, void*) {
  return NotBuiltResult("indexer_logits");
}
const char* IndexerLogitsPath(const IndexerLogitsParams&) { return "none"; }
LaunchResult IndexerTopKLaunch(const IndexerTopKParams&, void*) {
  return NotBuiltResult("indexer_topk");
}
LaunchResult DeviceMalloc(void** ptr, size_t) {
  *ptr = nullptr;
  return NotBuiltResult("DeviceMalloc");
}
LaunchResult DeviceFree(void*) { return NotBuiltResult("DeviceFree"); }
LaunchResult CopyToDevice(void*, const void*, size_t) {
  return NotBuiltResult("CopyToDevice");
}
LaunchResult CopyToHost(void*, const void*, size_t) {
  return NotBuiltResult("CopyToHost");
}
LaunchResult DeviceMemset(void*, int, size_t) {
  return NotBuiltResult("DeviceMemset");
}
LaunchResult DeviceSynchronize() { return NotBuiltResult("DeviceSynchronize"); }
LaunchResult TimeMedianMs(LaunchResult (*)(void*), void*, int, int, float*) {
  return NotBuiltResult("TimeMedianMs");
}
const char* GpuBackend() { return "none"; }

}  // namespace dsa::attention::gpu
