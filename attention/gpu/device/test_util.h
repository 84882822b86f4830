// Test helpers for the GPU launchers (each family's launch.h): an owning
// device allocation over DeviceMalloc/DeviceFree, and ASSERT_LAUNCH, which
// skips a test cleanly where there is no device or no GPU backend in the
// build and fails it on any other launch error. Plain C++ (no GPU runtime
// headers), for gtests built by the host compiler; testonly.
#ifndef DSA_ATTENTION_GPU_DEVICE_TEST_UTIL_H_
#define DSA_ATTENTION_GPU_DEVICE_TEST_UTIL_H_

#include <cstddef>
#include <vector>

#include "attention/gpu/device/runtime.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {

// Owns one device allocation.
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() {
    if (ptr_ != nullptr) (void)DeviceFree(ptr_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  LaunchResult Allocate(size_t bytes) {
    if (ptr_ != nullptr) (void)DeviceFree(ptr_);
    ptr_ = nullptr;
    bytes_ = bytes;
    return DeviceMalloc(&ptr_, bytes == 0 ? 1 : bytes);
  }
  template <typename T>
  LaunchResult Upload(const std::vector<T>& host) {
    LaunchResult r = Allocate(host.size() * sizeof(T));
    if (!r.ok() || host.empty()) return r;
    return CopyToDevice(ptr_, host.data(), bytes_);
  }
  template <typename T>
  LaunchResult Download(std::vector<T>* host) const {
    host->resize(bytes_ / sizeof(T));
    if (bytes_ == 0) return LaunchResult{};
    return CopyToHost(host->data(), ptr_, bytes_);
  }
  template <typename T>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dsa::attention::gpu

// Stops the test: skipped without a device or a GPU backend, failed on any
// other error.
#define ASSERT_LAUNCH(expr)                                        \
  do {                                                             \
    const ::dsa::attention::gpu::LaunchResult r_ = (expr);         \
    if (r_.code == ::dsa::attention::gpu::LaunchCode::kNoDevice || \
        r_.code == ::dsa::attention::gpu::LaunchCode::kNotBuilt) { \
      GTEST_SKIP() << r_.message;                                  \
    }                                                              \
    ASSERT_EQ(r_.code, ::dsa::attention::gpu::LaunchCode::kOk)     \
        << #expr << ": " << r_.message;                            \
  } while (0)

#endif  // DSA_ATTENTION_GPU_DEVICE_TEST_UTIL_H_
