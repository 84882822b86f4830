// The `plan` tool: shows, for a model preset, a platform and a batch, what
// every layer does in one forward -- whether its indexer scores, skips,
// shares an earlier layer's top-k or only reserves its workspace, and why;
// which prefill branch it takes; whether it writes indexer keys.
//
//   bazel run //model/deepseek_v32:plan -- --model=glm-5.1 --platform=rocm
//       --requests=0+1024
//
// The library does the work (argument parsing, planning, rendering) so tests
// drive it without a process; plan_main.cc only forwards argv. It needs no
// GPU: capabilities come from the registry for a named architecture, or the
// platform's default one when no device is present.
#ifndef DSA_MODEL_DEEPSEEK_V32_PLAN_TOOL_H_
#define DSA_MODEL_DEEPSEEK_V32_PLAN_TOOL_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/deepseek_v32/batch_metadata.h"
#include "model/deepseek_v32/forward_context.h"
#include "model/deepseek_v32/layer_plan.h"
#include "platform/registry.h"

namespace dsa::model::deepseek_v32 {

enum class PlanFormat { kTable, kJson };

struct PlanOptions {
  // A preset name, a textproto, a checkpoint directory or a config.json.
  std::string model;
  std::string platform;  // empty: the registry's active platform
  std::string arch;      // empty: device 0's, else the platform's default
  std::vector<Request> requests;
  EngineConfig engine;
  ForwardContext forward;
  bool profile_run = false;  // no attention metadata
  PlanFormat format = PlanFormat::kTable;
  bool help = false;
};

// Parses the arguments after argv[0]. InvalidArgument with a one-line
// message for an unknown flag, a missing or malformed value, a flag given
// twice, a missing --model or --requests, or contradicting flags.
//
// A small parser over one table of flags (plan_tool.cc) rather than
// Abseil's flags library: absl::ParseCommandLine (Debian's Abseil 20220623)
// works on global flags, so a test or a fuzzer could not call it repeatedly;
// on an error it prints its own, uncapped message and exits the process with
// status 1; and it takes the last of a repeated flag where this tool refuses
// one given twice.
absl::StatusOr<PlanOptions> ParsePlanArgs(absl::Span<const std::string> args);

// The --help text.
std::string PlanUsage();

struct PlanReport {
  LayerPlanner planner;
  ForwardPlan plan;
  std::vector<Request> requests;  // as given; may be empty in a profile run
};

// Loads the model, queries the capabilities from `registry` and plans the
// forward. The errors of each step (unknown preset, unknown platform or
// arch, unsupported configuration, invalid requests).
absl::StatusOr<PlanReport> MakePlanReport(const PlanOptions& options,
                                          const platform::Registry& registry);

// Exactly one JSON object on one line (and a final newline), the PlanJson
// message of plan_json.proto printed by protobuf's JSON printer:
// {"model", "platform", "layers": [{"layer", "mtp", "indexer",
//  "prefill_branch", "k_cache_write"}...], "indexer_calls": {"scored",
//  "skipped", "shared", "workspace_only"}}, keys in this order. Internal when
// protobuf's printer refuses the message.
absl::StatusOr<std::string> RenderPlanJson(const PlanReport& report);

// A table for people: the platform and batch, then runs of layers that do
// the same thing, each with the reason, then the indexer call counts.
std::string RenderPlanTable(const PlanReport& report);

// The whole tool: 0 on success (the plan or --help on `out`); 2 on any error
// before output (one line on `err`, nothing on `out`); 1 when writing to
// `out` fails (one line on `err`). Error lines echo at most 80 characters of
// any user value and never a model file's content beyond the offending
// token.
int RunPlanTool(absl::Span<const std::string> args,
                const platform::Registry& registry, std::ostream& out,
                std::ostream& err);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_PLAN_TOOL_H_
