// A small real kernel that proves the GPU toolchains end to end: the same HIP
// source built by hipcc (--config=rocm) and by nvcc through hip_compat.h
// (--config=cuda), launched from code compiled by the C++ compiler.
//
// The kernel adds two vectors and reduces each block's sums with warp
// shuffles, so both the element-wise path and the warp-width parameter
// (64 on AMD, 32 on NVIDIA) are exercised.
#ifndef DSA_PLATFORM_GPU_VECTOR_ADD_H_
#define DSA_PLATFORM_GPU_VECTOR_ADD_H_

#include <cstddef>
#include <cstdint>

namespace dsa::gpu {

enum class GpuCallResult : int {
  kOk = 0,
  kNoDevice = 1,      // the runtime reports no usable device
  kRuntimeError = 2,  // a runtime call or a launch failed; see the message
  kNotBuilt = 3,      // built without --config=rocm / --config=cuda
};

// "rocm", "cuda" or "none": which device compiler built this library.
const char* GpuBackendName();

// The warp width the device code was compiled for (0 when not built).
int GpuWarpSize();

// out[i] = a[i] + b[i] on the first device, for host arrays of n floats.
// block_sums receives one partial sum of `out` per 256-element block
// (ceil(n / 256) entries), each reduced on the device with warp shuffles.
// On failure, `error` holds a message (NUL-terminated, truncated to fit).
GpuCallResult DeviceVectorAdd(const float* a, const float* b, float* out,
                              float* block_sums, int64_t n, char* error,
                              size_t error_size);

inline constexpr int kVectorAddBlock = 256;

}  // namespace dsa::gpu

#endif  // DSA_PLATFORM_GPU_VECTOR_ADD_H_
