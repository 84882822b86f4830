// Device side of runtime.h: device memory, copies, event timing and the
// scratch arenas' allocator. Every call that can fail is a fault site
// (platform/fault_injection.h).
#include "attention/gpu/device/runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "attention/gpu/device/features.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "platform/stream_release.h"

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
  return FallibleCall(platform::FaultSite::kDeviceMalloc, "hipMalloc",
                      [&] { return hipMalloc(ptr, bytes); });
}
LaunchResult DeviceFree(void* ptr) {
  return FromError(hipFree(ptr), "hipFree");
}
LaunchResult DeviceMallocAsync(void** ptr, size_t bytes, void* stream) {
  return FallibleCall(platform::FaultSite::kStreamAlloc, "hipMallocAsync", [&] {
    return hipMallocAsync(ptr, bytes == 0 ? 1 : bytes,
                          static_cast<hipStream_t>(stream));
  });
}
LaunchResult DeviceFreeAsync(void* ptr, void* stream) {
  return FromError(hipFreeAsync(ptr, static_cast<hipStream_t>(stream)),
                   "hipFreeAsync");
}
LaunchResult CopyToDevice(void* dst, const void* src, size_t bytes) {
  return FallibleCall(
      platform::FaultSite::kDeviceMemcpy, "hipMemcpy to device",
      [&] { return hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice); });
}
LaunchResult CopyToHost(void* dst, const void* src, size_t bytes) {
  return FallibleCall(
      platform::FaultSite::kDeviceMemcpy, "hipMemcpy to host",
      [&] { return hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost); });
}
LaunchResult DeviceMemset(void* dst, int byte, size_t bytes) {
  return FallibleCall(platform::FaultSite::kDeviceMemcpy, "hipMemset",
                      [&] { return hipMemset(dst, byte, bytes); });
}
LaunchResult StreamSynchronize(void* stream) {
  return FromError(hipStreamSynchronize(static_cast<hipStream_t>(stream)),
                   "hipStreamSynchronize");
}

LaunchResult DeviceSynchronize() {
  return FallibleCall(platform::FaultSite::kDeviceSynchronize,
                      "hipDeviceSynchronize",
                      [] { return hipDeviceSynchronize(); });
}

LaunchResult CopyToHostOnStream(void* dst, const void* src, size_t bytes,
                                void* stream_ptr) {
  const hipStream_t stream = static_cast<hipStream_t>(stream_ptr);
  if (bytes == 0) return LaunchResult{};
  LaunchResult r =
      FallibleCall(platform::FaultSite::kStreamCopy, "copy to host", [&] {
        return hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, stream);
      });
  if (!r.ok()) return r;
  return FallibleCall(platform::FaultSite::kStreamSynchronize,
                      "copy to host: synchronize",
                      [&] { return hipStreamSynchronize(stream); });
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
  constexpr platform::FaultSite kEvent = platform::FaultSite::kEvent;
  r = FallibleCall(kEvent, "hipEventCreate",
                   [&] { return hipEventCreate(&begin); });
  if (!r.ok()) return r;
  r = FallibleCall(kEvent, "hipEventCreate",
                   [&] { return hipEventCreate(&end); });
  if (!r.ok()) {
    (void)hipEventDestroy(begin);
    return r;
  }
  std::vector<float> times;
  for (int i = 0; i < iters && r.ok(); ++i) {
    r = FallibleCall(kEvent, "hipEventRecord",
                     [&] { return hipEventRecord(begin, nullptr); });
    if (r.ok()) r = fn(arg);
    if (r.ok()) {
      r = FallibleCall(kEvent, "hipEventRecord",
                       [&] { return hipEventRecord(end, nullptr); });
    }
    if (r.ok()) {
      r = FallibleCall(kEvent, "hipEventSynchronize",
                       [&] { return hipEventSynchronize(end); });
    }
    float ms = 0.0f;
    if (r.ok()) {
      r = FallibleCall(kEvent, "hipEventElapsedTime",
                       [&] { return hipEventElapsedTime(&ms, begin, end); });
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

LaunchResult TimeQueuedMs(LaunchResult (*fn)(void*), void* arg, int warmup,
                          int iters, float* ms_per_call) {
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
  r = FromError(hipEventRecord(begin, nullptr), "hipEventRecord");
  for (int i = 0; i < iters && r.ok(); ++i) r = fn(arg);
  if (r.ok()) r = FromError(hipEventRecord(end, nullptr), "hipEventRecord");
  if (r.ok()) r = FromError(hipEventSynchronize(end), "hipEventSynchronize");
  float ms = 0.0f;
  if (r.ok()) {
    r = FromError(hipEventElapsedTime(&ms, begin, end), "hipEventElapsedTime");
  }
  (void)hipEventDestroy(begin);
  (void)hipEventDestroy(end);
  if (r.ok()) *ms_per_call = iters > 0 ? ms / iters : 0.0f;
  return r;
}

namespace {

#if defined(DSA_GPU_CUDA)
// Never launched: its static shared memory exists only in the sm_90a pass,
// so the size the runtime reports for it says which code was loaded for the
// device (an attribute query, unlike a launch and a copy of its result).
constexpr int kSm90aMarkerBytes = 64;
__global__ void DeviceCodeProbeKernel(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ int marker[kSm90aMarkerBytes / sizeof(int)];
  marker[threadIdx.x % (kSm90aMarkerBytes / sizeof(int))] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = marker[(threadIdx.x + 1) % (kSm90aMarkerBytes / 4)];
#else
  out[threadIdx.x] = 0;
#endif
}
#endif  // DSA_GPU_CUDA

LaunchResult QueryDeviceFeatures(int device, DeviceFeatures* f) {
  f->device = device;
  LaunchResult r = FromError(
      hipDeviceGetAttribute(&f->multiprocessors,
                            hipDeviceAttributeMultiprocessorCount, device),
      "device features: multiprocessor count");
  if (!r.ok()) return r;
  r = FromError(
      hipDeviceGetAttribute(&f->warp_size, hipDeviceAttributeWarpSize, device),
      "device features: warp size");
  if (!r.ok()) return r;
  r = FromError(
      hipDeviceGetAttribute(&f->max_shared_bytes_per_block,
                            hipDeviceAttributeMaxSharedMemoryPerBlock, device),
      "device features: shared memory per block");
  if (!r.ok()) return r;
#if defined(DSA_GPU_CUDA)
  cudaFuncAttributes attributes{};
  r = FromError(
      cudaFuncGetAttributes(
          &attributes, reinterpret_cast<const void*>(&DeviceCodeProbeKernel)),
      "device features: device code");
  if (!r.ok()) return r;
  f->sm90a = attributes.sharedSizeBytes >= kSm90aMarkerBytes;
  f->tensor_maps = TensorMapEncoder() != nullptr;
#endif
  return r;
}

}  // namespace

LaunchResult CurrentDeviceFeatures(DeviceFeatures* features) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> known[kMaxDevices];
  static DeviceFeatures cache[kMaxDevices];
  int device = -1;
  LaunchResult r = FromError(hipGetDevice(&device), "device features");
  if (!r.ok()) return r;
  if (device < 0 || device >= kMaxDevices) {
    return QueryDeviceFeatures(device, features);
  }
  if (!known[device].load(std::memory_order_acquire)) {
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    if (!known[device].load(std::memory_order_relaxed)) {
      r = QueryDeviceFeatures(device, &cache[device]);
      if (!r.ok()) return r;
      known[device].store(true, std::memory_order_release);
    }
  }
  *features = cache[device];
  return r;
}

#if defined(DSA_GPU_CUDA)
const char* GpuBackend() { return "cuda"; }
#else
const char* GpuBackend() { return "rocm"; }
#endif

// ---------------------------------------------------------------------------
// The scratch arenas over the stream-ordered allocator.

namespace {

// Streams with an arena before the least recently used one is given back.
constexpr int kMaxScratchArenas = 32;

LaunchResult AllocateScratch(void*, const ScratchKey& key, size_t bytes,
                             const char* what, void** ptr) {
  // Only through AcquireStreamScratch, which hands out nothing while the
  // stream is captured into a graph.
  const hipStream_t stream =
      static_cast<hipStream_t>(const_cast<void*>(key.stream));
  LaunchResult r = FallibleCall(platform::FaultSite::kStreamAlloc, what, [&] {
    return hipMallocAsync(ptr, bytes, stream);
  });
  if (!r.ok()) {
    *ptr = nullptr;
    const size_t n = std::strlen(r.message);
    std::snprintf(r.message + n, sizeof(r.message) - n,
                  " (growing the stream's scratch arena to %zu bytes)", bytes);
  }
  return r;
}

void ReleaseScratchInOrder(void*, const ScratchKey& key, void* ptr) {
  (void)hipFreeAsync(ptr,
                     static_cast<hipStream_t>(const_cast<void*>(key.stream)));
  (void)hipGetLastError();
}

// The arena's stream may be gone: wait for its whole device, then free in
// the legacy stream's order.
void ReleaseScratchNow(void*, const ScratchKey& key, void* ptr) {
  int current = -1;
  const bool switch_device =
      hipGetDevice(&current) == hipSuccess && current != key.device;
  if (switch_device) (void)hipSetDevice(key.device);
  (void)hipDeviceSynchronize();
  (void)hipFreeAsync(ptr, nullptr);
  if (switch_device) (void)hipSetDevice(current);
  (void)hipGetLastError();
}

// Set once the process's arenas are destroyed (at exit or unload), after
// which a stream destroyed by a later destructor finds none to release.
std::atomic<bool> g_arenas_gone{false};

class ProcessArenas : public ScratchArenas {
 public:
  using ScratchArenas::ScratchArenas;
  ~ProcessArenas() { g_arenas_gone.store(true, std::memory_order_release); }
};

ScratchArenas& Arenas();

// A platform stream about to be destroyed (platform/stream_release.h): its
// arenas' blocks are freed in its order, and a later stream at its address
// starts without scratch.
void ReleaseArenasOfStream(void* stream) {
  if (g_arenas_gone.load(std::memory_order_acquire)) return;
  Arenas().ReleaseStream(stream);
}

// Made on the first call that needs scratch, after the runtime's first
// calls, so that it is destroyed (at exit or unload) before the runtime's
// own teardown.
ScratchArenas& Arenas() {
  static ProcessArenas arenas(
      ScratchAllocator{AllocateScratch, ReleaseScratchInOrder,
                       ReleaseScratchNow, nullptr},
      kMaxScratchArenas);
  static const bool hooked =
      platform::AddStreamReleaseHook(&ReleaseArenasOfStream);
  (void)hooked;  // a full table: arenas then go by eviction, as before
  return arenas;
}

thread_local char t_thread_token;

ScratchKey KeyOf(void* stream, int device) {
  ScratchKey key;
  key.device = device;
  key.stream = stream;
  if (static_cast<hipStream_t>(stream) == hipStreamPerThread) {
    key.thread = &t_thread_token;
  }
  return key;
}

}  // namespace

LaunchResult AcquireStreamScratch(void* stream, int device, size_t bytes,
                                  const char* what,
                                  ScratchArenas::Lease* lease) {
  // A graph recorded now would keep writing the arena's block after a later
  // call on the stream had replaced it.
  hipStreamCaptureStatus capture = hipStreamCaptureStatusNone;
  if (hipStreamIsCapturing(static_cast<hipStream_t>(stream), &capture) !=
      hipSuccess) {
    (void)hipGetLastError();  // the acquisition reports any real error
  } else if (capture != hipStreamCaptureStatusNone) {
    return Invalid(what,
                   "a call that takes the stream's scratch (%zu bytes) cannot "
                   "be captured into a graph: the arena may replace its block "
                   "later, which the graph would still write",
                   bytes);
  }
  return Arenas().Acquire(KeyOf(stream, device), bytes, what, lease);
}

LaunchResult StreamScratchStats(void* stream, ScratchArenaStats* stats) {
  int device = -1;
  LaunchResult r = FromError(hipGetDevice(&device), "scratch stats");
  if (!r.ok()) return r;
  *stats = Arenas().Stats(KeyOf(stream, device));
  return r;
}

void ReleaseStreamScratch() { Arenas().ReleaseAll(); }

}  // namespace dsa::attention::gpu
