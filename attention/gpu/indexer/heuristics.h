// The one place that decides which indexer kernels run: from the launch's
// parameters, its options (tests and benchmarks may force a variant) and what
// the device and its loaded code can do, the logits body, its blocks and its
// grid, and the top-k instance. IndexerLogitsLaunch / IndexerTopKLaunch run
// what this answers and IndexerLogitsPath / IndexerTopKPathName report it.
// Plain C++ (host code; heuristics_test.cc runs it without a device).
#ifndef DSA_ATTENTION_GPU_INDEXER_HEURISTICS_H_
#define DSA_ATTENTION_GPU_INDEXER_HEURISTICS_H_

#include <cstdint>
#include <string>

#include "attention/gpu/device/features.h"
#include "attention/gpu/device/launch_result.h"
#include "attention/gpu/indexer/params.h"

namespace dsa::attention::gpu::indexer {

struct LogitsPlan {
  IndexerLogitsBody body = IndexerLogitsBody::kFma;  // never kAuto
  // The persistent body only: 256-column blocks (else 128), key tiles by
  // TMA (else cp.async).
  bool wide = false;
  bool tma_keys = false;
  // The persistent body's math warpgroups: 2, or 4 (wide blocks only).
  int math_groups = 2;
  // Rows a block (a work item of the persistent body): 1 for fma.
  int rows_per_block = 1;
  int64_t blocks = 0;  // row blocks
  // The persistent body only: chunks a row block's key tiles are split
  // into, so that decode's few row blocks keep every multiprocessor busy.
  int splits = 1;
  int64_t grid = 0;  // blocks launched (persistent: at most one CTA an SM)
};

// kOk and *plan for valid parameters (IndexerLogitsLaunch checks them
// first), or kInvalidArgument naming why the body, blocks or keys that
// `options` ask for cannot run here.
LaunchResult PlanIndexerLogits(const IndexerLogitsParams& p,
                               const IndexerLogitsOptions& options,
                               const DeviceFeatures& features,
                               LogitsPlan* plan);

// The plan's name, as IndexerLogitsPath reports it: "fma", "warp_mma",
// "warpgroup_mma", "persistent_{narrow,wide}_{tma,cp_async}" (two math
// groups) or "persistent_wide_{tma,cp_async}_4g" (four).
const char* LogitsPathName(const LogitsPlan& plan);

// The names of DSA_INDEXER_LOGITS_BODIES / _BLOCKS / _KEYS / _GROUPS
// ("auto" for kAuto), and back (false for an unknown name), for flags and
// reports.
const char* BodyName(IndexerLogitsBody body);
const char* BlocksName(IndexerLogitsBlocks blocks);
const char* KeysName(IndexerLogitsKeys keys);
const char* GroupsName(IndexerLogitsGroups groups);
bool ParseBody(const std::string& name, IndexerLogitsBody* body);
bool ParseBlocks(const std::string& name, IndexerLogitsBlocks* blocks);
bool ParseKeys(const std::string& name, IndexerLogitsKeys* keys);
bool ParseGroups(const std::string& name, IndexerLogitsGroups* groups);

struct TopKPlan {
  IndexerTopKPath path = IndexerTopKPath::kStaged512;  // never kAuto
  int threads = 0;       // a block's (one block a row)
  int shared_bytes = 0;  // a block's dynamic shared memory
};

// kOk and *plan for valid parameters (IndexerTopKLaunch checks them first),
// or kInvalidArgument where `options` ask for the staged path on rows wider
// than its stage, or for more shared memory than the device has. kAuto (as
// measured on the H200, testing/bench/RESULTS.md): staged_512 for width <=
// kTopKStageKeys, else streamed_1024 for at most one row a multiprocessor
// (where a block may take its shared memory), streamed_512 otherwise.
LaunchResult PlanIndexerTopK(const IndexerTopKParams& p,
                             const IndexerTopKOptions& options,
                             const DeviceFeatures& features, TopKPlan* plan);

// The names of DSA_INDEXER_TOPK_PATHS ("auto" for kAuto), and back.
const char* TopKPathName(IndexerTopKPath path);
bool ParseTopKPath(const std::string& name, IndexerTopKPath* path);

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_HEURISTICS_H_
