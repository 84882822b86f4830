// --platform and --arch resolved: emulated-rocm takes ROCm's capabilities
// and the CPU's kernels; auto falls back to it without a GPU; a GPU platform
// without a device, a platform without kernels and an unknown arch are
// clear errors.
#include "bench/prefill/platform_choice.h"

#include "attention/cpu/registration.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/cpu/registration.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

const platform::Registry& Global() { return platform::Registry::Global(); }

bool HasDevice(const char* id) {
  absl::StatusOr<platform::Platform> p = Global().GetPlatform(id);
  if (!p.ok()) return false;
  absl::StatusOr<platform::DeviceInfo> d = p->ProbeDevices();
  return d.ok() && d->device_count > 0;
}

TEST(PlatformChoiceTest, EmulatedRocmIsRocmsDecisionOnTheCpuKernels) {
  ASSERT_OK_AND_ASSIGN(ResolvedPlatform r,
                       ResolvePlatform(Global(), "emulated-rocm", ""));
  EXPECT_EQ(r.info.name, "emulated-rocm");
  EXPECT_EQ(r.info.arch, "gfx950");
  EXPECT_TRUE(r.info.emulated);
  EXPECT_EQ(r.info.executes_on, "cpu");
  EXPECT_TRUE(r.info.executes_on_cpu());
  EXPECT_TRUE(r.info.is_cuda_alike);
  EXPECT_TRUE(r.caps.is_cuda_alike);
  EXPECT_EQ(r.caps.platform_id, "rocm");
  EXPECT_EQ(r.info.note, "");
  ASSERT_TRUE(r.exec.has_value());
  EXPECT_EQ(r.exec->id(), "cpu");
  ASSERT_OK_AND_ASSIGN(ResolvedPlatform mi300,
                       ResolvePlatform(Global(), "emulated-rocm", "gfx942"));
  EXPECT_EQ(mi300.info.arch, "gfx942");
  EXPECT_THAT(
      ResolvePlatform(Global(), "emulated-rocm", "gfx1"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--arch")));
}

TEST(PlatformChoiceTest, TheCpuIsNotCudaAlikeAndSaysSo) {
  ASSERT_OK_AND_ASSIGN(ResolvedPlatform r,
                       ResolvePlatform(Global(), "cpu", ""));
  EXPECT_EQ(r.info.name, "cpu");
  EXPECT_FALSE(r.info.emulated);
  EXPECT_FALSE(r.info.is_cuda_alike);
  EXPECT_TRUE(r.info.executes_on_cpu());
  EXPECT_THAT(r.info.note, HasSubstr("not CUDA-alike"));
  EXPECT_THAT(r.info.note, HasSubstr("A/A comparison"));
}

TEST(PlatformChoiceTest, AutoWithoutAGpuIsEmulatedRocm) {
  if (HasDevice("rocm") || HasDevice("cuda")) {
    GTEST_SKIP() << "a GPU device is present";
  }
  ASSERT_OK_AND_ASSIGN(ResolvedPlatform r,
                       ResolvePlatform(Global(), "auto", ""));
  EXPECT_EQ(r.info.name, "emulated-rocm");
  EXPECT_EQ(r.info.note, "auto: no GPU device");
  ASSERT_OK_AND_ASSIGN(ResolvedPlatform a,
                       ResolvePlatform(Global(), "auto", "gfx90a"));
  EXPECT_EQ(a.info.arch, "gfx90a");
}

TEST(PlatformChoiceTest, AGpuPlatformWithoutADeviceIsAClearError) {
  for (const char* id : {"rocm", "cuda"}) {
    if (HasDevice(id)) continue;
    EXPECT_THAT(ResolvePlatform(Global(), id, ""),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         HasSubstr(std::string("no ") + id + " device")));
  }
}

TEST(PlatformChoiceTest, WhatThisBinaryLacksIsAClearError) {
  platform::Registry cpu_only;
  ASSERT_OK(platform::RegisterCpuPlatform(cpu_only));
  EXPECT_THAT(ResolvePlatform(cpu_only, "emulated-rocm", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the ROCm platform is not registered")));
  EXPECT_THAT(ResolvePlatform(cpu_only, "cpu", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no attention kernels for cpu")));
  ASSERT_OK(attention::cpu::RegisterCpuAttentionKernels(cpu_only));
  EXPECT_OK(ResolvePlatform(cpu_only, "cpu", "").status());
  EXPECT_THAT(ResolvePlatform(cpu_only, "rocm", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("--platform=rocm")));
}

}  // namespace
}  // namespace dsa::prefill_bench
