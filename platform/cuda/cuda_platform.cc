#include "platform/cuda/cuda_platform.h"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "platform/plugin_util.h"
#include "platform/runtime_library.h"

namespace dsa::platform {
namespace {

constexpr const char* kKnownArchs[] = {"sm_90", "sm_100"};
constexpr const char* kDefaultArch = "sm_90";

// Hopper (H100/H200) and Blackwell (B200): OCP E4M3 KV caches, 32-wide warps,
// dense-MHA prefill and decode context parallelism in the sparse MLA backend.
constexpr ArchCapabilities kCapabilities[] = {
    {"sm_90", 1, DSA_FP8_E4M3FN, 32, 1, 1},
    {"sm_100", 1, DSA_FP8_E4M3FN, 32, 1, 1},
};

// CUDA driver API entry points, declared here so that nothing includes or
// links CUDA at build time. CUresult is an int enum; CUdevice an int;
// CUdeviceptr an unsigned long long; CUcontext an opaque pointer.
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorNoDevice = 100;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

struct CudaApi {
  int (*cuInit)(unsigned) = nullptr;
  int (*cuDriverGetVersion)(int*) = nullptr;
  int (*cuDeviceGetCount)(int*) = nullptr;
  int (*cuDeviceGet)(int*, int) = nullptr;
  int (*cuDeviceGetName)(char*, int, int) = nullptr;
  int (*cuDeviceGetAttribute)(int*, int, int) = nullptr;
  int (*cuDeviceTotalMem_v2)(size_t*, int) = nullptr;
  int (*cuGetErrorString)(int, const char**) = nullptr;
  int (*cuDevicePrimaryCtxRetain)(void**, int) = nullptr;
  int (*cuCtxSetCurrent)(void*) = nullptr;
  int (*cuCtxSynchronize)() = nullptr;
  int (*cuMemAlloc_v2)(unsigned long long*, size_t) = nullptr;
  int (*cuMemFree_v2)(unsigned long long) = nullptr;
  int (*cuMemcpyHtoD_v2)(unsigned long long, const void*, size_t) = nullptr;
  int (*cuMemcpyDtoH_v2)(void*, unsigned long long, size_t) = nullptr;
  int (*cuMemcpyDtoD_v2)(unsigned long long, unsigned long long,
                         size_t) = nullptr;
};

struct CudaRuntime {
  RuntimeLoad load = RuntimeLoad::kNotInstalled;
  std::string library;
  std::string detail;
  int init_result = kCudaErrorNoDevice;
  CudaApi api;
};

const CudaRuntime& Runtime() {
  static const CudaRuntime* const runtime = [] {
    auto* r = new CudaRuntime();
    static const char* const kCandidates[] = {"libcuda.so.1", "libcuda.so"};
    CudaApi& a = r->api;
    const RuntimeSymbol symbols[] = {
        {"cuInit", reinterpret_cast<void**>(&a.cuInit), true},
        {"cuDriverGetVersion", reinterpret_cast<void**>(&a.cuDriverGetVersion), true},
        {"cuDeviceGetCount", reinterpret_cast<void**>(&a.cuDeviceGetCount), true},
        {"cuDeviceGet", reinterpret_cast<void**>(&a.cuDeviceGet), true},
        {"cuDeviceGetName", reinterpret_cast<void**>(&a.cuDeviceGetName), true},
        {"cuDeviceGetAttribute", reinterpret_cast<void**>(&a.cuDeviceGetAttribute), true},
        {"cuDeviceTotalMem_v2", reinterpret_cast<void**>(&a.cuDeviceTotalMem_v2), true},
        {"cuGetErrorString", reinterpret_cast<void**>(&a.cuGetErrorString), false},
        {"cuDevicePrimaryCtxRetain", reinterpret_cast<void**>(&a.cuDevicePrimaryCtxRetain), false},
        {"cuCtxSetCurrent", reinterpret_cast<void**>(&a.cuCtxSetCurrent), false},
        {"cuCtxSynchronize", reinterpret_cast<void**>(&a.cuCtxSynchronize), false},
        {"cuMemAlloc_v2", reinterpret_cast<void**>(&a.cuMemAlloc_v2), false},
        {"cuMemFree_v2", reinterpret_cast<void**>(&a.cuMemFree_v2), false},
        {"cuMemcpyHtoD_v2", reinterpret_cast<void**>(&a.cuMemcpyHtoD_v2), false},
        {"cuMemcpyDtoH_v2", reinterpret_cast<void**>(&a.cuMemcpyDtoH_v2), false},
        {"cuMemcpyDtoD_v2", reinterpret_cast<void**>(&a.cuMemcpyDtoD_v2), false},
    };
    r->load = LoadRuntimeLibrary(kCandidates, symbols, &r->library, &r->detail);
    if (r->load == RuntimeLoad::kLoaded) r->init_result = a.cuInit(0);
    return r;
  }();
  return *runtime;
}

const char* CudaErrorText(int err) {
  const char* text = nullptr;
  const CudaRuntime& r = Runtime();
  if (r.api.cuGetErrorString != nullptr &&
      r.api.cuGetErrorString(err, &text) == kCudaSuccess && text != nullptr) {
    return text;
  }
  return "unknown CUDA error";
}

DsaStatusCode CudaFail(int err, const char* what, char* error,
                       size_t error_size) {
  return PluginError(DSA_STATUS_INTERNAL, error, error_size,
                     "cuda: %s failed: %s (%d)", what, CudaErrorText(err), err);
}

DsaStatusCode CapabilitiesForArch(const char* arch, DsaCapabilities* out,
                                  char* error, size_t error_size) {
  return FillCapabilities(kCapabilities, "cuda", arch, out, error, error_size);
}

DsaStatusCode ProbeDevices(DsaDeviceInfo* out, char* error,
                           size_t error_size) {
  if (out == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: NULL device record");
  }
  DsaDeviceInfo info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  const CudaRuntime& r = Runtime();
  if (r.load == RuntimeLoad::kMissingSymbol) {
    return PluginError(DSA_STATUS_UNAVAILABLE, error, error_size, "cuda: %s",
                       r.detail.c_str());
  }
  // cuInit fails with "no device" on a machine with a driver but no GPU.
  if (r.load == RuntimeLoad::kLoaded && r.init_result == kCudaSuccess) {
    int count = 0;
    const int err = r.api.cuDeviceGetCount(&count);
    if (err != kCudaSuccess && err != kCudaErrorNoDevice) {
      return CudaFail(err, "cuDeviceGetCount", error, error_size);
    }
    info.device_count = err == kCudaSuccess ? count : 0;
    int version = 0;
    if (r.api.cuDriverGetVersion(&version) == kCudaSuccess) {
      info.runtime_version = version;
    }
    int device = 0;
    if (info.device_count > 0 && r.api.cuDeviceGet(&device, 0) == kCudaSuccess) {
      char name[DSA_DEVICE_NAME_SIZE] = {0};
      if (r.api.cuDeviceGetName(name, sizeof(name) - 1, device) ==
          kCudaSuccess) {
        CopyFixedString(info.name, name);
      }
      int major = 0, minor = 0;
      if (r.api.cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor,
                                     device) == kCudaSuccess &&
          r.api.cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor,
                                     device) == kCudaSuccess) {
        std::snprintf(info.arch, sizeof(info.arch), "sm_%d%d", major, minor);
      }
      size_t total = 0;
      if (r.api.cuDeviceTotalMem_v2(&total, device) == kCudaSuccess) {
        info.total_memory_bytes = total;
      }
    }
  } else if (r.load == RuntimeLoad::kLoaded &&
             r.init_result != kCudaErrorNoDevice) {
    return CudaFail(r.init_result, "cuInit", error, error_size);
  }
  CopyToCaller(info, out);
  return DSA_STATUS_OK;
}

// Makes device 0's primary context current on the calling thread; the
// runtime API (used by kernels built with nvcc) shares that context.
DsaStatusCode EnterContext(char* error, size_t error_size) {
  const CudaRuntime& r = Runtime();
  const CudaApi& a = r.api;
  if (r.load != RuntimeLoad::kLoaded || r.init_result != kCudaSuccess ||
      a.cuDevicePrimaryCtxRetain == nullptr || a.cuCtxSetCurrent == nullptr ||
      a.cuMemAlloc_v2 == nullptr || a.cuMemFree_v2 == nullptr ||
      a.cuMemcpyHtoD_v2 == nullptr || a.cuMemcpyDtoH_v2 == nullptr ||
      a.cuMemcpyDtoD_v2 == nullptr || a.cuCtxSynchronize == nullptr) {
    return PluginError(DSA_STATUS_UNAVAILABLE, error, error_size,
                       "cuda: the CUDA driver is not available (%s)",
                       r.detail.empty() ? "no device" : r.detail.c_str());
  }
  static void* context = nullptr;
  static int retain_result = -1;
  static std::once_flag once;
  std::call_once(once, [&] {
    int device = 0;
    retain_result = a.cuDeviceGet(&device, 0);
    if (retain_result == kCudaSuccess) {
      retain_result = a.cuDevicePrimaryCtxRetain(&context, device);
    }
  });
  if (retain_result != kCudaSuccess) {
    return CudaFail(retain_result, "cuDevicePrimaryCtxRetain", error,
                    error_size);
  }
  const int err = a.cuCtxSetCurrent(context);
  if (err != kCudaSuccess) return CudaFail(err, "cuCtxSetCurrent", error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceMalloc(size_t bytes, void** out, char* error,
                           size_t error_size) {
  if (DsaStatusCode c = EnterContext(error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  unsigned long long ptr = 0;
  const int err = Runtime().api.cuMemAlloc_v2(&ptr, bytes == 0 ? 1 : bytes);
  if (err != kCudaSuccess) return CudaFail(err, "cuMemAlloc", error, error_size);
  *out = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceFree(void* ptr, char* error, size_t error_size) {
  if (DsaStatusCode c = EnterContext(error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  const int err = Runtime().api.cuMemFree_v2(
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr)));
  if (err != kCudaSuccess) return CudaFail(err, "cuMemFree", error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceMemcpy(void* dst, const void* src, size_t bytes,
                           int32_t kind, char* error, size_t error_size) {
  if (DsaStatusCode c = EnterContext(error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  const CudaApi& a = Runtime().api;
  const auto d = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(dst));
  const auto s = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(src));
  int err = kCudaSuccess;
  switch (kind) {
    case DSA_MEMCPY_HOST_TO_DEVICE:
      err = a.cuMemcpyHtoD_v2(d, src, bytes);
      break;
    case DSA_MEMCPY_DEVICE_TO_HOST:
      err = a.cuMemcpyDtoH_v2(dst, s, bytes);
      break;
    case DSA_MEMCPY_DEVICE_TO_DEVICE:
      err = a.cuMemcpyDtoD_v2(d, s, bytes);
      break;
    default:
      return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                         "cuda: unknown memcpy kind %d", kind);
  }
  if (err != kCudaSuccess) return CudaFail(err, "cuMemcpy", error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceSynchronize(char* error, size_t error_size) {
  if (DsaStatusCode c = EnterContext(error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  const int err = Runtime().api.cuCtxSynchronize();
  if (err != kCudaSuccess) {
    return CudaFail(err, "cuCtxSynchronize", error, error_size);
  }
  return DSA_STATUS_OK;
}

DsaStatusCode Initialize(const DsaHostApi* host, char* error,
                         size_t error_size) {
  static const DsaPlatformDescriptor descriptor = MakePlatformDescriptor(
      "cuda", DSA_PLATFORM_KIND_CUDA, kDefaultArch, kKnownArchs,
      {&CapabilitiesForArch, &ProbeDevices, &DeviceMalloc, &DeviceFree,
       &DeviceMemcpy, &DeviceSynchronize});
  return RegisterPlatformWithHost(host, descriptor, error, error_size);
}

}  // namespace

const DsaPluginApi* CudaPlatformPluginApi() {
  static const DsaPluginApi api = {
      sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR, DSA_PLUGIN_API_MINOR,
      "dsa_cuda_platform", &Initialize};
  return &api;
}

}  // namespace dsa::platform
