// A configurable plugin for the loader tests, built as several shared objects
// (testing/BUILD) that each misbehave in one way:
//   FAKE_PLATFORM_ID     id of the accelerator platform it registers
//   FAKE_DEVICE_COUNT    devices its probe reports
//   FAKE_MAJOR_VERSION   API major version it claims
//   FAKE_INIT_FAILS      registers its platform, then fails initialize
//   FAKE_NO_EXPORT       does not export DsaGetPluginApi at all
#include <cstring>

#include "platform/plugin_api.h"
#include "platform/plugin_util.h"

#ifndef FAKE_PLATFORM_ID
#define FAKE_PLATFORM_ID "fake"
#endif
#ifndef FAKE_DEVICE_COUNT
#define FAKE_DEVICE_COUNT 0
#endif
#ifndef FAKE_MAJOR_VERSION
#define FAKE_MAJOR_VERSION DSA_PLUGIN_API_MAJOR
#endif

namespace {

using ::dsa::platform::AllRowsComplete;
using ::dsa::platform::ArchCapabilities;
using ::dsa::platform::CopyFixedString;
using ::dsa::platform::FillCapabilities;
using ::dsa::platform::MakePlatformDescriptor;
using ::dsa::platform::PluginError;

constexpr const char* kArchs[] = {"gfx942"};
constexpr ArchCapabilities kCaps[] = {
    ArchCapabilities::For("gfx942")
        .set_is_cuda_alike(true)
        .set_kv_cache_fp8_format(DSA_FP8_E4M3FNUZ)
        .set_warp_size(64)
        .set_sparse_mla_dense_mha_prefill(true)
        .set_sparse_mla_decode_context_parallel(false),
};
static_assert(AllRowsComplete(kCaps));

DsaStatusCode Caps(const char* arch, DsaCapabilities* out, char* error,
                   size_t error_size) {
  return FillCapabilities(kCaps, FAKE_PLATFORM_ID, arch, out, error,
                          error_size);
}

DsaStatusCode Probe(DsaDeviceInfo* out, char*, size_t) {
  out->device_count = FAKE_DEVICE_COUNT;
  CopyFixedString(out->arch, FAKE_DEVICE_COUNT > 0 ? "gfx942" : "");
  CopyFixedString(out->name, "fake accelerator");
  return DSA_STATUS_OK;
}

[[maybe_unused]] DsaStatusCode Initialize(const DsaHostApi* host, char* error,
                                          size_t error_size) {
  static const DsaPlatformDescriptor d = MakePlatformDescriptor(
      FAKE_PLATFORM_ID, DSA_PLATFORM_KIND_ROCM, "gfx942", kArchs,
      {&Caps, &Probe, nullptr, nullptr, nullptr, nullptr});
  DsaStatusCode code =
      host->register_platform(host->context, &d, error, error_size);
  if (code != DSA_STATUS_OK) return code;
#ifdef FAKE_INIT_FAILS
  return PluginError(DSA_STATUS_FAILED_PRECONDITION, error, error_size,
                     "%s: simulated initialization failure", FAKE_PLATFORM_ID);
#else
  return DSA_STATUS_OK;
#endif
}

}  // namespace

#ifndef FAKE_NO_EXPORT
extern "C" DSA_PLUGIN_EXPORT const DsaPluginApi* DsaGetPluginApi(void) {
  static const DsaPluginApi api = {sizeof(DsaPluginApi), FAKE_MAJOR_VERSION, 0,
                                   "fake_plugin_" FAKE_PLATFORM_ID,
                                   &Initialize};
  return &api;
}
#else
// Something else is exported, so the object is a valid library.
extern "C" DSA_PLUGIN_EXPORT int DsaSomethingElse(void) { return 42; }
#endif
