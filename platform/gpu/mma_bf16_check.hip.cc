// Device side of mma_bf16_check.h; see that header.
#include "platform/gpu/mma_bf16_check.h"

#include <cstdio>

#include "platform/gpu/hip_compat.h"
#include "platform/gpu/mma.h"

namespace dsa::gpu {
namespace {

using Mma = Bf16WarpMma;
constexpr int kChunk = 64;  // k staged per step
constexpr int kPad = 8;     // keeps rows 16-byte aligned, shifts banks

__global__ void ProductKernel(const uint16_t* __restrict__ a,
                              const uint16_t* __restrict__ b, bool b_k_major,
                              float* __restrict__ c, int n, int k) {
  constexpr int kLdA = kChunk + kPad;
  constexpr int kLdBT = Mma::kN + kPad;
  __shared__ __align__(16) uint16_t a_s[Mma::kM * kLdA];
  // B as [kN][kChunk] (k contiguous) or [kChunk][kN] (n contiguous).
  constexpr int kBElems =
      kChunk * kLdBT > Mma::kN * kLdA ? kChunk * kLdBT : Mma::kN * kLdA;
  __shared__ __align__(16) uint16_t b_s[kBElems];
  const int lane = threadIdx.x;
  const int row0 = blockIdx.y * Mma::kM;
  const int col0 = blockIdx.x * Mma::kN;
  Mma::C acc;
  Mma::Zero(acc);
  for (int k0 = 0; k0 < k; k0 += kChunk) {
    for (int i = lane; i < Mma::kM * kChunk; i += kDsaWarpSize) {
      const int r = i / kChunk, l = i % kChunk;
      a_s[r * kLdA + l] = a[static_cast<int64_t>(row0 + r) * k + k0 + l];
    }
    if (b_k_major) {
      for (int i = lane; i < kChunk * Mma::kN; i += kDsaWarpSize) {
        const int l = i / Mma::kN, j = i % Mma::kN;
        b_s[l * kLdBT + j] = b[static_cast<int64_t>(k0 + l) * n + col0 + j];
      }
    } else {
      for (int i = lane; i < Mma::kN * kChunk; i += kDsaWarpSize) {
        const int j = i / kChunk, l = i % kChunk;
        b_s[j * kLdA + l] = b[static_cast<int64_t>(col0 + j) * k + k0 + l];
      }
    }
    __syncthreads();
    for (int kk = 0; kk < kChunk; kk += Mma::kK) {
      Mma::A fa;
      Mma::B fb;
      Mma::LoadA(fa, a_s + kk, kLdA, lane);
      if (b_k_major) {
        Mma::LoadBTrans(fb, b_s + kk * kLdBT, kLdBT, lane);
      } else {
        Mma::LoadB(fb, b_s + kk, kLdA, lane);
      }
      Mma::Run(acc, fa, fb);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < Mma::kCPerLane; ++i) {
    c[static_cast<int64_t>(row0 + Mma::CRow(lane, i)) * n + col0 +
      Mma::CCol(lane, i)] = acc.v[i];
  }
}

__global__ void ConvertKernel(const float* __restrict__ in,
                              uint16_t* __restrict__ bits,
                              float* __restrict__ back,
                              uint32_t* __restrict__ packed, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) {
    bits[i] = FloatToBf16(in[i]);
    back[i] = Bf16ToFloat(bits[i]);
  }
  if (i < count / 2) packed[i] = PackBf16x2(in[2 * i], in[2 * i + 1]);
}

MmaCheckResult Fail(hipError_t err, const char* what, char* error,
                    size_t error_size) {
  if (error != nullptr && error_size > 0) {
    std::snprintf(error, error_size, "%s: %s (%d)", what,
                  hipGetErrorString(err), static_cast<int>(err));
  }
  return DsaIsNoDeviceError(err) ? MmaCheckResult::kNoDevice
                                 : MmaCheckResult::kRuntimeError;
}

// Device buffers freed on every path.
struct Buffers {
  void* p[8] = {};
  int n = 0;
  ~Buffers() {
    for (int i = 0; i < n; ++i) (void)hipFree(p[i]);
  }
  hipError_t Alloc(void** out, size_t bytes) {
    const hipError_t e = hipMalloc(out, bytes);
    if (e == hipSuccess) p[n++] = *out;
    return e;
  }
};

}  // namespace

Bf16MmaShape Bf16MmaShapeOfBuild() {
  Bf16MmaShape s;
  s.m = Mma::kM;
  s.n = Mma::kN;
  s.k = Mma::kK;
  s.instruction = Mma::kInstruction;
  return s;
}

MmaCheckResult Bf16MmaProduct(const uint16_t* a, const uint16_t* b,
                              bool b_k_major, float* c, int m, int n, int k,
                              char* error, size_t error_size) {
  if (m <= 0 || n <= 0 || k <= 0 || m % Mma::kM != 0 || n % Mma::kN != 0 ||
      k % kChunk != 0) {
    std::snprintf(error, error_size,
                  "m=%d n=%d k=%d: need multiples of %d, %d and %d", m, n, k,
                  Mma::kM, Mma::kN, kChunk);
    return MmaCheckResult::kInvalidArgument;
  }
  int count = 0;
  hipError_t err = hipGetDeviceCount(&count);
  if (err != hipSuccess)
    return Fail(err, "hipGetDeviceCount", error, error_size);
  if (count == 0) {
    return Fail(hipErrorNoDevice, "hipGetDeviceCount", error, error_size);
  }
  const size_t a_bytes = static_cast<size_t>(m) * k * 2;
  const size_t b_bytes = static_cast<size_t>(n) * k * 2;
  const size_t c_bytes = static_cast<size_t>(m) * n * 4;
  Buffers buf;
  void *d_a, *d_b, *d_c;
  if ((err = buf.Alloc(&d_a, a_bytes)) != hipSuccess ||
      (err = buf.Alloc(&d_b, b_bytes)) != hipSuccess ||
      (err = buf.Alloc(&d_c, c_bytes)) != hipSuccess) {
    return Fail(err, "hipMalloc", error, error_size);
  }
  if ((err = hipMemcpy(d_a, a, a_bytes, hipMemcpyHostToDevice)) != hipSuccess ||
      (err = hipMemcpy(d_b, b, b_bytes, hipMemcpyHostToDevice)) != hipSuccess ||
      (err = hipMemset(d_c, 0xff, c_bytes)) != hipSuccess) {
    return Fail(err, "hipMemcpy", error, error_size);
  }
  hipLaunchKernelGGL(
      ProductKernel, dim3(n / Mma::kN, m / Mma::kM), dim3(kDsaWarpSize), 0, 0,
      static_cast<const uint16_t*>(d_a), static_cast<const uint16_t*>(d_b),
      b_k_major, static_cast<float*>(d_c), n, k);
  if ((err = hipGetLastError()) != hipSuccess) {
    return Fail(err, "ProductKernel launch", error, error_size);
  }
  if ((err = hipMemcpy(c, d_c, c_bytes, hipMemcpyDeviceToHost)) != hipSuccess) {
    return Fail(err, "hipMemcpy", error, error_size);
  }
  return MmaCheckResult::kOk;
}

MmaCheckResult Bf16Convert(const float* in, uint16_t* bits, float* back,
                           uint32_t* packed, int64_t count, char* error,
                           size_t error_size) {
  if (count <= 0) return MmaCheckResult::kOk;
  int devices = 0;
  hipError_t err = hipGetDeviceCount(&devices);
  if (err != hipSuccess)
    return Fail(err, "hipGetDeviceCount", error, error_size);
  if (devices == 0) {
    return Fail(hipErrorNoDevice, "hipGetDeviceCount", error, error_size);
  }
  Buffers buf;
  void *d_in, *d_bits, *d_back, *d_packed;
  const size_t n = static_cast<size_t>(count);
  if ((err = buf.Alloc(&d_in, n * 4)) != hipSuccess ||
      (err = buf.Alloc(&d_bits, n * 2)) != hipSuccess ||
      (err = buf.Alloc(&d_back, n * 4)) != hipSuccess ||
      (err = buf.Alloc(&d_packed, (n / 2 + 1) * 4)) != hipSuccess) {
    return Fail(err, "hipMalloc", error, error_size);
  }
  if ((err = hipMemcpy(d_in, in, n * 4, hipMemcpyHostToDevice)) != hipSuccess) {
    return Fail(err, "hipMemcpy", error, error_size);
  }
  hipLaunchKernelGGL(
      ConvertKernel, dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), 0,
      0, static_cast<const float*>(d_in), static_cast<uint16_t*>(d_bits),
      static_cast<float*>(d_back), static_cast<uint32_t*>(d_packed), count);
  if ((err = hipGetLastError()) != hipSuccess) {
    return Fail(err, "ConvertKernel launch", error, error_size);
  }
  if ((err = hipMemcpy(bits, d_bits, n * 2, hipMemcpyDeviceToHost)) !=
          hipSuccess ||
      (err = hipMemcpy(back, d_back, n * 4, hipMemcpyDeviceToHost)) !=
          hipSuccess ||
      (err = hipMemcpy(packed, d_packed, n / 2 * 4, hipMemcpyDeviceToHost)) !=
          hipSuccess) {
    return Fail(err, "hipMemcpy", error, error_size);
  }
  return MmaCheckResult::kOk;
}

}  // namespace dsa::gpu
