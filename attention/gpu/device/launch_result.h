// What every GPU launcher of attention/gpu returns: a code and, unless kOk, a
// message naming what is wrong. Plain C++ (no HIP or CUDA types), so that
// code built by the host compiler (the op kernels, tests, benchmarks) can
// call the launchers; device/launch_status.h turns a result into the Status
// an op kernel returns across the plugin boundary.
#ifndef DSA_ATTENTION_GPU_DEVICE_LAUNCH_RESULT_H_
#define DSA_ATTENTION_GPU_DEVICE_LAUNCH_RESULT_H_

#include <cstdarg>
#include <cstdint>
#include <cstdio>

namespace dsa::attention::gpu {

enum class LaunchCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,  // a size, pointer or alignment the kernel rejects
  kNoDevice = 2,         // the runtime reports no usable device
  kRuntimeError = 3,     // a runtime call or the launch failed
  kNotBuilt = 4,         // built without --config=cuda / --config=rocm
  kOutOfMemory = 5,      // an allocation failed for memory
};

// A code and, unless kOk, a NUL-terminated message.
struct LaunchResult {
  LaunchCode code = LaunchCode::kOk;
  char message[256] = {0};
  bool ok() const { return code == LaunchCode::kOk; }
};

// kNotBuilt for `what`: the answer of every launcher in a build without a
// GPU backend (each family's unbuilt.cc).
inline LaunchResult NotBuiltResult(const char* what) {
  LaunchResult r;
  r.code = LaunchCode::kNotBuilt;
  std::snprintf(r.message, sizeof(r.message),
                "%s: built without a GPU backend (use --config=cuda or "
                "--config=rocm)",
                what);
  return r;
}

// kInvalidArgument with "<op>: <printf-formatted detail>".
inline LaunchResult Invalid(const char* op, const char* format, ...) {
  LaunchResult r;
  r.code = LaunchCode::kInvalidArgument;
  int n = std::snprintf(r.message, sizeof(r.message), "%s: ", op);
  if (n < 0) n = 0;
  if (n < static_cast<int>(sizeof(r.message))) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(r.message + n, sizeof(r.message) - n, format, args);
    va_end(args);
  }
  return r;
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_LAUNCH_RESULT_H_
