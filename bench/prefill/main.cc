// `prefill_bench`, the binary (run.h says what it measures, --help how): it
// parses the flags, checks that --json and --plot can be written, runs, then
// prints the table and writes the JSON and the plot. The platforms and the
// kernels register themselves through the static registrars the BUILD
// target links.
//
// Exit status: 0 on success; 2 for bad flags, an unknown preset or platform,
// a GPU platform without a device or kernels, a workload that does not fit,
// a --json or --plot that names anything but a regular file, or both the
// same one (one line on stderr, nothing written); 1 when a run fails, or a
// write of its results (the table to stdout, a file; a closed stdout is
// refused before the run).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bench/prefill/flags.h"
#include "bench/prefill/report/files.h"
#include "bench/prefill/report/json.h"
#include "bench/prefill/report/table.h"
#include "bench/prefill/run.h"
#include "platform/plugin_file.h"
#include "platform/registry.h"

namespace dsa::prefill_bench {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // a run, or a write of its results, failed
constexpr int kExitUsage = 2;    // bad flags, preset, platform, sizes

// The most of an error line printed: a safety net behind the capped echo of
// each user value, so that no message floods a terminal or a log.
constexpr size_t kMaxErrorLineChars = 600;

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

// "prefill_bench: MESSAGE" as one line, whatever the message holds: line
// breaks become spaces, NUL and other control bytes are escaped (a NUL
// would cut the line short for a reader), and it is capped.
void PrintError(std::ostream& err, absl::string_view message) {
  const std::string line = absl::StrReplaceAll(message, {{"\n", " "}});
  err << "prefill_bench: " << platform::EchoForMessage(line, kMaxErrorLineChars)
      << "\n"
      << std::flush;
}

std::string EchoPath(const std::string& path) {
  return platform::EchoForMessage(path, platform::kMaxEchoedPathChars);
}

// Writes `text` to `out` and checks that it got there (flushed): a table
// written to /dev/full or a closed stdout is an error, not a silent loss.
absl::Status WriteOut(std::ostream& out, const std::string& text) {
  out << text;
  out.flush();
  if (!out) {
    return absl::DataLossError(
        "cannot write the results to stdout (a full device or a closed "
        "stream?)");
  }
  return absl::OkStatus();
}

int Main(absl::Span<const std::string> args, const platform::Registry& registry,
         std::ostream& out, std::ostream& err) {
  absl::StatusOr<Flags> flags = ParseFlags(args);
  if (!flags.ok()) {
    PrintError(err, flags.status().message());
    return kExitUsage;
  }
  if (flags->help) {
    const absl::Status written = WriteOut(out, Usage());
    if (!written.ok()) PrintError(err, written.message());
    return written.ok() ? kExitOk : kExitFailure;
  }
  const std::string json_path = UserPath(flags->json);
  const std::string plot_path = UserPath(flags->plot);
  for (const auto& [flag, path] :
       {std::pair<const char*, std::string>{"json", json_path},
        std::pair<const char*, std::string>{"plot", plot_path}}) {
    if (path.empty()) continue;
    absl::Status ok = CheckWritableDestination(flag, path);
    if (!ok.ok()) {
      PrintError(err, ok.message());
      return kExitUsage;
    }
  }
  if (!json_path.empty() && !plot_path.empty() &&
      NameTheSameFile(json_path, plot_path)) {
    PrintError(err, absl::StrCat("--json=", EchoPath(flags->json),
                                 " and --plot=", EchoPath(flags->plot),
                                 " name the same file; give each its own"));
    return kExitUsage;
  }
  std::string plot_script;
  if (!plot_path.empty()) {
    plot_script = FindPlotScript();
    if (plot_script.empty()) {
      PrintError(err, absl::StrCat("--plot: ", kPlotScript,
                                   " not found (run through bazel run "
                                   "//bench/prefill:prefill_bench)"));
      return kExitUsage;
    }
    if (!HasMatplotlib()) {
      PrintError(err,
                 "--plot needs Debian's python3-matplotlib; "
                 "testing/setup_debian.sh --plot installs it (testing/run.sh "
                 "does so on first use)");
      return kExitUsage;
    }
  }
  absl::StatusOr<BenchResult> result =
      RunBench(*flags, registry, err, isatty(STDERR_FILENO) != 0);
  if (!result.ok()) {
    PrintError(err, result.status().message());
    return IsUsageError(result.status()) ? kExitUsage : kExitFailure;
  }
  result->commit = flags->commit.empty() ? GitCommit() : flags->commit;
  // The table, then the files. A write that fails is reported (the first
  // one, on one line) and the status is 1; the other outputs are still
  // written, so that a full stdout does not lose the JSON too.
  absl::Status failed = WriteOut(out, FormatTable(*result));
  absl::StatusOr<std::string> json = ToJson(*result);
  if (!json.ok()) {
    PrintError(err, failed.ok() ? json.status().message() : failed.message());
    return kExitFailure;
  }
  auto note = [&](absl::Status status) {
    if (!status.ok() && failed.ok()) failed = std::move(status);
  };
  if (!json_path.empty()) {
    absl::Status written = WriteFileAtomically(json_path, *json);
    if (written.ok()) {
      note(WriteOut(out, absl::StrCat("wrote ", EchoPath(flags->json), "\n")));
    } else {
      note(absl::Status(written.code(),
                        absl::StrCat("--json: ", written.message())));
    }
  }
  if (!plot_path.empty()) {
    absl::Status drawn = DrawPlot(plot_script, *json, plot_path);
    if (drawn.ok()) {
      note(WriteOut(out, absl::StrCat("wrote ", EchoPath(flags->plot), "\n")));
    } else {
      note(absl::Status(
          drawn.code(),
          absl::StrCat("--plot: ",
                       drawn.code() == absl::StatusCode::kFailedPrecondition
                           ? std::string(drawn.message())
                           : "drawing " + EchoPath(flags->plot) + " failed")));
    }
  }
  if (!failed.ok()) {
    PrintError(err, failed.message());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace
}  // namespace dsa::prefill_bench

int main(int argc, char** argv) {
  // A closed stdout would lose the table, and the first file the run opens
  // would take its descriptor and receive it: refused before anything runs.
  if (fcntl(STDOUT_FILENO, F_GETFD) == -1) {
    std::fprintf(stderr,
                 "prefill_bench: stdout is closed: the results would be "
                 "lost\n");
    return 1;
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  const int status = dsa::prefill_bench::Main(
      args, dsa::platform::Registry::Global(), std::cout, std::cerr);
  // Main flushed std::cout and checked it; stdout itself is checked once
  // more, since the C library's buffer is what finally reaches the file.
  if (status == 0) {
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "prefill_bench: cannot write to stdout: %s\n",
                   errno != 0 ? std::strerror(errno) : "stream error");
      return 1;
    }
  }
  return status;
}
