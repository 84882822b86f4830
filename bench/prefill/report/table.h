// prefill_bench's table, the one a person reads at a glance: a header with
// the model, the platform and the method, one row per workload and arm, the
// footnotes, and --op_times' per-op times.
#ifndef DSA_BENCH_PREFILL_REPORT_TABLE_H_
#define DSA_BENCH_PREFILL_REPORT_TABLE_H_

#include <string>

#include "bench/prefill/result.h"

namespace dsa::prefill_bench {

std::string FormatTable(const BenchResult& result);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_REPORT_TABLE_H_
