// The CPU implementations of the attention ops (attention/ops.h).
//
// They are the platform's production kernels and the fp32 baseline the GPU
// kernels are compared with; the float64 references in attention/reference
// check them. Each validates its arguments (Op::Validate plus the value
// checks on slots, blocks, windows and indices) before writing anything and
// runs on ExecutionContext::num_threads threads. The signatures are the ops'
// Fn types, so each function is registered as is.
#ifndef DSA_ATTENTION_CPU_KERNELS_H_
#define DSA_ATTENTION_CPU_KERNELS_H_

#include "attention/ops.h"

namespace dsa::attention::cpu {

Status IndexerKWriteCpu(const ExecutionContext& ctx,
                        const IndexerKWrite::Args& args);
Status IndexerQCpu(const ExecutionContext& ctx, const IndexerQ::Args& args);
Status IndexerLogitsCpu(const ExecutionContext& ctx,
                        const IndexerLogits::Args& args);
Status IndexerTopKCpu(const ExecutionContext& ctx,
                      const IndexerTopK::Args& args);
Status MlaCacheWriteCpu(const ExecutionContext& ctx,
                        const MlaCacheWrite::Args& args);
Status SparseMlaCpu(const ExecutionContext& ctx, const SparseMla::Args& args);
Status DenseMhaPrefillCpu(const ExecutionContext& ctx,
                          const DenseMhaPrefill::Args& args);

}  // namespace dsa::attention::cpu

#endif  // DSA_ATTENTION_CPU_KERNELS_H_
