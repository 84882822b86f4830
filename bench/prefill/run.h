// `prefill_bench`: the project's main job. It replays the seed's serving
// measurements of the short-prefill indexer skip on a whole attention stack
// (every layer of a preset, the MTP layers, GLM-5.2's shared layers): the
// seed's workloads (workloads.h) prefilled by each arm (arms.h) for a number
// of rounds after a warm-up; within a round the arms take turns step by step
// in ABBA order, so that a change in the machine's load falls on every arm
// alike. The step runs on the chosen platform's kernels (platform_choice.h).
//
// The pieces, in the order a run uses them:
//   flags.h            the command line
//   workloads.h        the seed's workloads and the chunked-prefill schedule
//   arms.h             the arms: what each configures, its role
//   platform_choice.h  --platform and --arch
//   setup.h            everything checked before a model is built
//   schedule_run.h     one arm's run of a workload, a step at a time
//   compare.h          outputs and caches to the bit, TTFTs round by round
//   result.h           what the run produces
//   report/table.h     the table a person reads
//   report/json.h      every figure as JSON (report/result.proto)
//   report/files.h     files, git, the plot script
//   main.cc            the binary
#ifndef DSA_BENCH_PREFILL_RUN_H_
#define DSA_BENCH_PREFILL_RUN_H_

#include <ostream>

#include "absl/status/statusor.h"
#include "bench/prefill/flags.h"
#include "bench/prefill/result.h"
#include "platform/registry.h"

namespace dsa::prefill_bench {

// Checks everything first (MakeSetup: InvalidArgument / NotFound /
// FailedPrecondition / ResourceExhausted naming what is wrong), then builds
// one model per arm and runs every workload. Progress goes to `progress`,
// one line per round (rewritten in place when `progress_tty`, with the step
// counted too). `commit` is left for the caller.
absl::StatusOr<BenchResult> RunBench(const Flags& flags,
                                     const platform::Registry& registry,
                                     std::ostream& progress, bool progress_tty);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_RUN_H_
