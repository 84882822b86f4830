// A host engine in miniature: loads plugin shared objects at run time,
// resolves the active platform and prints what the registry holds.
//
//   host [--plugins=a.so,b.so,...] [--platform=ID] [--arch=ARCH]
//
// Exit status: 0 on success; 1 when a plugin fails to load, the active
// platform cannot be resolved or the output cannot be written (one line on
// stderr); 2 on bad arguments (the problem and the usage line on stderr).
// Errors echo at most 80 characters of an argument.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "platform/capabilities.h"
#include "platform/plugin_file.h"
#include "platform/registry.h"

namespace {

using dsa::platform::DeviceArchName;
using dsa::platform::EchoForMessage;
using dsa::platform::Fp8FormatName;
using dsa::platform::Platform;
using dsa::platform::PlatformCapabilities;
using dsa::platform::Registry;

constexpr char kUsage[] =
    "usage: host [--plugins=a.so,b.so] [--platform=ID] [--arch=ARCH]";

// The most of an error line host prints, whatever a status message holds.
constexpr size_t kMaxErrorLineChars = 400;

int Usage(const std::string& problem) {
  std::fprintf(stderr, "host: %s\n%s\n", problem.c_str(), kUsage);
  return 2;
}

// One line on stderr for a failure after the arguments were accepted.
int Fail(const std::string& message) {
  std::fprintf(stderr, "host: %s\n",
               EchoForMessage(message, kMaxErrorLineChars).c_str());
  return 1;
}

// What was printed must reach stdout: `host > /dev/full` is an error.
int FlushOutput() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    return Fail(std::string("cannot write the output: ") +
                (errno != 0 ? std::strerror(errno) : "stream error"));
  }
  return 0;
}

// Platform ids and architecture names are short words; anything else is
// refused before the registry would echo it whole.
bool IsIdentifier(const std::string& value) {
  return !value.empty() && value.size() <= 64 &&
         std::all_of(value.begin(), value.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
                  c == ':' || c == '+';
         });
}

void PrintCapabilities(const PlatformCapabilities& c) {
  std::printf(
      "  arch %s: is_cuda_alike=%s fp8=%s (max %.0f) warp=%d "
      "dense_mha_prefill=%s decode_context_parallel=%s\n",
      DeviceArchName(c.arch).c_str(), c.is_cuda_alike ? "true" : "false",
      std::string(Fp8FormatName(c.kv_cache_fp8_format)).c_str(),
      dsa::platform::Fp8Max(c.kv_cache_fp8_format), c.warp_size,
      c.sparse_mla_dense_mha_prefill ? "yes" : "no",
      c.sparse_mla_decode_context_parallel ? "yes" : "no");
}

}  // namespace

int main(int argc, char** argv) {
  // --name=value only, each flag at most once; values echoed capped.
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s\n", kUsage);
      return FlushOutput();
    }
    const size_t eq = arg.find('=');
    const std::string name =
        arg.compare(0, 2, "--") == 0 ? arg.substr(2, eq - 2) : "";
    if (name != "plugins" && name != "platform" && name != "arch") {
      return Usage("unknown argument \"" + EchoForMessage(arg) + "\"");
    }
    if (eq == std::string::npos || eq + 1 == arg.size()) {
      return Usage("--" + name + " needs a value: --" + name + "=...");
    }
    if (!flags.emplace(name, arg.substr(eq + 1)).second) {
      return Usage("--" + name + " given twice");
    }
  }
  std::vector<std::string> plugins;
  for (absl::string_view p :
       absl::StrSplit(flags["plugins"], ',', absl::SkipEmpty())) {
    plugins.emplace_back(p);
  }
  const std::string platform_id = flags["platform"];
  const std::string arch = flags["arch"];
  for (const auto& [name, value] :
       {std::pair{"platform", platform_id}, std::pair{"arch", arch}}) {
    if (!value.empty() && !IsIdentifier(value)) {
      return Usage(std::string("--") + name + "=" + EchoForMessage(value) +
                   ": expected a name of at most 64 letters, digits and "
                   "_-.:+");
    }
  }

  Registry& registry = Registry::Global();
  for (const std::string& path : plugins) {
    absl::Status s = registry.LoadPlugin(path);
    if (!s.ok()) return Fail(s.ToString());
    std::printf("loaded %s\n", path.c_str());
  }
  if (!platform_id.empty()) registry.SelectPlatform(platform_id);

  for (const std::string& id : registry.PlatformIds()) {
    Platform p = *registry.GetPlatform(id);
    std::printf("platform %s (plugin %s), archs: %s (default %s)\n", id.c_str(),
                p.plugin_name().c_str(),
                absl::StrJoin(p.known_archs(), ", ").c_str(),
                p.default_arch().c_str());
    absl::StatusOr<dsa::platform::DeviceInfo> devices = p.ProbeDevices();
    if (!devices.ok()) {
      std::printf("  devices: probe failed: %s\n",
                  devices.status().ToString().c_str());
    } else if (devices->device_count == 0) {
      std::printf("  devices: none\n");
    } else {
      std::printf("  devices: %d, device 0: %s (%s, %.1f GiB)\n",
                  devices->device_count, devices->name.c_str(),
                  devices->arch.c_str(),
                  devices->total_memory_bytes / double(1ull << 30));
    }
    std::vector<std::string> ops = registry.KernelOps(id);
    std::printf("  kernels: %s\n",
                ops.empty() ? "none" : absl::StrJoin(ops, ", ").c_str());
  }

  absl::StatusOr<Platform> active = registry.ActivePlatform();
  if (!active.ok()) return Fail(active.status().ToString());
  absl::StatusOr<PlatformCapabilities> caps =
      arch.empty() ? active->Capabilities() : active->CapabilitiesForArch(arch);
  if (!caps.ok()) return Fail(caps.status().ToString());
  std::printf("active platform: %s%s\n", active->id().c_str(),
              platform_id.empty() ? " (resolved from the devices present)"
                                  : " (chosen with --platform)");
  PrintCapabilities(*caps);
  return FlushOutput();
}
