// An fp8_ds_mla cache's positions dequantised into the bf16 workspace that
// the seesaw body reads over an fp8 cache (heuristics.h:
// Body::kSeesawDequantised; layout in config.h: dequantised::), as vLLM
// runs FlashMLA's bf16 prefill over an fp8 cache. One pass over the call's
// requests before the attention: 32 threads a position, each turning 16
// codes into 16 bf16 (Fp8PairToBf16, exact for the cache's power-of-two
// scales, the warp body's conversion), 8 of them copying the rope. At
// T = 8192 that is ~15 MB moved, a few microseconds beside the ~4.6 ms of
// the attention (testing/bench/RESULTS.md, "Sparse MLA prefill over an fp8
// cache").
#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/kernels.h"
#include "attention/gpu/sparse_mla/row_access.h"

namespace dsa::attention::gpu::sparse_mla {
namespace {

// Grid: ceil(num_requests * capacity / 8) blocks of 256 threads; 32
// threads (any warp width) per workspace row.
template <Fp8Format F>
__global__ void __launch_bounds__(dequantised::kThreads)
    DequantiseCacheKernel(SparseMlaParams p, uint16_t* rows, int32_t* table) {
  const int lane = static_cast<int>(threadIdx.x) % dequantised::kRowThreads;
  const int64_t capacity =
      static_cast<int64_t>(p.max_blocks_per_request) * p.block_size;
  const int64_t row =
      static_cast<int64_t>(blockIdx.x) * dequantised::kRowsPerBlock +
      static_cast<int>(threadIdx.x) / dequantised::kRowThreads;
  if (row >= p.num_requests * capacity) return;
  const int32_t r = static_cast<int32_t>(row / capacity);
  const int64_t pos = row - r * capacity;
  const int32_t j = static_cast<int32_t>(pos / p.block_size);
  const int32_t block = p.block_table[r * p.block_table_stride + j];
  const bool in_cache = block >= 0 && block < p.num_blocks;
  if (lane == 0 && pos % p.block_size == 0) {
    const int64_t at = static_cast<int64_t>(r) * p.max_blocks_per_request + j;
    table[at] = in_cache ? static_cast<int32_t>(at) : -1;
  }
  int64_t len = p.seq_lens[r];
  if (len > capacity) len = capacity;
  if (!in_cache || pos >= len) return;
  const uint8_t* entry = p.kv_cache + block * p.cache_block_stride +
                         (pos % p.block_size) * p.cache_token_stride;
  DequantiseEntry<F>(entry, rows + row * kDim, lane);
}

}  // namespace

LaunchResult LaunchDequantiseCache(const SparseMlaParams& p, uint16_t* rows,
                                   int32_t* table, hipStream_t stream) {
  const int64_t total = static_cast<int64_t>(p.num_requests) *
                        p.max_blocks_per_request * p.block_size;
  const int64_t blocks =
      (total + dequantised::kRowsPerBlock - 1) / dequantised::kRowsPerBlock;
  if (blocks < 1 || blocks > 0x7fffffff) {
    return Invalid(kOp, "%lld workspace rows to dequantise",
                   static_cast<long long>(total));
  }
  auto kernel = p.cache_type == LatentCacheType::kFp8E4m3fnuz
                    ? &DequantiseCacheKernel<Fp8Format::kE4m3fnuz>
                    : &DequantiseCacheKernel<Fp8Format::kE4m3fn>;
  if (p.cache_type == LatentCacheType::kBFloat16) {
    return Invalid(kOp, "no dequantisation of a bf16 cache");
  }
  hipLaunchKernelGGL(kernel, dim3(static_cast<unsigned>(blocks)),
                     dim3(dequantised::kThreads), 0, stream, p, rows, table);
  return CheckLaunch(kOp);
}

}  // namespace dsa::attention::gpu::sparse_mla
