/*
 * The C ABI of the attention ops: what crosses a plugin shared object when a
 * host calls a kernel.
 *
 * A kernel is a C function
 *
 *   DsaStatusCode fn(const DsaExecutionContext* ctx, const Dsa<Op>Args* args,
 *                    char* error, size_t error_size);
 *
 * registered under the op's name and ABI version (DsaKernelDescriptor in
 * platform/plugin_api.h). It returns a status code (absl's numbering; running
 * out of memory is DSA_STATUS_RESOURCE_EXHAUSTED) and, on error, writes a
 * NUL-terminated message of at most error_size bytes. The semantics of every
 * op and of every argument are in attention/ops.h.
 *
 * Versioning, as in the rest of the plugin ABI:
 *  - Every struct starts with struct_size = sizeof at the writer's version.
 *  - A minor version only appends fields to an Args struct. A kernel reads
 *    at most args->struct_size bytes; fields an older host does not pass
 *    read as their defaults (ops.h). New fields default to the old
 *    behaviour.
 *  - The views and cache formats embedded in an Args struct are part of its
 *    layout: their struct_size must equal sizeof(DsaTensorView) /
 *    sizeof(DsaLatentCacheFormat); changing them bumps every op's ABI
 *    version, as does any change that is not an append.
 *
 * The argument lists are X-macros (one list per op) so that the C structs,
 * the C++ structs of ops.h and the conversions between them are generated
 * from one place. Each row is one of
 *   TENSOR(name, direction)         a DsaTensorView; direction IN, OUT or
 *                                   INOUT (a cache updated in place)
 *   SCALAR(c_type, name, default)   a number
 *   ENUM(cxx_enum, name, default)   an int32_t holding a C++ enum's value
 *   FORMAT(name)                    a DsaLatentCacheFormat
 */
#ifndef DSA_ATTENTION_KERNEL_API_H_
#define DSA_ATTENTION_KERNEL_API_H_

#include <stddef.h>
#include <stdint.h>

#include "platform/plugin_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types; the same numbers as dsa::attention::DType. */
typedef enum DsaDType {
  DSA_DTYPE_FLOAT32 = 0,
  DSA_DTYPE_BFLOAT16 = 1,
  DSA_DTYPE_FLOAT8_E4M3FN = 2,
  DSA_DTYPE_FLOAT8_E4M3FNUZ = 3,
  DSA_DTYPE_UINT8 = 4,
  DSA_DTYPE_INT32 = 5,
  DSA_DTYPE_INT64 = 6,
} DsaDType;

/* Rope styles; the same numbers as dsa::attention::RopeStyle. */
typedef enum DsaRopeStyle {
  DSA_ROPE_NEOX = 0,
  DSA_ROPE_INTERLEAVED = 1,
} DsaRopeStyle;

#define DSA_MAX_TENSOR_RANK 4

/* A strided view of elements; owns nothing. On GPU platforms `data` is a
 * device pointer. Dims past `rank` are ignored. */
typedef struct DsaTensorView {
  size_t struct_size;
  void* data;
  int32_t dtype; /* DsaDType */
  int32_t rank;  /* 0..DSA_MAX_TENSOR_RANK */
  int64_t shape[DSA_MAX_TENSOR_RANK];
  int64_t strides[DSA_MAX_TENSOR_RANK]; /* in elements, not bytes */
} DsaTensorView;

/* How a call executes. */
typedef struct DsaExecutionContext {
  size_t struct_size;
  /* GPU platforms: the hipStream_t / cudaStream_t to enqueue on (NULL: the
   * default stream); kernels are asynchronous there. */
  void* stream;
  /* CPU platform: worker threads; 0 means one per hardware thread. */
  int32_t num_threads;
} DsaExecutionContext;

/* The MLA latent cache's layout (ops.h, LatentCacheFormat). */
typedef struct DsaLatentCacheFormat {
  size_t struct_size;
  int32_t dtype; /* DSA_DTYPE_BFLOAT16 or an fp8 type */
  int32_t kv_lora_rank;
  int32_t rope_dim;
} DsaLatentCacheFormat;

/* ------------------------------------------------------------------------
 * The ops: name, ABI version and argument list. */

/* The numerics of the indexer's key and query before fp8, the same for
 * indexer_k_write and indexer_q, appended to both (their defaults are the
 * behaviour before they existed):
 *   intermediate_dtype  the type the vector is rounded to after the
 *                       LayerNorm (keys), after rope and after the Hadamard
 *                       rotation: bfloat16 as vLLM's and DeepSeek's bf16
 *                       tensors, float32 for no rounding;
 *   fp8_scale_divisor   the ue8m0 scale is max(amax, 1e-4) / divisor rounded
 *                       up to a power of two; 0 means the fp8 format's max
 *                       (448 e4m3fn, 240 e4m3fnuz); vLLM divides by 224 on
 *                       e4m3fnuz;
 *   hadamard_rotation   1: rotate the roped vector by H / sqrt(head_dim)
 *                       (Walsh-Hadamard, head_dim a power of two) before
 *                       quantising, as DeepSeek's reference and SGLang do. */
#define DSA_INDEXER_NUMERICS_ARGS(TENSOR, SCALAR, ENUM, FORMAT) \
  ENUM(DType, intermediate_dtype, kFloat32)                     \
  SCALAR(float, fp8_scale_divisor, 0.0f)                        \
  SCALAR(int32_t, hadamard_rotation, 0)

#define DSA_OP_INDEXER_K_WRITE_NAME "indexer_k_write"
#define DSA_OP_INDEXER_K_WRITE_ABI_VERSION 2
#define DSA_INDEXER_K_WRITE_ARGS(TENSOR, SCALAR, ENUM, FORMAT)               \
  TENSOR(k, IN)         /* [tokens, head_dim] f32|bf16: wk(x) */             \
  TENSOR(ln_weight, IN) /* [head_dim] f32|bf16 */                            \
  TENSOR(ln_bias, IN)   /* [head_dim] f32|bf16 */                            \
  SCALAR(float, ln_eps, 1e-6f)                                               \
  TENSOR(positions, IN)     /* [tokens] int64 */                             \
  TENSOR(cos_sin_cache, IN) /* [max_position, rope_dim] f32 */               \
  ENUM(RopeStyle, rope_style, kNeox)                                         \
  TENSOR(slot_mapping, IN) /* [tokens] int64, -1 = skip */                   \
  TENSOR(k_cache, INOUT)   /* [num_blocks, block_size, head_dim + 4] u8 */   \
  ENUM(DType, cache_dtype, kFloat8E4m3fn) /* fp8 encoding in k_cache */      \
  TENSOR(topk_indices, OUT)               /* [tokens, topk] int32, all -1 */ \
  /* Appended: the engine's rounding points and fp8 scale (ops.h). */        \
  DSA_INDEXER_NUMERICS_ARGS(TENSOR, SCALAR, ENUM, FORMAT)

#define DSA_OP_INDEXER_Q_NAME "indexer_q"
#define DSA_OP_INDEXER_Q_ABI_VERSION 2
#define DSA_INDEXER_Q_ARGS(TENSOR, SCALAR, ENUM, FORMAT)              \
  TENSOR(q, IN)             /* [tokens, heads, head_dim] f32|bf16 */  \
  TENSOR(weights, IN)       /* [tokens, heads] f32|bf16 */            \
  TENSOR(positions, IN)     /* [tokens] int64 */                      \
  TENSOR(cos_sin_cache, IN) /* [max_position, rope_dim] f32 */        \
  ENUM(RopeStyle, rope_style, kNeox)                                  \
  TENSOR(q_fp8, OUT)        /* [tokens, heads, head_dim] fp8 */       \
  TENSOR(head_weights, OUT) /* [tokens, heads] f32 */                 \
  /* Appended: the engine's rounding points and fp8 scale (ops.h). */ \
  DSA_INDEXER_NUMERICS_ARGS(TENSOR, SCALAR, ENUM, FORMAT)

#define DSA_OP_INDEXER_LOGITS_NAME "indexer_logits"
#define DSA_OP_INDEXER_LOGITS_ABI_VERSION 2
#define DSA_INDEXER_LOGITS_ARGS(TENSOR, SCALAR, ENUM, FORMAT)               \
  TENSOR(q_fp8, IN)         /* [rows, heads, head_dim] fp8 */               \
  TENSOR(head_weights, IN)  /* [rows, heads] f32 */                         \
  TENSOR(k_cache, IN)       /* [num_blocks, block_size, head_dim + 4] u8 */ \
  TENSOR(block_table, IN)   /* [num_requests, max_blocks] int32 */          \
  TENSOR(seq_lens, IN)      /* [num_requests] int32 */                      \
  TENSOR(row_request, IN)   /* [rows] int32 */                              \
  TENSOR(row_key_start, IN) /* [rows] int32 */                              \
  TENSOR(row_key_end, IN)   /* [rows] int32 */                              \
  TENSOR(logits, OUT)       /* [rows, width] f32 */

#define DSA_OP_INDEXER_TOPK_NAME "indexer_topk"
#define DSA_OP_INDEXER_TOPK_ABI_VERSION 2
#define DSA_INDEXER_TOPK_ARGS(TENSOR, SCALAR, ENUM, FORMAT) \
  TENSOR(logits, IN)        /* [rows, width] f32 */         \
  TENSOR(row_key_start, IN) /* [rows] int32 */              \
  TENSOR(row_key_end, IN)   /* [rows] int32 */              \
  TENSOR(topk_indices, OUT) /* [rows, topk] int32 */

#define DSA_OP_MLA_CACHE_WRITE_NAME "mla_cache_write"
#define DSA_OP_MLA_CACHE_WRITE_ABI_VERSION 2
#define DSA_MLA_CACHE_WRITE_ARGS(TENSOR, SCALAR, ENUM, FORMAT)   \
  TENSOR(kv_c, IN)         /* [tokens, kv_lora_rank] f32|bf16 */ \
  TENSOR(k_pe, IN)         /* [tokens, rope_dim] f32|bf16 */     \
  TENSOR(slot_mapping, IN) /* [tokens] int64, -1 = skip */       \
  TENSOR(kv_cache, INOUT)  /* latent cache */                    \
  FORMAT(cache_format)

#define DSA_OP_SPARSE_MLA_NAME "sparse_mla"
#define DSA_OP_SPARSE_MLA_ABI_VERSION 2
#define DSA_SPARSE_MLA_ARGS(TENSOR, SCALAR, ENUM, FORMAT)               \
  TENSOR(q, IN)        /* [tokens, heads, kv_lora + rope] f32|bf16 */   \
  TENSOR(kv_cache, IN) /* latent cache */                               \
  FORMAT(cache_format)                                                  \
  TENSOR(block_table, IN)   /* [num_requests, max_blocks] int32 */      \
  TENSOR(seq_lens, IN)      /* [num_requests] int32 */                  \
  TENSOR(token_request, IN) /* [tokens] int32 */                        \
  TENSOR(topk_indices, IN)  /* [tokens, topk] int32, positions or -1 */ \
  TENSOR(kv_b_proj, IN)     /* [heads * (qk_nope + v), kv_lora] */      \
  SCALAR(int32_t, qk_nope_head_dim, 128)                                \
  SCALAR(float, softmax_scale, 0.0f)                                    \
  TENSOR(output, OUT) /* [tokens, heads, v_head_dim] f32|bf16 */

#define DSA_OP_DENSE_MHA_PREFILL_NAME "dense_mha_prefill"
#define DSA_OP_DENSE_MHA_PREFILL_ABI_VERSION 2
#define DSA_DENSE_MHA_PREFILL_ARGS(TENSOR, SCALAR, ENUM, FORMAT)      \
  TENSOR(q, IN)        /* [tokens, heads, qk_nope + rope] f32|bf16 */ \
  TENSOR(kv_cache, IN) /* latent cache */                             \
  FORMAT(cache_format)                                                \
  TENSOR(block_table, IN)     /* [num_requests, max_blocks] int32 */  \
  TENSOR(seq_lens, IN)        /* [num_requests] int32 */              \
  TENSOR(query_start_loc, IN) /* [num_requests + 1] int32 */          \
  TENSOR(kv_b_proj, IN)       /* [heads * (qk_nope + v), kv_lora] */  \
  SCALAR(float, softmax_scale, 0.0f)                                  \
  TENSOR(output, OUT) /* [tokens, heads, v_head_dim] f32|bf16 */      \
  /* Appended: optional host-memory copies of seq_lens and            \
   * query_start_loc (ops.h). */                                      \
  TENSOR(seq_lens_host, IN)        /* [num_requests] int32 */         \
  TENSOR(query_start_loc_host, IN) /* [num_requests + 1] int32 */     \
  /* Appended: optional W_UK and W_UV, kv_b_proj's row blocks split   \
   * out once by the caller (ops.h). */                               \
  TENSOR(w_uk, IN) /* [heads, qk_nope, kv_lora] as kv_b_proj */       \
  TENSOR(w_uv, IN) /* [heads, v, kv_lora] as kv_b_proj */             \
  /* Appended: 1 to check the arguments and make ready what a call of \
   * these shapes needs, computing nothing (ops.h). */                \
  SCALAR(int32_t, reserve_only, 0)

/* Every op: X(CxxName, ARGS_LIST_MACRO, NAME_MACRO_PREFIX). */
#define DSA_ATTENTION_OPS(X)                                         \
  X(IndexerKWrite, DSA_INDEXER_K_WRITE_ARGS, DSA_OP_INDEXER_K_WRITE) \
  X(IndexerQ, DSA_INDEXER_Q_ARGS, DSA_OP_INDEXER_Q)                  \
  X(IndexerLogits, DSA_INDEXER_LOGITS_ARGS, DSA_OP_INDEXER_LOGITS)   \
  X(IndexerTopK, DSA_INDEXER_TOPK_ARGS, DSA_OP_INDEXER_TOPK)         \
  X(MlaCacheWrite, DSA_MLA_CACHE_WRITE_ARGS, DSA_OP_MLA_CACHE_WRITE) \
  X(SparseMla, DSA_SPARSE_MLA_ARGS, DSA_OP_SPARSE_MLA)               \
  X(DenseMhaPrefill, DSA_DENSE_MHA_PREFILL_ARGS, DSA_OP_DENSE_MHA_PREFILL)

/* The C structs, from the lists. */
#define DSA_C_TENSOR_FIELD(name, direction) DsaTensorView name;
#define DSA_C_SCALAR_FIELD(c_type, name, default_value) c_type name;
#define DSA_C_ENUM_FIELD(cxx_enum, name, default_value) int32_t name;
#define DSA_C_FORMAT_FIELD(name) DsaLatentCacheFormat name;
#define DSA_C_ARGS_FIELDS(LIST)                                  \
  size_t struct_size;                                            \
  LIST(DSA_C_TENSOR_FIELD, DSA_C_SCALAR_FIELD, DSA_C_ENUM_FIELD, \
       DSA_C_FORMAT_FIELD)

typedef struct DsaIndexerKWriteArgs {
  DSA_C_ARGS_FIELDS(DSA_INDEXER_K_WRITE_ARGS)
} DsaIndexerKWriteArgs;
typedef struct DsaIndexerQArgs {
  DSA_C_ARGS_FIELDS(DSA_INDEXER_Q_ARGS)
} DsaIndexerQArgs;
typedef struct DsaIndexerLogitsArgs {
  DSA_C_ARGS_FIELDS(DSA_INDEXER_LOGITS_ARGS)
} DsaIndexerLogitsArgs;
typedef struct DsaIndexerTopKArgs {
  DSA_C_ARGS_FIELDS(DSA_INDEXER_TOPK_ARGS)
} DsaIndexerTopKArgs;
typedef struct DsaMlaCacheWriteArgs {
  DSA_C_ARGS_FIELDS(DSA_MLA_CACHE_WRITE_ARGS)
} DsaMlaCacheWriteArgs;
typedef struct DsaSparseMlaArgs {
  DSA_C_ARGS_FIELDS(DSA_SPARSE_MLA_ARGS)
} DsaSparseMlaArgs;
typedef struct DsaDenseMhaPrefillArgs {
  DSA_C_ARGS_FIELDS(DSA_DENSE_MHA_PREFILL_ARGS)
} DsaDenseMhaPrefillArgs;

/* The kernels' entry points. */
typedef DsaStatusCode (*DsaIndexerKWriteFn)(const DsaExecutionContext*,
                                            const DsaIndexerKWriteArgs*, char*,
                                            size_t);
typedef DsaStatusCode (*DsaIndexerQFn)(const DsaExecutionContext*,
                                       const DsaIndexerQArgs*, char*, size_t);
typedef DsaStatusCode (*DsaIndexerLogitsFn)(const DsaExecutionContext*,
                                            const DsaIndexerLogitsArgs*, char*,
                                            size_t);
typedef DsaStatusCode (*DsaIndexerTopKFn)(const DsaExecutionContext*,
                                          const DsaIndexerTopKArgs*, char*,
                                          size_t);
typedef DsaStatusCode (*DsaMlaCacheWriteFn)(const DsaExecutionContext*,
                                            const DsaMlaCacheWriteArgs*, char*,
                                            size_t);
typedef DsaStatusCode (*DsaSparseMlaFn)(const DsaExecutionContext*,
                                        const DsaSparseMlaArgs*, char*, size_t);
typedef DsaStatusCode (*DsaDenseMhaPrefillFn)(const DsaExecutionContext*,
                                              const DsaDenseMhaPrefillArgs*,
                                              char*, size_t);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DSA_ATTENTION_KERNEL_API_H_ */
