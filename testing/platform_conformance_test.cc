// One conformance suite, run on every platform registered in the process
// (the IREE/PJRT way): CPU always; ROCm and CUDA through their static
// registrars. Static checks (capability records for every known arch) run on
// any machine; device checks (memory round trips on the runtime) run where the
// platform's runtime reports a device and skip cleanly elsewhere.
//
// What a platform does not support is listed explicitly below, not skipped
// silently.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/capabilities.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::platform {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

class PlatformConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto platform = Registry::Global().GetPlatform(GetParam());
    ASSERT_TRUE(platform.ok()) << platform.status();
    platform_.emplace(*platform);
  }
  const Platform& platform() const { return *platform_; }

  // Skips when the platform's runtime reports no device.
  bool HasDevice() {
    absl::StatusOr<DeviceInfo> info = platform().ProbeDevices();
    return info.ok() && info->device_count > 0;
  }

 private:
  std::optional<Platform> platform_;
};

TEST_P(PlatformConformanceTest, IdentityIsConsistent) {
  const Platform& p = platform();
  EXPECT_EQ(p.id(), GetParam());
  EXPECT_EQ(PlatformKindName(p.kind()), p.id())
      << "the built-in platforms are named after their kind";
  EXPECT_EQ(p.is_accelerator(), p.kind() != PlatformKind::kCpu);
  EXPECT_FALSE(p.plugin_name().empty());
  ASSERT_FALSE(p.known_archs().empty());
  EXPECT_THAT(p.known_archs(), ::testing::Contains(p.default_arch()));
}

TEST_P(PlatformConformanceTest, EveryKnownArchHasAConsistentRecord) {
  const Platform& p = platform();
  for (const std::string& arch : p.known_archs()) {
    SCOPED_TRACE(arch);
    ASSERT_OK_AND_ASSIGN(PlatformCapabilities caps,
                         p.CapabilitiesForArch(arch));
    EXPECT_EQ(caps.platform_id, p.id());
    EXPECT_EQ(caps.kind, p.kind());
    EXPECT_EQ(DeviceArchName(caps.arch), arch);
    // is_cuda_alike means "CUDA or ROCm".
    EXPECT_EQ(caps.is_cuda_alike, p.kind() != PlatformKind::kCpu);
    switch (p.kind()) {
      case PlatformKind::kCpu:
        EXPECT_TRUE(std::holds_alternative<CpuArch>(caps.arch));
        EXPECT_EQ(caps.warp_size, 1);
        break;
      case PlatformKind::kRocm:
        EXPECT_TRUE(std::holds_alternative<RocmArch>(caps.arch));
        EXPECT_EQ(caps.warp_size, 64);
        // ROCm sparse MLA rejects decode context parallelism.
        EXPECT_FALSE(caps.sparse_mla_decode_context_parallel);
        break;
      case PlatformKind::kCuda:
        EXPECT_TRUE(std::holds_alternative<CudaComputeCapability>(caps.arch));
        EXPECT_EQ(caps.warp_size, 32);
        EXPECT_EQ(caps.kv_cache_fp8_format, Fp8Format::kE4m3fn);
        break;
    }
    // Every platform here runs short prefills on dense MHA.
    EXPECT_TRUE(caps.sparse_mla_dense_mha_prefill);
  }
}

TEST_P(PlatformConformanceTest, Fp8FormatFollowsTheArch) {
  if (platform().kind() != PlatformKind::kRocm) {
    GTEST_SKIP() << "per-arch fp8 formats differ only on ROCm";
  }
  ASSERT_OK_AND_ASSIGN(auto gfx942, platform().CapabilitiesForArch("gfx942"));
  ASSERT_OK_AND_ASSIGN(auto gfx950, platform().CapabilitiesForArch("gfx950"));
  EXPECT_EQ(gfx942.kv_cache_fp8_format, Fp8Format::kE4m3fnuz);
  EXPECT_EQ(Fp8Max(gfx942.kv_cache_fp8_format), 240.0f);
  EXPECT_EQ(gfx950.kv_cache_fp8_format, Fp8Format::kE4m3fn);
  EXPECT_EQ(Fp8Max(gfx950.kv_cache_fp8_format), 448.0f);
}

TEST_P(PlatformConformanceTest, UnknownArchIsAClearError) {
  const char* foreign = platform().kind() == PlatformKind::kRocm ? "gfx1100"
                        : platform().kind() == PlatformKind::kCuda
                            ? "sm_75"
                            : "riscv-unknown";
  EXPECT_THAT(platform().CapabilitiesForArch(foreign),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(platform().default_arch())));
}

TEST_P(PlatformConformanceTest, ProbeAnswersWithOrWithoutADevice) {
  ASSERT_OK_AND_ASSIGN(DeviceInfo info, platform().ProbeDevices());
  EXPECT_GE(info.device_count, 0);
  std::printf("%s: %d device(s)%s%s%s\n", GetParam().c_str(), info.device_count,
              info.device_count > 0 ? ", device 0: " : "", info.name.c_str(),
              info.device_count > 0 ? (" (" + info.arch + ")").c_str() : "");
  if (info.device_count > 0) {
    EXPECT_FALSE(info.arch.empty());
    EXPECT_GT(info.total_memory_bytes, 0u);
    // The device's own capabilities are the ones reported.
    ASSERT_OK_AND_ASSIGN(PlatformCapabilities caps, platform().Capabilities());
    EXPECT_EQ(DeviceArchName(caps.arch), info.arch);
  } else {
    ASSERT_OK_AND_ASSIGN(PlatformCapabilities caps, platform().Capabilities());
    EXPECT_EQ(DeviceArchName(caps.arch), platform().default_arch());
  }
}

TEST_P(PlatformConformanceTest, DeviceMemoryRoundTrip) {
  if (!HasDevice()) GTEST_SKIP() << GetParam() << ": no device";
  DeviceRuntime rt = platform().runtime();
  ASSERT_TRUE(rt.available());
  // Sizes around alignment boundaries and one large one; random payloads.
  for (size_t n :
       {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1} << 24}) {
    SCOPED_TRACE(n);
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::vector<uint8_t> host(n);
    for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
    ASSERT_OK_AND_ASSIGN(void* a, rt.Allocate(n));
    ASSERT_OK_AND_ASSIGN(void* b, rt.Allocate(n));
    ASSERT_OK(rt.CopyHostToDevice(a, host.data(), n));
    ASSERT_OK(rt.CopyDeviceToDevice(b, a, n));
    ASSERT_OK(rt.Synchronize());
    std::vector<uint8_t> back(n, 0xAA);
    ASSERT_OK(rt.CopyDeviceToHost(back.data(), b, n));
    EXPECT_EQ(back, host);
    ASSERT_OK(rt.Free(a));
    ASSERT_OK(rt.Free(b));
  }
}

// Plugin API 1.2: every platform here has streams; copies ordered on one
// stream land in order (a later copy reads what an earlier one wrote), and
// a wait for the stream covers them.
TEST_P(PlatformConformanceTest, StreamOrderedRoundTrip) {
  DeviceRuntime rt = platform().runtime();
  EXPECT_TRUE(rt.has_streams());
  if (!HasDevice()) GTEST_SKIP() << GetParam() << ": no device";
  ASSERT_OK_AND_ASSIGN(void* stream, rt.CreateStream());
  for (size_t n : {size_t{1}, size_t{65}, size_t{1} << 22}) {
    SCOPED_TRACE(n);
    std::mt19937 rng(static_cast<uint32_t>(n) + 7);
    std::vector<uint8_t> host(n);
    for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
    ASSERT_OK_AND_ASSIGN(void* a, rt.Allocate(n));
    ASSERT_OK_AND_ASSIGN(void* b, rt.Allocate(n));
    ASSERT_OK(
        rt.CopyAsync(a, host.data(), n, DSA_MEMCPY_HOST_TO_DEVICE, stream));
    // The host buffer may be reused as soon as the call returns.
    std::vector<uint8_t> expected = host;
    std::fill(host.begin(), host.end(), 0x5A);
    ASSERT_OK(rt.CopyAsync(b, a, n, DSA_MEMCPY_DEVICE_TO_DEVICE, stream));
    std::vector<uint8_t> back(n, 0xAA);
    ASSERT_OK(
        rt.CopyAsync(back.data(), b, n, DSA_MEMCPY_DEVICE_TO_HOST, stream));
    ASSERT_OK(rt.SynchronizeStream(stream));
    EXPECT_EQ(back, expected);
    ASSERT_OK(rt.Free(a));
    ASSERT_OK(rt.Free(b));
  }
  EXPECT_OK(rt.DestroyStream(stream));
}

std::vector<std::string> RegisteredPlatforms() {
  return Registry::Global().PlatformIds();
}

INSTANTIATE_TEST_SUITE_P(AllRegistered, PlatformConformanceTest,
                         ::testing::ValuesIn(RegisteredPlatforms()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(PlatformConformanceSetupTest, AllPlatformsAreRegistered) {
  EXPECT_THAT(Registry::Global().PlatformIds(),
              ::testing::ElementsAre("cpu", "cuda", "rocm"));
}

}  // namespace
}  // namespace dsa::platform
