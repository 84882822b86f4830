// A BenchResult with fixed figures for the report's tests: every kind of
// row the table has (the reference, the candidate, the bound, an arm that
// did not run, runs that differ, a single round, the arms in another order,
// --op_times), on the CPU or with a GPU's host issue and device tail. The
// table and the JSON the previous, hand-written report printed for it are in
// testdata/sample_{cpu,gpu}.{txt,json}.
#ifndef DSA_BENCH_PREFILL_REPORT_SAMPLE_RESULT_H_
#define DSA_BENCH_PREFILL_REPORT_SAMPLE_RESULT_H_

#include <string>

#include "bench/prefill/result.h"

namespace dsa::prefill_bench {

BenchResult SampleResult(bool gpu);

// A file of testdata/, read from the test's runfiles.
std::string ReadTestdata(const std::string& name);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_REPORT_SAMPLE_RESULT_H_
