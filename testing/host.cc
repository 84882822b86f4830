// A host engine in miniature: loads plugin shared objects at run time,
// resolves the active platform and prints what the registry holds.
//
//   host [--plugins=a.so,b.so,...] [--platform=ID] [--arch=ARCH]
//
// Exit status: 0 on success, 1 when a plugin fails to load or the active
// platform cannot be resolved, 2 on bad arguments.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "platform/capabilities.h"
#include "platform/registry.h"

namespace {

using dsa::platform::DeviceArchName;
using dsa::platform::Fp8FormatName;
using dsa::platform::Platform;
using dsa::platform::PlatformCapabilities;
using dsa::platform::Registry;

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "host: %s\nusage: host [--plugins=a.so,b.so] [--platform=ID] "
               "[--arch=ARCH]\n",
               problem.c_str());
  return 2;
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
  std::vector<std::string> plugins;
  std::string platform_id, arch;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--plugins=", 0) == 0) {
      for (absl::string_view p :
           absl::StrSplit(arg.substr(10), ',', absl::SkipEmpty())) {
        plugins.emplace_back(p);
      }
    } else if (arg.rfind("--platform=", 0) == 0) {
      platform_id = arg.substr(11);
    } else if (arg.rfind("--arch=", 0) == 0) {
      arch = arg.substr(7);
    } else {
      return Usage("unknown argument '" + arg + "'");
    }
  }

  Registry& registry = Registry::Global();
  for (const std::string& path : plugins) {
    absl::Status s = registry.LoadPlugin(path);
    if (!s.ok()) {
      std::fprintf(stderr, "host: %s\n", s.ToString().c_str());
      return 1;
    }
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
  if (!active.ok()) {
    std::fprintf(stderr, "host: %s\n", active.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<PlatformCapabilities> caps =
      arch.empty() ? active->Capabilities() : active->CapabilitiesForArch(arch);
  if (!caps.ok()) {
    std::fprintf(stderr, "host: %s\n", caps.status().ToString().c_str());
    return 1;
  }
  std::printf("active platform: %s%s\n", active->id().c_str(),
              platform_id.empty() ? " (resolved from the devices present)"
                                  : " (chosen with --platform)");
  PrintCapabilities(*caps);
  return 0;
}
