// Parameters of the dense causal MHA prefill's GPU kernels
// (dense_mha/launch.h): raw device pointers and sizes, host copies of the
// lengths; plain C++ (no HIP or CUDA types).
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_PARAMS_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_PARAMS_H_

#include <cstdint>

#include "attention/gpu/device/formats.h"

namespace dsa::attention::gpu {

// The attention's bodies (dense_mha/heuristics.h chooses one).
enum class DenseMhaBody : int32_t {
  kAuto = -1,          // as a request: the heuristics' choice
  kWarp = 0,           // warp-level products (mma.sync, MFMA): any device
  kSm90Pipelined = 1,  // sm_90a: cp.async and wgmma, any head dims
  kSm90Tma = 2,        // sm_90a: TMA and wgmma, warp-specialised; nope,
                       // rope and v multiples of 64
};

struct DenseMhaPrefillParams {
  const void* q = nullptr;  // [tokens, heads, nope + rope], contiguous
  FloatFormat q_format = FloatFormat::kBFloat16;
  // [num_blocks, block_size, entry] contiguous; entry = 2 (kv_lora + rope)
  // bytes (bf16) or kv_lora + 4 kv_lora / 128 + 2 rope bytes (fp8).
  const void* kv_cache = nullptr;
  LatentCacheType cache_encoding = LatentCacheType::kBFloat16;
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t kv_lora_rank = 512;
  int32_t rope_dim = 64;
  const int32_t* block_table = nullptr;  // device [num_requests, stride]
  int32_t num_requests = 0;
  int32_t max_blocks_per_request = 0;  // block-table columns in use
  int64_t block_table_stride = 0;      // int32 elements between requests
  // Host copies: [num_requests] and [num_requests + 1] (0 .. tokens,
  // non-decreasing, each request's count <= its seq_len).
  const int32_t* host_seq_lens = nullptr;
  const int32_t* host_query_start_loc = nullptr;
  const void* kv_b_proj = nullptr;  // [heads * (nope + v), kv_lora]
  FloatFormat kv_b_proj_format = FloatFormat::kBFloat16;
  // Optional: W_UK [heads * nope, kv_lora] and W_UV [heads * v, kv_lora],
  // kv_b_proj's row blocks split out once by the caller, bf16 and
  // contiguous; the vendor GEMM's decompression reads them instead of
  // kv_b_proj's row groups. Both or neither.
  const uint16_t* w_uk = nullptr;
  const uint16_t* w_uv = nullptr;
  void* output = nullptr;  // [tokens, heads, v], contiguous
  FloatFormat output_format = FloatFormat::kBFloat16;
  int64_t tokens = 0;
  int32_t heads = 0;
  int32_t qk_nope_head_dim = 0;
  int32_t v_head_dim = 0;
  float softmax_scale = 0.0f;
  // Plan the call and take its scratch from the stream's arena (growing
  // it), then return without launching (DenseMhaPrefill's reserve_only).
  bool reserve_only = false;
  // Decompress on gemm_bf16.h even where a vendor GEMM is loaded (tests
  // compare both).
  bool own_decompression_gemm = false;
  // Run this attention body instead of the heuristics' choice (tests and
  // benchmarks compare them); kInvalidArgument where this build, the device
  // or the head dims cannot run it.
  DenseMhaBody attention_body = DenseMhaBody::kAuto;
  // At most this many CTAs for the persistent TMA body (0: the heuristics'
  // grid, one per multiprocessor); tests cap it so that each CTA runs many
  // tiles.
  int32_t attention_ctas = 0;
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_PARAMS_H_
