// What a prefill_bench run produces: per workload and arm, every run's
// median TTFT and their median on the wall clock and on the process's
// CPU-time clock, indexer calls scored of total, launches per step, the GPU's
// host issue and device tail, --op_times' per-op times, and whether outputs
// and caches equal the reference arm's to the bit; per workload the change
// of the candidate and the bound against the reference. The run fills it;
// the table and the JSON (report/) print it.
#ifndef DSA_BENCH_PREFILL_RESULT_H_
#define DSA_BENCH_PREFILL_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "bench/prefill/arms.h"
#include "bench/prefill/compare.h"
#include "bench/prefill/platform_choice.h"
#include "bench/prefill/workloads.h"
#include "model/deepseek_v32/model_runner.h"

namespace dsa::prefill_bench {

// --op_times: the profiled step's time per op kind on the run's op clock
// (BenchResult::op_clock), and the calls of each kind it made.
struct OpProfile {
  model::deepseek_v32::OpTimes ms;
  model::deepseek_v32::OpCallCounts calls;
  // The profiled step's host issue: with the host clock, what the ops' own
  // times leave of it is the runner's work between the ops.
  double host_issue_ms = 0;
};

struct ArmResult {
  const ArmSpec* spec = nullptr;  // never null in a result
  bool ran = false;
  std::string not_run_reason;   // when !ran
  std::vector<double> ttft_ms;  // per run: the median TTFT of its prompts
  double median_ttft_ms = 0;
  // The same on a clock of the process's CPU time: the host work, which a
  // shared machine's load does not stretch.
  std::vector<double> ttft_cpu_ms;
  double median_ttft_cpu_ms = 0;
  int64_t indexer_scored = 0;        // per run
  int64_t indexer_total = 0;         // indexer-layer calls per run
  double launches_per_step = 0;      // attention-op launches
  double all_launches_per_step = 0;  // with the dense ops (projections...)
  // Graph launches per step (--step_graphs), each in place of a layer's run
  // of the ops above.
  double graph_launches_per_step = 0;
  int steps = 0;  // per run
  // GPU only: per step, the median over every step of every run of the
  // wall time the host took to issue the step's launches and of the time the
  // device took after that (StepOutput::host_issue_ms, device_tail_ms).
  std::optional<double> host_issue_ms;
  std::optional<double> device_tail_ms;
  // GPU only, the same medians of the rest of a step's wall time: before the
  // first launch (planning, uploads) and after the device finished (reading
  // the hidden states back).
  std::optional<double> prepare_ms;
  std::optional<double> read_back_ms;
  // --op_times: the workload's first step once more, every op timed on the
  // op clock (ms.total() is the step's ops, ms.indexer_scoring the scoring's
  // share).
  std::optional<OpProfile> op_times;
  // Compared with the reference arm's, to the bit (outputs: every step's
  // hidden states after the main layers and after the MTP layers).
  std::optional<bool> outputs_equal;
  std::optional<bool> caches_equal;  // latent and indexer K caches
  bool deterministic = true;         // its own runs agree
  // Tensor-parallel ranks that all ran: every rank's hidden states equal to
  // rank 0's, to the bit, in every step so far.
  std::optional<bool> ranks_agree;
};

// The ops of `times` that ran (a time above 0), in the runner's op order.
std::vector<std::pair<std::string, double>> OpsThatRan(
    const model::deepseek_v32::OpTimes& times);
// The calls in `calls` of the op named `op` (a DSA_STEP_OPS name, as
// OpsThatRan names them); 0 for another name.
int CallsOf(const model::deepseek_v32::OpCallCounts& calls,
            absl::string_view op);

struct WorkloadResult {
  Workload workload;
  int steps = 0;
  std::vector<ArmResult> arms;  // in the order of Flags::arms
  // The candidate against the reference on each clock.
  Change change;      // TTFT
  Change change_cpu;  // CPU-time TTFT
  // The bound against the reference.
  std::optional<double> bound_change_pct;
  std::optional<double> bound_change_cpu_pct;
  // The candidate's outputs and caches equal the reference's.
  std::optional<bool> outputs_equal;
};

struct BenchResult {
  PlatformInfo platform;
  std::string model;
  std::string model_source;  // what --model loaded (LoadedModel::description)
  int main_layers = 0, mtp_layers = 0, indexer_layers = 0;
  int64_t index_topk = 0;
  int spec_tokens = 0;
  std::string commit;
  int runs = 0;
  int64_t max_num_batched_tokens = 0;
  int block_size = 0, num_blocks = 0;
  std::string kv_cache_dtype;   // --kv_cache_dtype
  int tp = 1;                   // --tp
  std::string indexer_tp;       // --indexer_tp
  int ranks_run = 1;            // tp, or 1 when rank 0 ran alone
  std::string tp_note;          // how the ranks ran; empty at tp 1
  std::string weights;          // --weights as resolved
  std::string op_clock;         // --op_clock, with --op_times
  bool step_graphs = true;      // --step_graphs
  std::string gpu_timing_note;  // what host issue / device tail are, or why
                                // there are none
  std::vector<WorkloadResult> workloads;
};

// Milliseconds as the progress lines and the table write them: one decimal
// from 100 ms, two from 10 ms, else three.
std::string FormatMs(double ms);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_RESULT_H_
