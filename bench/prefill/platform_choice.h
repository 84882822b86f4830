// Which platform prefill_bench runs on, from --platform and --arch: the
// capabilities its skip decision reads and the platform whose kernels and
// memory execute the step.
//
//   auto           a GPU platform with a device and this binary's kernels
//                  for it; else emulated-rocm
//   cpu/rocm/cuda  that platform; a GPU one needs a device and kernels
//   emulated-rocm  ROCm's registered capabilities (gfx950, the seed's
//                  MI355X, unless --arch says otherwise) executing the CPU
//                  kernels; every output says so
#ifndef DSA_BENCH_PREFILL_PLATFORM_CHOICE_H_
#define DSA_BENCH_PREFILL_PLATFORM_CHOICE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "platform/capabilities.h"
#include "platform/registry.h"

namespace dsa::prefill_bench {

// The values --platform takes, in the order --help lists them.
inline constexpr const char* kPlatformChoices[] = {"auto", "cpu", "rocm",
                                                   "cuda", "emulated-rocm"};
inline constexpr char kEmulatedRocm[] = "emulated-rocm";
inline constexpr char kEmulatedDefaultArch[] = "gfx950";  // the seed's MI355X

// What the outputs say about the platform.
struct PlatformInfo {
  std::string name;  // cpu, rocm, cuda, emulated-rocm
  std::string arch;
  bool emulated = false;
  std::string executes_on;  // the platform whose kernels and memory run it
  bool is_cuda_alike = false;
  std::string note;  // why auto chose it, when it matters

  // The step runs on the host: every op synchronous, no device memory.
  bool executes_on_cpu() const { return executes_on == "cpu"; }
};

struct ResolvedPlatform {
  PlatformInfo info;
  platform::PlatformCapabilities caps;     // what the decision reads
  std::optional<platform::Platform> exec;  // kernels and memory
};

// `platform` is one of kPlatformChoices; `arch` empty for the default.
// InvalidArgument for an unknown --arch; FailedPrecondition for a platform
// this binary or this machine cannot run (no device, no kernels, ROCm not
// registered), naming what to use instead.
absl::StatusOr<ResolvedPlatform> ResolvePlatform(
    const platform::Registry& registry, const std::string& platform,
    const std::string& arch);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_PLATFORM_CHOICE_H_
