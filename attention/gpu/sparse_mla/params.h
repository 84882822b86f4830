// Parameters of the sparse MLA's GPU kernels (sparse_mla/launch.h): raw
// device pointers, strides and sizes, plain C++ (no HIP or CUDA types).
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_PARAMS_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_PARAMS_H_

#include <cstdint>

#include "attention/gpu/device/formats.h"

namespace dsa::attention::gpu {

struct SparseMlaParams {
  // [tokens, heads, kv_lora_rank + rope_dim]; the last dim contiguous.
  const void* q = nullptr;
  FloatFormat q_format = FloatFormat::kFloat32;
  int64_t q_token_stride = 0;  // elements
  int64_t q_head_stride = 0;   // elements

  // [num_blocks, block_size, entry] bytes, each entry contiguous.
  const uint8_t* kv_cache = nullptr;
  LatentCacheType cache_type = LatentCacheType::kBFloat16;
  int64_t cache_block_stride = 0;  // bytes
  int64_t cache_token_stride = 0;  // bytes
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t kv_lora_rank = 512;
  int32_t rope_dim = 64;

  const int32_t* block_table = nullptr;  // [num_requests, block_table_stride]
  int32_t num_requests = 0;
  int32_t max_blocks_per_request = 0;      // block-table columns in use
  int64_t block_table_stride = 0;          // int32 elements between requests
  const int32_t* seq_lens = nullptr;       // [num_requests]
  const int32_t* token_request = nullptr;  // [tokens]
  const int32_t* topk_indices = nullptr;   // [tokens, topk_stride]
  int32_t topk = 0;
  int64_t topk_stride = 0;  // int32 elements between rows (>= topk)

  // [heads * (qk_nope + v_head_dim), kv_lora_rank]; rows contiguous.
  const void* kv_b_proj = nullptr;
  FloatFormat kv_b_proj_format = FloatFormat::kFloat32;
  int64_t kv_b_proj_row_stride = 0;  // elements
  int32_t qk_nope_head_dim = 128;
  int32_t v_head_dim = 128;
  float softmax_scale = 0.0f;

  // [tokens, heads, v_head_dim]; the last dim contiguous.
  void* output = nullptr;
  FloatFormat output_format = FloatFormat::kFloat32;
  int64_t output_token_stride = 0;  // elements
  int64_t output_head_stride = 0;   // elements

  int64_t tokens = 0;
  int32_t heads = 0;
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_PARAMS_H_
