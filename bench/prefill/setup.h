// Everything a prefill_bench run needs, derived from the flags and checked
// before any model is built: the platform, the preset, the workloads and
// their schedules against max_position_embeddings and the caches, the
// runner's options, and whether the arms' models fit in host or device
// memory, so that a preset too large for the machine is one clear line, not
// the kernel's OOM killer.
#ifndef DSA_BENCH_PREFILL_SETUP_H_
#define DSA_BENCH_PREFILL_SETUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/prefill/flags.h"
#include "bench/prefill/platform_choice.h"
#include "bench/prefill/workloads.h"
#include "model/deepseek_v32/model_config.h"
#include "model/deepseek_v32/model_loader.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/tensor_parallel_model.h"
#include "platform/checked_size.h"
#include "platform/registry.h"

namespace dsa::prefill_bench {

struct BenchSetup {
  ResolvedPlatform platform;
  model::deepseek_v32::ModelConfig config;
  // What --model loaded (its description is reported; a checkpoint's
  // weights feed every arm's runner).
  std::shared_ptr<const model::deepseek_v32::LoadedModel> loaded;
  std::vector<Workload> workloads;
  std::vector<Schedule> schedules;  // one per workload
  // Per workload, per arm of --arms (in its order): why the arm cannot run
  // the workload (NotRunReason), or empty. Every workload has an arm that
  // runs it.
  std::vector<std::vector<std::string>> not_run;
  int64_t step_tokens = 0;  // max_num_batched_tokens
  int num_blocks = 0;       // cache blocks per layer
  // --weights as it resolved: "bfloat16" or "fp8".
  std::string weights;
  // Every arm's runner options before ArmOptions: bf16 activations on a GPU
  // (the vendor GEMM takes them), float32 on the CPU, its reference; --tp's
  // ranks in options.tensor_parallel.
  model::deepseek_v32::RuntimeOptions options;
  // Which of --tp's ranks run: all (a GPU each, or threads on the CPU), or
  // rank 0 alone when the machine has fewer GPUs; tp_note says which and
  // what the figures then leave out.
  model::deepseek_v32::RankSet ranks = model::deepseek_v32::RankSet::kAllRanks;
  std::string tp_note;
};

// InvalidArgument / NotFound / FailedPrecondition / ResourceExhausted (the
// binary's status 2) naming what is wrong; a workload that no arm of --arms
// can run (it would measure nothing) is InvalidArgument too.
absl::StatusOr<BenchSetup> MakeSetup(const Flags& flags,
                                     const platform::Registry& registry);

// What the machine has; 0 where unknown (then nothing is refused).
struct MemoryBudget {
  int64_t host_available_bytes = 0;  // MemAvailable of /proc/meminfo
  int64_t device_total_bytes = 0;    // the device's, on a GPU platform
};
MemoryBudget ProbeMemory(const ResolvedPlatform& platform);

// ResourceExhausted when `arms` models of `bytes_per_arm` each need more
// than 90% of the budget: of host memory when the step executes on the CPU
// (all of a model is platform memory, the host's there), else of device
// memory.
// An overflowed size (past int64) is refused whatever the budget.
absl::Status CheckMemory(absl::string_view model, const PlatformInfo& platform,
                         int arms, CheckedSize bytes_per_arm,
                         const MemoryBudget& budget);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_SETUP_H_
