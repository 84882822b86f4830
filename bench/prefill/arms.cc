// The arm records' lookups and what each record changes (arms.h).
#include "bench/prefill/arms.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dsa::prefill_bench {

using model::deepseek_v32::ForwardPlan;
using model::deepseek_v32::LayerPlan;
using model::deepseek_v32::LayerPlanner;
using model::deepseek_v32::PrefillBranch;
using model::deepseek_v32::RuntimeOptions;

const ArmSpec* FindArm(absl::string_view name) {
  for (const ArmSpec& arm : kArms) {
    if (name == arm.name) return &arm;
  }
  return nullptr;
}

std::vector<const ArmSpec*> AllArms() {
  std::vector<const ArmSpec*> arms;
  for (const ArmSpec& arm : kArms) arms.push_back(&arm);
  return arms;
}

std::string ArmNames() {
  return absl::StrJoin(kArms, ", ", [](std::string* out, const ArmSpec& arm) {
    out->append(arm.name);
  });
}

platform::PlatformCapabilities ArmCapabilities(
    const ArmSpec& arm, platform::PlatformCapabilities caps) {
  if (!arm.cuda_alike) caps.is_cuda_alike = false;
  return caps;
}

RuntimeOptions ArmOptions(const ArmSpec& arm, RuntimeOptions options) {
  options.no_indexer = arm.no_indexer;
  return options;
}

std::string NotRunReason(const ArmSpec& arm, const LayerPlanner& planner,
                         const Workload& workload) {
  if (!arm.no_indexer) return "";
  const int64_t len = workload.prompt_len;
  absl::StatusOr<ForwardPlan> plan = planner.PlanForward({}, {{0, len}});
  if (!plan.ok()) return std::string(plan.status().message());
  const model::deepseek_v32::AttentionMetadata& mla = plan->metadata->mla;
  // What the MLA attention makes of the prompt, as the plan saw it.
  if (mla.num_decodes > 0) {
    return absl::StrCat(
        "prompts of ", len, len == 1 ? " token are" : " tokens are",
        " decodes to the MLA attention (a query of at most ",
        mla.decode_threshold, " token), which reads the indexer's top-k");
  }
  for (const LayerPlan& layer : plan->layers) {
    if (layer.prefill_branch == PrefillBranch::kDenseMha) continue;
    const int64_t topk = planner.config().index_topk();
    if (len > topk) {
      return absl::StrCat("prompts of ", len, " tokens > index_topk ", topk,
                          " take the sparse path, which reads the indexer's "
                          "top-k");
    }
    return absl::StrCat("prompts of ", len, " tokens take the sparse path (",
                        planner.capabilities().sparse_mla_dense_mha_prefill
                            ? "the engine forces MQA"
                            : "the platform has no dense-MHA prefill",
                        "), which reads the indexer's top-k");
  }
  return "";
}

}  // namespace dsa::prefill_bench
