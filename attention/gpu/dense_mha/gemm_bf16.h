// A bf16 matrix product on the matrix cores (Bf16WarpMma, device/
// mma.h) for kernels that need one without a BLAS library: the dense MHA
// prefill decompresses keys and values with it, and other launchers may call
// it on device pointers. Plain C++ (no HIP or CUDA types); the launch is
// asynchronous on `stream`.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_GEMM_BF16_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_GEMM_BF16_H_

#include <cstdint>

#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu {

// The GEMM's bodies (dense_mha/heuristics.h chooses one).
enum class Bf16GemmBody : int32_t {
  kAuto = -1,  // as a request: the heuristics' choice
  kWarp = 0,   // Bf16WarpMma (mma.sync, MFMA): any device
  kSm90 = 1,   // wgmma: sm_90a device code
};

// c[i][j] = bf16(sum_l a[i][l] * b[j][l]) for i < m, j < n, l < k: A is
// [m][k] and B is [n][k] (both k-contiguous; B is e.g. a weight matrix
// [out_features, in_features]), C is [m][n]; all bf16 bits, leading
// dimensions in elements. Products are exact in fp32 and accumulated in
// fp32; C is rounded to nearest even once.
struct Bf16GemmParams {
  const uint16_t* a = nullptr;
  int64_t lda = 0;
  const uint16_t* b = nullptr;
  int64_t ldb = 0;
  uint16_t* c = nullptr;
  int64_t ldc = 0;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  // Optional row groups: with a_group_rows > 0, logical row i of A is
  // physical row (i / a_group_rows) * a_group_stride + i % a_group_rows
  // (e.g. the W_UK rows of every head of kv_b_proj); the same for B.
  int64_t a_group_rows = 0;
  int64_t a_group_stride = 0;
  int64_t b_group_rows = 0;
  int64_t b_group_stride = 0;
  // Run this body instead of the heuristics' choice (tests run the warp
  // body on sm_90a too); kInvalidArgument where the device cannot run it.
  Bf16GemmBody body = Bf16GemmBody::kAuto;
};

// Needs k, lda and ldb multiples of 8, a and b 16-byte aligned, c 4-byte
// aligned with ldc even (checked: kInvalidArgument otherwise). Tiles of
// 128 x 128 through a shared-memory pipeline of cp.async stages (wgmma on
// sm_90a, Bf16WarpMma elsewhere); m and n need not be multiples of the
// tile. m * n == 0 launches nothing.
LaunchResult Bf16GemmLaunch(const Bf16GemmParams& params, void* stream);

// Which body a call with `params` runs on the current device: "sm90"
// (wgmma) or "warp" (Bf16WarpMma); "none" when not built, on error, or
// where the body asked for cannot run. For tests and reports.
const char* Bf16GemmPath(const Bf16GemmParams& params);

// Floating-point operations of a call (2 m n k), for reports.
inline double Bf16GemmFlops(const Bf16GemmParams& p) {
  return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) *
         static_cast<double>(p.k);
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_GEMM_BF16_H_
