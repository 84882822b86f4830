// Helpers for testing a GPU platform plugin against a stand-in runtime
// library (platform/rocm/fake_hip_runtime.cc,
// platform/cuda/fake_cuda_driver.cc) through the plugin's C API, as a host
// would see it, and without a registry.
#ifndef DSA_PLATFORM_RUNTIME_TEST_UTIL_H_
#define DSA_PLATFORM_RUNTIME_TEST_UTIL_H_

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "platform/plugin_api.h"

namespace dsa::testing {

// Initialises `plugin` with a host that only records the platform it
// registers, and returns that descriptor (plugins keep it for the life of the
// process). Aborts with the plugin's message when initialisation fails: no
// test can run without it.
inline const DsaPlatformDescriptor& RegisteredPlatform(
    const DsaPluginApi* plugin) {
  const DsaPlatformDescriptor* captured = nullptr;
  DsaHostApi host;
  std::memset(&host, 0, sizeof(host));
  host.struct_size = sizeof(host);
  host.major_version = DSA_PLUGIN_API_MAJOR;
  host.minor_version = DSA_PLUGIN_API_MINOR;
  host.context = &captured;
  host.register_platform =
      [](void* context, const DsaPlatformDescriptor* platform, char*, size_t) {
        *static_cast<const DsaPlatformDescriptor**>(context) = platform;
        return DSA_STATUS_OK;
      };
  char error[256] = "";
  const DsaStatusCode code = plugin->initialize(&host, error, sizeof(error));
  if (code != DSA_STATUS_OK || captured == nullptr) {
    std::fprintf(stderr, "%s: initialize failed (%d): %s\n",
                 plugin->plugin_name, code, error);
    std::abort();
  }
  return *captured;
}

inline DsaDeviceInfo EmptyDeviceInfo() {
  DsaDeviceInfo info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  return info;
}

// Parses `--name=PATH` arguments (left after InitGoogleTest) into absolute
// paths, one per name in `paths` (whose keys are the expected names). A path
// with a slash makes dlopen load that file rather than search for a library.
// False, with a message on stderr, when an argument is unknown, missing or
// does not resolve.
inline bool ParsePathFlags(int argc, char** argv,
                           std::map<std::string, std::string>* paths) {
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const char* eq = std::strchr(arg, '=');
    const std::string name = std::strncmp(arg, "--", 2) == 0 && eq != nullptr
                                 ? std::string(arg + 2, eq)
                                 : std::string();
    auto it = paths->find(name);
    if (it == paths->end()) {
      std::fprintf(stderr, "unknown argument: %s\n", arg);
      return false;
    }
    char resolved[PATH_MAX];
    if (realpath(eq + 1, resolved) == nullptr) {
      std::fprintf(stderr, "cannot resolve --%s=%s\n", name.c_str(), eq + 1);
      return false;
    }
    it->second = resolved;
  }
  for (const auto& [name, path] : *paths) {
    if (path.empty()) {
      std::fprintf(stderr, "missing --%s=PATH\n", name.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace dsa::testing

#endif  // DSA_PLATFORM_RUNTIME_TEST_UTIL_H_
