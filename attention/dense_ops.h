// The dense ops of a layer step: the work around the attention ops that
// keeps a step's activations on the device (docs: DESIGN.md section 8).
// Every platform registers them next to its attention kernels, and they are
// defined exactly as the seven ops of ops.h are (name, ABI version, Args from
// the argument lists of dense_api.h, Validate), so hosts call them through
// Kernel<Op> and plugins expose them through CKernel.
//
// Numerics shared by every platform:
//  - fp32 accumulation and fp32 intermediates; a bf16 output is the fp32
//    result rounded to nearest even.
//  - Gemm: y[b, r, o] = sum_i x[b, r, i] * w[b, o, i] (PyTorch's Linear
//    layout, y = x W^T, per batch entry). The order of the fp32 sum is the
//    platform's (a cuBLASLt kernel splits it differently from the CPU's), so
//    results agree within fp32 rounding of sum |x w|, not bit for bit across
//    platforms; on one platform a call is deterministic.
//  - RmsNorm: y = x / sqrt(mean(x^2) + eps) * weight, per row. With y_q and
//    y_scale_inv given, y (its values as stored, after a bf16 y's rounding)
//    is also quantised as Fp8BlockQuant with block_rows 1 quantises it: the
//    same codes and scales as that op on y, bit for bit, without a second
//    pass over the activations. With residual given, x is first added into
//    it (residual += x, as ResidualAdd) and the norm reads the sum as
//    stored: residual_add then rms_norm of the residual, bit for bit, in one
//    pass (vLLM's fused_add_rms_norm).
//  - Rope: the rotation of ops.h on each [tokens, heads, rope_dim] vector
//    (the whole last dim of the view; pass a view of the rope slice), at
//    positions[t]; in place.
//  - ResidualAdd: residual += x.
//  - Cast: y = x, converted (f32 <-> bf16, or a strided copy of one type).
//  - RandomFill: y[i] = offset + scale * u(seed, stream, i) with u uniform in
//    [-1, 1) from a counter-based hash (RandomFillValue below), the product
//    and sum each rounded to fp32 (no fused multiply-add) and a bf16 output
//    then rounded to nearest even: the same bits on every platform, so
//    weights generated on a device equal the host's LayerWeights.
//  - Fp8BlockQuant: fp8 block quantisation as DeepSeek's reference
//    (inference/kernel.py act_quant) and vLLM (per_token_group_quant_fp8,
//    w8a8 block fp8) compute it. Per block of block_rows x 128 elements of x
//    (the last row and column blocks may be shorter):
//      amax = max |x| over the block, s = max(amax, 1e-10) / D,
//      q = fp8(x / s) rounded to nearest even (the division in fp32),
//      scale_inv[block] = s,
//    D = 448 for e4m3fn and vLLM's 224 for e4m3fnuz (attention/dtypes/fp8.h,
//    Fp8BlockScale), so |x / s| <= D never saturates. Dequantised,
//    x~ = q * s. An all-zero block gets s = 1e-10 / D and zero codes.
//    block_rows 128 quantises a weight as a checkpoint stores it
//    (weight_scale_inv), block_rows 1 an activation per token. The same bits
//    on every platform.
//  - Fp8BlockGemm: y[t, o] = sum_g sx[t, g] sw[o / 128, g]
//                            sum_{k in group g} qx[t, k] qw[o, k],
//    where (qx, sx) is x quantised as Fp8BlockQuant with block_rows 1 and
//    w = qw * sw (the checkpoint's F8_E4M3 weight and weight_scale_inv), in
//    w's fp8 encoding; fp32 accumulation (a platform may scale each group's
//    partial sum or the dequantised operands: the same in exact arithmetic).
//    Against the bf16-style product of the dequantised weight,
//    sum_k x[t, k] w~[o, k], the difference is the activation's fp8 rounding:
//    per element |x~ - x| <= 2^-4 |x| + 2^-10 s (e4m3fn; 2^-11 s for
//    e4m3fnuz, whose subnormal step is half as large), so
//      |y - sum_k x w~| <= sum_k |w~[o, k]| (2^-4 |x[t, k]| + 2^-10 s(t, k))
//    plus the fp32 accumulation's rounding; the conformance tests check both
//    that bound and the much tighter one against the quantised activations.
//    Given x_q and x_scale_inv (x absent), (qx, sx) are those: a product of
//    x's quantisation (Fp8BlockQuant with block_rows 1, or RmsNorm's y_q)
//    equals the product of x to the bit. x_q is in w's encoding.
// Free of Abseil, like ops.h: this runs inside plugin shared objects.
#ifndef DSA_ATTENTION_DENSE_OPS_H_
#define DSA_ATTENTION_DENSE_OPS_H_

#include <cstdint>

#include "attention/dense_api.h"
#include "attention/dtypes/random_fill.h"
#include "attention/ops.h"
#include "attention/tensor.h"
#include "platform/core_status.h"

namespace dsa::attention {

struct Gemm {
  DSA_OP_MEMBERS(Gemm, DSA_GEMM_ARGS, DSA_OP_GEMM);
  // Whether w's `in` dim is the contiguous one (w[b] row-major [out, in]);
  // otherwise its `out` dim is (a transposed view, such as W_UK^T).
  static bool WeightRowMajor(const Args& args) {
    return args.w.dim(2) <= 1 || args.w.stride(2) == 1;
  }
};

struct RmsNorm {
  DSA_OP_MEMBERS(RmsNorm, DSA_RMS_NORM_ARGS, DSA_OP_RMS_NORM);
};

struct Rope {
  DSA_OP_MEMBERS(Rope, DSA_ROPE_ARGS, DSA_OP_ROPE);
};

struct ResidualAdd {
  DSA_OP_MEMBERS(ResidualAdd, DSA_RESIDUAL_ADD_ARGS, DSA_OP_RESIDUAL_ADD);
};

struct Cast {
  DSA_OP_MEMBERS(Cast, DSA_CAST_ARGS, DSA_OP_CAST);
};

struct RandomFill {
  DSA_OP_MEMBERS(RandomFill, DSA_RANDOM_FILL_ARGS, DSA_OP_RANDOM_FILL);
};

struct Fp8BlockQuant {
  DSA_OP_MEMBERS(Fp8BlockQuant, DSA_FP8_BLOCK_QUANT_ARGS,
                 DSA_OP_FP8_BLOCK_QUANT);
};

struct Fp8BlockGemm {
  DSA_OP_MEMBERS(Fp8BlockGemm, DSA_FP8_BLOCK_GEMM_ARGS, DSA_OP_FP8_BLOCK_GEMM);
};

// Per op: the C <-> C++ argument conversions (as kernel_abi.h declares them
// for the attention ops; CKernel and Kernel<Op> find them by overload).
#define DSA_DECLARE_DENSE_ARGS_CONVERSIONS(CxxName, LIST, PREFIX) \
  CxxName::CArgs ToCArgs(const CxxName::Args& args);              \
  Status FromCArgs(const CxxName::CArgs* raw, CxxName::Args* out);
DSA_DENSE_OPS(DSA_DECLARE_DENSE_ARGS_CONVERSIONS)
#undef DSA_DECLARE_DENSE_ARGS_CONVERSIONS

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_DENSE_OPS_H_
