// Device side of runtime.h: device memory, copies and event timing.
#include "attention/gpu/device/runtime.h"

#include <algorithm>
#include <vector>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {

LaunchResult DeviceMalloc(void** ptr, size_t bytes) {
  // Without a device some runtimes fail the allocation with a generic error
  // (HIP: hipErrorInvalidDevice), so ask for the device count first and
  // report kNoDevice plainly.
  int count = 0;
  const hipError_t err = hipGetDeviceCount(&count);
  if (err != hipSuccess || count == 0) {
    LaunchResult r = FromError(err != hipSuccess ? err : hipErrorNoDevice,
                               "hipGetDeviceCount");
    r.code = LaunchCode::kNoDevice;
    return r;
  }
  return FromError(hipMalloc(ptr, bytes), "hipMalloc");
}
LaunchResult DeviceFree(void* ptr) {
  return FromError(hipFree(ptr), "hipFree");
}
LaunchResult CopyToDevice(void* dst, const void* src, size_t bytes) {
  return FromError(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice),
                   "hipMemcpy to device");
}
LaunchResult CopyToHost(void* dst, const void* src, size_t bytes) {
  return FromError(hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost),
                   "hipMemcpy to host");
}
LaunchResult DeviceMemset(void* dst, int byte, size_t bytes) {
  return FromError(hipMemset(dst, byte, bytes), "hipMemset");
}
LaunchResult DeviceSynchronize() {
  return FromError(hipDeviceSynchronize(), "hipDeviceSynchronize");
}

LaunchResult CopyToHostOnStream(void* dst, const void* src, size_t bytes,
                                void* stream_ptr) {
  const hipStream_t stream = static_cast<hipStream_t>(stream_ptr);
  if (bytes == 0) return LaunchResult{};
  LaunchResult r =
      FromError(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, stream),
                "copy to host");
  if (!r.ok()) return r;
  return FromError(hipStreamSynchronize(stream), "copy to host: synchronize");
}

LaunchResult TimeMedianMs(LaunchResult (*fn)(void*), void* arg, int warmup,
                          int iters, float* median_ms) {
  for (int i = 0; i < warmup; ++i) {
    LaunchResult r = fn(arg);
    if (!r.ok()) return r;
  }
  LaunchResult r = DeviceSynchronize();
  if (!r.ok()) return r;
  hipEvent_t begin, end;
  r = FromError(hipEventCreate(&begin), "hipEventCreate");
  if (!r.ok()) return r;
  r = FromError(hipEventCreate(&end), "hipEventCreate");
  if (!r.ok()) {
    (void)hipEventDestroy(begin);
    return r;
  }
  std::vector<float> times;
  for (int i = 0; i < iters && r.ok(); ++i) {
    r = FromError(hipEventRecord(begin, nullptr), "hipEventRecord");
    if (r.ok()) r = fn(arg);
    if (r.ok()) r = FromError(hipEventRecord(end, nullptr), "hipEventRecord");
    if (r.ok()) r = FromError(hipEventSynchronize(end), "hipEventSynchronize");
    float ms = 0.0f;
    if (r.ok()) {
      r = FromError(hipEventElapsedTime(&ms, begin, end),
                    "hipEventElapsedTime");
    }
    times.push_back(ms);
  }
  (void)hipEventDestroy(begin);
  (void)hipEventDestroy(end);
  if (!r.ok()) return r;
  std::sort(times.begin(), times.end());
  *median_ms = times.empty() ? 0.0f : times[times.size() / 2];
  return r;
}

#if defined(DSA_GPU_CUDA)
const char* GpuBackend() { return "cuda"; }
#else
const char* GpuBackend() { return "rocm"; }
#endif

}  // namespace dsa::attention::gpu
