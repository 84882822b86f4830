// The seed's four serving workloads at a preset's scale, and how a serving
// engine steps through one: first come first served, chunked prefill, at
// most max_num_batched_tokens a step.
//
//   1k_c1, 1900_c1  prompts of 1024 / 1900 tokens, one at a time
//   1k_c32          32 concurrent prompts of 1024 tokens
//   8k_c1           prompts of 8192 tokens, one at a time (the sparse path)
//
// The seed's lengths are at index_topk 2048; other presets scale them, which
// keeps their relation to index_topk (the tiny presets' 64: 32, 59, 32, 256).
// Every prompt asks for one output token, so its TTFT is its prefill.
#ifndef DSA_BENCH_PREFILL_WORKLOADS_H_
#define DSA_BENCH_PREFILL_WORKLOADS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dsa::prefill_bench {

// The seed's lengths and step size are at this index_topk.
inline constexpr int64_t kSeedIndexTopk = 2048;
inline constexpr int64_t kSeedMaxNumBatchedTokens = 8192;

// `seed_len` scaled from the seed's index_topk to `index_topk`, at least 1.
int64_t ScaleToTopk(int64_t seed_len, int64_t index_topk);

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
// The most steps a schedule holds. Each is a forward of the whole model, so
// a run of more would not end in a day; the bound also keeps a hostile size
// (index_topk 2^30 in steps of one token: 2^29 steps) from growing a
// schedule until the host's memory runs out.
inline constexpr int64_t kMaxScheduledSteps = int64_t{1} << 20;
// InvalidArgument when a count or size is not positive; ResourceExhausted,
// before anything is scheduled where the token count already says so, when
// the workload takes more than kMaxScheduledSteps steps.
absl::StatusOr<Schedule> MakeSchedule(const Workload& workload,
                                      int64_t max_num_batched_tokens,
                                      int block_size);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_WORKLOADS_H_
