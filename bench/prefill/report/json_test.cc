// The JSON: the same figures under the same keys as the previous,
// hand-written writer printed for the same result (testdata/sample_*.json,
// where its nulls are absent keys now); every arm has its field in
// result.proto; the committed H200 results parse with the schema.
//
//   json_test COMMITTED.json...
#include "bench/prefill/report/json.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/prefill/arms.h"
#include "bench/prefill/report/result.pb.h"
#include "bench/prefill/report/sample_result.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::prefill_bench {
namespace {

using ::dsa::testing::StatusIs;
using ::google::protobuf::util::JsonStringToMessage;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string>* committed_files = new std::vector<std::string>;

BenchResultJson Parse(const std::string& json) {
  BenchResultJson message;
  const auto status = JsonStringToMessage(json, &message);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return message;
}

// What differs from `want` in `got`, one line per field; empty when equal.
std::string Differences(const BenchResultJson& want,
                        const BenchResultJson& got) {
  std::string report;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&report);
  differencer.Compare(want, got);
  return report;
}

google::protobuf::Struct ParseStruct(const std::string& json) {
  google::protobuf::Struct s;
  const auto status = JsonStringToMessage(json, &s);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return s;
}

// Every key path of `value` ("workloads[].arms.main.ttft_ms"), leaving out
// the keys whose value is null.
void KeyPaths(const google::protobuf::Value& value, const std::string& at,
              std::set<std::string>& out) {
  if (value.has_struct_value()) {
    for (const auto& [key, v] : value.struct_value().fields()) {
      if (v.has_null_value()) continue;
      const std::string path = at.empty() ? key : at + "." + key;
      out.insert(path);
      KeyPaths(v, path, out);
    }
  } else if (value.has_list_value()) {
    for (const google::protobuf::Value& v : value.list_value().values()) {
      KeyPaths(v, at + "[]", out);
    }
  }
}
std::set<std::string> KeyPaths(const std::string& json) {
  google::protobuf::Value root;
  *root.mutable_struct_value() = ParseStruct(json);
  std::set<std::string> out;
  KeyPaths(root, "", out);
  return out;
}

class SampleJsonTest : public ::testing::TestWithParam<bool> {};

TEST_P(SampleJsonTest, TheFiguresOfThePreviousWriter) {
  const bool gpu = GetParam();
  const std::string before =
      ReadTestdata(gpu ? "sample_gpu.json" : "sample_cpu.json");
  ASSERT_FALSE(before.empty());
  ASSERT_OK_AND_ASSIGN(BenchResultJson message, ToProto(SampleResult(gpu)));
  EXPECT_EQ(Differences(Parse(before), message), "");
  // What is printed parses back to the same message.
  ASSERT_OK_AND_ASSIGN(std::string json, ToJson(SampleResult(gpu)));
  EXPECT_EQ(Differences(message, Parse(json)), "");
}

TEST_P(SampleJsonTest, TheKeysOfThePreviousWriter) {
  const bool gpu = GetParam();
  ASSERT_OK_AND_ASSIGN(std::string json, ToJson(SampleResult(gpu)));
  EXPECT_EQ(KeyPaths(json), KeyPaths(ReadTestdata(gpu ? "sample_gpu.json"
                                                      : "sample_cpu.json")));
  EXPECT_THAT(json, Not(HasSubstr("null")));
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.size() - 2), "}\n");
}

INSTANTIATE_TEST_SUITE_P(CpuAndGpu, SampleJsonTest, ::testing::Bool());

TEST(JsonTest, ZerosAndFalsesArePrintedUnsetFiguresAreNot) {
  BenchResult r = SampleResult(false);
  r.spec_tokens = 0;
  r.platform.emulated = false;
  ASSERT_OK_AND_ASSIGN(std::string json, ToJson(r));
  EXPECT_THAT(json, HasSubstr("\"spec_tokens\": 0"));
  EXPECT_THAT(json, HasSubstr("\"emulated\": false"));
  EXPECT_THAT(json, HasSubstr("\"indexer_scoring_ms\": 0"));
  const BenchResultJson message = Parse(json);
  const BenchResultJson::Workload& long_prompts = message.workloads(1);
  EXPECT_FALSE(long_prompts.arms().no_indexer().ran());
  EXPECT_FALSE(long_prompts.arms().no_indexer().has_median_ttft_ms());
  EXPECT_FALSE(long_prompts.arms().no_indexer().has_indexer_calls());
  EXPECT_TRUE(long_prompts.arms().no_indexer().bound());
  EXPECT_THAT(long_prompts.arms().no_indexer().not_run_reason(),
              HasSubstr("sparse path"));
  EXPECT_FALSE(long_prompts.has_bound_change_pct());
  // A figure that is not a number is left out rather than written as one.
  r.workloads[0].bound_change_pct = std::nan("");
  ASSERT_OK_AND_ASSIGN(BenchResultJson nan, ToProto(r));
  EXPECT_FALSE(nan.workloads(0).has_bound_change_pct());
  // The op times: only the ops that ran, in the runner's order.
  const BenchResultJson::OpMs& ms =
      message.workloads(0).arms().main().op_times().ms();
  EXPECT_TRUE(ms.has_gemm());
  EXPECT_FALSE(ms.has_sparse_mla());
  EXPECT_LT(json.find("\"indexer_k_write\""), json.find("\"gemm\""));
}

// One field of BenchResultJson.Arms per record of kArms, in its order.
TEST(JsonTest, EveryArmHasItsFieldInTheSchema) {
  const google::protobuf::Descriptor* arms =
      BenchResultJson::Arms::descriptor();
  ASSERT_EQ(arms->field_count(), static_cast<int>(std::size(kArms)));
  for (size_t i = 0; i < std::size(kArms); ++i) {
    EXPECT_EQ(arms->field(static_cast<int>(i))->name(), kArms[i].name);
    EXPECT_EQ(arms->field(static_cast<int>(i))->message_type(),
              BenchResultJson::Arm::descriptor());
  }
  // An arm the schema does not know is an error, not a dropped figure.
  const ArmSpec unknown{"fast", "fast", ArmRole::kCandidate,
                        true,   false,  nullptr};
  BenchResult r = SampleResult(false);
  r.workloads[0].arms[1].spec = &unknown;
  EXPECT_THAT(ToProto(r), StatusIs(absl::StatusCode::kInternal,
                                   HasSubstr("arm fast has no field")));
}

// The H200 runs of testing/bench/, written before the schema was a proto,
// parse with it: no field of theirs is unknown to it.
TEST(JsonTest, TheCommittedResultsParse) {
  ASSERT_FALSE(committed_files->empty());
  for (const std::string& path : *committed_files) {
    SCOPED_TRACE(path);
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const BenchResultJson message = Parse(text.str());
    EXPECT_EQ(message.platform().name(), "cuda");
    ASSERT_EQ(message.workloads_size(), 4);
    const BenchResultJson::Arm& skip = message.workloads(0).arms().skip();
    EXPECT_TRUE(skip.ran());
    EXPECT_GT(skip.median_ttft_ms(), 0);
    EXPECT_TRUE(skip.has_host_issue_ms());
    EXPECT_GT(skip.op_times().ms().dense_mha_prefill(), 0);
    EXPECT_TRUE(message.workloads(0).outputs_equal());
    EXPECT_FALSE(message.workloads(3).arms().no_indexer().ran());
  }
}

}  // namespace
}  // namespace dsa::prefill_bench

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    dsa::prefill_bench::committed_files->push_back(argv[i]);
  }
  return RUN_ALL_TESTS();
}
