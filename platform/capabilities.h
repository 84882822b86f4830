// Typed capabilities of a platform, as the model queries them.
//
// A platform plugin describes itself through the C ABI (plugin_api.h); the
// registry turns that into these C++ values. The model decides on these alone
// (is_cuda_alike, dense-MHA prefill, DCP support) and never includes a
// platform plugin's headers. The device architecture is a typed value, not a
// string, the way StreamExecutor distinguishes CUDA and ROCm compute
// capabilities.
#ifndef DSA_PLATFORM_CAPABILITIES_H_
#define DSA_PLATFORM_CAPABILITIES_H_

#include <cstdint>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dsa::platform {

enum class PlatformKind { kCpu, kRocm, kCuda };

// FP8 E4M3 variants used for KV caches.
enum class Fp8Format {
  kE4m3fn,    // OCP: max 448, has -0 and NaN (0x7f/0xff); gfx950, NVIDIA, CPU
  kE4m3fnuz,  // max 240, exponent bias 8, no -0, NaN is 0x80; gfx942
};

// Largest finite value of the format: 448 or 240.
float Fp8Max(Fp8Format format);
absl::string_view Fp8FormatName(Fp8Format format);  // "e4m3fn", "e4m3fnuz"
absl::StatusOr<Fp8Format> ParseFp8Format(absl::string_view name);

struct CpuArch {
  std::string name;  // "x86_64"
  bool operator==(const CpuArch& o) const { return name == o.name; }
};

struct RocmArch {
  std::string gfx;  // "gfx942" (MI300X), "gfx950" (MI355X)
  bool operator==(const RocmArch& o) const { return gfx == o.gfx; }
};

struct CudaComputeCapability {
  int major = 0;
  int minor = 0;
  bool operator==(const CudaComputeCapability& o) const {
    return major == o.major && minor == o.minor;
  }
};

using DeviceArch = std::variant<CpuArch, RocmArch, CudaComputeCapability>;

// "x86_64", "gfx942", "sm_90".
std::string DeviceArchName(const DeviceArch& arch);
// Parses a name for the given platform kind: "gfx942" for ROCm, "sm_90" or
// "sm90" or "9.0" for CUDA, anything non-empty for CPU.
absl::StatusOr<DeviceArch> ParseDeviceArch(PlatformKind kind,
                                           absl::string_view name);

absl::string_view PlatformKindName(PlatformKind kind);  // "cpu", "rocm", "cuda"

struct PlatformCapabilities {
  std::string platform_id;  // "cpu", "rocm", "cuda"
  PlatformKind kind = PlatformKind::kCpu;
  DeviceArch arch;
  bool is_accelerator = false;
  bool is_cuda_alike = false;  // CUDA or ROCm
  Fp8Format kv_cache_fp8_format = Fp8Format::kE4m3fn;
  int warp_size = 1;  // 64 on AMD CDNA, 32 on NVIDIA, 1 on CPU
  bool sparse_mla_dense_mha_prefill = false;
  bool sparse_mla_decode_context_parallel = false;
};

// What the platform's runtime reports about the machine.
struct DeviceInfo {
  int device_count = 0;
  std::string arch;  // of device 0, empty without a device
  std::string name;  // of device 0
  uint64_t total_memory_bytes = 0;
  int runtime_version = 0;
};

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_CAPABILITIES_H_
