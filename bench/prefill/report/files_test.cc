// Files the bench writes and finds: whole or nothing, into a directory that
// exists; paths relative to where `bazel run` was typed; the plot script in
// the runfiles.
#include "bench/prefill/report/files.h"

#include <sys/stat.h>

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
