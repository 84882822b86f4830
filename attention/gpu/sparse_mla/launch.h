// GPU kernel of the sparse MLA in its absorbed (MQA) form: every query row
// attends, with all of its heads, to the latent cache entries at its own
// top-k positions, and the latent result goes through each head's W_UV.
// Same semantics as SparseMla in attention/ops.h (and the CPU kernel in
// attention/cpu/mla_kernels.cc); see there.
//
// Plain C++ (no HIP or CUDA types). The launcher enqueues its kernels on
// `stream` and does not synchronise.
//
// The launcher checks what it can see without reading device memory. The
// index tensors live on the device: the kernels skip every top-k index that
// is not -1 and lies outside its request's tokens, every block id outside
// the cache and every invalid request (a row with nothing valid outputs
// zeros), so bad indices give wrong values but never an access outside the
// buffers described here. The op layer (op_kernels.cc) does not read them
// either.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_LAUNCH_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_LAUNCH_H_

#include <cstdint>

#include "attention/gpu/device/launch_result.h"
#include "attention/gpu/sparse_mla/params.h"

namespace dsa::attention::gpu {

// output = SparseMla(params). The attention runs on bf16 matrix cores
// (device/mma.h) for kv_lora_rank 512 / rope_dim 64 with 16-byte
// aligned cache entries, any heads, topk and block_size: on Hopper's
// warpgroup product (WarpgroupBf16Mma, sm_90a builds) for 64 heads or more
// (the seesaw body: a producer warpgroup gathering the top-k rows, two
// consumers exchanging P) over a bf16 cache, or over an fp8 cache whose
// requests' positions are first dequantised into a bf16 workspace from the
// stream's arena (when that workspace, at most 256 MiB and tokens * topk
// rows, holds them: heuristics.h), or else whose rows' top-k entries are
// (decode at 128 heads, few rows or many; in passes of rows when they do
// not fit at once), or read and dequantised by the kernel's producer itself
// (decode at 64 heads between), on the warp-level one (Bf16WarpMma) otherwise
// (fewer heads, AMD); other shapes
// run on a plain-FMA kernel. W_UV runs on the platform's GEMM (cuBLASLt on
// CUDA, through dense_ops/op_kernels.h). q is rounded to bf16 once, fp8 cache
// entries are dequantised exactly to bf16 (power-of-two scales), the
// softmax probabilities and the normalised latent output are rounded to
// bf16 before their products (fp32 accumulation throughout), and so is
// W_UV. See kernels_test.cc for the resulting error bound.
LaunchResult SparseMlaLaunch(const SparseMlaParams& params, void* stream);

// SparseMlaLaunch on the attention kernel SparseMlaPath names `path`
// (nullptr: the one it picks), for benches and tests that compare kernels:
// any that can run the call (heuristics.h: BodyRuns; "mma", the warp-level
// kernel, wherever a matrix kernel is picked; over an fp8 cache on sm_90a
// each form of the seesaw kernel); any other is refused
// (kInvalidArgument).
LaunchResult SparseMlaLaunchOnPath(const SparseMlaParams& params,
                                   const char* path, void* stream);

// The bf16 workspaces that the seesaw body reads over an fp8_ds_mla cache,
// written alone, for tests that compare them to the bit (kernels.h:
// LaunchDequantiseCache, LaunchGatherDequantise): every position of the
// call's requests (`rows`: num_requests * max_blocks_per_request *
// block_size rows of 576 bf16; `table`: num_requests *
// max_blocks_per_request ints), or query rows [begin, begin + rows)'s top-k
// entries (`workspace`: rows * topk rows of 576 bf16; `table`: rows * topk
// + 2 * rows ints), each group of the pass copying `batches` batches of
// entries (0: as the plan of such a call picks).
LaunchResult SparseMlaDequantiseCacheWorkspace(const SparseMlaParams& params,
                                               void* rows, int32_t* table,
                                               void* stream);
LaunchResult SparseMlaGatherWorkspace(const SparseMlaParams& params,
                                      int64_t begin, int64_t rows, int batches,
                                      void* workspace, int32_t* table,
                                      void* stream);

// Which attention kernel SparseMlaLaunch picks (sparse_mla/heuristics.h,
// the one place that decides): "seesaw" (the sm_90a seesaw kernel: 64
// heads or more, a bf16 cache), "dequant+seesaw" (the same over an fp8
// cache dequantised into a bf16 workspace first), "gather+seesaw" (the same
// over each row's top-k entries dequantised into that workspace: decode),
// "seesaw-fp8" (the same reading an fp8 cache, dequantising in its
// producer), "seesaw-fp8x2" (the same in clusters of two blocks, a row's two
// head groups, each producer dequantising half of every tile for both),
// "mma" (warp-level matrix kernel) or "fma".
const char* SparseMlaPath(const SparseMlaParams& params);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_LAUNCH_H_
