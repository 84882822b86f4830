// An owning buffer of a platform's device memory (host memory on the CPU
// platform), freed when it goes out of scope. Move-only.
#ifndef DSA_PLATFORM_DEVICE_BUFFER_H_
#define DSA_PLATFORM_DEVICE_BUFFER_H_

#include <cstddef>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "platform/registry.h"

namespace dsa::platform {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      runtime_ = std::move(other.runtime_);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  static absl::StatusOr<DeviceBuffer> Allocate(const DeviceRuntime& runtime,
                                               size_t bytes) {
    absl::StatusOr<void*> data = runtime.Allocate(bytes);
    if (!data.ok()) return data.status();
    DeviceBuffer buffer;
    buffer.runtime_.emplace(runtime);
    buffer.data_ = *data;
    buffer.bytes_ = bytes;
    return buffer;
  }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }

  absl::Status CopyFromHost(const void* src, size_t bytes) const {
    if (bytes > bytes_) {
      return absl::OutOfRangeError("copy larger than the device buffer");
    }
    return runtime_->CopyHostToDevice(data_, src, bytes);
  }
  absl::Status CopyToHost(void* dst, size_t bytes) const {
    if (bytes > bytes_) {
      return absl::OutOfRangeError("copy larger than the device buffer");
    }
    return runtime_->CopyDeviceToHost(dst, data_, bytes);
  }

 private:
  void Reset() {
    if (data_ != nullptr && runtime_.has_value()) {
      runtime_->Free(data_).IgnoreError();  // nothing to report in a destructor
    }
    data_ = nullptr;
    bytes_ = 0;
  }

  std::optional<DeviceRuntime> runtime_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_DEVICE_BUFFER_H_
