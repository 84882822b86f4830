// What every logits body reads first: a row's key window (clamped to the
// buffers), where a request's key lives in the paged cache, and -inf over the
// columns outside the window. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_INDEXER_WINDOWS_H_
#define DSA_ATTENTION_GPU_INDEXER_WINDOWS_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/params.h"

namespace dsa::attention::gpu::indexer {

inline constexpr float kNegInf = -__builtin_huge_valf();

__device__ __forceinline__ RowWindow LoadWindow(const IndexerLogitsParams& p,
                                                int64_t row) {
  RowWindow w{-1, 0, 0};
  if (row >= p.rows) return w;
  const int32_t request = p.row_request[row];
  if (request < 0 || request >= p.num_requests) return w;
  const int64_t capacity =
      static_cast<int64_t>(p.max_blocks_per_request) * p.block_size;
  const int64_t limit = capacity < p.width ? capacity : p.width;
  int64_t start = p.row_key_start[row];
  int64_t end = p.row_key_end[row];
  start = start < 0 ? 0 : (start > limit ? limit : start);
  end = end < start ? start : (end > limit ? limit : end);
  w.request = request;
  w.start = static_cast<int32_t>(start);
  w.end = static_cast<int32_t>(end);
  return w;
}

// Byte offsets in the cache of a request's key: its values and its scale.
// False for a block id outside the cache (the key then reads as zeros).
// Keys are below 2^31, so 32-bit division suffices; the usual power-of-two
// block sizes take a shift.
__device__ __forceinline__ bool LocateKey(const IndexerLogitsParams& p,
                                          int32_t request, int32_t key,
                                          int64_t* values, int64_t* scale) {
  const int32_t bs = p.block_size;
  int32_t block, within;
  if ((bs & (bs - 1)) == 0) {
    const int shift = __ffs(bs) - 1;
    block = key >> shift;
    within = key & (bs - 1);
  } else {
    block = key / bs;
    within = key - block * bs;
  }
  const int32_t page = p.block_table[request * p.block_table_stride + block];
  if (page < 0 || page >= p.num_blocks) return false;
  const int64_t base = static_cast<int64_t>(page) * bs * (p.head_dim + 4);
  *values = base + static_cast<int64_t>(within) * p.head_dim;
  *scale = base + static_cast<int64_t>(bs) * p.head_dim + within * 4;
  return true;
}

// Writes -inf over [0, start) and [end, width) of a row.
__device__ __forceinline__ void FillOutsideWindow(const IndexerLogitsParams& p,
                                                  int64_t row,
                                                  const RowWindow& w) {
  float* out = p.logits + row * p.logits_stride;
  for (int64_t j = threadIdx.x; j < w.start; j += blockDim.x) out[j] = kNegInf;
  for (int64_t j = w.end + threadIdx.x; j < p.width; j += blockDim.x) {
    out[j] = kNegInf;
  }
}

// Where a tile's 16-byte chunk c (0 .. rows * 8) goes: the row (key or
// query column) and the chunk within its 128 bytes.
struct ChunkPos {
  int row;
  int part;
};
// Row-major: chunk c is chunk c % 8 of row c / 8.
struct RowMajorChunks {
  __device__ __forceinline__ static ChunkPos Of(int c) {
    return {c / kChunksPerKey, c % kChunksPerKey};
  }
};
// Core matrices: 8 consecutive threads fill one 128-byte core matrix
// (conflict-free shared stores; the global reads stay within 1 KB).
struct CoreMatrixChunks {
  __device__ __forceinline__ static ChunkPos Of(int c) {
    return {(c % 8) + 8 * (c / 64), (c / 8) % 8};
  }
};

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_WINDOWS_H_
