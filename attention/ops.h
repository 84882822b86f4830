// The attention op interface: the seven ops of DeepSeek sparse attention
// (DeepSeek-V3.2, GLM-5.x) that every platform implements.
//
// Each op is a struct with
//   kName, kAbiVersion  the registry key (platform::Registry::FindKernel and
//                       DsaKernelDescriptor); bump kAbiVersion on any change
//                       to Args, so a host never calls a kernel built
//                       against another layout;
//   Args                plain tensor views (attention/tensor.h) and scalars;
//   Fn                  absl::Status (*)(const ExecutionContext&, const Args&);
//   Validate(args)      the metadata checks (ranks, dtypes, shapes, strides)
//                       shared by every platform's kernel. They never read
//                       tensor elements, which may live on a device.
// Kernels additionally check element values they depend on (slots, block
// ids, positions, windows, indices) and never read or write outside a view:
// the CPU kernels check every value before writing anything and return
// OutOfRange; GPU kernels must at least skip what is out of range.
//
// Conventions shared by the ops:
//  - Paged caches are addressed by slot = block_id * block_size + offset.
//    A slot of -1 in a slot_mapping is padding (as in vLLM) and is skipped.
//  - A request's tokens are numbered by position 0..seq_len-1; token p lives
//    in block block_table[request][p / block_size] at offset p % block_size.
//  - Key windows [key_start, key_end) and top-k indices are such positions
//    ("absolute" within the request), so logits column j, top-k index j and
//    the sparse MLA's key j are all the request's token j.
//  - Rope: cos_sin_cache[position] holds rope_dim/2 cosines then rope_dim/2
//    sines (vLLM's layout); pair i uses cos[i], sin[i]. NeoX style rotates
//    (x[i], x[i + rope_dim/2]), interleaved style (x[2i], x[2i+1]); rope
//    applies to the FIRST rope_dim dims of each vector.
//  - fp32 accumulation everywhere; fp32 or bf16 float inputs.
#ifndef DSA_ATTENTION_OPS_H_
#define DSA_ATTENTION_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "attention/dtypes/dtype.h"
#include "attention/tensor.h"

namespace dsa::attention {

// How a call executes; passed by the engine on every call. It is part of
// every op's signature: changing it bumps every op's kAbiVersion.
struct ExecutionContext {
  // GPU platforms: the hipStream_t / cudaStream_t to enqueue on (nullptr is
  // the default stream). Kernels are asynchronous there; the CPU platform
  // finishes before returning.
  void* stream = nullptr;
  // CPU platform: worker threads; 0 means one per hardware thread.
  int32_t num_threads = 0;
};

enum class RopeStyle : int32_t {
  kNeox = 0,         // DeepSeek-V3.2's indexer
  kInterleaved = 1,  // GLM-5.x's indexer
};

// ---------------------------------------------------------------------------
// Indexer K cache, one per indexer layer. uint8 view
//   [num_blocks, block_size, head_dim + 4]
// but, as in vLLM, each block is laid out as block_size * head_dim fp8
// values (token-major) followed by block_size fp32 scales: token t of a
// block has its values at byte t * head_dim and its scale at byte
// block_size * head_dim + 4 * t. The view must be contiguous.

// (1) Fused LayerNorm + rope + fp8 quantisation + indexer K cache write, and
// the top-k buffer clear.
//   y = LayerNorm(k) * ln_weight + ln_bias   (eps ln_eps, biased variance)
//   rope on y[0 : rope_dim] at positions[t]
//   scale = Ue8m0Scale(max|y|, fp8_max)      (attention/dtypes/fp8.h)
//   cache(slot_mapping[t]) = fp8(y / scale), scale
// and topk_indices[t, :] = -1 for every token (including padding slots), so
// that a batch whose scoring is skipped leaves no stale indices behind.
struct IndexerKWrite {
  static constexpr const char* kName = "indexer_k_write";
  static constexpr uint32_t kAbiVersion = 1;
  struct Args {
    TensorView k;              // [tokens, head_dim] f32|bf16: wk(x)
    TensorView ln_weight;      // [head_dim] f32|bf16
    TensorView ln_bias;        // [head_dim] f32|bf16
    float ln_eps = 1e-6f;
    TensorView positions;      // [tokens] int64
    TensorView cos_sin_cache;  // [max_position, rope_dim] f32
    RopeStyle rope_style = RopeStyle::kNeox;
    TensorView slot_mapping;   // [tokens] int64, -1 = skip
    TensorView k_cache;        // [num_blocks, block_size, head_dim + 4] u8
    DType cache_dtype = DType::kFloat8E4m3fn;  // fp8 encoding in k_cache
    TensorView topk_indices;   // [tokens, topk] int32, output (all -1)
  };
  using Fn = absl::Status (*)(const ExecutionContext&, const Args&);
  static absl::Status Validate(const Args& args);
};

// (2) Indexer queries: rope on the first rope_dim dims of every head,
// fp8 quantisation per (token, head) with an ue8m0 scale, and the head
// weights that fold that scale in:
//   head_weights[t,h] = weights[t,h] * q_scale[t,h] * head_dim^-0.5
//                       * heads^-0.5
// so that logits need no per-head q scale.
struct IndexerQ {
  static constexpr const char* kName = "indexer_q";
  static constexpr uint32_t kAbiVersion = 1;
  struct Args {
    TensorView q;              // [tokens, heads, head_dim] f32|bf16: wq_b(q_lat)
    TensorView weights;        // [tokens, heads] f32|bf16: weights_proj(x)
    TensorView positions;      // [tokens] int64
    TensorView cos_sin_cache;  // [max_position, rope_dim] f32
    RopeStyle rope_style = RopeStyle::kNeox;
    TensorView q_fp8;          // [tokens, heads, head_dim] fp8, output
    TensorView head_weights;   // [tokens, heads] f32, output
  };
  using Fn = absl::Status (*)(const ExecutionContext&, const Args&);
  static absl::Status Validate(const Args& args);
};

// (3) Indexer logits over the paged indexer K cache:
//   logits[i, j] = sum_h relu(q[i,h] . k[j] * k_scale[j]) * head_weights[i,h]
// for j in [row_key_start[i], row_key_end[i]) of request row_request[i], and
// -inf for every other column j < logits width. Column j is the request's
// token j. The cache holds q_fp8's encoding.
struct IndexerLogits {
  static constexpr const char* kName = "indexer_logits";
  static constexpr uint32_t kAbiVersion = 1;
  struct Args {
    TensorView q_fp8;          // [rows, heads, head_dim] fp8
    TensorView head_weights;   // [rows, heads] f32
    TensorView k_cache;        // [num_blocks, block_size, head_dim + 4] u8
    TensorView block_table;    // [num_requests, max_blocks] int32
    TensorView seq_lens;       // [num_requests] int32: tokens in the cache
    TensorView row_request;    // [rows] int32
    TensorView row_key_start;  // [rows] int32
    TensorView row_key_end;    // [rows] int32, <= seq_len, <= logits width
    TensorView logits;         // [rows, width] f32, output
  };
  using Fn = absl::Status (*)(const ExecutionContext&, const Args&);
  static absl::Status Validate(const Args& args);
  // Bytes of the logits buffer for `rows` query rows whose windows end at
  // or before `max_seq_len`: what an engine reserves in its profile run.
  static int64_t WorkspaceBytes(int64_t rows, int64_t max_seq_len);
};

// (4) Top-k per row. The selected keys are the k largest logits in the
// row's window [row_key_start, row_key_end) with ties broken by the lower
// index (NaN ranks below -inf). Output: the selected positions (absolute,
// i.e. logits columns) in ASCENDING position order, then -1 padding when the
// window holds fewer than topk keys. Ascending order makes the result a
// deterministic set representation that is cheap on GPUs; the sparse MLA is
// order-independent.
struct IndexerTopK {
  static constexpr const char* kName = "indexer_topk";
  static constexpr uint32_t kAbiVersion = 1;
  struct Args {
    TensorView logits;         // [rows, width] f32
    TensorView row_key_start;  // [rows] int32
    TensorView row_key_end;    // [rows] int32, <= width
    TensorView topk_indices;   // [rows, topk] int32, output
  };
  using Fn = absl::Status (*)(const ExecutionContext&, const Args&);
  static absl::Status Validate(const Args& args);
};

// ---------------------------------------------------------------------------
// MLA latent cache, one per attention layer: per token the normalised KV
// latent (kv_lora_rank values, "kv_c") and the roped key part (rope_dim
// values, "k_pe"). Two layouts:
//   bf16: bfloat16 [num_blocks, block_size, kv_lora_rank + rope_dim]
//         = kv_c | k_pe.
//   fp8:  uint8 [num_blocks, block_size, kv_lora_rank + 4 * kv_lora_rank/128
//         + 2 * rope_dim] (656 bytes for 512/64; vLLM's "fp8_ds_mla"):
//         kv_c as fp8 in tiles of 128 values, then one fp32 scale per tile,
//         then k_pe as bfloat16 (the rope part is small and
//         position-sensitive, so it is not quantised). Each tile's scale is
//         Ue8m0Scale(tile amax, fp8_max): the indexer's rule, exact powers of
//         two, so dequantisation adds no rounding.
struct LatentCacheFormat {
  // kBFloat16, kFloat8E4m3fn or kFloat8E4m3fnuz.
  DType dtype = DType::kBFloat16;
  int32_t kv_lora_rank = 512;
  int32_t rope_dim = 64;
};
inline constexpr int kLatentFp8TileSize = 128;

// Last dim of the cache view: 576 (bf16) or 656 (fp8) for 512/64.
int64_t LatentCacheEntryWidth(const LatentCacheFormat& format);
// Checks the format itself (dtype, kv_lora_rank a positive multiple of 128
// for fp8, rope_dim positive and even) and the cache view against it.
absl::Status CheckLatentCache(absl::string_view op, const TensorView& kv_cache,
                              const LatentCacheFormat& format);

// (7) MLA latent cache write at slot_mapping (-1 skipped).
struct MlaCacheWrite {
  static constexpr const char* kName = "mla_cache_write";
  static constexpr uint32_t kAbiVersion = 1;
  struct Args {
    TensorView kv_c;          // [tokens, kv_lora_rank] f32|bf16
    TensorView k_pe;          // [tokens, rope_dim] f32|bf16 (already roped)
    TensorView slot_mapping;  // [tokens] int64, -1 = skip
    TensorView kv_cache;      // latent cache, see LatentCacheFormat
    LatentCacheFormat cache_format;
  };
  using Fn = absl::Status (*)(const ExecutionContext&, const Args&);
  static absl::Status Validate(const Args& args);
};

// (5) Sparse MLA, absorbed (MQA) form, for prefill and decode tokens alike:
// every query row attends to the latent cache entries at its own top-k
// positions (-1 skipped) of request token_request[t]:
//   s[h, j] = softmax_scale * q[t,h,:] . cache[j, :]   (kv_lora + rope dims)
//   o[h]    = sum_j softmax_j(s[h, :]) * cache[j, 0:kv_lora]
//   output[t,h,:] = W_UV[h] o[h]
// with W_UV[h] = kv_b_proj rows [h*(nope+v) + nope, (h+1)*(nope+v)). A row
// without any valid index outputs zeros. Duplicate indices count twice.
struct SparseMla {
  static constexpr const char* kName = "sparse_mla";
  static constexpr uint32_t kAbiVersion = 1;
  struct Args {
    TensorView q;              // [tokens, heads, kv_lora_rank + rope_dim] f32|bf16
    TensorView kv_cache;       // latent cache
    LatentCacheFormat cache_format;
    TensorView block_table;    // [num_requests, max_blocks] int32
    TensorView seq_lens;       // [num_requests] int32
    TensorView token_request;  // [tokens] int32
    TensorView topk_indices;   // [tokens, topk] int32, positions or -1
    TensorView kv_b_proj;      // [heads * (qk_nope + v), kv_lora_rank] f32|bf16
    int32_t qk_nope_head_dim = 128;
    float softmax_scale = 0.0f;
    TensorView output;         // [tokens, heads, v_head_dim] f32|bf16, output
  };
  using Fn = absl::Status (*)(const ExecutionContext&, const Args&);
  static absl::Status Validate(const Args& args);
};

// (6) Dense causal MHA prefill over the latent cache. Request r owns query
// tokens [query_start_loc[r], query_start_loc[r+1]); they are its LAST
// tokens, so query token i of a request with query length n sits at position
// seq_len - n + i and attends to positions [0, that position]. Keys and
// values are decompressed from the latent cache (which the caller has
// already written for the new tokens):
//   k[j,h] = (W_UK[h] kv_c[j]) | k_pe[j]      (k_pe shared by all heads)
//   v[j,h] =  W_UV[h] kv_c[j]
// with kv_b_proj rows [h*(nope+v), h*(nope+v)+nope) = W_UK[h] and the next v
// rows = W_UV[h]; qk_nope = q's last dim - rope_dim. softmax_scale is
// qk_head_dim^-0.5 (times any yarn mscale^2), the same as the sparse path's.
struct DenseMhaPrefill {
  static constexpr const char* kName = "dense_mha_prefill";
  static constexpr uint32_t kAbiVersion = 1;
  struct Args {
    TensorView q;                // [tokens, heads, qk_nope + rope_dim] f32|bf16
    TensorView kv_cache;         // latent cache
    LatentCacheFormat cache_format;
    TensorView block_table;      // [num_requests, max_blocks] int32
    TensorView seq_lens;         // [num_requests] int32: context + new
    TensorView query_start_loc;  // [num_requests + 1] int32
    TensorView kv_b_proj;        // [heads * (qk_nope + v), kv_lora_rank]
    float softmax_scale = 0.0f;
    TensorView output;           // [tokens, heads, v_head_dim] f32|bf16
  };
  using Fn = absl::Status (*)(const ExecutionContext&, const Args&);
  static absl::Status Validate(const Args& args);
};

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_OPS_H_
