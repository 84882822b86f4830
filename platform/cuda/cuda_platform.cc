#include "platform/cuda/cuda_platform.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "platform/gpu/nccl.h"
#include "platform/plugin_util.h"
#include "platform/runtime_library.h"
#include "platform/stream_release.h"

namespace dsa::platform {
namespace {

constexpr const char* kKnownArchs[] = {"sm_90", "sm_100"};
constexpr const char* kDefaultArch = "sm_90";

// Hopper (H100/H200) and Blackwell (B200): OCP E4M3 KV caches, 32-wide warps,
// dense-MHA prefill and decode context parallelism in the sparse MLA backend.
constexpr ArchCapabilities NvidiaRow(const char* arch) {
  return ArchCapabilities::For(arch)
      .set_is_cuda_alike(true)
      .set_kv_cache_fp8_format(DSA_FP8_E4M3FN)
      .set_warp_size(32)
      .set_sparse_mla_dense_mha_prefill(true)
      .set_sparse_mla_decode_context_parallel(true);
}
constexpr ArchCapabilities kCapabilities[] = {
    NvidiaRow("sm_90"),
    NvidiaRow("sm_100"),
};
static_assert(AllRowsComplete(kCapabilities));
static_assert(sizeof(kCapabilities) / sizeof(kCapabilities[0]) ==
                  sizeof(kKnownArchs) / sizeof(kKnownArchs[0]),
              "one capability row per known arch");

// CUresult values the plugin tells apart (cuda.h).
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorInvalidValue = 1;
constexpr int kCudaErrorOutOfMemory = 2;
constexpr int kCudaErrorNoDevice = 100;
// CUdevice_attribute values.
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

// The driver entry points of cuda_symbols.h as typed function pointers.
// After a successful load every required pointer is set; cuGetErrorString
// may be null.
struct CudaApi {
#define DSA_CUDA_REQUIRED DSA_RUNTIME_SYMBOL_FIELD
#define DSA_CUDA_OPTIONAL DSA_RUNTIME_SYMBOL_FIELD
#include "platform/cuda/cuda_symbols.h"

  void Resolve(RuntimeSymbolResolver& resolver) {
#define DSA_CUDA_REQUIRED DSA_RUNTIME_SYMBOL_RESOLVE_REQUIRED
#define DSA_CUDA_OPTIONAL DSA_RUNTIME_SYMBOL_RESOLVE_OPTIONAL
#include "platform/cuda/cuda_symbols.h"
  }
};

// The driver as loaded and initialised once per process; immutable
// afterwards, so every call reads `usable` instead of re-checking pointers.
struct CudaDriver {
  RuntimeLoadResult load;
  int init_result = kCudaErrorNoDevice;  // cuInit's, when loaded
  bool usable = false;                   // loaded and cuInit succeeded
  CudaApi api;
};

const CudaDriver& Driver() {
  static const CudaDriver* const driver = [] {
    auto* d = new CudaDriver();
    // DSA_CUDA_DRIVER_LIBRARY names one library to use instead (a specific
    // driver install, or a test double).
    const char* override_library = std::getenv("DSA_CUDA_DRIVER_LIBRARY");
    if (override_library != nullptr && *override_library != '\0') {
      const char* const candidates[] = {override_library};
      d->load = LoadRuntimeLibrary(candidates, &d->api);
    } else {
      static const char* const kCandidates[] = {"libcuda.so.1", "libcuda.so"};
      d->load = LoadRuntimeLibrary(kCandidates, &d->api);
    }
    if (d->load.loaded()) {
      d->init_result = d->api.cuInit(0);
      d->usable = d->init_result == kCudaSuccess;
    }
    return d;
  }();
  return *driver;
}

const char* CudaErrorText(const CudaApi& api, int err) {
  const char* text = nullptr;
  if (api.cuGetErrorString != nullptr &&
      api.cuGetErrorString(err, &text) == kCudaSuccess && text != nullptr) {
    return text;
  }
  return "unknown CUDA error";
}

// Out of memory is resource exhaustion, so a caller can free a cache block
// and retry; UNAVAILABLE is kept for "no driver".
DsaStatusCode StatusFromCudaError(int err) {
  switch (err) {
    case kCudaErrorOutOfMemory:
      return DSA_STATUS_RESOURCE_EXHAUSTED;
    case kCudaErrorInvalidValue:
      return DSA_STATUS_INVALID_ARGUMENT;
    case kCudaErrorNoDevice:
      return DSA_STATUS_FAILED_PRECONDITION;
    default:
      return DSA_STATUS_INTERNAL;
  }
}

DsaStatusCode CudaFail(const CudaApi& api, int err, const char* what,
                       char* error, size_t error_size) {
  return PluginError(StatusFromCudaError(err), error, error_size,
                     "cuda: %s failed: %s (CUresult %d)", what,
                     CudaErrorText(api, err), err);
}

DsaStatusCode CapabilitiesForArch(const char* arch, DsaCapabilities* out,
                                  char* error, size_t error_size) {
  return FillCapabilities(kCapabilities, "cuda", arch, out, error, error_size);
}

DsaStatusCode ProbeDevices(DsaDeviceInfo* out, char* error, size_t error_size) {
  if (out == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: NULL device record");
  }
  DsaDeviceInfo info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  const CudaDriver& d = Driver();
  // A driver that is not installed means no device; one that is installed
  // but unusable is an error worth reporting.
  if (d.load.state == RuntimeLoad::kMissingSymbol) {
    return PluginError(DSA_STATUS_UNAVAILABLE, error, error_size,
                       "cuda: the CUDA driver is not usable: %s",
                       d.load.detail.c_str());
  }
  const CudaApi& a = d.api;
  // cuInit fails with "no device" on a machine with a driver but no GPU.
  if (d.usable) {
    int count = 0;
    const int err = a.cuDeviceGetCount(&count);
    if (err != kCudaSuccess && err != kCudaErrorNoDevice) {
      return CudaFail(a, err, "cuDeviceGetCount", error, error_size);
    }
    info.device_count = err == kCudaSuccess ? count : 0;
    int version = 0;
    if (a.cuDriverGetVersion(&version) == kCudaSuccess) {
      info.runtime_version = version;
    }
    int device = 0;
    if (info.device_count > 0 && a.cuDeviceGet(&device, 0) == kCudaSuccess) {
      char name[DSA_DEVICE_NAME_SIZE] = {0};
      if (a.cuDeviceGetName(name, sizeof(name) - 1, device) == kCudaSuccess) {
        CopyFixedString(info.name, name);
      }
      int major = 0, minor = 0;
      if (a.cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, device) ==
              kCudaSuccess &&
          a.cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, device) ==
              kCudaSuccess) {
        std::snprintf(info.arch, sizeof(info.arch), "sm_%d%d", major, minor);
      }
      size_t total = 0;
      if (a.cuDeviceTotalMem_v2(&total, device) == kCudaSuccess) {
        info.total_memory_bytes = total;
      }
    }
  } else if (d.load.loaded() && d.init_result != kCudaErrorNoDevice) {
    return CudaFail(a, d.init_result, "cuInit", error, error_size);
  }
  CopyToCaller(info, out);
  return DSA_STATUS_OK;
}

// A device's primary context, retained once per process on first use (not
// at probe time, since retaining creates the context on the GPU).
struct PrimaryContext {
  void* context = nullptr;
  int retain_result = kCudaErrorNoDevice;
  const char* failed_call = "cuDeviceGet";
};

// Devices a process can bind (plugin API 1.3's device_bind).
constexpr int kMaxDevices = 64;

const PrimaryContext& RetainedPrimaryContext(const CudaApi& a, int ordinal) {
  static std::once_flag once[kMaxDevices];
  static PrimaryContext primary[kMaxDevices];
  std::call_once(once[ordinal], [&a, ordinal] {
    PrimaryContext& p = primary[ordinal];
    int device = 0;
    p.retain_result = a.cuDeviceGet(&device, ordinal);
    if (p.retain_result == kCudaSuccess) {
      p.failed_call = "cuDevicePrimaryCtxRetain";
      p.retain_result = a.cuDevicePrimaryCtxRetain(&p.context, device);
    }
  });
  return primary[ordinal];
}

// The device of the calling thread's calls: 0 until device_bind.
thread_local int t_device = 0;

// Makes the bound device's primary context current on the calling thread,
// which the runtime API (used by kernels built with nvcc) shares. The context
// is set only when another one (or none) is current: setting it on every
// call would cost a driver call per allocation and copy.
DsaStatusCode EnterContext(const CudaDriver& d, char* error,
                           size_t error_size) {
  if (!d.usable) {
    if (!d.load.loaded()) {
      return PluginError(DSA_STATUS_UNAVAILABLE, error, error_size,
                         "cuda: the CUDA driver is not available: %s",
                         d.load.detail.c_str());
    }
    return CudaFail(d.api, d.init_result, "cuInit", error, error_size);
  }
  const CudaApi& a = d.api;
  const PrimaryContext& primary = RetainedPrimaryContext(a, t_device);
  if (primary.retain_result != kCudaSuccess) {
    return CudaFail(a, primary.retain_result, primary.failed_call, error,
                    error_size);
  }
  void* current = nullptr;
  int err = a.cuCtxGetCurrent(&current);
  if (err != kCudaSuccess) {
    return CudaFail(a, err, "cuCtxGetCurrent", error, error_size);
  }
  if (current == primary.context) return DSA_STATUS_OK;
  err = a.cuCtxSetCurrent(primary.context);
  if (err != kCudaSuccess) {
    return CudaFail(a, err, "cuCtxSetCurrent", error, error_size);
  }
  return DSA_STATUS_OK;
}

// Enters the driver's context for the calling thread's device, then runs
// call(api) -> a CUDA error: OK, the context's failure, or `what`'s failure
// as the entry's status.
template <class Call>
DsaStatusCode InContext(const char* what, char* error, size_t error_size,
                        Call call) {
  const CudaDriver& d = Driver();
  if (DsaStatusCode c = EnterContext(d, error, error_size);
      c != DSA_STATUS_OK) {
    return c;
  }
  const int err = call(d.api);
  if (err != kCudaSuccess) return CudaFail(d.api, err, what, error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceBind(int32_t ordinal, char* error, size_t error_size) {
  const CudaDriver& d = Driver();
  if (!d.usable) return EnterContext(d, error, error_size);
  int count = 0;
  const int err = d.api.cuDeviceGetCount(&count);
  if (err != kCudaSuccess) {
    return CudaFail(d.api, err, "cuDeviceGetCount", error, error_size);
  }
  if (ordinal < 0 || ordinal >= count || ordinal >= kMaxDevices) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: device %d of %d", ordinal, count);
  }
  const int previous = t_device;
  t_device = ordinal;
  const DsaStatusCode c = EnterContext(d, error, error_size);
  if (c != DSA_STATUS_OK) t_device = previous;
  return c;
}

DsaStatusCode DeviceMalloc(size_t bytes, void** out, char* error,
                           size_t error_size) {
  if (out == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: NULL output pointer");
  }
  *out = nullptr;
  const CudaDriver& d = Driver();
  if (DsaStatusCode c = EnterContext(d, error, error_size);
      c != DSA_STATUS_OK) {
    return c;
  }
  unsigned long long ptr = 0;
  const int err = d.api.cuMemAlloc_v2(&ptr, bytes == 0 ? 1 : bytes);
  if (err != kCudaSuccess) {
    char what[64];
    std::snprintf(what, sizeof(what), "cuMemAlloc of %zu bytes", bytes);
    return CudaFail(d.api, err, what, error, error_size);
  }
  *out = reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceFree(void* ptr, char* error, size_t error_size) {
  if (ptr == nullptr) return DSA_STATUS_OK;  // as free(NULL)
  return InContext("cuMemFree", error, error_size, [&](const CudaApi& a) {
    return a.cuMemFree_v2(
        static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr)));
  });
}

DsaStatusCode DeviceMemcpy(void* dst, const void* src, size_t bytes,
                           int32_t kind, char* error, size_t error_size) {
  if (kind < DSA_MEMCPY_HOST_TO_DEVICE || kind > DSA_MEMCPY_DEVICE_TO_DEVICE) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: unknown memcpy kind %d", kind);
  }
  const CudaDriver& d = Driver();
  if (DsaStatusCode c = EnterContext(d, error, error_size);
      c != DSA_STATUS_OK) {
    return c;
  }
  const CudaApi& a = d.api;
  const auto dst_ptr =
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(dst));
  const auto src_ptr =
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(src));
  int err = kCudaSuccess;
  const char* what = "";
  switch (kind) {
    case DSA_MEMCPY_HOST_TO_DEVICE:
      what = "cuMemcpyHtoD";
      err = a.cuMemcpyHtoD_v2(dst_ptr, src, bytes);
      break;
    case DSA_MEMCPY_DEVICE_TO_HOST:
      what = "cuMemcpyDtoH";
      err = a.cuMemcpyDtoH_v2(dst, src_ptr, bytes);
      break;
    default:
      what = "cuMemcpyDtoD";
      err = a.cuMemcpyDtoD_v2(dst_ptr, src_ptr, bytes);
      break;
  }
  if (err != kCudaSuccess) return CudaFail(a, err, what, error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceSynchronize(char* error, size_t error_size) {
  return InContext("cuCtxSynchronize", error, error_size,
                   [](const CudaApi& a) { return a.cuCtxSynchronize(); });
}

// CU_STREAM_NON_BLOCKING: no implicit synchronisation with the legacy
// default stream.
constexpr unsigned kStreamNonBlocking = 0x1;

DsaStatusCode StreamCreate(void** stream, char* error, size_t error_size) {
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: NULL output stream");
  }
  *stream = nullptr;
  const CudaDriver& d = Driver();
  if (DsaStatusCode c = EnterContext(d, error, error_size);
      c != DSA_STATUS_OK) {
    return c;
  }
  const int err = d.api.cuStreamCreate(stream, kStreamNonBlocking);
  if (err != kCudaSuccess) {
    *stream = nullptr;
    return CudaFail(d.api, err, "cuStreamCreate", error, error_size);
  }
  return DSA_STATUS_OK;
}

DsaStatusCode StreamDestroy(void* stream, char* error, size_t error_size) {
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: destroying a NULL stream");
  }
  // The kernels' state kept for this stream goes first, while the stream
  // can still order a free (stream_release.h).
  RunStreamReleaseHooks(stream);
  return InContext("cuStreamDestroy", error, error_size, [&](const CudaApi& a) {
    return a.cuStreamDestroy_v2(stream);
  });
}

DsaStatusCode MemcpyAsync(void* dst, const void* src, size_t bytes,
                          int32_t kind, void* stream, char* error,
                          size_t error_size) {
  if (kind < DSA_MEMCPY_HOST_TO_DEVICE || kind > DSA_MEMCPY_DEVICE_TO_DEVICE) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: unknown memcpy kind %d", kind);
  }
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: memcpy_async on a NULL stream");
  }
  const CudaDriver& d = Driver();
  if (DsaStatusCode c = EnterContext(d, error, error_size);
      c != DSA_STATUS_OK) {
    return c;
  }
  const CudaApi& a = d.api;
  const auto dst_ptr =
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(dst));
  const auto src_ptr =
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(src));
  int err = kCudaSuccess;
  const char* what = "";
  switch (kind) {
    case DSA_MEMCPY_HOST_TO_DEVICE:
      what = "cuMemcpyHtoDAsync";
      err = a.cuMemcpyHtoDAsync_v2(dst_ptr, src, bytes, stream);
      break;
    case DSA_MEMCPY_DEVICE_TO_HOST:
      what = "cuMemcpyDtoHAsync";
      err = a.cuMemcpyDtoHAsync_v2(dst, src_ptr, bytes, stream);
      break;
    default:
      what = "cuMemcpyDtoDAsync";
      err = a.cuMemcpyDtoDAsync_v2(dst_ptr, src_ptr, bytes, stream);
      break;
  }
  if (err != kCudaSuccess) return CudaFail(a, err, what, error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode StreamSynchronize(void* stream, char* error, size_t error_size) {
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: synchronizing a NULL stream");
  }
  return InContext(
      "cuStreamSynchronize", error, error_size,
      [&](const CudaApi& a) { return a.cuStreamSynchronize(stream); });
}

// Page-locked host memory through the driver, for every context
// (CU_MEMHOSTREGISTER_PORTABLE).
constexpr unsigned kCuMemHostRegisterPortable = 0x01;

DsaStatusCode HostRegister(void* ptr, size_t bytes, char* error,
                           size_t error_size) {
  if (ptr == nullptr || bytes == 0) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: page-locking %zu bytes at %p", bytes, ptr);
  }
  const CudaDriver& d = Driver();
  if (!d.usable) return EnterContext(d, error, error_size);  // no driver
  if (d.api.cuMemHostRegister_v2 == nullptr ||
      d.api.cuMemHostUnregister == nullptr) {
    return PluginError(DSA_STATUS_UNIMPLEMENTED, error, error_size,
                       "cuda: the driver cannot page-lock host memory");
  }
  return InContext(
      "cuMemHostRegister", error, error_size, [&](const CudaApi& a) {
        return a.cuMemHostRegister_v2(ptr, bytes, kCuMemHostRegisterPortable);
      });
}

DsaStatusCode HostUnregister(void* ptr, char* error, size_t error_size) {
  if (ptr == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: unlocking host memory at NULL");
  }
  const CudaDriver& d = Driver();
  if (!d.usable) return EnterContext(d, error, error_size);  // no driver
  if (d.api.cuMemHostUnregister == nullptr) {
    return PluginError(DSA_STATUS_UNIMPLEMENTED, error, error_size,
                       "cuda: the driver cannot page-lock host memory");
  }
  return InContext(
      "cuMemHostUnregister", error, error_size,
      [&](const CudaApi& a) { return a.cuMemHostUnregister(ptr); });
}

// Graphs through the driver: a capture on the calling thread's stream in
// relaxed mode (CU_STREAM_CAPTURE_MODE_RELAXED: the runtime-API launches of
// the kernels' plugins on that stream are recorded; other threads are not
// restricted), instantiated at its end; the handle is the CUgraphExec.
constexpr int kCaptureModeRelaxed = 2;

bool HasGraphs(const CudaApi& a) {
  return a.cuStreamBeginCapture_v2 != nullptr &&
         a.cuStreamEndCapture != nullptr &&
         a.cuGraphInstantiateWithFlags != nullptr &&
         a.cuGraphLaunch != nullptr && a.cuGraphExecDestroy != nullptr &&
         a.cuGraphDestroy != nullptr;
}

// EnterContext, then Unimplemented for a driver without graphs.
DsaStatusCode EnterGraphs(const CudaDriver& d, char* error, size_t error_size) {
  if (DsaStatusCode c = EnterContext(d, error, error_size);
      c != DSA_STATUS_OK) {
    return c;
  }
  if (HasGraphs(d.api)) return DSA_STATUS_OK;
  return PluginError(DSA_STATUS_UNIMPLEMENTED, error, error_size,
                     "cuda: %s has no graph entry points",
                     d.load.library.c_str());
}

// InContext for one graph call: `call(api)`'s result, `what` naming it.
template <class Call>
DsaStatusCode InGraphContext(const char* what, char* error, size_t error_size,
                             Call call) {
  const CudaDriver& d = Driver();
  if (DsaStatusCode c = EnterGraphs(d, error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  const int err = call(d.api);
  if (err != kCudaSuccess) return CudaFail(d.api, err, what, error, error_size);
  return DSA_STATUS_OK;
}

DsaStatusCode GraphCaptureBegin(void* stream, char* error, size_t error_size) {
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: capturing a NULL stream");
  }
  return InGraphContext(
      "cuStreamBeginCapture", error, error_size, [&](const CudaApi& a) {
        return a.cuStreamBeginCapture_v2(stream, kCaptureModeRelaxed);
      });
}

DsaStatusCode GraphCaptureEnd(void* stream, void** graph, char* error,
                              size_t error_size) {
  if (stream == nullptr || graph == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: ending a capture with a NULL stream or output");
  }
  *graph = nullptr;
  const CudaDriver& d = Driver();
  if (DsaStatusCode c = EnterGraphs(d, error, error_size); c != DSA_STATUS_OK) {
    return c;
  }
  const CudaApi& a = d.api;
  void* recorded = nullptr;
  int err = a.cuStreamEndCapture(stream, &recorded);
  if (err != kCudaSuccess) {
    if (recorded != nullptr) a.cuGraphDestroy(recorded);
    return CudaFail(a, err, "cuStreamEndCapture", error, error_size);
  }
  void* exec = nullptr;
  err = a.cuGraphInstantiateWithFlags(&exec, recorded, 0);
  a.cuGraphDestroy(recorded);  // the executable graph is a copy
  if (err != kCudaSuccess) {
    return CudaFail(a, err, "cuGraphInstantiateWithFlags", error, error_size);
  }
  *graph = exec;
  return DSA_STATUS_OK;
}

DsaStatusCode GraphLaunch(void* graph, void* stream, char* error,
                          size_t error_size) {
  if (graph == nullptr || stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: launching a NULL graph or on a NULL stream");
  }
  return InGraphContext(
      "cuGraphLaunch", error, error_size,
      [&](const CudaApi& a) { return a.cuGraphLaunch(graph, stream); });
}

DsaStatusCode GraphDestroy(void* graph, char* error, size_t error_size) {
  if (graph == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: destroying a NULL graph");
  }
  return InGraphContext(
      "cuGraphExecDestroy", error, error_size,
      [&](const CudaApi& a) { return a.cuGraphExecDestroy(graph); });
}

DsaStatusCode DeviceMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes,
                               char* error, size_t error_size) {
  if (free_bytes == nullptr || total_bytes == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cuda: NULL memory record");
  }
  const CudaDriver& d = Driver();
  if (DsaStatusCode c = EnterContext(d, error, error_size);
      c != DSA_STATUS_OK) {
    return c;
  }
  if (d.api.cuMemGetInfo_v2 == nullptr) {
    return PluginError(DSA_STATUS_UNIMPLEMENTED, error, error_size,
                       "cuda: %s has no cuMemGetInfo_v2",
                       d.load.library.c_str());
  }
  size_t free = 0, total = 0;
  const int err = d.api.cuMemGetInfo_v2(&free, &total);
  if (err != kCudaSuccess) {
    return CudaFail(d.api, err, "cuMemGetInfo", error, error_size);
  }
  *free_bytes = free;
  *total_bytes = total;
  return DSA_STATUS_OK;
}

// Collectives through NCCL (platform/gpu/nccl.h), loaded on the first group,
// each on the calling thread's bound device.
DsaStatusCode EnterBoundDevice(char* error, size_t error_size) {
  return EnterContext(Driver(), error, error_size);
}
using Collectives =
    gpu::PluginCollectives<gpu::CollectiveLibrary::kNccl, &EnterBoundDevice>;

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
    c.graph_capture_begin = &GraphCaptureBegin;
    c.graph_capture_end = &GraphCaptureEnd;
    c.graph_launch = &GraphLaunch;
    c.graph_destroy = &GraphDestroy;
    c.host_register = &HostRegister;
    c.host_unregister = &HostUnregister;
    return MakePlatformDescriptor("cuda", DSA_PLATFORM_KIND_CUDA, kDefaultArch,
                                  kKnownArchs, c);
  }();
  return RegisterPlatformWithHost(host, descriptor, error, error_size);
}

}  // namespace

const DsaPluginApi* CudaPlatformPluginApi() {
  static const DsaPluginApi api = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR,
                                   DSA_PLUGIN_API_MINOR, "dsa_cuda_platform",
                                   &Initialize};
  return &api;
}

}  // namespace dsa::platform
