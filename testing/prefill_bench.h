// `prefill_bench`: the project's main job. It replays the seed's serving
// measurements of the short-prefill indexer skip on a whole attention stack
// (every layer of a preset, the MTP layers, GLM-5.2's shared layers):
//
//   workloads  1k_c1, 1900_c1, 1k_c32, 8k_c1 -- prompts of the seed's lengths
//              scaled to the preset's index_topk (the seed's are at 2048), one
//              output token, so a request's TTFT is its prefill; concurrent
//              prompts are scheduled in steps of at most
//              max_num_batched_tokens, chunking a prompt that does not fit
//   arms       main       the indexer always scores (the behaviour before
//                         the optimisation: the platform not treated as
//                         CUDA-alike by the skip)
//              skip       the decision as registered
//              no_indexer no indexer work at all: a bound, not a valid model
//                         (RuntimeOptions::no_indexer)
//              run for a number of rounds after a warm-up; within a round
//              the arms take turns step by step in ABBA order, so that a
//              change in the machine's load falls on every arm alike
//   figures    per workload and arm: every run's median TTFT and their
//              median, on the wall clock and on the process's CPU-time clock
//              (a shared CPU machine's load stretches the first, not the
//              second), indexer calls scored of total, attention-op launches
//              per step, whether outputs and caches equal main's to the bit;
//              per workload the change in percent and its spread
//
// The step runs on the active platform's kernels. Without a GPU, the
// emulated-rocm platform takes ROCm's registered capabilities (the decision)
// and executes the CPU kernels, and says so in every output. Figures that
// only a GPU has (host issue time, device tail) are null there.
//
// The library holds everything but main() so that a test reaches the flag
// parser, the scheduler, the JSON writer and a small run directly.
#ifndef DSA_TESTING_PREFILL_BENCH_H_
#define DSA_TESTING_PREFILL_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "platform/registry.h"

namespace dsa::prefill_bench {

// Exit statuses of the binary.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // a run failed after it started
inline constexpr int kExitUsage = 2;    // bad flags, preset, platform, sizes

// The preset when the step executes on the CPU: small enough that the whole
// default run takes seconds, with the seed's structure (an indexer on every
// layer, one MTP layer) and index_topk 64.
inline constexpr char kCpuDefaultModel[] = "tiny-glm-5.1";
// The seed's model, the default on a real GPU.
inline constexpr char kGpuDefaultModel[] = "glm-5.1";
// The seed's lengths are at this index_topk; other presets scale them.
inline constexpr int64_t kSeedIndexTopk = 2048;
inline constexpr int64_t kSeedMaxNumBatchedTokens = 8192;
// Arms doing identical work (skip and main on 8k_c1) differ by up to a few
// percent from run to run on a shared machine; a smaller change is noise.
inline constexpr double kNoiseFloorPct = 2.0;

struct Flags {
  std::string model;  // empty: kCpuDefaultModel / kGpuDefaultModel
  std::string platform = "auto";
  std::string arch;  // empty: gfx950 for (emulated-)rocm, else the
                     // device's or the platform's default
  std::vector<std::string> workloads;  // empty: all four
  std::vector<std::string> arms;       // empty: main, skip, no_indexer
  int runs = 2;
  int spec_tokens = 0;                 // MTP draft tokens (GLM-5.2: 3)
  int prompts = 0;                     // 0: each workload's own count
  int64_t max_num_batched_tokens = 0;  // 0: 8192 scaled to index_topk
  int block_size = 64;
  int num_blocks = 0;  // 0: what the largest workload needs
  int threads = 0;     // 0: all cores
  uint64_t seed = 1;
  std::string json;    // write every figure here
  std::string plot;    // draw the medians here (PNG, SVG...)
  std::string commit;  // empty: asked of git
  // After each workload's runs, one more step per arm with every op timed
  // (StepOptions::time_ops): the share of the indexer's scoring, per op.
  bool op_times = false;
  bool help = false;
};

std::string Usage();

// InvalidArgument with one line naming the flag and what it expects.
absl::StatusOr<Flags> ParseFlags(absl::Span<const std::string> args);

// One of the seed's workloads at a preset's scale.
struct Workload {
  std::string name;             // "1k_c1", ...
  int64_t seed_prompt_len = 0;  // 1024, 1900, 8192
  int64_t prompt_len = 0;       // scaled: seed_prompt_len * index_topk / 2048
  int prompts = 0;
  int concurrency = 0;
};

std::vector<std::string> WorkloadNames();
// The named workloads (all four when `names` is empty) for a preset with
// `index_topk`: the seed's prompt counts, fewer sequential ones `on_cpu`;
// `prompts` > 0 replaces each one's count. NotFound naming the known ones
// for an unknown name.
absl::StatusOr<std::vector<Workload>> MakeWorkloads(
    const std::vector<std::string>& names, int64_t index_topk, int prompts,
    bool on_cpu);

// A request's share of one step.
struct ScheduledPrompt {
  int prompt = 0;
  int64_t context = 0;  // tokens already prefilled (chunked prefill)
  int64_t new_tokens = 0;
  bool finishes = false;  // its last prompt token: the first token is out
};
struct ScheduledStep {
  std::vector<ScheduledPrompt> prompts;
  int64_t tokens = 0;
  int64_t resident_blocks = 0;  // cache blocks in use during the step
};
// How a serving engine with first-come-first-served chunked prefill runs a
// workload: a client keeps `concurrency` prompts in flight (a new one arrives
// when one finishes), each step takes at most `max_num_batched_tokens`
// tokens, unfinished prompts first. A prompt's TTFT runs from its arrival to
// the end of the step that finishes it.
struct Schedule {
  std::vector<ScheduledStep> steps;
  // Per prompt: the step boundary it arrives at (0 = the run's start, k =
  // after step k-1) and the step that finishes it.
  std::vector<int> arrival_boundary;
  std::vector<int> finish_step;
  int64_t peak_blocks = 0;
};
absl::StatusOr<Schedule> MakeSchedule(const Workload& workload,
                                      int64_t max_num_batched_tokens,
                                      int block_size);

// --- Results.

struct ArmResult {
  std::string arm;  // "main", "skip", "no_indexer"
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
  int steps = 0;                     // per run
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
  // --op_times: the workload's first step once more, every op timed between
  // synchronisations; milliseconds per op kind (those that ran), the step's
  // sum and the indexer's scoring (OpTimes::indexer_scoring).
  std::vector<std::pair<std::string, double>> op_ms;
  std::optional<double> profiled_step_ms;
  std::optional<double> scoring_ms;
  // Compared with main's, to the bit (outputs: every step's hidden states
  // after the main layers and after the MTP layers).
  std::optional<bool> outputs_equal;
  std::optional<bool> caches_equal;  // latent and indexer K caches
  bool deterministic = true;         // its own runs agree
};

// One arm against main: the change of the medians in percent, [min, max] of
// the change within each round (the arms of a round ran interleaved, under
// the same load), and "faster" / "slower" when every round's change is
// beyond kNoiseFloorPct with the same sign, else "within noise" ("one run"
// with a single round).
struct Change {
  std::optional<double> pct;
  std::optional<double> min_pct, max_pct;
  std::string verdict;
};
// `arm` against `main`, from their runs in round order.
Change CompareRuns(const std::vector<double>& arm,
                   const std::vector<double>& main);

struct WorkloadResult {
  Workload workload;
  int steps = 0;
  std::vector<ArmResult> arms;  // in the order of Flags::arms
  // skip against main on each clock.
  Change change;                           // TTFT
  Change change_cpu;                       // CPU-time TTFT
  std::optional<double> bound_change_pct;  // no_indexer against main
  std::optional<double> bound_change_cpu_pct;
  std::optional<bool> outputs_equal;  // skip vs main: outputs and caches
};

struct PlatformInfo {
  std::string name;  // cpu, rocm, cuda, emulated-rocm
  std::string arch;
  bool emulated = false;
  std::string executes_on;  // the platform whose kernels and memory run it
  bool is_cuda_alike = false;
  std::string note;  // why auto chose it, when it matters
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
  std::string gpu_timing_note;  // why host issue / device tail are null
  std::vector<WorkloadResult> workloads;
};

// Everything the run needs, checked before any model is built: the preset,
// the platform, the workloads against the caches and max_position_embeddings.
// InvalidArgument / NotFound / FailedPrecondition (exit status 2) naming what
// is wrong. Progress goes to `progress`, one line per run (rewritten in
// place when `progress_tty`).
absl::StatusOr<BenchResult> RunBench(const Flags& flags,
                                     const platform::Registry& registry,
                                     std::ostream& progress, bool progress_tty);

// The hash that compares the arms' outputs and caches without keeping them:
// equal bytes give equal hashes, and a changed bit, a changed length or
// words in another order change it (not a cryptographic hash: the arms are
// not adversaries). `h` chains calls; start at kHashSeed.
inline constexpr uint64_t kHashSeed = 0xcbf29ce484222325ull;
uint64_t HashBytes(const void* data, size_t bytes, uint64_t h);

// A table a person reads at a glance.
std::string FormatTable(const BenchResult& result);
// One JSON object with every figure (see the issue's schema; extra fields
// explain nulls).
std::string ToJson(const BenchResult& result);

// Writes `contents` to `path` through a temporary file in the same directory
// and a rename: `path` is either untouched or complete.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);
// FailedPrecondition when `path`'s directory does not exist or is not
// writable, so a bad --json fails before the run.
absl::Status CheckWritableDestination(const std::string& flag,
                                      const std::string& path);

// The whole binary: parses, runs, prints, writes. Returns the exit status.
int Main(absl::Span<const std::string> args, const platform::Registry& registry,
         std::ostream& out, std::ostream& err);

}  // namespace dsa::prefill_bench

#endif  // DSA_TESTING_PREFILL_BENCH_H_
