// `prefill_bench`, the binary (run.h says what it measures, --help how): it
// parses the flags, checks that --json and --plot can be written, runs, then
// prints the table and writes the JSON and the plot. The platforms and the
// kernels register themselves through the static registrars the BUILD
// target links.
//
// Exit status: 0 on success; 2 for bad flags, an unknown preset or platform,
// a GPU platform without a device or kernels, a workload that does not fit
// (one line on stderr, nothing written); 1 when a run or a write fails.
#include <unistd.h>

#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "bench/prefill/flags.h"
#include "bench/prefill/report/files.h"
#include "bench/prefill/report/json.h"
#include "bench/prefill/report/table.h"
#include "bench/prefill/run.h"
#include "platform/registry.h"

namespace dsa::prefill_bench {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // a run failed after it started
constexpr int kExitUsage = 2;    // bad flags, preset, platform, sizes

// The errors of a configuration the user can change, found before any run.
bool IsUsageError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

int Main(absl::Span<const std::string> args, const platform::Registry& registry,
         std::ostream& out, std::ostream& err) {
  absl::StatusOr<Flags> flags = ParseFlags(args);
  if (!flags.ok()) {
    err << "prefill_bench: " << flags.status().message() << "\n";
    return kExitUsage;
  }
  if (flags->help) {
    out << Usage();
    return kExitOk;
  }
  const std::string json_path = UserPath(flags->json);
  const std::string plot_path = UserPath(flags->plot);
  for (const auto& [flag, path] :
       {std::pair<const char*, std::string>{"json", json_path},
        std::pair<const char*, std::string>{"plot", plot_path}}) {
    if (path.empty()) continue;
    absl::Status ok = CheckWritableDestination(flag, path);
    if (!ok.ok()) {
      err << "prefill_bench: " << ok.message() << "\n";
      return kExitUsage;
    }
  }
  std::string plot_script;
  if (!plot_path.empty()) {
    plot_script = FindPlotScript();
    if (plot_script.empty()) {
      err << "prefill_bench: --plot: " << kPlotScript
          << " not found (run through bazel run //bench/prefill:prefill_bench)"
          << "\n";
      return kExitUsage;
    }
    if (!HasMatplotlib()) {
      err << "prefill_bench: --plot needs Debian's python3-matplotlib; "
             "testing/setup_debian.sh --plot installs it (testing/run.sh "
             "does so on first use)\n";
      return kExitUsage;
    }
  }
  absl::StatusOr<BenchResult> result =
      RunBench(*flags, registry, err, isatty(STDERR_FILENO) != 0);
  if (!result.ok()) {
    err << "prefill_bench: " << result.status().message() << "\n";
    return IsUsageError(result.status()) ? kExitUsage : kExitFailure;
  }
  result->commit = flags->commit.empty() ? GitCommit() : flags->commit;
  out << FormatTable(*result) << std::flush;
  absl::StatusOr<std::string> json = ToJson(*result);
  if (!json.ok()) {
    err << "prefill_bench: " << json.status().message() << "\n";
    return kExitFailure;
  }
  if (!json_path.empty()) {
    absl::Status written = WriteFileAtomically(json_path, *json);
    if (!written.ok()) {
      err << "prefill_bench: --json: " << written.message() << "\n";
      return kExitFailure;
    }
    out << "wrote " << flags->json << "\n";
  }
  if (!plot_path.empty()) {
    absl::Status drawn = DrawPlot(plot_script, *json, plot_path);
    if (!drawn.ok()) {
      err << "prefill_bench: --plot: "
          << (drawn.code() == absl::StatusCode::kFailedPrecondition
                  ? std::string(drawn.message())
                  : "drawing " + flags->plot + " failed")
          << "\n";
      return kExitFailure;
    }
    out << "wrote " << flags->plot << "\n";
  }
  return kExitOk;
}

}  // namespace
}  // namespace dsa::prefill_bench

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return dsa::prefill_bench::Main(args, dsa::platform::Registry::Global(),
                                  std::cout, std::cerr);
}
