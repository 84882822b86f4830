// Loads real and deliberately broken plugin shared objects into a registry.
// The test binary gets the paths of the objects as --name=path arguments
// (see testing/BUILD).

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/elf_test_util.h"
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
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

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

// Mappings of the sealed copies made from files named `basename`.
int CopyMappings(const std::string& basename) {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/memfd:dsa-plugin:" + basename + " ") != std::string::npos) {
      ++count;
    }
  }
  return count;
}

// The loader loads the sealed copy of a file; the same file loaded again,
// into another registry, gets that object again (as dlopen of the file
// would), while another file with the same bytes is a copy of its own.
TEST(PluginLoaderTest, AFileLoadedTwiceIsOneCopy) {
  const std::string path = TempPath("once.so");
  WriteFile(path, ReadFile(PathOf("accel_b")));
  Registry first, second, third;
  ASSERT_OK(first.LoadPlugin(path));
  const int mappings = CopyMappings("once.so");
  EXPECT_GT(mappings, 0);
  ASSERT_OK(second.LoadPlugin(path));
  EXPECT_EQ(CopyMappings("once.so"), mappings);
  const std::string other = TempPath("once_copy.so");
  WriteFile(other, ReadFile(path));
  ASSERT_OK(third.LoadPlugin(other));
  EXPECT_GT(CopyMappings("once_copy.so"), 0);
  for (Registry* r : {&first, &second, &third}) {
    ASSERT_OK_AND_ASSIGN(Platform platform, r->GetPlatform("fake_b"));
    ASSERT_OK_AND_ASSIGN(auto devices, platform.ProbeDevices());
    EXPECT_EQ(devices.device_count, 2);
  }
}

// A plugin whose dynamic section the dynamic loader would follow out of the
// object is refused with a message naming the file and the entry, and
// nothing of it runs: each case of platform/elf_test_util.h, through the
// loader end to end.
TEST(PluginLoaderTest, CorruptDynamicSectionsAreRefusedByName) {
  const std::string plugin = ReadFile(PathOf("cpu"));
  Registry registry;
  for (const platform::testing::CorruptElfCase& c :
       platform::testing::CorruptElfCases()) {
    SCOPED_TRACE(c.name);
    platform::testing::ElfEditor editor(plugin);
    c.edit(editor);
    const std::string path = TempPath(std::string("corrupt_") + c.name + ".so");
    WriteFile(path, editor.bytes());
    EXPECT_THAT(registry.LoadPlugin(path),
                dsa::testing::StatusIs(
                    absl::StatusCode::kInvalidArgument,
                    AllOf(StartsWith("cannot load plugin: " + path + ": "),
                          HasSubstr(c.message))));
  }
  EXPECT_TRUE(registry.PlatformIds().empty());
}

// What the checks prevent: the same kind of file given straight to dlopen
// kills the process (here DT_STRTAB far past the object: the loader reads
// the DT_NEEDED names there).
TEST(PluginLoaderDeathTest, DlopenOfACorruptDynamicSectionCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  platform::testing::ElfEditor editor(ReadFile(PathOf("cpu")));
  editor.SetDynamic(DT_STRTAB,
                    editor.DynamicValue(DT_STRTAB) + platform::testing::kFar);
  const std::string path = TempPath("corrupt_dlopen.so");
  WriteFile(path, editor.bytes());
  EXPECT_DEATH(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL), "");
  Registry registry;
  EXPECT_THAT(registry.LoadPlugin(path),
              dsa::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("dynamic entry DT_STRTAB")));
}

// The file at the path changes while the loader loads it, over and over: a
// file renamed over it, cut short in place, rewritten in place (with the
// plugin's bytes, or with a copy whose dynamic section is corrupt, of the
// same size). The loader reads the file once into a sealed copy and loads
// that, so no load ever dies of SIGBUS or loads half a file: each one fails
// with a message naming the path, or loads the complete plugin, which then
// answers.
TEST(PluginLoaderTest, AFileChangingWhileItLoadsIsRefusedOrLoadedWhole) {
  const std::string good = ReadFile(PathOf("accel_a"));
  platform::testing::ElfEditor editor(good);
  editor.SetDynamic(DT_STRTAB,
                    editor.DynamicValue(DT_STRTAB) + platform::testing::kFar);
  const std::string corrupt = editor.bytes();
  ASSERT_EQ(corrupt.size(), good.size());
  const std::vector<std::string> renamed = {
      good, good.substr(0, good.size() / 2), corrupt, "not a plugin\n"};
  const std::string path = TempPath("changing.so");
  WriteFile(path, good);
  {
    Registry registry;  // while nothing changes it, it loads
    ASSERT_OK(registry.LoadPlugin(path));
  }

  std::atomic<bool> stop{false};
  std::atomic<int> changes{0};
  std::thread changer([&] {
    std::mt19937 rng(std::random_device{}());
    for (int n = 0; !stop.load(); ++n) {
      const unsigned what = rng() % 8;
      if (what < 4) {
        // Renamed over the path: the plugin half the time, else a cut copy,
        // the corrupt one or a text file.
        const std::string next = path + ".next" + std::to_string(n % 2);
        WriteFile(next, what < 2 ? good : renamed[rng() % renamed.size()]);
        ::rename(next.c_str(), path.c_str());
      } else {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) continue;
        if (what == 4) {
          (void)!::ftruncate(fd, static_cast<off_t>(rng() % good.size()));
        } else {
          // Rewritten in place in pieces: the plugin, or the corrupt copy.
          const std::string& bytes = what < 7 ? good : corrupt;
          (void)!::ftruncate(fd, 0);
          for (size_t at = 0; at < bytes.size(); at += 1024) {
            (void)!::pwrite(fd, bytes.data() + at,
                            std::min<size_t>(1024, bytes.size() - at),
                            static_cast<off_t>(at));
          }
        }
        ::close(fd);
      }
      changes.fetch_add(1);
      // Pauses about as long as a load, so that some loads find the file
      // still and many run into a change.
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
    }
  });

  int loaded = 0, refused = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; (i < 300 || changes.load() < 300) &&
                  std::chrono::steady_clock::now() < deadline;
       ++i) {
    // Paced like the changer, so that loads and changes interleave.
    std::this_thread::sleep_for(std::chrono::microseconds(i % 200));
    Registry registry;
    const absl::Status status = registry.LoadPlugin(path);
    if (status.ok()) {
      ++loaded;
      ASSERT_THAT(registry.PlatformIds(), ElementsAre("fake_a"));
      ASSERT_OK_AND_ASSIGN(Platform platform, registry.GetPlatform("fake_a"));
      EXPECT_EQ(platform.plugin_name(), "fake_plugin_fake_a");
      ASSERT_OK_AND_ASSIGN(auto devices, platform.ProbeDevices());
      EXPECT_EQ(devices.device_count, 1);
      EXPECT_OK(platform.Capabilities());
    } else {
      ++refused;
      EXPECT_TRUE(status.code() == absl::StatusCode::kInvalidArgument ||
                  status.code() == absl::StatusCode::kNotFound)
          << status;
      EXPECT_THAT(status.message(),
                  AllOf(HasSubstr(path), Not(HasSubstr("/proc/self/fd"))));
      EXPECT_TRUE(registry.PlatformIds().empty());
    }
  }
  stop.store(true);
  changer.join();
  EXPECT_GT(changes.load(), 0);
  EXPECT_GT(loaded, 0) << "no load succeeded (" << refused << " refused)";
  EXPECT_GT(refused, 0) << "no load was refused (" << loaded << " loaded)";
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
