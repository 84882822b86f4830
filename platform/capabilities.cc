#include "platform/capabilities.h"

#include <string>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dsa::platform {

float Fp8Max(Fp8Format format) {
  switch (format) {
    case Fp8Format::kE4m3fn:
      return 448.0f;
    case Fp8Format::kE4m3fnuz:
      return 240.0f;
  }
  return 0.0f;
}

absl::string_view Fp8FormatName(Fp8Format format) {
  switch (format) {
    case Fp8Format::kE4m3fn:
      return "e4m3fn";
    case Fp8Format::kE4m3fnuz:
      return "e4m3fnuz";
  }
  return "unknown";
}

absl::StatusOr<Fp8Format> ParseFp8Format(absl::string_view name) {
  if (name == "e4m3fn") return Fp8Format::kE4m3fn;
  if (name == "e4m3fnuz") return Fp8Format::kE4m3fnuz;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown fp8 format '", name, "' (expected e4m3fn or e4m3fnuz)"));
}

absl::string_view PlatformKindName(PlatformKind kind) {
  switch (kind) {
    case PlatformKind::kCpu:
      return "cpu";
    case PlatformKind::kRocm:
      return "rocm";
    case PlatformKind::kCuda:
      return "cuda";
  }
  return "unknown";
}

std::string DeviceArchName(const DeviceArch& arch) {
  struct Visitor {
    std::string operator()(const CpuArch& a) const { return a.name; }
    std::string operator()(const RocmArch& a) const { return a.gfx; }
    std::string operator()(const CudaComputeCapability& a) const {
      return absl::StrCat("sm_", a.major, a.minor);
    }
  };
  return std::visit(Visitor{}, arch);
}

namespace {

absl::StatusOr<CudaComputeCapability> ParseCudaArch(absl::string_view name) {
  absl::string_view s = name;
  // "9.0"
  if (s.find('.') != absl::string_view::npos) {
    std::pair<absl::string_view, absl::string_view> parts =
        absl::StrSplit(s, absl::MaxSplits('.', 1));
    int major = 0, minor = 0;
    if (absl::SimpleAtoi(parts.first, &major) &&
        absl::SimpleAtoi(parts.second, &minor) && major > 0 && minor >= 0 &&
        minor < 10) {
      return CudaComputeCapability{major, minor};
    }
  } else {
    // "sm_90", "sm90", "sm_90a"
    if (absl::ConsumePrefix(&s, "sm_") || absl::ConsumePrefix(&s, "sm")) {
      absl::ConsumeSuffix(&s, "a");
      int value = 0;
      if (s.size() >= 2 && absl::SimpleAtoi(s, &value) && value >= 10) {
        return CudaComputeCapability{value / 10, value % 10};
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot parse CUDA architecture '", name, "' (expected e.g. sm_90)"));
}

}  // namespace

absl::StatusOr<DeviceArch> ParseDeviceArch(PlatformKind kind,
                                           absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("empty device architecture name");
  }
  switch (kind) {
    case PlatformKind::kCpu:
      return DeviceArch(CpuArch{std::string(name)});
    case PlatformKind::kRocm: {
      // "gfx942" or "gfx942:sramecc+:xnack-" (target id features dropped).
      absl::string_view gfx = name.substr(0, name.find(':'));
      if (!absl::StartsWith(gfx, "gfx") || gfx.size() < 6) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot parse ROCm architecture '", name,
                         "' (expected e.g. gfx942)"));
      }
      return DeviceArch(RocmArch{absl::AsciiStrToLower(gfx)});
    }
    case PlatformKind::kCuda: {
      absl::StatusOr<CudaComputeCapability> cc = ParseCudaArch(name);
      if (!cc.ok()) return cc.status();
      return DeviceArch(*cc);
    }
  }
  return absl::InvalidArgumentError("unknown platform kind");
}

}  // namespace dsa::platform
