// A stand-in for libcuda with the entry points of cuda_symbols.h, over host
// memory: one sm_90 device whose allocations above kFakeDeviceBytes fail with
// CUDA_ERROR_OUT_OF_MEMORY, a primary context, a per-thread current context
// as the driver keeps it, and streams (every copy on one done at once; a
// handle that is not a live stream is CUDA_ERROR_INVALID_HANDLE). The CUDA
// plugin tests load it through DSA_CUDA_DRIVER_LIBRARY to exercise the plugin's
// driver paths (load, probe, context switching, memory, error codes) on
// machines without an NVIDIA GPU. The FakeCuda* functions let a test count
// calls and make another context current, as a second library on the same
// thread would. Built with FAKE_CUDA_WITHOUT_CTX_GET_CURRENT it lacks
// cuCtxGetCurrent, a required symbol.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#define FAKE_EXPORT __attribute__((visibility("default")))

namespace {

constexpr int kSuccess = 0;
constexpr int kErrorInvalidValue = 1;
constexpr int kErrorOutOfMemory = 2;
constexpr int kErrorNotInitialized = 3;
constexpr int kErrorInvalidContext = 201;
constexpr int kErrorInvalidHandle = 400;
constexpr int kErrorHostMemoryAlreadyRegistered = 712;
constexpr int kErrorHostMemoryNotRegistered = 713;
constexpr size_t kFakeDeviceBytes = size_t{1} << 30;

int primary_context_object = 0;
int foreign_context_object = 0;
void* const kPrimaryContext = &primary_context_object;
void* const kForeignContext = &foreign_context_object;

std::atomic<bool> initialized{false};
std::atomic<int> retain_calls{0};
std::atomic<int> set_current_calls{0};
std::atomic<int> get_current_calls{0};
thread_local void* current_context = nullptr;
std::atomic<int> live_streams{0};

// Page-locked ranges: start -> bytes.
std::mutex registered_mutex;
std::map<uintptr_t, size_t> registered;
std::atomic<int> stream_flags_seen{-1};

struct FakeStream {
  static constexpr uint32_t kMagic = 0x57524541;
  uint32_t magic = kMagic;
};
bool IsStream(void* stream) {
  return stream != nullptr &&
         static_cast<FakeStream*>(stream)->magic == FakeStream::kMagic;
}

// Memory calls need the primary context current, as the real driver needs
// some context.
int CheckContext() {
  if (!initialized) return kErrorNotInitialized;
  return current_context == kPrimaryContext ? kSuccess : kErrorInvalidContext;
}

}  // namespace

extern "C" {

FAKE_EXPORT int cuInit(unsigned flags) {
  if (flags != 0) return kErrorInvalidValue;
  initialized = true;
  return kSuccess;
}

FAKE_EXPORT int cuDriverGetVersion(int* version) {
  if (version == nullptr) return kErrorInvalidValue;
  *version = 13000;
  return kSuccess;
}

FAKE_EXPORT int cuDeviceGetCount(int* count) {
  if (!initialized) return kErrorNotInitialized;
  if (count == nullptr) return kErrorInvalidValue;
  *count = 1;
  return kSuccess;
}

FAKE_EXPORT int cuDeviceGet(int* device, int ordinal) {
  if (!initialized) return kErrorNotInitialized;
  if (device == nullptr || ordinal != 0) return kErrorInvalidValue;
  *device = 0;
  return kSuccess;
}

FAKE_EXPORT int cuDeviceGetName(char* name, int len, int device) {
  if (name == nullptr || len <= 0 || device != 0) return kErrorInvalidValue;
  std::snprintf(name, static_cast<size_t>(len), "Fake NVIDIA H200");
  return kSuccess;
}

FAKE_EXPORT int cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (value == nullptr || device != 0) return kErrorInvalidValue;
  switch (attribute) {
    case 75:  // compute capability major
      *value = 9;
      return kSuccess;
    case 76:  // compute capability minor
      *value = 0;
      return kSuccess;
    default:
      return kErrorInvalidValue;
  }
}

FAKE_EXPORT int cuDeviceTotalMem_v2(size_t* bytes, int device) {
  if (bytes == nullptr || device != 0) return kErrorInvalidValue;
  *bytes = kFakeDeviceBytes;
  return kSuccess;
}

FAKE_EXPORT int cuDevicePrimaryCtxRetain(void** context, int device) {
  if (!initialized) return kErrorNotInitialized;
  if (context == nullptr || device != 0) return kErrorInvalidValue;
  ++retain_calls;
  *context = kPrimaryContext;
  return kSuccess;
}

#ifndef FAKE_CUDA_WITHOUT_CTX_GET_CURRENT
FAKE_EXPORT int cuCtxGetCurrent(void** context) {
  if (context == nullptr) return kErrorInvalidValue;
  ++get_current_calls;
  *context = current_context;
  return kSuccess;
}
#endif

FAKE_EXPORT int cuCtxSetCurrent(void* context) {
  ++set_current_calls;
  current_context = context;
  return kSuccess;
}

FAKE_EXPORT int cuCtxSynchronize() { return CheckContext(); }

FAKE_EXPORT int cuMemAlloc_v2(unsigned long long* ptr, size_t size) {
  if (int err = CheckContext(); err != kSuccess) return err;
  if (ptr == nullptr || size == 0) return kErrorInvalidValue;
  if (size > kFakeDeviceBytes) return kErrorOutOfMemory;
  void* p = std::malloc(size);
  if (p == nullptr) return kErrorOutOfMemory;
  *ptr = reinterpret_cast<uintptr_t>(p);
  return kSuccess;
}

FAKE_EXPORT int cuMemFree_v2(unsigned long long ptr) {
  if (int err = CheckContext(); err != kSuccess) return err;
  std::free(reinterpret_cast<void*>(static_cast<uintptr_t>(ptr)));
  return kSuccess;
}

FAKE_EXPORT int cuMemcpyHtoD_v2(unsigned long long dst, const void* src,
                                size_t size) {
  if (int err = CheckContext(); err != kSuccess) return err;
  if (size > 0 && (dst == 0 || src == nullptr)) return kErrorInvalidValue;
  if (size > 0) {
    std::memmove(reinterpret_cast<void*>(static_cast<uintptr_t>(dst)), src,
                 size);
  }
  return kSuccess;
}

FAKE_EXPORT int cuMemcpyDtoH_v2(void* dst, unsigned long long src,
                                size_t size) {
  if (int err = CheckContext(); err != kSuccess) return err;
  if (size > 0 && (dst == nullptr || src == 0)) return kErrorInvalidValue;
  if (size > 0) {
    std::memmove(
        dst, reinterpret_cast<const void*>(static_cast<uintptr_t>(src)), size);
  }
  return kSuccess;
}

FAKE_EXPORT int cuMemcpyDtoD_v2(unsigned long long dst, unsigned long long src,
                                size_t size) {
  if (int err = CheckContext(); err != kSuccess) return err;
  if (size > 0 && (dst == 0 || src == 0)) return kErrorInvalidValue;
  if (size > 0) {
    std::memmove(reinterpret_cast<void*>(static_cast<uintptr_t>(dst)),
                 reinterpret_cast<const void*>(static_cast<uintptr_t>(src)),
                 size);
  }
  return kSuccess;
}

FAKE_EXPORT int cuStreamCreate(void** stream, unsigned flags) {
  if (int err = CheckContext(); err != kSuccess) return err;
  if (stream == nullptr || flags > 1) return kErrorInvalidValue;
  *stream = new FakeStream();
  stream_flags_seen = static_cast<int>(flags);
  ++live_streams;
  return kSuccess;
}

FAKE_EXPORT int cuStreamDestroy_v2(void* stream) {
  if (int err = CheckContext(); err != kSuccess) return err;
  if (!IsStream(stream)) return kErrorInvalidHandle;
  static_cast<FakeStream*>(stream)->magic = 0;
  delete static_cast<FakeStream*>(stream);
  --live_streams;
  return kSuccess;
}

FAKE_EXPORT int cuStreamSynchronize(void* stream) {
  if (int err = CheckContext(); err != kSuccess) return err;
  return IsStream(stream) ? kSuccess : kErrorInvalidHandle;
}

FAKE_EXPORT int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src,
                                     size_t size, void* stream) {
  if (!IsStream(stream)) return kErrorInvalidHandle;
  return cuMemcpyHtoD_v2(dst, src, size);
}

FAKE_EXPORT int cuMemcpyDtoHAsync_v2(void* dst, unsigned long long src,
                                     size_t size, void* stream) {
  if (!IsStream(stream)) return kErrorInvalidHandle;
  return cuMemcpyDtoH_v2(dst, src, size);
}

FAKE_EXPORT int cuMemcpyDtoDAsync_v2(unsigned long long dst,
                                     unsigned long long src, size_t size,
                                     void* stream) {
  if (!IsStream(stream)) return kErrorInvalidHandle;
  return cuMemcpyDtoD_v2(dst, src, size);
}

// Half of the device in use, as if another process held it.
FAKE_EXPORT int cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (int err = CheckContext(); err != kSuccess) return err;
  if (free == nullptr || total == nullptr) return kErrorInvalidValue;
  *free = kFakeDeviceBytes / 2;
  *total = kFakeDeviceBytes;
  return kSuccess;
}

FAKE_EXPORT int cuMemHostRegister_v2(void* ptr, size_t size, unsigned flags) {
  if (int err = CheckContext(); err != kSuccess) return err;
  if (ptr == nullptr || size == 0 || flags > 0x0f) return kErrorInvalidValue;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(registered_mutex);
  auto next = registered.lower_bound(begin);
  if (next != registered.end() && next->first < begin + size) {
    return kErrorHostMemoryAlreadyRegistered;
  }
  if (next != registered.begin() &&
      std::prev(next)->first + std::prev(next)->second > begin) {
    return kErrorHostMemoryAlreadyRegistered;
  }
  registered[begin] = size;
  return kSuccess;
}

FAKE_EXPORT int cuMemHostUnregister(void* ptr) {
  if (int err = CheckContext(); err != kSuccess) return err;
  std::lock_guard<std::mutex> lock(registered_mutex);
  if (registered.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
    return kErrorHostMemoryNotRegistered;
  }
  return kSuccess;
}

FAKE_EXPORT int cuGetErrorString(int error, const char** text) {
  if (text == nullptr) return kErrorInvalidValue;
  switch (error) {
    case kSuccess:
      *text = "no error";
      return kSuccess;
    case kErrorInvalidValue:
      *text = "invalid argument";
      return kSuccess;
    case kErrorOutOfMemory:
      *text = "out of memory";
      return kSuccess;
    case kErrorInvalidContext:
      *text = "invalid device context";
      return kSuccess;
    case kErrorInvalidHandle:
      *text = "invalid resource handle";
      return kSuccess;
    case kErrorHostMemoryAlreadyRegistered:
      *text = "part or all of the requested memory range is already mapped";
      return kSuccess;
    case kErrorHostMemoryNotRegistered:
      *text = "pointer does not correspond to a registered memory region";
      return kSuccess;
    default:
      *text = nullptr;
      return kErrorInvalidValue;
  }
}

// Test hooks.
FAKE_EXPORT int FakeCudaPrimaryCtxRetainCalls() { return retain_calls; }
FAKE_EXPORT int FakeCudaCtxSetCurrentCalls() { return set_current_calls; }
FAKE_EXPORT int FakeCudaCtxGetCurrentCalls() { return get_current_calls; }
FAKE_EXPORT void FakeCudaMakeForeignContextCurrent() {
  current_context = kForeignContext;
}
FAKE_EXPORT void* FakeCudaCurrentContext() { return current_context; }
FAKE_EXPORT void* FakeCudaPrimaryContext() { return kPrimaryContext; }
FAKE_EXPORT int FakeCudaLiveStreams() { return live_streams; }
FAKE_EXPORT int FakeCudaLastStreamFlags() { return stream_flags_seen; }
FAKE_EXPORT int FakeCudaRegisteredRanges() {
  std::lock_guard<std::mutex> lock(registered_mutex);
  return static_cast<int>(registered.size());
}

}  // extern "C"
