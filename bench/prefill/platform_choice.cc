// --platform and --arch resolved against the registry (platform_choice.h).
#include "bench/prefill/platform_choice.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "platform/status_macros.h"

namespace dsa::prefill_bench {
namespace {

using model::deepseek_v32::AttentionKernels;

bool HasDevice(const platform::Registry& registry, const std::string& id) {
  if (!registry.HasPlatform(id)) return false;
  absl::StatusOr<platform::Platform> p = registry.GetPlatform(id);
  if (!p.ok()) return false;
  absl::StatusOr<platform::DeviceInfo> devices = p->ProbeDevices();
  return devices.ok() && devices->device_count > 0;
}

absl::StatusOr<ResolvedPlatform> Emulated(const platform::Registry& registry,
                                          const std::string& arch,
                                          std::string note) {
  ResolvedPlatform r;
  absl::StatusOr<platform::Platform> rocm = registry.GetPlatform("rocm");
  if (!rocm.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--platform=emulated-rocm: the ROCm platform is not registered in "
        "this binary: ",
        rocm.status().message()));
  }
  absl::StatusOr<platform::PlatformCapabilities> caps =
      rocm->CapabilitiesForArch(arch.empty() ? kEmulatedDefaultArch : arch);
  if (!caps.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--arch: ", caps.status().message()));
  }
  DSA_ASSIGN_OR_RETURN(platform::Platform cpu, registry.GetPlatform("cpu"));
  r.caps = *caps;
  r.exec = cpu;
  r.info.name = kEmulatedRocm;
  r.info.arch = platform::DeviceArchName(caps->arch);
  r.info.emulated = true;
  r.info.executes_on = "cpu";
  r.info.is_cuda_alike = caps->is_cuda_alike;
  r.info.note = std::move(note);
  return r;
}

absl::StatusOr<ResolvedPlatform> RealPlatform(
    const platform::Registry& registry, const std::string& id,
    const std::string& arch) {
  absl::StatusOr<platform::Platform> p = registry.GetPlatform(id);
  if (!p.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--platform=", id, ": ", p.status().message()));
  }
  if (p->is_accelerator() && !HasDevice(registry, id)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--platform=", id, ": no ", id,
        " device on this machine; use --platform=emulated-rocm (ROCm's "
        "decision on the CPU kernels) or --platform=auto"));
  }
  absl::StatusOr<AttentionKernels> kernels =
      AttentionKernels::Load(registry, id);
  if (!kernels.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--platform=", id, ": this binary has no attention kernels for ", id,
        " (", kernels.status().message(),
        "); the GPU path is not built yet, use --platform=emulated-rocm"));
  }
  absl::StatusOr<platform::PlatformCapabilities> caps =
      arch.empty() ? p->Capabilities() : p->CapabilitiesForArch(arch);
  if (!caps.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--arch: ", caps.status().message()));
  }
  ResolvedPlatform r;
  r.caps = *caps;
  r.exec = *p;
  r.info.name = id;
  r.info.arch = platform::DeviceArchName(caps->arch);
  r.info.emulated = false;
  r.info.executes_on = id;
  r.info.is_cuda_alike = caps->is_cuda_alike;
  return r;
}

}  // namespace

absl::StatusOr<ResolvedPlatform> ResolvePlatform(
    const platform::Registry& registry, const std::string& platform,
    const std::string& arch) {
  if (platform == kEmulatedRocm) return Emulated(registry, arch, "");
  if (platform != "auto") {
    DSA_ASSIGN_OR_RETURN(ResolvedPlatform r,
                         RealPlatform(registry, platform, arch));
    if (!r.caps.is_cuda_alike) {
      r.info.note =
          absl::StrCat(r.info.name,
                       " is not CUDA-alike: the skip never applies there, so "
                       "the skip arm does main's work (an A/A comparison)");
    }
    return r;
  }
  // auto: a real GPU platform when a device is present and this binary has
  // its kernels; else ROCm's decision on the CPU kernels.
  std::vector<std::string> without_kernels;
  for (const std::string id : {"rocm", "cuda"}) {
    if (!HasDevice(registry, id)) continue;
    if (!AttentionKernels::Load(registry, id).ok()) {
      without_kernels.push_back(id);
      continue;
    }
    return RealPlatform(registry, id, arch);
  }
  std::string note = "auto: no GPU device";
  if (!without_kernels.empty()) {
    note = absl::StrCat("auto: a ", absl::StrJoin(without_kernels, "/"),
                        " device is present but this binary has no attention "
                        "kernels for it yet");
  }
  return Emulated(registry, arch, std::move(note));
}

}  // namespace dsa::prefill_bench
