// The seed's workload table and the chunked-prefill scheduler (workloads.h).
#include "bench/prefill/workloads.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/checked_size.h"

namespace dsa::prefill_bench {
namespace {

struct SeedWorkload {
  const char* name;
  int64_t prompt_len;
  int prompts;  // the seed's --num-prompts, except 1k_c32 (see the issue)
  // On the CPU: fewer sequential prompts, so that the whole default run
  // takes well under a minute on 2 cores; a run's median is still over
  // several prompts.
  int cpu_prompts;
  int concurrency;
};
constexpr SeedWorkload kSeedWorkloads[] = {
    {"1k_c1", 1024, 40, 16, 1},
    {"1900_c1", 1900, 40, 16, 1},
    {"1k_c32", 1024, 32, 32, 32},
    {"8k_c1", 8192, 16, 3, 1},
};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::Status TooManySteps(const Workload& w, int64_t max_num_batched_tokens) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "workload ", w.name, ": ", w.prompts,
      w.prompts == 1 ? " prompt of " : " prompts of ", w.prompt_len,
      w.prompt_len == 1 ? " token" : " tokens", " in steps of at most ",
      max_num_batched_tokens,
      max_num_batched_tokens == 1 ? " token" : " tokens", " take more than ",
      kMaxScheduledSteps,
      " steps: raise --max_num_batched_tokens, or use fewer --prompts or a "
      "model with a smaller index_topk"));
}

}  // namespace

int64_t ScaleToTopk(int64_t seed_len, int64_t index_topk) {
  return std::max<int64_t>(1, std::llround(static_cast<double>(seed_len) *
                                           index_topk / kSeedIndexTopk));
}

std::vector<std::string> WorkloadNames() {
  std::vector<std::string> names;
  for (const SeedWorkload& w : kSeedWorkloads) names.push_back(w.name);
  return names;
}

absl::StatusOr<std::vector<Workload>> MakeWorkloads(
    const std::vector<std::string>& names, int64_t index_topk, int prompts,
    bool on_cpu) {
  std::vector<std::string> wanted = names.empty() ? WorkloadNames() : names;
  std::vector<Workload> out;
  for (const std::string& name : wanted) {
    const SeedWorkload* seed = nullptr;
    for (const SeedWorkload& w : kSeedWorkloads) {
      if (name == w.name) seed = &w;
    }
    if (seed == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("unknown workload \"", name, "\"; expected ",
                       absl::StrJoin(WorkloadNames(), ", ")));
    }
    Workload w;
    w.name = seed->name;
    w.seed_prompt_len = seed->prompt_len;
    w.prompt_len = ScaleToTopk(seed->prompt_len, index_topk);
    w.prompts = prompts > 0 ? prompts
                : on_cpu    ? seed->cpu_prompts
                            : seed->prompts;
    w.concurrency = std::min(seed->concurrency, w.prompts);
    out.push_back(w);
  }
  return out;
}

absl::StatusOr<Schedule> MakeSchedule(const Workload& workload,
                                      int64_t max_num_batched_tokens,
                                      int block_size) {
  if (workload.prompts < 1 || workload.prompt_len < 1 ||
      workload.concurrency < 1 || max_num_batched_tokens < 1 ||
      block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("workload ", workload.name,
                     ": prompts, length, concurrency, step "
                     "size and block size must be positive"));
  }
  // Every step takes at most max_num_batched_tokens tokens: the steps'
  // least number, before any is made.
  const CheckedSize tokens =
      CheckedSize(workload.prompts) * workload.prompt_len;
  if (!tokens.ok() ||
      CeilDiv(tokens.value(), max_num_batched_tokens) > kMaxScheduledSteps) {
    return TooManySteps(workload, max_num_batched_tokens);
  }
  Schedule s;
  const int n = workload.prompts;
  s.arrival_boundary.assign(n, 0);
  s.finish_step.assign(n, -1);
  std::vector<int64_t> done(n, 0);
  int arrived = std::min(workload.concurrency, n);
  int finished = 0;
  int next_unstarted = 0;      // prompts [0, next_unstarted) have started
  std::vector<int> in_flight;  // started, unfinished, in start order
  while (finished < n) {
    // A step that finishes none of its prompts is full, so at most `n`
    // steps more than the least number: the bound can still be passed.
    if (static_cast<int64_t>(s.steps.size()) == kMaxScheduledSteps) {
      return TooManySteps(workload, max_num_batched_tokens);
    }
    ScheduledStep step;
    int64_t budget = max_num_batched_tokens;
    // Unfinished prompts first, then new arrivals, first come first served.
    std::vector<int> order = in_flight;
    while (next_unstarted < arrived) order.push_back(next_unstarted++);
    std::vector<int> still_in_flight;
    for (int p : order) {
      const int64_t take = std::min(budget, workload.prompt_len - done[p]);
      if (take > 0) {
        ScheduledPrompt sp;
        sp.prompt = p;
        sp.context = done[p];
        sp.new_tokens = take;
        sp.finishes = done[p] + take == workload.prompt_len;
        step.prompts.push_back(sp);
        step.tokens += take;
        budget -= take;
        done[p] += take;
      }
      if (done[p] < workload.prompt_len) still_in_flight.push_back(p);
    }
    for (int p : order) step.resident_blocks += CeilDiv(done[p], block_size);
    s.peak_blocks = std::max(s.peak_blocks, step.resident_blocks);
    const int k = static_cast<int>(s.steps.size());
    for (const ScheduledPrompt& sp : step.prompts) {
      if (!sp.finishes) continue;
      s.finish_step[sp.prompt] = k;
      ++finished;
      // The client sends its next prompt when one finishes.
      if (arrived < n) s.arrival_boundary[arrived++] = k + 1;
    }
    in_flight = std::move(still_in_flight);
    s.steps.push_back(std::move(step));
  }
  return s;
}

}  // namespace dsa::prefill_bench
