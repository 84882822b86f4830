// Device side of vector_add.h; see that header.
#include "attention/gpu/device/vector_add.h"

#include <cstdio>

#include "attention/gpu/device/hip_compat.h"

namespace dsa::gpu {
namespace {

// Sum over one warp; every lane returns the warp's total.
template <int kWarp>
__device__ float WarpSum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += DSA_SHFL_XOR(v, offset, kWarp);
  }
  return v;
}

template <int kWarp>
__global__ void VectorAddKernel(const float* __restrict__ a,
                                const float* __restrict__ b,
                                float* __restrict__ out,
                                float* __restrict__ block_sums, int64_t n) {
  constexpr int kWarps = kVectorAddBlock / kWarp;
  __shared__ float warp_sums[kWarps];
  const int64_t i =
      static_cast<int64_t>(blockIdx.x) * kVectorAddBlock + threadIdx.x;
  float v = 0.0f;
  if (i < n) {
    v = a[i] + b[i];
    out[i] = v;
  }
  v = WarpSum<kWarp>(v);
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += warp_sums[w];
    block_sums[blockIdx.x] = total;
  }
}

GpuCallResult Fail(hipError_t err, const char* what, char* error,
                   size_t error_size) {
  if (error != nullptr && error_size > 0) {
    std::snprintf(error, error_size, "%s: %s (%d)", what,
                  hipGetErrorString(err), static_cast<int>(err));
  }
  return DsaIsNoDeviceError(err) ? GpuCallResult::kNoDevice
                                 : GpuCallResult::kRuntimeError;
}

}  // namespace

#if defined(DSA_GPU_CUDA)
const char* GpuBackendName() { return "cuda"; }
#else
const char* GpuBackendName() { return "rocm"; }
#endif

int GpuWarpSize() { return kDsaWarpSize; }

GpuCallResult DeviceVectorAdd(const float* a, const float* b, float* out,
                              float* block_sums, int64_t n, char* error,
                              size_t error_size) {
  if (n <= 0) return GpuCallResult::kOk;
  int count = 0;
  hipError_t err = hipGetDeviceCount(&count);
  if (err != hipSuccess)
    return Fail(err, "hipGetDeviceCount", error, error_size);
  if (count == 0)
    return Fail(hipErrorNoDevice, "hipGetDeviceCount", error, error_size);

  const int64_t blocks = (n + kVectorAddBlock - 1) / kVectorAddBlock;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  float* d_a = nullptr;
  float* d_b = nullptr;
  float* d_out = nullptr;
  float* d_sums = nullptr;
  GpuCallResult result = GpuCallResult::kOk;
  auto check = [&](hipError_t e, const char* what) {
    if (e != hipSuccess && result == GpuCallResult::kOk) {
      result = Fail(e, what, error, error_size);
    }
    return result == GpuCallResult::kOk;
  };
  if (check(hipMalloc(reinterpret_cast<void**>(&d_a), bytes), "hipMalloc") &&
      check(hipMalloc(reinterpret_cast<void**>(&d_b), bytes), "hipMalloc") &&
      check(hipMalloc(reinterpret_cast<void**>(&d_out), bytes), "hipMalloc") &&
      check(
          hipMalloc(reinterpret_cast<void**>(&d_sums), blocks * sizeof(float)),
          "hipMalloc") &&
      check(hipMemcpy(d_a, a, bytes, hipMemcpyHostToDevice), "hipMemcpy") &&
      check(hipMemcpy(d_b, b, bytes, hipMemcpyHostToDevice), "hipMemcpy")) {
    hipLaunchKernelGGL(VectorAddKernel<kDsaWarpSize>,
                       dim3(static_cast<unsigned>(blocks)),
                       dim3(kVectorAddBlock), 0, 0, d_a, d_b, d_out, d_sums, n);
    if (check(hipGetLastError(), "kernel launch") &&
        check(hipDeviceSynchronize(), "hipDeviceSynchronize") &&
        check(hipMemcpy(out, d_out, bytes, hipMemcpyDeviceToHost),
              "hipMemcpy")) {
      check(hipMemcpy(block_sums, d_sums, blocks * sizeof(float),
                      hipMemcpyDeviceToHost),
            "hipMemcpy");
    }
  }
  for (float* p : {d_a, d_b, d_out, d_sums}) {
    if (p != nullptr) (void)hipFree(p);
  }
  return result;
}

}  // namespace dsa::gpu
