// Scratch device memory for one launcher call (intermediate tensors a kernel
// chain needs, such as decompressed keys and values), taken from the
// runtime's stream-ordered pool on the call's stream and given back on the
// same stream when the object goes out of scope. The memory stays valid for
// every kernel enqueued on that stream before the release, so a launcher can
// return without synchronising; the pool reuses the blocks on the next call,
// so steady-state calls do not reach the driver's allocator.
// Device-compiler sources only (gpu_kernel_library()).
#ifndef DSA_ATTENTION_GPU_STREAM_SCRATCH_H_
#define DSA_ATTENTION_GPU_STREAM_SCRATCH_H_

#include <cstddef>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_result.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {

class StreamScratch {
 public:
  explicit StreamScratch(hipStream_t stream) : stream_(stream) {}
  ~StreamScratch() {
    for (int i = 0; i < count_; ++i) (void)hipFreeAsync(ptrs_[i], stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  // `bytes` (at least 1) of device memory at *ptr, 256-byte aligned.
  // Errors name `what` (out of memory is kOutOfMemory). A fault site
  // (platform/fault_injection.h).
  template <class T>
  LaunchResult Get(T** ptr, size_t bytes, const char* what) {
    if (count_ == kMaxBuffers) {
      return Invalid(what, "more than %d scratch buffers in one call",
                     kMaxBuffers);
    }
    void* p = nullptr;
    LaunchResult r = FallibleCall(platform::FaultSite::kStreamAlloc, what, [&] {
      return hipMallocAsync(&p, bytes == 0 ? 1 : bytes, stream_);
    });
    if (!r.ok()) return r;
    ptrs_[count_++] = p;
    *ptr = static_cast<T*>(p);
    return r;
  }

 private:
  static constexpr int kMaxBuffers = 8;
  hipStream_t stream_;
  void* ptrs_[kMaxBuffers] = {};
  int count_ = 0;
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_STREAM_SCRATCH_H_
