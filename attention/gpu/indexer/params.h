// Parameters of the lightning indexer's GPU kernels (indexer/launch.h):
// logits over the paged fp8 indexer K cache and the per-row top-k. Raw
// device pointers and sizes, plain C++ (no HIP or CUDA types).
#ifndef DSA_ATTENTION_GPU_INDEXER_PARAMS_H_
#define DSA_ATTENTION_GPU_INDEXER_PARAMS_H_

#include <cstdint>

#include "attention/gpu/device/formats.h"

namespace dsa::attention::gpu {

struct IndexerLogitsParams {
  const uint8_t* q_fp8 = nullptr;       // [rows, heads, head_dim], contiguous
  const float* head_weights = nullptr;  // [rows, heads], contiguous
  // [num_blocks, block_size, head_dim + 4] bytes: per block, block_size *
  // head_dim fp8 values (token-major), then block_size fp32 scales.
  const uint8_t* k_cache = nullptr;
  const int32_t* block_table = nullptr;    // [num_requests, block_table_stride]
  const int32_t* row_request = nullptr;    // [rows]
  const int32_t* row_key_start = nullptr;  // [rows]
  const int32_t* row_key_end = nullptr;    // [rows]
  float* logits = nullptr;                 // [rows, logits_stride], output
  int64_t rows = 0;
  int32_t heads = 0;
  int32_t head_dim = 0;
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_requests = 0;
  int32_t max_blocks_per_request = 0;  // block-table columns in use
  int64_t block_table_stride = 0;      // int32 elements between requests
  int64_t width = 0;                   // logits columns written per row
  int64_t logits_stride = 0;           // floats between rows (>= width)
  Fp8Encoding encoding = Fp8Encoding::kE4m3fn;
};

struct IndexerTopKParams {
  const float* logits = nullptr;           // [rows, logits_stride]
  const int32_t* row_key_start = nullptr;  // [rows]
  const int32_t* row_key_end = nullptr;    // [rows], <= width
  int32_t* topk_indices = nullptr;         // [rows, topk_stride], output
  int64_t rows = 0;
  int64_t width = 0;
  int64_t logits_stride = 0;  // floats between rows (>= width)
  int32_t topk = 0;
  int64_t topk_stride = 0;  // int32 elements between rows (>= topk)
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_INDEXER_PARAMS_H_
