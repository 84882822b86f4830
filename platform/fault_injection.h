// Fault injection at the device calls a step makes, so that a test can make
// each of them fail in turn (SQLite's way with every allocation and I/O) and
// check what the caller does then: the status it returns, what it rolls back.
//
// Every fallible call passes through one of four narrow places, and each of
// them asks FaultInjected() first:
//   - DeviceRuntime (platform/registry.h): every device_malloc, device_memcpy,
//     device_synchronize and device_memory_info of a platform descriptor,
//     its stream calls: stream_create, memcpy_async (a stream copy) and
//     stream_synchronize, and its collectives of tensor-parallel ranks:
//     all_reduce_sum and all_gather ("collective call": NCCL, RCCL, or the
//     CPU platform's threads);
//   - attention::Kernel<Op> (attention/kernel_lookup.h): every op call
//     through an entry point the registry handed out;
//   - the GPU kernels' runtime calls (attention/gpu/device/launch_util.h):
//     every kernel launch, stream-ordered allocation, copy, stream
//     synchronisation and event call of the HIP/CUDA runtime the CUDA and
//     ROCm platforms share, and their plain allocations and copies;
//   - the vendor BLAS (attention/gpu/dense_ops/op_kernels.cc): every
//     cuBLASLt and rocBLAS call that can fail.
// A call made to fail returns the error the real call returns when it fails
// (out of memory for an allocation, the runtime's launch failure for a
// kernel, the library's status for a BLAS call), so the caller runs its real
// error path.
//
// Frees and stream destroys are no fault sites: their callers are
// destructors, which cannot act on an error, and a free that did not free
// would only leak.
//
// Off by default: without a FaultInjector alive a site costs one relaxed
// atomic load and a branch predicted not taken; nothing is counted, no lock,
// no string. The injector is process-wide for the code linked with this
// library (a plugin loaded from its own shared object has its own copy and
// sees no test's injector: test the platforms linked into the binary).
//
// Free of Abseil: the op kernels in plugin shared objects use it, and so do
// the GPU kernels' launchers (device-compiled sources).
#ifndef DSA_PLATFORM_FAULT_INJECTION_H_
#define DSA_PLATFORM_FAULT_INJECTION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/plugin_api.h"

namespace dsa::platform {

// The fault sites, one per kind of call: X(enumerator, name, code,
// runtime_error, text). `code` and `text` are what a failing call of that
// kind returns across the plugin ABI; `runtime_error` is the HIP/CUDA runtime
// error the GPU kernels' calls of that kind return (the two runtimes number
// these alike: launch_util.h checks). The vendor BLAS calls return the
// library's own status instead.
#define DSA_FAULT_SITES(X)                                                    \
  X(kDeviceMalloc, "device_malloc", DSA_STATUS_RESOURCE_EXHAUSTED, 2,         \
    "out of memory")                                                          \
  X(kDeviceMemcpy, "device_memcpy", DSA_STATUS_INTERNAL, 700,                 \
    "an illegal memory access was encountered")                               \
  X(kDeviceSynchronize, "device_synchronize", DSA_STATUS_INTERNAL, 719,       \
    "unspecified launch failure")                                             \
  X(kDeviceMemoryInfo, "device_memory_info", DSA_STATUS_INTERNAL, 999,        \
    "unknown error")                                                          \
  X(kOpCall, "op call", DSA_STATUS_INTERNAL, 719,                             \
    "unspecified launch failure")                                             \
  X(kKernelLaunch, "kernel launch", DSA_STATUS_INTERNAL, 701,                 \
    "too many resources requested for launch")                                \
  X(kStreamAlloc, "stream-ordered allocation", DSA_STATUS_RESOURCE_EXHAUSTED, \
    2, "out of memory")                                                       \
  X(kStreamCopy, "stream copy", DSA_STATUS_INTERNAL, 700,                     \
    "an illegal memory access was encountered")                               \
  X(kStreamSynchronize, "stream synchronize", DSA_STATUS_INTERNAL, 719,       \
    "unspecified launch failure")                                             \
  X(kEvent, "event", DSA_STATUS_INTERNAL, 719, "unspecified launch failure")  \
  X(kVendorBlas, "vendor BLAS call", DSA_STATUS_INTERNAL, 999,                \
    "the library's status")                                                   \
  X(kStreamCreate, "stream create", DSA_STATUS_RESOURCE_EXHAUSTED, 2,         \
    "out of memory")                                                          \
  X(kCollective, "collective call", DSA_STATUS_INTERNAL, 999,                 \
    "unhandled cuda error")

enum class FaultSite : int {
#define DSA_FAULT_SITE_ENUM(e, name, code, runtime_error, text) e,
  DSA_FAULT_SITES(DSA_FAULT_SITE_ENUM)
#undef DSA_FAULT_SITE_ENUM
};
inline constexpr int kNumFaultSites = 0
#define DSA_FAULT_SITE_COUNT(e, name, code, runtime_error, text) +1
    DSA_FAULT_SITES(DSA_FAULT_SITE_COUNT)
#undef DSA_FAULT_SITE_COUNT
    ;

// "device_malloc", ...
const char* FaultSiteName(FaultSite site);
// The HIP/CUDA runtime's error of a failing call of `site`'s kind.
int FaultSiteRuntimeError(FaultSite site);

constexpr uint32_t FaultSiteBit(FaultSite site) {
  return uint32_t{1} << static_cast<int>(site);
}
inline constexpr uint32_t kAllFaultSites = (uint32_t{1} << kNumFaultSites) - 1;

struct FaultPlan {
  // The call to fail, counting from 1 over the calls at `sites` since the
  // injector was made; 0 fails none (the injector only counts).
  int64_t fail_at = 0;
  // Every counted call from fail_at on fails, as on a device that was lost;
  // otherwise that one call alone.
  bool persistent = false;
  // The sites counted and failed: FaultSiteBit(...) | ...; all by default.
  uint32_t sites = kAllFaultSites;
};

// Counts the calls at the fault sites while it lives, and makes the plan's
// call fail. One at a time: a second one made while another lives is
// inactive (active() false) and counts nothing. Destroy it only when no call
// is in flight on another thread.
class FaultInjector {
 public:
  explicit FaultInjector(const FaultPlan& plan = {});
  ~FaultInjector();
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  bool active() const { return active_; }
  // Calls counted so far, in all and at one site.
  int64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  int64_t calls(FaultSite site) const {
    return site_calls_[static_cast<int>(site)].load(std::memory_order_relaxed);
  }
  // Calls made to fail so far, and the site of the first one (meaningful
  // once faults() > 0).
  int64_t faults() const { return faults_.load(std::memory_order_relaxed); }
  FaultSite first_fault_site() const {
    return static_cast<FaultSite>(first_site_.load(std::memory_order_relaxed));
  }

  // A site's question: counts the call; true when it is to fail.
  bool Hit(FaultSite site);

 private:
  const FaultPlan plan_;
  bool active_ = false;
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> site_calls_[kNumFaultSites] = {};
  std::atomic<int64_t> faults_{0};
  std::atomic<int> first_site_{0};
};

namespace fault_internal {
extern std::atomic<FaultInjector*> g_active_injector;
}  // namespace fault_internal

// True when the call at `site` is to fail (a FaultInjector lives and its plan
// says so). The site then returns the error of a failing real call.
inline bool FaultInjected(FaultSite site) {
  FaultInjector* injector =
      fault_internal::g_active_injector.load(std::memory_order_relaxed);
  if (__builtin_expect(injector == nullptr, 1)) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return injector->Hit(site);
}

// For the sites that answer in the plugin ABI's terms: writes the message of
// `site`'s failure ("device_malloc: out of memory (injected fault)") into
// `error` and returns its code.
DsaStatusCode InjectedFaultError(FaultSite site, char* error,
                                 size_t error_size);

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_FAULT_INJECTION_H_
