// What prefill_bench writes outside its table: the --json and --plot files
// (written whole or not at all), the commit it records, and the plot script
// it runs.
#ifndef DSA_BENCH_PREFILL_REPORT_FILES_H_
#define DSA_BENCH_PREFILL_REPORT_FILES_H_

#include <string>

#include "absl/status/status.h"

namespace dsa::prefill_bench {

// The plot script, relative to the workspace root.
inline constexpr char kPlotScript[] = "bench/prefill/plot_prefill_bench.py";

// Writes `contents` to `path` through a temporary file in the same directory
// and a rename: `path` is either untouched or complete. Only a regular file
// (or a new one) is written: FailedPrecondition, before anything is created,
// when `path` names a directory, a device (/dev/null, /dev/full), a fifo, a
// socket or a symbolic link (/dev/stdout), which the rename would replace.
// DataLoss when a write, the fsync or the rename fails.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents);
// FailedPrecondition when `path`'s directory does not exist or is not
// writable, or `path` names anything WriteFileAtomically refuses, so a bad
// --json fails before the run. Messages echo at most 200 characters of a
// path.
absl::Status CheckWritableDestination(const std::string& flag,
                                      const std::string& path);
// Whether two paths name one file: the same inode, or (for files not there
// yet) the same name in the same directory.
bool NameTheSameFile(const std::string& a, const std::string& b);

// `bazel run` starts the binary in its runfiles; a relative path the user
// typed is relative to where they typed it (BUILD_WORKING_DIRECTORY).
std::string UserPath(const std::string& path);

// `git describe --always --dirty --abbrev=12` of the workspace, or
// "unknown".
std::string GitCommit();

// The plot script: in the runfiles under `bazel run`/`bazel test`, else in
// the source tree; empty when neither has it.
std::string FindPlotScript();
// Whether Debian's python3 can import matplotlib.
bool HasMatplotlib();
// Runs `script` on `json` to draw `path` (the script writes it atomically).
// FailedPrecondition when the JSON cannot be handed over (a temporary file),
// Internal when the script fails.
absl::Status DrawPlot(const std::string& script, const std::string& json,
                      const std::string& path);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_REPORT_FILES_H_
