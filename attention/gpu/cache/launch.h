// GPU kernels of the three memory-bound attention ops: the indexer K write
// (LayerNorm + rope + ue8m0 fp8 quantisation + paged indexer K cache write +
// top-k buffer clear), the indexer Q preparation (rope + per-(token, head)
// fp8 quantisation + head weights) and the MLA latent cache write (bf16 and
// the fp8 "fp8_ds_mla" layout). Same semantics as IndexerKWrite, IndexerQ
// and MlaCacheWrite in attention/ops.h.
//
// Their outputs are EQUAL TO THE BIT to the CPU kernels'
// (attention/cpu/indexer_kernels.cc, mla_kernels.cc): the skip on/off
// equality on a GPU compares caches, and the CPU kernels are the baseline.
// Every step is elementwise float32 arithmetic with the _rn intrinsics (no
// FMA contraction; nvcc builds with --fmad=false and the AMD build with
// -ffp-contract=off), the fp8 and bf16 conversions and the ue8m0 scale are
// the shared host/device functions of attention/dtypes, and the amax is a
// max (order-free). The one reduction whose order matters, the LayerNorm
// mean and variance (float64 sums), runs in the canonical order of
// attention/dtypes/layer_norm.h on both sides.
//
// The launchers take raw device pointers, element strides and sizes (plain
// C++, no HIP types) and enqueue on `stream` without synchronising. They
// check what they can see on the host (pointers, sizes); the index values
// live on the device and are checked there: a token whose slot is -1 or
// outside the cache, or whose position is outside cos_sin_cache, is skipped
// (its top-k row is still cleared), so a bad index never reads or writes
// outside the buffers described here.
#ifndef DSA_ATTENTION_GPU_CACHE_LAUNCH_H_
#define DSA_ATTENTION_GPU_CACHE_LAUNCH_H_

#include <cstdint>

#include "attention/gpu/cache/params.h"
#include "attention/gpu/device/formats.h"
#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu {

LaunchResult IndexerKWriteLaunch(const IndexerKWriteParams& params,
                                 void* stream);

// head_weights[t,h] = weights[t,h] * q_scale[t,h] * weight_scale, with
// weight_scale = (float)(1 / sqrt((double)head_dim * heads)) as the CPU
// kernel rounds it.
LaunchResult IndexerQLaunch(const IndexerQParams& params, void* stream);

LaunchResult MlaCacheWriteLaunch(const MlaCacheWriteParams& params,
                                 void* stream);

// Which kernel body the K write and Q launchers run for these parameters
// (cache/heuristics.h, the one place that decides): "register" (a row in
// registers: head_dim 128 at the presets' rope dims) or "staged" (rows
// staged in shared memory: any shape); "none" in a build without a GPU
// backend. The MLA cache write has the staged body only.
const char* IndexerKWritePath(const IndexerKWriteParams& params);
const char* IndexerQPath(const IndexerQParams& params);

// For tests: out[i] = the kernels' float -> fp8 conversion of in[i] (device
// pointers), which must equal FloatToFp8 (attention/dtypes/fp8.h).
LaunchResult Fp8EncodeForTesting(const float* in, uint8_t* out, int64_t n,
                                 Fp8Encoding encoding, void* stream);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_CACHE_LAUNCH_H_
