// DeviceStream on the CPU platform's runtime: with plugin API 1.2's streams
// every copy and wait goes through the stream calls; on a descriptor of
// plugin API 1.1 (no streams) the same calls fall back to the synchronous
// copies and the device-wide wait. The fault sites tell which calls ran.
#include "platform/device_stream.h"

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/cpu/cpu_platform.h"
#include "platform/device_buffer.h"
#include "platform/fault_injection.h"
#include "platform/registry.h"
#include "platform/runtime_test_util.h"
#include "testing/status_matchers.h"

namespace dsa::platform {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

// The CPU platform registered under `id`, its descriptor cut to
// `struct_size` bytes (an older plugin's).
Platform CpuPlatform(Registry& registry, const char* id, size_t struct_size) {
  DsaPlatformDescriptor d =
      ::dsa::testing::RegisteredPlatform(CpuPlatformPluginApi());
  d.platform_id = id;
  d.struct_size = struct_size;
  RegistrationBatch batch;
  batch.plugin_name = id;
  batch.platforms = {d};
  EXPECT_OK(registry.Register(batch));
  absl::StatusOr<Platform> p = registry.GetPlatform(id);
  EXPECT_OK(p.status());
  return *p;
}

// Host -> device -> device -> host through `stream`, random bytes.
void RoundTrip(const DeviceStream& stream, const DeviceRuntime& runtime,
               size_t n) {
  std::mt19937 rng(static_cast<uint32_t>(n));
  std::vector<uint8_t> in(n), out(n, 0xAA);
  for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
  ASSERT_OK_AND_ASSIGN(DeviceBuffer a, DeviceBuffer::Allocate(runtime, n));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer b, DeviceBuffer::Allocate(runtime, n));
  ASSERT_OK(stream.CopyHostToDevice(a.data(), in.data(), n));
  ASSERT_OK(stream.CopyDeviceToDevice(b.data(), a.data(), n));
  ASSERT_OK(stream.CopyDeviceToHost(out.data(), b.data(), n));
  ASSERT_OK(stream.Synchronize());
  EXPECT_EQ(out, in);
}

TEST(DeviceStreamTest, AStreamOrdersEveryCopyAndWait) {
  Registry registry;
  const Platform p =
      CpuPlatform(registry, "cpu", sizeof(DsaPlatformDescriptor));
  const DeviceRuntime rt = p.runtime();
  ASSERT_TRUE(rt.has_streams());
  FaultInjector counting;
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(rt));
  EXPECT_TRUE(stream.ordered());
  EXPECT_NE(stream.handle(), nullptr);
  for (size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{4097}}) {
    SCOPED_TRACE(n);
    RoundTrip(stream, rt, n);
  }
  EXPECT_EQ(counting.calls(FaultSite::kStreamCreate), 1);
  EXPECT_EQ(counting.calls(FaultSite::kStreamCopy), 12);
  EXPECT_EQ(counting.calls(FaultSite::kStreamSynchronize), 4);
  EXPECT_EQ(counting.calls(FaultSite::kDeviceMemcpy), 0);
  EXPECT_EQ(counting.calls(FaultSite::kDeviceSynchronize), 0);
  // Moved: the new owner destroys it (once: the CPU platform's stream is a
  // heap object, a second destroy is a double free in the sanitizer build).
  DeviceStream moved = std::move(stream);
  EXPECT_EQ(stream.handle(), nullptr);
  EXPECT_NE(moved.handle(), nullptr);
  RoundTrip(moved, rt, 16);
}

TEST(DeviceStreamTest, APlugin11PlatformFallsBackToSynchronousCalls) {
  Registry registry;
  const Platform p =
      CpuPlatform(registry, "cpu_11",
                  offsetof(DsaPlatformDescriptor, device_memory_info) +
                      sizeof(DsaPlatformDescriptor::device_memory_info));
  const DeviceRuntime rt = p.runtime();
  EXPECT_FALSE(rt.has_streams());
  EXPECT_THAT(rt.CreateStream(), StatusIs(absl::StatusCode::kUnimplemented,
                                          HasSubstr("has no streams")));
  EXPECT_THAT(rt.SynchronizeStream(nullptr),
              StatusIs(absl::StatusCode::kUnimplemented));
  FaultInjector counting;
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(rt));
  EXPECT_FALSE(stream.ordered());
  EXPECT_EQ(stream.handle(), nullptr);  // kernels take the default stream
  RoundTrip(stream, rt, 100);
  EXPECT_EQ(counting.calls(FaultSite::kStreamCreate), 0);
  EXPECT_EQ(counting.calls(FaultSite::kStreamCopy), 0);
  EXPECT_EQ(counting.calls(FaultSite::kDeviceMemcpy), 3);
  EXPECT_EQ(counting.calls(FaultSite::kDeviceSynchronize), 1);
}

TEST(DeviceStreamTest, NoStreamYetIsAClearError) {
  DeviceStream none;
  char byte = 0;
  EXPECT_THAT(none.CopyHostToDevice(&byte, &byte, 1),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no device stream")));
  EXPECT_THAT(none.Synchronize(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Each stream call fails with its kind's error, naming the platform and the
// call; a copy of nothing calls nothing.
TEST(DeviceStreamTest, StreamCallsAreFaultSites) {
  Registry registry;
  const Platform p =
      CpuPlatform(registry, "cpu", sizeof(DsaPlatformDescriptor));
  const DeviceRuntime rt = p.runtime();
  {
    FaultPlan plan;
    plan.fail_at = 1;
    FaultInjector injector(plan);
    EXPECT_THAT(DeviceStream::Create(rt).status(),
                StatusIs(absl::StatusCode::kResourceExhausted,
                         HasSubstr("platform 'cpu': creating a stream: stream "
                                   "create: out of memory (injected fault)")));
  }
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(rt));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer a, DeviceBuffer::Allocate(rt, 8));
  const char host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  FaultPlan plan;
  plan.fail_at = 2;
  FaultInjector injector(plan);
  EXPECT_OK(stream.CopyHostToDevice(a.data(), host, 0));  // nothing to do
  EXPECT_OK(stream.CopyHostToDevice(a.data(), host, 8));  // call 1
  EXPECT_THAT(stream.CopyHostToDevice(a.data(), host, 8),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("platform 'cpu': memcpy of 8 bytes on a "
                                 "stream: stream copy: an illegal memory "
                                 "access was encountered (injected fault)")));
  EXPECT_EQ(injector.calls(FaultSite::kStreamCopy), 2);
  EXPECT_EQ(injector.faults(), 1);
}

TEST(DeviceStreamTest, TheStreamSynchronizeFaultSite) {
  Registry registry;
  const Platform p =
      CpuPlatform(registry, "cpu", sizeof(DsaPlatformDescriptor));
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(p.runtime()));
  FaultPlan plan;
  plan.fail_at = 1;
  plan.sites = FaultSiteBit(FaultSite::kStreamSynchronize);
  FaultInjector injector(plan);
  EXPECT_THAT(stream.Synchronize(),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("platform 'cpu': stream synchronize: stream "
                                 "synchronize: unspecified launch failure "
                                 "(injected fault)")));
  EXPECT_OK(stream.Synchronize());
}

// The CPU platform's checks of its own handles.
TEST(DeviceStreamTest, TheCpuPlatformRefusesForeignHandles) {
  const DsaPlatformDescriptor& d =
      ::dsa::testing::RegisteredPlatform(CpuPlatformPluginApi());
  char error[256] = "";
  uint64_t not_a_stream = 0;
  EXPECT_EQ(d.stream_synchronize(&not_a_stream, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("not a stream of this platform"));
  EXPECT_EQ(d.stream_synchronize(nullptr, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  char a = 0, b = 1;
  EXPECT_EQ(d.memcpy_async(&a, &b, 1, DSA_MEMCPY_HOST_TO_DEVICE, &not_a_stream,
                           error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(d.stream_destroy(&not_a_stream, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(d.stream_create(nullptr, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  void* stream = nullptr;
  ASSERT_EQ(d.stream_create(&stream, error, sizeof(error)), DSA_STATUS_OK);
  EXPECT_EQ(d.memcpy_async(&a, &b, 1, 0, stream, error, sizeof(error)),
            DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("unknown memcpy kind 0"));
  ASSERT_EQ(d.memcpy_async(&a, &b, 1, DSA_MEMCPY_HOST_TO_DEVICE, stream, error,
                           sizeof(error)),
            DSA_STATUS_OK);
  EXPECT_EQ(a, 1);
  EXPECT_EQ(d.stream_destroy(stream, error, sizeof(error)), DSA_STATUS_OK);
}

}  // namespace
}  // namespace dsa::platform
