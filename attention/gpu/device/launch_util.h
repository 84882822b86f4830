// Shared by the launchers in attention/gpu: building LaunchResults from
// argument checks and HIP/CUDA runtime errors, the shared-memory opt-in, the
// driver's tensor-map encoder. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_LAUNCH_UTIL_H_
#define DSA_ATTENTION_GPU_LAUNCH_UTIL_H_

#include <atomic>
#include <cstdio>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_result.h"

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

// kOk, or the runtime error `err` of `what` (kNoDevice when there is none).
inline LaunchResult FromError(hipError_t err, const char* what) {
  LaunchResult r;
  if (err == hipSuccess) return r;
  r.code = DsaIsNoDeviceError(err) ? LaunchCode::kNoDevice
                                   : LaunchCode::kRuntimeError;
  std::snprintf(r.message, sizeof(r.message), "%s: %s (%d)", what,
                hipGetErrorString(err), static_cast<int>(err));
  return r;
}

// Lets `kKernel` use `kBytes` of dynamic shared memory (more than the
// default 48 KiB) on the current device. The attribute belongs to the
// function on one device, so it is set once per device and kernel; a failure
// is reported and retried on the next call.
template <auto kKernel, int kBytes>
LaunchResult OptInSharedMemory(const char* what) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> opted_in[kMaxDevices];
  int device = -1;
  if (hipGetDevice(&device) != hipSuccess) {
    (void)hipGetLastError();
    device = -1;
  }
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

// The launch error of the kernel just enqueued, if any.
inline LaunchResult CheckLaunch(const char* op) {
  return FromError(hipGetLastError(), op);
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_LAUNCH_UTIL_H_
