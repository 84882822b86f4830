// GPU kernels of the dense causal MHA prefill over the latent cache
// (DenseMhaPrefill in attention/ops.h; the CPU kernel in
// attention/cpu/mla_kernels.cc has the same semantics).
//
// A call runs four or five kernels on `stream`:
//   1. gather: each request's latent entries [0, seq_len) (bf16, or fp8
//      "fp8_ds_mla" dequantised, exactly) into contiguous bf16 rows
//      kv_c | k_pe of a scratch buffer (device/stream_scratch.h: the
//      stream's scratch arena, held across calls),
//      each request's rows starting at and padded to a multiple of 128;
//   2-3. decompression, two bf16 GEMMs: K_nope = kv_c W_UK^T as
//      [S, heads * nope] and V^T = W_UV kv_c^T as [heads * v, S], so that
//      both attention products read K-major operands. They run on the
//      platform's vendor GEMM (the gemm dense op, GemmGpu in
//      dense_ops/op_kernels.h: cuBLASLt on CUDA, rocBLAS on ROCm, loaded at run
//      time) over kv_b_proj's W_UK and W_UV row groups in place (a strided
//      batch of one product per head), or over the caller's split of them,
//      a small kernel splitting them into bf16 scratch first only where
//      kv_b_proj is fp32 or unaligned; and on the project's own GEMM
//      (gemm_bf16.h, reading the row groups in place too) when no vendor
//      library loads or when the params ask (own_decompression_gemm);
//   4. attention: FlashAttention-style causal attention over tiles of (128
//      query rows, head), the longest first; online softmax in fp32;
//      K = K_nope | k_pe. The body (dense_mha/heuristics.h): on sm_90a,
//      where nope, rope and v are multiples of 64 (GLM-5.x, DeepSeek-V3.2),
//      the warp-specialised body of FlashAttention-3 (sm90_tma_body.h: TMA
//      copies into mbarrier rings, two consumer warpgroups on wgmma taking
//      turns to issue), persistent: a CTA per multiprocessor takes the tiles
//      in turn from a counter, heads in sections that share their K/V in
//      L2; otherwise a block per tile, query tiles of one head in
//      consecutive blocks; other head dims on sm_90a, a cp.async body on wgmma
//      (sm90_pipelined_body.h); elsewhere Bf16WarpMma: mma.sync on NVIDIA
//      (warp_body.h, key tiles of 64), MFMA on AMD with both products
//      transposed so that Q and P stay in registers (mfma_body.h, key tiles
//      of 32 within AMD's 64 KiB of LDS at every width). The params may ask
//      for one body (attention_body), for tests.
// Queries, keys, values and softmax probabilities enter the matrix products
// as bf16 (fp32 inputs are rounded once), products accumulate in fp32: the
// output is within 2^-8 of the largest |value| a row attends to of the exact
// result (kernels_test.cc says why; measured worst 2.8e-3 with a
// bf16 output, 1.3e-3 otherwise).
//
// The scratch size and the launch grid depend on the requests' lengths, so
// the launcher takes host copies of seq_lens and query_start_loc (the op
// kernel reads them with one small copy on the stream). The block table is
// read on the device only, and every block id is clamped into the cache.
// Plain C++ header (no HIP or CUDA types).
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_LAUNCH_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_LAUNCH_H_

#include <cstdint>

#include "attention/gpu/dense_mha/params.h"
#include "attention/gpu/device/launch_result.h"
#include "attention/gpu/device/small_cache.h"

namespace dsa::attention::gpu {

// Enqueues the kernels. Supported: nope, rope, v multiples of 8;
// nope + rope <= 256 and v <= 256; kv_lora a multiple of 8; the
// lengths in the host arrays consistent (checked: kInvalidArgument names
// what is wrong). Returns after enqueueing; the scratch is the stream's
// arena (device/scratch_arena.h), which grows only when a call needs more
// than any before on that stream.
LaunchResult DenseMhaPrefillLaunch(const DenseMhaPrefillParams& params,
                                   void* stream);

// FLOPs of a call: causal attention 2 * heads * (sum over query rows of the
// keys they see) * (qk + v), plus the decompression 2 * S * kv_lora * heads
// * (nope + v) over the S latent rows of the requests with queries.
struct DenseMhaFlops {
  double attention = 0;
  double decompression = 0;
};
inline DenseMhaFlops DenseMhaPrefillFlops(const DenseMhaPrefillParams& p) {
  DenseMhaFlops f;
  const double qk = static_cast<double>(p.qk_nope_head_dim) + p.rope_dim;
  for (int32_t r = 0; r < p.num_requests; ++r) {
    const double n = static_cast<double>(p.host_query_start_loc[r + 1]) -
                     p.host_query_start_loc[r];
    if (n <= 0) continue;
    const double len = p.host_seq_lens[r];
    const double context = len - n;
    // Row i sees context + i + 1 keys.
    const double keys = n * context + n * (n + 1) / 2;
    f.attention += 2.0 * p.heads * keys * (qk + p.v_head_dim);
    f.decompression += 2.0 * len * p.kv_lora_rank * p.heads *
                       (static_cast<double>(p.qk_nope_head_dim) + p.v_head_dim);
  }
  return f;
}

// Which attention body a call with `params` runs on the current device:
// "sm90-tma-64" / "sm90-tma-80" / "sm90-tma-128" (keys per tile),
// "sm90-pipelined" or "warp"; "none" when not built, on error, or where the
// body the params ask for cannot run. For tests and reports.
const char* DenseMhaAttentionPath(const DenseMhaPrefillParams& params);

// Which GEMM the decompression takes in this process unless the params ask
// for the own one: "cublaslt", "rocblas" (the platform's vendor GEMM) or
// "gemm_bf16". For reports.
const char* DenseMhaDecompressionPath();

// Hits and misses of the calling thread's table of the TMA body's tensor
// maps (dense_mha/tma_maps.h; zeros where that body is not built). For
// tests.
SmallCacheStats DenseMhaTensorMapStats();

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_LAUNCH_H_
