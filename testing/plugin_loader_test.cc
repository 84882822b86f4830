// Loads real and deliberately broken plugin shared objects into a registry.
// The test binary gets the paths of the objects as --name=path arguments
// (see testing/BUILD).
#include "testing/plugin_loader.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::testing {
namespace {

std::map<std::string, std::string>& PluginPaths() {
  static auto* paths = new std::map<std::string, std::string>();
  return *paths;
}

std::string PathOf(const std::string& name) {
  auto it = PluginPaths().find(name);
  return it == PluginPaths().end() ? "missing-argument-" + name : it->second;
}

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using platform::Platform;
using platform::PlatformCapabilities;
using platform::Registry;

TEST(PluginLoaderTest, LoadsThePlatformPluginsAndQueriesThem) {
  Registry registry;
  ASSERT_OK(LoadPlugins(registry, {PathOf("cpu"), PathOf("rocm"),
                                   PathOf("cuda")}));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu", "cuda", "rocm"));

  ASSERT_OK_AND_ASSIGN(Platform rocm, registry.GetPlatform("rocm"));
  EXPECT_EQ(rocm.plugin_name(), "dsa_rocm_platform");
  ASSERT_OK_AND_ASSIGN(PlatformCapabilities gfx942,
                       rocm.CapabilitiesForArch("gfx942"));
  EXPECT_TRUE(gfx942.is_cuda_alike);
  EXPECT_EQ(gfx942.kv_cache_fp8_format, platform::Fp8Format::kE4m3fnuz);
  EXPECT_EQ(gfx942.warp_size, 64);
  EXPECT_FALSE(gfx942.sparse_mla_decode_context_parallel);
  ASSERT_OK_AND_ASSIGN(PlatformCapabilities gfx950,
                       rocm.CapabilitiesForArch("gfx950"));
  EXPECT_EQ(gfx950.kv_cache_fp8_format, platform::Fp8Format::kE4m3fn);

  ASSERT_OK_AND_ASSIGN(Platform cuda, registry.GetPlatform("cuda"));
  ASSERT_OK_AND_ASSIGN(PlatformCapabilities sm90,
                       cuda.CapabilitiesForArch("sm_90"));
  EXPECT_TRUE(sm90.is_cuda_alike);
  EXPECT_EQ(sm90.warp_size, 32);
  EXPECT_TRUE(sm90.sparse_mla_decode_context_parallel);

  ASSERT_OK_AND_ASSIGN(Platform cpu, registry.GetPlatform("cpu"));
  ASSERT_OK_AND_ASSIGN(PlatformCapabilities host, cpu.Capabilities());
  EXPECT_FALSE(host.is_cuda_alike);

  // This machine may or may not have a GPU; either way the probes answer.
  EXPECT_OK(rocm.ProbeDevices());
  EXPECT_OK(cuda.ProbeDevices());
}

TEST(PluginLoaderTest, WrongMajorVersionIsRefused) {
  Registry registry;
  ASSERT_OK(LoadPlugin(registry, PathOf("cpu")));
  EXPECT_THAT(LoadPlugin(registry, PathOf("wrong_major")),
              dsa::testing::StatusIs(
                  absl::StatusCode::kFailedPrecondition,
                  HasSubstr("was built for plugin API 99.0; this host speaks")));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu"));
}

TEST(PluginLoaderTest, MissingSymbolIsNotFound) {
  Registry registry;
  EXPECT_THAT(LoadPlugin(registry, PathOf("no_symbol")),
              dsa::testing::StatusIs(absl::StatusCode::kNotFound,
                                     HasSubstr("does not export DsaGetPluginApi")));
  EXPECT_TRUE(registry.PlatformIds().empty());
}

TEST(PluginLoaderTest, MissingFileIsNotFound) {
  Registry registry;
  EXPECT_THAT(LoadPlugin(registry, "/nonexistent/libnothing.so"),
              dsa::testing::StatusIs(absl::StatusCode::kNotFound,
                                     HasSubstr("cannot load plugin "
                                               "/nonexistent/libnothing.so")));
}

TEST(PluginLoaderTest, FailingInitializeLeavesTheRegistryUnchanged) {
  Registry registry;
  ASSERT_OK(LoadPlugin(registry, PathOf("cpu")));
  EXPECT_THAT(LoadPlugin(registry, PathOf("init_fails")),
              dsa::testing::StatusIs(
                  absl::StatusCode::kFailedPrecondition,
                  HasSubstr("failed to initialize: fake_init: simulated "
                            "initialization failure")));
  // It had registered its platform before failing; none of it took effect.
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu"));
}

TEST(PluginLoaderTest, LoadingTheSamePluginTwiceIsAlreadyExists) {
  Registry registry;
  ASSERT_OK(LoadPlugin(registry, PathOf("rocm")));
  EXPECT_THAT(LoadPlugin(registry, PathOf("rocm")),
              dsa::testing::StatusIs(absl::StatusCode::kAlreadyExists,
                                     HasSubstr("platform 'rocm' is already "
                                               "registered")));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("rocm"));
  // The first load is intact: its callbacks still answer.
  ASSERT_OK_AND_ASSIGN(Platform rocm, registry.GetPlatform("rocm"));
  EXPECT_OK(rocm.CapabilitiesForArch("gfx950"));
}

TEST(PluginLoaderTest, TwoAcceleratorsClaimingToBeActiveNeedAChoice) {
  Registry registry;
  ASSERT_OK(LoadPlugins(registry, {PathOf("cpu"), PathOf("accel_a"),
                                   PathOf("accel_b")}));
  EXPECT_THAT(registry.ActivePlatform(),
              dsa::testing::StatusIs(
                  absl::StatusCode::kFailedPrecondition,
                  HasSubstr("several accelerator platforms report devices: "
                            "fake_a (1 device), fake_b (2 devices)")));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu", "fake_a", "fake_b"));
  EXPECT_FALSE(registry.selected_platform().has_value());
  registry.SelectPlatform("fake_b");
  ASSERT_OK_AND_ASSIGN(Platform active, registry.ActivePlatform());
  EXPECT_EQ(active.id(), "fake_b");
}

TEST(PluginLoaderTest, LoadPluginsStopsAtTheFirstFailure) {
  Registry registry;
  EXPECT_THAT(LoadPlugins(registry, {PathOf("cpu"), PathOf("no_symbol"),
                                     PathOf("rocm")}),
              dsa::testing::StatusIs(absl::StatusCode::kNotFound,
                                     HasSubstr(PathOf("no_symbol"))));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu"));
}

}  // namespace
}  // namespace dsa::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleMock(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) continue;
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) continue;
    dsa::testing::PluginPaths()[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
  }
  return RUN_ALL_TESTS();
}
