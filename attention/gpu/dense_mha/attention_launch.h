// The attention step's launch, declared for launch.hip.cc and defined per
// instantiated (qk, v) width pair in attention_kernels.h; instantiations/
// compiles the pairs in parallel, one file per qk width.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_ATTENTION_LAUNCH_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_ATTENTION_LAUNCH_H_

#include "attention/gpu/dense_mha/attention_args.h"
#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/dense_mha/heuristics.h"
#include "attention/gpu/device/features.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu::dense_mha {

struct AttentionLaunch {
  AttentionArgs args;
  AttentionChoice choice;  // the body, at widths (kQk, kV)
  TmaSchedule schedule;    // kSm90Tma: the persistent grid
  DeviceFeatures features;
  int items = 0;  // work items: the grid's x
  hipStream_t stream = nullptr;
};

// Launches the body `launch.choice` names on (items, heads) blocks.
template <int kQk, int kV>
LaunchResult LaunchAttention(const AttentionLaunch& launch);

#define DSA_DENSE_MHA_EXTERN_ATTENTION(QK, V) \
  extern template LaunchResult LaunchAttention<QK, V>(const AttentionLaunch&);
#define DSA_DENSE_MHA_EXTERN_ATTENTION_QK(QK) \
  DSA_DENSE_MHA_V_WIDTHS(DSA_DENSE_MHA_EXTERN_ATTENTION, QK)
DSA_DENSE_MHA_QK_WIDTHS(DSA_DENSE_MHA_EXTERN_ATTENTION_QK)
#undef DSA_DENSE_MHA_EXTERN_ATTENTION_QK
#undef DSA_DENSE_MHA_EXTERN_ATTENTION

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_ATTENTION_LAUNCH_H_
