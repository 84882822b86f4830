// Device side of mma_bf16_check.h; see that header.
#include "attention/gpu/device/mma_bf16_check.h"

#include <cstdio>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"

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

#if defined(DSA_GPU_CUDA)
// One warpgroup: A [64][64] staged in the core-matrix layout (row groups
// 64 * 16 bytes apart) and B, C [64][kN] written from the accumulators.
// kMnB false: B [kN][64] K-major (Issue), row groups 64 * 16 bytes apart.
// kMnB true: B [64][kN] (k rows, n contiguous) staged MN-major (IssueMnB):
// core matrices of 8 k x 8 n, n groups 128 bytes apart, k groups kN * 16.
// kSw128: both in the 128-byte swizzled layout instead (OffsetSw128, one
// 64-k atom for A and a K-major B; MN-major B in atoms of 64 n, 64 * 128
// bytes apart), through IssueSw128 / IssueSw128MnB.
// flag[0] = 1 where the warpgroup product exists.
template <int kN, bool kMnB, bool kSw128 = false>
__global__ void WarpgroupProductKernel(const uint16_t* __restrict__ a,
                                       const uint16_t* __restrict__ b,
                                       float* __restrict__ c, int* flag) {
  using Wg = WarpgroupBf16Mma<kN>;
  constexpr int kK = 64;
  constexpr int kGroup = kK * 16;
  constexpr int kBKGroup = kN * 16;
  __shared__ __align__(1024) uint8_t a_s[64 * kK * 2];
  __shared__ __align__(1024) uint8_t b_s[kN * kK * 2];
  if constexpr (!kHasWarpgroupBf16Mma) {
    if (threadIdx.x == 0) *flag = 0;
    return;
  } else {
    if (threadIdx.x == 0) *flag = 1;
    for (int i = threadIdx.x; i < 64 * kK; i += blockDim.x) {
      const uint32_t off = kSw128 ? Wg::OffsetSw128(i / kK, i % kK, 64 * 128)
                                  : Wg::Offset(i / kK, i % kK, kGroup);
      *reinterpret_cast<uint16_t*>(a_s + off) = a[i];
    }
    for (int i = threadIdx.x; i < kN * kK; i += blockDim.x) {
      if constexpr (kSw128 && kMnB) {
        // (k, n): row k of the atom of n / 64.
        const int k = i / kN, n = i % kN;
        *reinterpret_cast<uint16_t*>(b_s + Wg::OffsetSw128(k, n, 64 * 128)) =
            b[i];
      } else if constexpr (kSw128) {
        *reinterpret_cast<uint16_t*>(
            b_s + Wg::OffsetSw128(i / kK, i % kK, kN * 128)) = b[i];
      } else if constexpr (kMnB) {
        const int k = i / kN, n = i % kN;
        *reinterpret_cast<uint16_t*>(b_s + (k / 8) * kBKGroup + (n / 8) * 128 +
                                     (k % 8) * 16 + (n % 8) * 2) = b[i];
      } else {
        *reinterpret_cast<uint16_t*>(b_s + Wg::Offset(i / kK, i % kK, kGroup)) =
            b[i];
      }
    }
    Wg::FenceStores();
    __syncthreads();
    float acc[Wg::kAccPerThread];
    if constexpr (kSw128 && kMnB) {
      Wg::template IssueSw128MnB<kK>(acc, a_s, 64 * 128, b_s, 64 * 128, false);
    } else if constexpr (kSw128) {
      Wg::template IssueSw128<kK>(acc, a_s, 64 * 128, b_s, kN * 128, false);
    } else if constexpr (kMnB) {
      Wg::template IssueMnB<kK>(acc, a_s, kGroup, b_s, kBKGroup, 128, false);
    } else {
      Wg::template Issue<kK>(acc, a_s, kGroup, b_s, kGroup, false);
    }
    Wg::Wait(acc);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int i = 0; i < Wg::kAccPerThread; ++i) {
      c[Wg::AccRow(warp, lane, i) * kN + Wg::AccCol(lane, i)] = acc[i];
    }
  }
}
#endif

#if defined(DSA_GPU_CUDA)
// The descriptor-driven forms the attention bodies issue (IssueWith with B
// MN-major, kBMnMajor): A [64][64] swizzled in shared memory (kRegA false,
// WarpgroupBf16Mma::IssueWith) or in registers in the accumulator layout
// (kRegA true, WarpgroupBf16MmaRegA::IssueWith), B [64][kN] (k rows, n
// contiguous) MN-major and swizzled as in WarpgroupProductKernel.
template <int kN, bool kRegA>
__global__ void WarpgroupDescProductKernel(const uint16_t* __restrict__ a,
                                           const uint16_t* __restrict__ b,
                                           float* __restrict__ c, int* flag) {
  using Wg = WarpgroupBf16Mma<kN>;
  constexpr int kK = 64;
  __shared__ __align__(1024) uint8_t a_s[64 * kK * 2];
  __shared__ __align__(1024) uint8_t b_s[kN * kK * 2];
  if constexpr (!kHasWarpgroupBf16Mma) {
    if (threadIdx.x == 0) *flag = 0;
    return;
  } else {
    if (threadIdx.x == 0) *flag = 1;
    for (int i = threadIdx.x; i < 64 * kK; i += blockDim.x) {
      *reinterpret_cast<uint16_t*>(
          a_s + Wg::OffsetSw128(i / kK, i % kK, 64 * 128)) = a[i];
    }
    for (int i = threadIdx.x; i < kN * kK; i += blockDim.x) {
      const int k = i / kN, n = i % kN;
      *reinterpret_cast<uint16_t*>(b_s + Wg::OffsetSw128(k, n, 64 * 128)) =
          b[i];
    }
    Wg::FenceStores();
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint32_t b_addr =
        static_cast<uint32_t>(__cvta_generic_to_shared(b_s));
    auto b_desc = [&](int j) {
      return Wg::DescriptorSw128(b_addr + j * 16 * 128, 64 * 128, 1024);
    };
    float acc[Wg::kAccPerThread];
    if constexpr (kRegA) {
      // Thread (warp w, lane l), k-step j, register q: row 16 w + l / 4 +
      // 8 (q % 2), columns 16 j + 8 (q / 2) + 2 (l % 4) and + 1.
      uint32_t frag[kK / 16][4];
      for (int j = 0; j < kK / 16; ++j) {
        for (int q = 0; q < 4; ++q) {
          const int row = 16 * warp + lane / 4 + 8 * (q % 2);
          const int col = 16 * j + 8 * (q / 2) + 2 * (lane % 4);
          frag[j][q] = static_cast<uint32_t>(a[row * kK + col]) |
                       (static_cast<uint32_t>(a[row * kK + col + 1]) << 16);
        }
      }
      WarpgroupBf16MmaRegA<kN>::template IssueWith<kBMnMajor>(acc, frag, b_desc,
                                                              false);
      WarpgroupBf16MmaRegA<kN>::Wait(acc, frag);
    } else {
      const uint32_t a_addr =
          static_cast<uint32_t>(__cvta_generic_to_shared(a_s));
      Wg::template IssueWith<kK / 16, kBMnMajor>(
          acc, [&](int j) { return Bf16Sw128Descriptor(a_addr + j * 32); },
          b_desc, false);
      Wg::Wait(acc);
    }
    for (int i = 0; i < Wg::kAccPerThread; ++i) {
      c[Wg::AccRow(warp, lane, i) * kN + Wg::AccCol(lane, i)] = acc[i];
    }
  }
}
#endif

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

namespace {

// desc: 0 the Issue* forms above; 1 / 2 WarpgroupDescProductKernel with A
// in shared memory / registers (sw128 and mn_b implied).
MmaCheckResult WarpgroupProduct(const uint16_t* a, const uint16_t* b, bool mn_b,
                                bool sw128, float* c, int n, char* error,
                                size_t error_size, int desc = 0) {
#if defined(DSA_GPU_CUDA)
  if (n != 32 && n != 64 && n != 128 && n != 256) {
    std::snprintf(error, error_size, "n=%d: 32, 64, 128 or 256", n);
    return MmaCheckResult::kInvalidArgument;
  }
  int devices = 0;
  hipError_t err = hipGetDeviceCount(&devices);
  if (err != hipSuccess) {
    return Fail(err, "hipGetDeviceCount", error, error_size);
  }
  if (devices == 0) {
    return Fail(hipErrorNoDevice, "hipGetDeviceCount", error, error_size);
  }
  Buffers buf;
  void *d_a, *d_b, *d_c, *d_flag;
  const size_t a_bytes = 64 * 64 * 2, b_bytes = static_cast<size_t>(n) * 128,
               c_bytes = static_cast<size_t>(n) * 64 * 4;
  if ((err = buf.Alloc(&d_a, a_bytes)) != hipSuccess ||
      (err = buf.Alloc(&d_b, b_bytes)) != hipSuccess ||
      (err = buf.Alloc(&d_c, c_bytes)) != hipSuccess ||
      (err = buf.Alloc(&d_flag, 4)) != hipSuccess) {
    return Fail(err, "hipMalloc", error, error_size);
  }
  if ((err = hipMemcpy(d_a, a, a_bytes, hipMemcpyHostToDevice)) != hipSuccess ||
      (err = hipMemcpy(d_b, b, b_bytes, hipMemcpyHostToDevice)) != hipSuccess ||
      (err = hipMemset(d_c, 0xff, c_bytes)) != hipSuccess) {
    return Fail(err, "hipMemcpy", error, error_size);
  }
  auto* pa = static_cast<const uint16_t*>(d_a);
  auto* pb = static_cast<const uint16_t*>(d_b);
  auto* pc = static_cast<float*>(d_c);
  auto* pf = static_cast<int*>(d_flag);
  auto launch = [&](auto kernel) {
    hipLaunchKernelGGL(kernel, dim3(1), dim3(128), 0, 0, pa, pb, pc, pf);
  };
  if (sw128 && n != 64 && n != 256) {
    std::snprintf(error, error_size, "n=%d: 64 or 256 (swizzled)", n);
    return MmaCheckResult::kInvalidArgument;
  }
  if (desc != 0) {
    if (n == 64) {
      desc == 2 ? launch(WarpgroupDescProductKernel<64, true>)
                : launch(WarpgroupDescProductKernel<64, false>);
    } else {
      desc == 2 ? launch(WarpgroupDescProductKernel<256, true>)
                : launch(WarpgroupDescProductKernel<256, false>);
    }
  } else {
    switch (n) {
      case 32:
        mn_b ? launch(WarpgroupProductKernel<32, true>)
             : launch(WarpgroupProductKernel<32, false>);
        break;
      case 64:
        if (sw128) {
          mn_b ? launch(WarpgroupProductKernel<64, true, true>)
               : launch(WarpgroupProductKernel<64, false, true>);
          break;
        }
        mn_b ? launch(WarpgroupProductKernel<64, true>)
             : launch(WarpgroupProductKernel<64, false>);
        break;
      case 128:
        mn_b ? launch(WarpgroupProductKernel<128, true>)
             : launch(WarpgroupProductKernel<128, false>);
        break;
      default:
        if (sw128) {
          mn_b ? launch(WarpgroupProductKernel<256, true, true>)
               : launch(WarpgroupProductKernel<256, false, true>);
          break;
        }
        mn_b ? launch(WarpgroupProductKernel<256, true>)
             : launch(WarpgroupProductKernel<256, false>);
        break;
    }
  }
  if ((err = hipGetLastError()) != hipSuccess) {
    return Fail(err, "WarpgroupProductKernel launch", error, error_size);
  }
  int flag = 0;
  if ((err = hipMemcpy(&flag, d_flag, 4, hipMemcpyDeviceToHost)) !=
          hipSuccess ||
      (err = hipMemcpy(c, d_c, c_bytes, hipMemcpyDeviceToHost)) != hipSuccess) {
    return Fail(err, "hipMemcpy", error, error_size);
  }
  if (flag == 0) {
    std::snprintf(error, error_size, "no warpgroup product in this build");
    return MmaCheckResult::kNotBuilt;
  }
  return MmaCheckResult::kOk;
#else
  (void)a;
  (void)b;
  (void)mn_b;
  (void)sw128;
  (void)c;
  (void)n;
  (void)desc;
  std::snprintf(error, error_size, "no warpgroup product on this backend");
  return MmaCheckResult::kNotBuilt;
#endif
}

}  // namespace

MmaCheckResult Bf16WarpgroupProduct(const uint16_t* a, const uint16_t* b,
                                    float* c, int n, char* error,
                                    size_t error_size) {
  return WarpgroupProduct(a, b, false, false, c, n, error, error_size);
}

MmaCheckResult Bf16WarpgroupProductMnB(const uint16_t* a, const uint16_t* b,
                                       float* c, int n, char* error,
                                       size_t error_size) {
  return WarpgroupProduct(a, b, true, false, c, n, error, error_size);
}

MmaCheckResult Bf16WarpgroupProductSw128(const uint16_t* a, const uint16_t* b,
                                         bool b_mn_major, float* c, int n,
                                         char* error, size_t error_size) {
  return WarpgroupProduct(a, b, b_mn_major, true, c, n, error, error_size);
}

MmaCheckResult Bf16WarpgroupProductDescMnB(const uint16_t* a, const uint16_t* b,
                                           bool a_registers, float* c, int n,
                                           char* error, size_t error_size) {
  if (n != 64 && n != 256) {
    std::snprintf(error, error_size, "n=%d: 64 or 256", n);
    return MmaCheckResult::kInvalidArgument;
  }
  return WarpgroupProduct(a, b, true, true, c, n, error, error_size,
                          a_registers ? 2 : 1);
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
