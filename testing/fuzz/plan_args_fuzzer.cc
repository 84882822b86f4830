// Fuzz target: the `plan` tool's arguments (model/deepseek_v32/plan_tool.h).
//
// The input is the tool's argv, one argument per line; a line "---" ends the
// arguments, and what follows is the content of any model file named: a
// --model that looks like a path (contains '/' or ends in ".textproto") is
// pointed at a file of this process holding that content, so the tool never
// opens other files (a fifo or a device would hang or stall a run).
//
// The tool runs in full (parsing, model loading, capability query, planning,
// rendering) against a registry of the CPU, ROCm and CUDA platforms whose
// device probes are removed, so the plan never depends on the machine. It
// must exit 0 with output and nothing on stderr, or 2 with exactly one line
// on stderr and no output; JSON output is one balanced object.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/deepseek_v32/plan_tool.h"
#include "platform/cpu/cpu_platform.h"
#include "platform/cuda/cuda_platform.h"
#include "platform/plugin_api.h"
#include "platform/registry.h"
#include "platform/rocm/rocm_platform.h"

namespace dsa::model::deepseek_v32 {
namespace {

void Check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "plan_args_fuzzer: %s\n", what.c_str());
  std::abort();
}

// --- A registry of the real platform plugins without their device probes.

// The plugin whose initialize runs, and the host it registers into.
const DsaPluginApi* g_inner = nullptr;
const DsaHostApi* g_outer_host = nullptr;

DsaStatusCode RegisterWithoutProbe(void* context,
                                   const DsaPlatformDescriptor* platform,
                                   char* error, size_t error_size) {
  DsaPlatformDescriptor copy;
  std::memset(&copy, 0, sizeof(copy));
  std::memcpy(&copy, platform, std::min(platform->struct_size, sizeof(copy)));
  copy.struct_size = sizeof(copy);
  copy.probe_devices = nullptr;  // no device: default archs only
  return g_outer_host->register_platform(context, &copy, error, error_size);
}

DsaStatusCode InitializeWithoutProbe(const DsaHostApi* host, char* error,
                                     size_t error_size) {
  DsaHostApi filtered = *host;
  filtered.register_platform = &RegisterWithoutProbe;
  g_outer_host = host;
  return g_inner->initialize(&filtered, error, error_size);
}

const platform::Registry& Platforms() {
  static const platform::Registry* const registry = [] {
    auto* r = new platform::Registry();
    for (const DsaPluginApi* api :
         {platform::CpuPlatformPluginApi(), platform::RocmPlatformPluginApi(),
          platform::CudaPlatformPluginApi()}) {
      DsaPluginApi wrapped = *api;
      wrapped.initialize = &InitializeWithoutProbe;
      g_inner = api;
      const auto status = r->RegisterPlugin(&wrapped);
      Check(status.ok(), absl::StrCat("registering ", api->plugin_name, ": ",
                                      status.ToString()));
    }
    return r;
  }();
  return *registry;
}

// --- The model file any path argument is pointed at.

const std::string& ModelPath() {
  static const std::string* const path = [] {
    const char* dir = std::getenv("TEST_TMPDIR");
    if (dir == nullptr) dir = std::getenv("TMPDIR");
    auto* p = new std::string(absl::StrCat(dir != nullptr ? dir : "/tmp",
                                           "/plan_args_fuzzer.", getpid(),
                                           ".textproto"));
    std::atexit([] { std::remove(ModelPath().c_str()); });
    return p;
  }();
  return *path;
}

void WriteModelFile(const std::string& content) {
  std::ofstream out(ModelPath(), std::ios::binary | std::ios::trunc);
  out << content;
  Check(out.good(), "cannot write " + ModelPath());
}

// Balanced braces and brackets outside strings, one object, a final newline.
bool LooksLikeOneJsonObject(const std::string& s) {
  if (s.size() < 3 || s.front() != '{' || s.substr(s.size() - 2) != "}\n") {
    return false;
  }
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return false;  // control characters must be escaped
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    if (depth < 0 || (depth == 0 && i + 2 < s.size())) return false;
  }
  return depth == 0 && !in_string;
}

void Run(const std::string& input) {
  std::vector<std::string> args;
  std::string model_file;
  size_t begin = 0;
  while (begin <= input.size()) {
    size_t end = input.find('\n', begin);
    if (end == std::string::npos) end = input.size();
    std::string line = input.substr(begin, end - begin);
    begin = end + 1;
    if (line == "---") {
      if (begin < input.size()) model_file = input.substr(begin);
      break;
    }
    if (!line.empty() || end < input.size()) args.push_back(std::move(line));
  }
  for (std::string& arg : args) {
    if (!absl::StartsWith(arg, "--model=")) continue;
    const std::string value = arg.substr(8);
    if (absl::StrContains(value, '/') || absl::EndsWith(value, ".textproto")) {
      WriteModelFile(model_file);
      arg = "--model=" + ModelPath();
    }
  }
  bool json = false;
  for (const std::string& arg : args) {
    if (arg == "--format=json") json = true;
  }

  std::ostringstream out, err;
  const int rc = RunPlanTool(args, Platforms(), out, err);
  const std::string o = out.str(), e = err.str();
  if (rc == 0) {
    Check(e.empty(), "exit 0 with stderr: " + e);
    Check(!o.empty(), "exit 0 without output");
    if (json && !absl::StrContains(o, "usage:")) {
      Check(LooksLikeOneJsonObject(o), "--format=json printed: " + o);
    }
  } else {
    Check(rc == 2, absl::StrCat("exit status ", rc));
    Check(o.empty(), "a failure that printed output: " + o);
    Check(!e.empty() && e.back() == '\n' && e.find('\n') == e.size() - 1,
          "the error is not exactly one line: " + e);
  }
}

}  // namespace
}  // namespace dsa::model::deepseek_v32

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsa::model::deepseek_v32::Run(
      std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
