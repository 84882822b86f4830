// The N tensor-parallel ranks of one model as one stack (tensor_parallel.h):
// a DeepseekV32Model per rank, rank r on device r, the ranks in one
// collective group of the platform, each step run by every rank at once on
// a thread of its own (one process, a thread per GPU). Every rank takes the
// same step; rank 0's output is the stack's, and every rank's hidden states
// are compared with rank 0's (ranks_agree).
//
// With fewer devices than ranks a caller can run rank 0's share alone
// (RankSet::kRankZeroAlone): one model of num_attention_heads / N heads and
// no collectives, for one rank's time on one device; its outputs are not the
// model's.
//
// N = 1 is the plain model, called on the caller's thread.
#ifndef DSA_MODEL_DEEPSEEK_V32_TENSOR_PARALLEL_MODEL_H_
#define DSA_MODEL_DEEPSEEK_V32_TENSOR_PARALLEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/tensor_parallel.h"

namespace dsa::model::deepseek_v32 {

enum class RankSet {
  kAllRanks,       // every rank, rank r on device r, in a collective group
  kRankZeroAlone,  // rank 0 on device `options.device`, no collectives
};

class TensorParallelModel {
 public:
  // `options.tensor_parallel` gives N and the indexer's split (its rank and
  // group are set here per rank). The weights come from `weights` when not
  // null (a source of the whole model), else from `seed`.
  static absl::StatusOr<std::unique_ptr<TensorParallelModel>> Create(
      const LayerPlanner& planner, platform::Platform platform,
      AttentionKernels kernels, RuntimeOptions options,
      const WeightSource* weights, uint64_t seed, RankSet ranks,
      const LoadProgress& progress = {});
  ~TensorParallelModel();
  TensorParallelModel(const TensorParallelModel&) = delete;
  TensorParallelModel& operator=(const TensorParallelModel&) = delete;

  int size() const { return size_; }  // N
  int num_ranks_run() const { return static_cast<int>(ranks_.size()); }
  bool all_ranks() const { return group_ != nullptr || size_ == 1; }
  // Rank 0's planner (the rank's configuration, planned as the whole).
  const LayerPlanner& planner() const { return ranks_[0]->planner(); }
  DeepseekV32Model& rank(int r) { return *ranks_[r]; }

  // DeepseekV32Model::Step on every rank; rank 0's output. The first
  // failure of a rank that did not only see its group aborted.
  absl::StatusOr<StepOutput> Step(const ForwardContext& forward,
                                  absl::Span<const StepRequest> requests,
                                  absl::Span<const float> hidden,
                                  const StepOptions& step_options = {});
  absl::StatusOr<StepOutput> Step(const ForwardContext& forward,
                                  absl::Span<const StepRequest> requests,
                                  absl::Span<const float> hidden,
                                  absl::Span<const float> mtp_embeddings,
                                  const StepOptions& step_options);
  absl::StatusOr<ForwardPlan> ProfileRun(const ForwardContext& forward);
  absl::Status Release(int64_t request_id);

  // Whether every rank's hidden states (main and MTP) equalled rank 0's to
  // the bit in every step so far that read them back.
  bool ranks_agree() const { return ranks_agree_; }
  // Steps whose ranks' hidden states were compared.
  int64_t steps_compared() const { return steps_compared_; }

 private:
  TensorParallelModel(platform::Platform platform, int size)
      : platform_(std::move(platform)), size_(size) {}

  platform::Platform platform_;
  int size_ = 1;
  void* group_ = nullptr;
  std::vector<std::unique_ptr<DeepseekV32Model>> ranks_;
  bool ranks_agree_ = true;
  int64_t steps_compared_ = 0;
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_TENSOR_PARALLEL_MODEL_H_
