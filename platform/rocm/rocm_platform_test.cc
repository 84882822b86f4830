// Tests of the ROCm plugin's runtime paths against a stand-in HIP runtime
// (fake_hip_runtime.cc) loaded through DSA_HIP_RUNTIME_LIBRARY, so they run
// on any machine: the symbol table loads once, device memory works, and HIP
// errors become the right status codes (out of memory is
// RESOURCE_EXHAUSTED, a missing runtime UNAVAILABLE). Scenarios that need a
// different runtime run in a fresh process (a threadsafe death test), since
// a process loads its runtime once.
#include "platform/rocm/rocm_platform.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/plugin_api.h"
#include "platform/runtime_test_util.h"
#include "platform/stream_release.h"

namespace dsa::platform {
namespace {

using ::testing::HasSubstr;

using ::dsa::testing::EmptyDeviceInfo;

// Absolute paths of the stand-in runtimes, from the command line.
std::map<std::string, std::string>& RuntimePaths() {
  static auto* paths = new std::map<std::string, std::string>{
      {"fake_runtime", ""},             // the full stand-in
      {"fake_runtime_no_malloc", ""}};  // lacks hipMalloc
  return *paths;
}

const DsaPlatformDescriptor& Platform() {
  static const DsaPlatformDescriptor& platform =
      ::dsa::testing::RegisteredPlatform(RocmPlatformPluginApi());
  return platform;
}

// The stand-in's stream hooks, from the copy the plugin loaded (dlopen of an
// open library returns its handle).
int CallHook(const char* name) {
  void* handle =
      dlopen(RuntimePaths()["fake_runtime"].c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    std::abort();
  }
  auto hook = reinterpret_cast<int (*)()>(dlsym(handle, name));
  if (hook == nullptr) {
    std::fprintf(stderr, "fake runtime lacks %s\n", name);
    std::abort();
  }
  const int value = hook();
  dlclose(handle);
  return value;
}

TEST(RocmPlatformTest, ProbesTheRuntimesDevice) {
  DsaDeviceInfo info = EmptyDeviceInfo();
  char error[256] = "";
  ASSERT_EQ(Platform().probe_devices(&info, error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  EXPECT_EQ(info.device_count, 1);
  EXPECT_STREQ(info.name, "Fake AMD Instinct");
  EXPECT_STREQ(info.arch, "gfx942");  // DSA_ROCM_ARCH, set by main
  EXPECT_EQ(info.total_memory_bytes, uint64_t{1} << 30);
  EXPECT_EQ(info.runtime_version, 50203);
}

TEST(RocmPlatformTest, MemoryRoundTrip) {
  const DsaPlatformDescriptor& p = Platform();
  char error[256] = "";
  void* device = nullptr;
  ASSERT_EQ(p.device_malloc(64, &device, error, sizeof(error)), DSA_STATUS_OK)
      << error;
  ASSERT_NE(device, nullptr);
  std::vector<char> in(64), out(64, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 7);
  ASSERT_EQ(p.device_memcpy(device, in.data(), in.size(),
                            DSA_MEMCPY_HOST_TO_DEVICE, error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.device_synchronize(error, sizeof(error)), DSA_STATUS_OK) << error;
  ASSERT_EQ(p.device_memcpy(out.data(), device, out.size(),
                            DSA_MEMCPY_DEVICE_TO_HOST, error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  EXPECT_EQ(in, out);
  EXPECT_EQ(p.device_free(device, error, sizeof(error)), DSA_STATUS_OK)
      << error;
}

// Plugin API 1.2: a non-blocking stream, copies of every kind ordered on
// it, a wait for it, and its destruction.
TEST(RocmPlatformTest, StreamOrderedRoundTrip) {
  const DsaPlatformDescriptor& p = Platform();
  ASSERT_NE(p.stream_create, nullptr);
  ASSERT_NE(p.stream_destroy, nullptr);
  ASSERT_NE(p.memcpy_async, nullptr);
  ASSERT_NE(p.stream_synchronize, nullptr);
  const int live = CallHook("FakeHipLiveStreams");
  char error[256] = "";
  void* stream = nullptr;
  ASSERT_EQ(p.stream_create(&stream, error, sizeof(error)), DSA_STATUS_OK)
      << error;
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(CallHook("FakeHipLastStreamFlags"), 1) << "hipStreamNonBlocking";
  EXPECT_EQ(CallHook("FakeHipLiveStreams"), live + 1);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(p.device_malloc(96, &a, error, sizeof(error)), DSA_STATUS_OK);
  ASSERT_EQ(p.device_malloc(96, &b, error, sizeof(error)), DSA_STATUS_OK);
  std::vector<char> in(96), out(96, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 5 + 3);
  ASSERT_EQ(p.memcpy_async(a, in.data(), in.size(), DSA_MEMCPY_HOST_TO_DEVICE,
                           stream, error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.memcpy_async(b, a, in.size(), DSA_MEMCPY_DEVICE_TO_DEVICE, stream,
                           error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.memcpy_async(out.data(), b, out.size(), DSA_MEMCPY_DEVICE_TO_HOST,
                           stream, error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.stream_synchronize(stream, error, sizeof(error)), DSA_STATUS_OK)
      << error;
  EXPECT_EQ(in, out);
  EXPECT_EQ(p.device_free(a, error, sizeof(error)), DSA_STATUS_OK);
  EXPECT_EQ(p.device_free(b, error, sizeof(error)), DSA_STATUS_OK);
  ASSERT_EQ(p.stream_destroy(stream, error, sizeof(error)), DSA_STATUS_OK)
      << error;
  EXPECT_EQ(CallHook("FakeHipLiveStreams"), live);
}

// What a kernel library keeps per stream is given back when the stream is
// destroyed, while the stream still exists (stream_release.h).
std::vector<std::pair<void*, int>> g_released;  // (stream, live streams)
void RecordRelease(void* stream) {
  g_released.emplace_back(stream, CallHook("FakeHipLiveStreams"));
}

TEST(RocmPlatformTest, StreamDestroyRunsTheReleaseHooksFirst) {
  const DsaPlatformDescriptor& p = Platform();
  ASSERT_TRUE(AddStreamReleaseHook(&RecordRelease));
  const int live = CallHook("FakeHipLiveStreams");
  char error[256] = "";
  void* first = nullptr;
  void* second = nullptr;
  ASSERT_EQ(p.stream_create(&first, error, sizeof(error)), DSA_STATUS_OK);
  ASSERT_EQ(p.stream_create(&second, error, sizeof(error)), DSA_STATUS_OK);
  g_released.clear();
  ASSERT_EQ(p.stream_destroy(second, error, sizeof(error)), DSA_STATUS_OK);
  ASSERT_EQ(p.stream_destroy(first, error, sizeof(error)), DSA_STATUS_OK);
  const std::vector<std::pair<void*, int>> want = {{second, live + 2},
                                                   {first, live + 1}};
  EXPECT_EQ(g_released, want);
  // A NULL handle is refused before any hook runs.
  g_released.clear();
  EXPECT_EQ(p.stream_destroy(nullptr, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(g_released.empty());
}

TEST(RocmPlatformTest, StreamCallsRefuseBadArguments) {
  const DsaPlatformDescriptor& p = Platform();
  char error[256] = "";
  EXPECT_EQ(p.stream_create(nullptr, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("NULL output stream"));
  char a[4], b[4];
  EXPECT_EQ(p.memcpy_async(a, b, sizeof(a), DSA_MEMCPY_HOST_TO_DEVICE, nullptr,
                           error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("NULL stream"));
  void* stream = nullptr;
  ASSERT_EQ(p.stream_create(&stream, error, sizeof(error)), DSA_STATUS_OK);
  EXPECT_EQ(p.memcpy_async(a, b, sizeof(a), 0, stream, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("unknown memcpy kind 0"));
  ASSERT_EQ(p.stream_destroy(stream, error, sizeof(error)), DSA_STATUS_OK);
  // A handle the runtime does not know: its error, with the call named.
  int not_a_stream = 0;
  EXPECT_EQ(p.stream_synchronize(&not_a_stream, error, sizeof(error)),
            DSA_STATUS_INTERNAL);
  EXPECT_THAT(error, HasSubstr("hipStreamSynchronize failed: invalid resource "
                               "handle (hipError_t 400)"));
}

// The stand-in runtime reports half of its 1 GiB device free.
TEST(RocmPlatformTest, BindsOnlyTheDevicesTheRuntimeHas) {
  const DsaPlatformDescriptor& p = Platform();
  char error[256] = "";
  ASSERT_NE(p.device_bind, nullptr);
  EXPECT_EQ(p.device_bind(0, error, sizeof(error)), DSA_STATUS_OK) << error;
  EXPECT_EQ(p.device_bind(1, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("device 1 of 1"));
}

TEST(RocmPlatformTest, CollectivesWithoutRcclSayWhatIsMissing) {
  const DsaPlatformDescriptor& p = Platform();
  setenv("DSA_RCCL_LIBRARY", "/nonexistent/librccl.so.1", 1);
  char error[512] = "";
  const int32_t ordinals[] = {0};
  void* group = nullptr;
  EXPECT_EQ(p.collective_create(1, ordinals, &group, error, sizeof(error)),
            DSA_STATUS_UNAVAILABLE);
  EXPECT_THAT(error, HasSubstr("RCCL is not available"));
  EXPECT_THAT(error, HasSubstr("DSA_RCCL_LIBRARY"));
  EXPECT_EQ(group, nullptr);
}

TEST(RocmPlatformTest, MemoryInfoReportsFreeAndTotal) {
  const DsaPlatformDescriptor& p = Platform();
  ASSERT_NE(p.device_memory_info, nullptr);
  char error[256] = "";
  uint64_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(
      p.device_memory_info(&free_bytes, &total_bytes, error, sizeof(error)),
      DSA_STATUS_OK)
      << error;
  EXPECT_EQ(total_bytes, uint64_t{1} << 30);
  EXPECT_EQ(free_bytes, uint64_t{1} << 29);
  EXPECT_EQ(p.device_memory_info(nullptr, &total_bytes, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
}

TEST(RocmPlatformTest, OutOfMemoryIsResourceExhausted) {
  char error[256] = "";
  void* device = &error;  // must be reset
  EXPECT_EQ(
      Platform().device_malloc(size_t{1} << 40, &device, error, sizeof(error)),
      DSA_STATUS_RESOURCE_EXHAUSTED);
  EXPECT_EQ(device, nullptr);
  EXPECT_THAT(error, HasSubstr("hipMalloc of 1099511627776 bytes"));
  EXPECT_THAT(error, HasSubstr("out of memory"));
}

TEST(RocmPlatformTest, InvalidValueIsInvalidArgument) {
  char error[256] = "";
  char host[8] = {0};
  EXPECT_EQ(
      Platform().device_memcpy(nullptr, host, sizeof(host),
                               DSA_MEMCPY_HOST_TO_DEVICE, error, sizeof(error)),
      DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("hipMemcpy failed: invalid argument"));
}

TEST(RocmPlatformTest, RefusesBadArgumentsBeforeTheRuntime) {
  const DsaPlatformDescriptor& p = Platform();
  char error[256] = "";
  EXPECT_EQ(p.device_malloc(16, nullptr, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("NULL output pointer"));
  char a[4], b[4];
  EXPECT_EQ(p.device_memcpy(a, b, sizeof(a), 7, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("unknown memcpy kind 7"));
  EXPECT_EQ(p.device_free(nullptr, error, sizeof(error)), DSA_STATUS_OK);
  EXPECT_EQ(p.probe_devices(nullptr, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
}

TEST(RocmPlatformTest, CapabilityRows) {
  const DsaPlatformDescriptor& p = Platform();
  char error[256] = "";
  DsaCapabilities caps;
  for (const char* arch : {"gfx90a", "gfx940", "gfx942", "gfx950"}) {
    SCOPED_TRACE(arch);
    std::memset(&caps, 0, sizeof(caps));
    caps.struct_size = sizeof(caps);
    ASSERT_EQ(p.capabilities_for_arch(arch, &caps, error, sizeof(error)),
              DSA_STATUS_OK)
        << error;
    EXPECT_STREQ(caps.arch, arch);
    EXPECT_EQ(caps.is_cuda_alike, 1);
    EXPECT_EQ(caps.warp_size, 64);
    EXPECT_EQ(caps.sparse_mla_dense_mha_prefill, 1);
    EXPECT_EQ(caps.sparse_mla_decode_context_parallel, 0);
    const bool mi300 = std::strncmp(arch, "gfx94", 5) == 0;
    EXPECT_EQ(caps.kv_cache_fp8_format,
              mi300 ? DSA_FP8_E4M3FNUZ : DSA_FP8_E4M3FN);
  }
  EXPECT_EQ(p.capabilities_for_arch("gfx1100", &caps, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("'gfx1100'"));
}

// In a fresh process: loads `library` as the HIP runtime, probes, allocates,
// and prints the outcomes on one line for the death test's regex.
void LoadProbeAllocateAndExit(const std::string& library) {
  setenv("DSA_HIP_RUNTIME_LIBRARY", library.c_str(), 1);
  DsaDeviceInfo info = EmptyDeviceInfo();
  char probe_error[512] = "";
  const DsaStatusCode probe =
      Platform().probe_devices(&info, probe_error, sizeof(probe_error));
  void* device = nullptr;
  char malloc_error[512] = "";
  const DsaStatusCode alloc =
      Platform().device_malloc(16, &device, malloc_error, sizeof(malloc_error));
  std::fprintf(stderr, "probe=%d devices=%d {%s} malloc=%d {%s}\n", probe,
               info.device_count, probe_error, alloc, malloc_error);
  std::exit(0);
}

TEST(RocmPlatformDeathTest, RuntimeLackingARequiredSymbolIsRefusedAtLoad) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      LoadProbeAllocateAndExit(RuntimePaths()["fake_runtime_no_malloc"]),
      ::testing::ExitedWithCode(0),
      "probe=14 devices=0 \\{rocm: the HIP runtime is not available: "
      "[^}]*libfake_hip_runtime_no_malloc.so lacks required symbol "
      "hipMalloc\\} malloc=14 \\{[^}]*lacks required symbol "
      "hipMalloc\\}");
}

TEST(RocmPlatformDeathTest, MissingRuntimeMeansNoDeviceAndUnavailable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(LoadProbeAllocateAndExit("/nonexistent/libamdhip64.so"),
              ::testing::ExitedWithCode(0),
              "probe=0 devices=0 \\{\\} malloc=14 \\{rocm: the HIP runtime is "
              "not available: /nonexistent/libamdhip64.so: cannot open");
}

TEST(GfxNameFromTargetVersionTest, DecodesKfdVersions) {
  EXPECT_EQ(GfxNameFromTargetVersion(90010), "gfx90a");
  EXPECT_EQ(GfxNameFromTargetVersion(90402), "gfx942");
  EXPECT_EQ(GfxNameFromTargetVersion(90500), "gfx950");
  EXPECT_EQ(GfxNameFromTargetVersion(0), "");
}

}  // namespace
}  // namespace dsa::platform

// --fake_runtime=PATH and --fake_runtime_no_malloc=PATH name the stand-in
// runtimes (Bazel passes them); the full one is the process's HIP runtime.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto& paths = dsa::platform::RuntimePaths();
  if (!dsa::testing::ParsePathFlags(argc, argv, &paths)) return 2;
  setenv("DSA_HIP_RUNTIME_LIBRARY", paths["fake_runtime"].c_str(), 1);
  setenv("DSA_ROCM_ARCH", "gfx942", 1);
  return RUN_ALL_TESTS();
}
