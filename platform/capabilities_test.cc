#include "platform/capabilities.h"

#include <variant>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::platform {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

TEST(Fp8FormatTest, MaxAndNames) {
  EXPECT_EQ(Fp8Max(Fp8Format::kE4m3fn), 448.0f);
  EXPECT_EQ(Fp8Max(Fp8Format::kE4m3fnuz), 240.0f);
  EXPECT_EQ(Fp8FormatName(Fp8Format::kE4m3fn), "e4m3fn");
  EXPECT_EQ(Fp8FormatName(Fp8Format::kE4m3fnuz), "e4m3fnuz");
  EXPECT_EQ(*ParseFp8Format("e4m3fnuz"), Fp8Format::kE4m3fnuz);
  EXPECT_THAT(ParseFp8Format("e5m2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("e5m2")));
}

TEST(DeviceArchTest, ParsesEachKind) {
  auto rocm = ParseDeviceArch(PlatformKind::kRocm, "gfx942:sramecc+:xnack-");
  ASSERT_TRUE(rocm.ok());
  ASSERT_TRUE(std::holds_alternative<RocmArch>(*rocm));
  EXPECT_EQ(DeviceArchName(*rocm), "gfx942");

  for (const char* spelling : {"sm_90", "sm90", "sm_90a", "9.0"}) {
    auto cuda = ParseDeviceArch(PlatformKind::kCuda, spelling);
    ASSERT_TRUE(cuda.ok()) << spelling;
    EXPECT_EQ(std::get<CudaComputeCapability>(*cuda),
              (CudaComputeCapability{9, 0}))
        << spelling;
    EXPECT_EQ(DeviceArchName(*cuda), "sm_90");
  }
  EXPECT_EQ(DeviceArchName(*ParseDeviceArch(PlatformKind::kCuda, "sm_100")),
            "sm_100");
  EXPECT_EQ(DeviceArchName(*ParseDeviceArch(PlatformKind::kCpu, "x86_64")),
            "x86_64");
}

TEST(DeviceArchTest, RejectsMalformedNames) {
  EXPECT_THAT(ParseDeviceArch(PlatformKind::kRocm, "sm_90"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gfx")));
  EXPECT_THAT(ParseDeviceArch(PlatformKind::kCuda, "gfx942"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sm_90")));
  EXPECT_THAT(ParseDeviceArch(PlatformKind::kCuda, "sm_x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sm_x")));
  EXPECT_THAT(ParseDeviceArch(PlatformKind::kCpu, ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
}

}  // namespace
}  // namespace dsa::platform
