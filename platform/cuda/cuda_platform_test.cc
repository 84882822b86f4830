// Tests of the CUDA plugin's driver paths against a stand-in driver
// (fake_cuda_driver.cc) loaded through DSA_CUDA_DRIVER_LIBRARY, so they run
// on any machine: the symbol table loads once, the primary context is
// retained once and made current only when it is not, device memory works,
// and driver errors become the right status codes (out of memory is
// RESOURCE_EXHAUSTED, a missing driver UNAVAILABLE). Scenarios that need a
// different driver run in a fresh process (a threadsafe death test), since a
// process loads its driver once.
#include "platform/cuda/cuda_platform.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/plugin_api.h"
#include "platform/runtime_test_util.h"
#include "platform/stream_release.h"

namespace dsa::platform {
namespace {

using ::dsa::testing::EmptyDeviceInfo;
using ::testing::HasSubstr;

// Absolute paths of the stand-in drivers, from the command line.
std::map<std::string, std::string>& DriverPaths() {
  static auto* paths = new std::map<std::string, std::string>{
      {"fake_driver", ""},                      // the full stand-in
      {"fake_driver_no_ctx_get_current", ""}};  // lacks cuCtxGetCurrent
  return *paths;
}

const DsaPlatformDescriptor& Platform() {
  static const DsaPlatformDescriptor& platform =
      ::dsa::testing::RegisteredPlatform(CudaPlatformPluginApi());
  return platform;
}

// The stand-in's test hooks, from the same loaded copy the plugin uses
// (dlopen of an open library returns its handle).
struct FakeDriverHooks {
  int (*retain_calls)() = nullptr;
  int (*set_current_calls)() = nullptr;
  int (*get_current_calls)() = nullptr;
  void (*make_foreign_context_current)() = nullptr;
  void* (*current_context)() = nullptr;
  void* (*primary_context)() = nullptr;
  int (*live_streams)() = nullptr;
  int (*last_stream_flags)() = nullptr;
  int (*registered_ranges)() = nullptr;
};

const FakeDriverHooks& Hooks() {
  static const FakeDriverHooks hooks = [] {
    FakeDriverHooks h;
    void* handle =
        dlopen(DriverPaths()["fake_driver"].c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(stderr, "%s\n", dlerror());
      std::abort();
    }
    auto bind = [handle](const char* name, auto** slot) {
      *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(
          dlsym(handle, name));
      if (*slot == nullptr) {
        std::fprintf(stderr, "fake driver lacks %s\n", name);
        std::abort();
      }
    };
    bind("FakeCudaPrimaryCtxRetainCalls", &h.retain_calls);
    bind("FakeCudaCtxSetCurrentCalls", &h.set_current_calls);
    bind("FakeCudaCtxGetCurrentCalls", &h.get_current_calls);
    bind("FakeCudaMakeForeignContextCurrent", &h.make_foreign_context_current);
    bind("FakeCudaCurrentContext", &h.current_context);
    bind("FakeCudaPrimaryContext", &h.primary_context);
    bind("FakeCudaLiveStreams", &h.live_streams);
    bind("FakeCudaLastStreamFlags", &h.last_stream_flags);
    bind("FakeCudaRegisteredRanges", &h.registered_ranges);
    return h;
  }();
  return hooks;
}

TEST(CudaPlatformTest, ProbesTheDriversDevice) {
  DsaDeviceInfo info = EmptyDeviceInfo();
  char error[256] = "";
  ASSERT_EQ(Platform().probe_devices(&info, error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  EXPECT_EQ(info.device_count, 1);
  EXPECT_STREQ(info.name, "Fake NVIDIA H200");
  EXPECT_STREQ(info.arch, "sm_90");
  EXPECT_EQ(info.total_memory_bytes, uint64_t{1} << 30);
  EXPECT_EQ(info.runtime_version, 13000);
}

TEST(CudaPlatformTest, MemoryRoundTrip) {
  const DsaPlatformDescriptor& p = Platform();
  char error[256] = "";
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(p.device_malloc(64, &a, error, sizeof(error)), DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.device_malloc(64, &b, error, sizeof(error)), DSA_STATUS_OK)
      << error;
  std::vector<char> in(64), out(64, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 5);
  ASSERT_EQ(p.device_memcpy(a, in.data(), in.size(), DSA_MEMCPY_HOST_TO_DEVICE,
                            error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.device_memcpy(b, a, in.size(), DSA_MEMCPY_DEVICE_TO_DEVICE, error,
                            sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.device_memcpy(out.data(), b, out.size(),
                            DSA_MEMCPY_DEVICE_TO_HOST, error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.device_synchronize(error, sizeof(error)), DSA_STATUS_OK) << error;
  EXPECT_EQ(in, out);
  EXPECT_EQ(p.device_free(a, error, sizeof(error)), DSA_STATUS_OK) << error;
  EXPECT_EQ(p.device_free(b, error, sizeof(error)), DSA_STATUS_OK) << error;
}

// Plugin API 1.2: a non-blocking stream, copies of every kind ordered on
// it, a wait for it, and its destruction.
TEST(CudaPlatformTest, StreamOrderedRoundTrip) {
  const DsaPlatformDescriptor& p = Platform();
  ASSERT_NE(p.stream_create, nullptr);
  ASSERT_NE(p.stream_destroy, nullptr);
  ASSERT_NE(p.memcpy_async, nullptr);
  ASSERT_NE(p.stream_synchronize, nullptr);
  const FakeDriverHooks& hooks = Hooks();
  const int live = hooks.live_streams();
  char error[256] = "";
  void* stream = nullptr;
  ASSERT_EQ(p.stream_create(&stream, error, sizeof(error)), DSA_STATUS_OK)
      << error;
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(hooks.last_stream_flags(), 1) << "CU_STREAM_NON_BLOCKING";
  EXPECT_EQ(hooks.live_streams(), live + 1);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(p.device_malloc(96, &a, error, sizeof(error)), DSA_STATUS_OK);
  ASSERT_EQ(p.device_malloc(96, &b, error, sizeof(error)), DSA_STATUS_OK);
  std::vector<char> in(96), out(96, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 7 + 1);
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
  EXPECT_EQ(hooks.live_streams(), live);
}

// Page-locked host memory: registered through the driver, copied from and
// into on a stream, unregistered; a range overlapping a registered one and
// an unregistered pointer are refused with the driver's reason.
TEST(CudaPlatformTest, PageLocksHostMemoryForStreamCopies) {
  const DsaPlatformDescriptor& p = Platform();
  ASSERT_NE(p.host_register, nullptr);
  ASSERT_NE(p.host_unregister, nullptr);
  const FakeDriverHooks& hooks = Hooks();
  const int ranges = hooks.registered_ranges();
  char error[256] = "";
  std::vector<char> in(4096), out(4096, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 5 + 3);
  ASSERT_EQ(p.host_register(in.data(), in.size(), error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.host_register(out.data(), out.size(), error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  EXPECT_EQ(hooks.registered_ranges(), ranges + 2);
  // Half of `in` again: refused, naming the call and the driver's reason.
  EXPECT_NE(p.host_register(in.data() + 100, 64, error, sizeof(error)),
            DSA_STATUS_OK);
  EXPECT_THAT(error, HasSubstr("cuMemHostRegister"));
  EXPECT_THAT(error, HasSubstr("already mapped"));
  void* stream = nullptr;
  void* d = nullptr;
  ASSERT_EQ(p.stream_create(&stream, error, sizeof(error)), DSA_STATUS_OK);
  ASSERT_EQ(p.device_malloc(in.size(), &d, error, sizeof(error)),
            DSA_STATUS_OK);
  ASSERT_EQ(p.memcpy_async(d, in.data(), in.size(), DSA_MEMCPY_HOST_TO_DEVICE,
                           stream, error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.memcpy_async(out.data(), d, out.size(), DSA_MEMCPY_DEVICE_TO_HOST,
                           stream, error, sizeof(error)),
            DSA_STATUS_OK)
      << error;
  ASSERT_EQ(p.stream_synchronize(stream, error, sizeof(error)), DSA_STATUS_OK);
  EXPECT_EQ(in, out);
  EXPECT_EQ(p.host_unregister(in.data(), error, sizeof(error)), DSA_STATUS_OK)
      << error;
  EXPECT_EQ(p.host_unregister(out.data(), error, sizeof(error)), DSA_STATUS_OK)
      << error;
  EXPECT_EQ(hooks.registered_ranges(), ranges);
  EXPECT_NE(p.host_unregister(in.data(), error, sizeof(error)), DSA_STATUS_OK);
  EXPECT_THAT(error, HasSubstr("cuMemHostUnregister"));
  EXPECT_EQ(p.host_register(nullptr, 16, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(p.host_register(in.data(), 0, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(p.host_unregister(nullptr, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(p.device_free(d, error, sizeof(error)), DSA_STATUS_OK);
  EXPECT_EQ(p.stream_destroy(stream, error, sizeof(error)), DSA_STATUS_OK);
}

// What a kernel library keeps per stream is given back when the stream is
// destroyed, while the stream still exists (stream_release.h).
std::vector<std::pair<void*, int>> g_released;  // (stream, live streams)
void RecordRelease(void* stream) {
  g_released.emplace_back(stream, Hooks().live_streams());
}

TEST(CudaPlatformTest, StreamDestroyRunsTheReleaseHooksFirst) {
  const DsaPlatformDescriptor& p = Platform();
  ASSERT_TRUE(AddStreamReleaseHook(&RecordRelease));
  const int live = Hooks().live_streams();
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

TEST(CudaPlatformTest, StreamCallsRefuseBadArguments) {
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
  EXPECT_EQ(p.memcpy_async(a, b, sizeof(a), 9, stream, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("unknown memcpy kind 9"));
  ASSERT_EQ(p.stream_destroy(stream, error, sizeof(error)), DSA_STATUS_OK);
  // A handle the driver does not know: its error, with the call named.
  int not_a_stream = 0;
  EXPECT_EQ(p.stream_synchronize(&not_a_stream, error, sizeof(error)),
            DSA_STATUS_INTERNAL);
  EXPECT_THAT(error, HasSubstr("cuStreamSynchronize failed: invalid resource "
                               "handle (CUresult 400)"));
}

TEST(CudaPlatformTest, BindsOnlyTheDevicesTheDriverHas) {
  const DsaPlatformDescriptor& p = Platform();
  char error[256] = "";
  ASSERT_NE(p.device_bind, nullptr);
  EXPECT_EQ(p.device_bind(0, error, sizeof(error)), DSA_STATUS_OK) << error;
  EXPECT_EQ(p.device_bind(1, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("device 1 of 1"));
  EXPECT_EQ(p.device_bind(-1, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  // A thread binds for itself: another one still uses device 0.
  std::thread other([&] {
    char e[256] = "";
    void* ptr = nullptr;
    EXPECT_EQ(p.device_malloc(16, &ptr, e, sizeof(e)), DSA_STATUS_OK) << e;
    EXPECT_EQ(p.device_free(ptr, e, sizeof(e)), DSA_STATUS_OK);
  });
  other.join();
}

TEST(CudaPlatformTest, CollectivesWithoutNcclSayWhatIsMissing) {
  const DsaPlatformDescriptor& p = Platform();
  setenv("DSA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  char error[512] = "";
  const int32_t ordinals[] = {0};
  void* group = nullptr;
  const DsaStatusCode code =
      p.collective_create(1, ordinals, &group, error, sizeof(error));
  if (code == DSA_STATUS_OK) {
    // This machine has an NCCL on the loader's path.
    EXPECT_EQ(p.collective_destroy(group, error, sizeof(error)), DSA_STATUS_OK);
    GTEST_SKIP() << "an NCCL library is installed";
  }
  EXPECT_EQ(code, DSA_STATUS_UNAVAILABLE);
  EXPECT_THAT(error, HasSubstr("NCCL is not available"));
  EXPECT_THAT(error, HasSubstr("DSA_NCCL_LIBRARY"));
  EXPECT_EQ(group, nullptr);
  EXPECT_EQ(p.collective_create(0, ordinals, &group, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(p.all_reduce_sum(nullptr, 0, nullptr, 0, DSA_COLLECTIVE_FLOAT32,
                             nullptr, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
}

TEST(CudaPlatformTest, ContextIsSetOnlyWhenAnotherIsCurrent) {
  const DsaPlatformDescriptor& p = Platform();
  const FakeDriverHooks& hooks = Hooks();
  char error[256] = "";
  ASSERT_EQ(p.device_synchronize(error, sizeof(error)), DSA_STATUS_OK) << error;
  ASSERT_EQ(hooks.current_context(), hooks.primary_context());

  // Already current: checked, not set again.
  const int sets = hooks.set_current_calls();
  const int gets = hooks.get_current_calls();
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(p.device_synchronize(error, sizeof(error)), DSA_STATUS_OK)
        << error;
  }
  EXPECT_EQ(hooks.set_current_calls(), sets);
  EXPECT_EQ(hooks.get_current_calls(), gets + 5);

  // Another library made its context current: the plugin switches back once.
  hooks.make_foreign_context_current();
  ASSERT_EQ(p.device_synchronize(error, sizeof(error)), DSA_STATUS_OK) << error;
  ASSERT_EQ(p.device_synchronize(error, sizeof(error)), DSA_STATUS_OK) << error;
  EXPECT_EQ(hooks.set_current_calls(), sets + 1);
  EXPECT_EQ(hooks.current_context(), hooks.primary_context());

  // A new thread starts with no current context.
  DsaStatusCode thread_code = DSA_STATUS_UNKNOWN;
  std::thread([&] {
    char thread_error[256] = "";
    thread_code = p.device_synchronize(thread_error, sizeof(thread_error));
  }).join();
  EXPECT_EQ(thread_code, DSA_STATUS_OK);
  EXPECT_EQ(hooks.set_current_calls(), sets + 2);

  // However many calls and threads, the primary context is retained once.
  EXPECT_EQ(hooks.retain_calls(), 1);
}

// The stand-in runtime reports half of its 1 GiB device free.
TEST(CudaPlatformTest, MemoryInfoReportsFreeAndTotal) {
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

TEST(CudaPlatformTest, OutOfMemoryIsResourceExhausted) {
  char error[256] = "";
  void* device = &error;  // must be reset
  EXPECT_EQ(
      Platform().device_malloc(size_t{1} << 40, &device, error, sizeof(error)),
      DSA_STATUS_RESOURCE_EXHAUSTED);
  EXPECT_EQ(device, nullptr);
  EXPECT_THAT(error, HasSubstr("cuMemAlloc of 1099511627776 bytes"));
  EXPECT_THAT(error, HasSubstr("out of memory"));
}

TEST(CudaPlatformTest, InvalidValueIsInvalidArgument) {
  char error[256] = "";
  char host[8] = {0};
  EXPECT_EQ(
      Platform().device_memcpy(nullptr, host, sizeof(host),
                               DSA_MEMCPY_HOST_TO_DEVICE, error, sizeof(error)),
      DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("cuMemcpyHtoD failed: invalid argument"));
}

TEST(CudaPlatformTest, RefusesBadArgumentsBeforeTheDriver) {
  const DsaPlatformDescriptor& p = Platform();
  char error[256] = "";
  EXPECT_EQ(p.device_malloc(16, nullptr, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("NULL output pointer"));
  char a[4], b[4];
  EXPECT_EQ(p.device_memcpy(a, b, sizeof(a), 0, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("unknown memcpy kind 0"));
  EXPECT_EQ(p.device_free(nullptr, error, sizeof(error)), DSA_STATUS_OK);
}

TEST(CudaPlatformTest, CapabilityRows) {
  const DsaPlatformDescriptor& p = Platform();
  char error[256] = "";
  DsaCapabilities caps;
  for (const char* arch : {"sm_90", "sm_100"}) {
    SCOPED_TRACE(arch);
    std::memset(&caps, 0, sizeof(caps));
    caps.struct_size = sizeof(caps);
    ASSERT_EQ(p.capabilities_for_arch(arch, &caps, error, sizeof(error)),
              DSA_STATUS_OK)
        << error;
    EXPECT_STREQ(caps.arch, arch);
    EXPECT_EQ(caps.is_cuda_alike, 1);
    EXPECT_EQ(caps.kv_cache_fp8_format, DSA_FP8_E4M3FN);
    EXPECT_EQ(caps.warp_size, 32);
    EXPECT_EQ(caps.sparse_mla_dense_mha_prefill, 1);
    EXPECT_EQ(caps.sparse_mla_decode_context_parallel, 1);
  }
  EXPECT_EQ(p.capabilities_for_arch("sm_80", &caps, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("'sm_80'"));
}

// In a fresh process: loads `library` as the driver, probes, allocates, and
// prints the outcomes on one line for the death test's regex.
void LoadProbeAllocateAndExit(const std::string& library) {
  setenv("DSA_CUDA_DRIVER_LIBRARY", library.c_str(), 1);
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

TEST(CudaPlatformDeathTest, DriverLackingARequiredSymbolIsRefusedAtLoad) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      LoadProbeAllocateAndExit(DriverPaths()["fake_driver_no_ctx_get_current"]),
      ::testing::ExitedWithCode(0),
      "probe=14 devices=0 \\{cuda: the CUDA driver is not usable: "
      "[^}]*libfake_cuda_driver_no_ctx_get_current.so lacks required symbol "
      "cuCtxGetCurrent\\} malloc=14 \\{[^}]*lacks required symbol "
      "cuCtxGetCurrent\\}");
}

TEST(CudaPlatformDeathTest, MissingDriverMeansNoDeviceAndUnavailable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(LoadProbeAllocateAndExit("/nonexistent/libcuda.so.1"),
              ::testing::ExitedWithCode(0),
              "probe=0 devices=0 \\{\\} malloc=14 \\{cuda: the CUDA driver "
              "is not available: /nonexistent/libcuda.so.1: cannot open");
}

}  // namespace
}  // namespace dsa::platform

// --fake_driver=PATH and --fake_driver_no_ctx_get_current=PATH name the
// stand-in drivers (Bazel passes them); the full one is the process's driver.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto& paths = dsa::platform::DriverPaths();
  if (!dsa::testing::ParsePathFlags(argc, argv, &paths)) return 2;
  setenv("DSA_CUDA_DRIVER_LIBRARY", paths["fake_driver"].c_str(), 1);
  return RUN_ALL_TESTS();
}
