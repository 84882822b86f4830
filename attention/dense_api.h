/*
 * The C ABI of the dense ops: the layer work around the attention ops (the
 * projections as bf16 matrix products with fp32 accumulation, or as W8A8
 * fp8 products with block scales, RMSNorm, the MLA's rope, the residual add,
 * casts, the generation of random weights on the device and their fp8 block
 * quantisation). They cross a plugin boundary exactly as the attention ops
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
#define DSA_RMS_NORM_ARGS(TENSOR, SCALAR, ENUM, FORMAT)                     \
  TENSOR(x, IN)      /* [rows, dim] f32|bf16 */                             \
  TENSOR(weight, IN) /* [dim] f32|bf16 */                                   \
  SCALAR(float, eps, 1e-6f)                                                 \
  TENSOR(y, OUT) /* [rows, dim] f32|bf16 */                                 \
  /* Appended: optional, y also quantised per token and 128 columns for the \
   * W8A8 products that read it (dense_ops.h). */                           \
  TENSOR(y_q, OUT) /* [rows, dim] e4m3fn|e4m3fnuz, last dim contiguous */   \
  TENSOR(y_scale_inv, OUT) /* [rows, ceil(dim / 128)] f32, any strides */   \
  /* Appended: optional, the residual stream x is first added into          \
   * (residual += x), the norm then reading the sum (dense_ops.h). */       \
  TENSOR(residual, INOUT) /* [rows, dim] f32|bf16 */

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

/* FP8 block quantisation (dense_ops.h, Fp8BlockQuant): per block of
 * block_rows x 128 elements one float32 multiplier, q = fp8(x / scale). A
 * weight's blocks are 128 x 128 (block_rows 128, the checkpoints'
 * weight_scale_inv), an activation's 1 x 128 (block_rows 1, per token). */
#define DSA_OP_FP8_BLOCK_QUANT_NAME "fp8_block_quant"
#define DSA_OP_FP8_BLOCK_QUANT_ABI_VERSION 1
#define DSA_FP8_BLOCK_QUANT_ARGS(TENSOR, SCALAR, ENUM, FORMAT)           \
  TENSOR(x, IN) /* [rows, cols] f32|bf16, last dim contiguous */         \
  SCALAR(int32_t, block_rows, 1) /* 1 or 128 */                          \
  TENSOR(q, OUT) /* [rows, cols] e4m3fn|e4m3fnuz, last dim contiguous */ \
  TENSOR(                                                                \
      scale_inv,                                                         \
      OUT) /* [ceil(rows / block_rows), ceil(cols / 128)] f32, any strides */

/* The W8A8 product of an fp8 weight with 128 x 128 block scales
 * (dense_ops.h, Fp8BlockGemm): x quantised per token and 128 columns, then
 * y = x~ w~^T with fp32 accumulation. The activations come either as x, which
 * the op quantises, or (appended) already quantised as x_q and x_scale_inv
 * (by rms_norm's y_q or fp8_block_quant with block_rows 1), x then absent:
 * one quantisation for every product that reads them. */
#define DSA_OP_FP8_BLOCK_GEMM_NAME "fp8_block_gemm"
#define DSA_OP_FP8_BLOCK_GEMM_ABI_VERSION 1
#define DSA_FP8_BLOCK_GEMM_ARGS(TENSOR, SCALAR, ENUM, FORMAT)                  \
  TENSOR(x, IN)           /* [rows, in] f32|bf16, last dim contiguous */       \
  TENSOR(w, IN)           /* [out, in] e4m3fn|e4m3fnuz, last dim contiguous */ \
  TENSOR(w_scale_inv, IN) /* [ceil(out / 128), ceil(in / 128)] f32 */          \
  TENSOR(y, OUT)          /* [rows, out] f32|bf16, last dim contiguous */      \
  /* Appended: optional, the quantised activations in place of x. */           \
  TENSOR(x_q, IN)         /* [rows, in] w's fp8 type, last dim contiguous */   \
  TENSOR(x_scale_inv, IN) /* [rows, ceil(in / 128)] f32, any strides */

/* Every dense op: X(CxxName, ARGS_LIST_MACRO, NAME_MACRO_PREFIX), as
 * DSA_ATTENTION_OPS. */
#define DSA_DENSE_OPS(X)                                             \
  X(Gemm, DSA_GEMM_ARGS, DSA_OP_GEMM)                                \
  X(RmsNorm, DSA_RMS_NORM_ARGS, DSA_OP_RMS_NORM)                     \
  X(Rope, DSA_ROPE_ARGS, DSA_OP_ROPE)                                \
  X(ResidualAdd, DSA_RESIDUAL_ADD_ARGS, DSA_OP_RESIDUAL_ADD)         \
  X(Cast, DSA_CAST_ARGS, DSA_OP_CAST)                                \
  X(RandomFill, DSA_RANDOM_FILL_ARGS, DSA_OP_RANDOM_FILL)            \
  X(Fp8BlockQuant, DSA_FP8_BLOCK_QUANT_ARGS, DSA_OP_FP8_BLOCK_QUANT) \
  X(Fp8BlockGemm, DSA_FP8_BLOCK_GEMM_ARGS, DSA_OP_FP8_BLOCK_GEMM)

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

typedef struct DsaFp8BlockQuantArgs {
  DSA_C_ARGS_FIELDS(DSA_FP8_BLOCK_QUANT_ARGS)
} DsaFp8BlockQuantArgs;
typedef struct DsaFp8BlockGemmArgs {
  DSA_C_ARGS_FIELDS(DSA_FP8_BLOCK_GEMM_ARGS)
} DsaFp8BlockGemmArgs;

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
typedef DsaStatusCode (*DsaFp8BlockQuantFn)(const DsaExecutionContext*,
                                            const DsaFp8BlockQuantArgs*, char*,
                                            size_t);
typedef DsaStatusCode (*DsaFp8BlockGemmFn)(const DsaExecutionContext*,
                                           const DsaFp8BlockGemmArgs*, char*,
                                           size_t);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DSA_ATTENTION_DENSE_API_H_ */
