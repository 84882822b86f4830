// Which of the sparse MLA's kernels runs, and how it is cut into launches:
// the one place that decides, from the call's parameters and the device's
// features (device/features.h). Plain C++, called by the launcher
// (launch.hip.cc) and tested without a device (heuristics_test.cc).
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_HEURISTICS_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_HEURISTICS_H_

#include <cstdint>

#include "attention/gpu/device/features.h"
#include "attention/gpu/sparse_mla/params.h"

namespace dsa::attention::gpu::sparse_mla {

enum class Body {
  kFma,     // the FMA kernels (plain_kernels.hip.cc): any shape
  kWarp,    // the warp-level matrix body (warp_body.h)
  kSeesaw,  // the sm_90a seesaw body (seesaw_body.h)
  // An fp8 cache dequantised into a bf16 workspace (dequantise.hip.cc),
  // then the seesaw body over it (config.h: dequantised::).
  kSeesawDequantised,
  // An fp8 cache whose rows' top-k entries are dequantised, a chunk of rows
  // at a time, into that workspace in top-k order (gather_dequantise.hip.cc),
  // then the seesaw body over it (config.h: gathered::): decode.
  kSeesawGathered,
  // The seesaw body over an fp8 cache, its producer dequantising each key
  // tile into the bf16 buffers (no workspace).
  kSeesawFp8,
  // The same in clusters of two blocks, a row's two head groups (an even
  // number of them: 128 heads), each producer dequantising half of every
  // tile into both blocks' buffers (FlashMLA's "crossover").
  kSeesawFp8Crossover,
};

// The body that runs:
// - kFma unless the shape is the matrix bodies' (kv_lora_rank 512, rope_dim
//   64, 16-byte aligned cache entries) and the device gives a block the
//   warp body's shared memory (features with no shared-memory figure, as
//   without a device, are taken to have it);
// - on sm_90a device code, for 64 heads or more, with the seesaw body's
//   shared memory and softmax_scale > 0 (its softmax takes the maximum
//   before the scale): kSeesaw over a bf16 cache; kSeesawDequantised over
//   an fp8 cache when the workspace the call carves (WorkspaceBudgetRows)
//   holds every position of its requests (WorkspaceNeededRows) and they
//   are fewer than the rows' (row, key) pairs (tokens * topk); else, when
//   it holds one row's top-k list (1 <= topk; at most tokens * topk rows,
//   so the gathered pairs then number no more than the positions), from
//   kSeesawFp8MinRows rows on kSeesawFp8Crossover for an even number of
//   head groups (128 heads), kSeesawFp8 for one (64 heads), else (fewer
//   rows, or three or more odd head groups) kSeesawGathered: the fastest
//   on the H200 at the decode shapes measured (RESULTS.md);
// - kWarp otherwise (AMD, other NVIDIA targets, fewer heads, top-k lists
//   empty or longer than the workspace).
Body ChooseBody(const SparseMlaParams& params, const DeviceFeatures& features);

// The fewest rows for which ChooseBody takes a producer that dequantises
// (kSeesawFp8, kSeesawFp8Crossover) over the gathered workspace.
inline constexpr int64_t kSeesawFp8MinRows = 32;

// What SparseMlaPath reports for a body: "fma", "mma", "seesaw",
// "dequant+seesaw", "gather+seesaw", "seesaw-fp8" or "seesaw-fp8x2".
const char* BodyName(Body body);

// The body named `name` (BodyName), false for none.
bool ParseBody(const char* name, Body* body);

// Whether `body` can run the call on the device: kFma always; kWarp
// wherever ChooseBody picks a matrix body; kSeesaw as ChooseBody's rule
// over a bf16 cache; over an fp8 cache where the seesaw body can run
// (sm_90a code, 64 heads or more, its shared memory and scale) and, for
// kSeesawDequantised, every position fits the workspace, for
// kSeesawGathered one row's top-k list does, for kSeesawFp8Crossover the
// head groups are even in number.
bool BodyRuns(Body body, const SparseMlaParams& params,
              const DeviceFeatures& features);

// The workspace of kSeesawDequantised, in bf16 rows of 1152 bytes.
// Needed: every position the call's requests can name,
// num_requests * max_blocks_per_request * block_size.
int64_t WorkspaceNeededRows(const SparseMlaParams& params);
// Carved: min(dequantised::kMaxRows, tokens * topk). At most tokens * topk,
// the (row, key) pairs: the dequantisation reads and writes ~1.8 KB a row,
// the attention's own cost at 64 heads is ~139 kFLOP a pair, so below that
// bound the dequantisation costs less than a quarter of what the seesaw body
// saves over the warp body a pair (116 against ~480 TFLOP/s, RESULTS.md).
// It depends on the call's shapes only, not on its requests' lengths, so the
// largest call (the profile run's) carves the most.
int64_t WorkspaceBudgetRows(const SparseMlaParams& params);

// A call's launches.
struct Plan {
  Body body = Body::kFma;
  // Heads per block of a matrix body (the M of its products).
  int heads_per_block = 1;
  // Query rows per pass through the latent scratch (one launch of each
  // kernel per pass).
  int64_t chunk_rows = 0;
  // Parts each row's top-k list is split into (matrix bodies, few rows: so
  // that the grid covers every multiprocessor); 1 is no split.
  int splits = 1;
  // Rows of the bf16 workspace the call carves from the stream's arena
  // (WorkspaceBudgetRows), with gathered::kTableIntsPerRow table entries
  // each: for kSeesawDequantised and kSeesawGathered, and for every fp8
  // call that could take them (sm_90a code, 64 heads or more, the seesaw
  // body's shared memory and scale), so that whether a later step fits the
  // arena the profile run grew never depends on its requests' lengths.
  // 0: none.
  int64_t workspace_rows = 0;
  // kSeesawGathered: batches of gathered::kPairsInFlight entries each group
  // of the gather pass copies (config.h: gathered::), the most that leaves
  // a pass at least 2 blocks a multiprocessor; 0 otherwise.
  int gather_batches = 0;
};

// The plan of the body ChooseBody picks: PlanFor(ChooseBody(...), ...).
Plan MakePlan(const SparseMlaParams& params, const DeviceFeatures& features);

// The plan of `body` for the call, which the caller has checked the body can
// run (a bench comparing bodies: launch.h's SparseMlaLaunchOnPath). Rows
// per pass: what the latent scratch holds (kFma: fp32 rows), and for
// kSeesawGathered what the workspace holds too (WorkspaceBudgetRows /
// topk rows), in passes of equal size.
Plan PlanFor(Body body, const SparseMlaParams& params,
             const DeviceFeatures& features);

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_HEURISTICS_H_
