// Programmatic dependent launch (CUDA, sm_90 and later): a kernel launched
// "after its prior grid" may be scheduled while the kernel before it on the
// stream is still draining, so its launch and its prologue (shared-memory
// carving, barrier initialisation) overlap the other's tail instead of
// following it.
//
// The contract a kernel launched that way keeps:
//   - WaitForPriorGrids() before its first access to global memory other
//     than its own parameters (reads of what earlier work on the stream
//     wrote, and writes of what it still reads): the wait returns once every
//     prior grid has completed and its writes are visible;
//   - LetDependentGridsLaunch() may come first: the next kernel, if it is
//     launched after its prior grid too, is then scheduled as soon as every
//     block of this one has started, and it waits in turn. (Every kernel of
//     such a chain waits before its first access, so completion is ordered
//     through the chain: the k-th waits for the (k-1)-th, which waited for
//     the one before.)
// Both are no-ops where the device code has no such control (AMD, NVIDIA
// before sm_90): the launcher asks DeviceFeatures::dependent_launch, true
// only where the loaded code has them, before it launches a kernel that way,
// and otherwise launches in plain stream order. A kernel launched in plain
// order is unaffected by either call.
//
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DEVICE_DEPENDENT_LAUNCH_H_
#define DSA_ATTENTION_GPU_DEVICE_DEPENDENT_LAUNCH_H_

#include <utility>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {

#if defined(DSA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DSA_GRID_DEPENDENCY_CONTROL 1
#endif

// Waits until the grids this one was launched after have completed and
// their memory is visible (griddepcontrol.wait).
__device__ __forceinline__ void WaitForPriorGrids() {
#if defined(DSA_GRID_DEPENDENCY_CONTROL)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel on the stream be scheduled once every block of this
// one has made this call or exited (griddepcontrol.launch_dependents).
__device__ __forceinline__ void LetDependentGridsLaunch() {
#if defined(DSA_GRID_DEPENDENCY_CONTROL)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches `kernel` on `stream`, after its prior grid (above) when
// `after_prior` holds, else in plain stream order; the launch's error as
// CheckLaunch(op) reports it. `after_prior` must only be true for a kernel
// that keeps the contract above, on a device whose DeviceFeatures say
// dependent_launch.
template <typename... Params, typename... Args>
LaunchResult LaunchKernel(bool after_prior, void (*kernel)(Params...),
                          dim3 grid, dim3 block, size_t shared_bytes,
                          hipStream_t stream, const char* op, Args&&... args) {
#if defined(DSA_GPU_CUDA)
  if (after_prior) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    const cudaError_t err =
        cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // reported here, not by the next launch
      return FromError(err, op);
    }
    return CheckLaunch(op);
  }
#else
  (void)after_prior;
#endif
  hipLaunchKernelGGL(kernel, grid, block, shared_bytes, stream,
                     std::forward<Args>(args)...);
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_DEPENDENT_LAUNCH_H_
