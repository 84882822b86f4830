// Small helpers for writing plugins against plugin_api.h: filling the C
// structs and the error buffers. Header-only and free of Abseil, so a plugin
// shared object needs nothing beyond the C++ runtime.
#ifndef DSA_PLATFORM_PLUGIN_UTIL_H_
#define DSA_PLATFORM_PLUGIN_UTIL_H_

#include <cstdarg>
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

// Static capability record of one architecture, as a plugin keeps it in a
// table.
struct ArchCapabilities {
  const char* arch;
  int32_t is_cuda_alike;
  DsaFp8Format kv_cache_fp8_format;
  int32_t warp_size;
  int32_t sparse_mla_dense_mha_prefill;
  int32_t sparse_mla_decode_context_parallel;
};

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
    // Never write past what the host's struct holds.
    const size_t n = out->struct_size < sizeof(c) ? out->struct_size : sizeof(c);
    std::memcpy(out, &c, n);
    out->struct_size = n;
    return DSA_STATUS_OK;
  }
  return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                     "%s does not support architecture '%s'", platform_id,
                     arch);
}

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_PLUGIN_UTIL_H_
