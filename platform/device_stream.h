// A stream of a platform's device 0 that a host orders its copies and
// kernels on, destroyed when it goes out of scope. Move-only.
//
// On a platform whose plugin has streams (plugin API 1.2) it is a
// non-blocking stream: copies on it are asynchronous (plugin_api.h says when
// a host buffer may be reused) and Synchronize waits for it alone. On one
// without (an older plugin), handle() is NULL, the default stream kernels
// then take, copies are the runtime's synchronous ones and Synchronize
// waits for the whole device: what a host did before streams.
#ifndef DSA_PLATFORM_DEVICE_STREAM_H_
#define DSA_PLATFORM_DEVICE_STREAM_H_

#include <cstddef>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "platform/registry.h"

namespace dsa::platform {

class DeviceStream {
 public:
  DeviceStream() = default;  // none yet: every call is FailedPrecondition
  ~DeviceStream() { Reset(); }
  DeviceStream(DeviceStream&& other) noexcept { *this = std::move(other); }
  DeviceStream& operator=(DeviceStream&& other) noexcept {
    if (this != &other) {
      Reset();
      runtime_ = std::move(other.runtime_);
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  // A new stream, or the fallback on a platform without streams.
  static absl::StatusOr<DeviceStream> Create(const DeviceRuntime& runtime) {
    DeviceStream s;
    if (runtime.has_streams()) {
      absl::StatusOr<void*> stream = runtime.CreateStream();
      if (!stream.ok()) return stream.status();
      s.stream_ = *stream;
    }
    s.runtime_.emplace(runtime);
    return s;
  }

  // What kernels take in ExecutionContext::stream (NULL in the fallback).
  void* handle() const { return stream_; }
  // Whether copies and waits are ordered on a stream of the platform's.
  bool ordered() const { return stream_ != nullptr; }

  absl::Status CopyHostToDevice(void* dst, const void* src,
                                size_t bytes) const {
    return Copy(dst, src, bytes, DSA_MEMCPY_HOST_TO_DEVICE);
  }
  absl::Status CopyDeviceToDevice(void* dst, const void* src,
                                  size_t bytes) const {
    return Copy(dst, src, bytes, DSA_MEMCPY_DEVICE_TO_DEVICE);
  }
  // Into pageable host memory this waits for the copy (plugin_api.h), so
  // `dst` holds the bytes when it returns; what the stream ran before it
  // is done too.
  absl::Status CopyDeviceToHost(void* dst, const void* src,
                                size_t bytes) const {
    return Copy(dst, src, bytes, DSA_MEMCPY_DEVICE_TO_HOST);
  }
  // Waits until the work queued on the stream is done (the whole device's
  // in the fallback).
  absl::Status Synchronize() const {
    if (!runtime_.has_value()) return NoStream();
    return stream_ != nullptr ? runtime_->SynchronizeStream(stream_)
                              : runtime_->Synchronize();
  }

 private:
  absl::Status Copy(void* dst, const void* src, size_t bytes,
                    DsaMemcpyKind kind) const {
    if (!runtime_.has_value()) return NoStream();
    if (stream_ != nullptr) {
      return runtime_->CopyAsync(dst, src, bytes, kind, stream_);
    }
    switch (kind) {
      case DSA_MEMCPY_HOST_TO_DEVICE:
        return runtime_->CopyHostToDevice(dst, src, bytes);
      case DSA_MEMCPY_DEVICE_TO_HOST:
        return runtime_->CopyDeviceToHost(dst, src, bytes);
      default:
        return runtime_->CopyDeviceToDevice(dst, src, bytes);
    }
  }
  static absl::Status NoStream() {
    return absl::FailedPreconditionError("no device stream was created");
  }
  void Reset() {
    if (stream_ != nullptr && runtime_.has_value()) {
      // Nothing to report in a destructor; queued work still completes.
      runtime_->DestroyStream(stream_).IgnoreError();
    }
    stream_ = nullptr;
    runtime_.reset();
  }

  std::optional<DeviceRuntime> runtime_;
  void* stream_ = nullptr;
};

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_DEVICE_STREAM_H_
