// Fp8 matrix products on the matrix cores, one interface for NVIDIA and AMD,
// with a plain-FMA fallback where the target has no suitable instruction.
//
// Warp level (Fp8WarpMma<format>): a kernel stages fp8 operands in shared
// memory through Convert16() (the element type there is the policy's Elem),
// loads warp fragments with LoadA()/LoadB(), and accumulates
// C[kM x kN] += A[kM x kK] * B[kN x kK]^T in fp32 with Run(). Which lane
// holds which element of C is the policy's business: the kernel reads it
// through CRow()/CCol() and sums a row's values across the lanes that share
// it with ReduceRowLanes(). That is all the layout a kernel needs, so no
// #ifdef of an architecture appears outside this file.
//
//   NVIDIA, sm_80 and later: fp8 is widened to fp16 once, when it is staged
//     (exact for both E4M3 encodings), and multiplied by mma.sync m16n8k16
//     (HMMA). Hopper runs fp8 mma.sync only by converting every operand to
//     fp16 on the fly, so converting once per staged tile is cheaper.
//   NVIDIA before sm_80: the same fragments multiplied with FMAs.
//   AMD gfx940/941/942 with e4m3fnuz data: v_mfma_f32_32x32x16_fp8_fp8 on the
//     raw fp8 bytes (those chips' fp8 is the fnuz encoding).
//   AMD gfx90a, and OCP e4m3fn data on gfx94x: the same 32x32 fragments,
//     widened to bf16 in registers (exact) and multiplied by two
//     v_mfma_f32_32x32x8bf16_1k per product.
//   Other AMD targets: the same fragments multiplied with FMAs after a
//     software decode.
//
// Warpgroup level (WarpgroupFp8Mma, kHasWarpgroupFp8Mma): Hopper's own fp8
// path, wgmma (QGMMA in SASS), for kernels built for sm_90a; four warps
// multiply operands that stay in shared memory. Kernels branch on
// kHasWarpgroupFp8Mma with `if constexpr` and keep a warp-level body for
// every other target. WarpgroupBf16Mma / kHasWarpgroupBf16Mma are the same
// for bf16 operands (HGMMA), with B K-major (Issue) or MN-major (IssueMnB,
// the transposed operand a P V product reads straight from a key tile).
//
// Bf16 (Bf16WarpMma): bf16 operands staged in shared memory as raw bits,
// C[kM x kN] += A[kM x kK] * B[kN x kK]^T in fp32, for the attention kernels
// (Q K^T, P V) and the latent-decompression GEMM.
//
//   NVIDIA, sm_80 and later: mma.sync m16n8k16 bf16 (HMMA), fragments loaded
//     with ldmatrix (x4 for A, x2 / x2.trans for B).
//   NVIDIA before sm_80: the same m16n8k16 fragments multiplied with FMAs.
//   AMD gfx90a/gfx940/941/942: v_mfma_f32_32x32x8bf16_1k.
//   Other AMD targets: the same 32x32x8 fragments multiplied with FMAs.
// Every path multiplies bf16 values exactly in fp32 and accumulates in fp32,
// so they agree up to the order of the fp32 summation.
//
//
// Parts: mma/conversions.h (fp8 decode, bf16 rounding), mma/warp_nvidia.h,
// mma/warpgroup_fp8.h and mma/warpgroup_bf16.h (sm_90a), mma/warp_amd.h.
// Include only from sources built by gpu_kernel_library().
#ifndef DSA_ATTENTION_GPU_DEVICE_MMA_H_
#define DSA_ATTENTION_GPU_DEVICE_MMA_H_

// The parts, one per vendor and level; each is empty on the other vendor.
#include "attention/gpu/device/mma/conversions.h"
#include "attention/gpu/device/mma/warp_amd.h"
#include "attention/gpu/device/mma/warp_nvidia.h"
#include "attention/gpu/device/mma/warpgroup_bf16.h"
#include "attention/gpu/device/mma/warpgroup_fp8.h"

#endif  // DSA_ATTENTION_GPU_DEVICE_MMA_H_
