// Parameters of the memory-bound ops' GPU kernels (cache/launch.h): the
// indexer K write, the indexer Q preparation and the MLA latent cache write.
// Raw device pointers, element strides and sizes, plain C++ (no HIP or CUDA
// types).
#ifndef DSA_ATTENTION_GPU_CACHE_PARAMS_H_
#define DSA_ATTENTION_GPU_CACHE_PARAMS_H_

#include <cstdint>

#include "attention/gpu/device/formats.h"

namespace dsa::attention::gpu {

enum class RopeKind : int32_t { kNeox = 0, kInterleaved = 1 };

struct IndexerKWriteParams {
  const void* k = nullptr;  // [tokens, head_dim], rows k_row_stride apart
  FloatFormat k_type = FloatFormat::kFloat32;
  int64_t k_row_stride = 0;         // elements
  const void* ln_weight = nullptr;  // [head_dim], contiguous
  FloatFormat ln_weight_type = FloatFormat::kFloat32;
  const void* ln_bias = nullptr;  // [head_dim], contiguous
  FloatFormat ln_bias_type = FloatFormat::kFloat32;
  float ln_eps = 1e-6f;
  const int64_t* positions = nullptr;  // [tokens]
  int64_t positions_stride = 1;
  const float* cos_sin_cache = nullptr;  // [max_position, rope_dim]
  int64_t max_position = 0;
  int64_t cos_sin_stride = 0;  // floats between positions
  int32_t rope_dim = 0;
  RopeKind rope = RopeKind::kNeox;
  const int64_t* slot_mapping = nullptr;  // [tokens], -1 = skip
  int64_t slot_mapping_stride = 1;
  // [num_blocks, block_size, head_dim + 4] bytes, contiguous: per block,
  // block_size * head_dim fp8 values, then block_size fp32 scales.
  uint8_t* k_cache = nullptr;
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  Fp8Encoding encoding = Fp8Encoding::kE4m3fn;
  int32_t* topk_indices = nullptr;  // [tokens, topk], set to -1
  int32_t topk = 0;
  int64_t topk_stride = 0;  // int32 elements between rows
  int64_t tokens = 0;
  int32_t head_dim = 0;
  // Tests and benchmarks: use the general (shared-memory) path even where
  // the register path fits (head_dim 128, rope_dim / 8 a power of two; see
  // cache/heuristics.h).
  bool force_staged_path = false;
  // The indexer numerics of ops.h: round to bf16 after the LayerNorm, after
  // rope and after the rotation; the ue8m0 divisor (0: the format's max);
  // the Hadamard rotation (head_dim a power of two; takes the staged path).
  bool round_to_bf16 = false;
  float scale_divisor = 0.0f;
  bool hadamard_rotation = false;
};

struct IndexerQParams {
  const void* q = nullptr;  // [tokens, heads, head_dim]
  FloatFormat q_type = FloatFormat::kFloat32;
  int64_t q_token_stride = 0;  // elements
  int64_t q_head_stride = 0;
  const void* weights = nullptr;  // [tokens, heads]
  FloatFormat weights_type = FloatFormat::kFloat32;
  int64_t weights_token_stride = 0;
  int64_t weights_head_stride = 0;
  const int64_t* positions = nullptr;  // [tokens]
  int64_t positions_stride = 1;
  const float* cos_sin_cache = nullptr;  // [max_position, rope_dim]
  int64_t max_position = 0;
  int64_t cos_sin_stride = 0;
  int32_t rope_dim = 0;
  RopeKind rope = RopeKind::kNeox;
  uint8_t* q_fp8 = nullptr;  // [tokens, heads, head_dim], output
  int64_t q_fp8_token_stride = 0;
  int64_t q_fp8_head_stride = 0;
  Fp8Encoding encoding = Fp8Encoding::kE4m3fn;
  float* head_weights = nullptr;  // [tokens, heads], output
  int64_t head_weights_token_stride = 0;
  int64_t head_weights_head_stride = 0;
  int64_t tokens = 0;
  int32_t heads = 0;
  int32_t head_dim = 0;
  // As IndexerKWriteParams (no LayerNorm: rounded after rope and after the
  // rotation). The register path here needs head_dim 128 and rope_dim 32,
  // 64 or 128.
  bool force_staged_path = false;
  bool round_to_bf16 = false;
  float scale_divisor = 0.0f;
  bool hadamard_rotation = false;
};

// The MLA latent cache's element layout.
enum class LatentLayout : int32_t { kBFloat16 = 0, kFp8 = 1 };

struct MlaCacheWriteParams {
  const void* kv_c = nullptr;  // [tokens, kv_lora_rank]
  FloatFormat kv_c_type = FloatFormat::kFloat32;
  int64_t kv_c_stride = 0;     // elements between tokens
  const void* k_pe = nullptr;  // [tokens, rope_dim]
  FloatFormat k_pe_type = FloatFormat::kFloat32;
  int64_t k_pe_stride = 0;
  const int64_t* slot_mapping = nullptr;  // [tokens], -1 = skip
  int64_t slot_mapping_stride = 1;
  // Entries of LatentCacheEntryWidth bytes/elements (ops.h), addressed as
  // kv_cache + block * block_stride_bytes + offset * slot_stride_bytes.
  uint8_t* kv_cache = nullptr;
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int64_t block_stride_bytes = 0;
  int64_t slot_stride_bytes = 0;
  LatentLayout layout = LatentLayout::kBFloat16;
  Fp8Encoding encoding = Fp8Encoding::kE4m3fn;  // kFp8 only
  int32_t kv_lora_rank = 0;                     // a multiple of 128 for kFp8
  int32_t rope_dim = 0;
  int64_t tokens = 0;
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_CACHE_PARAMS_H_
