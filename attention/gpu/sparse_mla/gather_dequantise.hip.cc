// A chunk of query rows' top-k entries of an fp8_ds_mla cache dequantised,
// in top-k order, into the bf16 workspace that the seesaw body then reads as
// a cache of one request a row (heuristics.h: Body::kSeesawGathered; layout
// in config.h: gathered::). For decode, where the requests name far more
// positions than their rows' top-k lists (32 requests x 8K positions, 32
// rows of top-k 2048), so that dequantising every position
// (dequantise.hip.cc) would do 4x the work and need 4x the workspace.
// Padding and invalid indices are not read, their table entry is -1 and
// their workspace row is not written (the seesaw body never reads it).
// At 32 x 2048 pairs: 43 MB read and 75 MB written, a copy.
//
// A copy runs at the memory's pace only with enough bytes in flight: a block
// first resolves the cache offsets of all its pairs at once (one a thread,
// the row's request and length, the index and its block-table entry, the
// table entry beside the length rather than after it), then each group of
// 32 threads issues the loads of 8 entries before it converts the first.
// How many batches a group copies is the plan's (heuristics.cc): four at
// 32 rows of top-k 2048 (512 blocks of 128 pairs), one for a single row (64
// blocks of 32), so that a small pass still spreads over the chip.
// The conversion is DequantiseEntry's (row_access.h: Fp8PairToBf16 of each
// code with its tile's scale, the rope copied), so the workspace is the
// same to the bit; only which lane moves which bytes differs.
#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/kernels.h"
#include "attention/gpu/sparse_mla/row_access.h"

namespace dsa::attention::gpu::sparse_mla {
namespace {

inline constexpr int kHalfCodes = kLora / 2;

// Lane `lane`'s share of one fp8_ds_mla entry: codes [8 lane, 8 lane + 8)
// of each half of 256, the scales of their tiles, 2 bf16 of the rope.
struct EntryPiece {
  uint2 codes[2];
  float scale[2];
  uint32_t rope;
};

__device__ __forceinline__ EntryPiece LoadEntryPiece(const uint8_t* entry,
                                                     int lane) {
  EntryPiece e;
  const float* scales = reinterpret_cast<const float*>(entry + kLora);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int code = h * kHalfCodes + 8 * lane;
    e.codes[h] = *reinterpret_cast<const uint2*>(entry + code);
    e.scale[h] = scales[code / 128];
  }
  e.rope =
      reinterpret_cast<const uint32_t*>(entry + kLora + 4 * kFp8Tiles)[lane];
  return e;
}

template <Fp8Format F>
__device__ __forceinline__ void StoreEntryPiece(const EntryPiece& e,
                                                uint16_t* out, int lane) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint2 c = e.codes[h];
    const float s = e.scale[h];
    *reinterpret_cast<uint4*>(out + h * kHalfCodes + 8 * lane) =
        make_uint4(Fp8PairToBf16<F>(c.x, s), Fp8PairToBf16<F>(c.x >> 16, s),
                   Fp8PairToBf16<F>(c.y, s), Fp8PairToBf16<F>(c.y >> 16, s));
  }
  reinterpret_cast<uint32_t*>(out + kLora)[lane] = e.rope;
}

// Byte offset of pair `pair`'s cache entry, or -1 (EntryOffset of
// LoadRowRequest's request, row_access.h, with the block-table entry read
// beside the length: any index below the table's capacity stays in the
// request's row of it).
__device__ __forceinline__ int64_t ResolvePair(const SparseMlaParams& p,
                                               int64_t t, int32_t i) {
  const int32_t idx = p.topk_indices[t * p.topk_stride + i];
  const int32_t r = p.token_request[t];
  if (r < 0 || r >= p.num_requests) return -1;
  const int64_t capacity =
      static_cast<int64_t>(p.max_blocks_per_request) * p.block_size;
  if (idx < 0 || idx >= capacity) return -1;
  const int32_t block =
      p.block_table[r * p.block_table_stride + idx / p.block_size];
  const int64_t len = p.seq_lens[r];
  if (idx >= len || block < 0 || block >= p.num_blocks) return -1;
  return block * p.cache_block_stride +
         static_cast<int64_t>(idx % p.block_size) * p.cache_token_stride;
}

// Grid: ceil(rows * topk / (kPairsPerBatch * batches)) blocks of kThreads.
template <Fp8Format F>
__global__ void __launch_bounds__(gathered::kThreads)
    GatherDequantiseKernel(SparseMlaParams p, int64_t begin, int64_t rows,
                           int batches, uint16_t* workspace, int32_t* table) {
  using namespace gathered;
  __shared__ int64_t offsets[kThreads];
  const int64_t pairs = rows * p.topk;
  const int per_block = kPairsPerBatch * batches;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * per_block;
  if (static_cast<int>(threadIdx.x) < per_block) {
    const int64_t pair = first + static_cast<int>(threadIdx.x);
    int64_t off = -1;
    if (pair < pairs) {
      const int64_t r = pair / p.topk;
      const int32_t i = static_cast<int32_t>(pair - r * p.topk);
      off = ResolvePair(p, begin + r, i);
      table[pair] = off >= 0 ? i : -1;
      if (i == 0) {
        int32_t* ids = table + pairs;
        ids[r] = static_cast<int32_t>(r);  // request r, block r
        ids[rows + r] = p.topk;            // of topk positions
      }
    }
    offsets[threadIdx.x] = off;
  }
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x) % kGroupThreads;
  const int own =
      static_cast<int>(threadIdx.x) / kGroupThreads * kPairsInFlight * batches;
  for (int b = own; b < own + kPairsInFlight * batches; b += kPairsInFlight) {
    int64_t off[kPairsInFlight];
    EntryPiece piece[kPairsInFlight] = {};
#pragma unroll
    for (int k = 0; k < kPairsInFlight; ++k) {
      off[k] = offsets[b + k];
      if (off[k] >= 0) piece[k] = LoadEntryPiece(p.kv_cache + off[k], lane);
    }
#pragma unroll
    for (int k = 0; k < kPairsInFlight; ++k) {
      if (off[k] >= 0) {
        StoreEntryPiece<F>(piece[k], workspace + (first + b + k) * kDim, lane);
      }
    }
  }
}

}  // namespace

LaunchResult LaunchGatherDequantise(const SparseMlaParams& p, int64_t begin,
                                    int64_t rows, int batches,
                                    uint16_t* workspace, int32_t* table,
                                    hipStream_t stream) {
  if (batches < 1 || batches > gathered::kMaxBatches) {
    return Invalid(kOp, "%d batches a group of the gather pass", batches);
  }
  const int64_t pairs = rows * p.topk;
  const int64_t per_block = int64_t{gathered::kPairsPerBatch} * batches;
  const int64_t blocks = (pairs + per_block - 1) / per_block;
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
                     dim3(gathered::kThreads), 0, stream, p, begin, rows,
                     batches, workspace, table);
  return CheckLaunch(kOp);
}

}  // namespace dsa::attention::gpu::sparse_mla
