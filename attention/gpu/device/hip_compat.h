// One spelling for GPU kernels on AMD and NVIDIA.
//
// Kernels in this project are written once, in HIP. On AMD they are compiled
// by hipcc against the HIP runtime. On NVIDIA they are compiled by nvcc, and
// this header maps the HIP names they use onto the CUDA runtime. It plays the
// role Debian's hip/nvidia_detail headers would, but those are HIP 5.2's and
// no longer compile against CUDA 13 (they use runtime APIs removed in CUDA 12),
// so the project keeps its own small map, covering only what its kernels use.
//
// The wavefront/warp width differs (64 on AMD CDNA, 32 on NVIDIA). Kernels
// never hard-code it: they take `kDsaWarpSize` (a compile-time constant of the
// device pass) or a template parameter.
//
// Include this header only from sources built by gpu_kernel_library(); host
// code compiled by the C++ compiler talks to kernels through plain C++ headers.
#ifndef DSA_PLATFORM_GPU_HIP_COMPAT_H_
#define DSA_PLATFORM_GPU_HIP_COMPAT_H_

#if defined(DSA_GPU_CUDA)

#include <cuda_runtime.h>

using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipDeviceProp_t = cudaDeviceProp;

#define hipSuccess cudaSuccess
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorIllegalAddress cudaErrorIllegalAddress
#define hipErrorLaunchFailure cudaErrorLaunchFailure
#define hipErrorLaunchOutOfResources cudaErrorLaunchOutOfResources
#define hipErrorUnknown cudaErrorUnknown
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice

#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
// Stream-ordered allocation: the scratch arenas (device/scratch_arena.h)
// grow on a call's stream, from the runtime's pool, and give an outgrown
// block back on it.
#define hipMallocAsync cudaMallocAsync
#define hipFreeAsync cudaFreeAsync
#define hipStreamPerThread cudaStreamPerThread
#define hipStreamCaptureStatus cudaStreamCaptureStatus
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define hipStreamIsCapturing cudaStreamIsCapturing
// More than 48 KiB of dynamic shared memory must be asked for per kernel.
#define hipFuncSetAttribute(fn, attr, value) \
  cudaFuncSetAttribute((fn), (attr), (value))
#define hipFuncAttributeMaxDynamicSharedMemorySize \
  cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeWarpSize cudaDevAttrWarpSize
#define hipDeviceAttributeMaxSharedMemoryPerBlock \
  cudaDevAttrMaxSharedMemoryPerBlockOptin

// hipLaunchKernelGGL(kernel, grid, block, shared_bytes, stream, args...)
#define hipLaunchKernelGGL(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__)

// Warp-level primitives: HIP's unmasked forms map to CUDA's full-mask forms.
#define DSA_FULL_WARP_MASK 0xffffffffu
template <typename T>
__device__ __forceinline__ T __shfl_xor_compat(T value, int lane_mask,
                                               int width) {
  return __shfl_xor_sync(DSA_FULL_WARP_MASK, value, lane_mask, width);
}
template <typename T>
__device__ __forceinline__ T __shfl_down_compat(T value, unsigned delta,
                                                int width) {
  return __shfl_down_sync(DSA_FULL_WARP_MASK, value, delta, width);
}
#define DSA_SHFL_XOR(value, lane_mask, width) \
  __shfl_xor_compat((value), (lane_mask), (width))
#define DSA_SHFL_DOWN(value, delta, width) \
  __shfl_down_compat((value), (delta), (width))
template <typename T>
__device__ __forceinline__ T __shfl_up_compat(T value, unsigned delta,
                                              int width) {
  return __shfl_up_sync(DSA_FULL_WARP_MASK, value, delta, width);
}
#define DSA_SHFL_UP(value, delta, width) \
  __shfl_up_compat((value), (delta), (width))

inline constexpr int kDsaWarpSize = 32;

// "No usable device": no GPU, or no driver at all (a machine without one
// reports an insufficient driver rather than no device).
inline bool DsaIsNoDeviceError(hipError_t err) {
  return err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver;
}

#elif defined(DSA_GPU_ROCM)

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime.h>

#define DSA_SHFL_XOR(value, lane_mask, width) \
  __shfl_xor((value), (lane_mask), (width))
#define DSA_SHFL_DOWN(value, delta, width) \
  __shfl_down((value), (delta), (width))
#define DSA_SHFL_UP(value, delta, width) __shfl_up((value), (delta), (width))

// Every target this project builds for AMD (gfx90a, gfx940, gfx942, gfx950)
// is CDNA, with 64-wide wavefronts.
inline constexpr int kDsaWarpSize = 64;

inline bool DsaIsNoDeviceError(hipError_t err) {
  return err == hipErrorNoDevice || err == hipErrorInsufficientDriver;
}

#else
#error "hip_compat.h is for device code: build it with gpu_kernel_library()"
#endif

#endif  // DSA_PLATFORM_GPU_HIP_COMPAT_H_
