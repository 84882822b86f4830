#include "model/deepseek_v32/tensor_parallel_model.h"

#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

// Runs f(r) for every rank, rank 0 on the calling thread and every other on
// a thread of its own, and waits for all.
template <typename F>
void OnEveryRank(int n, const F& f) {
  std::vector<std::thread> threads;
  threads.reserve(n > 0 ? n - 1 : 0);
  for (int r = 1; r < n; ++r) threads.emplace_back([&f, r] { f(r); });
  if (n > 0) f(0);
  for (std::thread& t : threads) t.join();
}

// `status` with `where` in front of its message.
absl::Status Annotate(const absl::Status& status, absl::string_view where) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(where, ": ", status.message()));
}

// The error to report of the ranks': the first that is not only the echo of
// another rank's abort (a collective of an aborted group: "... group was
// aborted ...").
absl::Status FirstCause(const std::vector<absl::Status>& statuses) {
  const absl::Status* first = nullptr;
  for (const absl::Status& s : statuses) {
    if (s.ok()) continue;
    if (first == nullptr) first = &s;
    if (!absl::StrContains(s.message(), "was aborted")) return s;
  }
  return first == nullptr ? absl::OkStatus() : *first;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorParallelModel>>
TensorParallelModel::Create(const LayerPlanner& planner,
                            platform::Platform platform,
                            AttentionKernels kernels, RuntimeOptions options,
                            const WeightSource* weights, uint64_t seed,
                            RankSet ranks, const LoadProgress& progress) {
  const int n = options.tensor_parallel.size;
  DSA_RETURN_IF_ERROR(ValidateTensorParallel(
      planner.config(), {n, 0, options.tensor_parallel.indexer}));
  std::unique_ptr<TensorParallelModel> model(
      new TensorParallelModel(platform, n));
  const int run = ranks == RankSet::kAllRanks ? n : 1;
  const platform::DeviceRuntime rt = platform.runtime();
  if (run > 1) {
    std::vector<int32_t> ordinals;
    // The CPU platform's ranks are threads on its one device, the host.
    for (int r = 0; r < run; ++r) {
      ordinals.push_back(platform.kind() == platform::PlatformKind::kCpu ? 0
                                                                         : r);
    }
    DSA_ASSIGN_OR_RETURN(model->group_, rt.CreateCollectiveGroup(ordinals));
  }
  model->ranks_.resize(run);
  std::vector<absl::Status> statuses(run);
  OnEveryRank(run, [&](int r) {
    RuntimeOptions o = options;
    o.tensor_parallel.rank = r;
    o.tensor_parallel.group = model->group_;
    if (run > 1 && platform.kind() != platform::PlatformKind::kCpu) {
      o.device = r;
    }
    // One rank reports the load's progress (every rank loads as much).
    absl::StatusOr<std::unique_ptr<DeepseekV32Model>> m =
        DeepseekV32Model::Create(planner, platform, kernels, o, weights, seed,
                                 r == 0 ? progress : LoadProgress());
    if (m.ok()) {
      model->ranks_[r] = std::move(*m);
    } else {
      statuses[r] = Annotate(m.status(), absl::StrCat("rank ", r, " of ", n));
    }
  });
  DSA_RETURN_IF_ERROR(FirstCause(statuses));
  return model;
}

TensorParallelModel::~TensorParallelModel() {
  // Each rank's buffers are freed on its device: destroyed on threads bound
  // there (a model binds its device first), then the group.
  OnEveryRank(static_cast<int>(ranks_.size()),
              [&](int r) { ranks_[r].reset(); });
  if (group_ != nullptr) {
    platform_.runtime().DestroyCollectiveGroup(group_).IgnoreError();
  }
}

absl::StatusOr<StepOutput> TensorParallelModel::Step(
    const ForwardContext& forward, absl::Span<const StepRequest> requests,
    absl::Span<const float> hidden, const StepOptions& step_options) {
  return Step(forward, requests, hidden, {}, step_options);
}

absl::StatusOr<StepOutput> TensorParallelModel::Step(
    const ForwardContext& forward, absl::Span<const StepRequest> requests,
    absl::Span<const float> hidden, absl::Span<const float> mtp_embeddings,
    const StepOptions& step_options) {
  const int n = num_ranks_run();
  if (n == 1) {
    return ranks_[0]->Step(forward, requests, hidden, mtp_embeddings,
                           step_options);
  }
  std::vector<absl::StatusOr<StepOutput>> outputs(
      n, absl::StatusOr<StepOutput>(absl::UnknownError("not run")));
  OnEveryRank(n, [&](int r) {
    outputs[r] = ranks_[r]->Step(forward, requests, hidden, mtp_embeddings,
                                 step_options);
  });
  std::vector<absl::Status> statuses;
  for (int r = 0; r < n; ++r) {
    statuses.push_back(outputs[r].ok() ? absl::OkStatus()
                                       : Annotate(outputs[r].status(),
                                                  absl::StrCat("rank ", r)));
  }
  DSA_RETURN_IF_ERROR(FirstCause(statuses));
  if (step_options.read_hidden) {
    ++steps_compared_;
    for (int r = 1; r < n; ++r) {
      ranks_agree_ = ranks_agree_ && outputs[r]->hidden == outputs[0]->hidden &&
                     outputs[r]->mtp_hidden == outputs[0]->mtp_hidden;
    }
  }
  return std::move(outputs[0]);
}

absl::StatusOr<ForwardPlan> TensorParallelModel::ProfileRun(
    const ForwardContext& forward) {
  const int n = num_ranks_run();
  std::vector<absl::StatusOr<ForwardPlan>> plans(
      n, absl::StatusOr<ForwardPlan>(absl::UnknownError("not run")));
  OnEveryRank(n, [&](int r) { plans[r] = ranks_[r]->ProfileRun(forward); });
  std::vector<absl::Status> statuses;
  for (int r = 0; r < n; ++r) {
    statuses.push_back(
        plans[r].ok() ? absl::OkStatus()
                      : Annotate(plans[r].status(), absl::StrCat("rank ", r)));
  }
  DSA_RETURN_IF_ERROR(FirstCause(statuses));
  return std::move(plans[0]);
}

absl::Status TensorParallelModel::Release(int64_t request_id) {
  absl::Status status;
  for (int r = 0; r < num_ranks_run(); ++r) {
    absl::Status released = ranks_[r]->Release(request_id);
    if (!released.ok() && status.ok()) status = released;
  }
  return status;
}

}  // namespace dsa::model::deepseek_v32
