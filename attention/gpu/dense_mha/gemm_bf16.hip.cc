// Device side of gemm_bf16.h: the kernel over the two bodies
// (gemm_bf16_warp_body.h, gemm_bf16_sm90_body.h), the one heuristics.h
// chooses run on a grid of 128 x 128 tiles of C.
#include "attention/gpu/dense_mha/gemm_bf16.h"

#include <cstdint>

#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/dense_mha/gemm_bf16_warp_body.h"
#include "attention/gpu/dense_mha/heuristics.h"
#include "attention/gpu/device/features.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"

#if defined(DSA_GPU_CUDA)
#include "attention/gpu/dense_mha/gemm_bf16_sm90_body.h"
#endif

namespace dsa::attention::gpu {
namespace dense_mha {

constexpr size_t kGemmSmemBytes =
#if defined(DSA_GPU_CUDA)
    Bf16GemmTiles::kSmemBytes > Bf16GemmTiles::kSm90SmemBytes
        ? Bf16GemmTiles::kSmemBytes
        : Bf16GemmTiles::kSm90SmemBytes;
#else
    Bf16GemmTiles::kSmemBytes;
#endif

// kWarpgroup picks the sm_90a body where the device code has wgmma;
// elsewhere both instantiations run the warp-level body.
template <bool kWarpgroup>
__global__ void __launch_bounds__(Bf16GemmTiles::kThreads)
    Bf16GemmKernel(const uint16_t* __restrict__ a, int64_t lda, RowMap a_map,
                   const uint16_t* __restrict__ b, int64_t ldb, RowMap b_map,
                   uint16_t* __restrict__ c, int64_t ldc, int64_t m, int64_t n,
                   int64_t k) {
  extern __shared__ __align__(128) uint16_t smem[];
#if defined(DSA_GPU_CUDA)
  if constexpr (kWarpgroup && ::dsa::gpu::kHasWarpgroupBf16Mma) {
    Sm90GemmBody(a, lda, a_map, b, ldb, b_map, c, ldc, m, n, k,
                 reinterpret_cast<uint8_t*>(smem));
  } else {
    WarpGemmBody(a, lda, a_map, b, ldb, b_map, c, ldc, m, n, k, smem);
  }
#else
  WarpGemmBody(a, lda, a_map, b, ldb, b_map, c, ldc, m, n, k, smem);
#endif
}

template <bool kWarpgroup>
LaunchResult LaunchGemm(const Bf16GemmParams& p, int64_t grid_m, int64_t grid_n,
                        int device, hipStream_t stream) {
  constexpr auto kKernel = &Bf16GemmKernel<kWarpgroup>;
  LaunchResult r = OptInSharedMemory<kKernel, static_cast<int>(kGemmSmemBytes)>(
      device, "bf16_gemm: shared memory opt-in");
  if (!r.ok()) return r;
  hipLaunchKernelGGL(
      kKernel,
      dim3(static_cast<unsigned>(grid_n), static_cast<unsigned>(grid_m)),
      dim3(Bf16GemmTiles::kThreads), kGemmSmemBytes, stream, p.a, p.lda,
      RowMap{p.a_group_rows, p.a_group_stride}, p.b, p.ldb,
      RowMap{p.b_group_rows, p.b_group_stride}, p.c, p.ldc, p.m, p.n, p.k);
  return CheckLaunch("bf16_gemm");
}

}  // namespace dense_mha

const char* Bf16GemmPath(const Bf16GemmParams& params) {
  DeviceFeatures features;
  Bf16GemmBody body;
  if (!CurrentDeviceFeatures(&features).ok() ||
      !dense_mha::ChooseBf16Gemm(params, features, &body).ok()) {
    return "none";
  }
  return dense_mha::Bf16GemmPathName(body);
}

LaunchResult Bf16GemmLaunch(const Bf16GemmParams& p, void* stream) {
  constexpr const char* kOp = "bf16_gemm";
  if (p.m < 0 || p.n < 0 || p.k < 0) {
    return Invalid(kOp, "m=%lld n=%lld k=%lld: sizes must be >= 0",
                   static_cast<long long>(p.m), static_cast<long long>(p.n),
                   static_cast<long long>(p.k));
  }
  if (p.m == 0 || p.n == 0) return LaunchResult{};
  if (p.k == 0) return Invalid(kOp, "k is 0: nothing to multiply");
  if (p.a == nullptr || p.b == nullptr || p.c == nullptr) {
    return Invalid(kOp, "a, b and c must be device pointers (got null)");
  }
  if (p.k % 8 != 0 || p.lda % 8 != 0 || p.ldb % 8 != 0 || p.ldc % 2 != 0 ||
      p.lda < p.k || p.ldb < p.k || p.ldc < p.n) {
    return Invalid(kOp,
                   "k=%lld lda=%lld ldb=%lld ldc=%lld n=%lld: need k, lda, "
                   "ldb multiples of 8, ldc even, lda, ldb >= k, ldc >= n",
                   static_cast<long long>(p.k), static_cast<long long>(p.lda),
                   static_cast<long long>(p.ldb), static_cast<long long>(p.ldc),
                   static_cast<long long>(p.n));
  }
  if (p.a_group_rows < 0 || p.b_group_rows < 0 ||
      (p.a_group_rows > 0 && p.a_group_stride < p.a_group_rows) ||
      (p.b_group_rows > 0 && p.b_group_stride < p.b_group_rows)) {
    return Invalid(kOp, "row groups: need group_stride >= group_rows > 0");
  }
  if (reinterpret_cast<uintptr_t>(p.a) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.b) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.c) % 4 != 0) {
    return Invalid(kOp, "a and b must be 16-byte aligned, c 4-byte aligned");
  }
  const int64_t grid_n =
      (p.n + dense_mha::Bf16GemmTiles::kBN - 1) / dense_mha::Bf16GemmTiles::kBN;
  const int64_t grid_m =
      (p.m + dense_mha::Bf16GemmTiles::kBM - 1) / dense_mha::Bf16GemmTiles::kBM;
  if (grid_m > 65535 || grid_n > 0x7fffffff) {
    return Invalid(kOp, "m=%lld n=%lld: too many tiles for one launch",
                   static_cast<long long>(p.m), static_cast<long long>(p.n));
  }
  DeviceFeatures features;
  LaunchResult r = CurrentDeviceFeatures(&features);
  if (!r.ok()) return r;
  Bf16GemmBody body;
  r = dense_mha::ChooseBf16Gemm(p, features, &body);
  if (!r.ok()) return r;
  const hipStream_t s = static_cast<hipStream_t>(stream);
  return body == Bf16GemmBody::kSm90
             ? dense_mha::LaunchGemm<true>(p, grid_m, grid_n, features.device,
                                           s)
             : dense_mha::LaunchGemm<false>(p, grid_m, grid_n, features.device,
                                            s);
}

}  // namespace dsa::attention::gpu
