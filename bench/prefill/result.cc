// The result's helpers (result.h).
#include "bench/prefill/result.h"

#include "absl/strings/str_format.h"

namespace dsa::prefill_bench {

std::vector<std::pair<std::string, double>> OpsThatRan(
    const model::deepseek_v32::OpTimes& times) {
  std::vector<std::pair<std::string, double>> ops;
#define DSA_OP_THAT_RAN(op) \
  if (times.op > 0) ops.emplace_back(#op, times.op);
  DSA_STEP_OPS(DSA_OP_THAT_RAN)
#undef DSA_OP_THAT_RAN
  return ops;
}

int CallsOf(const model::deepseek_v32::OpCallCounts& calls,
            absl::string_view op) {
#define DSA_CALLS_OF(name) \
  if (op == #name) return calls.name;
  DSA_STEP_OPS(DSA_CALLS_OF)
#undef DSA_CALLS_OF
  return 0;
}

std::string FormatMs(double ms) {
  if (ms >= 100) return absl::StrFormat("%.1f", ms);
  if (ms >= 10) return absl::StrFormat("%.2f", ms);
  return absl::StrFormat("%.3f", ms);
}

}  // namespace dsa::prefill_bench
