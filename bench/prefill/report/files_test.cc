// Files the bench writes and finds: whole or nothing, into a directory that
// exists; paths relative to where `bazel run` was typed; the plot script in
// the runfiles.
#include "bench/prefill/report/files.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::EndsWith;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(WriteFileAtomicallyTest, WritesWholeFilesAndNothingOnError) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/atomic.json";
  ASSERT_OK(WriteFileAtomically(path, "{\"a\": 1}\n"));
  EXPECT_EQ(Read(path), "{\"a\": 1}\n");
  // A second write replaces the file whole.
  ASSERT_OK(WriteFileAtomically(path, "{}\n"));
  EXPECT_EQ(Read(path), "{}\n");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_mode & S_IRGRP, 0u);  // not mkstemp's 0600
  EXPECT_FALSE(WriteFileAtomically(dir + "/no/such/dir/x.json", "{}").ok());
  EXPECT_THAT(CheckWritableDestination("json", dir + "/no/such/dir/x.json"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("does not exist")));
  EXPECT_OK(CheckWritableDestination("json", path));
  EXPECT_THAT(CheckWritableDestination("json", dir),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is a directory")));
  EXPECT_THAT(CheckWritableDestination("plot", "/no/such/x.png"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "--plot=/no/such/x.png: directory /no/such does not "
                       "exist"));
}

// A device, a fifo, a symbolic link or a directory at the path is refused by
// name, before anything is created, and left as it was: the rename would
// otherwise replace it with a regular file (as root, /dev/null itself).
TEST(WriteFileAtomicallyTest, WritesOnlyRegularFiles) {
  const std::string dir = ::testing::TempDir() + "/only_regular";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const std::string fifo = dir + "/fifo.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string target = dir + "/target.json";
  const std::string link = dir + "/link.json";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  const std::string sub = dir + "/sub";
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  const struct {
    std::string path;
    std::string kind;
  } cases[] = {
      {"/dev/null", "is a character device"},
      {"/dev/full", "is a character device"},
      {"/dev/stdout", "is a symbolic link"},
      {fifo, "is a fifo (named pipe)"},
      {link, "is a symbolic link"},
      {sub, "is a directory"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.path);
    struct stat before, after;
    ASSERT_EQ(lstat(c.path.c_str(), &before), 0);
    EXPECT_THAT(
        WriteFileAtomically(c.path, "{}\n"),
        StatusIs(
            absl::StatusCode::kFailedPrecondition,
            c.path + ": " + c.kind +
                ", not a regular file: only regular files are written" +
                (c.kind == "is a symbolic link" ? " (name the file it links to)"
                                                : "")));
    EXPECT_THAT(CheckWritableDestination("json", c.path),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         "--json=" + c.path + ": " + c.kind +
                             ", not a regular file: only regular files are "
                             "written" +
                             (c.kind == "is a symbolic link"
                                  ? " (name the file it links to)"
                                  : "")));
    ASSERT_EQ(lstat(c.path.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(after.st_mode, before.st_mode);
  }
  // Nothing was created next to them, nor through the link.
  struct stat st;
  EXPECT_NE(lstat(target.c_str(), &st), 0);
  EXPECT_NE(access("/dev/null.tmp", F_OK), 0);
  int entries = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) entries += e->d_name[0] != '.';
    closedir(d);
  }
  EXPECT_EQ(entries, 3);  // fifo.json, link.json, sub
  // A failing write is an error and leaves nothing behind.
  EXPECT_FALSE(WriteFileAtomically("/proc/version", "x").ok());
}

// A write that fails half way (here the file size limit, as a full disk
// would) is DataLoss naming the file and why; the file at `path` keeps its
// old contents whole and no temporary file is left.
TEST(WriteFileAtomicallyTest, AFailedWriteFailsAndLeavesTheOldFile) {
  const std::string dir = ::testing::TempDir() + "/failed_write";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const std::string path = dir + "/r.json";
  ASSERT_OK(WriteFileAtomically(path, "{\"old\": 1}\n"));
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  // Past the limit write() fails with EFBIG once SIGXFSZ is ignored.
  void (*const old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const absl::Status status =
      WriteFileAtomically(path, std::string(100000, 'x'));
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss,
                               ::testing::AllOf(HasSubstr(path + ".tmp."),
                                                HasSubstr("File too large"))));
  EXPECT_EQ(Read(path), "{\"old\": 1}\n");
  int entries = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) entries += e->d_name[0] != '.';
    closedir(d);
  }
  EXPECT_EQ(entries, 1);  // r.json alone
}

// Long paths are echoed capped.
TEST(WriteFileAtomicallyTest, MessagesEchoAtMost200CharactersOfAPath) {
  const std::string path = "/no/such/" + std::string(100000, 'q');
  const absl::Status status = CheckWritableDestination("json", path);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("... (100009 bytes)")));
  EXPECT_LT(status.message().size(), 600u);
}

TEST(NameTheSameFileTest, SameInodeOrSameNameInTheSameDirectory) {
  const std::string dir = ::testing::TempDir();
  ASSERT_OK(WriteFileAtomically(dir + "/same.json", "{}"));
  EXPECT_TRUE(NameTheSameFile(dir + "/same.json", dir + "/same.json"));
  EXPECT_TRUE(NameTheSameFile(dir + "/same.json", dir + "/./same.json"));
  ASSERT_EQ(mkdir((dir + "/a").c_str(), 0755), 0);
  EXPECT_TRUE(NameTheSameFile(dir + "/a/new.png", dir + "/a/../a/new.png"));
  EXPECT_FALSE(NameTheSameFile(dir + "/same.json", dir + "/same.png"));
  EXPECT_FALSE(NameTheSameFile(dir + "/new.json", dir + "/new.png"));
}

TEST(UserPathTest, RelativeToWhereBazelRunWasTyped) {
  unsetenv("BUILD_WORKING_DIRECTORY");
  EXPECT_EQ(UserPath("r.json"), "r.json");
  setenv("BUILD_WORKING_DIRECTORY", "/home/me", 1);
  EXPECT_EQ(UserPath("r.json"), "/home/me/r.json");
  EXPECT_EQ(UserPath("/tmp/r.json"), "/tmp/r.json");
  EXPECT_EQ(UserPath(""), "");
  setenv("BUILD_WORKING_DIRECTORY", "", 1);
  EXPECT_EQ(UserPath("r.json"), "r.json");
  unsetenv("BUILD_WORKING_DIRECTORY");
}

TEST(FindPlotScriptTest, InTheRunfiles) {
  const std::string script = FindPlotScript();
  EXPECT_THAT(script, EndsWith(kPlotScript));
  EXPECT_THAT(Read(script), HasSubstr("def main(argv)"));
}

TEST(GitCommitTest, AlwaysSaysSomething) {
  // A test's sandbox is no git checkout: "unknown", never empty.
  EXPECT_FALSE(GitCommit().empty());
}

}  // namespace
}  // namespace dsa::prefill_bench
