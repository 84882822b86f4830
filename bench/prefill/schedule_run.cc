// One arm's run of a schedule, step by step (schedule_run.h).
#include "bench/prefill/schedule_run.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "platform/status_macros.h"

namespace dsa::prefill_bench {
namespace {

using model::deepseek_v32::OpClock;
using model::deepseek_v32::StepOptions;
using model::deepseek_v32::StepOutput;
using model::deepseek_v32::StepRequest;
using model::deepseek_v32::TensorParallelModel;

// CPU time of every thread of this process: the host work a step costs,
// whatever share of the cores the machine's other load leaves it.
double ProcessCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

std::vector<StepRequest> Requests(const ScheduledStep& step,
                                  int64_t request_id_base) {
  std::vector<StepRequest> requests;
  for (const ScheduledPrompt& p : step.prompts) {
    requests.push_back({request_id_base + p.prompt, p.context, p.new_tokens});
  }
  return requests;
}

}  // namespace

ScheduleRun::ScheduleRun(TensorParallelModel& model, const Schedule& schedule,
                         const std::vector<float>& input,
                         int64_t request_id_base)
    : model_(model),
      schedule_(schedule),
      input_(input),
      id_base_(request_id_base),
      hidden_(model.planner().config().proto().hidden_size()),
      boundary_ms_(schedule.steps.size() + 1, 0.0),
      boundary_cpu_ms_(schedule.steps.size() + 1, 0.0) {}

ScheduleRun::~ScheduleRun() { (void)ReleaseStarted(); }

absl::Status ScheduleRun::Step(int k) {
  using Clock = std::chrono::steady_clock;
  if (k != steps_done_) {
    return absl::InternalError(absl::StrCat("step ", k, " out of order"));
  }
  const ScheduledStep& step = schedule_.steps[k];
  const std::vector<StepRequest> requests = Requests(step, id_base_);
  const absl::Span<const float> x(input_.data(), step.tokens * hidden_);
  const double cpu0 = ProcessCpuMs();
  const Clock::time_point t0 = Clock::now();
  absl::StatusOr<StepOutput> out = model_.Step({}, requests, x);
  absl::Status released;
  if (out.ok()) {
    for (const ScheduledPrompt& p : step.prompts) started_.insert(p.prompt);
    for (const ScheduledPrompt& p : step.prompts) {
      if (!p.finishes) continue;
      absl::Status r = model_.Release(id_base_ + p.prompt);
      started_.erase(p.prompt);
      if (!r.ok() && released.ok()) released = r;
    }
  }
  const Clock::time_point t1 = Clock::now();
  const double cpu1 = ProcessCpuMs();
  DSA_RETURN_IF_ERROR(out.status());
  DSA_RETURN_IF_ERROR(released);
  const double read_back_ms = out->read_back_ms;
  clock_ms_ +=
      std::chrono::duration<double, std::milli>(t1 - t0).count() - read_back_ms;
  boundary_ms_[k + 1] = clock_ms_;
  cpu_clock_ms_ += std::max(0.0, cpu1 - cpu0 - read_back_ms);
  boundary_cpu_ms_[k + 1] = cpu_clock_ms_;
  ++steps_done_;
  figures_.scored += out->op_calls.indexer_topk;
  figures_.launches += out->op_calls.attention_ops();
  figures_.all_launches += out->op_calls.total();
  figures_.graph_launches += out->graph_launches;
  figures_.host_issue_ms.push_back(out->host_issue_ms);
  figures_.device_tail_ms.push_back(out->device_tail_ms);
  figures_.prepare_ms.push_back(out->prepare_ms);
  figures_.read_back_ms.push_back(out->read_back_ms);
  figures_.output_hash =
      HashBytes(out->hidden.data(), out->hidden.size() * sizeof(float),
                figures_.output_hash);
  figures_.output_hash =
      HashBytes(out->mtp_hidden.data(), out->mtp_hidden.size() * sizeof(float),
                figures_.output_hash);
  return absl::OkStatus();
}

absl::StatusOr<RunFigures> ScheduleRun::Finish() {
  DSA_RETURN_IF_ERROR(ReleaseStarted());
  std::vector<double> ttft, ttft_cpu;
  for (size_t i = 0; i < schedule_.finish_step.size(); ++i) {
    const int end = schedule_.finish_step[i] + 1;
    const int begin = schedule_.arrival_boundary[i];
    if (end > steps_done_) continue;
    ttft.push_back(boundary_ms_[end] - boundary_ms_[begin]);
    ttft_cpu.push_back(boundary_cpu_ms_[end] - boundary_cpu_ms_[begin]);
  }
  RunFigures figures = figures_;
  figures.median_ttft_ms = Median(ttft);
  figures.median_ttft_cpu_ms = Median(ttft_cpu);
  return figures;
}

absl::Status ScheduleRun::ReleaseStarted() {
  absl::Status status;
  for (int prompt : started_) {
    absl::Status r = model_.Release(id_base_ + prompt);
    if (!r.ok() && status.ok()) status = r;
  }
  started_.clear();
  return status;
}

absl::StatusOr<StepOutput> ProfileFirstStep(TensorParallelModel& model,
                                            const Schedule& schedule,
                                            const std::vector<float>& input,
                                            int64_t request_id_base,
                                            OpClock clock) {
  const ScheduledStep& step = schedule.steps.front();
  const int64_t hidden = model.planner().config().proto().hidden_size();
  StepOptions options;
  options.time_ops = true;
  options.op_clock = clock;
  options.read_hidden = false;
  absl::StatusOr<StepOutput> out = model.Step(
      {}, Requests(step, request_id_base),
      absl::MakeConstSpan(input.data(), step.tokens * hidden), options);
  absl::Status released;
  for (const ScheduledPrompt& p : step.prompts) {
    absl::Status r = model.Release(request_id_base + p.prompt);
    if (!r.ok() && released.ok() && out.ok()) released = r;
  }
  DSA_RETURN_IF_ERROR(out.status());
  DSA_RETURN_IF_ERROR(released);
  return out;
}

}  // namespace dsa::prefill_bench
