// The attention kernels at qk width 64, each v width (config.h), compiled
// apart from the other qk widths so that they build in parallel.
#include "attention/gpu/dense_mha/attention_kernels.h"

namespace dsa::attention::gpu::dense_mha {
DSA_DENSE_MHA_V_WIDTHS(DSA_DENSE_MHA_INSTANTIATE_ATTENTION, 64)
}  // namespace dsa::attention::gpu::dense_mha
