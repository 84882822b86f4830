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

std::string FormatMs(double ms) {
  if (ms >= 100) return absl::StrFormat("%.1f", ms);
  if (ms >= 10) return absl::StrFormat("%.2f", ms);
  return absl::StrFormat("%.3f", ms);
}

}  // namespace dsa::prefill_bench
