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
#include <thread>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/capabilities.h"
#include "platform/registry.h"
#include "platform/status_macros.h"
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

// Plugin API 1.5: the GPU platforms page-lock host memory (the CPU platform
// has no need to). Copies from and into a registered buffer on a stream land
// once the stream is waited for; the registration goes with its object (a
// second one of the same buffer then succeeds), and a platform without the
// calls gives an empty registration.
TEST_P(PlatformConformanceTest, RegisteredHostMemoryRoundTrip) {
  DeviceRuntime rt = platform().runtime();
  EXPECT_EQ(rt.has_host_registration(), GetParam() != "cpu");
  if (!HasDevice()) GTEST_SKIP() << GetParam() << ": no device";
  const size_t n = size_t{1} << 22;
  std::vector<uint8_t> in(n), out(n, 0xAA);
  std::mt19937 rng(11);
  for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
  ASSERT_OK_AND_ASSIGN(void* stream, rt.CreateStream());
  ASSERT_OK_AND_ASSIGN(void* d, rt.Allocate(n));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    ASSERT_OK_AND_ASSIGN(
        RegisteredHostMemory pinned_in,
        RegisteredHostMemory::Register(rt, in.data(), in.size()));
    ASSERT_OK_AND_ASSIGN(
        RegisteredHostMemory pinned_out,
        RegisteredHostMemory::Register(rt, out.data(), out.size()));
    EXPECT_EQ(pinned_in.registered(), rt.has_host_registration());
    if (rt.has_host_registration()) {
      // The same pages twice while registered: the platform's error.
      EXPECT_FALSE(rt.RegisterHostMemory(in.data() + 64, 64).ok());
    }
    ASSERT_OK(rt.CopyAsync(d, in.data(), n, DSA_MEMCPY_HOST_TO_DEVICE, stream));
    ASSERT_OK(
        rt.CopyAsync(out.data(), d, n, DSA_MEMCPY_DEVICE_TO_HOST, stream));
    ASSERT_OK(rt.SynchronizeStream(stream));
    EXPECT_EQ(out, in);
    RegisteredHostMemory moved = std::move(pinned_in);
    EXPECT_EQ(moved.registered(), rt.has_host_registration());
    EXPECT_FALSE(pinned_in.registered());
  }
  EXPECT_FALSE(rt.RegisterHostMemory(nullptr, 16).ok());
  ASSERT_OK(rt.Free(d));
  EXPECT_OK(rt.DestroyStream(stream));
}

// Plugin API 1.3: every platform here binds devices and has collectives.
// The ranks of a group are threads; each binds its device, makes a stream
// and takes part in an all-reduce (float32, bf16) and an all-gather of
// device buffers. CPU: 3 ranks on the host; a GPU platform: one rank per
// device, up to 2 (a single-GPU machine runs a group of one, which still
// goes through the library). On CUDA and ROCm the library (NCCL, RCCL) may
// be missing: then creating the group fails Unavailable, naming it.
TEST_P(PlatformConformanceTest, CollectivesAmongRanksOfOneProcess) {
  DeviceRuntime rt = platform().runtime();
  EXPECT_TRUE(rt.has_collectives());
  if (!HasDevice()) GTEST_SKIP() << GetParam() << ": no device";
  ASSERT_OK_AND_ASSIGN(DeviceInfo info, platform().ProbeDevices());
  EXPECT_THAT(
      rt.BindDevice(info.device_count),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(absl::StrCat("device ", info.device_count, " of "))));
  std::vector<int32_t> ordinals;
  if (platform().kind() == PlatformKind::kCpu) {
    ordinals = {0, 0, 0};
  } else {
    for (int d = 0; d < std::min(info.device_count, 2); ++d) {
      ordinals.push_back(d);
    }
  }
  const int n = static_cast<int>(ordinals.size());
  absl::StatusOr<void*> group = rt.CreateCollectiveGroup(ordinals);
  if (!group.ok() && group.status().code() == absl::StatusCode::kUnavailable) {
    GTEST_SKIP() << group.status();
  }
  ASSERT_OK(group.status());
  constexpr size_t kCount = 1000;
  std::vector<absl::Status> results(n);
  std::vector<std::vector<float>> sums(n);
  std::vector<std::vector<uint16_t>> sums16(n);
  std::vector<std::vector<int32_t>> gathered(n);
  auto rank_body = [&](int r) -> absl::Status {
    DSA_RETURN_IF_ERROR(rt.BindDevice(ordinals[r]));
    DSA_ASSIGN_OR_RETURN(void* stream, rt.CreateStream());
    std::vector<float> mine(kCount);
    std::vector<uint16_t> mine16(kCount);
    for (size_t i = 0; i < kCount; ++i) {
      mine[i] = 0.5f * r + i;
      mine16[i] = static_cast<uint16_t>(0x3f80 + r);  // 1.0, 1.0078, ...
    }
    const std::vector<int32_t> block = {r, 10 * r, 100 * r};
    DSA_ASSIGN_OR_RETURN(void* f32, rt.Allocate(kCount * 4));
    DSA_ASSIGN_OR_RETURN(void* b16, rt.Allocate(kCount * 2));
    DSA_ASSIGN_OR_RETURN(void* all, rt.Allocate(3 * 4 * n));
    DSA_RETURN_IF_ERROR(rt.CopyAsync(f32, mine.data(), kCount * 4,
                                     DSA_MEMCPY_HOST_TO_DEVICE, stream));
    DSA_RETURN_IF_ERROR(rt.CopyAsync(b16, mine16.data(), kCount * 2,
                                     DSA_MEMCPY_HOST_TO_DEVICE, stream));
    DSA_RETURN_IF_ERROR(rt.CopyAsync(static_cast<char*>(all) + 12 * r,
                                     block.data(), 12,
                                     DSA_MEMCPY_HOST_TO_DEVICE, stream));
    DSA_RETURN_IF_ERROR(rt.AllReduceSum(*group, r, f32, kCount,
                                        DSA_COLLECTIVE_FLOAT32, stream));
    DSA_RETURN_IF_ERROR(rt.AllReduceSum(*group, r, b16, kCount,
                                        DSA_COLLECTIVE_BFLOAT16, stream));
    DSA_RETURN_IF_ERROR(rt.AllGather(
        *group, r, static_cast<char*>(all) + 12 * r, all, 12, stream));
    sums[r].resize(kCount);
    sums16[r].resize(kCount);
    gathered[r].resize(3 * n);
    DSA_RETURN_IF_ERROR(rt.CopyAsync(sums[r].data(), f32, kCount * 4,
                                     DSA_MEMCPY_DEVICE_TO_HOST, stream));
    DSA_RETURN_IF_ERROR(rt.CopyAsync(sums16[r].data(), b16, kCount * 2,
                                     DSA_MEMCPY_DEVICE_TO_HOST, stream));
    DSA_RETURN_IF_ERROR(rt.CopyAsync(gathered[r].data(), all, 12 * n,
                                     DSA_MEMCPY_DEVICE_TO_HOST, stream));
    DSA_RETURN_IF_ERROR(rt.SynchronizeStream(stream));
    DSA_RETURN_IF_ERROR(rt.Free(f32));
    DSA_RETURN_IF_ERROR(rt.Free(b16));
    DSA_RETURN_IF_ERROR(rt.Free(all));
    return rt.DestroyStream(stream);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { results[r] = rank_body(r); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_OK(results[r]) << "rank " << r;
    for (size_t i = 0; i < kCount; ++i) {
      float want = 0.0f, want16 = 0.0f;
      for (int q = 0; q < n; ++q) {
        want += 0.5f * q + i;
        uint32_t bits = static_cast<uint32_t>(0x3f80 + q) << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        want16 += v;
      }
      ASSERT_EQ(sums[r][i], want) << "rank " << r << " element " << i;
      // bf16 sums of n terms below 8: within one bf16 ulp of the exact sum.
      uint32_t got_bits = static_cast<uint32_t>(sums16[r][i]) << 16;
      float got16;
      std::memcpy(&got16, &got_bits, 4);
      ASSERT_NEAR(got16, want16, want16 * 0x1p-7f) << "rank " << r;
    }
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(gathered[r][3 * q], q);
      EXPECT_EQ(gathered[r][3 * q + 2], 100 * q);
    }
  }
  EXPECT_OK(rt.DestroyCollectiveGroup(*group));
  EXPECT_OK(rt.BindDevice(0));
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
