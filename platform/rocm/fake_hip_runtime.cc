// A stand-in for libamdhip64 with the entry points of hip_symbols.h, over host
// memory: one device, "gfx942"-sized and named, whose allocations above
// kFakeDeviceBytes fail with hipErrorOutOfMemory, and streams (every copy on
// one done at once; a handle that is not a live stream is
// hipErrorInvalidHandle). The ROCm plugin tests load
// it through DSA_HIP_RUNTIME_LIBRARY to exercise the plugin's runtime paths
// (load, probe, memory, error codes) on machines without an AMD GPU.
// Built with FAKE_HIP_WITHOUT_MALLOC it lacks hipMalloc, a required symbol.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kHipSuccess = 0;
constexpr int kHipErrorInvalidValue = 1;
constexpr int kHipErrorOutOfMemory = 2;
constexpr int kHipErrorInvalidHandle = 400;
constexpr size_t kFakeDeviceBytes = size_t{1} << 30;

std::atomic<int> live_streams{0};
std::atomic<int> stream_flags_seen{-1};

struct FakeStream {
  static constexpr uint32_t kMagic = 0x57524541;
  uint32_t magic = kMagic;
};
bool IsStream(void* stream) {
  return stream != nullptr &&
         static_cast<FakeStream*>(stream)->magic == FakeStream::kMagic;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int hipGetDeviceCount(int* count) {
  if (count == nullptr) return kHipErrorInvalidValue;
  *count = 1;
  return kHipSuccess;
}

__attribute__((visibility("default"))) int hipRuntimeGetVersion(int* version) {
  if (version == nullptr) return kHipErrorInvalidValue;
  *version = 50203;
  return kHipSuccess;
}

__attribute__((visibility("default"))) int hipDeviceGetName(char* name, int len,
                                                            int device) {
  if (name == nullptr || len <= 0 || device != 0) return kHipErrorInvalidValue;
  std::snprintf(name, static_cast<size_t>(len), "Fake AMD Instinct");
  return kHipSuccess;
}

__attribute__((visibility("default"))) int hipDeviceTotalMem(size_t* bytes,
                                                             int device) {
  if (bytes == nullptr || device != 0) return kHipErrorInvalidValue;
  *bytes = kFakeDeviceBytes;
  return kHipSuccess;
}

#ifndef FAKE_HIP_WITHOUT_MALLOC
__attribute__((visibility("default"))) int hipMalloc(void** ptr, size_t size) {
  if (ptr == nullptr) return kHipErrorInvalidValue;
  if (size > kFakeDeviceBytes) return kHipErrorOutOfMemory;
  *ptr = std::malloc(size);
  return *ptr != nullptr ? kHipSuccess : kHipErrorOutOfMemory;
}
#endif

__attribute__((visibility("default"))) int hipFree(void* ptr) {
  std::free(ptr);
  return kHipSuccess;
}

__attribute__((visibility("default"))) int hipMemcpy(void* dst, const void* src,
                                                     size_t size, int kind) {
  if (kind < 0 || kind > 4) return kHipErrorInvalidValue;
  if (size > 0 && (dst == nullptr || src == nullptr)) {
    return kHipErrorInvalidValue;
  }
  if (size > 0) std::memmove(dst, src, size);
  return kHipSuccess;
}

__attribute__((visibility("default"))) int hipDeviceSynchronize() {
  return kHipSuccess;
}

__attribute__((visibility("default"))) int hipStreamCreateWithFlags(
    void** stream, unsigned flags) {
  if (stream == nullptr || flags > 1) return kHipErrorInvalidValue;
  *stream = new FakeStream();
  stream_flags_seen = static_cast<int>(flags);
  ++live_streams;
  return kHipSuccess;
}

__attribute__((visibility("default"))) int hipStreamDestroy(void* stream) {
  if (!IsStream(stream)) return kHipErrorInvalidHandle;
  static_cast<FakeStream*>(stream)->magic = 0;
  delete static_cast<FakeStream*>(stream);
  --live_streams;
  return kHipSuccess;
}

__attribute__((visibility("default"))) int hipStreamSynchronize(void* stream) {
  return IsStream(stream) ? kHipSuccess : kHipErrorInvalidHandle;
}

__attribute__((visibility("default"))) int hipMemcpyAsync(void* dst,
                                                          const void* src,
                                                          size_t size, int kind,
                                                          void* stream) {
  if (!IsStream(stream)) return kHipErrorInvalidHandle;
  return hipMemcpy(dst, src, size, kind);
}

// Test hooks.
__attribute__((visibility("default"))) int FakeHipLiveStreams() {
  return live_streams;
}
__attribute__((visibility("default"))) int FakeHipLastStreamFlags() {
  return stream_flags_seen;
}

// Half of the device in use, as if another process held it.
__attribute__((visibility("default"))) int hipMemGetInfo(size_t* free,
                                                         size_t* total) {
  if (free == nullptr || total == nullptr) return kHipErrorInvalidValue;
  *free = kFakeDeviceBytes / 2;
  *total = kFakeDeviceBytes;
  return kHipSuccess;
}

__attribute__((visibility("default"))) const char* hipGetErrorString(
    int error) {
  switch (error) {
    case kHipSuccess:
      return "no error";
    case kHipErrorInvalidValue:
      return "invalid argument";
    case kHipErrorOutOfMemory:
      return "out of memory";
    case kHipErrorInvalidHandle:
      return "invalid resource handle";
    default:
      return "unknown error";
  }
}

}  // extern "C"
