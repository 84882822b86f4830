// DeviceRuntime (registry.h) formats the call it names in an error ("platform
// '...': memcpy of 8 bytes") only when the platform's call failed: a copy, a
// synchronisation, an allocation that succeed allocate nothing on the host.
// Counted by //testing:heap_allocations's operator new over a platform
// descriptor whose calls succeed or fail on demand.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/plugin_api.h"
#include "platform/registry.h"
#include "testing/heap_allocations.h"

namespace dsa::platform {
namespace {

using ::dsa::testing::AllocationsOf;
using ::testing::HasSubstr;

bool g_fail = false;
alignas(16) unsigned char g_device[64];

DsaStatusCode Result(char* error, size_t error_size) {
  if (!g_fail) return DSA_STATUS_OK;
  std::snprintf(error, error_size, "the device said no");
  return DSA_STATUS_INTERNAL;
}
DsaStatusCode Malloc(size_t, void** out, char* error, size_t error_size) {
  *out = g_device;
  return Result(error, error_size);
}
DsaStatusCode Free(void*, char* error, size_t error_size) {
  return Result(error, error_size);
}
DsaStatusCode Memcpy(void* dst, const void* src, size_t bytes, int32_t,
                     char* error, size_t error_size) {
  std::memmove(dst, src, bytes);
  return Result(error, error_size);
}
DsaStatusCode Synchronize(char* error, size_t error_size) {
  return Result(error, error_size);
}
DsaStatusCode MemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes,
                         char* error, size_t error_size) {
  *free_bytes = 1 << 20;
  *total_bytes = 2 << 20;
  return Result(error, error_size);
}

TEST(DeviceRuntimeAllocationsTest, CallsThatSucceedBuildNoMessage) {
  DsaPlatformDescriptor d{};
  d.struct_size = sizeof(d);
  d.device_malloc = Malloc;
  d.device_free = Free;
  d.device_memcpy = Memcpy;
  d.device_synchronize = Synchronize;
  d.device_memory_info = MemoryInfo;
  // Longer than a short string's inline buffer, as the message would be.
  const DeviceRuntime rt(&d, "a-platform-with-a-long-name");
  uint64_t host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  g_fail = false;
  EXPECT_EQ(
      AllocationsOf([&] {
        for (int i = 0; i < 100; ++i) {
          ASSERT_TRUE(rt.CopyHostToDevice(g_device, host, 8).ok());
          ASSERT_TRUE(rt.CopyDeviceToHost(host, g_device, 8).ok());
          ASSERT_TRUE(rt.CopyDeviceToDevice(g_device + 32, g_device, 8).ok());
          ASSERT_TRUE(rt.Synchronize().ok());
          ASSERT_TRUE(rt.Allocate(64).ok());
          ASSERT_TRUE(rt.Free(g_device).ok());
          ASSERT_TRUE(rt.MemoryInfo().ok());
        }
      }),
      0);
  g_fail = true;
  EXPECT_THAT(std::string(rt.CopyHostToDevice(g_device, host, 8).message()),
              HasSubstr("platform 'a-platform-with-a-long-name': memcpy of 8 "
                        "bytes: the device said no"));
  EXPECT_THAT(std::string(rt.Synchronize().message()),
              HasSubstr("': synchronize: the device said no"));
  EXPECT_THAT(std::string(rt.Allocate(64).status().message()),
              HasSubstr("': allocating 64 bytes: the device said no"));
  EXPECT_THAT(std::string(rt.Free(g_device).message()),
              HasSubstr("': free: the device said no"));
  EXPECT_THAT(std::string(rt.MemoryInfo().status().message()),
              HasSubstr("': memory info: the device said no"));
  g_fail = false;
}

}  // namespace
}  // namespace dsa::platform
