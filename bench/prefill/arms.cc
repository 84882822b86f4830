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
  absl::StatusOr<ForwardPlan> plan =
      planner.PlanForward({}, {{0, workload.prompt_len}});
  if (!plan.ok()) return std::string(plan.status().message());
  for (const LayerPlan& layer : plan->layers) {
    if (layer.prefill_branch != PrefillBranch::kDenseMha) {
      return absl::StrCat("prompts of ", workload.prompt_len,
                          " tokens > index_topk ",
                          planner.config().index_topk(),
                          " take the sparse path, which reads the indexer's "
                          "top-k");
    }
  }
  return "";
}

}  // namespace dsa::prefill_bench
