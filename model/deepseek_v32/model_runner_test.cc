// The layer forward and the stack on every platform's kernels, with the
// indexer skip on (a CUDA-alike platform's capabilities: ROCm gfx942) and off
// (the same capabilities with is_cuda_alike false: what every platform did
// before the skip): the arms' outputs, caches and top-k, the float64
// reference, decodes after a skipped prefill, profile runs, bad steps, the
// numerics of bf16 activations and fp8 weights. Kernels are called through
// counting wrappers around the registered ones (model_runner_test_util.h),
// so "never calls scoring" is observed, not assumed. The ops a step launches
// are model_runner_ops_test's; what a model needs of the device,
// model_runner_memory_test's.
#include "model/deepseek_v32/model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/model_runner_test_util.h"
#include "model/deepseek_v32/reference_stack.h"
#include "platform/fault_injection.h"
#include "platform/registry.h"
#include "platform/status_macros.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Tolerance of the stack against the float64 reference (‖out - ref‖/‖ref‖).
// The reference rounds its own latent values to the cache's type; where the
// float32 and float64 values of an element straddle a rounding boundary they
// land on neighbouring bf16/fp8 values. That happens to a few hundredths of a
// percent of the elements, each off by one ulp (2^-8 relative for bf16), and
// gives 1e-4 to 8e-4 after 4-9 layers; float32 arithmetic alone is ~1e-6.
// A real error (a wrong position, key or row) is of order 1.
constexpr double kReferenceTolerance = 2e-3;

// The same on a GPU platform. Its attention kernels multiply on the matrix
// cores in bf16 (q, the decompressed keys and values, the softmax weights are
// rounded to bf16, 2^-9 relative each), so a layer adds ~1e-3; with an fp8
// latent cache a bf16-sized difference also moves a latent value across an
// fp8 rounding boundary now and then (2^-4 steps). Measured on the H200
// (2026-11-30, float32 activations): bf16 latent 2.2e-3 to 3.9e-3, fp8
// latent 7.5e-3 to 2.4e-2 after 4-9 layers.
constexpr double kGpuReferenceTolerance = 1e-2;
constexpr double kGpuFp8ReferenceTolerance = 5e-2;

double ReferenceTolerance(const std::string& platform_id, bool fp8_latent) {
  if (platform_id == "cpu") return kReferenceTolerance;
  return fp8_latent ? kGpuFp8ReferenceTolerance : kGpuReferenceTolerance;
}

// Checks an error against its bound and prints it, so device logs carry the
// measured figures.
void ExpectWithinReference(const std::string& what, double error,
                           double bound) {
  std::printf("[ reference ] %s: relative error %.3g (bound %.3g)\n",
              what.c_str(), error, bound);
  EXPECT_LT(error, bound) << what;
}

// ‖a - b‖ / ‖b‖ against a float64 reference.
double RelativeError(const std::vector<float>& a,
                     const std::vector<double>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

struct SkipCase {
  std::string preset;
  bool fp8_latent_cache;
};
void PrintTo(const SkipCase& c, std::ostream* os) {
  *os << c.preset << (c.fp8_latent_cache ? " fp8" : " bf16") << " latent cache";
}

class SkipEquivalenceTest
    : public ModelRunnerTestBase,
      public ::testing::WithParamInterface<std::tuple<std::string, SkipCase>> {
 protected:
  void SetUp() override { SetUpPlatform(std::get<0>(GetParam())); }
  const SkipCase& Case() const { return std::get<1>(GetParam()); }
};

// A pure short prefill: the skip arm scores only on the MTP layer(s), both
// arms give bitwise-equal outputs and leave identical caches, and both match
// the float64 reference.
TEST_P(SkipEquivalenceTest, PureShortPrefillSkipsScoringWithEqualOutputs) {
  RuntimeOptions options;
  options.block_size = 16;
  options.fp8_latent_cache = Case().fp8_latent_cache;
  auto skip = MakeModel(Case().preset, skip_caps_, options);
  auto no_skip = MakeModel(Case().preset, no_skip_caps_, options);
  ASSERT_TRUE(skip && no_skip);
  const ModelConfig& config = skip->planner().config();
  const int topk = config.index_topk();
  const int hidden = config.proto().hidden_size();
  // Lengths topk-1 and topk, and a short one: every request keeps all keys.
  const std::vector<StepRequest> requests = {
      {1, 0, topk - 1}, {2, 0, topk}, {3, 0, 5}};
  const std::vector<float> x = RandomHidden(Tokens(requests), hidden, 11);

  CallCounter::calls = {};
  ASSERT_OK_AND_ASSIGN(StepOutput a, skip->Step({}, requests, x));
  const OpCallCounts skip_calls = CallCounter::calls;
  CallCounter::calls = {};
  ASSERT_OK_AND_ASSIGN(StepOutput b, no_skip->Step({}, requests, x));
  const OpCallCounts no_skip_calls = CallCounter::calls;

  const int mtp_indexers = config.num_mtp_layers();
  const int main_indexers = config.num_indexer_layers() - mtp_indexers;
  EXPECT_EQ(a.plan.counts.skipped, main_indexers);
  EXPECT_EQ(a.plan.counts.scored, mtp_indexers);
  EXPECT_EQ(skip_calls.indexer_logits, mtp_indexers);
  EXPECT_EQ(skip_calls.indexer_topk, mtp_indexers);
  EXPECT_EQ(skip_calls.indexer_q, mtp_indexers);
  EXPECT_EQ(no_skip_calls.indexer_logits, config.num_indexer_layers());
  EXPECT_EQ(no_skip_calls.indexer_topk, config.num_indexer_layers());
  // Keys are written on every indexer layer in both arms; every layer runs
  // the dense prefill, after one reservation of its scratch for the step.
  EXPECT_EQ(skip_calls.indexer_k_write, config.num_indexer_layers());
  EXPECT_EQ(no_skip_calls.indexer_k_write, config.num_indexer_layers());
  EXPECT_EQ(skip_calls.dense_mha_prefill, config.num_layers() + 1);
  EXPECT_EQ(skip_calls.dense_mha_prefill, a.op_calls.dense_mha_prefill + 1);
  EXPECT_EQ(skip_calls.sparse_mla, 0);
  EXPECT_EQ(a.op_calls.indexer_logits, skip_calls.indexer_logits);

  // The same dense computation: equal to the bit on the CPU kernels.
  ASSERT_EQ(a.hidden.size(), x.size());
  EXPECT_EQ(std::memcmp(a.hidden.data(), b.hidden.data(), x.size() * 4), 0);
  EXPECT_EQ(std::memcmp(a.mtp_hidden.data(), b.mtp_hidden.data(), x.size() * 4),
            0);
  for (int l = 0; l < config.num_layers(); ++l) {
    ASSERT_OK_AND_ASSIGN(auto ka, skip->ReadIndexerKCache(l));
    ASSERT_OK_AND_ASSIGN(auto kb, no_skip->ReadIndexerKCache(l));
    EXPECT_EQ(ka, kb) << "indexer K cache of layer " << l;
    ASSERT_OK_AND_ASSIGN(auto la, skip->ReadLatentCache(l));
    ASSERT_OK_AND_ASSIGN(auto lb, no_skip->ReadLatentCache(l));
    EXPECT_EQ(la, lb) << "latent cache of layer " << l;
  }

  // Each request against the float64 reference over its own sequence.
  std::vector<LayerWeights> weights;
  for (int l = 0; l < config.num_layers(); ++l) {
    weights.push_back(LayerWeights::Random(config, l, 7));
  }
  const attention::DType latent = options.fp8_latent_cache
                                      ? attention::DType::kFloat8E4m3fnuz
                                      : attention::DType::kBFloat16;
  int64_t row = 0;
  for (const StepRequest& r : requests) {
    const int64_t n = r.num_new_tokens;
    std::vector<float> xr(x.begin() + row * hidden,
                          x.begin() + (row + n) * hidden);
    const ReferenceOutput ref =
        ReferenceForward(config, weights, xr, n, latent);
    std::vector<float> got(a.hidden.begin() + row * hidden,
                           a.hidden.begin() + (row + n) * hidden);
    std::vector<float> got_mtp(a.mtp_hidden.begin() + row * hidden,
                               a.mtp_hidden.begin() + (row + n) * hidden);
    const double bound =
        ReferenceTolerance(std::get<0>(GetParam()), Case().fp8_latent_cache);
    const std::string what = std::get<0>(GetParam()) + " " + Case().preset +
                             (Case().fp8_latent_cache ? " fp8" : " bf16") +
                             " request " + std::to_string(r.request_id);
    ExpectWithinReference(what, RelativeError(got, ref.hidden), bound);
    ExpectWithinReference(what + " mtp", RelativeError(got_mtp, ref.mtp_hidden),
                          bound);
    row += n;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Presets, SkipEquivalenceTest,
    ::testing::Combine(::testing::ValuesIn(RunnerPlatforms()),
                       ::testing::Values(SkipCase{"tiny-v3.2", false},
                                         SkipCase{"tiny-v3.2", true},
                                         SkipCase{"tiny-glm-5.1", false},
                                         SkipCase{"tiny-glm-5.2", false},
                                         SkipCase{"tiny-glm-5.2", true})),
    [](const ::testing::TestParamInfo<std::tuple<std::string, SkipCase>>&
           info) {
      const SkipCase& c = std::get<1>(info.param);
      std::string name = std::get<0>(info.param) + "_" + c.preset +
                         (c.fp8_latent_cache ? "_fp8" : "_bf16");
      for (char& ch : name) {
        if (ch == '-' || ch == '.') ch = '_';
      }
      return name;
    });

// Keys written during a skipped prefill are scored later exactly as if the
// prefill had been scored: the next decodes cross topk (topk+1 keys and
// more) and select the same top-k in both arms.
void CheckLaterDecodeSelectsTheSameTopK(DeepseekV32Model& skip,
                                        DeepseekV32Model& no_skip) {
  const ModelConfig& config = skip.planner().config();
  const int64_t topk = config.index_topk();
  const int hidden = config.proto().hidden_size();
  // One request of exactly topk tokens (dense, skipped), then decodes.
  std::vector<StepRequest> prefill = {{1, 0, topk}};
  const std::vector<float> x = RandomHidden(topk, hidden, 21);
  ASSERT_OK_AND_ASSIGN(StepOutput pa, skip.Step({}, prefill, x));
  ASSERT_OK_AND_ASSIGN(StepOutput pb, no_skip.Step({}, prefill, x));
  ASSERT_GT(pa.plan.counts.skipped, 0);
  ASSERT_EQ(pb.plan.counts.skipped, 0);

  StepOptions capture;
  capture.capture_topk = true;
  for (int step = 0; step < 3; ++step) {
    const std::vector<StepRequest> decode = {{1, topk + step, 1}};
    const std::vector<float> xd = RandomHidden(1, hidden, 100 + step);
    CallCounter::calls = {};
    ASSERT_OK_AND_ASSIGN(StepOutput da, skip.Step({}, decode, xd, capture));
    EXPECT_EQ(CallCounter::calls.indexer_logits, config.num_indexer_layers())
        << "a decode scores on every indexer layer";
    ASSERT_OK_AND_ASSIGN(StepOutput db, no_skip.Step({}, decode, xd, capture));
    for (int l = 0; l < config.num_layers(); ++l) {
      EXPECT_EQ(da.topk[l], db.topk[l]) << "layer " << l << " step " << step;
      // topk + 1 + step keys: the selection is full, no -1 padding.
      EXPECT_EQ(std::count(da.topk[l].begin(), da.topk[l].end(), -1), 0)
          << "layer " << l;
    }
    EXPECT_EQ(std::memcmp(da.hidden.data(), db.hidden.data(), hidden * 4), 0);
  }
}

TEST_P(ModelRunnerTest, LaterDecodeAfterSkippedPrefillSelectsTheSameTopK) {
  RuntimeOptions options;
  options.block_size = 16;
  auto skip = MakeModel("tiny-glm-5.2", skip_caps_, options);
  auto no_skip = MakeModel("tiny-glm-5.2", no_skip_caps_, options);
  CheckLaterDecodeSelectsTheSameTopK(*skip, *no_skip);
}

// The same at the real index_topk: a 2048-token prefill skipped, decodes at
// 2049 and beyond.
TEST_P(ModelRunnerTest, DecodeAt2049AfterSkipped2048PrefillSelectsTheSameTopK) {
  auto base = LoadModelConfig("tiny-v3.2");
  ASSERT_TRUE(base.ok());
  DeepseekV32Config proto = base->proto();
  proto.set_name("tiny-v3.2-topk2048");
  proto.set_num_hidden_layers(2);
  proto.set_num_attention_heads(2);
  proto.mutable_indexer()->set_index_topk(2048);
  proto.mutable_indexer()->set_index_n_heads(2);
  ASSERT_OK_AND_ASSIGN(ModelConfig config, ModelConfig::FromProto(proto));
  RuntimeOptions options;
  options.block_size = 64;
  options.num_blocks = 40;
  auto skip = MakeModel(config, skip_caps_, options, {}, 3);
  auto no_skip = MakeModel(config, no_skip_caps_, options, {}, 3);
  ASSERT_TRUE(skip && no_skip);
  CheckLaterDecodeSelectsTheSameTopK(*skip, *no_skip);
}

// Every case the seed lists as "still scores", in the skip arm.
TEST_P(ModelRunnerTest, MixedLongMtpFullGraphAndCaptureStillScore) {
  RuntimeOptions options;
  options.block_size = 16;
  const std::string preset = "tiny-v3.2";
  const int hidden = 256;

  struct Case {
    std::string name;
    ForwardContext forward;
    EngineConfig engine;
  };
  ForwardContext full;
  full.cudagraph_runtime_mode = CudagraphMode::kFull;
  ForwardContext capture;
  capture.cudagraph_runtime_mode = CudagraphMode::kPiecewise;
  capture.capturing = true;
  EngineConfig force_mqa;
  force_mqa.force_mqa = true;
  for (const Case& c : std::vector<Case>{{"full cudagraph", full, {}},
                                         {"capturing", capture, {}},
                                         {"force-MQA", {}, force_mqa}}) {
    SCOPED_TRACE(c.name);
    auto model = MakeModel(preset, skip_caps_, options, c.engine);
    const ModelConfig& config = model->planner().config();
    const std::vector<StepRequest> requests = {{1, 0, 20}};
    CallCounter::calls = {};
    ASSERT_OK_AND_ASSIGN(
        StepOutput out,
        model->Step(c.forward, requests, RandomHidden(20, hidden, 5)));
    EXPECT_EQ(out.plan.counts.skipped, 0);
    EXPECT_EQ(CallCounter::calls.indexer_logits, config.num_indexer_layers());
    EXPECT_EQ(CallCounter::calls.indexer_topk, config.num_indexer_layers());
  }

  // A mixed batch (a decode beside a prefill) and a prefill longer than
  // topk (65 > 64): every indexer layer scores.
  auto model = MakeModel(preset, skip_caps_, options);
  const ModelConfig& config = model->planner().config();
  ASSERT_OK(
      model->Step({}, {{1, 0, 10}}, RandomHidden(10, hidden, 1)).status());
  CallCounter::calls = {};
  ASSERT_OK_AND_ASSIGN(
      StepOutput mixed,
      model->Step({}, {{1, 10, 1}, {2, 0, 30}}, RandomHidden(31, hidden, 2)));
  EXPECT_EQ(mixed.plan.counts.skipped, 0);
  EXPECT_EQ(CallCounter::calls.indexer_logits, config.num_indexer_layers());
  // Decodes go sparse, the prefill dense (and one reservation of its
  // scratch for the step).
  EXPECT_EQ(CallCounter::calls.sparse_mla, config.num_layers());
  EXPECT_EQ(CallCounter::calls.dense_mha_prefill, config.num_layers() + 1);

  CallCounter::calls = {};
  ASSERT_OK_AND_ASSIGN(
      StepOutput longer,
      model->Step({}, {{3, 0, 65}}, RandomHidden(65, hidden, 3)));
  EXPECT_EQ(longer.plan.counts.skipped, 0);
  EXPECT_EQ(CallCounter::calls.indexer_logits, config.num_indexer_layers());
  EXPECT_EQ(CallCounter::calls.sparse_mla, config.num_layers());
  EXPECT_EQ(CallCounter::calls.dense_mha_prefill, 0);
}

// With MTP=3 the indexer counts 3-token requests as decodes while the MLA
// counts them as prefills; such a batch still skips, and equals the arm that
// scores.
TEST_P(ModelRunnerTest, MtpThreeTokenBatchStillSkipsWithEqualOutputs) {
  RuntimeOptions options;
  options.block_size = 16;
  EngineConfig mtp3;
  mtp3.num_speculative_tokens = 3;
  auto skip = MakeModel("tiny-glm-5.1", skip_caps_, options, mtp3);
  auto no_skip = MakeModel("tiny-glm-5.1", no_skip_caps_, options, mtp3);
  const ModelConfig& config = skip->planner().config();
  const int hidden = config.proto().hidden_size();
  const std::vector<StepRequest> prefill = {{1, 0, 10}, {2, 0, 20}};
  const std::vector<float> x = RandomHidden(30, hidden, 8);
  ASSERT_OK(skip->Step({}, prefill, x).status());
  ASSERT_OK(no_skip->Step({}, prefill, x).status());
  const std::vector<StepRequest> verify = {{1, 10, 3}, {2, 20, 3}};
  const std::vector<float> xv = RandomHidden(6, hidden, 9);
  CallCounter::calls = {};
  ASSERT_OK_AND_ASSIGN(StepOutput a, skip->Step({}, verify, xv));
  EXPECT_EQ(a.plan.metadata->indexer.num_decodes, 2);
  EXPECT_EQ(a.plan.metadata->mla.num_prefills, 2);
  EXPECT_EQ(a.plan.counts.skipped,
            config.num_indexer_layers() - config.num_mtp_layers());
  EXPECT_EQ(CallCounter::calls.indexer_logits, config.num_mtp_layers());
  ASSERT_OK_AND_ASSIGN(StepOutput b, no_skip->Step({}, verify, xv));
  EXPECT_EQ(std::memcmp(a.hidden.data(), b.hidden.data(), a.hidden.size() * 4),
            0);
}

// A profile run has no metadata: indexer layers reserve the workspace for
// the largest step, the attention ops run once at the largest step's shapes
// (so that the platform's scratch grows to it) and nothing is scored or
// written to a cache.
TEST_P(ModelRunnerTest, ProfileRunReservesWorkspaceAndWritesNothing) {
  RuntimeOptions options;
  options.block_size = 16;
  options.num_blocks = 8;
  options.max_model_len = 1024;
  options.max_num_batched_tokens = 512;
  auto model = MakeModel("tiny-glm-5.2", skip_caps_, options);
  const ModelConfig& config = model->planner().config();
  std::vector<std::vector<uint8_t>> before;
  for (int l = 0; l < config.num_layers(); ++l) {
    ASSERT_OK_AND_ASSIGN(auto k, model->ReadIndexerKCache(l));
    ASSERT_OK_AND_ASSIGN(auto lat, model->ReadLatentCache(l));
    before.push_back(std::move(k));
    before.push_back(std::move(lat));
  }
  EXPECT_EQ(model->reserved_workspace_bytes(), 0);
  CallCounter::calls = {};
  ASSERT_OK_AND_ASSIGN(ForwardPlan plan, model->ProfileRun({}));
  EXPECT_EQ(plan.counts.workspace_only, config.num_indexer_layers());
  EXPECT_GE(model->reserved_workspace_bytes(),
            attention::IndexerLogits::WorkspaceBytes(512, 1024).value());
  const OpCallCounts& calls = CallCounter::calls;
  EXPECT_EQ(calls.indexer_k_write + calls.indexer_q + calls.indexer_logits +
                calls.indexer_topk + calls.mla_cache_write,
            0);
  // One dense prefill of 512 tokens; sparse MLA over 512 rows and over 1, 2,
  // 4, ..., 128.
  EXPECT_EQ(calls.dense_mha_prefill, 1);
  EXPECT_EQ(calls.sparse_mla, 9);
  for (int l = 0; l < config.num_layers(); ++l) {
    ASSERT_OK_AND_ASSIGN(auto k, model->ReadIndexerKCache(l));
    ASSERT_OK_AND_ASSIGN(auto lat, model->ReadLatentCache(l));
    EXPECT_EQ(k, before[2 * l]) << "layer " << l;
    EXPECT_EQ(lat, before[2 * l + 1]) << "layer " << l;
  }
}

TEST_P(ModelRunnerTest, BadStepsAreClearErrorsAndAllocateNothing) {
  RuntimeOptions options;
  options.block_size = 16;
  options.num_blocks = 4;  // 64 tokens
  options.max_model_len = 4096;
  options.max_num_batched_tokens = 100;
  auto model = MakeModel("tiny-v3.2", skip_caps_, options);
  EXPECT_THAT(model->Step({}, {{1, 0, 8}}, RandomHidden(7, 256, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("hidden has 1792 values, expected 8 tokens")));
  EXPECT_THAT(
      model->Step({}, {{1, 5, 8}}, RandomHidden(8, 256, 1)),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("claims 5 context tokens but the cache holds 0")));
  EXPECT_THAT(model->Step({}, {{1, 0, 101}}, RandomHidden(101, 256, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("exceed max_num_batched_tokens 100")));
  EXPECT_THAT(
      model->Step({}, {{1, 0, 40}, {2, 0, 40}}, RandomHidden(80, 256, 1)),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("needs 6 more cache blocks")));
  EXPECT_THAT(model->Step({}, {{1, 0, 0}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Nothing was allocated by the failed steps: the whole cache is still free.
  ASSERT_OK(model->Step({}, {{1, 0, 64}}, RandomHidden(64, 256, 1)).status());
  EXPECT_OK(model->Release(1));
  EXPECT_THAT(model->Release(1), StatusIs(absl::StatusCode::kNotFound));
}

// The no_indexer bound: a pure short prefill runs no indexer op and gives the
// outputs of the registered decision to the bit (dense MHA reads no top-k),
// leaves the indexer K caches unwritten, and refuses a step that needs a
// top-k before allocating anything.
TEST_P(ModelRunnerTest, NoIndexerBoundRunsNoIndexerWork) {
  RuntimeOptions options;
  options.block_size = 16;
  options.num_blocks = 16;
  RuntimeOptions bound_options = options;
  bound_options.no_indexer = true;
  auto skip = MakeModel("tiny-glm-5.2", skip_caps_, options);
  auto bound = MakeModel("tiny-glm-5.2", skip_caps_, bound_options);
  ASSERT_TRUE(skip && bound);
  const ModelConfig& config = bound->planner().config();
  const int hidden = config.proto().hidden_size();
  const int topk = config.index_topk();
  const std::vector<StepRequest> requests = {{1, 0, topk}, {2, 0, 7}};
  const std::vector<float> x = RandomHidden(Tokens(requests), hidden, 17);
  ASSERT_OK_AND_ASSIGN(StepOutput a, skip->Step({}, requests, x));
  CallCounter::calls = {};
  ASSERT_OK_AND_ASSIGN(StepOutput b, bound->Step({}, requests, x));
  const OpCallCounts calls = CallCounter::calls;
  EXPECT_EQ(calls.indexer_k_write + calls.indexer_q + calls.indexer_logits +
                calls.indexer_topk,
            0);
  EXPECT_EQ(b.op_calls.indexer_k_write, 0);
  EXPECT_EQ(calls.dense_mha_prefill, config.num_layers() + 1);
  EXPECT_EQ(std::memcmp(a.hidden.data(), b.hidden.data(), x.size() * 4), 0);
  EXPECT_EQ(std::memcmp(a.mtp_hidden.data(), b.mtp_hidden.data(), x.size() * 4),
            0);
  for (int l = 0; l < config.num_layers(); ++l) {
    ASSERT_OK_AND_ASSIGN(auto k, bound->ReadIndexerKCache(l));
    EXPECT_EQ(std::count(k.begin(), k.end(), 0), static_cast<long>(k.size()))
        << "indexer K cache of layer " << l;
  }
  // A prefill longer than index_topk takes the sparse branch: refused, and
  // nothing is allocated (the whole cache still takes four topk-token
  // prefills).
  ASSERT_OK(bound->Release(1));
  ASSERT_OK(bound->Release(2));
  EXPECT_THAT(
      bound->Step({}, {{3, 0, topk + 1}}, RandomHidden(topk + 1, hidden, 3)),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("needs the indexer's top-k")));
  ASSERT_OK(bound
                ->Step({},
                       {{4, 0, topk}, {5, 0, topk}, {6, 0, topk}, {7, 0, topk}},
                       RandomHidden(4 * topk, hidden, 3))
                .status());
  EXPECT_OK(bound->ProfileRun({}).status());
  EXPECT_EQ(bound->reserved_workspace_bytes(), 0);
}

// Steps reuse the cache: a prefill in two chunks and then decodes give the
// float64 reference of the whole sequence, on the dense and the sparse path.
TEST_P(ModelRunnerTest, IncrementalStepsMatchTheWholeSequenceReference) {
  for (bool force_mqa : {false, true}) {
    SCOPED_TRACE(force_mqa ? "sparse MQA prefill" : "dense MHA prefill");
    RuntimeOptions options;
    options.block_size = 16;
    EngineConfig engine;
    engine.force_mqa = force_mqa;
    auto model = MakeModel("tiny-glm-5.2", skip_caps_, options, engine);
    const ModelConfig& config = model->planner().config();
    const int hidden = config.proto().hidden_size();
    const int64_t total = 40;  // <= topk: the sparse path keeps every key
    const std::vector<float> x = RandomHidden(total, hidden, 31);
    std::vector<float> got;
    int64_t done = 0;
    for (int64_t chunk :
         {int64_t{23}, int64_t{14}, int64_t{1}, int64_t{1}, int64_t{1}}) {
      std::vector<float> xs(x.begin() + done * hidden,
                            x.begin() + (done + chunk) * hidden);
      ASSERT_OK_AND_ASSIGN(StepOutput out,
                           model->Step({}, {{9, done, chunk}}, xs));
      got.insert(got.end(), out.hidden.begin(), out.hidden.end());
      done += chunk;
    }
    std::vector<LayerWeights> weights;
    for (int l = 0; l < config.num_layers(); ++l) {
      weights.push_back(LayerWeights::Random(config, l, 7));
    }
    const ReferenceOutput ref = ReferenceForward(config, weights, x, total,
                                                 attention::DType::kBFloat16);
    ExpectWithinReference(
        GetParam() + (force_mqa ? " incremental sparse" : " incremental dense"),
        RelativeError(got, ref.hidden), ReferenceTolerance(GetParam(), false));
  }
}

// Weights drawn on the device by random_fill are LayerWeights::Random's, bit
// for bit, so the float64 reference multiplies the same values.
TEST_P(ModelRunnerTest, DeviceDrawnWeightsEqualTheHostRandomWeights) {
  auto model = MakeModel("tiny-glm-5.2", skip_caps_, {}, {}, /*seed=*/7);
  ASSERT_TRUE(model);
  const ModelConfig& config = model->planner().config();
  for (int l : {0, 3, config.num_layers() - 1}) {
    const LayerWeights host = LayerWeights::Random(config, l, 7);
    for (const WeightSpec& spec : LayerWeightSpecs(config, l)) {
      ASSERT_OK_AND_ASSIGN(std::vector<float> device,
                           model->ReadWeight(l, spec.id));
      EXPECT_EQ(device, host.tensor(spec.id))
          << "layer " << l << " " << spec.name;
    }
    if (!config.owns_indexer(l)) {
      EXPECT_THAT(model->ReadWeight(l, WeightId::kIndexerWk),
                  StatusIs(absl::StatusCode::kNotFound));
    }
  }
}

// A step that reads nothing back still runs every layer (its caches are
// written) and leaves the model ready for the next step.
TEST_P(ModelRunnerTest, AStepThatReadsNothingBackStillWritesItsCaches) {
  RuntimeOptions options;
  options.block_size = 16;
  auto quiet = MakeModel("tiny-glm-5.2", skip_caps_, options);
  auto loud = MakeModel("tiny-glm-5.2", skip_caps_, options);
  ASSERT_TRUE(quiet && loud);
  const ModelConfig& config = quiet->planner().config();
  const int hidden = config.proto().hidden_size();
  const std::vector<float> x = RandomHidden(12, hidden, 8);
  StepOptions nothing;
  nothing.read_hidden = false;
  ASSERT_OK_AND_ASSIGN(StepOutput a, quiet->Step({}, {{1, 0, 12}}, x, nothing));
  ASSERT_OK_AND_ASSIGN(StepOutput b, loud->Step({}, {{1, 0, 12}}, x));
  EXPECT_TRUE(a.hidden.empty());
  EXPECT_TRUE(a.mtp_hidden.empty());
  EXPECT_EQ(b.hidden.size(), x.size());
  EXPECT_EQ(a.op_calls.total(), b.op_calls.total());
  for (int l = 0; l < config.num_layers(); ++l) {
    ASSERT_OK_AND_ASSIGN(auto la, quiet->ReadLatentCache(l));
    ASSERT_OK_AND_ASSIGN(auto lb, loud->ReadLatentCache(l));
    EXPECT_EQ(la, lb) << "layer " << l;
  }
  const std::vector<float> xd = RandomHidden(1, hidden, 9);
  ASSERT_OK_AND_ASSIGN(StepOutput da, quiet->Step({}, {{1, 12, 1}}, xd));
  ASSERT_OK_AND_ASSIGN(StepOutput db, loud->Step({}, {{1, 12, 1}}, xd));
  EXPECT_EQ(da.hidden, db.hidden);
}

// bf16 activations (what engines run, and what takes cuBLASLt on NVIDIA):
// the projections' inputs, q, kv_c and the attention output are rounded to
// bf16, 2^-9 relative each. Over tiny-glm-5.2's 9 layers that measured 4e-3
// to 6e-3 relative to the float64 reference on the CPU kernels; the bound
// is 2e-2; on a GPU platform, whose attention kernels add their own bf16
// rounding (kGpuReferenceTolerance), 3e-2. A real error (a wrong row, head or
// position) is of order 1.
constexpr double kBf16ActivationTolerance = 2e-2;
constexpr double kGpuBf16ActivationTolerance = 3e-2;

TEST_P(ModelRunnerTest, Bf16ActivationsStayCloseToTheFloat64Reference) {
  for (bool force_mqa : {false, true}) {
    SCOPED_TRACE(force_mqa ? "sparse MQA prefill" : "dense MHA prefill");
    RuntimeOptions options;
    options.block_size = 16;
    options.activation_dtype = attention::DType::kBFloat16;
    EngineConfig engine;
    engine.force_mqa = force_mqa;
    auto model = MakeModel("tiny-glm-5.2", skip_caps_, options, engine);
    ASSERT_TRUE(model);
    const ModelConfig& config = model->planner().config();
    const int hidden = config.proto().hidden_size();
    const int64_t n = 37;
    const std::vector<float> x = RandomHidden(n, hidden, 41);
    ASSERT_OK_AND_ASSIGN(StepOutput out, model->Step({}, {{5, 0, n}}, x));
    // The sparse branch copies q_pe into the absorbed query with a cast.
    EXPECT_EQ(out.op_calls.cast > 0, force_mqa);
    std::vector<LayerWeights> weights;
    for (int l = 0; l < config.num_layers(); ++l) {
      weights.push_back(LayerWeights::Random(config, l, 7));
    }
    const ReferenceOutput ref =
        ReferenceForward(config, weights, x, n, attention::DType::kBFloat16);
    const double err = RelativeError(out.hidden, ref.hidden);
    RecordProperty(force_mqa ? "bf16_rel_error_sparse" : "bf16_rel_error_dense",
                   std::to_string(err));
    ExpectWithinReference(GetParam() + (force_mqa ? " bf16 activations sparse"
                                                  : " bf16 activations dense"),
                          err,
                          GetParam() == "cpu" ? kBf16ActivationTolerance
                                              : kGpuBf16ActivationTolerance);
    EXPECT_GT(err, 0.0);
  }
}

// Fp8 weights: the quantised projections hold their weights as e4m3fn codes
// with 128 x 128 block scales (quantised at load from the random bf16
// weights, as an FP8 checkpoint holds them) and run as W8A8 products; the
// rest stays bf16, bit for bit. The step then differs from the float64
// reference over the dequantised weights by the activations' per-token fp8
// rounding (2^-4 relative per element at most) in every projection's input,
// which the residual stream accumulates over the layers: measured on the
// CPU 2.0e-2 after tiny-glm-5.2's first layer growing to 4.8e-2 after its
// eighth (4.1e-2 after the MTP layer), about 12 times the bf16-activation
// model's 3.8e-3 (e4m3 keeps 3 mantissa bits to bf16's 7), and far below a
// wrong scale's or a wrong row's (order 1). The skip changes nothing.
constexpr double kFp8WeightsTolerance = 0.1;

TEST_P(ModelRunnerTest, Fp8WeightsRunW8A8ProjectionsNearTheFloat64Reference) {
  RuntimeOptions options;
  options.block_size = 16;
  options.weight_dtype = attention::DType::kFloat8E4m3fn;
  auto model = MakeModel("tiny-glm-5.2", skip_caps_, options);
  ASSERT_TRUE(model);
  const ModelConfig& config = model->planner().config();
  std::vector<LayerWeights> dequantised;
  for (int l = 0; l < config.num_layers(); ++l) {
    const LayerWeights host = LayerWeights::Random(config, l, 7);
    LayerWeights w = host;
    for (const WeightSpec& spec : LayerWeightSpecs(config, l)) {
      ASSERT_OK_AND_ASSIGN(std::vector<float> device,
                           model->ReadWeight(l, spec.id));
      const std::vector<float>& bf16 = host.tensor(spec.id);
      ASSERT_EQ(device.size(), bf16.size());
      if (!spec.fp8_product) {
        EXPECT_EQ(device, bf16) << "layer " << l << " " << spec.name;
        continue;
      }
      // Within e4m3's rounding of each block's values, and not bf16's.
      const int64_t col_blocks = (spec.cols + 127) / 128;
      std::vector<double> amax(((spec.rows + 127) / 128) * col_blocks, 0.0);
      for (size_t i = 0; i < bf16.size(); ++i) {
        double& m =
            amax[(static_cast<int64_t>(i) / spec.cols / 128) * col_blocks +
                 static_cast<int64_t>(i) % spec.cols / 128];
        m = std::max(m, std::abs(double{bf16[i]}));
      }
      int rounded = 0;
      for (size_t i = 0; i < bf16.size(); ++i) {
        const int64_t r = static_cast<int64_t>(i) / spec.cols;
        const int64_t c = static_cast<int64_t>(i) % spec.cols;
        const double block_amax = amax[(r / 128) * col_blocks + c / 128];
        ASSERT_LE(
            std::abs(device[i] - bf16[i]),
            0x1p-4 * std::abs(bf16[i]) + 0x1p-10 * block_amax / 448 + 1e-12)
            << "layer " << l << " " << spec.name << " [" << r << ", " << c
            << "]";
        rounded += device[i] != bf16[i];
      }
      EXPECT_GT(rounded, 0) << spec.name;
      w.tensor(spec.id) = device;
    }
    dequantised.push_back(std::move(w));
  }
  const int hidden = config.proto().hidden_size();
  const int64_t n = 37;
  const std::vector<float> x = RandomHidden(n, hidden, 43);
  ASSERT_OK_AND_ASSIGN(StepOutput out, model->Step({}, {{5, 0, n}}, x));
  const ReferenceOutput ref =
      ReferenceForward(config, dequantised, x, n, attention::DType::kBFloat16);
  const double err = RelativeError(out.hidden, ref.hidden);
  RecordProperty("fp8_weights_rel_error", std::to_string(err));
  ExpectWithinReference(GetParam() + " fp8 weights", err, kFp8WeightsTolerance);
  ExpectWithinReference(GetParam() + " fp8 weights mtp",
                        RelativeError(out.mtp_hidden, ref.mtp_hidden),
                        kFp8WeightsTolerance);
  // The activations really were quantised: well past a bf16 model's error.
  EXPECT_GT(err, 1e-2);
  // The same projections as with bf16 weights run one at a time (fp8 weights
  // are not fused), and the skip's outputs equal the scoring arm's.
  RuntimeOptions bf16_options = options;
  bf16_options.weight_dtype = attention::DType::kBFloat16;
  bf16_options.fuse_projections = false;
  auto bf16_model = MakeModel("tiny-glm-5.2", skip_caps_, bf16_options);
  ASSERT_TRUE(bf16_model);
  ASSERT_OK_AND_ASSIGN(StepOutput bf16_out,
                       bf16_model->Step({}, {{5, 0, n}}, x));
  EXPECT_EQ(out.op_calls.gemm, bf16_out.op_calls.gemm);
  auto scoring = MakeModel("tiny-glm-5.2", no_skip_caps_, options);
  ASSERT_TRUE(scoring);
  ASSERT_OK_AND_ASSIGN(StepOutput scored, scoring->Step({}, {{5, 0, n}}, x));
  EXPECT_EQ(scored.hidden, out.hidden);
  EXPECT_EQ(scored.mtp_hidden, out.mtp_hidden);
  EXPECT_GT(scored.op_calls.indexer_logits, out.op_calls.indexer_logits);
}

// A platform that lacks a dense op is refused at creation, naming the op.
TEST_P(ModelRunnerTest, AMissingDenseKernelIsNotFoundAtCreation) {
  auto config = LoadModelConfig("tiny-glm-5.2");
  ASSERT_TRUE(config.ok());
  auto planner = LayerPlanner::Create(*config, skip_caps_, {});
  ASSERT_TRUE(planner.ok());
  AttentionKernels kernels = CountingKernels();
  kernels.dense.rope = {};
  EXPECT_THAT(
      DeepseekV32Model::Create(std::move(*planner), *platform_, kernels, {}, 7),
      StatusIs(absl::StatusCode::kNotFound,
               HasSubstr("has no kernel of op rope")));
}

// The profile run's reservation keeps later steps from allocating: after it,
// a dense prefill, a sparse one and decodes of at most max_num_batched_tokens
// and max_model_len allocate nothing (every allocation and memory query is
// made to fail, and none is made).
TEST_P(ModelRunnerTest, AfterAProfileRunStepsAllocateNothing) {
  RuntimeOptions options;
  options.block_size = 16;
  options.num_blocks = 24;
  options.max_model_len = 256;
  options.max_num_batched_tokens = 128;
  for (const attention::DType weights :
       {attention::DType::kBFloat16, attention::DType::kFloat8E4m3fn}) {
    options.weight_dtype = weights;
    for (const auto* caps : {&skip_caps_, &no_skip_caps_}) {
      SCOPED_TRACE(attention::DTypeName(weights));
      auto model = MakeModel("tiny-glm-5.1", *caps, options);
      ASSERT_TRUE(model);
      const int hidden = model->planner().config().proto().hidden_size();
      ASSERT_OK(model->ProfileRun({}).status());
      // No device allocation, memory query or stream-ordered allocation (the
      // kernels' scratch arenas growing, or a W8A8 product's quantised
      // activations) in any step after it.
      platform::FaultPlan plan;
      plan.fail_at = 1;
      plan.persistent = true;
      plan.sites =
          platform::FaultSiteBit(platform::FaultSite::kDeviceMalloc) |
          platform::FaultSiteBit(platform::FaultSite::kDeviceMemoryInfo) |
          platform::FaultSiteBit(platform::FaultSite::kStreamAlloc);
      platform::FaultInjector no_allocation(plan);
      const std::vector<std::vector<StepRequest>> steps = {
          {{1, 0, 30}, {2, 0, 20}},    // dense: the skip arm skips scoring
          {{3, 0, 128}},               // sparse: a whole step of one prefill
          {{1, 30, 1}, {3, 128, 98}},  // a decode and a chunk to max_model_len
          {{1, 31, 1}, {2, 20, 1}},    // decodes
      };
      uint32_t seed = 20;
      for (const std::vector<StepRequest>& step : steps) {
        EXPECT_OK(
            model->Step({}, step, RandomHidden(Tokens(step), hidden, seed++))
                .status());
      }
      EXPECT_EQ(no_allocation.calls(), 0);
      EXPECT_EQ(no_allocation.faults(), 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Platforms, ModelRunnerTest,
                         ::testing::ValuesIn(RunnerPlatforms()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace dsa::model::deepseek_v32
