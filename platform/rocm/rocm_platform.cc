#include "platform/rocm/rocm_platform.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "platform/plugin_util.h"
#include "platform/runtime_library.h"

namespace dsa::platform {
namespace {

constexpr const char* kKnownArchs[] = {"gfx90a", "gfx940", "gfx942",
                                       "gfx950"};
constexpr const char* kDefaultArch = "gfx942";

// KV-cache fp8 follows the hardware: the "fnuz" E4M3 variant on gfx94x
// (MI300), OCP E4M3 on gfx950 (MI355X) and, in software, on gfx90a. All are
// CDNA, with 64-wide wavefronts. The sparse MLA backend has a dense-MHA
// prefill path on every arch and never accepts decode context parallelism.
constexpr ArchCapabilities kCapabilities[] = {
    {"gfx90a", 1, DSA_FP8_E4M3FN, 64, 1, 0},
    {"gfx940", 1, DSA_FP8_E4M3FNUZ, 64, 1, 0},
    {"gfx942", 1, DSA_FP8_E4M3FNUZ, 64, 1, 0},
    {"gfx950", 1, DSA_FP8_E4M3FN, 64, 1, 0},
};

// HIP runtime entry points, declared here so that nothing includes or links
// HIP at build time. hipError_t is an int enum; devices are ints.
constexpr int kHipSuccess = 0;
constexpr int kHipErrorInsufficientDriver = 35;
constexpr int kHipErrorNoDevice = 100;

struct HipApi {
  int (*hipGetDeviceCount)(int*) = nullptr;
  int (*hipRuntimeGetVersion)(int*) = nullptr;
  int (*hipDeviceGetName)(char*, int, int) = nullptr;
  int (*hipDeviceTotalMem)(size_t*, int) = nullptr;
  int (*hipMalloc)(void**, size_t) = nullptr;
  int (*hipFree)(void*) = nullptr;
  int (*hipMemcpy)(void*, const void*, size_t, int) = nullptr;
  int (*hipDeviceSynchronize)() = nullptr;
  const char* (*hipGetErrorString)(int) = nullptr;
};

struct HipRuntime {
  RuntimeLoad load = RuntimeLoad::kNotInstalled;
  std::string library;
  std::string detail;
  HipApi api;
};

const HipRuntime& Runtime() {
  static const HipRuntime* const runtime = [] {
    auto* r = new HipRuntime();
    static const char* const kCandidates[] = {
        "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
    HipApi& a = r->api;
    const RuntimeSymbol symbols[] = {
        {"hipGetDeviceCount", reinterpret_cast<void**>(&a.hipGetDeviceCount), true},
        {"hipRuntimeGetVersion", reinterpret_cast<void**>(&a.hipRuntimeGetVersion), true},
        {"hipDeviceGetName", reinterpret_cast<void**>(&a.hipDeviceGetName), true},
        {"hipDeviceTotalMem", reinterpret_cast<void**>(&a.hipDeviceTotalMem), true},
        {"hipMalloc", reinterpret_cast<void**>(&a.hipMalloc), false},
        {"hipFree", reinterpret_cast<void**>(&a.hipFree), false},
        {"hipMemcpy", reinterpret_cast<void**>(&a.hipMemcpy), false},
        {"hipDeviceSynchronize", reinterpret_cast<void**>(&a.hipDeviceSynchronize), false},
        {"hipGetErrorString", reinterpret_cast<void**>(&a.hipGetErrorString), false},
    };
    r->load = LoadRuntimeLibrary(kCandidates, symbols, &r->library, &r->detail);
    return r;
  }();
  return *runtime;
}

const char* HipErrorText(int err) {
  const HipRuntime& r = Runtime();
  if (r.api.hipGetErrorString != nullptr) return r.api.hipGetErrorString(err);
  return "unknown HIP error";
}

DsaStatusCode HipFail(int err, const char* what, char* error,
                      size_t error_size) {
  return PluginError(DSA_STATUS_INTERNAL, error, error_size,
                     "rocm: %s failed: %s (%d)", what, HipErrorText(err), err);
}

// The architecture of the first GPU node in the KFD topology, which the
// amdgpu driver exposes whatever the HIP version (hipDeviceProp_t's layout
// changed between ROCm 5 and 6). DSA_ROCM_ARCH overrides it.
std::string FirstGpuArch() {
  if (const char* env = std::getenv("DSA_ROCM_ARCH"); env != nullptr && *env) {
    return env;
  }
  const char* kNodes = "/sys/class/kfd/kfd/topology/nodes";
  DIR* dir = opendir(kNodes);
  if (dir == nullptr) return "";
  std::string best;
  int best_node = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long node = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    const std::string path =
        std::string(kNodes) + "/" + e->d_name + "/properties";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) continue;
    char line[256];
    unsigned version = 0;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::sscanf(line, "gfx_target_version %u", &version) == 1) break;
    }
    std::fclose(f);
    const std::string name = GfxNameFromTargetVersion(version);
    if (!name.empty() && (best_node < 0 || node < best_node)) {
      best = name;
      best_node = static_cast<int>(node);
    }
  }
  closedir(dir);
  return best;
}

DsaStatusCode CapabilitiesForArch(const char* arch, DsaCapabilities* out,
                                  char* error, size_t error_size) {
  return FillCapabilities(kCapabilities, "rocm", arch, out, error, error_size);
}

DsaStatusCode ProbeDevices(DsaDeviceInfo* out, char* error,
                           size_t error_size) {
  if (out == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: NULL device record");
  }
  DsaDeviceInfo info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  const HipRuntime& r = Runtime();
  if (r.load == RuntimeLoad::kMissingSymbol) {
    return PluginError(DSA_STATUS_UNAVAILABLE, error, error_size,
                       "rocm: %s", r.detail.c_str());
  }
  if (r.load == RuntimeLoad::kLoaded) {
    int count = 0;
    const int err = r.api.hipGetDeviceCount(&count);
    if (err == kHipErrorNoDevice || err == kHipErrorInsufficientDriver) {
      count = 0;
    } else if (err != kHipSuccess) {
      return HipFail(err, "hipGetDeviceCount", error, error_size);
    }
    info.device_count = count;
    int version = 0;
    if (r.api.hipRuntimeGetVersion(&version) == kHipSuccess) {
      info.runtime_version = version;
    }
    if (count > 0) {
      char name[DSA_DEVICE_NAME_SIZE] = {0};
      if (r.api.hipDeviceGetName(name, sizeof(name) - 1, 0) == kHipSuccess) {
        CopyFixedString(info.name, name);
      }
      size_t total = 0;
      if (r.api.hipDeviceTotalMem(&total, 0) == kHipSuccess) {
        info.total_memory_bytes = total;
      }
      CopyFixedString(info.arch, FirstGpuArch().c_str());
    }
  }
  CopyToCaller(info, out);
  return DSA_STATUS_OK;
}

// Device memory on device 0, through the lazily loaded runtime.
DsaStatusCode RequireMemoryApi(char* error, size_t error_size) {
  const HipRuntime& r = Runtime();
  if (r.load != RuntimeLoad::kLoaded || r.api.hipMalloc == nullptr ||
      r.api.hipFree == nullptr || r.api.hipMemcpy == nullptr ||
      r.api.hipDeviceSynchronize == nullptr) {
    return PluginError(DSA_STATUS_UNAVAILABLE, error, error_size,
                       "rocm: the HIP runtime is not available (%s)",
                       r.detail.empty() ? "libamdhip64 not found"
                                        : r.detail.c_str());
  }
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceMalloc(size_t bytes, void** out, char* error,
                           size_t error_size) {
  if (DsaStatusCode c = RequireMemoryApi(error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  const int err = Runtime().api.hipMalloc(out, bytes == 0 ? 1 : bytes);
  if (err != kHipSuccess) return HipFail(err, "hipMalloc", error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceFree(void* ptr, char* error, size_t error_size) {
  if (DsaStatusCode c = RequireMemoryApi(error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  const int err = Runtime().api.hipFree(ptr);
  if (err != kHipSuccess) return HipFail(err, "hipFree", error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceMemcpy(void* dst, const void* src, size_t bytes,
                           int32_t kind, char* error, size_t error_size) {
  if (DsaStatusCode c = RequireMemoryApi(error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  // hipMemcpyKind: HostToDevice 1, DeviceToHost 2, DeviceToDevice 3, the
  // same numbers as DsaMemcpyKind.
  if (kind < DSA_MEMCPY_HOST_TO_DEVICE || kind > DSA_MEMCPY_DEVICE_TO_DEVICE) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: unknown memcpy kind %d", kind);
  }
  const int err = Runtime().api.hipMemcpy(dst, src, bytes, kind);
  if (err != kHipSuccess) return HipFail(err, "hipMemcpy", error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceSynchronize(char* error, size_t error_size) {
  if (DsaStatusCode c = RequireMemoryApi(error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  const int err = Runtime().api.hipDeviceSynchronize();
  if (err != kHipSuccess) {
    return HipFail(err, "hipDeviceSynchronize", error, error_size);
  }
  return DSA_STATUS_OK;
}

DsaStatusCode Initialize(const DsaHostApi* host, char* error,
                         size_t error_size) {
  static const DsaPlatformDescriptor descriptor = MakePlatformDescriptor(
      "rocm", DSA_PLATFORM_KIND_ROCM, kDefaultArch, kKnownArchs,
      {&CapabilitiesForArch, &ProbeDevices, &DeviceMalloc, &DeviceFree,
       &DeviceMemcpy, &DeviceSynchronize});
  return RegisterPlatformWithHost(host, descriptor, error, error_size);
}

}  // namespace

std::string GfxNameFromTargetVersion(unsigned version) {
  if (version == 0) return "";
  const unsigned major = version / 10000;
  const unsigned minor = (version / 100) % 100;
  const unsigned stepping = version % 100;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "gfx%u%x%x", major, minor, stepping);
  return buf;
}

const DsaPluginApi* RocmPlatformPluginApi() {
  static const DsaPluginApi api = {
      sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR, DSA_PLUGIN_API_MINOR,
      "dsa_rocm_platform", &Initialize};
  return &api;
}

}  // namespace dsa::platform
