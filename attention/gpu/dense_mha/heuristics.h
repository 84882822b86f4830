// Which kernel bodies the dense MHA prefill runs: the one place that
// decides, from the call's head dims (or the body it asks for) and the
// device's features (device/features.h). The launchers call these and the
// path strings for reports come from the same answers. Plain C++ (host
// compiled; heuristics_test.cc runs the decision table without a device).
//
// Attention, for DenseMhaBody::kAuto:
//   no sm_90a device code                  -> kWarp
//   sm_90a, tensor maps, nope, rope and v
//   multiples of 64 (GLM-5.x, DeepSeek-V3.2) -> kSm90Tma, 128- or 80-key
//                                             tiles where TmaTileKeys allows
//   sm_90a otherwise                       -> kSm90Pipelined
// The TMA body's persistent grid (ScheduleTmaAttention): one CTA per
// multiprocessor, fewer where the call has fewer (query tile, head) tiles
// or the params cap it (attention_ctas); heads per L2 section as config.h's
// TmaTileOrder says.
// The latent gather (GatherVectorElems): 16-byte chunks of 8 elements where
// the cache entries allow, else bf16 pairs.
// gemm_bf16: kSm90 with sm_90a device code, kWarp otherwise.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_HEURISTICS_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_HEURISTICS_H_

#include "attention/gpu/dense_mha/gemm_bf16.h"
#include "attention/gpu/dense_mha/params.h"
#include "attention/gpu/device/features.h"
#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu::dense_mha {

struct AttentionChoice {
  DenseMhaBody body = DenseMhaBody::kWarp;
  // The instantiation: nope + rope and v rounded up (config.h).
  int qk_width = 0;
  int v_width = 0;
  // kSm90Tma: keys per tile (64, 80 or 128); 0 for the cp.async bodies, whose
  // tiles are fixed per backend (BlockTiles).
  int tma_tile_keys = 0;
};

// The body for `params` (head dims already checked: plan.h) on a device
// with `features`; kInvalidArgument naming why when params ask for a body
// that cannot run there.
LaunchResult ChooseAttention(const DenseMhaPrefillParams& params,
                             const DeviceFeatures& features,
                             AttentionChoice* choice);

struct TmaSchedule {
  int tiles = 0;  // work items x heads
  int ctas = 0;   // the grid
  int heads_per_section = 0;
};

// The schedule of a kSm90Tma call with `items` work items, `heads` heads
// and `kv_rows` scratch rows (plan.h) at the widths of `choice`, on a
// device with `multiprocessors`; `max_ctas` > 0 caps the grid (the params'
// attention_ctas). kInvalidArgument where the tiles overflow an int.
LaunchResult ScheduleTmaAttention(const AttentionChoice& choice, int64_t items,
                                  int heads, int64_t kv_rows, int max_ctas,
                                  int multiprocessors, TmaSchedule* schedule);

// Elements each thread of the latent gather moves at once (prologue
// kernels): 8, as 16-byte loads and stores, where the cache's base and its
// entries of `entry_bytes` are 16-byte aligned, and in an fp8 entry so is
// k_pe after the codes and their scales; else 2. (The scratch rows are
// 16-byte aligned at every legal width: the arena's base is, and lora +
// rope is a multiple of 8.)
int GatherVectorElems(const DenseMhaPrefillParams& params, int64_t entry_bytes);

// "warp", "sm90-pipelined", "sm90-tma-64", "sm90-tma-80" or "sm90-tma-128".
const char* AttentionPathName(const AttentionChoice& choice);

LaunchResult ChooseBf16Gemm(const Bf16GemmParams& params,
                            const DeviceFeatures& features, Bf16GemmBody* body);

// "warp" or "sm90".
const char* Bf16GemmPathName(Bf16GemmBody body);

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_HEURISTICS_H_
