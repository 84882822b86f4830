// The GPU kernels of the seven attention ops (attention/ops.h), one <Op>Gpu
// function per op of kernel_api.h's DSA_ATTENTION_OPS, registered for the
// platform the build targets: "cuda" under --config=cuda, "rocm" under
// --config=rocm, none otherwise (the layer's dense ops are in
// dense_ops/op_kernels.h and registered with them).
//
// They take the ops' arguments, check them (Op::Validate plus the layouts the
// launchers need: contiguous index vectors and block-table rows) and enqueue
// the launchers (indexer/, cache/, sparse_mla/ and dense_mha/
// launch.h) on ExecutionContext::stream. Unlike the CPU kernels
// they do not read index values on the host (that would need a synchronising
// copy per call; dense_mha_prefill is the one exception, below): the device
// code clamps or skips every index it reads, so a bad one gives wrong values,
// never an access outside the views.
// Free of Abseil: they are linked into plugin shared objects.
#ifndef DSA_ATTENTION_GPU_OP_KERNELS_H_
#define DSA_ATTENTION_GPU_OP_KERNELS_H_

#include <vector>

#include "attention/gpu/cache/launch.h"
#include "attention/ops.h"
#include "platform/core_status.h"
#include "platform/plugin_api.h"

namespace dsa::attention::gpu {

Status IndexerLogitsGpu(const ExecutionContext& ctx,
                        const IndexerLogits::Args& args);
Status IndexerTopKGpu(const ExecutionContext& ctx,
                      const IndexerTopK::Args& args);
// Dense causal MHA prefill (dense_mha/launch.h). Unlike the kernels above
// it reads seq_lens and query_start_loc to the host (one small copy on the
// stream, which waits for it): they size the scratch and the grid, and are
// checked there (OutOfRange, as on the CPU). Block ids are clamped on the
// device. Needs q, output, kv_b_proj and the cache contiguous.
Status DenseMhaPrefillGpu(const ExecutionContext& ctx,
                          const DenseMhaPrefill::Args& args);

// Sparse MLA (sparse_mla/launch.h). Needs contiguous
// token_request / seq_lens vectors, block-table rows and top-k rows.
Status SparseMlaGpu(const ExecutionContext& ctx, const SparseMla::Args& args);
// The memory-bound ops (cache/launch.h): bit-identical to the CPU kernels.
Status IndexerKWriteGpu(const ExecutionContext& ctx,
                        const IndexerKWrite::Args& args);
Status IndexerQGpu(const ExecutionContext& ctx, const IndexerQ::Args& args);
Status MlaCacheWriteGpu(const ExecutionContext& ctx,
                        const MlaCacheWrite::Args& args);
// The launchers' parameters for op arguments (already validated), so tests
// and benchmarks can run a launcher path of their choice.
IndexerKWriteParams IndexerKWriteParamsFor(const IndexerKWrite::Args& args);
IndexerQParams IndexerQParamsFor(const IndexerQ::Args& args);

// "cuda", "rocm", or nullptr when built without a GPU backend.
const char* GpuPlatformId();

// The descriptors of the kernels above for GpuPlatformId(); empty without a
// GPU backend.
const std::vector<DsaKernelDescriptor>& GpuAttentionKernelDescriptors();

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_OP_KERNELS_H_
