// prefill_bench's --json: every figure of a BenchResult as the
// BenchResultJson message of result.proto, printed by protobuf's JSON
// printer. bench/prefill/plot_prefill_bench.py reads the same schema.
#ifndef DSA_BENCH_PREFILL_REPORT_JSON_H_
#define DSA_BENCH_PREFILL_REPORT_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "bench/prefill/report/result.pb.h"
#include "bench/prefill/result.h"

namespace dsa::prefill_bench {

// The message; Internal when an arm has no field in BenchResultJson.Arms.
absl::StatusOr<BenchResultJson> ToProto(const BenchResult& result);

// One JSON object, indented, with a final newline.
absl::StatusOr<std::string> ToJson(const BenchResult& result);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_REPORT_JSON_H_
