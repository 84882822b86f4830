// runtime.h for a build without a GPU backend (neither --config=cuda nor
// --config=rocm): every call answers kNotBuilt, so host code that links the
// runtime builds everywhere and finds out at run time.
#include "attention/gpu/device/features.h"
#include "attention/gpu/device/runtime.h"

namespace dsa::attention::gpu {

LaunchResult DeviceMalloc(void** ptr, size_t) {
  *ptr = nullptr;
  return NotBuiltResult("DeviceMalloc");
}
LaunchResult DeviceFree(void*) { return NotBuiltResult("DeviceFree"); }
LaunchResult DeviceMallocAsync(void** ptr, size_t, void*) {
  *ptr = nullptr;
  return NotBuiltResult("DeviceMallocAsync");
}
LaunchResult DeviceFreeAsync(void*, void*) {
  return NotBuiltResult("DeviceFreeAsync");
}
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
LaunchResult StreamSynchronize(void*) {
  return NotBuiltResult("StreamSynchronize");
}
LaunchResult CopyToHostOnStream(void*, const void*, size_t, void*) {
  return NotBuiltResult("copy to host");
}
LaunchResult TimeMedianMs(LaunchResult (*)(void*), void*, int, int, float*) {
  return NotBuiltResult("TimeMedianMs");
}
LaunchResult TimeQueuedMs(LaunchResult (*)(void*), void*, int, int, float*) {
  return NotBuiltResult("TimeQueuedMs");
}
LaunchResult CurrentDeviceFeatures(DeviceFeatures*) {
  return NotBuiltResult("device features");
}
const char* GpuBackend() { return "none"; }
LaunchResult AcquireStreamScratch(void*, int, size_t, const char* what,
                                  ScratchArenas::Lease* lease) {
  lease->Reset();
  return NotBuiltResult(what);
}
LaunchResult StreamScratchStats(void*, ScratchArenaStats* stats) {
  *stats = ScratchArenaStats();
  return NotBuiltResult("scratch stats");
}
void ReleaseStreamScratch() {}

}  // namespace dsa::attention::gpu
