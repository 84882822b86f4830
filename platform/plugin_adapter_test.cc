// The C-ABI adapter on its own, with a sink of the test's (as a host without
// the registry would use it): plugins built against an older minor version
// hand over shorter structs, in buffers of exactly their struct_size so that
// AddressSanitizer sees any read past them; a newer major version and a
// second plugin of the same name are refused before initialize runs.
#include "platform/plugin_adapter.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/plugin_api.h"
#include "testing/status_matchers.h"

namespace dsa::platform {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

class TestSink : public PluginSink {
 public:
  bool HasPlugin(const std::string& name) const override {
    for (const PluginRegistrations& r : committed) {
      if (r.plugin_name == name) return true;
    }
    return false;
  }
  bool HasPluginFile(const PluginFileIdentity&) const override { return false; }
  Status Commit(const PluginRegistrations& r) override {
    committed.push_back(r);
    return OkStatus();
  }
  std::vector<PluginRegistrations> committed;
};

// A heap buffer holding the first `size` bytes of `value`, struct_size set.
template <class T>
T* OlderStruct(const T& value, size_t size) {
  void* p = std::malloc(size);
  std::memcpy(p, &value, size);
  static_cast<T*>(p)->struct_size = size;
  return static_cast<T*>(p);
}

const char* const kArchs[] = {"old1"};
int g_initialize_calls = 0;

// Capabilities as an API 1.0 plugin writes them (it knows every field).
DsaStatusCode OldCapabilities(const char* arch, DsaCapabilities* out,
                              char* error, size_t error_size) {
  DsaCapabilities c;
  std::memset(&c, 0, sizeof(c));
  std::snprintf(c.arch, sizeof(c.arch), "%s", arch);
  c.is_cuda_alike = 1;
  c.kv_cache_fp8_format = DSA_FP8_E4M3FN;
  c.warp_size = 64;
  const size_t n = std::min(out->struct_size, sizeof(c));
  c.struct_size = n;
  std::memcpy(out, &c, n);
  return DSA_STATUS_OK;
}

// Writes a record shorter than API 1.0 allows.
DsaStatusCode TruncatedCapabilities(const char*, DsaCapabilities* out, char*,
                                    size_t) {
  out->struct_size = offsetof(DsaCapabilities, warp_size);
  return DSA_STATUS_OK;
}

// An older plugin: its platform descriptor ends after capabilities_for_arch
// (no device probe, no runtime) and is allocated at exactly that size; its
// kernel descriptor too.
DsaStatusCode InitOlderPlugin(const DsaHostApi* host, char* error,
                              size_t error_size) {
  ++g_initialize_calls;
  DsaPlatformDescriptor d;
  std::memset(&d, 0, sizeof(d));
  d.platform_id = "old";
  d.kind = DSA_PLATFORM_KIND_ROCM;
  d.is_accelerator = 1;
  d.default_arch = "old1";
  d.known_archs = kArchs;
  d.num_known_archs = 1;
  d.capabilities_for_arch = &OldCapabilities;
  DsaPlatformDescriptor* old_d =
      OlderStruct(d, offsetof(DsaPlatformDescriptor, capabilities_for_arch) +
                         sizeof(d.capabilities_for_arch));
  DsaStatusCode code =
      host->register_platform(host->context, old_d, error, error_size);
  std::free(old_d);  // the host keeps a normalised copy, not this buffer
  if (code != DSA_STATUS_OK) return code;
  DsaKernelDescriptor k;
  std::memset(&k, 0, sizeof(k));
  k.op_name = "old_op";
  k.op_abi_version = 1;
  k.platform_id = "old";
  k.fn = reinterpret_cast<const void*>(&OldCapabilities);
  DsaKernelDescriptor* old_k = OlderStruct(k, sizeof(k));
  code = host->register_kernel(host->context, old_k, error, error_size);
  std::free(old_k);
  return code;
}

DsaPluginApi* OlderApi(const char* name, uint32_t major) {
  DsaPluginApi api = {sizeof(DsaPluginApi), major, 0, name, &InitOlderPlugin};
  return OlderStruct(api, sizeof(DsaPluginApi));
}

TEST(PluginAdapterTest, AnOlderPluginsShorterStructsAreNormalised) {
  TestSink sink;
  DsaPluginApi* api = OlderApi("older", DSA_PLUGIN_API_MAJOR);
  ASSERT_THAT(InitializePlugin(api, sink), IsOk());
  std::free(api);
  ASSERT_EQ(sink.committed.size(), 1u);
  const PluginRegistrations& r = sink.committed[0];
  EXPECT_EQ(r.plugin_name, "older");
  ASSERT_EQ(r.platforms.size(), 1u);
  // This host's size; what the plugin did not write is absent.
  const DsaPlatformDescriptor& d = r.platforms[0];
  EXPECT_EQ(d.struct_size, sizeof(DsaPlatformDescriptor));
  EXPECT_EQ(d.probe_devices, nullptr);
  EXPECT_EQ(d.device_malloc, nullptr);
  EXPECT_EQ(d.device_synchronize, nullptr);
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_STREQ(r.kernels[0].op_name, "old_op");

  DsaCapabilities caps;
  ASSERT_THAT(QueryCapabilities(d, "old1", &caps), IsOk());
  EXPECT_EQ(caps.warp_size, 64);
  EXPECT_STREQ(caps.arch, "old1");
  DsaDeviceInfo devices;
  ASSERT_THAT(QueryDevices(d, &devices), IsOk());
  EXPECT_EQ(devices.device_count, 0);

  DsaPlatformDescriptor broken = d;
  broken.capabilities_for_arch = &TruncatedCapabilities;
  EXPECT_THAT(QueryCapabilities(broken, "old1", &caps),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("capability record of struct_size")));
}

TEST(PluginAdapterTest, RefusedBeforeInitializeRuns) {
  TestSink sink;
  g_initialize_calls = 0;
  DsaPluginApi* newer = OlderApi("newer", DSA_PLUGIN_API_MAJOR + 1);
  EXPECT_THAT(InitializePlugin(newer, sink),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("was built for plugin API")));
  std::free(newer);
  EXPECT_EQ(g_initialize_calls, 0);

  DsaPluginApi* first = OlderApi("twice", DSA_PLUGIN_API_MAJOR);
  ASSERT_THAT(InitializePlugin(first, sink), IsOk());
  EXPECT_EQ(g_initialize_calls, 1);
  EXPECT_THAT(InitializePlugin(first, sink),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("plugin 'twice' is already loaded")));
  EXPECT_EQ(g_initialize_calls, 1);
  std::free(first);

  // An API table shorter than API 1.0's.
  DsaPluginApi api = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR, 0, "tiny",
                      &InitOlderPlugin};
  DsaPluginApi* tiny = OlderStruct(api, offsetof(DsaPluginApi, plugin_name));
  EXPECT_THAT(InitializePlugin(tiny, sink),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("smaller than")));
  std::free(tiny);
  EXPECT_EQ(g_initialize_calls, 1);
  EXPECT_EQ(sink.committed.size(), 1u);
}

TEST(PluginAdapterTest, DescriptorsAreValidatedWithBoundedReads) {
  DsaPlatformDescriptor d;
  std::memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.platform_id = "p";
  d.kind = DSA_PLATFORM_KIND_ROCM;
  d.is_accelerator = 1;
  d.default_arch = "old1";
  d.known_archs = kArchs;
  d.num_known_archs = 1;
  d.capabilities_for_arch = &OldCapabilities;
  DsaPlatformDescriptor out;
  EXPECT_THAT(NormalizePlatformDescriptor(&d, &out), IsOk());

  DsaPlatformDescriptor bad = d;
  bad.num_known_archs = 1u << 30;  // garbage: never iterated
  EXPECT_THAT(NormalizePlatformDescriptor(&bad, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_known_archs")));
  char unterminated[80];
  std::memset(unterminated, 'a', sizeof(unterminated));
  bad = d;
  bad.platform_id = unterminated;  // read at most 65 bytes of it
  EXPECT_THAT(
      NormalizePlatformDescriptor(&bad, &out),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("platform_id")));
  bad = d;
  bad.default_arch = "not_listed";
  EXPECT_THAT(
      NormalizePlatformDescriptor(&bad, &out),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("default_arch")));
  DsaPlatformDescriptor* too_short =
      OlderStruct(d, offsetof(DsaPlatformDescriptor, capabilities_for_arch));
  EXPECT_THAT(NormalizePlatformDescriptor(too_short, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("smaller than the minimum")));
  std::free(too_short);

  // A struct_size that ends inside a field keeps none of it: half a
  // function pointer must never be called.
  d.probe_devices = [](DsaDeviceInfo*, char*, size_t) { return DSA_STATUS_OK; };
  DsaPlatformDescriptor* cut =
      OlderStruct(d, offsetof(DsaPlatformDescriptor, probe_devices) + 5);
  ASSERT_THAT(NormalizePlatformDescriptor(cut, &out), IsOk());
  std::free(cut);
  EXPECT_EQ(out.probe_devices, nullptr);
  EXPECT_EQ(out.capabilities_for_arch, &OldCapabilities);

  DsaKernelDescriptor k;
  std::memset(&k, 0, sizeof(k));
  k.struct_size = sizeof(k) - 1;
  DsaKernelDescriptor kout;
  EXPECT_THAT(
      NormalizeKernelDescriptor(&k, &kout),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("struct_size")));
}

// A current descriptor with no runtime callbacks: each all-or-none test
// adds its own.
DsaPlatformDescriptor RuntimelessDescriptor() {
  DsaPlatformDescriptor d;
  std::memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.platform_id = "p";
  d.kind = DSA_PLATFORM_KIND_CUDA;
  d.is_accelerator = 1;
  d.default_arch = "old1";
  d.known_archs = kArchs;
  d.num_known_archs = 1;
  d.capabilities_for_arch = &OldCapabilities;
  return d;
}

DsaStatusCode FakeStreamCreate(void** stream, char*, size_t) {
  static int token;
  *stream = &token;
  return DSA_STATUS_OK;
}
DsaStatusCode FakeStreamDestroy(void*, char*, size_t) { return DSA_STATUS_OK; }
DsaStatusCode FakeMemcpyAsync(void*, const void*, size_t, int32_t, void*, char*,
                              size_t) {
  return DSA_STATUS_OK;
}
DsaStatusCode FakeStreamSynchronize(void*, char*, size_t) {
  return DSA_STATUS_OK;
}

// Plugin API 1.2's streams: all four callbacks or none; a descriptor of 1.1
// (struct_size up to device_memory_info) has none, whatever lies past it.
TEST(PluginAdapterTest, StreamCallbacksAreAllOrNone) {
  DsaPlatformDescriptor d = RuntimelessDescriptor();
  DsaPlatformDescriptor out;
  ASSERT_THAT(NormalizePlatformDescriptor(&d, &out), IsOk());
  EXPECT_EQ(out.stream_create, nullptr);
  d.stream_create = &FakeStreamCreate;
  d.stream_destroy = &FakeStreamDestroy;
  d.memcpy_async = &FakeMemcpyAsync;
  d.stream_synchronize = &FakeStreamSynchronize;
  ASSERT_THAT(NormalizePlatformDescriptor(&d, &out), IsOk());
  EXPECT_EQ(out.stream_create, &FakeStreamCreate);
  EXPECT_EQ(out.stream_synchronize, &FakeStreamSynchronize);

  DsaPlatformDescriptor partial = d;
  partial.memcpy_async = nullptr;
  EXPECT_THAT(NormalizePlatformDescriptor(&partial, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("all set or all NULL; 3 of the 4 are set")));

  DsaPlatformDescriptor* v11 =
      OlderStruct(d, offsetof(DsaPlatformDescriptor, device_memory_info) +
                         sizeof(d.device_memory_info));
  ASSERT_THAT(NormalizePlatformDescriptor(v11, &out), IsOk());
  std::free(v11);
  EXPECT_EQ(out.struct_size, sizeof(DsaPlatformDescriptor));
  EXPECT_EQ(out.stream_create, nullptr);
  EXPECT_EQ(out.stream_destroy, nullptr);
  EXPECT_EQ(out.memcpy_async, nullptr);
  EXPECT_EQ(out.stream_synchronize, nullptr);
  // One that ends inside the stream callbacks keeps none of them.
  DsaPlatformDescriptor* cut =
      OlderStruct(d, offsetof(DsaPlatformDescriptor, memcpy_async));
  EXPECT_THAT(NormalizePlatformDescriptor(cut, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("2 of the 4 are set")));
  std::free(cut);
}

DsaStatusCode FakeCollectiveCreate(int32_t, const int32_t*, void**, char*,
                                   size_t) {
  return DSA_STATUS_OK;
}
DsaStatusCode FakeCollectiveGroupCall(void*, char*, size_t) {
  return DSA_STATUS_OK;
}
DsaStatusCode FakeAllReduceSum(void*, int32_t, void*, size_t, int32_t, void*,
                               char*, size_t) {
  return DSA_STATUS_OK;
}
DsaStatusCode FakeAllGather(void*, int32_t, const void*, void*, size_t, void*,
                            char*, size_t) {
  return DSA_STATUS_OK;
}

TEST(PluginAdapterTest, CollectiveCallbacksAreAllOrNone) {
  DsaPlatformDescriptor d = RuntimelessDescriptor();
  DsaPlatformDescriptor out;
  ASSERT_THAT(NormalizePlatformDescriptor(&d, &out), IsOk());
  EXPECT_EQ(out.all_reduce_sum, nullptr);
  d.collective_create = &FakeCollectiveCreate;
  d.collective_abort = &FakeCollectiveGroupCall;
  d.collective_destroy = &FakeCollectiveGroupCall;
  d.all_reduce_sum = &FakeAllReduceSum;
  d.all_gather = &FakeAllGather;
  ASSERT_THAT(NormalizePlatformDescriptor(&d, &out), IsOk());
  EXPECT_EQ(out.all_reduce_sum, &FakeAllReduceSum);
  EXPECT_EQ(out.all_gather, &FakeAllGather);

  DsaPlatformDescriptor partial = d;
  partial.collective_abort = nullptr;
  EXPECT_THAT(NormalizePlatformDescriptor(&partial, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("all set or all NULL; 4 of the 5 are set")));

  // A 1.2 plugin's descriptor ends before device_bind: none of them.
  DsaPlatformDescriptor* v12 =
      OlderStruct(d, offsetof(DsaPlatformDescriptor, stream_synchronize) +
                         sizeof(d.stream_synchronize));
  ASSERT_THAT(NormalizePlatformDescriptor(v12, &out), IsOk());
  std::free(v12);
  EXPECT_EQ(out.device_bind, nullptr);
  EXPECT_EQ(out.collective_create, nullptr);
  EXPECT_EQ(out.all_gather, nullptr);
  // One that ends inside the collective callbacks keeps none of them.
  DsaPlatformDescriptor* cut =
      OlderStruct(d, offsetof(DsaPlatformDescriptor, collective_destroy));
  EXPECT_THAT(NormalizePlatformDescriptor(cut, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("2 of the 5 are set")));
  std::free(cut);
}

DsaStatusCode FakeCaptureBegin(void*, char*, size_t) { return DSA_STATUS_OK; }
DsaStatusCode FakeCaptureEnd(void*, void** graph, char*, size_t) {
  static int token;
  *graph = &token;
  return DSA_STATUS_OK;
}
DsaStatusCode FakeGraphLaunch(void*, void*, char*, size_t) {
  return DSA_STATUS_OK;
}
DsaStatusCode FakeGraphDestroy(void*, char*, size_t) { return DSA_STATUS_OK; }

// Plugin API 1.4's graphs: all four or none; a 1.3 plugin's descriptor
// (ending after all_gather) has none.
TEST(PluginAdapterTest, GraphCallbacksAreAllOrNone) {
  DsaPlatformDescriptor d = RuntimelessDescriptor();
  DsaPlatformDescriptor out;
  ASSERT_THAT(NormalizePlatformDescriptor(&d, &out), IsOk());
  EXPECT_EQ(out.graph_launch, nullptr);
  d.graph_capture_begin = &FakeCaptureBegin;
  d.graph_capture_end = &FakeCaptureEnd;
  d.graph_launch = &FakeGraphLaunch;
  d.graph_destroy = &FakeGraphDestroy;
  ASSERT_THAT(NormalizePlatformDescriptor(&d, &out), IsOk());
  EXPECT_EQ(out.graph_capture_begin, &FakeCaptureBegin);
  EXPECT_EQ(out.graph_destroy, &FakeGraphDestroy);

  DsaPlatformDescriptor partial = d;
  partial.graph_launch = nullptr;
  EXPECT_THAT(NormalizePlatformDescriptor(&partial, &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("graph_capture_begin, graph_capture_end, "
                                 "graph_launch and graph_destroy must be all "
                                 "set or all NULL; 3 of the 4 are set")));
  DsaPlatformDescriptor* v13 = OlderStruct(
      d, offsetof(DsaPlatformDescriptor, all_gather) + sizeof(d.all_gather));
  ASSERT_THAT(NormalizePlatformDescriptor(v13, &out), IsOk());
  std::free(v13);
  EXPECT_EQ(out.graph_capture_begin, nullptr);
  EXPECT_EQ(out.graph_destroy, nullptr);
}

TEST(PluginAdapterTest, CallbackCodesOutsideAbslRangeAreInternal) {
  EXPECT_THAT(CallbackStatus(static_cast<DsaStatusCode>(99), "odd", "probe"),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("probe: unknown status code 99: odd")));
  EXPECT_THAT(CallbackStatus(DSA_STATUS_RESOURCE_EXHAUSTED, "", "malloc"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("malloc: no message")));
}

}  // namespace
}  // namespace dsa::platform
