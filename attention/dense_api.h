/*
 * The C ABI of the dense ops: the layer work around the attention ops (the
 * projections as bf16 matrix products with fp32 accumulation, RMSNorm, the
 * MLA's rope, the residual add, casts, and the generation of random weights
 * on the device). They cross a plugin boundary exactly as the attention ops
 * of kernel_api.h do: the same tensor views, execution context, status codes
 * and versioning rules (read kernel_api.h first), each op an X-macro argument
 * list, a name and an ABI version, so CKernel, Kernel<Op>, GetKernel<Op> and
 * KernelDescriptorFor work for them unchanged. The semantics are in
 * attention/dense_ops.h.
 */
#ifndef DSA_ATTENTION_DENSE_API_H_
#define DSA_ATTENTION_DENSE_API_H_

#include <stddef.h>
#include <stdint.h>

#include "attention/kernel_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSA_OP_GEMM_NAME "gemm"
#define DSA_OP_GEMM_ABI_VERSION 1
#define DSA_GEMM_ARGS(TENSOR, SCALAR, ENUM, FORMAT)                     \
  TENSOR(x, IN)  /* [batch, rows, in] f32|bf16, last dim contiguous */  \
  TENSOR(w, IN)  /* [batch, out, in] bf16, dim 1 or dim 2 contiguous */ \
  TENSOR(y, OUT) /* [batch, rows, out] f32|bf16, last dim contiguous */

#define DSA_OP_RMS_NORM_NAME "rms_norm"
#define DSA_OP_RMS_NORM_ABI_VERSION 1
#define DSA_RMS_NORM_ARGS(TENSOR, SCALAR, ENUM, FORMAT) \
  TENSOR(x, IN)      /* [rows, dim] f32|bf16 */         \
  TENSOR(weight, IN) /* [dim] f32|bf16 */               \
  SCALAR(float, eps, 1e-6f)                             \
  TENSOR(y, OUT) /* [rows, dim] f32|bf16 */

#define DSA_OP_ROPE_NAME "rope"
#define DSA_OP_ROPE_ABI_VERSION 1
#define DSA_ROPE_ARGS(TENSOR, SCALAR, ENUM, FORMAT)                  \
  TENSOR(x, INOUT)          /* [tokens, heads, rope_dim] f32|bf16 */ \
  TENSOR(positions, IN)     /* [tokens] int64 */                     \
  TENSOR(cos_sin_cache, IN) /* [max_position, rope_dim] f32 */       \
  ENUM(RopeStyle, rope_style, kInterleaved)

#define DSA_OP_RESIDUAL_ADD_NAME "residual_add"
#define DSA_OP_RESIDUAL_ADD_ABI_VERSION 1
#define DSA_RESIDUAL_ADD_ARGS(TENSOR, SCALAR, ENUM, FORMAT) \
  TENSOR(residual, INOUT) /* [rows, cols] f32|bf16 */       \
  TENSOR(x, IN)           /* [rows, cols] f32|bf16 */

#define DSA_OP_CAST_NAME "cast"
#define DSA_OP_CAST_ABI_VERSION 1
#define DSA_CAST_ARGS(TENSOR, SCALAR, ENUM, FORMAT) \
  TENSOR(x, IN)  /* [rows, cols] f32|bf16 */        \
  TENSOR(y, OUT) /* [rows, cols] f32|bf16 */

#define DSA_OP_RANDOM_FILL_NAME "random_fill"
#define DSA_OP_RANDOM_FILL_ABI_VERSION 1
#define DSA_RANDOM_FILL_ARGS(TENSOR, SCALAR, ENUM, FORMAT) \
  TENSOR(y, OUT) /* contiguous, any rank, f32|bf16 */      \
  SCALAR(uint64_t, seed, 0)                                \
  SCALAR(uint64_t, stream, 0)                              \
  SCALAR(float, scale, 1.0f)                               \
  SCALAR(float, offset, 0.0f)

/* Every dense op: X(CxxName, ARGS_LIST_MACRO, NAME_MACRO_PREFIX), as
 * DSA_ATTENTION_OPS. */
#define DSA_DENSE_OPS(X)                                     \
  X(Gemm, DSA_GEMM_ARGS, DSA_OP_GEMM)                        \
  X(RmsNorm, DSA_RMS_NORM_ARGS, DSA_OP_RMS_NORM)             \
  X(Rope, DSA_ROPE_ARGS, DSA_OP_ROPE)                        \
  X(ResidualAdd, DSA_RESIDUAL_ADD_ARGS, DSA_OP_RESIDUAL_ADD) \
  X(Cast, DSA_CAST_ARGS, DSA_OP_CAST)                        \
  X(RandomFill, DSA_RANDOM_FILL_ARGS, DSA_OP_RANDOM_FILL)

typedef struct DsaGemmArgs {
  DSA_C_ARGS_FIELDS(DSA_GEMM_ARGS)
} DsaGemmArgs;
typedef struct DsaRmsNormArgs {
  DSA_C_ARGS_FIELDS(DSA_RMS_NORM_ARGS)
} DsaRmsNormArgs;
typedef struct DsaRopeArgs {
  DSA_C_ARGS_FIELDS(DSA_ROPE_ARGS)
} DsaRopeArgs;
typedef struct DsaResidualAddArgs {
  DSA_C_ARGS_FIELDS(DSA_RESIDUAL_ADD_ARGS)
} DsaResidualAddArgs;
typedef struct DsaCastArgs {
  DSA_C_ARGS_FIELDS(DSA_CAST_ARGS)
} DsaCastArgs;
typedef struct DsaRandomFillArgs {
  DSA_C_ARGS_FIELDS(DSA_RANDOM_FILL_ARGS)
} DsaRandomFillArgs;

typedef DsaStatusCode (*DsaGemmFn)(const DsaExecutionContext*,
                                   const DsaGemmArgs*, char*, size_t);
typedef DsaStatusCode (*DsaRmsNormFn)(const DsaExecutionContext*,
                                      const DsaRmsNormArgs*, char*, size_t);
typedef DsaStatusCode (*DsaRopeFn)(const DsaExecutionContext*,
                                   const DsaRopeArgs*, char*, size_t);
typedef DsaStatusCode (*DsaResidualAddFn)(const DsaExecutionContext*,
                                          const DsaResidualAddArgs*, char*,
                                          size_t);
typedef DsaStatusCode (*DsaCastFn)(const DsaExecutionContext*,
                                   const DsaCastArgs*, char*, size_t);
typedef DsaStatusCode (*DsaRandomFillFn)(const DsaExecutionContext*,
                                         const DsaRandomFillArgs*, char*,
                                         size_t);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DSA_ATTENTION_DENSE_API_H_ */
