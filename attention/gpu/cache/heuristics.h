// Which body of the memory-bound ops runs, and its launch: the one place
// that decides, from the call's parameters. The launchers (the ops'
// .hip.cc files) run what the Plan functions answer, IndexerKWritePath and
// IndexerQPath report the same choice, and heuristics_test.cc runs the
// decision table without a device. Plain C++ (host code).
//
// No device feature enters: both bodies run on every target (neither needs
// an opt-in of shared memory; the one architecture-specific instruction, the
// hardware e4m3 conversion, is chosen at compile time and gives the same
// bytes).
#ifndef DSA_ATTENTION_GPU_CACHE_HEURISTICS_H_
#define DSA_ATTENTION_GPU_CACHE_HEURISTICS_H_

#include <cstddef>
#include <cstdint>

#include "attention/gpu/cache/params.h"
#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu::cache {

enum class Body {
  kRegister,  // a row in registers, no block barriers (head_dim 128)
  kStaged,    // a row a group staged in shared memory: any shape
};

// The K write: kRegister for head_dim 128 with a rope_dim the register path
// takes (config.h: a multiple of 8 up to 128 whose eighth is a power of
// two), unless params.force_staged_path or the Hadamard rotation (which
// pairs any two dims) asks for kStaged.
Body ChooseIndexerKWriteBody(const IndexerKWriteParams& params);

// Q: kRegister for head_dim 128 with rope_dim 32, 64 or 128 and at most
// 2^31 - 1 (token, head) rows, unless force_staged_path or the Hadamard
// rotation asks for kStaged.
Body ChooseIndexerQBody(const IndexerQParams& params);

// "register" or "staged", as IndexerKWritePath / IndexerQPath report them.
const char* BodyName(Body body);

// A launch of one op's kernel.
struct LaunchPlan {
  Body body = Body::kStaged;
  int threads = 0;
  // kStaged: rows (groups of 32 lanes) a block, and the dynamic shared
  // memory that stages them.
  int groups = 0;
  size_t shared_bytes = 0;
  uint32_t blocks = 0;  // 0: nothing to launch (no tokens)
};

// The launcher's argument checks (kInvalidArgument naming what is wrong),
// then the body and its grid. The MLA cache write has the staged body only.
LaunchResult PlanIndexerKWrite(const IndexerKWriteParams& params,
                               LaunchPlan* plan);
LaunchResult PlanIndexerQ(const IndexerQParams& params, LaunchPlan* plan);
LaunchResult PlanMlaCacheWrite(const MlaCacheWriteParams& params,
                               LaunchPlan* plan);

}  // namespace dsa::attention::gpu::cache

#endif  // DSA_ATTENTION_GPU_CACHE_HEURISTICS_H_
