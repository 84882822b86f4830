#include "platform/rocm/rocm_platform.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "platform/gpu/nccl.h"
#include "platform/plugin_util.h"
#include "platform/runtime_library.h"
#include "platform/stream_release.h"

namespace dsa::platform {
namespace {

constexpr const char* kKnownArchs[] = {"gfx90a", "gfx940", "gfx942", "gfx950"};
constexpr const char* kDefaultArch = "gfx942";

// KV-cache fp8 follows the hardware: the "fnuz" E4M3 variant on gfx94x
// (MI300), OCP E4M3 on gfx950 (MI355X) and, in software, on gfx90a. All are
// CDNA, with 64-wide wavefronts. The sparse MLA backend has a dense-MHA
// prefill path on every arch and never accepts decode context parallelism.
constexpr ArchCapabilities CdnaRow(const char* arch, DsaFp8Format fp8) {
  return ArchCapabilities::For(arch)
      .set_is_cuda_alike(true)
      .set_kv_cache_fp8_format(fp8)
      .set_warp_size(64)
      .set_sparse_mla_dense_mha_prefill(true)
      .set_sparse_mla_decode_context_parallel(false);
}
constexpr ArchCapabilities kCapabilities[] = {
    CdnaRow("gfx90a", DSA_FP8_E4M3FN),
    CdnaRow("gfx940", DSA_FP8_E4M3FNUZ),
    CdnaRow("gfx942", DSA_FP8_E4M3FNUZ),
    CdnaRow("gfx950", DSA_FP8_E4M3FN),
};
static_assert(AllRowsComplete(kCapabilities));
static_assert(sizeof(kCapabilities) / sizeof(kCapabilities[0]) ==
                  sizeof(kKnownArchs) / sizeof(kKnownArchs[0]),
              "one capability row per known arch");

// hipError_t values the plugin tells apart (hip_runtime_api.h).
constexpr int kHipSuccess = 0;
constexpr int kHipErrorInvalidValue = 1;
constexpr int kHipErrorOutOfMemory = 2;
constexpr int kHipErrorInsufficientDriver = 35;
constexpr int kHipErrorNoDevice = 100;

// The HIP entry points of hip_symbols.h as typed function pointers. After a
// successful load every required pointer is set; hipGetErrorString may be
// null.
struct HipApi {
#define DSA_HIP_REQUIRED DSA_RUNTIME_SYMBOL_FIELD
#define DSA_HIP_OPTIONAL DSA_RUNTIME_SYMBOL_FIELD
#include "platform/rocm/hip_symbols.h"

  void Resolve(RuntimeSymbolResolver& resolver) {
#define DSA_HIP_REQUIRED DSA_RUNTIME_SYMBOL_RESOLVE_REQUIRED
#define DSA_HIP_OPTIONAL DSA_RUNTIME_SYMBOL_RESOLVE_OPTIONAL
#include "platform/rocm/hip_symbols.h"
  }
};

// The runtime as loaded once per process; immutable afterwards, so every
// call reads `load` instead of re-checking pointers.
struct HipRuntime {
  RuntimeLoadResult load;
  HipApi api;
};

const HipRuntime& Runtime() {
  static const HipRuntime* const runtime = [] {
    auto* r = new HipRuntime();
    // DSA_HIP_RUNTIME_LIBRARY names one library to use instead (a specific
    // ROCm install, or a test double).
    const char* override_library = std::getenv("DSA_HIP_RUNTIME_LIBRARY");
    if (override_library != nullptr && *override_library != '\0') {
      const char* const candidates[] = {override_library};
      r->load = LoadRuntimeLibrary(candidates, &r->api);
    } else {
      static const char* const kCandidates[] = {
          "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
      r->load = LoadRuntimeLibrary(kCandidates, &r->api);
    }
    return r;
  }();
  return *runtime;
}

const char* HipErrorText(const HipApi& api, int err) {
  const char* text =
      api.hipGetErrorString != nullptr ? api.hipGetErrorString(err) : nullptr;
  return text != nullptr ? text : "unknown HIP error";
}

// Out of memory is resource exhaustion, so a caller can free a cache block
// and retry; UNAVAILABLE is kept for "no runtime".
DsaStatusCode StatusFromHipError(int err) {
  switch (err) {
    case kHipErrorOutOfMemory:
      return DSA_STATUS_RESOURCE_EXHAUSTED;
    case kHipErrorInvalidValue:
      return DSA_STATUS_INVALID_ARGUMENT;
    case kHipErrorNoDevice:
    case kHipErrorInsufficientDriver:
      return DSA_STATUS_FAILED_PRECONDITION;
    default:
      return DSA_STATUS_INTERNAL;
  }
}

DsaStatusCode HipFail(const HipApi& api, int err, const char* what, char* error,
                      size_t error_size) {
  return PluginError(StatusFromHipError(err), error, error_size,
                     "rocm: %s failed: %s (hipError_t %d)", what,
                     HipErrorText(api, err), err);
}

// The error for a call that needs the runtime when it did not load.
DsaStatusCode RuntimeUnavailable(const HipRuntime& r, char* error,
                                 size_t error_size) {
  return PluginError(DSA_STATUS_UNAVAILABLE, error, error_size,
                     "rocm: the HIP runtime is not available: %s",
                     r.load.detail.c_str());
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

DsaStatusCode ProbeDevices(DsaDeviceInfo* out, char* error, size_t error_size) {
  if (out == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: NULL device record");
  }
  DsaDeviceInfo info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  const HipRuntime& r = Runtime();
  // A runtime that is not installed means no device; one that is installed
  // but unusable is an error worth reporting.
  if (r.load.state == RuntimeLoad::kMissingSymbol) {
    return RuntimeUnavailable(r, error, error_size);
  }
  if (r.load.loaded()) {
    const HipApi& a = r.api;
    int count = 0;
    const int err = a.hipGetDeviceCount(&count);
    if (err == kHipErrorNoDevice || err == kHipErrorInsufficientDriver) {
      count = 0;
    } else if (err != kHipSuccess) {
      return HipFail(a, err, "hipGetDeviceCount", error, error_size);
    }
    info.device_count = count;
    int version = 0;
    if (a.hipRuntimeGetVersion(&version) == kHipSuccess) {
      info.runtime_version = version;
    }
    if (count > 0) {
      char name[DSA_DEVICE_NAME_SIZE] = {0};
      if (a.hipDeviceGetName(name, sizeof(name) - 1, 0) == kHipSuccess) {
        CopyFixedString(info.name, name);
      }
      size_t total = 0;
      if (a.hipDeviceTotalMem(&total, 0) == kHipSuccess) {
        info.total_memory_bytes = total;
      }
      CopyFixedString(info.arch, FirstGpuArch().c_str());
    }
  }
  CopyToCaller(info, out);
  return DSA_STATUS_OK;
}

// Runs call(api) -> a HIP error through the runtime loaded once: OK, the
// runtime's absence, or `what`'s failure as the entry's status.
template <class Call>
DsaStatusCode HipCall(const char* what, char* error, size_t error_size,
                      Call call) {
  const HipRuntime& r = Runtime();
  if (!r.load.loaded()) return RuntimeUnavailable(r, error, error_size);
  const int err = call(r.api);
  if (err != kHipSuccess) return HipFail(r.api, err, what, error, error_size);
  return DSA_STATUS_OK;
}

// Device memory on the current device (device 0 unless the host selected
// another), through the runtime loaded once.
DsaStatusCode DeviceMalloc(size_t bytes, void** out, char* error,
                           size_t error_size) {
  if (out == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: NULL output pointer");
  }
  *out = nullptr;
  const HipRuntime& r = Runtime();
  if (!r.load.loaded()) return RuntimeUnavailable(r, error, error_size);
  void* ptr = nullptr;
  const int err = r.api.hipMalloc(&ptr, bytes == 0 ? 1 : bytes);
  if (err != kHipSuccess) {
    char what[64];
    std::snprintf(what, sizeof(what), "hipMalloc of %zu bytes", bytes);
    return HipFail(r.api, err, what, error, error_size);
  }
  *out = ptr;
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceFree(void* ptr, char* error, size_t error_size) {
  if (ptr == nullptr) return DSA_STATUS_OK;  // as free(NULL)
  return HipCall("hipFree", error, error_size,
                 [&](const HipApi& a) { return a.hipFree(ptr); });
}

DsaStatusCode DeviceMemcpy(void* dst, const void* src, size_t bytes,
                           int32_t kind, char* error, size_t error_size) {
  // hipMemcpyKind: HostToDevice 1, DeviceToHost 2, DeviceToDevice 3, the
  // same numbers as DsaMemcpyKind.
  if (kind < DSA_MEMCPY_HOST_TO_DEVICE || kind > DSA_MEMCPY_DEVICE_TO_DEVICE) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: unknown memcpy kind %d", kind);
  }
  return HipCall("hipMemcpy", error, error_size, [&](const HipApi& a) {
    return a.hipMemcpy(dst, src, bytes, kind);
  });
}

DsaStatusCode DeviceSynchronize(char* error, size_t error_size) {
  return HipCall("hipDeviceSynchronize", error, error_size,
                 [](const HipApi& a) { return a.hipDeviceSynchronize(); });
}

// hipStreamNonBlocking: no implicit synchronisation with the null stream.
constexpr unsigned kStreamNonBlocking = 0x1;

DsaStatusCode StreamCreate(void** stream, char* error, size_t error_size) {
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: NULL output stream");
  }
  *stream = nullptr;
  const HipRuntime& r = Runtime();
  if (!r.load.loaded()) return RuntimeUnavailable(r, error, error_size);
  const int err = r.api.hipStreamCreateWithFlags(stream, kStreamNonBlocking);
  if (err != kHipSuccess) {
    *stream = nullptr;
    return HipFail(r.api, err, "hipStreamCreateWithFlags", error, error_size);
  }
  return DSA_STATUS_OK;
}

DsaStatusCode StreamDestroy(void* stream, char* error, size_t error_size) {
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: destroying a NULL stream");
  }
  // The kernels' state kept for this stream goes first, while the stream
  // can still order a free (stream_release.h).
  RunStreamReleaseHooks(stream);
  return HipCall("hipStreamDestroy", error, error_size,
                 [&](const HipApi& a) { return a.hipStreamDestroy(stream); });
}

DsaStatusCode MemcpyAsync(void* dst, const void* src, size_t bytes,
                          int32_t kind, void* stream, char* error,
                          size_t error_size) {
  // hipMemcpyKind numbers the kinds as DsaMemcpyKind does.
  if (kind < DSA_MEMCPY_HOST_TO_DEVICE || kind > DSA_MEMCPY_DEVICE_TO_DEVICE) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: unknown memcpy kind %d", kind);
  }
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: memcpy_async on a NULL stream");
  }
  return HipCall("hipMemcpyAsync", error, error_size, [&](const HipApi& a) {
    return a.hipMemcpyAsync(dst, src, bytes, kind, stream);
  });
}

DsaStatusCode StreamSynchronize(void* stream, char* error, size_t error_size) {
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: synchronizing a NULL stream");
  }
  return HipCall(
      "hipStreamSynchronize", error, error_size,
      [&](const HipApi& a) { return a.hipStreamSynchronize(stream); });
}

// Page-locked host memory for every device (hipHostRegisterPortable).
constexpr unsigned kHipHostRegisterPortable = 0x1;

DsaStatusCode HostRegister(void* ptr, size_t bytes, char* error,
                           size_t error_size) {
  if (ptr == nullptr || bytes == 0) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: page-locking %zu bytes at %p", bytes, ptr);
  }
  const HipRuntime& r = Runtime();
  if (!r.load.loaded()) return RuntimeUnavailable(r, error, error_size);
  if (r.api.hipHostRegister == nullptr || r.api.hipHostUnregister == nullptr) {
    return PluginError(DSA_STATUS_UNIMPLEMENTED, error, error_size,
                       "rocm: the runtime cannot page-lock host memory");
  }
  return HipCall("hipHostRegister", error, error_size, [&](const HipApi& a) {
    return a.hipHostRegister(ptr, bytes, kHipHostRegisterPortable);
  });
}

DsaStatusCode HostUnregister(void* ptr, char* error, size_t error_size) {
  if (ptr == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: unlocking host memory at NULL");
  }
  const HipRuntime& r = Runtime();
  if (!r.load.loaded()) return RuntimeUnavailable(r, error, error_size);
  if (r.api.hipHostUnregister == nullptr) {
    return PluginError(DSA_STATUS_UNIMPLEMENTED, error, error_size,
                       "rocm: the runtime cannot page-lock host memory");
  }
  return HipCall("hipHostUnregister", error, error_size,
                 [&](const HipApi& a) { return a.hipHostUnregister(ptr); });
}

DsaStatusCode DeviceMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes,
                               char* error, size_t error_size) {
  if (free_bytes == nullptr || total_bytes == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: NULL memory record");
  }
  const HipRuntime& r = Runtime();
  if (!r.load.loaded()) return RuntimeUnavailable(r, error, error_size);
  if (r.api.hipMemGetInfo == nullptr) {
    return PluginError(DSA_STATUS_UNIMPLEMENTED, error, error_size,
                       "rocm: %s has no hipMemGetInfo", r.load.library.c_str());
  }
  size_t free = 0, total = 0;
  const int err = r.api.hipMemGetInfo(&free, &total);
  if (err != kHipSuccess) {
    return HipFail(r.api, err, "hipMemGetInfo", error, error_size);
  }
  *free_bytes = free;
  *total_bytes = total;
  return DSA_STATUS_OK;
}

// HIP's current device is per thread: binding sets it for the thread's
// later calls and the kernels it launches.
DsaStatusCode DeviceBind(int32_t ordinal, char* error, size_t error_size) {
  const HipRuntime& r = Runtime();
  if (!r.load.loaded()) return RuntimeUnavailable(r, error, error_size);
  int count = 0;
  if (const int err = r.api.hipGetDeviceCount(&count); err != kHipSuccess) {
    return HipFail(r.api, err, "hipGetDeviceCount", error, error_size);
  }
  if (ordinal < 0 || ordinal >= count) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "rocm: device %d of %d", ordinal, count);
  }
  if (r.api.hipSetDevice == nullptr) {
    if (ordinal == 0) return DSA_STATUS_OK;
    return PluginError(DSA_STATUS_UNIMPLEMENTED, error, error_size,
                       "rocm: %s has no hipSetDevice: only device 0",
                       r.load.library.c_str());
  }
  if (const int err = r.api.hipSetDevice(ordinal); err != kHipSuccess) {
    return HipFail(r.api, err, "hipSetDevice", error, error_size);
  }
  return DSA_STATUS_OK;
}

// Collectives through RCCL (platform/gpu/nccl.h), loaded on the first group;
// HIP's current device is the thread's already.
using Collectives =
    gpu::PluginCollectives<gpu::CollectiveLibrary::kRccl, nullptr>;

DsaStatusCode Initialize(const DsaHostApi* host, char* error,
                         size_t error_size) {
  static const DsaPlatformDescriptor descriptor = [] {
    PlatformCallbacks c{
        &CapabilitiesForArch, &ProbeDevices,     &DeviceMalloc,
        &DeviceFree,          &DeviceMemcpy,     &DeviceSynchronize,
        &DeviceMemoryInfo,    &StreamCreate,     &StreamDestroy,
        &MemcpyAsync,         &StreamSynchronize};
    c.device_bind = &DeviceBind;
    c.collective_create = &Collectives::Create;
    c.collective_abort = &Collectives::Abort;
    c.collective_destroy = &Collectives::Destroy;
    c.all_reduce_sum = &Collectives::AllReduceSum;
    c.all_gather = &Collectives::AllGather;
    c.host_register = &HostRegister;
    c.host_unregister = &HostUnregister;
    return MakePlatformDescriptor("rocm", DSA_PLATFORM_KIND_ROCM, kDefaultArch,
                                  kKnownArchs, c);
  }();
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
  static const DsaPluginApi api = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR,
                                   DSA_PLUGIN_API_MINOR, "dsa_rocm_platform",
                                   &Initialize};
  return &api;
}

}  // namespace dsa::platform
