// The table, byte for byte as the previous report printed it for the same
// figures (testdata/sample_*.txt), and the cells each arm's role decides.
#include "bench/prefill/report/table.h"

#include <string>

#include "bench/prefill/arms.h"
#include "bench/prefill/report/sample_result.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dsa::prefill_bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(FormatTableTest, AsBeforeOnTheCpu) {
  const std::string want = ReadTestdata("sample_cpu.txt");
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(FormatTable(SampleResult(/*gpu=*/false)), want);
}

TEST(FormatTableTest, AsBeforeWithAGpusIssueAndTail) {
  const std::string want = ReadTestdata("sample_gpu.txt");
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(FormatTable(SampleResult(/*gpu=*/true)), want);
}

// Graph launches (--step_graphs): a line only where graphs ran.
TEST(FormatTableTest, GraphLaunchesOnlyWhereGraphsRan) {
  BenchResult r = SampleResult(/*gpu=*/true);
  EXPECT_THAT(FormatTable(r), Not(HasSubstr("graph launches")));
  r.workloads[0].arms[0].graph_launches_per_step = 79;
  r.workloads[0].arms[1].graph_launches_per_step = 78.5;
  EXPECT_THAT(FormatTable(r),
              HasSubstr("graph launches a step (--step_graphs: each launched "
                        "a layer's run of the ops launch/step counts): 1k_c1 "
                        "main 79.0, 1k_c1 skip 78.5.\n"));
}

TEST(FormatTableTest, EveryBoundIsExplainedAndOpTimesOnlyWhenProfiled) {
  BenchResult r = SampleResult(false);
  const std::string table = FormatTable(r);
  for (const ArmSpec& arm : kArms) {
    if (arm.footnote != nullptr) {
      EXPECT_THAT(table, HasSubstr(arm.footnote));
    }
  }
  for (WorkloadResult& w : r.workloads) {
    for (ArmResult& a : w.arms) a.op_times.reset();
  }
  EXPECT_THAT(FormatTable(r), Not(HasSubstr("op times")));
  // Without a platform note there is no line for it.
  r.platform.note.clear();
  EXPECT_THAT(FormatTable(r), Not(HasSubstr("auto: no GPU device")));
}

}  // namespace
}  // namespace dsa::prefill_bench
