// Shared by the launchers in attention/gpu: building LaunchResults from
// argument checks and HIP/CUDA runtime errors, the runtime calls that are
// fault sites (platform/fault_injection.h), the shared-memory opt-in, the
// driver's tensor-map encoder. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_LAUNCH_UTIL_H_
#define DSA_ATTENTION_GPU_LAUNCH_UTIL_H_

#include <atomic>
#include <cstdio>
#include <cstring>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_result.h"
#include "platform/fault_injection.h"

#if defined(DSA_GPU_CUDA)
#include <cuda.h>  // CUtensorMap and the encoder's signature
#endif

namespace dsa::attention::gpu {

#if defined(DSA_GPU_CUDA)
// The driver's cuTensorMapEncodeTiled (TMA tensor maps), found through the
// runtime once per process, so that nothing links libcuda; null when the
// driver has none.
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType,
                                   cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion,
                                   CUtensorMapFloatOOBfill);
inline EncodeTiledFn TensorMapEncoder() {
  static const EncodeTiledFn fn = []() -> EncodeTiledFn {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                         cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // not the next launch's error
      return nullptr;
    }
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}
#endif

// kOk, or the runtime error `err` of `what` (kNoDevice when there is none,
// kOutOfMemory for memory).
inline LaunchResult FromError(hipError_t err, const char* what) {
  LaunchResult r;
  if (err == hipSuccess) return r;
  r.code = DsaIsNoDeviceError(err)      ? LaunchCode::kNoDevice
           : err == hipErrorOutOfMemory ? LaunchCode::kOutOfMemory
                                        : LaunchCode::kRuntimeError;
  std::snprintf(r.message, sizeof(r.message), "%s: %s (%d)", what,
                hipGetErrorString(err), static_cast<int>(err));
  return r;
}

// The fault sites' runtime errors (fault_injection.h) are numbered as HIP
// and CUDA both number them.
static_assert(hipErrorOutOfMemory == 2 && hipErrorIllegalAddress == 700 &&
                  hipErrorLaunchOutOfResources == 701 &&
                  hipErrorLaunchFailure == 719 && hipErrorUnknown == 999,
              "the runtime numbers its errors unlike fault_injection.h");

// The error of a failing runtime call of `site`'s kind, for `what`, marked
// as injected.
inline LaunchResult InjectedRuntimeError(platform::FaultSite site,
                                         const char* what) {
  LaunchResult r = FromError(
      static_cast<hipError_t>(platform::FaultSiteRuntimeError(site)), what);
  const size_t n = std::strlen(r.message);
  std::snprintf(r.message + n, sizeof(r.message) - n, " (injected %s fault)",
                platform::FaultSiteName(site));
  return r;
}

// A runtime call of the kernels that a test's FaultInjector can make fail
// (fault_injection.h): `call()`'s result for `what`, unless the injector
// fails this call of kind `site`, which then returns the error a failing
// call of that kind returns (and `call` is not made).
template <class Call>
inline LaunchResult FallibleCall(platform::FaultSite site, const char* what,
                                 Call&& call) {
  if (platform::FaultInjected(site)) return InjectedRuntimeError(site, what);
  return FromError(call(), what);
}

// Lets `kKernel` use `kBytes` of dynamic shared memory (more than the
// default 48 KiB) on `device`, the current device (DeviceFeatures::device,
// which the launcher asked for once). The attribute belongs to the function
// on one device, so it is set once per device and kernel; a failure is
// reported and retried on the next call. The one place a launcher sets a
// function attribute.
template <auto kKernel, int kBytes>
LaunchResult OptInSharedMemory(int device, const char* what) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> opted_in[kMaxDevices];
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && opted_in[device].load(std::memory_order_relaxed)) {
    return LaunchResult{};
  }
  LaunchResult r = FromError(
      hipFuncSetAttribute(reinterpret_cast<const void*>(kKernel),
                          hipFuncAttributeMaxDynamicSharedMemorySize, kBytes),
      what);
  if (r.ok() && cached) opted_in[device].store(true, std::memory_order_relaxed);
  return r;
}

// The launch error of the kernel just enqueued, if any. A fault site: a
// test can make the launch fail as one the runtime refuses.
inline LaunchResult CheckLaunch(const char* op) {
  LaunchResult r = FromError(hipGetLastError(), op);
  if (r.ok() && platform::FaultInjected(platform::FaultSite::kKernelLaunch)) {
    r = InjectedRuntimeError(platform::FaultSite::kKernelLaunch, op);
  }
  return r;
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_LAUNCH_UTIL_H_
