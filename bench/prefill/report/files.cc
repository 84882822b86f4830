// Files, git and the plot script (files.h).
#include "bench/prefill/report/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "platform/plugin_file.h"

namespace dsa::prefill_bench {
namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Output of a shell command, trailing newline removed; empty on failure.
std::string CommandOutput(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  if (pclose(pipe) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) {
    out.pop_back();
  }
  return out;
}

// Debian's interpreter, which sees Debian's python3-matplotlib; a python3
// earlier on PATH (pyenv, a virtualenv) may not.
std::string Python() {
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

std::string EchoPath(const std::string& path) {
  return platform::EchoForMessage(path, platform::kMaxEchoedPathChars);
}

// Why `path` is not one the bench writes, or empty: a regular file, or
// nothing yet. A symbolic link is refused too (the rename would replace the
// link itself: /dev/stdout is one).
std::string NotARegularFile(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    // Nothing there is a new file; a name too long, a component that is no
    // directory and the like are no file at all.
    return errno == ENOENT
               ? ""
               : absl::StrCat("cannot be a file: ", std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return "";
  return absl::StrCat(
      "is ", platform::FileTypeName(st.st_mode),
      ", not a regular file: only regular files are written",
      S_ISLNK(st.st_mode) ? " (name the file it links to)" : "");
}

const char* NonEmptyEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

}  // namespace

absl::Status CheckWritableDestination(const std::string& flag,
                                      const std::string& path) {
  const std::string where = absl::StrCat("--", flag, "=", EchoPath(path));
  const std::string problem = NotARegularFile(path);
  if (!problem.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(where, ": ", problem));
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos
                              ? "."
                              : (slash == 0 ? "/" : path.substr(0, slash));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": directory ", EchoPath(dir), " does not exist"));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": directory ", EchoPath(dir), " is not writable"));
  }
  return absl::OkStatus();
}

bool NameTheSameFile(const std::string& a, const std::string& b) {
  if (a == b) return true;
  struct stat sa, sb;
  // Both there: the same inode. Else the same directory and name.
  if (stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  auto split = [](const std::string& path) {
    const size_t slash = path.rfind('/');
    return std::make_pair(
        slash == std::string::npos ? std::string(".")
                                   : (slash == 0 ? "/" : path.substr(0, slash)),
        slash == std::string::npos ? path : path.substr(slash + 1));
  };
  const auto [dir_a, name_a] = split(a);
  const auto [dir_b, name_b] = split(b);
  return name_a == name_b && stat(dir_a.c_str(), &sa) == 0 &&
         stat(dir_b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  // A device, fifo or symlink at `path` would be replaced by the rename (a
  // regular file where /dev/null was): refused, and nothing is created.
  std::string problem = NotARegularFile(path);
  if (!problem.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(EchoPath(path), ": ", problem));
  }
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a temporary file next to ", EchoPath(path),
                     ": ", std::strerror(errno)));
  }
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n =
        write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string error = n < 0 ? std::strerror(errno) : "wrote nothing";
      close(fd);
      unlink(tmp.c_str());
      return absl::DataLossError(
          absl::StrCat("writing ", EchoPath(tmp), ": ", error));
    }
    written += static_cast<size_t>(n);
  }
  // Readable like any file the user writes (mkstemp creates it 0600).
  const mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  if (fsync(fd) != 0 || close(fd) != 0) {
    const std::string error = std::strerror(errno);
    unlink(tmp.c_str());
    return absl::DataLossError(
        absl::StrCat("writing ", EchoPath(tmp), ": ", error));
  }
  // Once more just before the rename, for a path made something else while
  // the file was written.
  problem = NotARegularFile(path);
  if (!problem.empty()) {
    unlink(tmp.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat(EchoPath(path), ": ", problem));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = std::strerror(errno);
    unlink(tmp.c_str());
    return absl::DataLossError(absl::StrCat("renaming ", EchoPath(tmp), " to ",
                                            EchoPath(path), ": ", error));
  }
  return absl::OkStatus();
}

std::string UserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* dir = NonEmptyEnv("BUILD_WORKING_DIRECTORY");
  return dir != nullptr ? absl::StrCat(dir, "/", path) : path;
}

std::string GitCommit() {
  const char* dir = NonEmptyEnv("BUILD_WORKSPACE_DIRECTORY");
  const std::string where = dir != nullptr ? ShellQuote(dir) : ".";
  const std::string rev = CommandOutput(absl::StrCat(
      "git -C ", where, " describe --always --dirty --abbrev=12 2>/dev/null"));
  return rev.empty() ? "unknown" : rev;
}

std::string FindPlotScript() {
  std::vector<std::string> candidates;
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = NonEmptyEnv(env)) {
      candidates.push_back(absl::StrCat(dir, "/dsa/", kPlotScript));
    }
  }
  candidates.push_back(kPlotScript);
  if (const char* ws = NonEmptyEnv("BUILD_WORKSPACE_DIRECTORY")) {
    candidates.push_back(absl::StrCat(ws, "/", kPlotScript));
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return "";
}

bool HasMatplotlib() {
  return std::system(
             absl::StrCat(Python(), " -c 'import matplotlib' >/dev/null 2>&1")
                 .c_str()) == 0;
}

absl::Status DrawPlot(const std::string& script, const std::string& json,
                      const std::string& path) {
  // The script reads the JSON from a temporary file.
  char tmp[] = "/tmp/prefill_bench_XXXXXX.json";
  const int fd = mkstemps(tmp, 5);
  if (fd < 0) {
    return absl::FailedPreconditionError("cannot create a temporary file");
  }
  close(fd);
  const absl::Status written = WriteFileAtomically(tmp, json);
  int rc = 1;
  if (written.ok()) {
    rc = std::system(absl::StrCat(Python(), " ", ShellQuote(script), " ",
                                  ShellQuote(tmp), " ", ShellQuote(path))
                         .c_str());
  }
  unlink(tmp);
  if (!written.ok() || rc != 0) {
    return absl::InternalError(absl::StrCat(script, " failed"));
  }
  return absl::OkStatus();
}

}  // namespace dsa::prefill_bench
