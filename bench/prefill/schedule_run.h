// One arm's run of a workload's schedule, a step at a time, so that the
// arms' steps can be interleaved (ABBA, in run.cc).
//
// TTFTs are measured on a clock of this run alone, which advances only while
// its own steps and releases run (hashing the outputs is not timed):
// interleaving the arms then exposes them to the same machine load without
// one arm's time counting in another's TTFT. The step's read-back of every
// hidden state is not timed either: it is there for the to-the-bit
// comparison of the arms, where an engine reads back only the sampled tokens
// (StepOutput::read_back_ms, reported on its own).
#ifndef DSA_BENCH_PREFILL_SCHEDULE_RUN_H_
#define DSA_BENCH_PREFILL_SCHEDULE_RUN_H_

#include <cstdint>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/prefill/compare.h"
#include "bench/prefill/workloads.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/tensor_parallel_model.h"

namespace dsa::prefill_bench {

// What one run of a schedule measured.
struct RunFigures {
  double median_ttft_ms = 0;
  double median_ttft_cpu_ms = 0;
  int64_t scored = 0;        // indexer-layer calls that ran logits + top-k
  int64_t launches = 0;      // attention ops
  int64_t all_launches = 0;  // every op
  // Graph launches (StepOutput::graph_launches): each stands for a layer's
  // run of ops, which all_launches counts as ops.
  int64_t graph_launches = 0;
  uint64_t output_hash = kHashSeed;  // every step's hidden states
  // Per step (StepOutput): the host's issue time and the device's tail, and
  // the time before the first launch and after the device finished.
  std::vector<double> host_issue_ms, device_tail_ms, prepare_ms, read_back_ms;
};

class ScheduleRun {
 public:
  // Requests are numbered from `request_id_base`; `input` holds at least a
  // step's tokens of hidden states. All must outlive the run.
  ScheduleRun(model::deepseek_v32::TensorParallelModel& model,
              const Schedule& schedule, const std::vector<float>& input,
              int64_t request_id_base);
  // A failed or partial (warm-up) run leaves no prompt in the cache.
  ~ScheduleRun();
  ScheduleRun(const ScheduleRun&) = delete;
  ScheduleRun& operator=(const ScheduleRun&) = delete;

  // Runs step k; steps run in order (Internal otherwise).
  absl::Status Step(int k);

  // Releases what is left and returns the figures of the steps run: the
  // median TTFT over the prompts they finished.
  absl::StatusOr<RunFigures> Finish();

 private:
  absl::Status ReleaseStarted();

  model::deepseek_v32::TensorParallelModel& model_;
  const Schedule& schedule_;
  const std::vector<float>& input_;
  const int64_t id_base_;
  const int64_t hidden_;
  std::vector<double> boundary_ms_;
  std::vector<double> boundary_cpu_ms_;
  std::set<int> started_;
  int steps_done_ = 0;
  double clock_ms_ = 0.0;
  double cpu_clock_ms_ = 0.0;
  RunFigures figures_;
};

// The schedule's first step on `model` with every op timed on `clock`
// (StepOptions::time_ops; the output's op_ms, op_calls and host_issue_ms;
// nothing read back); its requests are released after it.
absl::StatusOr<model::deepseek_v32::StepOutput> ProfileFirstStep(
    model::deepseek_v32::TensorParallelModel& model, const Schedule& schedule,
    const std::vector<float>& input, int64_t request_id_base,
    model::deepseek_v32::OpClock clock);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_SCHEDULE_RUN_H_
