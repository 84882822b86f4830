// The GPU kernels' runtime calls as fault sites (launch_util.h): each call of
// runtime.h made to fail in turn returns the runtime's own error of that kind
// (out of memory as kOutOfMemory), names the call, and leaves the next call
// working; the scratch arenas' growth is one such call. Needs a device (tag
// gpu); skipped without one.
#include <cstring>
#include <string>
#include <vector>

#include "attention/gpu/device/features.h"
#include "attention/gpu/device/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/cuda/cuda_platform.h"
#include "platform/fault_injection.h"
#include "platform/rocm/rocm_platform.h"
#include "platform/runtime_test_util.h"

namespace dsa::attention::gpu {
namespace {

using platform::FaultInjector;
using platform::FaultPlan;
using platform::FaultSite;
using ::testing::HasSubstr;

class RuntimeFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const LaunchResult r = DeviceMalloc(&device_, kBytes);
    if (r.code == LaunchCode::kNotBuilt || r.code == LaunchCode::kNoDevice) {
      GTEST_SKIP() << r.message;
    }
    ASSERT_TRUE(r.ok()) << r.message;
  }
  void TearDown() override {
    if (device_ != nullptr) (void)DeviceFree(device_);
  }

  static constexpr size_t kBytes = 4096;
  void* device_ = nullptr;
};

// A copy in and out, a synchronisation, a copy back on the default stream:
// one call of each kind after the allocation.
LaunchResult Round(void* device, size_t bytes) {
  std::vector<unsigned char> in(bytes, 7), out(bytes, 0);
  LaunchResult r = CopyToDevice(device, in.data(), bytes);
  if (r.ok()) r = DeviceSynchronize();
  if (r.ok()) r = CopyToHost(out.data(), device, bytes);
  if (r.ok()) r = CopyToHostOnStream(out.data(), device, bytes, nullptr);
  if (r.ok() && in != out) r.code = LaunchCode::kRuntimeError;
  return r;
}

TEST_F(RuntimeFaultsTest, EachCallFailsInTurnWithTheRuntimesError) {
  struct Expected {
    FaultSite site;
    LaunchCode code;
    const char* call;
  };
  const Expected expected[] = {
      {FaultSite::kDeviceMemcpy, LaunchCode::kRuntimeError,
       "hipMemcpy to device"},
      {FaultSite::kDeviceSynchronize, LaunchCode::kRuntimeError,
       "hipDeviceSynchronize"},
      {FaultSite::kDeviceMemcpy, LaunchCode::kRuntimeError,
       "hipMemcpy to host"},
      {FaultSite::kStreamCopy, LaunchCode::kRuntimeError, "copy to host"},
      {FaultSite::kStreamSynchronize, LaunchCode::kRuntimeError,
       "copy to host: synchronize"},
  };
  {
    FaultInjector counting;
    ASSERT_TRUE(Round(device_, kBytes).ok());
    ASSERT_EQ(counting.calls(), 5);
  }
  for (int n = 1; n <= 5; ++n) {
    SCOPED_TRACE(n);
    const Expected& e = expected[n - 1];
    FaultPlan plan;
    plan.fail_at = n;
    FaultInjector injector(plan);
    const LaunchResult r = Round(device_, kBytes);
    EXPECT_EQ(r.code, e.code);
    EXPECT_THAT(r.message, HasSubstr(e.call));
    EXPECT_THAT(r.message,
                HasSubstr(std::string("(injected ") +
                          platform::FaultSiteName(e.site) + " fault)"));
    EXPECT_EQ(injector.first_fault_site(), e.site);
    EXPECT_TRUE(Round(device_, kBytes).ok());  // only the n-th call failed
  }
}

TEST_F(RuntimeFaultsTest, AnAllocationFailsForMemory) {
  FaultPlan plan;
  plan.fail_at = 1;
  FaultInjector injector(plan);
  void* p = nullptr;
  const LaunchResult r = DeviceMalloc(&p, kBytes);
  EXPECT_EQ(r.code, LaunchCode::kOutOfMemory) << r.message;
  EXPECT_THAT(r.message, HasSubstr("hipMalloc: out of memory (2)"));
  EXPECT_EQ(p, nullptr);
  ASSERT_TRUE(DeviceMalloc(&p, kBytes).ok());
  EXPECT_TRUE(DeviceFree(p).ok());
}

LaunchResult Nothing(void*) { return LaunchResult{}; }

// Timing's event calls: create, create, then per iteration record, record,
// synchronise and read the elapsed time.
TEST_F(RuntimeFaultsTest, EveryEventCallIsASite) {
  float ms = 0.0f;
  int64_t calls = 0;
  {
    FaultInjector counting;
    ASSERT_TRUE(TimeMedianMs(&Nothing, nullptr, 0, 2, &ms).ok());
    calls = counting.calls(FaultSite::kEvent);
  }
  ASSERT_EQ(calls, 2 + 2 * 4);
  for (int64_t n = 1; n <= calls; ++n) {
    SCOPED_TRACE(n);
    FaultPlan plan;
    plan.fail_at = n;
    plan.sites = platform::FaultSiteBit(FaultSite::kEvent);
    FaultInjector injector(plan);
    const LaunchResult r = TimeMedianMs(&Nothing, nullptr, 0, 2, &ms);
    EXPECT_EQ(r.code, LaunchCode::kRuntimeError);
    EXPECT_THAT(r.message, HasSubstr("(injected event fault)"));
  }
}

// The scratch arenas on the device: a stream's arena grows to the largest
// call and is reused; a growth that fails (the stream-ordered allocation,
// a fault site) returns out of memory naming the call and leaves the arena
// as it was; the memory is device memory the call can write.
TEST_F(RuntimeFaultsTest, AScratchArenaGrowsOnceAndAFailedGrowthKeepsIt) {
  ReleaseStreamScratch();  // from the stream's earlier users in this process
  constexpr size_t kMiB = size_t{1} << 20;
  int device = -1;
  {
    DeviceFeatures f;
    ASSERT_TRUE(CurrentDeviceFeatures(&f).ok());
    device = f.device;
  }
  ScratchArenas::Lease lease;
  ASSERT_TRUE(
      AcquireStreamScratch(nullptr, device, kMiB, "first call", &lease).ok());
  uint8_t* const first = lease.base();
  std::vector<unsigned char> pattern(kMiB, 0x3c), back(kMiB, 0);
  ASSERT_TRUE(CopyToDevice(first, pattern.data(), kMiB).ok());
  ASSERT_TRUE(CopyToHost(back.data(), first, kMiB).ok());
  EXPECT_EQ(back, pattern);
  lease.Reset();
  ScratchArenaStats s;
  ASSERT_TRUE(StreamScratchStats(nullptr, &s).ok());
  EXPECT_EQ(s.capacity, ScratchArenas::kGranularity);
  EXPECT_EQ(s.grows, 1);
  {
    FaultPlan plan;
    plan.fail_at = 1;
    plan.sites = platform::FaultSiteBit(FaultSite::kStreamAlloc);
    FaultInjector injector(plan);
    const LaunchResult r = AcquireStreamScratch(
        nullptr, device, 64 * kMiB, "dense_mha_prefill scratch", &lease);
    EXPECT_EQ(r.code, LaunchCode::kOutOfMemory) << r.message;
    EXPECT_THAT(r.message, HasSubstr("dense_mha_prefill scratch"));
    EXPECT_THAT(r.message,
                HasSubstr("(injected stream-ordered allocation fault)"));
    EXPECT_EQ(lease.base(), nullptr);
  }
  ASSERT_TRUE(StreamScratchStats(nullptr, &s).ok());
  EXPECT_EQ(s.capacity, ScratchArenas::kGranularity);
  EXPECT_EQ(s.grows, 1);
  // The old block is still the arena's, and still holds what was written.
  ASSERT_TRUE(
      AcquireStreamScratch(nullptr, device, kMiB, "after", &lease).ok());
  EXPECT_EQ(lease.base(), first);
  ASSERT_TRUE(CopyToHost(back.data(), first, kMiB).ok());
  EXPECT_EQ(back, pattern);
  lease.Reset();
  // Grown on the retry, then every call up to that size allocates nothing.
  ASSERT_TRUE(
      AcquireStreamScratch(nullptr, device, 64 * kMiB, "retry", &lease).ok());
  lease.Reset();
  {
    FaultInjector counting;
    for (size_t bytes : {kMiB, 64 * kMiB, 3 * kMiB}) {
      ASSERT_TRUE(
          AcquireStreamScratch(nullptr, device, bytes, "call", &lease).ok());
      lease.Reset();
    }
    EXPECT_EQ(counting.calls(FaultSite::kStreamAlloc), 0);
  }
  ASSERT_TRUE(StreamScratchStats(nullptr, &s).ok());
  EXPECT_EQ(s.capacity, 64 * kMiB);
  EXPECT_EQ(s.grows, 2);
  ASSERT_TRUE(DeviceSynchronize().ok());
  ReleaseStreamScratch();
  ASSERT_TRUE(StreamScratchStats(nullptr, &s).ok());
  EXPECT_EQ(s.capacity, 0u);
}

// A stream of the platform's (stream_create) takes scratch; destroying it
// (stream_destroy) gives its arena back, so a stream made afterwards, which
// the driver may hand the same address, grows an arena of its own with the
// same allocations as the first: what the model's fault sweep counts on.
TEST_F(RuntimeFaultsTest, APlatformStreamsArenaGoesWithTheStream) {
  const DsaPlatformDescriptor& p =
      dsa::testing::RegisteredPlatform(std::strcmp(GpuBackend(), "cuda") == 0
                                           ? platform::CudaPlatformPluginApi()
                                           : platform::RocmPlatformPluginApi());
  ASSERT_NE(p.stream_create, nullptr);
  constexpr size_t kMiB = size_t{1} << 20;
  DeviceFeatures f;
  ASSERT_TRUE(CurrentDeviceFeatures(&f).ok());
  char error[256] = "";
  ScratchArenas::Lease lease;
  ScratchArenaStats s;
  void* previous = nullptr;
  for (int round = 0; round < 3; ++round) {
    void* stream = nullptr;
    ASSERT_EQ(p.stream_create(&stream, error, sizeof(error)), DSA_STATUS_OK)
        << error;
    ASSERT_TRUE(StreamScratchStats(stream, &s).ok());
    EXPECT_EQ(s.capacity, 0u) << "round " << round << ", the same handle as "
                              << "before: " << (stream == previous);
    {
      FaultInjector counting;
      ASSERT_TRUE(
          AcquireStreamScratch(stream, f.device, 3 * kMiB, "call", &lease)
              .ok());
      lease.Reset();
      EXPECT_EQ(counting.calls(FaultSite::kStreamAlloc), 1)
          << "round " << round;
    }
    ASSERT_TRUE(StreamScratchStats(stream, &s).ok());
    EXPECT_EQ(s.capacity, 2 * ScratchArenas::kGranularity);
    EXPECT_EQ(s.grows, 1);
    ASSERT_EQ(p.stream_destroy(stream, error, sizeof(error)), DSA_STATUS_OK)
        << error;
    ASSERT_TRUE(StreamScratchStats(stream, &s).ok());
    EXPECT_EQ(s.capacity, 0u);
    previous = stream;
  }
}

}  // namespace
}  // namespace dsa::attention::gpu
