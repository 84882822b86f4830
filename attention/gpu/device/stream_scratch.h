// Scratch device memory for one launcher call (intermediate tensors a kernel
// chain needs, such as decompressed keys and values): the call names its
// buffers (Add), then takes them all at once from its stream's scratch
// arena (Allocate; device/scratch_arena.h, runtime.h), which holds the
// memory across calls, so that a call that fits what its stream already
// holds makes no allocation and no free. The buffers are the call's until
// the object goes out of scope, which the launcher lets happen once its last
// kernel is enqueued: they stay valid for every kernel enqueued on the
// stream before the next call's, and the next call on another thread waits
// for the scope to end.
// Device-compiler sources only (gpu_kernel_library()).
#ifndef DSA_ATTENTION_GPU_STREAM_SCRATCH_H_
#define DSA_ATTENTION_GPU_STREAM_SCRATCH_H_

#include <cstddef>
#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_result.h"
#include "attention/gpu/device/runtime.h"
#include "attention/gpu/device/scratch_arena.h"

namespace dsa::attention::gpu {

class StreamScratch {
 public:
  // `device`: the current device (DeviceFeatures::device).
  StreamScratch(hipStream_t stream, int device)
      : stream_(stream), device_(device) {}
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  // A buffer of `bytes` (0 is allowed), 256-byte aligned, at *ptr once
  // Allocate succeeds.
  template <class T>
  void Add(T** ptr, size_t bytes) {
    if (count_ == kMaxBuffers) {
      too_many_ = true;
      return;
    }
    buffers_[count_++] = {ptr, layout_.Add(bytes), [](void* p, uint8_t* at) {
                            *static_cast<T**>(p) = reinterpret_cast<T*>(at);
                          }};
  }

  // Every buffer Add named, from one block of the stream's arena. Errors
  // name `what` (out of memory is kOutOfMemory; the arena is then as it
  // was). A fault site (platform/fault_injection.h) when the arena grows.
  LaunchResult Allocate(const char* what) {
    if (too_many_) {
      return Invalid(what, "more than %d scratch buffers in one call",
                     kMaxBuffers);
    }
    LaunchResult r =
        AcquireStreamScratch(stream_, device_, layout_.bytes(), what, &lease_);
    if (!r.ok()) return r;
    for (int i = 0; i < count_; ++i) {
      buffers_[i].assign(buffers_[i].ptr, lease_.base() + buffers_[i].offset);
    }
    return r;
  }

 private:
  static constexpr int kMaxBuffers = 8;
  struct Buffer {
    void* ptr;  // a T**
    size_t offset;
    void (*assign)(void* ptr, uint8_t* at);
  };
  hipStream_t stream_;
  int device_;
  ScratchLayout layout_;
  Buffer buffers_[kMaxBuffers] = {};
  int count_ = 0;
  bool too_many_ = false;
  ScratchArenas::Lease lease_;
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_STREAM_SCRATCH_H_
