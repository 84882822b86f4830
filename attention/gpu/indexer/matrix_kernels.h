// The indexer logits kernels that run everywhere, and their launchers
// (launchers.h; instantiated per fp8 encoding in instantiations/):
//   - the matrix kernel: a block owns 256 (row, head) columns (8 rows of 32
//     heads, 4 of 64, ...) and walks the union of its rows' key windows in
//     tiles of 64 keys; its body is warpgroup_body.h on sm_90a with e4m3fn
//     data, warp_body.h on every other target, one launch configuration
//     (256 NVIDIA threads, 512 AMD);
//   - the FMA kernel, for any shape: one block a row, one key a thread at a
//     time, FMAs over the decoded values.
// Blocks start with the last rows: with causal windows they have the most
// keys, and running them first keeps the tail of the grid short.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_INDEXER_MATRIX_KERNELS_H_
#define DSA_ATTENTION_GPU_INDEXER_MATRIX_KERNELS_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/heuristics.h"
#include "attention/gpu/indexer/launchers.h"
#include "attention/gpu/indexer/matrix_tiles.h"
#include "attention/gpu/indexer/params.h"
#include "attention/gpu/indexer/warp_body.h"
#include "attention/gpu/indexer/warpgroup_body.h"
#include "attention/gpu/indexer/windows.h"

// On targets where mma.h falls back to FMAs (gfx90a), the unrolled key-tile
// loop grows past clang's unroll limit and it says so; the loop is still
// correct, and those targets are not the fast path.
#if defined(__clang__) && !defined(__CUDA__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

namespace dsa::attention::gpu::indexer {

// Two blocks per multiprocessor for the warpgroup body (one's epilogue runs
// while the other's wgmma does); the warp-level body keeps its query
// fragments in registers and fits one.
template <::dsa::gpu::Fp8Format F>
constexpr int kMinBlocks = (::dsa::gpu::kHasWarpgroupFp8Mma &&
                            F == ::dsa::gpu::Fp8Format::kE4m3fn)
                               ? 2
                               : 1;

template <::dsa::gpu::Fp8Format F>
__global__ void __launch_bounds__(kThreads, kMinBlocks<F>)
    IndexerLogitsMmaKernel(IndexerLogitsParams p) {
  if constexpr (::dsa::gpu::kHasWarpgroupFp8Mma &&
                F == ::dsa::gpu::Fp8Format::kE4m3fn) {
    LogitsWarpgroupBody<F>(p);
  } else {
    LogitsWarpMmaBody<F>(p);
  }
}

template <::dsa::gpu::Fp8Format F>
__global__ void IndexerLogitsFmaKernel(IndexerLogitsParams p) {
  const int64_t row = blockIdx.x;
  const RowWindow w = LoadWindow(p, row);
  FillOutsideWindow(p, row, w);
  if (w.request < 0) return;
  const uint8_t* q = p.q_fp8 + row * p.heads * p.head_dim;
  const float* weights = p.head_weights + row * p.heads;
  for (int32_t key = w.start + threadIdx.x; key < w.end; key += blockDim.x) {
    int64_t values, scale;
    float logit = 0.0f;
    if (LocateKey(p, w.request, key, &values, &scale)) {
      const uint8_t* k = p.k_cache + values;
      float key_scale;
      __builtin_memcpy(&key_scale, p.k_cache + scale, sizeof(float));
      for (int h = 0; h < p.heads; ++h) {
        float dot = 0.0f;
        for (int d = 0; d < p.head_dim; ++d) {
          dot += ::dsa::gpu::DecodeFp8<F>(q[h * p.head_dim + d]) *
                 ::dsa::gpu::DecodeFp8<F>(k[d]);
        }
        const float s = dot * key_scale;
        if (s > 0.0f) logit += s * weights[h];
      }
    }
    p.logits[row * p.logits_stride + key] = logit;
  }
}

template <::dsa::gpu::Fp8Format F>
LaunchResult LaunchFma(const IndexerLogitsParams& p, const LogitsPlan& plan,
                       hipStream_t stream) {
  hipLaunchKernelGGL(IndexerLogitsFmaKernel<F>,
                     dim3(static_cast<unsigned>(plan.grid)), dim3(256), 0,
                     stream, p);
  return CheckLaunch("indexer_logits");
}

template <::dsa::gpu::Fp8Format F>
LaunchResult LaunchMatrix(const IndexerLogitsParams& p, const LogitsPlan& plan,
                          hipStream_t stream) {
  hipLaunchKernelGGL(IndexerLogitsMmaKernel<F>,
                     dim3(static_cast<unsigned>(plan.grid)), dim3(kThreads), 0,
                     stream, p);
  return CheckLaunch("indexer_logits");
}

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_MATRIX_KERNELS_H_
