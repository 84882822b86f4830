// The flag table and its parser: defaults, every flag's value, one clear
// error per kind of bad flag, and --help built from the same table.
#include "bench/prefill/flags.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/prefill/arms.h"
#include "bench/prefill/platform_choice.h"
#include "bench/prefill/workloads.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Flags> Parse(std::vector<std::string> args) {
  return ParseFlags(args);
}

std::vector<std::string> ArmNamesOf(const Flags& f) {
  std::vector<std::string> names;
  for (const ArmSpec* arm : f.arms) names.push_back(arm->name);
  return names;
}

TEST(ParseFlagsTest, DefaultsAndValues) {
  ASSERT_OK_AND_ASSIGN(Flags d, Parse({}));
  EXPECT_EQ(d.platform, "auto");
  EXPECT_EQ(d.runs, 2);
  EXPECT_TRUE(d.model.empty());
  EXPECT_TRUE(d.workloads.empty());
  EXPECT_THAT(ArmNamesOf(d), ElementsAre("main", "skip", "no_indexer"));
  EXPECT_EQ(d.block_size, 64);
  EXPECT_EQ(d.seed, 1u);
  EXPECT_FALSE(d.op_times);
  EXPECT_EQ(d.kv_cache_dtype, "bfloat16");
  ASSERT_OK_AND_ASSIGN(
      Flags f,
      Parse({"--model=glm-5.2", "--platform=emulated-rocm", "--arch=gfx942",
             "--workloads=8k_c1,1k_c1", "--arms=skip,main", "--runs=3",
             "--prompts=5", "--max_num_batched_tokens=512", "--json=x.json"}));
  EXPECT_EQ(f.model, "glm-5.2");
  EXPECT_EQ(f.platform, "emulated-rocm");
  EXPECT_EQ(f.arch, "gfx942");
  EXPECT_THAT(f.workloads, ElementsAre("8k_c1", "1k_c1"));
  EXPECT_THAT(ArmNamesOf(f), ElementsAre("skip", "main"));
  EXPECT_EQ(f.runs, 3);
  EXPECT_EQ(f.prompts, 5);
  EXPECT_EQ(f.max_num_batched_tokens, 512);
  EXPECT_EQ(f.json, "x.json");
  ASSERT_OK_AND_ASSIGN(Flags h, Parse({"--runs=oops", "--help"}));
  EXPECT_TRUE(h.help);  // --help wins over everything else
  ASSERT_OK_AND_ASSIGN(Flags short_help, Parse({"-h"}));
  EXPECT_TRUE(short_help.help);
}

TEST(ParseFlagsTest, EveryOtherFlagReadsItsValue) {
  ASSERT_OK_AND_ASSIGN(
      Flags f,
      Parse({"--spec_tokens=3", "--block_size=16", "--num_blocks=99",
             "--threads=4", "--seed=18446744", "--plot=p.svg", "--commit=abc",
             "--op_times=true", "--kv_cache_dtype=fp8", "--weights=fp8",
             "--op_clock=host", "--step_graphs=false"}));
  EXPECT_EQ(f.spec_tokens, 3);
  EXPECT_EQ(f.block_size, 16);
  EXPECT_EQ(f.num_blocks, 99);
  EXPECT_EQ(f.threads, 4);
  EXPECT_EQ(f.seed, 18446744u);
  EXPECT_EQ(f.plot, "p.svg");
  EXPECT_EQ(f.commit, "abc");
  EXPECT_TRUE(f.op_times);
  EXPECT_EQ(f.op_clock, "host");
  EXPECT_FALSE(f.step_graphs);
  EXPECT_EQ(f.kv_cache_dtype, "fp8");
  EXPECT_EQ(f.weights, "fp8");
  ASSERT_OK_AND_ASSIGN(Flags g, Parse({"--op_times=false", "--seed=0"}));
  EXPECT_FALSE(g.op_times);
  EXPECT_EQ(g.op_clock, "device");  // the default
  EXPECT_TRUE(g.step_graphs);
  EXPECT_EQ(g.seed, 0u);
}

TEST(ParseFlagsTest, BadFlagsNameWhatIsWrong) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bogus=1"}, "unknown flag --bogus"},
      {{"positional"}, "unexpected argument \"positional\""},
      {{"--runs=0"}, "--runs=0: expected an integer in [1, 1000]"},
      {{"--runs=2x"}, "--runs=2x: expected an integer"},
      {{"--runs"}, "--runs needs a value"},
      {{"--runs="}, "--runs needs a value"},
      {{"--runs=1", "--runs=2"}, "--runs given twice"},
      {{"--platform=tpu"}, "expected auto, cpu, rocm, cuda or emulated-rocm"},
      {{"--workloads=2k_c1"}, "unknown workload \"2k_c1\""},
      {{"--workloads=1k_c1,1k_c1"}, "named twice"},
      {{"--arms=fast"},
       "unknown arm \"fast\"; expected main, skip, no_indexer"},
      {{"--arms=skip,skip"}, "--arms: an arm is named twice"},
      {{"--arms=,"},
       "--arms=,: name at least one arm (main, skip, "
       "no_indexer)"},
      {{"--workloads=,"},
       "--workloads=,: name at least one workload (1k_c1, "
       "1900_c1, 1k_c32, 8k_c1)"},
      {{"--arms=main,,skip"}, "--arms=main,,skip: an empty arm name"},
      {{"--workloads=1k_c1,"}, "--workloads=1k_c1,: an empty workload name"},
      {{"--arch=GFX942"}, "--arch=GFX942: expected an architecture name"},
      {{"--arch=gfx\x01"}, "--arch=gfx\\x01: expected"},
      {{"--block_size=-4"}, "--block_size=-4: expected an integer"},
      {{"--runs=+2"}, "--runs=+2: expected an integer"},
      {{"--runs= 2"}, "--runs= 2: expected an integer"},
      {{"--seed=9223372036854775808"}, "--seed=9223372036854775808: expected"},
      {{"--spec_tokens=65"},
       "--spec_tokens=65: expected an integer in [0, 64]"},
      {{"--op_times=yes"}, "--op_times=yes: expected true or false"},
      {{"--op_times=true", "--op_clock=cpu"},
       "--op_clock=cpu: expected device or host"},
      {{"--step_graphs=1"}, "--step_graphs=1: expected true or false"},
      {{"--op_clock=host"},
       "--op_clock says how --op_times times the ops: give --op_times=true"},
      {{"--op_times=false", "--op_clock=device"}, "give --op_times=true too"},
      {{"--kv_cache_dtype=fp16"},
       "--kv_cache_dtype=fp16: expected bfloat16 or fp8"},
      {{"--tp=0"}, "--tp=0: expected an integer in [1, 64]"},
      {{"--tp=65"}, "--tp=65: expected an integer in [1, 64]"},
      {{"--indexer_tp=cols"}, "--indexer_tp=cols: expected replicated or rows"},
      {{"--weights=int4"}, "--weights=int4: expected bfloat16 or fp8"},
      {{"--help=1"}, "unknown flag --help"},
  };
  for (const auto& [args, message] : cases) {
    EXPECT_THAT(Parse(args), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr(message)))
        << args.front();
  }
}

// A message echoes at most 80 characters of a user's value, escaped.
TEST(ParseFlagsTest, LongValuesAreEchoedCapped) {
  const std::string long_value(100000, 'q');
  for (const std::string& arg :
       {"--runs=" + long_value, "--platform=" + long_value,
        "--workloads=" + long_value, "--arms=" + long_value,
        "--arch=" + long_value, "--op_times=" + long_value,
        "--kv_cache_dtype=" + long_value, "--" + long_value + "=1",
        long_value}) {
    const absl::StatusOr<Flags> flags = Parse({arg});
    ASSERT_FALSE(flags.ok());
    EXPECT_THAT(flags.status().message(), HasSubstr("... (100000 bytes)"))
        << arg.substr(0, 12);
    EXPECT_LT(flags.status().message().size(), 300u) << arg.substr(0, 12);
  }
}

// Of two bad values the first in the table's (and --help's) order is the
// one reported, whatever the order on the command line.
TEST(ParseFlagsTest, TheFirstBadFlagInTableOrderIsReported) {
  EXPECT_THAT(Parse({"--runs=0", "--model=x", "--platform=tpu"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--platform=tpu")));
  // Malformed arguments come before any value is read.
  EXPECT_THAT(Parse({"--runs=0", "--bogus"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown flag --bogus")));
}

TEST(UsageTest, ListsEveryFlagOfTheTableAlignedUnderItsHelp) {
  const std::string usage = Usage();
  const std::vector<std::string> lines = absl::StrSplit(usage, '\n');
  for (const FlagSpec& spec : FlagTable()) {
    const std::string head = absl::StrCat("  --", spec.name, "=", spec.value);
    const auto line = std::find_if(
        lines.begin(), lines.end(),
        [&head](const std::string& l) { return l.rfind(head + " ", 0) == 0; });
    ASSERT_NE(line, lines.end()) << spec.name;
    // The help starts at column 29 and its continuation lines too.
    EXPECT_EQ(line->find_first_not_of(' ', head.size()), 29u) << spec.name;
    const size_t help_lines =
        std::count(spec.help.begin(), spec.help.end(), '\n') + 1;
    for (size_t i = 1; i < help_lines; ++i) {
      EXPECT_EQ((line + i)->find_first_not_of(' '), 29u) << spec.name;
    }
  }
  EXPECT_THAT(usage, HasSubstr("  --help                     this text\n"));
  for (const std::string& line : lines) EXPECT_LE(line.size(), 80u) << line;
}

// The help names every value the parser takes, from the tables they come
// from: a new arm, workload or platform shows up in --help or fails here.
TEST(UsageTest, NamesEveryArmWorkloadAndPlatform) {
  auto help_of = [](const char* name) {
    for (const FlagSpec& spec : FlagTable()) {
      if (std::string(spec.name) == name) return spec.help;
    }
    return std::string();
  };
  for (const ArmSpec& arm : kArms) {
    EXPECT_THAT(help_of("arms"), HasSubstr(arm.name));
  }
  for (const std::string& w : WorkloadNames()) {
    EXPECT_THAT(help_of("workloads"), HasSubstr(w));
  }
  for (const char* p : kPlatformChoices) {
    EXPECT_THAT(help_of("platform"), HasSubstr(p));
  }
  EXPECT_THAT(help_of("model"), HasSubstr(kCpuDefaultModel));
  EXPECT_THAT(help_of("model"), HasSubstr(kGpuDefaultModel));
}

}  // namespace
}  // namespace dsa::prefill_bench
