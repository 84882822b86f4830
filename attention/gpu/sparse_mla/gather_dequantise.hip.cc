// A chunk of query rows' top-k entries of an fp8_ds_mla cache dequantised,
// in top-k order, into the bf16 workspace that the seesaw body then reads as
// a cache of one request a row (heuristics.h: Body::kSeesawGathered; layout
// in config.h: gathered::). For decode, where the requests name far more
// positions than their rows' top-k lists (32 requests x 8K positions, 32
// rows of top-k 2048), so that dequantising every position
// (dequantise.hip.cc) would do 4x the work and need 4x the workspace. 32
// threads a (row, top-k entry) pair, DequantiseEntry's exact conversion;
// padding and invalid indices are not read, their table entry is -1 and
// their workspace row is not written (the seesaw body never reads it).
// At 32 x 2048 pairs: 43 MB read and 75 MB written.
#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/kernels.h"
#include "attention/gpu/sparse_mla/row_access.h"

namespace dsa::attention::gpu::sparse_mla {
namespace {

// Grid: ceil(rows * topk / 8) blocks of 256 threads; 32 threads (any warp
// width) per pair.
template <Fp8Format F>
__global__ void __launch_bounds__(dequantised::kThreads)
    GatherDequantiseKernel(SparseMlaParams p, int64_t begin, int64_t rows,
                           uint16_t* workspace, int32_t* table) {
  const int lane = static_cast<int>(threadIdx.x) % dequantised::kRowThreads;
  const int64_t pair =
      static_cast<int64_t>(blockIdx.x) * dequantised::kRowsPerBlock +
      static_cast<int>(threadIdx.x) / dequantised::kRowThreads;
  if (pair >= rows * p.topk) return;
  const int64_t r = pair / p.topk;
  const int32_t i = static_cast<int32_t>(pair - r * p.topk);
  const int64_t t = begin + r;
  if (i == 0 && lane == 0) {
    int32_t* ids = table + rows * p.topk;
    ids[r] = static_cast<int32_t>(r);  // request r, block r
    ids[rows + r] = p.topk;            // of topk positions
  }
  const RowRequest rr = LoadRowRequest(p, t);
  const int64_t off = EntryOffset(p, rr, p.topk_indices[t * p.topk_stride + i]);
  if (lane == 0) table[pair] = off >= 0 ? i : -1;
  if (off < 0) return;
  DequantiseEntry<F>(p.kv_cache + off, workspace + pair * kDim, lane);
}

}  // namespace

LaunchResult LaunchGatherDequantise(const SparseMlaParams& p, int64_t begin,
                                    int64_t rows, uint16_t* workspace,
                                    int32_t* table, hipStream_t stream) {
  const int64_t pairs = rows * p.topk;
  const int64_t blocks =
      (pairs + dequantised::kRowsPerBlock - 1) / dequantised::kRowsPerBlock;
  if (blocks < 1 || blocks > 0x7fffffff) {
    return Invalid(kOp, "%lld (row, top-k) pairs to gather",
                   static_cast<long long>(pairs));
  }
  if (p.cache_type == LatentCacheType::kBFloat16) {
    return Invalid(kOp, "no dequantisation of a bf16 cache");
  }
  auto kernel = p.cache_type == LatentCacheType::kFp8E4m3fnuz
                    ? &GatherDequantiseKernel<Fp8Format::kE4m3fnuz>
                    : &GatherDequantiseKernel<Fp8Format::kE4m3fn>;
  hipLaunchKernelGGL(kernel, dim3(static_cast<unsigned>(blocks)),
                     dim3(dequantised::kThreads), 0, stream, p, begin, rows,
                     workspace, table);
  return CheckLaunch(kOp);
}

}  // namespace dsa::attention::gpu::sparse_mla
