#include "model/deepseek_v32/plan_tool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/model_config.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

struct Result {
  int rc;
  std::string out;
  std::string err;
};

// Runs the tool as `plan ARGS...` against the global registry (the cpu, rocm
// and cuda plugins are linked in).
Result RunPlan(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int rc = RunPlanTool(args, platform::Registry::Global(), out, err);
  return {rc, out.str(), err.str()};
}

std::vector<std::string> Keys(const Struct& s) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : s.fields()) keys.push_back(key);
  return keys;
}

// The JSON layer record, checked for exactly the documented fields and types.
struct JsonLayer {
  int layer;
  bool mtp;
  std::string indexer;
  std::string prefill_branch;
  bool k_cache_write;
};

struct JsonPlan {
  std::string model;
  std::string platform;
  std::vector<JsonLayer> layers;
  std::map<std::string, int> calls;
  // An indexer_calls count; -1 when the JSON lacks it.
  int call(const std::string& key) const {
    auto it = calls.find(key);
    return it == calls.end() ? -1 : it->second;
  }
};

// Parses with protobuf's JSON parser into a generic Struct, so malformed JSON
// fails here, then checks the schema field by field.
JsonPlan ParsePlanJson(const std::string& text) {
  JsonPlan plan;
  Struct root;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &root);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text;
  EXPECT_THAT(Keys(root), UnorderedElementsAre("model", "platform", "layers",
                                               "indexer_calls"));
  const auto& f = root.fields();
  if (f.count("model") == 0 || f.count("layers") == 0 ||
      f.count("platform") == 0 || f.count("indexer_calls") == 0) {
    return plan;
  }
  EXPECT_EQ(f.at("model").kind_case(), Value::kStringValue);
  EXPECT_EQ(f.at("platform").kind_case(), Value::kStringValue);
  plan.model = f.at("model").string_value();
  plan.platform = f.at("platform").string_value();
  EXPECT_EQ(f.at("layers").kind_case(), Value::kListValue);
  for (const Value& v : f.at("layers").list_value().values()) {
    EXPECT_EQ(v.kind_case(), Value::kStructValue);
    const Struct& l = v.struct_value();
    EXPECT_THAT(Keys(l),
                UnorderedElementsAre("layer", "mtp", "indexer",
                                     "prefill_branch", "k_cache_write"));
    const auto& lf = l.fields();
    EXPECT_EQ(lf.at("layer").kind_case(), Value::kNumberValue);
    EXPECT_EQ(lf.at("mtp").kind_case(), Value::kBoolValue);
    EXPECT_EQ(lf.at("indexer").kind_case(), Value::kStringValue);
    EXPECT_EQ(lf.at("prefill_branch").kind_case(), Value::kStringValue);
    EXPECT_EQ(lf.at("k_cache_write").kind_case(), Value::kBoolValue);
    const double layer = lf.at("layer").number_value();
    EXPECT_EQ(layer, static_cast<int>(layer));
    plan.layers.push_back({static_cast<int>(layer), lf.at("mtp").bool_value(),
                           lf.at("indexer").string_value(),
                           lf.at("prefill_branch").string_value(),
                           lf.at("k_cache_write").bool_value()});
    EXPECT_THAT(plan.layers.back().indexer,
                ::testing::AnyOf("score", "skip", "shared", "workspace_only"));
    EXPECT_THAT(plan.layers.back().prefill_branch,
                ::testing::AnyOf("dense_mha", "sparse_mqa", "none"));
  }
  EXPECT_EQ(f.at("indexer_calls").kind_case(), Value::kStructValue);
  const Struct& calls = f.at("indexer_calls").struct_value();
  EXPECT_THAT(Keys(calls), UnorderedElementsAre("scored", "skipped", "shared",
                                                "workspace_only"));
  for (const auto& [key, value] : calls.fields()) {
    EXPECT_EQ(value.kind_case(), Value::kNumberValue);
    plan.calls[key] = static_cast<int>(value.number_value());
  }
  // The counts are the tally of the layers.
  std::map<std::string, int> tally = {
      {"scored", 0}, {"skipped", 0}, {"shared", 0}, {"workspace_only", 0}};
  for (const JsonLayer& l : plan.layers) {
    if (l.indexer == "score") ++tally["scored"];
    if (l.indexer == "skip") ++tally["skipped"];
    if (l.indexer == "shared") ++tally["shared"];
    if (l.indexer == "workspace_only") ++tally["workspace_only"];
  }
  EXPECT_EQ(plan.calls, tally);
  // Main layers in order, then the MTP layer(s).
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    EXPECT_EQ(plan.layers[i].layer, static_cast<int>(i));
  }
  return plan;
}

JsonPlan RunJson(std::vector<std::string> args) {
  args.push_back("--format=json");
  const Result r = RunPlan(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return ParsePlanJson(r.out);
}

// The seed's probe: GLM-5.1, ROCm, a pure 1K prefill.
TEST(PlanToolTest, Glm51Rocm1kSkips78AndScoresMtp) {
  const JsonPlan plan =
      RunJson({"--model=glm-5.1", "--platform=rocm", "--requests=0+1024"});
  EXPECT_EQ(plan.model, "glm-5.1");
  EXPECT_EQ(plan.platform, "rocm");
  ASSERT_EQ(plan.layers.size(), 79u);
  EXPECT_EQ(plan.call("skipped"), 78);
  EXPECT_EQ(plan.call("scored"), 1);
  for (int i = 0; i < 78; ++i) {
    EXPECT_FALSE(plan.layers[i].mtp);
    EXPECT_EQ(plan.layers[i].indexer, "skip");
    EXPECT_EQ(plan.layers[i].prefill_branch, "dense_mha");
    EXPECT_TRUE(plan.layers[i].k_cache_write);
  }
  EXPECT_TRUE(plan.layers[78].mtp);
  EXPECT_EQ(plan.layers[78].indexer, "score");
  EXPECT_TRUE(plan.layers[78].k_cache_write);
}

TEST(PlanToolTest, Glm51Rocm8kScoresEverywhere) {
  const JsonPlan plan =
      RunJson({"--model=glm-5.1", "--platform=rocm", "--requests=0+8192"});
  EXPECT_EQ(plan.call("scored"), 79);
  for (const JsonLayer& l : plan.layers) {
    EXPECT_EQ(l.prefill_branch, "sparse_mqa");
  }
}

TEST(PlanToolTest, Glm52SharesAndSkips) {
  const JsonPlan plan =
      RunJson({"--model=glm-5.2", "--platform=rocm", "--requests=0+1024"});
  EXPECT_EQ(plan.call("skipped"), 21);
  EXPECT_EQ(plan.call("shared"), 57);
  EXPECT_EQ(plan.call("scored"), 1);
  EXPECT_EQ(plan.layers[3].indexer, "shared");
  EXPECT_FALSE(plan.layers[3].k_cache_write);
  EXPECT_EQ(plan.layers[6].indexer, "skip");
  EXPECT_EQ(plan.layers[78].indexer, "score");
}

TEST(PlanToolTest, CasesThatStillScore) {
  const std::vector<std::vector<std::string>> cases = {
      {"--requests=100+1,0+1024"},                // mixed batch
      {"--requests=0+1024", "--cudagraph=full"},  // FULL cudagraph
      {"--requests=0+1024", "--capturing"},       // capture
      {"--requests=0+1024", "--force_mqa"},       // force-MQA
      {"--requests=0+1024", "--pcp"},             // PCP
      {"--requests=1024+1025"},                   // 2049 > topk
  };
  for (std::vector<std::string> args : cases) {
    args.push_back("--model=glm-5.1");
    args.push_back("--platform=rocm");
    const JsonPlan plan = RunJson(args);
    EXPECT_EQ(plan.call("scored"), 79) << args[0] << " " << args[1];
    EXPECT_EQ(plan.call("skipped"), 0);
  }
}

TEST(PlanToolTest, PiecewiseCudagraphSkips) {
  const JsonPlan plan = RunJson({"--model=glm-5.1", "--platform=rocm",
                                 "--requests=0+1024", "--cudagraph=piecewise"});
  EXPECT_EQ(plan.call("skipped"), 78);
}

TEST(PlanToolTest, ProfileRunReservesWorkspace) {
  const JsonPlan plan =
      RunJson({"--model=glm-5.2", "--platform=rocm", "--profile_run"});
  EXPECT_EQ(plan.call("workspace_only"), 22);
  EXPECT_EQ(plan.call("shared"), 57);
  for (const JsonLayer& l : plan.layers) {
    EXPECT_FALSE(l.k_cache_write);
    EXPECT_EQ(l.prefill_branch, "none");
  }
}

TEST(PlanToolTest, CpuScoresAndCudaSkipsLikeRocm) {
  const JsonPlan cpu =
      RunJson({"--model=glm-5.1", "--platform=cpu", "--requests=0+1024"});
  EXPECT_EQ(cpu.platform, "cpu");
  EXPECT_EQ(cpu.call("scored"), 79);
  const JsonPlan cuda = RunJson({"--model=glm-5.1", "--platform=cuda",
                                 "--arch=sm_90", "--requests=0+1024"});
  const JsonPlan rocm = RunJson({"--model=glm-5.1", "--platform=rocm",
                                 "--arch=gfx950", "--requests=0+1024"});
  ASSERT_EQ(cuda.layers.size(), rocm.layers.size());
  for (size_t i = 0; i < cuda.layers.size(); ++i) {
    EXPECT_EQ(cuda.layers[i].indexer, rocm.layers[i].indexer);
  }
  EXPECT_EQ(cuda.call("skipped"), 78);
}

// MTP=3: 3-token requests are decodes to the indexer, prefills to the MLA.
TEST(PlanToolTest, SpecTokensThresholdMismatchSkips) {
  const JsonPlan plan = RunJson({"--model=glm-5.1", "--platform=rocm",
                                 "--spec_tokens=3", "--requests=10+3,20+3"});
  EXPECT_EQ(plan.call("skipped"), 78);
  EXPECT_EQ(plan.call("scored"), 1);
}

TEST(PlanToolTest, DcpIsAConfigurationErrorOnRocmOnly) {
  const Result rocm = RunPlan(
      {"--model=glm-5.1", "--platform=rocm", "--requests=0+1024", "--dcp=2"});
  EXPECT_EQ(rocm.rc, 2);
  EXPECT_THAT(rocm.err, HasSubstr("decode context parallel"));
  const JsonPlan cuda = RunJson(
      {"--model=glm-5.1", "--platform=cuda", "--requests=0+1024", "--dcp=2"});
  EXPECT_EQ(cuda.call("skipped"), 78);
}

TEST(PlanToolTest, ModelFromAFile) {
  ASSERT_OK_AND_ASSIGN(ModelConfig glm, LoadPreset("glm-5.1"));
  DeepseekV32Config custom = glm.proto();
  custom.set_name("glm-5.1-topk512");
  custom.mutable_indexer()->set_index_topk(512);
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/glm-topk512.textproto");
  std::ofstream(path) << custom.DebugString();
  const JsonPlan plan = RunJson(
      {absl::StrCat("--model=", path), "--platform=rocm", "--requests=0+1024"});
  EXPECT_EQ(plan.model, "glm-5.1-topk512");
  EXPECT_EQ(plan.call("scored"), 79);  // 1024 > 512
}

// A checkpoint's config.json, or its directory, plans as the preset it
// matches: the same table but for the model's name.
TEST(PlanToolTest, ModelFromAConfigJsonOrCheckpointDirectory) {
  for (const char* name : {"glm-5.1", "glm-5.2", "deepseek-v3.2"}) {
    SCOPED_TRACE(name);
    const Result preset = RunPlan({absl::StrCat("--model=", name),
                                   "--platform=rocm", "--requests=0+1024"});
    ASSERT_EQ(preset.rc, 0) << preset.err;
    const std::string json =
        absl::StrCat("model/deepseek_v32/testdata/", name, ".config.json");
    const Result from_json = RunPlan({absl::StrCat("--model=", json),
                                      "--platform=rocm", "--requests=0+1024"});
    ASSERT_EQ(from_json.rc, 0) << from_json.err;
    EXPECT_EQ(from_json.out.substr(from_json.out.find('\n')),
              preset.out.substr(preset.out.find('\n')));
    EXPECT_EQ(from_json.out.rfind("model testdata: ", 0), 0u) << from_json.out;
  }
  // A directory holding config.json (weights or not: plan opens none).
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/GLM-5.2");
  ::mkdir(dir.c_str(), 0755);
  std::ifstream in("model/deepseek_v32/testdata/glm-5.2.config.json");
  std::ofstream(dir + "/config.json") << in.rdbuf();
  const JsonPlan plan = RunJson(
      {absl::StrCat("--model=", dir), "--platform=rocm", "--requests=0+1024"});
  EXPECT_EQ(plan.model, "glm-5.2");
  EXPECT_EQ(plan.call("shared"), 57);
}

TEST(PlanToolTest, TableShowsEachDecisionAndWhy) {
  const Result r =
      RunPlan({"--model=glm-5.1", "--platform=rocm", "--requests=0+1024"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("platform rocm gfx942"));
  EXPECT_THAT(r.out, HasSubstr("0-77    main  skip     dense_mha  write    "
                               "pure prefill, max len 1024 <= index_topk "
                               "2048"));
  EXPECT_THAT(r.out, HasSubstr("78      mtp   score    dense_mha  write    "
                               "MTP layer"));
  EXPECT_THAT(r.out, HasSubstr("indexer calls: 1 scored, 78 skipped, 0 "
                               "shared, 0 workspace_only"));
  const Result long_prefill =
      RunPlan({"--model=glm-5.1", "--platform=rocm", "--requests=0+8192"});
  EXPECT_THAT(long_prefill.out, HasSubstr("prefill 8192 > index_topk 2048"));
  EXPECT_THAT(long_prefill.out, HasSubstr("indexer calls: 79 scored, 0 "
                                          "skipped"));
  const Result mixed = RunPlan(
      {"--model=glm-5.1", "--platform=rocm", "--requests=100+1,0+1024"});
  EXPECT_THAT(mixed.out, HasSubstr("mixed batch: 1 decode token"));
}

TEST(PlanToolTest, HelpGoesToStdout) {
  const Result r = RunPlan({"--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, StartsWith("usage: plan"));
  EXPECT_EQ(r.err, "");
}

// Every error: exit 2, nothing on stdout, exactly one line on stderr.
TEST(PlanToolTest, ErrorsAreOneLineWithStatus2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--requests=0+1"}, "--model is required"},
      {{"--model=glm-5.1"}, "--requests is required"},
      {{"--model=glm-9", "--requests=0+1"}, "unknown model preset"},
      {{"--model=glm-5.1", "--requests=0+"}, "--requests: bad request"},
      {{"--model=glm-5.1", "--requests=0+0"}, "at least one new token"},
      {{"--model=glm-5.1", "--requests=0+999999"}, "max_position_embeddings"},
      {{"--model=glm-5.1", "--requests=0+1", "--platform=tpu"},
       "unknown platform \"tpu\""},
      {{"--model=glm-5.1", "--requests=0+1", "--platform=rocm", "--arch=sm_90"},
       "rocm"},
      {{"--model=glm-5.1", "--requests=0+1", "--platform=rocm", "--dcp=2"},
       "decode context parallel"},
      {{"--model=glm-5.1", "--requests=0+1", "--dcp=0"}, "--dcp=0"},
      {{"--model=glm-5.1", "--requests=0+1", "--spec_tokens=x"},
       "--spec_tokens=x"},
      {{"--model=glm-5.1", "--requests=0+1", "--cudagraph=FULL"},
       "--cudagraph"},
      {{"--model=glm-5.1", "--requests=0+1", "--capturing", "--cudagraph=none"},
       "--capturing needs"},
      {{"--model=glm-5.1", "--requests=0+1", "--format=xml"}, "--format"},
      {{"--model=glm-5.1", "--requests=0+1", "--pcp=maybe"}, "--pcp=maybe"},
      {{"--model=glm-5.1", "--requests=0+1", "--nope"}, "unknown flag --nope"},
      {{"--model=glm-5.1", "--requests=0+1", "--platform=ro cm"},
       "--platform=ro cm: expected a name"},
      {{"--model=glm-5.1", "--requests=0+1", "--arch=gfx\n942"},
       "--arch=gfx\\x0a942: expected a name"},
      {{"--model=glm-5.1", "--model=glm-5.2", "--requests=0+1"},
       "--model given twice"},
      {{"--model", "glm-5.1", "--requests=0+1"}, "--model needs a value"},
      {{"--model=/no/such/file.textproto", "--requests=0+1"},
       "model config file /no/such/file.textproto: cannot open: No such file"},
  };
  for (const auto& [args, message] : cases) {
    const Result r = RunPlan(args);
    EXPECT_EQ(r.rc, 2) << message;
    EXPECT_EQ(r.out, "") << message;
    EXPECT_THAT(r.err, StartsWith("plan: ")) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(absl::EndsWith(r.err, "\n"));
  }
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// Checks the documented shape of an error: status 2, nothing on stdout, one
// line on stderr.
void ExpectOneLineError(const Result& r, const std::string& context) {
  EXPECT_EQ(r.rc, 2) << context;
  EXPECT_EQ(r.out, "") << context;
  EXPECT_THAT(r.err, StartsWith("plan: ")) << context;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A fifo given as --model: an error at once, not a read that waits forever
// for a writer. Should the tool block, opening the write end and closing it
// again releases it, so the test fails instead of hanging.
TEST(PlanToolTest, FifoModelIsRefusedPromptly) {
  const std::string fifo = TempPath("model.fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto run = std::async(std::launch::async, [&] {
    return RunPlan({absl::StrCat("--model=", fifo), "--requests=0+1"});
  });
  if (run.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "plan blocked on the fifo " << fifo;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  const Result r = run.get();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ExpectOneLineError(r, "fifo");
  EXPECT_THAT(r.err, HasSubstr("is a fifo (named pipe), not a regular file"));
}

TEST(PlanToolTest, DirectoryAndDeviceModelsAreRefused) {
  // A directory is a checkpoint, which this one is not.
  Result r =
      RunPlan({absl::StrCat("--model=", TempPath("")), "--requests=0+1"});
  ExpectOneLineError(r, "directory");
  EXPECT_THAT(r.err, HasSubstr("no config.json (not a Hugging Face checkpoint "
                               "directory)"));
  r = RunPlan({"--model=/dev/zero", "--requests=0+1"});
  ExpectOneLineError(r, "device");
  EXPECT_THAT(r.err, HasSubstr("is a character device"));
}

TEST(PlanToolTest, HugeModelFileIsRefused) {
  const std::string path = TempPath("huge.textproto");
  std::ofstream(path) << std::string(2 << 20, '#');
  const Result r = RunPlan({absl::StrCat("--model=", path), "--requests=0+1"});
  ExpectOneLineError(r, "huge");
  EXPECT_THAT(r.err, HasSubstr("larger than the limit of 1048576 bytes"));
}

// A 900 KB value anywhere is echoed as its first 80 characters and its size.
TEST(PlanToolTest, HugeArgumentsAreNotEchoedWhole) {
  const std::string big(900 * 1024, 'q');
  const std::string digits(900 * 1024, '9');
  const std::vector<std::vector<std::string>> cases = {
      {"--model=" + big, "--requests=0+1"},
      {"--model=/" + big, "--requests=0+1"},
      {"--model=" + big + ".textproto", "--requests=0+1"},
      {"--model=glm-5.1", "--requests=" + digits + "+1"},
      {"--model=glm-5.1", "--requests=0+" + big},
      {"--model=glm-5.1", "--requests=0+1", "--dcp=" + digits},
      {"--model=glm-5.1", "--requests=0+1", "--spec_tokens=" + big},
      {"--model=glm-5.1", "--requests=0+1", "--format=" + big},
      {"--model=glm-5.1", "--requests=0+1", "--cudagraph=" + big},
      {"--model=glm-5.1", "--requests=0+1", "--platform=" + big},
      {"--model=glm-5.1", "--requests=0+1", "--platform=rocm", "--arch=" + big},
      {"--model=glm-5.1", "--requests=0+1", "--pcp=" + big},
      {"--model=glm-5.1", "--requests=0+1", "--" + big},
      {"--model=glm-5.1", "--requests=0+1", "--" + big + "=1"},
      {"--model=glm-5.1", "--requests=0+1", big},
  };
  for (const std::vector<std::string>& args : cases) {
    const Result r = RunPlan(args);
    const std::string context = args.back().substr(0, 20);
    ExpectOneLineError(r, context);
    EXPECT_LT(r.err.size(), 300u) << context << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(" bytes)")) << context << ": " << r.err;
  }
}

// A syntax error names the line and column and quotes at most the offending
// token, never the rest of the file.
TEST(PlanToolTest, SyntaxErrorNamesLineAndColumnOnly) {
  const std::string path = TempPath("syntax.textproto");
  const std::string long_token(100000, 'z');
  std::ofstream(path) << "name: \"custom\"\n"
                      << "num_hidden_layers: 3\n"
                      << "num_hidden_layers 4 private_text_line_2\n"
                      << "private_text_line_3: 5\n";
  Result r = RunPlan({absl::StrCat("--model=", path), "--requests=0+1"});
  ExpectOneLineError(r, "syntax");
  EXPECT_THAT(r.err, HasSubstr("line 3, column 19"));
  EXPECT_THAT(r.err, Not(HasSubstr("custom")));
  EXPECT_THAT(r.err, Not(HasSubstr("private_text")));

  std::ofstream(path) << "name: \"custom\"\n"
                      << "num_hidden_layers: " << long_token << "\n";
  r = RunPlan({absl::StrCat("--model=", path), "--requests=0+1"});
  ExpectOneLineError(r, "long token");
  EXPECT_THAT(r.err, HasSubstr("line 2, column 20"));
  EXPECT_LT(r.err.size(), 400u) << r.err;
}

// A stream whose every write fails, like stdout redirected to /dev/full.
class FullBuffer : public std::streambuf {
 protected:
  int_type overflow(int_type) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};

TEST(PlanToolTest, FailedOutputIsAnError) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"--model=glm-5.1", "--requests=0+1024", "--format=json"},
           {"--model=glm-5.1", "--requests=0+1024"},
           {"--help"}}) {
    FullBuffer full;
    std::ostream out(&full);
    std::ostringstream err;
    EXPECT_EQ(RunPlanTool(args, platform::Registry::Global(), out, err), 1)
        << args[0];
    EXPECT_EQ(err.str(), "plan: cannot write the output\n");
  }
}

TEST(ParsePlanArgsTest, Defaults) {
  ASSERT_OK_AND_ASSIGN(PlanOptions o,
                       ParsePlanArgs(std::vector<std::string>{
                           "--model=glm-5.1", "--requests=0+1024"}));
  EXPECT_EQ(o.platform, "");
  EXPECT_EQ(o.arch, "");
  EXPECT_EQ(o.format, PlanFormat::kTable);
  EXPECT_EQ(o.engine.num_speculative_tokens, 0);
  EXPECT_EQ(o.engine.decode_context_parallel_size, 1);
  EXPECT_EQ(o.forward.cudagraph_runtime_mode, CudagraphMode::kNone);
  EXPECT_FALSE(o.forward.capturing);
  EXPECT_FALSE(o.profile_run);
  ASSERT_EQ(o.requests.size(), 1u);
  EXPECT_EQ(o.requests[0].num_new_tokens, 1024);
}

TEST(ParsePlanArgsTest, CapturingDefaultsToPiecewise) {
  ASSERT_OK_AND_ASSIGN(
      PlanOptions o, ParsePlanArgs(std::vector<std::string>{
                         "--model=glm-5.1", "--requests=0+1", "--capturing"}));
  EXPECT_TRUE(o.forward.capturing);
  EXPECT_EQ(o.forward.cudagraph_runtime_mode, CudagraphMode::kPiecewise);
  ASSERT_OK_AND_ASSIGN(PlanOptions full,
                       ParsePlanArgs(std::vector<std::string>{
                           "--model=glm-5.1", "--requests=0+1",
                           "--capturing=true", "--cudagraph=full"}));
  EXPECT_EQ(full.forward.cudagraph_runtime_mode, CudagraphMode::kFull);
  EXPECT_THAT(ParsePlanArgs(std::vector<std::string>{
                  "--model=glm-5.1", "--requests=0+1", "--capturing=false",
                  "--cudagraph=none"}),
              ::dsa::testing::IsOk());
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
