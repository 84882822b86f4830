// GPU kernels of the lightning indexer's scoring: logits over the paged fp8
// indexer K cache, and the per-row top-k. Same semantics as IndexerLogits and
// IndexerTopK in attention/ops.h (and the CPU kernels in
// attention/cpu/indexer_kernels.cc); see there.
//
// The launchers take raw device pointers and sizes, so this header is plain
// C++ (no HIP or CUDA types) and the op layer can call it from code built by
// the host compiler. They enqueue work on `stream` (a hipStream_t /
// cudaStream_t, nullptr for the default stream) and do not synchronise.
//
// The launchers check what they can see without reading device memory
// (pointers, sizes, alignment). The index tensors (requests, windows, block
// table) live on the device; the op layer validates them. The kernels clamp
// every index they read, so an invalid one can give wrong values but never
// reads or writes outside the buffers described here.
#ifndef DSA_ATTENTION_GPU_INDEXER_LAUNCH_H_
#define DSA_ATTENTION_GPU_INDEXER_LAUNCH_H_

#include "attention/gpu/device/launch_result.h"
#include "attention/gpu/device/small_cache.h"
#include "attention/gpu/indexer/params.h"

namespace dsa::attention::gpu {

// logits[i, j] = sum_h relu(q[i,h] . k[j] * k_scale[j]) * head_weights[i,h]
// for j in [row_key_start[i], row_key_end[i]) of request row_request[i]
// (column j is the request's token j), -inf for every other j < width.
// Heads in {32, 64, 128, 256} with head_dim 128 and block_size a multiple of
// 4 run on the matrix cores; any other shape on a plain-FMA kernel. Built for
// sm_90a (the default CUDA target), e4m3fn data multiplies on wgmma, whose
// fp8 accumulation keeps about 14 bits of each partial sum: a logit is within
// 2^-12 of the sum over heads of |q[h] . k| (abs of each product) * k_scale *
// |head_weight|; every other path is within float32 rounding of it.
// `options` (tests and benchmarks; see params.h) may force a kernel body;
// one that cannot run for these parameters on this device gives
// kInvalidArgument.
LaunchResult IndexerLogitsLaunch(const IndexerLogitsParams& params,
                                 void* stream,
                                 const IndexerLogitsOptions& options = {});

// Which kernel body IndexerLogitsLaunch runs for these parameters and
// options on the current device (indexer/heuristics.h): "fma", "warp_mma",
// "warpgroup_mma" or "persistent_{narrow,wide}_{tma,cp_async}"; "none"
// without a device or a GPU build, or when the options cannot run (for
// tests and reports).
const char* IndexerLogitsPath(const IndexerLogitsParams& params,
                              const IndexerLogitsOptions& options = {});

// Hits and misses of the calling thread's table of the persistent body's
// tensor maps over the K caches (one entry per K cache it read; zeros
// where that body is not built). For tests.
SmallCacheStats IndexerLogitsKeyMapStats();

// The topk largest logits of each row's window [row_key_start, row_key_end)
// (ties to the lower index, NaN below -inf, -0 equal to +0), written as
// ascending column positions, then -1 padding when the window holds fewer
// than topk keys. Rows of up to 2^30 keys. `options` (tests and benchmarks;
// see params.h) may force a path; every path gives the same result.
LaunchResult IndexerTopKLaunch(const IndexerTopKParams& params, void* stream,
                               const IndexerTopKOptions& options = {});

// Which path IndexerTopKLaunch runs for these parameters and options on the
// current device: one of DSA_INDEXER_TOPK_PATHS' names, or "none" without a
// device or a GPU build (for tests and reports).
const char* IndexerTopKPathName(const IndexerTopKParams& params,
                                const IndexerTopKOptions& options = {});

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_INDEXER_LAUNCH_H_
