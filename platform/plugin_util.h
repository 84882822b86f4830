// Small helpers for writing plugins against plugin_api.h: filling the C
// structs and the error buffers. Header-only and free of Abseil, so a plugin
// shared object needs nothing beyond the C++ runtime.
#ifndef DSA_PLATFORM_PLUGIN_UTIL_H_
#define DSA_PLATFORM_PLUGIN_UTIL_H_

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "platform/plugin_api.h"

namespace dsa::platform {

// Writes a printf-style message into a plugin error buffer and returns code.
inline DsaStatusCode PluginError(DsaStatusCode code, char* error,
                                 size_t error_size, const char* format, ...)
    __attribute__((format(printf, 4, 5)));

inline DsaStatusCode PluginError(DsaStatusCode code, char* error,
                                 size_t error_size, const char* format, ...) {
  if (error != nullptr && error_size > 0) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(error, error_size, format, args);
    va_end(args);
  }
  return code;
}

// Copies a string into a fixed char array, always NUL-terminated.
template <size_t N>
void CopyFixedString(char (&dst)[N], const char* src) {
  std::snprintf(dst, N, "%s", src != nullptr ? src : "");
}

// Copies a struct the plugin filled into the caller's, never writing past the
// caller's struct_size (an older host's struct may be shorter), and records
// how much was written.
template <class T>
void CopyToCaller(const T& value, T* out) {
  const size_t n = out->struct_size < sizeof(T) ? out->struct_size : sizeof(T);
  std::memcpy(out, &value, n);
  out->struct_size = n;
}

// The callbacks of a platform descriptor (plugin_api.h); the runtime ones may
// be null.
struct PlatformCallbacks {
  decltype(DsaPlatformDescriptor::capabilities_for_arch) capabilities_for_arch;
  decltype(DsaPlatformDescriptor::probe_devices) probe_devices;
  decltype(DsaPlatformDescriptor::device_malloc) device_malloc;
  decltype(DsaPlatformDescriptor::device_free) device_free;
  decltype(DsaPlatformDescriptor::device_memcpy) device_memcpy;
  decltype(DsaPlatformDescriptor::device_synchronize) device_synchronize;
  decltype(DsaPlatformDescriptor::device_memory_info) device_memory_info =
      nullptr;
  // Plugin API 1.2: all four or none.
  decltype(DsaPlatformDescriptor::stream_create) stream_create = nullptr;
  decltype(DsaPlatformDescriptor::stream_destroy) stream_destroy = nullptr;
  decltype(DsaPlatformDescriptor::memcpy_async) memcpy_async = nullptr;
  decltype(DsaPlatformDescriptor::stream_synchronize) stream_synchronize =
      nullptr;
  // Plugin API 1.3: device_bind may be null; the five collectives all or
  // none.
  decltype(DsaPlatformDescriptor::device_bind) device_bind = nullptr;
  decltype(DsaPlatformDescriptor::collective_create) collective_create =
      nullptr;
  decltype(DsaPlatformDescriptor::collective_abort) collective_abort = nullptr;
  decltype(DsaPlatformDescriptor::collective_destroy) collective_destroy =
      nullptr;
  decltype(DsaPlatformDescriptor::all_reduce_sum) all_reduce_sum = nullptr;
  decltype(DsaPlatformDescriptor::all_gather) all_gather = nullptr;
  // Plugin API 1.4: the four graph calls all or none.
  decltype(DsaPlatformDescriptor::graph_capture_begin) graph_capture_begin =
      nullptr;
  decltype(DsaPlatformDescriptor::graph_capture_end) graph_capture_end =
      nullptr;
  decltype(DsaPlatformDescriptor::graph_launch) graph_launch = nullptr;
  decltype(DsaPlatformDescriptor::graph_destroy) graph_destroy = nullptr;
  // Plugin API 1.5: both or none.
  decltype(DsaPlatformDescriptor::host_register) host_register = nullptr;
  decltype(DsaPlatformDescriptor::host_unregister) host_unregister = nullptr;
};

template <size_t N>
DsaPlatformDescriptor MakePlatformDescriptor(
    const char* platform_id, DsaPlatformKind kind, const char* default_arch,
    const char* const (&known_archs)[N], const PlatformCallbacks& callbacks) {
  DsaPlatformDescriptor d;
  std::memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.platform_id = platform_id;
  d.kind = kind;
  d.is_accelerator = kind != DSA_PLATFORM_KIND_CPU;
  d.default_arch = default_arch;
  d.known_archs = known_archs;
  d.num_known_archs = N;
  d.capabilities_for_arch = callbacks.capabilities_for_arch;
  d.probe_devices = callbacks.probe_devices;
  d.device_malloc = callbacks.device_malloc;
  d.device_free = callbacks.device_free;
  d.device_memcpy = callbacks.device_memcpy;
  d.device_synchronize = callbacks.device_synchronize;
  d.device_memory_info = callbacks.device_memory_info;
  d.stream_create = callbacks.stream_create;
  d.stream_destroy = callbacks.stream_destroy;
  d.memcpy_async = callbacks.memcpy_async;
  d.stream_synchronize = callbacks.stream_synchronize;
  d.device_bind = callbacks.device_bind;
  d.collective_create = callbacks.collective_create;
  d.collective_abort = callbacks.collective_abort;
  d.collective_destroy = callbacks.collective_destroy;
  d.all_reduce_sum = callbacks.all_reduce_sum;
  d.all_gather = callbacks.all_gather;
  d.graph_capture_begin = callbacks.graph_capture_begin;
  d.graph_capture_end = callbacks.graph_capture_end;
  d.graph_launch = callbacks.graph_launch;
  d.graph_destroy = callbacks.graph_destroy;
  d.host_register = callbacks.host_register;
  d.host_unregister = callbacks.host_unregister;
  return d;
}

// The body of a platform plugin's initialize: registers `descriptor` (which
// must outlive the plugin, e.g. a function-local static) with the host.
inline DsaStatusCode RegisterPlatformWithHost(
    const DsaHostApi* host, const DsaPlatformDescriptor& descriptor,
    char* error, size_t error_size) {
  if (host == nullptr || host->register_platform == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "%s: host API lacks register_platform",
                       descriptor.platform_id);
  }
  return host->register_platform(host->context, &descriptor, error, error_size);
}

// Static capability record of one architecture, as a plugin keeps it in a
// table. A row is built with setters named after DsaCapabilities' fields, so
// no value can be read as its neighbour's, and AllRowsComplete fails the
// build when a row leaves a field unset:
//
//   constexpr ArchCapabilities kCapabilities[] = {
//       ArchCapabilities::For("gfx942")
//           .set_is_cuda_alike(true)
//           .set_kv_cache_fp8_format(DSA_FP8_E4M3FNUZ)
//           .set_warp_size(64)
//           .set_sparse_mla_dense_mha_prefill(true)
//           .set_sparse_mla_decode_context_parallel(false),
//   };
//   static_assert(AllRowsComplete(kCapabilities));
//
// The struct stays an aggregate, so positional rows in older code still
// compile (their fields_set is 0 and AllRowsComplete rejects them).
struct ArchCapabilities {
  enum Field : uint32_t {
    kIsCudaAlike = 1u << 0,
    kKvCacheFp8Format = 1u << 1,
    kWarpSize = 1u << 2,
    kSparseMlaDenseMhaPrefill = 1u << 3,
    kSparseMlaDecodeContextParallel = 1u << 4,
    kAllFields = (1u << 5) - 1,
  };

  const char* arch = nullptr;
  int32_t is_cuda_alike = 0;
  DsaFp8Format kv_cache_fp8_format = static_cast<DsaFp8Format>(0);
  int32_t warp_size = 0;
  int32_t sparse_mla_dense_mha_prefill = 0;
  int32_t sparse_mla_decode_context_parallel = 0;
  // The Field bits a setter wrote.
  uint32_t fields_set = 0;

  static constexpr ArchCapabilities For(const char* arch_name) {
    ArchCapabilities row;
    row.arch = arch_name;
    return row;
  }
  constexpr ArchCapabilities set_is_cuda_alike(bool value) const {
    ArchCapabilities row = *this;
    row.is_cuda_alike = value ? 1 : 0;
    row.fields_set |= kIsCudaAlike;
    return row;
  }
  constexpr ArchCapabilities set_kv_cache_fp8_format(DsaFp8Format value) const {
    ArchCapabilities row = *this;
    row.kv_cache_fp8_format = value;
    row.fields_set |= kKvCacheFp8Format;
    return row;
  }
  constexpr ArchCapabilities set_warp_size(int32_t value) const {
    ArchCapabilities row = *this;
    row.warp_size = value;
    row.fields_set |= kWarpSize;
    return row;
  }
  constexpr ArchCapabilities set_sparse_mla_dense_mha_prefill(
      bool value) const {
    ArchCapabilities row = *this;
    row.sparse_mla_dense_mha_prefill = value ? 1 : 0;
    row.fields_set |= kSparseMlaDenseMhaPrefill;
    return row;
  }
  constexpr ArchCapabilities set_sparse_mla_decode_context_parallel(
      bool value) const {
    ArchCapabilities row = *this;
    row.sparse_mla_decode_context_parallel = value ? 1 : 0;
    row.fields_set |= kSparseMlaDecodeContextParallel;
    return row;
  }

  // Every field set, with values a DsaCapabilities may carry.
  constexpr bool complete() const {
    return arch != nullptr && arch[0] != '\0' && fields_set == kAllFields &&
           warp_size > 0 &&
           (kv_cache_fp8_format == DSA_FP8_E4M3FN ||
            kv_cache_fp8_format == DSA_FP8_E4M3FNUZ);
  }
};

// For static_assert over a plugin's table: every row complete, no arch twice.
template <size_t N>
constexpr bool AllRowsComplete(const ArchCapabilities (&table)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (!table[i].complete()) return false;
    for (size_t j = 0; j < i; ++j) {
      const char* a = table[i].arch;
      const char* b = table[j].arch;
      while (*a != '\0' && *a == *b) {
        ++a;
        ++b;
      }
      if (*a == *b) return false;
    }
  }
  return true;
}

// Looks `arch` up in a plugin's table and fills `out`; InvalidArgument when
// the table does not have it.
template <size_t N>
DsaStatusCode FillCapabilities(const ArchCapabilities (&table)[N],
                               const char* platform_id, const char* arch,
                               DsaCapabilities* out, char* error,
                               size_t error_size) {
  if (arch == nullptr || out == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "%s: NULL argument", platform_id);
  }
  for (const ArchCapabilities& entry : table) {
    if (std::strcmp(entry.arch, arch) != 0) continue;
    DsaCapabilities c;
    std::memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    CopyFixedString(c.arch, entry.arch);
    c.is_cuda_alike = entry.is_cuda_alike;
    c.kv_cache_fp8_format = entry.kv_cache_fp8_format;
    c.warp_size = entry.warp_size;
    c.sparse_mla_dense_mha_prefill = entry.sparse_mla_dense_mha_prefill;
    c.sparse_mla_decode_context_parallel =
        entry.sparse_mla_decode_context_parallel;
    CopyToCaller(c, out);
    return DSA_STATUS_OK;
  }
  return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                     "%s does not support architecture '%s'", platform_id,
                     arch);
}

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_PLUGIN_UTIL_H_
