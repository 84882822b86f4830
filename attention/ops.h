// The attention op interface: the seven ops of DeepSeek sparse attention
// (DeepSeek-V3.2, GLM-5.x) that every platform implements.
//
// Each op is a struct with
//   kName, kAbiVersion  the registry key (platform::Registry::FindKernel and
//                       DsaKernelDescriptor), from attention/kernel_api.h;
//   Args                plain tensor views (attention/tensor.h) and scalars,
//                       generated from the op's argument list in
//                       kernel_api.h, with their defaults;
//   CArgs, CFn          the C struct and entry point a kernel crosses a
//                       plugin boundary with (kernel_api.h); hosts call
//                       kernels through Kernel<Op> (kernel_lookup.h), plugins
//                       expose C++ kernels through CKernel (kernel_abi.h);
//   Validate(args)      the metadata checks (ranks, dtypes, shapes, strides,
//                       overflow, aliasing of outputs) shared by every
//                       platform's kernel. They never read tensor elements,
//                       which may live on a device.
// This header and everything a kernel needs use dsa::Status, not Abseil:
// kernels run inside plugin shared objects that link no Abseil.
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
#include <string_view>

#include "attention/dtypes/dtype.h"
#include "attention/kernel_api.h"
#include "attention/tensor.h"
#include "platform/checked_size.h"
#include "platform/core_status.h"

namespace dsa::attention {

// How a call executes; passed by the engine on every call
// (DsaExecutionContext across the boundary).
struct ExecutionContext {
  // GPU platforms: the hipStream_t / cudaStream_t to enqueue on (nullptr is
  // the default stream). Kernels are asynchronous there; the CPU platform
  // finishes before returning.
  void* stream = nullptr;
  // CPU platform: worker threads; 0 means one per hardware thread.
  int32_t num_threads = 0;
};

enum class RopeStyle : int32_t {
  kNeox = DSA_ROPE_NEOX,                // DeepSeek-V3.2's indexer
  kInterleaved = DSA_ROPE_INTERLEAVED,  // GLM-5.x's indexer
};

// The C++ side of an op's argument list (kernel_api.h): the same fields, as
// tensor views, enums and LatentCacheFormat, with their defaults.
#define DSA_CXX_TENSOR_FIELD(name, direction) TensorView name;
#define DSA_CXX_SCALAR_FIELD(c_type, name, default_value) \
  c_type name = default_value;
#define DSA_CXX_ENUM_FIELD(cxx_enum, name, default_value) \
  cxx_enum name = cxx_enum::default_value;
#define DSA_CXX_FORMAT_FIELD(name) LatentCacheFormat name;

// The members every op struct has.
#define DSA_OP_MEMBERS(CxxName, LIST, PREFIX)                            \
  static constexpr const char* kName = PREFIX##_NAME;                    \
  static constexpr uint32_t kAbiVersion = PREFIX##_ABI_VERSION;          \
  using CArgs = Dsa##CxxName##Args;                                      \
  using CFn = Dsa##CxxName##Fn;                                          \
  struct Args {                                                          \
    LIST(DSA_CXX_TENSOR_FIELD, DSA_CXX_SCALAR_FIELD, DSA_CXX_ENUM_FIELD, \
         DSA_CXX_FORMAT_FIELD)                                           \
  };                                                                     \
  static Status Validate(const Args& args)

// ---------------------------------------------------------------------------
// Indexer K cache, one per indexer layer. uint8 view
//   [num_blocks, block_size, head_dim + 4]
// but, as in vLLM, each block is laid out as block_size * head_dim fp8
// values (token-major) followed by block_size fp32 scales: token t of a
// block has its values at byte t * head_dim and its scale at byte
// block_size * head_dim + 4 * t. The view must be contiguous.

// (1) Fused LayerNorm + rope + fp8 quantisation + indexer K cache write, and
// the top-k buffer clear.
//   y = round(LayerNorm(k) * ln_weight + ln_bias) (eps ln_eps, biased var.)
//   y = round(rope on y[0 : rope_dim] at positions[t])
//   y = round(H y / sqrt(head_dim))            only with hadamard_rotation
//   scale = Ue8m0Scale(max|y|, divisor)        (attention/dtypes/fp8.h)
//   cache(slot_mapping[t]) = fp8(y / scale), scale
// where round() is to intermediate_dtype (bf16 as the engines' bf16
// tensors; float32: none) and divisor is fp8_scale_divisor, or the fp8
// format's max when it is 0 (the indexer numerics of kernel_api.h, appended
// to the op; their defaults are the op's behaviour before them). H is the
// Walsh-Hadamard matrix, applied as log2(head_dim) butterfly stages of
// distance 1, 2, 4, ... in float32 (attention/dtypes/hadamard.h).
// and topk_indices[t, :] = -1 for every token (including padding slots), so
// that a batch whose scoring is skipped leaves no stale indices behind.
struct IndexerKWrite {
  // Args (DSA_INDEXER_K_WRITE_ARGS in kernel_api.h):
  //   TensorView k;              // [tokens, head_dim] f32|bf16: wk(x)
  //   TensorView ln_weight;      // [head_dim] f32|bf16
  //   TensorView ln_bias;        // [head_dim] f32|bf16
  //   float ln_eps = 1e-6f;
  //   TensorView positions;      // [tokens] int64
  //   TensorView cos_sin_cache;  // [max_position, rope_dim] f32
  //   RopeStyle rope_style = RopeStyle::kNeox;
  //   TensorView slot_mapping;   // [tokens] int64, -1 = skip
  //   TensorView k_cache;        // [num_blocks, block_size, head_dim + 4] u8
  //   DType cache_dtype = DType::kFloat8E4m3fn;  // fp8 encoding in k_cache
  //   TensorView topk_indices;   // [tokens, topk] int32, output (all -1)
  //   DType intermediate_dtype = DType::kFloat32;  // kFloat32 | kBFloat16
  //   float fp8_scale_divisor = 0.0f;  // 0: the fp8 format's max
  //   int32_t hadamard_rotation = 0;   // 0 | 1
  DSA_OP_MEMBERS(IndexerKWrite, DSA_INDEXER_K_WRITE_ARGS,
                 DSA_OP_INDEXER_K_WRITE);
};

// (2) Indexer queries: rope on the first rope_dim dims of every head (then
// rounded to intermediate_dtype; with hadamard_rotation the Hadamard
// rotation, rounded again, as the K write does), fp8 quantisation per
// (token, head) with an ue8m0 scale of divisor fp8_scale_divisor (0: the
// format's max), and the head weights that fold that scale in:
//   head_weights[t,h] = weights[t,h] * q_scale[t,h] * head_dim^-0.5
//                       * heads^-0.5
// so that logits need no per-head q scale.
struct IndexerQ {
  // Args (DSA_INDEXER_Q_ARGS in kernel_api.h):
  //   TensorView q;              // [tokens, heads, head_dim] f32|bf16:
  //   wq_b(q_lat) TensorView weights;        // [tokens, heads] f32|bf16:
  //   weights_proj(x) TensorView positions;      // [tokens] int64 TensorView
  //   cos_sin_cache;  // [max_position, rope_dim] f32 RopeStyle rope_style =
  //   RopeStyle::kNeox; TensorView q_fp8;          // [tokens, heads, head_dim]
  //   fp8, output TensorView head_weights;   // [tokens, heads] f32, output
  DSA_OP_MEMBERS(IndexerQ, DSA_INDEXER_Q_ARGS, DSA_OP_INDEXER_Q);
};

// (3) Indexer logits over the paged indexer K cache:
//   logits[i, j] = sum_h relu(q[i,h] . k[j] * k_scale[j]) * head_weights[i,h]
// for j in [row_key_start[i], row_key_end[i]) of request row_request[i], and
// -inf for every other column j < logits width. Column j is the request's
// token j. The cache holds q_fp8's encoding.
struct IndexerLogits {
  // Args (DSA_INDEXER_LOGITS_ARGS in kernel_api.h):
  //   TensorView q_fp8;          // [rows, heads, head_dim] fp8
  //   TensorView head_weights;   // [rows, heads] f32
  //   TensorView k_cache;        // [num_blocks, block_size, head_dim + 4] u8
  //   TensorView block_table;    // [num_requests, max_blocks] int32
  //   TensorView seq_lens;       // [num_requests] int32: tokens in the cache
  //   TensorView row_request;    // [rows] int32
  //   TensorView row_key_start;  // [rows] int32
  //   TensorView row_key_end;    // [rows] int32, <= seq_len, <= logits width
  //   TensorView logits;         // [rows, width] f32, output
  DSA_OP_MEMBERS(IndexerLogits, DSA_INDEXER_LOGITS_ARGS, DSA_OP_INDEXER_LOGITS);
  // Bytes of the logits buffer for `rows` query rows whose windows end at
  // or before `max_seq_len`: what an engine reserves in its profile run.
  // Zero when either is not positive; overflowed when the product is past
  // int64.
  static CheckedSize WorkspaceBytes(int64_t rows, int64_t max_seq_len);
};

// (4) Top-k per row. The selected keys are the k largest logits in the
// row's window [row_key_start, row_key_end) with ties broken by the lower
// index (NaN ranks below -inf). Output: the selected positions (absolute,
// i.e. logits columns) in ASCENDING position order, then -1 padding when the
// window holds fewer than topk keys. Ascending order makes the result a
// deterministic set representation that is cheap on GPUs; the sparse MLA is
// order-independent.
struct IndexerTopK {
  // Args (DSA_INDEXER_TOPK_ARGS in kernel_api.h):
  //   TensorView logits;         // [rows, width] f32
  //   TensorView row_key_start;  // [rows] int32
  //   TensorView row_key_end;    // [rows] int32, <= width
  //   TensorView topk_indices;   // [rows, topk] int32, output
  DSA_OP_MEMBERS(IndexerTopK, DSA_INDEXER_TOPK_ARGS, DSA_OP_INDEXER_TOPK);
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
Status CheckLatentCache(std::string_view op, const TensorView& kv_cache,
                        const LatentCacheFormat& format);

// (7) MLA latent cache write at slot_mapping (-1 skipped).
struct MlaCacheWrite {
  // Args (DSA_MLA_CACHE_WRITE_ARGS in kernel_api.h):
  //   TensorView kv_c;          // [tokens, kv_lora_rank] f32|bf16
  //   TensorView k_pe;          // [tokens, rope_dim] f32|bf16 (already roped)
  //   TensorView slot_mapping;  // [tokens] int64, -1 = skip
  //   TensorView kv_cache;      // latent cache, see LatentCacheFormat
  //   LatentCacheFormat cache_format;
  DSA_OP_MEMBERS(MlaCacheWrite, DSA_MLA_CACHE_WRITE_ARGS,
                 DSA_OP_MLA_CACHE_WRITE);
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
  // Args (DSA_SPARSE_MLA_ARGS in kernel_api.h):
  //   TensorView q;              // [tokens, heads, kv_lora_rank + rope_dim]
  //   f32|bf16 TensorView kv_cache;       // latent cache LatentCacheFormat
  //   cache_format; TensorView block_table;    // [num_requests, max_blocks]
  //   int32 TensorView seq_lens;       // [num_requests] int32 TensorView
  //   token_request;  // [tokens] int32 TensorView topk_indices;   // [tokens,
  //   topk] int32, positions or -1 TensorView kv_b_proj;      // [heads *
  //   (qk_nope + v), kv_lora_rank] f32|bf16 int32_t qk_nope_head_dim = 128;
  //   float softmax_scale = 0.0f;
  //   TensorView output;         // [tokens, heads, v_head_dim] f32|bf16,
  //   output
  DSA_OP_MEMBERS(SparseMla, DSA_SPARSE_MLA_ARGS, DSA_OP_SPARSE_MLA);
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
//
// seq_lens_host and query_start_loc_host are optional host-memory copies of
// seq_lens and query_start_loc, holding the same values (an engine has them:
// vLLM's seq_lens_cpu and query_start_loc_cpu). A GPU kernel plans its
// launch from these lengths; given the copies it enqueues without waiting,
// without them it copies the device tensors back, which waits for the
// stream (and cannot be captured in a graph). Give both or neither (the
// default view is absent: TensorView::absent). The CPU kernel reads seq_lens
// and query_start_loc, which are host memory there.
//
// w_uk and w_uv are optional copies of kv_b_proj's per-head row blocks,
// W_UK [heads, qk_nope, kv_lora] and W_UV [heads, v, kv_lora], holding the
// same values in kv_b_proj's dtype: a layer's kv_b_proj is constant, so a
// caller splits it once (at load) rather than every call. Given them, the
// kernels read W_UK and W_UV from there (the GPU kernel then launches no
// split of its own before its vendor GEMMs); the result is the same to the
// bit. Give both or neither.
//
// reserve_only 1 makes the call check its arguments and make ready what a
// call of the same shapes needs, computing nothing and writing no output
// (the device tensors' values are not read): a GPU kernel plans the launch
// from the host copies of the lengths (which reserve_only requires) and
// grows its stream's
// scratch arena (attention/gpu/device/scratch_arena.h) to the call's size,
// so that a caller (a model's step) learns before it writes anything
// whether the call fits in memory (RESOURCE_EXHAUSTED when it does not),
// and the real call after it allocates nothing. On the CPU it only checks.
struct DenseMhaPrefill {
  // Args (DSA_DENSE_MHA_PREFILL_ARGS in kernel_api.h):
  //   q                     [tokens, heads, qk_nope + rope_dim] f32|bf16
  //   kv_cache              latent cache, cache_format
  //   block_table           [num_requests, max_blocks] int32
  //   seq_lens              [num_requests] int32: context + new tokens
  //   query_start_loc       [num_requests + 1] int32
  //   kv_b_proj             [heads * (qk_nope + v), kv_lora_rank] f32|bf16
  //   softmax_scale         float, > 0
  //   output                [tokens, heads, v_head_dim] f32|bf16
  //   seq_lens_host         optional: seq_lens in host memory
  //   query_start_loc_host  optional: query_start_loc in host memory
  //   w_uk                  optional: [heads, qk_nope, kv_lora_rank]
  //   w_uv                  optional: [heads, v_head_dim, kv_lora_rank]
  //   reserve_only          int32, 0 (default) or 1
  DSA_OP_MEMBERS(DenseMhaPrefill, DSA_DENSE_MHA_PREFILL_ARGS,
                 DSA_OP_DENSE_MHA_PREFILL);
};

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_OPS_H_
