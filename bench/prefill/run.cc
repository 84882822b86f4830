// The run: one model per arm, then per workload a warm-up, the ABBA rounds,
// the caches' hashes, --op_times' profiled step, and the arms' figures
// compared with the reference arm's (run.h).
#include "bench/prefill/run.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/prefill/schedule_run.h"
#include "bench/prefill/setup.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/model_loader.h"
#include "platform/status_macros.h"

namespace dsa::prefill_bench {
namespace {

using model::deepseek_v32::AttentionKernels;
using model::deepseek_v32::LayerPlanner;
using model::deepseek_v32::TensorParallelModel;

// Progress lines: each on its own line, or on a terminal one line rewritten
// in place, where the steps within a round are counted too.
class Progress {
 public:
  Progress(std::ostream& out, bool tty) : out_(out), tty_(tty) {}
  void Line(const std::string& line) {
    if (tty_) {
      out_ << "\r\033[K" << line << std::flush;
    } else {
      out_ << line << "\n" << std::flush;
    }
  }
  void Step(const std::string& line) {
    if (tty_) out_ << "\r\033[K" << line << std::flush;
  }
  void Clear() {
    if (tty_) out_ << "\r\033[K" << std::flush;
  }

 private:
  std::ostream& out_;
  const bool tty_;
};

struct ArmModel {
  const ArmSpec* spec;
  std::unique_ptr<TensorParallelModel> model;
};

// One model per arm, the same weights, on the platform's kernels.
absl::StatusOr<std::vector<ArmModel>> BuildArms(
    const Flags& flags, const BenchSetup& setup,
    const platform::Registry& registry, Progress& progress) {
  const ResolvedPlatform& platform = setup.platform;
  const model::deepseek_v32::ModelConfig& config = setup.config;
  DSA_ASSIGN_OR_RETURN(AttentionKernels kernels,
                       AttentionKernels::Load(registry, platform.exec->id()));
  std::vector<ArmModel> arms;
  for (const ArmSpec* spec : flags.arms) {
    model::deepseek_v32::EngineConfig engine;
    engine.num_speculative_tokens = flags.spec_tokens;
    DSA_ASSIGN_OR_RETURN(
        LayerPlanner planner,
        LayerPlanner::Create(config, ArmCapabilities(*spec, platform.caps),
                             engine));
    // A large preset takes a while to build (every layer's weights drawn,
    // caches cleared): say so, as the rounds do.
    progress.Line(absl::StrCat(
        "[setup] building the ", spec->name, " arm: ", config.name(), ", ",
        config.num_layers(), " layers on ", platform.info.name));
    absl::StatusOr<std::unique_ptr<TensorParallelModel>> model =
        TensorParallelModel::Create(
            planner, *platform.exec, kernels, ArmOptions(*spec, setup.options),
            setup.loaded->weight_source(), flags.seed, setup.ranks,
            model::deepseek_v32::TerminalLoadProgress(stderr));
    if (!model.ok()) {
      return absl::Status(
          model.status().code(),
          absl::StrCat("building ", config.name(), " for the ", spec->name,
                       " arm on ", platform.info.name, " (", setup.num_blocks,
                       " cache blocks of ", flags.block_size, " tokens, ",
                       flags.kv_cache_dtype, " latent, per layer, ",
                       setup.weights, " weights): ", model.status().message()));
    }
    arms.push_back({spec, std::move(*model)});
  }
  return arms;
}

// The arms' figures from their runs, compared with the reference arm's.
void Summarise(const std::vector<std::vector<RunFigures>>& runs,
               const std::vector<uint64_t>& cache_hash, int indexer_layers,
               bool on_gpu, WorkloadResult& wr) {
  const auto reference = std::find_if(
      wr.arms.begin(), wr.arms.end(),
      [](const ArmResult& a) { return a.spec->role == ArmRole::kReference; });
  const size_t ref = reference - wr.arms.begin();
  const bool have_reference = ref < wr.arms.size() && !runs[ref].empty();
  for (size_t a = 0; a < wr.arms.size(); ++a) {
    ArmResult& ar = wr.arms[a];
    const std::vector<RunFigures>& rf = runs[a];
    if (rf.empty()) continue;
    ar.ran = true;
    for (const RunFigures& f : rf) {
      ar.ttft_ms.push_back(f.median_ttft_ms);
      ar.ttft_cpu_ms.push_back(f.median_ttft_cpu_ms);
    }
    ar.median_ttft_ms = Median(ar.ttft_ms);
    ar.median_ttft_cpu_ms = Median(ar.ttft_cpu_ms);
    ar.indexer_scored = rf.front().scored;
    ar.indexer_total = int64_t{indexer_layers} * wr.steps;
    ar.launches_per_step =
        static_cast<double>(rf.front().launches) / std::max(1, wr.steps);
    ar.all_launches_per_step =
        static_cast<double>(rf.front().all_launches) / std::max(1, wr.steps);
    ar.graph_launches_per_step =
        static_cast<double>(rf.front().graph_launches) / std::max(1, wr.steps);
    ar.steps = wr.steps;
    if (on_gpu) {
      // Every step of every run.
      auto median_of = [&rf](std::vector<double> RunFigures::*steps) {
        std::vector<double> all;
        for (const RunFigures& f : rf) {
          all.insert(all.end(), (f.*steps).begin(), (f.*steps).end());
        }
        return Median(all);
      };
      ar.host_issue_ms = median_of(&RunFigures::host_issue_ms);
      ar.device_tail_ms = median_of(&RunFigures::device_tail_ms);
      ar.prepare_ms = median_of(&RunFigures::prepare_ms);
      ar.read_back_ms = median_of(&RunFigures::read_back_ms);
    }
    for (const RunFigures& f : rf) {
      ar.deterministic &= f.output_hash == rf.front().output_hash &&
                          f.scored == rf.front().scored;
    }
    if (have_reference) {
      bool equal = ar.deterministic;
      for (const RunFigures& f : runs[ref]) {
        equal &= f.output_hash == rf.front().output_hash;
      }
      ar.outputs_equal = equal;
      // An arm without an indexer writes no indexer keys to compare.
      if (!ar.spec->no_indexer)
        ar.caches_equal = cache_hash[a] == cache_hash[ref];
    }
  }
  auto ran = [&wr](ArmRole role) -> const ArmResult* {
    for (const ArmResult& ar : wr.arms) {
      if (ar.spec->role == role && ar.ran) return &ar;
    }
    return nullptr;
  };
  const ArmResult* main = ran(ArmRole::kReference);
  const ArmResult* candidate = ran(ArmRole::kCandidate);
  const ArmResult* bound = ran(ArmRole::kBound);
  if (main != nullptr && candidate != nullptr) {
    wr.change = CompareRuns(candidate->ttft_ms, main->ttft_ms);
    wr.change_cpu = CompareRuns(candidate->ttft_cpu_ms, main->ttft_cpu_ms);
    wr.outputs_equal = candidate->outputs_equal.value_or(false) &&
                       candidate->caches_equal.value_or(false);
  }
  if (main != nullptr && bound != nullptr) {
    wr.bound_change_pct = CompareRuns(bound->ttft_ms, main->ttft_ms).pct;
    wr.bound_change_cpu_pct =
        CompareRuns(bound->ttft_cpu_ms, main->ttft_cpu_ms).pct;
  }
}

// Runs and reports every workload, counting rounds (one run of every arm of
// a workload) across all of them.
class WorkloadRunner {
 public:
  WorkloadRunner(const Flags& flags, const BenchSetup& setup,
                 std::vector<ArmModel>& arms, const std::vector<float>& input,
                 Progress& progress)
      : flags_(flags),
        setup_(setup),
        arms_(arms),
        input_(input),
        progress_(progress),
        total_rounds_(static_cast<int>(setup.workloads.size()) * flags.runs) {}

  absl::StatusOr<WorkloadResult> Run(size_t index) {
    const Workload& w = setup_.workloads[index];
    const Schedule& schedule = setup_.schedules[index];
    WorkloadResult wr;
    wr.workload = w;
    wr.steps = static_cast<int>(schedule.steps.size());
    std::vector<bool> runnable(arms_.size(), true);
    for (size_t a = 0; a < arms_.size(); ++a) {
      ArmResult ar;
      ar.spec = arms_[a].spec;
      ar.not_run_reason = setup_.not_run[index][a];
      runnable[a] = ar.not_run_reason.empty();
      wr.arms.push_back(std::move(ar));
    }
    // Warm-up: each arm runs the workload's first step once, unmeasured.
    for (size_t a = 0; a < arms_.size(); ++a) {
      if (!runnable[a]) continue;
      ScheduleRun warm_up(*arms_[a].model, schedule, input_, request_id_);
      DSA_RETURN_IF_ERROR(warm_up.Step(0));
      DSA_RETURN_IF_ERROR(warm_up.Finish().status());
    }
    request_id_ += w.prompts;
    std::vector<std::vector<RunFigures>> runs(arms_.size());
    for (int round = 0; round < flags_.runs; ++round) {
      DSA_RETURN_IF_ERROR(Round(w, schedule, round, runnable, runs));
    }
    // Caches after the last run, compared with the reference's.
    std::vector<uint64_t> cache_hash(arms_.size(), kHashSeed);
    for (size_t a = 0; a < arms_.size(); ++a) {
      if (!runnable[a]) continue;
      DSA_ASSIGN_OR_RETURN(cache_hash[a], CacheHash(arms_[a].model->rank(0)));
    }
    // --op_times: the first step once more per arm, every op timed.
    if (flags_.op_times) {
      const model::deepseek_v32::OpClock clock =
          flags_.op_clock == "host" ? model::deepseek_v32::OpClock::kHost
                                    : model::deepseek_v32::OpClock::kDevice;
      for (size_t a = 0; a < arms_.size(); ++a) {
        if (!runnable[a]) continue;
        DSA_ASSIGN_OR_RETURN(const model::deepseek_v32::StepOutput profiled,
                             ProfileFirstStep(*arms_[a].model, schedule, input_,
                                              request_id_, clock));
        wr.arms[a].op_times = OpProfile{profiled.op_ms, profiled.op_calls,
                                        profiled.host_issue_ms};
      }
      request_id_ += w.prompts;
    }
    Summarise(runs, cache_hash, setup_.config.num_indexer_layers(),
              !setup_.platform.info.executes_on_cpu(), wr);
    // Tensor-parallel ranks: every rank's outputs equal to rank 0's so far.
    for (size_t a = 0; a < arms_.size(); ++a) {
      const TensorParallelModel& m = *arms_[a].model;
      if (wr.arms[a].ran && m.num_ranks_run() > 1) {
        wr.arms[a].ranks_agree = m.ranks_agree();
      }
    }
    return wr;
  }

  int done_rounds() const { return done_rounds_; }

 private:
  // ABBA, step by step: the arms take turns at every step, in reverse order
  // every other step and every other round, so that a change in the
  // machine's load falls on every arm alike.
  absl::Status Round(const Workload& w, const Schedule& schedule, int round,
                     const std::vector<bool>& runnable,
                     std::vector<std::vector<RunFigures>>& runs) {
    const size_t n = arms_.size();
    std::vector<std::unique_ptr<ScheduleRun>> active(n);
    for (size_t a = 0; a < n; ++a) {
      if (runnable[a]) {
        active[a] = std::make_unique<ScheduleRun>(*arms_[a].model, schedule,
                                                  input_, request_id_);
      }
    }
    request_id_ += w.prompts;
    const int num_steps = static_cast<int>(schedule.steps.size());
    for (int k = 0; k < num_steps; ++k) {
      const bool forward = (round + k) % 2 == 0;
      for (size_t i = 0; i < n; ++i) {
        const size_t a = forward ? i : n - 1 - i;
        if (active[a] == nullptr) continue;
        absl::Status stepped = active[a]->Step(k);
        if (!stepped.ok()) {
          return absl::Status(
              stepped.code(),
              absl::StrCat(w.name, ", arm ", arms_[a].spec->name, ", run ",
                           round + 1, ", step ", k + 1, ": ",
                           stepped.message()));
        }
      }
      progress_.Step(absl::StrFormat("[%d/%d] %s run %d/%d: step %d/%d",
                                     done_rounds_ + 1, total_rounds_, w.name,
                                     round + 1, flags_.runs, k + 1, num_steps));
    }
    std::vector<std::string> medians;
    for (size_t a = 0; a < n; ++a) {
      if (active[a] == nullptr) continue;
      DSA_ASSIGN_OR_RETURN(RunFigures figures, active[a]->Finish());
      medians.push_back(absl::StrCat(arms_[a].spec->name, " ",
                                     FormatMs(figures.median_ttft_ms)));
      runs[a].push_back(std::move(figures));
    }
    progress_.Line(absl::StrFormat("[%d/%d] %s run %d/%d: median TTFT %s ms",
                                   ++done_rounds_, total_rounds_, w.name,
                                   round + 1, flags_.runs,
                                   absl::StrJoin(medians, ", ")));
    return absl::OkStatus();
  }

  const Flags& flags_;
  const BenchSetup& setup_;
  std::vector<ArmModel>& arms_;
  const std::vector<float>& input_;
  Progress& progress_;
  const int total_rounds_;
  int done_rounds_ = 0;
  int64_t request_id_ = 0;
};

}  // namespace

absl::StatusOr<BenchResult> RunBench(const Flags& flags,
                                     const platform::Registry& registry,
                                     std::ostream& progress_out,
                                     bool progress_tty) {
  DSA_ASSIGN_OR_RETURN(const BenchSetup setup, MakeSetup(flags, registry));
  const model::deepseek_v32::ModelConfig& config = setup.config;
  BenchResult result;
  result.platform = setup.platform.info;
  result.model = config.name();
  result.model_source = setup.loaded->description();
  result.main_layers = config.num_main_layers();
  result.mtp_layers = config.num_mtp_layers();
  result.indexer_layers = config.num_indexer_layers();
  result.index_topk = config.index_topk();
  result.spec_tokens = flags.spec_tokens;
  result.runs = flags.runs;
  result.max_num_batched_tokens = setup.step_tokens;
  result.block_size = flags.block_size;
  result.num_blocks = setup.num_blocks;
  result.kv_cache_dtype = flags.kv_cache_dtype;
  result.tp = flags.tp;
  result.indexer_tp = flags.indexer_tp;
  result.ranks_run =
      setup.ranks == model::deepseek_v32::RankSet::kAllRanks ? flags.tp : 1;
  result.tp_note = setup.tp_note;
  result.weights = setup.weights;
  if (flags.op_times) result.op_clock = flags.op_clock;
  result.step_graphs = flags.step_graphs;
  result.gpu_timing_note =
      setup.platform.info.executes_on_cpu()
          ? "n/a: the step executes on the CPU, where every op runs "
            "synchronously on the host; there is no separate host issue time "
            "or device tail"
          : "per step, the median over every step of every run: host issue "
            "is the wall time from a step's first launch to the return of its "
            "last one, device tail the time the device still needed after "
            "that (the uploads before and the read-backs after are in the "
            "JSON's prepare_ms and read_back_ms)";

  Progress progress(progress_out, progress_tty);
  DSA_ASSIGN_OR_RETURN(std::vector<ArmModel> arms,
                       BuildArms(flags, setup, registry, progress));
  // Inputs: one fixed random matrix; a step reads its first rows.
  const int64_t hidden = config.proto().hidden_size();
  std::vector<float> input(static_cast<size_t>(setup.step_tokens * hidden));
  std::mt19937_64 rng(flags.seed ^ 0x9e3779b97f4a7c15ull);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : input) v = dist(rng);
  // Page-locked, as a serving engine keeps the host buffers it uploads each
  // step from: a step's upload of its hidden states then runs at the link's
  // rate, not through the driver's pageable staging (4 ms of a 1K prompt's
  // 25 MB on the H200). Pageable where the platform cannot lock it.
  DSA_ASSIGN_OR_RETURN(const platform::RegisteredHostMemory pinned_input,
                       platform::RegisteredHostMemory::Register(
                           setup.platform.exec->runtime(), input.data(),
                           input.size() * sizeof(float)));
  (void)pinned_input;

  WorkloadRunner runner(flags, setup, arms, input, progress);
  for (size_t i = 0; i < setup.workloads.size(); ++i) {
    DSA_ASSIGN_OR_RETURN(WorkloadResult wr, runner.Run(i));
    result.workloads.push_back(std::move(wr));
  }
  if (runner.done_rounds() > 0) progress.Clear();
  return result;
}

}  // namespace dsa::prefill_bench
