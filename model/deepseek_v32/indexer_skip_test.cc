#include "model/deepseek_v32/indexer_skip.h"

#include <ostream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/forward_context.h"

namespace dsa::model::deepseek_v32 {

void PrintTo(const IndexerDecision& d, std::ostream* os) {
  *os << IndexerActionName(d.action) << " (" << IndexerReasonName(d.reason)
      << ")";
}

namespace {

// A main indexer layer on ROCm/CUDA with a dense-MHA prefill: may skip.
IndexerStaticInputs EligibleLayer() {
  IndexerStaticInputs in;
  in.owns_indexer = true;
  in.is_cuda_alike = true;
  in.is_mtp_layer = false;
  in.prefill_context_parallel = false;
  in.dense_mha_prefill_supported = true;
  return in;
}

// A pure 1K prefill, eager.
IndexerDynamicInputs PureShortPrefill() {
  IndexerDynamicInputs in;
  in.has_attention_metadata = true;
  in.cudagraph_runtime_mode = CudagraphMode::kNone;
  in.capturing = false;
  in.mla_num_decode_tokens = 0;
  in.mla_num_prefills = 1;
  in.mla_use_dense_mha = true;
  in.force_mqa = false;
  return in;
}

IndexerDecision Decide(const IndexerStaticInputs& s,
                       const IndexerDynamicInputs& d) {
  return DecideIndexer(DecideIndexerStatic(s), d);
}

constexpr IndexerDecision kSkip{IndexerAction::kSkip,
                                IndexerReason::kShortDensePrefill};
IndexerDecision Score(IndexerReason reason) {
  return {IndexerAction::kScore, reason};
}

TEST(IndexerSkipTest, PureShortPrefillSkips) {
  const IndexerStaticDecision fixed = DecideIndexerStatic(EligibleLayer());
  EXPECT_TRUE(fixed.owns_indexer);
  EXPECT_TRUE(fixed.skip_eligible);
  EXPECT_EQ(DecideIndexer(fixed, PureShortPrefill()), kSkip);
}

// --- static conditions -----------------------------------------------------

TEST(IndexerSkipTest, OtherPlatformsScore) {
  IndexerStaticInputs s = EligibleLayer();
  s.is_cuda_alike = false;  // CPU
  EXPECT_FALSE(DecideIndexerStatic(s).skip_eligible);
  EXPECT_EQ(Decide(s, PureShortPrefill()), Score(IndexerReason::kNotCudaAlike));
}

TEST(IndexerSkipTest, MtpLayersScore) {
  IndexerStaticInputs s = EligibleLayer();
  s.is_mtp_layer = true;
  EXPECT_EQ(Decide(s, PureShortPrefill()), Score(IndexerReason::kMtpLayer));
}

TEST(IndexerSkipTest, PrefillContextParallelScores) {
  IndexerStaticInputs s = EligibleLayer();
  s.prefill_context_parallel = true;
  EXPECT_EQ(Decide(s, PureShortPrefill()),
            Score(IndexerReason::kPrefillContextParallel));
}

TEST(IndexerSkipTest, NoDenseMhaPrefillOnThePlatformScores) {
  IndexerStaticInputs s = EligibleLayer();
  s.dense_mha_prefill_supported = false;
  EXPECT_EQ(Decide(s, PureShortPrefill()),
            Score(IndexerReason::kNoDenseMhaPrefill));
}

// GLM-5.2: a layer without an indexer reuses the previous owner's top-k,
// whatever the forward.
TEST(IndexerSkipTest, LayerWithoutIndexerShares) {
  IndexerStaticInputs s = EligibleLayer();
  s.owns_indexer = false;
  const IndexerDecision shared{IndexerAction::kShared,
                               IndexerReason::kSharesTopk};
  EXPECT_EQ(Decide(s, PureShortPrefill()), shared);
  IndexerDynamicInputs profile = PureShortPrefill();
  profile.has_attention_metadata = false;
  EXPECT_EQ(Decide(s, profile), shared);
}

// --- dynamic conditions ----------------------------------------------------

// Profile/dummy runs have no metadata and call the op for its workspace, on
// every indexer layer, eligible or not.
TEST(IndexerSkipTest, NoMetadataReservesWorkspaceOnly) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.has_attention_metadata = false;
  const IndexerDecision workspace{IndexerAction::kWorkspaceOnly,
                                  IndexerReason::kNoAttentionMetadata};
  EXPECT_EQ(Decide(EligibleLayer(), d), workspace);
  IndexerStaticInputs mtp = EligibleLayer();
  mtp.is_mtp_layer = true;
  EXPECT_EQ(Decide(mtp, d), workspace);
  IndexerStaticInputs cpu = EligibleLayer();
  cpu.is_cuda_alike = false;
  EXPECT_EQ(Decide(cpu, d), workspace);
}

TEST(IndexerSkipTest, FullCudagraphScores) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.cudagraph_runtime_mode = CudagraphMode::kFull;
  EXPECT_EQ(Decide(EligibleLayer(), d), Score(IndexerReason::kFullCudagraph));
}

// Under piecewise graphs attention runs eagerly between pieces, so the
// decision is re-evaluated on replay and may skip.
TEST(IndexerSkipTest, PiecewiseCudagraphStillSkips) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.cudagraph_runtime_mode = CudagraphMode::kPiecewise;
  EXPECT_EQ(Decide(EligibleLayer(), d), kSkip);
}

TEST(IndexerSkipTest, CapturingScores) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.cudagraph_runtime_mode = CudagraphMode::kPiecewise;
  d.capturing = true;
  EXPECT_EQ(Decide(EligibleLayer(), d), Score(IndexerReason::kCapturing));
}

TEST(IndexerSkipTest, MixedBatchScores) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.mla_num_decode_tokens = 2;  // e.g. 100+1 beside 0+1024
  EXPECT_EQ(Decide(EligibleLayer(), d), Score(IndexerReason::kDecodeTokens));
}

TEST(IndexerSkipTest, DecodeOnlyBatchScores) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.mla_num_decode_tokens = 4;
  d.mla_num_prefills = 0;
  EXPECT_EQ(Decide(EligibleLayer(), d), Score(IndexerReason::kDecodeTokens));
}

TEST(IndexerSkipTest, NoPrefillScores) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.mla_num_prefills = 0;
  EXPECT_EQ(Decide(EligibleLayer(), d), Score(IndexerReason::kNoPrefill));
}

TEST(IndexerSkipTest, PrefillLongerThanTopkScores) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.mla_use_dense_mha = false;  // e.g. an 8K prefill, top-k 2048
  EXPECT_EQ(Decide(EligibleLayer(), d),
            Score(IndexerReason::kPrefillLongerThanTopk));
}

TEST(IndexerSkipTest, ForceMqaScores) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.mla_use_dense_mha = false;
  d.force_mqa = true;
  EXPECT_EQ(Decide(EligibleLayer(), d), Score(IndexerReason::kForceMqa));
}

// MTP=3: the batch's 3-token requests are decodes to the indexer (threshold
// 4) but prefills to the MLA (threshold 1). The decision reads only the
// MLA's counts -- no decode tokens, two prefills on dense MHA -- so it skips.
TEST(IndexerSkipTest, MtpThresholdMismatchStillSkips) {
  IndexerDynamicInputs d = PureShortPrefill();
  d.mla_num_decode_tokens = 0;  // the indexer would count 6
  d.mla_num_prefills = 2;       // the indexer would count 0
  d.mla_use_dense_mha = true;
  EXPECT_EQ(Decide(EligibleLayer(), d), kSkip);
}

// Every combination of the conditions: the layer skips exactly when all of
// them hold, and otherwise scores (or shares / reserves its workspace).
TEST(IndexerSkipTest, SkipsIfAndOnlyIfEveryConditionHolds) {
  int skips = 0;
  for (int bits = 0; bits < (1 << 12); ++bits) {
    auto bit = [bits](int i) { return ((bits >> i) & 1) != 0; };
    IndexerStaticInputs s;
    s.owns_indexer = bit(0);
    s.is_cuda_alike = bit(1);
    s.is_mtp_layer = bit(2);
    s.prefill_context_parallel = bit(3);
    s.dense_mha_prefill_supported = bit(4);
    IndexerDynamicInputs d;
    d.has_attention_metadata = bit(5);
    d.cudagraph_runtime_mode =
        bit(6) ? CudagraphMode::kFull : CudagraphMode::kPiecewise;
    d.capturing = bit(7);
    d.mla_num_decode_tokens = bit(8) ? 3 : 0;
    d.mla_num_prefills = bit(9) ? 2 : 0;
    d.mla_use_dense_mha = bit(10);
    d.force_mqa = bit(11);
    const bool all_hold = s.owns_indexer && s.is_cuda_alike &&
                          !s.is_mtp_layer && !s.prefill_context_parallel &&
                          s.dense_mha_prefill_supported &&
                          d.has_attention_metadata &&
                          d.cudagraph_runtime_mode != CudagraphMode::kFull &&
                          !d.capturing && d.mla_num_decode_tokens == 0 &&
                          d.mla_num_prefills > 0 && d.mla_use_dense_mha;
    const IndexerDecision got = Decide(s, d);
    EXPECT_EQ(got.action == IndexerAction::kSkip, all_hold) << bits;
    IndexerAction expected_other = IndexerAction::kScore;
    if (!s.owns_indexer) {
      expected_other = IndexerAction::kShared;
    } else if (!d.has_attention_metadata) {
      expected_other = IndexerAction::kWorkspaceOnly;
    }
    if (!all_hold) {
      EXPECT_EQ(got.action, expected_other) << bits;
    }
    skips += all_hold;
  }
  EXPECT_EQ(skips, 2);  // force_mqa only explains; it does not decide
}

// The first failing condition is the reason, in the documented order.
TEST(IndexerSkipTest, ReasonIsTheFirstFailingCondition) {
  IndexerStaticInputs s = EligibleLayer();
  s.is_cuda_alike = false;
  s.is_mtp_layer = true;
  EXPECT_EQ(DecideIndexerStatic(s).reason, IndexerReason::kNotCudaAlike);
  IndexerDynamicInputs d = PureShortPrefill();
  d.cudagraph_runtime_mode = CudagraphMode::kFull;
  d.capturing = true;
  d.mla_num_decode_tokens = 1;
  EXPECT_EQ(Decide(EligibleLayer(), d).reason, IndexerReason::kFullCudagraph);
  d.cudagraph_runtime_mode = CudagraphMode::kPiecewise;
  EXPECT_EQ(Decide(EligibleLayer(), d).reason, IndexerReason::kCapturing);
  d.capturing = false;
  d.mla_use_dense_mha = false;
  EXPECT_EQ(Decide(EligibleLayer(), d).reason, IndexerReason::kDecodeTokens);
}

TEST(IndexerSkipTest, NamesAreStable) {
  EXPECT_EQ(IndexerActionName(IndexerAction::kScore), "score");
  EXPECT_EQ(IndexerActionName(IndexerAction::kSkip), "skip");
  EXPECT_EQ(IndexerActionName(IndexerAction::kShared), "shared");
  EXPECT_EQ(IndexerActionName(IndexerAction::kWorkspaceOnly), "workspace_only");
  EXPECT_EQ(IndexerReasonName(IndexerReason::kMtpLayer), "mtp_layer");
  EXPECT_EQ(IndexerReasonName(IndexerReason::kPrefillLongerThanTopk),
            "prefill_longer_than_topk");
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
