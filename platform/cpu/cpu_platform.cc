#include "platform/cpu/cpu_platform.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "platform/host_collectives.h"
#include "platform/plugin_util.h"

namespace dsa::platform {
namespace {

#if defined(__x86_64__)
constexpr const char* kHostArch = "x86_64";
#elif defined(__aarch64__)
constexpr const char* kHostArch = "aarch64";
#else
constexpr const char* kHostArch = "unknown";
#endif

constexpr const char* kKnownArchs[] = {kHostArch};

// The CPU reference runs both prefill branches; it is not CUDA-alike and has
// no decode context parallelism.
constexpr ArchCapabilities kCapabilities[] = {
    ArchCapabilities::For(kHostArch)
        .set_is_cuda_alike(false)
        .set_kv_cache_fp8_format(DSA_FP8_E4M3FN)
        .set_warp_size(1)
        .set_sparse_mla_dense_mha_prefill(true)
        .set_sparse_mla_decode_context_parallel(false),
};
static_assert(AllRowsComplete(kCapabilities));

DsaStatusCode CapabilitiesForArch(const char* arch, DsaCapabilities* out,
                                  char* error, size_t error_size) {
  return FillCapabilities(kCapabilities, "cpu", arch, out, error, error_size);
}

std::string CpuModelName() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return kHostArch;
  char line[512];
  std::string name = kHostArch;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "model name", 10) == 0) {
      const char* colon = std::strchr(line, ':');
      if (colon != nullptr) {
        name = colon + 1;
        while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) {
          name.erase(name.begin());
        }
        while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) {
          name.pop_back();
        }
      }
      break;
    }
  }
  std::fclose(f);
  return name;
}

DsaStatusCode ProbeDevices(DsaDeviceInfo* out, char* error, size_t error_size) {
  if (out == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: NULL device record");
  }
  DsaDeviceInfo info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.device_count = 1;  // the host
  CopyFixedString(info.arch, kHostArch);
  CopyFixedString(info.name, CpuModelName().c_str());
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    info.total_memory_bytes =
        static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  CopyToCaller(info, out);
  return DSA_STATUS_OK;
}

// Host allocations aligned for 64-byte vector loads.
DsaStatusCode DeviceMalloc(size_t bytes, void** out, char* error,
                           size_t error_size) {
  if (out == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: NULL output pointer");
  }
  *out = nullptr;
  constexpr size_t kAlignment = 64;
  // aligned_alloc wants a multiple of the alignment; rounding a size near
  // SIZE_MAX up would wrap to a tiny allocation.
  if (bytes > std::numeric_limits<size_t>::max() - (kAlignment - 1)) {
    return PluginError(DSA_STATUS_RESOURCE_EXHAUSTED, error, error_size,
                       "cpu: cannot allocate %zu bytes", bytes);
  }
  const size_t rounded =
      ((bytes == 0 ? 1 : bytes) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) {
    return PluginError(DSA_STATUS_RESOURCE_EXHAUSTED, error, error_size,
                       "cpu: out of memory allocating %zu bytes", bytes);
  }
  *out = p;
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceFree(void* ptr, char*, size_t) {
  std::free(ptr);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceMemcpy(void* dst, const void* src, size_t bytes,
                           int32_t kind, char* error, size_t error_size) {
  if (kind < DSA_MEMCPY_HOST_TO_DEVICE || kind > DSA_MEMCPY_DEVICE_TO_DEVICE) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: unknown memcpy kind %d", kind);
  }
  if (bytes > 0) std::memmove(dst, src, bytes);
  return DSA_STATUS_OK;
}

DsaStatusCode DeviceSynchronize(char*, size_t) { return DSA_STATUS_OK; }

// A stream is a token (every call on the CPU platform is synchronous): a
// heap object, so that a stream never destroyed shows as a leak in a
// sanitizer build, and one destroyed twice as a double free.
struct CpuStream {
  static constexpr uint64_t kMagic = 0x6473615f73747265;  // "dsa_stre"
  uint64_t magic = kMagic;
};

bool IsStream(const void* stream) {
  return stream != nullptr &&
         static_cast<const CpuStream*>(stream)->magic == CpuStream::kMagic;
}

DsaStatusCode StreamCreate(void** stream, char* error, size_t error_size) {
  if (stream == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: NULL output stream");
  }
  *stream = new (std::nothrow) CpuStream();
  if (*stream == nullptr) {
    return PluginError(DSA_STATUS_RESOURCE_EXHAUSTED, error, error_size,
                       "cpu: out of memory creating a stream");
  }
  return DSA_STATUS_OK;
}

DsaStatusCode StreamDestroy(void* stream, char* error, size_t error_size) {
  if (!IsStream(stream)) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: not a stream of this platform");
  }
  auto* s = static_cast<CpuStream*>(stream);
  s->magic = 0;
  delete s;
  return DSA_STATUS_OK;
}

DsaStatusCode MemcpyAsync(void* dst, const void* src, size_t bytes,
                          int32_t kind, void* stream, char* error,
                          size_t error_size) {
  if (!IsStream(stream)) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: memcpy on something that is not a stream of "
                       "this platform");
  }
  return DeviceMemcpy(dst, src, bytes, kind, error, error_size);
}

DsaStatusCode StreamSynchronize(void* stream, char* error, size_t error_size) {
  if (!IsStream(stream)) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: synchronize on something that is not a stream "
                       "of this platform");
  }
  return DSA_STATUS_OK;
}

// "Device" memory is host memory: free is what the kernel reports available
// (MemAvailable: free pages plus what it can reclaim), total the physical
// memory.
DsaStatusCode DeviceMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes,
                               char* error, size_t error_size) {
  if (free_bytes == nullptr || total_bytes == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: NULL memory record");
  }
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) {
    return PluginError(DSA_STATUS_UNIMPLEMENTED, error, error_size,
                       "cpu: sysconf reports no physical memory size");
  }
  const uint64_t total =
      static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  uint64_t available = 0;
  bool found = false;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r"); f != nullptr) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        available = static_cast<uint64_t>(kib) * 1024;
        found = true;
        break;
      }
    }
    std::fclose(f);
  }
  if (!found) {
    const long free_pages = sysconf(_SC_AVPHYS_PAGES);
    available = free_pages > 0 ? static_cast<uint64_t>(free_pages) *
                                     static_cast<uint64_t>(page_size)
                               : total;
  }
  *free_bytes = available < total ? available : total;
  *total_bytes = total;
  return DSA_STATUS_OK;
}

// The host is the one device.
DsaStatusCode DeviceBind(int32_t ordinal, char* error, size_t error_size) {
  if (ordinal != 0) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: device %d of 1 (the host)", ordinal);
  }
  return DSA_STATUS_OK;
}

// Tensor-parallel ranks on the CPU platform are threads of the process
// over host memory (platform/host_collectives.h); every call is synchronous.
struct CpuGroup {
  static constexpr uint64_t kMagic = 0x6473615f67726f75;  // "dsa_grou"
  explicit CpuGroup(int n) : group(n) {}
  uint64_t magic = kMagic;
  HostCollectiveGroup group;
};

CpuGroup* AsGroup(void* group) {
  return group != nullptr &&
                 static_cast<CpuGroup*>(group)->magic == CpuGroup::kMagic
             ? static_cast<CpuGroup*>(group)
             : nullptr;
}

DsaStatusCode CollectiveCreate(int32_t num_ranks, const int32_t* ordinals,
                               void** group, char* error, size_t error_size) {
  if (group == nullptr || ordinals == nullptr || num_ranks < 1) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: a collective group of %d ranks", num_ranks);
  }
  for (int32_t r = 0; r < num_ranks; ++r) {
    if (ordinals[r] != 0) {
      return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                         "cpu: rank %d on device %d of 1 (the host)", r,
                         ordinals[r]);
    }
  }
  *group = new (std::nothrow) CpuGroup(num_ranks);
  if (*group == nullptr) {
    return PluginError(DSA_STATUS_RESOURCE_EXHAUSTED, error, error_size,
                       "cpu: out of memory creating a collective group");
  }
  return DSA_STATUS_OK;
}

DsaStatusCode CollectiveAbort(void* group, char* error, size_t error_size) {
  CpuGroup* g = AsGroup(group);
  if (g == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: not a collective group of this platform");
  }
  g->group.Abort("the group was aborted (a rank failed)");
  return DSA_STATUS_OK;
}

DsaStatusCode CollectiveDestroy(void* group, char* error, size_t error_size) {
  CpuGroup* g = AsGroup(group);
  if (g == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: not a collective group of this platform");
  }
  g->magic = 0;
  delete g;
  return DSA_STATUS_OK;
}

DsaStatusCode CollectiveResult(const std::string& why, char* error,
                               size_t error_size) {
  if (why.empty()) return DSA_STATUS_OK;
  return PluginError(DSA_STATUS_ABORTED, error, error_size, "cpu: %s",
                     why.c_str());
}

DsaStatusCode AllReduceSum(void* group, int32_t rank, void* buffer,
                           size_t count, int32_t element, void* stream,
                           char* error, size_t error_size) {
  CpuGroup* g = AsGroup(group);
  if (g == nullptr || (stream != nullptr && !IsStream(stream))) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: all-reduce on something that is not a group "
                       "and stream of this platform");
  }
  if (element != DSA_COLLECTIVE_FLOAT32 && element != DSA_COLLECTIVE_BFLOAT16) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: all-reduce of unknown element type %d", element);
  }
  if (buffer == nullptr && count > 0) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: all-reduce of a NULL buffer");
  }
  return CollectiveResult(
      g->group.AllReduceSum(rank, buffer, count,
                            element == DSA_COLLECTIVE_FLOAT32
                                ? CollectiveElement::kFloat32
                                : CollectiveElement::kBFloat16),
      error, error_size);
}

DsaStatusCode AllGather(void* group, int32_t rank, const void* send, void* recv,
                        size_t bytes, void* stream, char* error,
                        size_t error_size) {
  CpuGroup* g = AsGroup(group);
  if (g == nullptr || (stream != nullptr && !IsStream(stream))) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: all-gather on something that is not a group "
                       "and stream of this platform");
  }
  if ((send == nullptr || recv == nullptr) && bytes > 0) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "cpu: all-gather with a NULL buffer");
  }
  return CollectiveResult(g->group.AllGather(rank, send, recv, bytes), error,
                          error_size);
}

DsaStatusCode Initialize(const DsaHostApi* host, char* error,
                         size_t error_size) {
  static const DsaPlatformDescriptor descriptor = [] {
    PlatformCallbacks c{
        &CapabilitiesForArch, &ProbeDevices,     &DeviceMalloc,
        &DeviceFree,          &DeviceMemcpy,     &DeviceSynchronize,
        &DeviceMemoryInfo,    &StreamCreate,     &StreamDestroy,
        &MemcpyAsync,         &StreamSynchronize};
    c.device_bind = &DeviceBind;
    c.collective_create = &CollectiveCreate;
    c.collective_abort = &CollectiveAbort;
    c.collective_destroy = &CollectiveDestroy;
    c.all_reduce_sum = &AllReduceSum;
    c.all_gather = &AllGather;
    return MakePlatformDescriptor("cpu", DSA_PLATFORM_KIND_CPU, kHostArch,
                                  kKnownArchs, c);
  }();
  return RegisterPlatformWithHost(host, descriptor, error, error_size);
}

}  // namespace

const DsaPluginApi* CpuPlatformPluginApi() {
  static const DsaPluginApi api = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR,
                                   DSA_PLUGIN_API_MINOR, "dsa_cpu_platform",
                                   &Initialize};
  return &api;
}

}  // namespace dsa::platform
