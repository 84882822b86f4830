// The arms prefill_bench compares, as one table of records: what each arm
// changes in the stack it builds, its label in the table, its role in the
// comparison. Every other piece (the flags, the run, the table, the JSON)
// reads these records; none compares an arm's name.
//
//   main        the indexer always scores: the platform is not treated as
//               CUDA-alike, as every platform but CUDA was before the
//               optimisation, so the skip's static half fails
//   skip        the decision as registered
//   no_indexer  no indexer work at all (RuntimeOptions::no_indexer): a bound,
//               not a valid model; it writes no indexer keys, so it runs only
//               where every layer prefills on dense MHA, which reads no top-k
#ifndef DSA_BENCH_PREFILL_ARMS_H_
#define DSA_BENCH_PREFILL_ARMS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "bench/prefill/workloads.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/model_runner.h"
#include "platform/capabilities.h"

namespace dsa::prefill_bench {

enum class ArmRole {
  kReference,  // the others' outputs, caches and TTFTs are compared with it
  kCandidate,  // the change under test: its change and verdict in the table
  kBound,      // a limit, not a valid model: its change is marked "(bound)"
};

struct ArmSpec {
  const char* name;         // --arms, progress lines, the JSON's key
  const char* table_label;  // the table's arm column
  ArmRole role;
  // The platform's capabilities as the arm's skip decision reads them:
  // false clears is_cuda_alike, so that every indexer layer scores.
  bool cuda_alike;
  // RuntimeOptions::no_indexer: no indexer query, keys, logits or top-k.
  // Such an arm writes no indexer keys (its caches are not compared) and
  // runs only workloads whose every layer prefills on dense MHA.
  bool no_indexer;
  const char* footnote;  // printed under the table; nullptr for none
};

inline constexpr ArmSpec kArms[] = {
    {"main", "main", ArmRole::kReference, /*cuda_alike=*/false,
     /*no_indexer=*/false, nullptr},
    {"skip", "skip", ArmRole::kCandidate, /*cuda_alike=*/true,
     /*no_indexer=*/false, nullptr},
    {"no_indexer", "no_indexer*", ArmRole::kBound, /*cuda_alike=*/true,
     /*no_indexer=*/true,
     "* no_indexer is a bound, not a valid model: it writes no indexer keys, "
     "so a later long decode would read unwritten ones."},
};

constexpr size_t CountArms(ArmRole role) {
  size_t n = 0;
  for (const ArmSpec& arm : kArms) n += arm.role == role ? 1 : 0;
  return n;
}
static_assert(CountArms(ArmRole::kReference) == 1, "one reference arm");
static_assert(CountArms(ArmRole::kCandidate) == 1, "one candidate arm");

// The record named `name`, or nullptr.
const ArmSpec* FindArm(absl::string_view name);
// Every arm, in the table's order: the default of --arms.
std::vector<const ArmSpec*> AllArms();
// "main, skip, no_indexer", for messages and --help.
std::string ArmNames();

// `caps` as `arm`'s skip decision sees them.
platform::PlatformCapabilities ArmCapabilities(
    const ArmSpec& arm, platform::PlatformCapabilities caps);
// `options` with what `arm` changes in the runner.
model::deepseek_v32::RuntimeOptions ArmOptions(
    const ArmSpec& arm, model::deepseek_v32::RuntimeOptions options);

// Why `arm` cannot run `workload` on a model planned by `planner`, or empty
// when it can: an arm without an indexer has what its attention reads only
// when every layer prefills on dense MHA.
std::string NotRunReason(const ArmSpec& arm,
                         const model::deepseek_v32::LayerPlanner& planner,
                         const Workload& workload);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_ARMS_H_
