// The sparse MLA's kernels as the launch functions the launcher
// (launch.hip.cc) calls, one declaration each. Each is defined beside its
// kernel: the matrix bodies in warp_body.h and seesaw_body.h, explicitly
// instantiated in instantiations/ (so that they compile in parallel); the
// FMA pair, the split merge and the W_UV conversion in plain_kernels.hip.cc;
// an fp8 cache's dequantisation into a bf16 workspace in dequantise.hip.cc
// (every position) and gather_dequantise.hip.cc (the rows' top-k entries).
// Every function enqueues on `stream` and reports the launch's error.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_KERNELS_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_KERNELS_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_result.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/sparse_mla/params.h"

namespace dsa::attention::gpu::sparse_mla {

using ::dsa::gpu::Fp8Format;

inline constexpr const char* kOp = "sparse_mla";

// Where a matrix body puts its result. One split (part_o null):
// latent[t, h, :] = the normalised output (bf16). Several (few rows: the
// top-k list is split over blockIdx.z so that the grid fills the GPU): each
// split's own normalised output, fp32, at part_o[split][t][h][:], and its
// log2-sum-exp at part_lse[split][t][h] (-inf when it saw no key), merged
// by LaunchCombineSplits.
struct MmaOutput {
  uint16_t* latent;
  float* part_o;
  float* part_lse;
  int splits;
};

// Rows [begin, begin + rows) of the attention on a matrix body: the
// warp-level one with HC heads per block (warp_body.h) or the sm_90a
// seesaw one (seesaw_body.h: a bf16 cache, or an fp8 cache's bf16
// workspace). kFp8: an fp8_ds_mla cache of format F (F is unused for a bf16
// cache); kCrossover: the fp8 cache read by clusters of two blocks, a row's
// two head groups, each dequantising half of every tile for both (an even
// number of head groups). `device`: the current device.
template <int HC, bool kFp8, Fp8Format F>
LaunchResult LaunchWarpBody(const SparseMlaParams& p, int64_t begin,
                            int64_t rows, const MmaOutput& out, int device,
                            hipStream_t stream);
template <bool kFp8, Fp8Format F, bool kCrossover = false>
LaunchResult LaunchSeesawBody(const SparseMlaParams& p, int64_t begin,
                              int64_t rows, const MmaOutput& out, int device,
                              hipStream_t stream);

// The bf16 workspace of an fp8_ds_mla cache (config.h: dequantised::):
// rows[r * capacity + pos, :] = request r's position pos dequantised (576
// bf16: the 512 codes times their tile's scale, then the rope), for each
// position below the request's length whose block is in the cache;
// table[r * max_blocks_per_request + j] = that index, or -1 where
// block_table[r, j] is outside the cache. Other rows are not written (the
// workspace's block table and seq_lens keep every read of the attention
// from them). Needs p's cache entries 16-byte aligned (the matrix bodies'
// shape) and WorkspaceNeededRows(p) rows at `rows` (dequantise.hip.cc).
LaunchResult LaunchDequantiseCache(const SparseMlaParams& p, uint16_t* rows,
                                   int32_t* table, hipStream_t stream);

// The bf16 workspace of query rows [begin, begin + rows) of a call over an
// fp8_ds_mla cache (config.h: gathered::): workspace[(r * topk + i), :] =
// row begin + r's i-th top-k entry dequantised, where it names one;
// table[r * topk + i] = i there, else -1; then table[rows * topk + r] = r
// and table[rows * topk + rows + r] = topk (gather_dequantise.hip.cc).
// `batches`: batches a group copies (config.h: gathered::, 1 ..
// kMaxBatches).
LaunchResult LaunchGatherDequantise(const SparseMlaParams& p, int64_t begin,
                                    int64_t rows, int batches,
                                    uint16_t* workspace, int32_t* table,
                                    hipStream_t stream);

// out.latent[rows, heads, 512] = the splits of out merged
// (plain_kernels.hip.cc).
LaunchResult LaunchCombineSplits(int64_t rows, int heads, const MmaOutput& out,
                                 hipStream_t stream);

// w[h, o, c] = bf16(W_UV of head h, row o, column c) from kv_b_proj, for
// kv_b_proj that the W_UV GEMM cannot read in place (plain_kernels.hip.cc).
LaunchResult LaunchConvertWuv(const SparseMlaParams& p, uint16_t* w,
                              hipStream_t stream);

// Rows [begin, begin + rows) of the whole op on the FMA kernels, any shape,
// through `latent` ([rows, heads, kv_lora_rank] fp32 scratch)
// (plain_kernels.hip.cc).
LaunchResult LaunchFmaKernels(const SparseMlaParams& p, int64_t begin,
                              int64_t rows, float* latent, hipStream_t stream);

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_KERNELS_H_
