// Loads real and deliberately broken plugin shared objects into a registry.
// The test binary gets the paths of the objects as --name=path arguments
// (see testing/BUILD).

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
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

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string Absolute(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? buf : path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

using platform::Platform;
using platform::PlatformCapabilities;
using platform::Registry;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PluginLoaderTest, LoadsThePlatformPluginsAndQueriesThem) {
  Registry registry;
  ASSERT_OK(
      registry.LoadPlugins({PathOf("cpu"), PathOf("rocm"), PathOf("cuda")}));
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
  ASSERT_OK(registry.LoadPlugin(PathOf("cpu")));
  EXPECT_THAT(
      registry.LoadPlugin(PathOf("wrong_major")),
      dsa::testing::StatusIs(
          absl::StatusCode::kFailedPrecondition,
          HasSubstr("was built for plugin API 99.0; this host speaks")));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu"));
}

TEST(PluginLoaderTest, MissingSymbolIsNotFound) {
  Registry registry;
  EXPECT_THAT(
      registry.LoadPlugin(PathOf("no_symbol")),
      dsa::testing::StatusIs(absl::StatusCode::kNotFound,
                             HasSubstr("does not export DsaGetPluginApi")));
  EXPECT_TRUE(registry.PlatformIds().empty());
}

TEST(PluginLoaderTest, MissingFileIsNotFound) {
  Registry registry;
  EXPECT_THAT(registry.LoadPlugin("/nonexistent/libnothing.so"),
              dsa::testing::StatusIs(absl::StatusCode::kNotFound,
                                     HasSubstr("cannot load plugin "
                                               "/nonexistent/libnothing.so")));
}

TEST(PluginLoaderTest, FailingInitializeLeavesTheRegistryUnchanged) {
  Registry registry;
  ASSERT_OK(registry.LoadPlugin(PathOf("cpu")));
  EXPECT_THAT(registry.LoadPlugin(PathOf("init_fails")),
              dsa::testing::StatusIs(
                  absl::StatusCode::kFailedPrecondition,
                  HasSubstr("failed to initialize: fake_init: simulated "
                            "initialization failure")));
  // It had registered its platform before failing; none of it took effect.
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu"));
}

TEST(PluginLoaderTest, LoadingTheSamePluginTwiceIsAlreadyExists) {
  Registry registry;
  ASSERT_OK(registry.LoadPlugin(PathOf("rocm")));
  // The same file: refused by its identity before anything of it runs.
  EXPECT_THAT(registry.LoadPlugin(PathOf("rocm")),
              dsa::testing::StatusIs(absl::StatusCode::kAlreadyExists,
                                     HasSubstr("is already loaded")));
  // The same file under another name (a symlink): the same identity.
  const std::string link = TempPath("rocm_link.so");
  ASSERT_EQ(symlink(Absolute(PathOf("rocm")).c_str(), link.c_str()), 0);
  EXPECT_THAT(registry.LoadPlugin(link),
              dsa::testing::StatusIs(absl::StatusCode::kAlreadyExists,
                                     HasSubstr("is already loaded")));
  // A copy (another file): refused by the plugin's name, before its
  // initialize runs.
  const std::string copy = TempPath("rocm_copy.so");
  WriteFile(copy, ReadFile(PathOf("rocm")));
  EXPECT_THAT(registry.LoadPlugin(copy),
              dsa::testing::StatusIs(
                  absl::StatusCode::kAlreadyExists,
                  HasSubstr("plugin 'dsa_rocm_platform' is already loaded")));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("rocm"));
  // The first load is intact: its callbacks still answer.
  ASSERT_OK_AND_ASSIGN(Platform rocm, registry.GetPlatform("rocm"));
  EXPECT_OK(rocm.CapabilitiesForArch("gfx950"));
}

TEST(PluginLoaderTest, TwoAcceleratorsClaimingToBeActiveNeedAChoice) {
  Registry registry;
  ASSERT_OK(registry.LoadPlugins(
      {PathOf("cpu"), PathOf("accel_a"), PathOf("accel_b")}));
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
  EXPECT_THAT(registry.LoadPlugins(
                  {PathOf("cpu"), PathOf("no_symbol"), PathOf("rocm")}),
              dsa::testing::StatusIs(absl::StatusCode::kNotFound,
                                     HasSubstr(PathOf("no_symbol"))));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu"));
}

// Hostile paths: each is a clear error, promptly, and leaves the registry
// empty. (The file checks themselves are tested in
// //platform:plugin_file_test; these go through the loader end to end.)
TEST(PluginLoaderTest, RefusesWhatIsNotACompletePluginFile) {
  Registry registry;
  const std::string fifo = TempPath("plugin_fifo.so");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string dir = TempPath("plugin_dir.so");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  // The first 2000 bytes of a valid plugin: dlopen would map its segments
  // past the end of the file and die of SIGBUS.
  const std::string truncated = TempPath("truncated.so");
  WriteFile(truncated, ReadFile(PathOf("cpu")).substr(0, 2000));
  const std::string not_elf = TempPath("not_elf.so");
  WriteFile(not_elf, "#!/bin/sh\necho this is no shared object\n");
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& path :
       {fifo, dir, std::string("/dev/null"), truncated, not_elf}) {
    EXPECT_THAT(registry.LoadPlugin(path),
                dsa::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("cannot load plugin")))
        << path;
  }
  // A bare name is never looked up on the library search path.
  EXPECT_THAT(registry.LoadPlugin("libdsa_cpu_platform.so"),
              dsa::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("./libdsa_cpu_platform.so")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(registry.PlatformIds().empty());
  // A 900 KB path is echoed capped, not whole.
  const absl::Status long_path =
      registry.LoadPlugin("./" + std::string(900000, 'x'));
  EXPECT_FALSE(long_path.ok());
  EXPECT_LT(long_path.message().size(), 600u);
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
