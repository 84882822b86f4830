// The fault-injection seam on the CPU platform's device runtime: off, it
// counts and changes nothing; a plan fails exactly its call (or every call
// from it on), with the error a failing call of that kind returns, at the
// sites it names.
#include "platform/fault_injection.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/cpu/cpu_platform.h"
#include "platform/device_buffer.h"
#include "platform/registry.h"
#include "platform/status_macros.h"
#include "testing/status_matchers.h"

namespace dsa::platform {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class FaultInjectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(registry_.RegisterPlugin(CpuPlatformPluginApi()));
    absl::StatusOr<Platform> cpu = registry_.GetPlatform("cpu");
    ASSERT_OK(cpu.status());
    runtime_.emplace(cpu->runtime());
  }

  // Allocates, copies in and out, synchronises and asks for the memory:
  // one call of each site of the device runtime, in this order.
  absl::Status Round() {
    const std::vector<char> in(64, 3);
    std::vector<char> out(64, 0);
    DSA_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(*runtime_, 64));
    DSA_RETURN_IF_ERROR(b.CopyFromHost(in.data(), in.size()));
    DSA_RETURN_IF_ERROR(runtime_->Synchronize());
    DSA_RETURN_IF_ERROR(b.CopyToHost(out.data(), out.size()));
    DSA_RETURN_IF_ERROR(runtime_->MemoryInfo().status());
    if (in != out) return absl::DataLossError("the round trip changed bytes");
    return absl::OkStatus();
  }

  Registry registry_;
  std::optional<DeviceRuntime> runtime_;
};

TEST_F(FaultInjectionTest, OffCountsAndChangesNothing) {
  EXPECT_FALSE(FaultInjected(FaultSite::kDeviceMalloc));
  EXPECT_OK(Round());
  FaultInjector counting;  // fail_at 0: counts only
  ASSERT_TRUE(counting.active());
  EXPECT_OK(Round());
  EXPECT_EQ(counting.calls(), 5);
  EXPECT_EQ(counting.calls(FaultSite::kDeviceMalloc), 1);
  EXPECT_EQ(counting.calls(FaultSite::kDeviceMemcpy), 2);
  EXPECT_EQ(counting.calls(FaultSite::kDeviceSynchronize), 1);
  EXPECT_EQ(counting.calls(FaultSite::kDeviceMemoryInfo), 1);
  EXPECT_EQ(counting.calls(FaultSite::kOpCall), 0);
  EXPECT_EQ(counting.faults(), 0);
}

// Each call of a round fails in turn with its own kind's error, the calls
// before it succeed, and the next round succeeds again.
TEST_F(FaultInjectionTest, TheNthCallFailsWithItsKindsError) {
  struct Expected {
    FaultSite site;
    absl::StatusCode code;
    const char* where;
  };
  const Expected expected[] = {
      {FaultSite::kDeviceMalloc, absl::StatusCode::kResourceExhausted,
       "platform 'cpu': allocating 64 bytes: device_malloc: out of memory"},
      {FaultSite::kDeviceMemcpy, absl::StatusCode::kInternal,
       "platform 'cpu': memcpy of 64 bytes: device_memcpy: "},
      {FaultSite::kDeviceSynchronize, absl::StatusCode::kInternal,
       "platform 'cpu': synchronize: device_synchronize: "},
      {FaultSite::kDeviceMemcpy, absl::StatusCode::kInternal,
       "platform 'cpu': memcpy of 64 bytes: device_memcpy: "},
      {FaultSite::kDeviceMemoryInfo, absl::StatusCode::kInternal,
       "platform 'cpu': memory info: device_memory_info: "},
  };
  for (int n = 1; n <= 5; ++n) {
    SCOPED_TRACE(n);
    const Expected& e = expected[n - 1];
    FaultPlan plan;
    plan.fail_at = n;
    {
      FaultInjector injector(plan);
      EXPECT_THAT(Round(), StatusIs(e.code, AllOf(HasSubstr(e.where),
                                                  HasSubstr("injected"))));
      EXPECT_EQ(injector.calls(), n);  // the round stopped at the fault
      EXPECT_EQ(injector.faults(), 1);
      EXPECT_EQ(injector.first_fault_site(), e.site);
      EXPECT_OK(Round());  // one call only
      EXPECT_EQ(injector.faults(), 1);
    }
    EXPECT_OK(Round());
  }
}

TEST_F(FaultInjectionTest, PersistentFaultsFailEveryLaterCall) {
  FaultPlan plan;
  plan.fail_at = 2;
  plan.persistent = true;
  FaultInjector injector(plan);
  EXPECT_THAT(Round(), StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(Round(), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(injector.faults(), 2);
  EXPECT_EQ(injector.first_fault_site(), FaultSite::kDeviceMemcpy);
}

// A plan over allocations alone: copies pass uncounted, and every
// allocation fails from the first on.
TEST_F(FaultInjectionTest, APlanCountsAndFailsOnlyItsSites) {
  FaultPlan plan;
  plan.fail_at = 1;
  plan.persistent = true;
  plan.sites = FaultSiteBit(FaultSite::kDeviceMalloc);
  FaultInjector injector(plan);
  EXPECT_OK(runtime_->Synchronize());
  EXPECT_OK(runtime_->MemoryInfo().status());
  EXPECT_EQ(injector.calls(), 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(runtime_->Allocate(16),
                StatusIs(absl::StatusCode::kResourceExhausted,
                         HasSubstr("device_malloc: out of memory")));
  }
  EXPECT_EQ(injector.calls(), 3);
  EXPECT_EQ(injector.calls(FaultSite::kDeviceMalloc), 3);
  EXPECT_EQ(injector.calls(FaultSite::kDeviceSynchronize), 0);
}

TEST_F(FaultInjectionTest, OneInjectorAtATime) {
  FaultPlan fail_first;
  fail_first.fail_at = 1;
  FaultInjector first;
  {
    FaultInjector second(fail_first);
    EXPECT_FALSE(second.active());
    EXPECT_OK(runtime_->Synchronize());  // the first's plan: count only
    EXPECT_EQ(second.calls(), 0);
  }
  EXPECT_TRUE(first.active());
  EXPECT_EQ(first.calls(), 1);
  EXPECT_OK(runtime_->Synchronize());  // the second left the first in place
  EXPECT_EQ(first.calls(), 2);
}

TEST_F(FaultInjectionTest, EverySiteHasANameAndAFailingCode) {
  for (int i = 0; i < kNumFaultSites; ++i) {
    const FaultSite site = static_cast<FaultSite>(i);
    EXPECT_STRNE(FaultSiteName(site), "unknown fault site");
    char error[128] = "";
    EXPECT_NE(InjectedFaultError(site, error, sizeof(error)), DSA_STATUS_OK);
    EXPECT_THAT(error, HasSubstr(FaultSiteName(site)));
    EXPECT_THAT(error, HasSubstr("injected fault"));
  }
}

// The CPU platform's memory: host memory, available no more than physical.
TEST_F(FaultInjectionTest, CpuMemoryInfoIsHostMemory) {
  ASSERT_OK_AND_ASSIGN(DeviceMemory memory, runtime_->MemoryInfo());
  EXPECT_GT(memory.total_bytes, 0u);
  EXPECT_GT(memory.free_bytes, 0u);
  EXPECT_LE(memory.free_bytes, memory.total_bytes);
}

}  // namespace
}  // namespace dsa::platform
