// GPU kernel of the sparse MLA in its absorbed (MQA) form: every query row
// attends, with all of its heads, to the latent cache entries at its own
// top-k positions, and the latent result goes through each head's W_UV.
// Same semantics as SparseMla in attention/ops.h (and the CPU kernel in
// attention/cpu/mla_kernels.cc); see there.
//
// Plain C++ (no HIP or CUDA types), like indexer_kernels.h, whose
// LaunchResult, DeviceMalloc and TimeMedianMs it shares. The launcher
// enqueues its kernels on `stream` and does not synchronise.
//
// The launcher checks what it can see without reading device memory. The
// index tensors live on the device: the kernels skip every top-k index that
// is not -1 and lies outside its request's tokens, every block id outside
// the cache and every invalid request (a row with nothing valid outputs
// zeros), so bad indices give wrong values but never an access outside the
// buffers described here. The op layer (op_kernels.cc) does not read them
// either.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_KERNELS_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_KERNELS_H_

#include <cstdint>

#include "attention/gpu/indexer_kernels.h"

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

// output = SparseMla(params). The attention runs on bf16 matrix cores
// (platform/gpu/mma.h) for kv_lora_rank 512 / rope_dim 64 with 16-byte
// aligned cache entries, any heads, topk and block_size: on Hopper's
// warpgroup product (WarpgroupBf16Mma, sm_90a builds) for 64 heads or more,
// on the warp-level one (Bf16WarpMma) otherwise; other shapes run on a
// plain-FMA kernel. W_UV runs on the platform's GEMM (cuBLASLt on CUDA,
// through dense_op_kernels.h). q is rounded to bf16 once, fp8 cache
// entries are dequantised exactly to bf16 (power-of-two scales), the
// softmax probabilities and the normalised latent output are rounded to
// bf16 before their products (fp32 accumulation throughout), and so is
// W_UV. See sparse_mla_kernels_test.cc for the resulting error bound.
LaunchResult SparseMlaLaunch(const SparseMlaParams& params, void* stream);

// Which attention kernel SparseMlaLaunch picks: "wgmma" (sm_90a warpgroup
// kernel: bf16 cache, 64 heads or more), "mma" (warp-level matrix kernel)
// or "fma".
const char* SparseMlaPath(const SparseMlaParams& params);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_KERNELS_H_
