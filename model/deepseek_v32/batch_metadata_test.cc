#include "model/deepseek_v32/batch_metadata.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/model_config.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

class BatchMetadataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(ModelConfig glm, LoadPreset("glm-5.1"));
    config_.emplace(glm);
  }
  absl::StatusOr<BatchMetadata> Build(std::vector<Request> requests,
                                      EngineConfig engine = {}) {
    return BuildBatchMetadata(*config_, engine, requests);
  }
  std::optional<ModelConfig> config_;
};

TEST_F(BatchMetadataTest, PureShortPrefill) {
  ASSERT_OK_AND_ASSIGN(BatchMetadata m, Build({{0, 1024}}));
  EXPECT_EQ(m.num_requests, 1);
  EXPECT_EQ(m.num_tokens, 1024);
  for (const AttentionMetadata* a : {&m.mla, &m.indexer}) {
    EXPECT_EQ(a->decode_threshold, 1);
    EXPECT_EQ(a->num_decodes, 0);
    EXPECT_EQ(a->num_prefills, 1);
    EXPECT_EQ(a->num_decode_tokens, 0);
    EXPECT_EQ(a->num_prefill_tokens, 1024);
    EXPECT_EQ(a->prefill_max_seq_len, 1024);
    EXPECT_TRUE(a->use_dense_mha);
  }
}

// prefill_max_seq_len counts the context: 1500 cached + 600 new is 2100.
TEST_F(BatchMetadataTest, PrefillLengthIncludesContext) {
  ASSERT_OK_AND_ASSIGN(BatchMetadata m, Build({{1500, 600}, {0, 100}}));
  EXPECT_EQ(m.mla.prefill_max_seq_len, 2100);
  EXPECT_EQ(m.mla.num_prefill_tokens, 700);
  EXPECT_FALSE(m.mla.use_dense_mha);
}

TEST_F(BatchMetadataTest, DenseMhaBoundaryAtTopk) {
  ASSERT_OK_AND_ASSIGN(BatchMetadata at, Build({{0, 2048}}));
  EXPECT_TRUE(at.mla.use_dense_mha);
  ASSERT_OK_AND_ASSIGN(BatchMetadata over, Build({{0, 2049}}));
  EXPECT_FALSE(over.mla.use_dense_mha);
  ASSERT_OK_AND_ASSIGN(BatchMetadata over_ctx, Build({{1, 2048}}));
  EXPECT_FALSE(over_ctx.mla.use_dense_mha);
  EXPECT_EQ(over_ctx.mla.prefill_max_seq_len, 2049);
}

TEST_F(BatchMetadataTest, ForceMqaTurnsDenseMhaOff) {
  EngineConfig engine;
  engine.force_mqa = true;
  ASSERT_OK_AND_ASSIGN(BatchMetadata m, Build({{0, 16}}, engine));
  EXPECT_FALSE(m.mla.use_dense_mha);
  EXPECT_FALSE(m.indexer.use_dense_mha);
}

TEST_F(BatchMetadataTest, MixedBatch) {
  ASSERT_OK_AND_ASSIGN(BatchMetadata m, Build({{100, 1}, {0, 1024}, {7, 1}}));
  EXPECT_EQ(m.num_tokens, 1026);
  EXPECT_EQ(m.mla.num_decodes, 2);
  EXPECT_EQ(m.mla.num_decode_tokens, 2);
  EXPECT_EQ(m.mla.num_prefills, 1);
  EXPECT_EQ(m.mla.num_prefill_tokens, 1024);
  // Decodes' lengths do not count: 100+1 is not a prefill.
  EXPECT_EQ(m.mla.prefill_max_seq_len, 1024);
}

// A 1-token request is a decode to both views, whatever its context.
TEST_F(BatchMetadataTest, OneNewTokenIsADecode) {
  ASSERT_OK_AND_ASSIGN(BatchMetadata m, Build({{0, 1}}));
  EXPECT_EQ(m.mla.num_decodes, 1);
  EXPECT_EQ(m.mla.num_prefills, 0);
  EXPECT_EQ(m.mla.prefill_max_seq_len, 0);
}

// With MTP=3 the indexer's threshold is 4: 3-token requests are its
// decodes, but prefills to the MLA.
TEST_F(BatchMetadataTest, SpeculativeTokensRaiseOnlyTheIndexerThreshold) {
  EngineConfig engine;
  engine.num_speculative_tokens = 3;
  ASSERT_OK_AND_ASSIGN(BatchMetadata m, Build({{10, 3}, {20, 3}}, engine));
  EXPECT_EQ(m.mla.decode_threshold, 1);
  EXPECT_EQ(m.mla.num_decodes, 0);
  EXPECT_EQ(m.mla.num_decode_tokens, 0);
  EXPECT_EQ(m.mla.num_prefills, 2);
  EXPECT_EQ(m.mla.prefill_max_seq_len, 23);
  EXPECT_TRUE(m.mla.use_dense_mha);
  EXPECT_EQ(m.indexer.decode_threshold, 4);
  EXPECT_EQ(m.indexer.num_decodes, 2);
  EXPECT_EQ(m.indexer.num_decode_tokens, 6);
  EXPECT_EQ(m.indexer.num_prefills, 0);
  // A 5-token request exceeds the indexer threshold too.
  ASSERT_OK_AND_ASSIGN(BatchMetadata five, Build({{0, 5}, {0, 4}}, engine));
  EXPECT_EQ(five.indexer.num_prefills, 1);
  EXPECT_EQ(five.indexer.num_decodes, 1);
  EXPECT_EQ(five.indexer.prefill_max_seq_len, 5);
}

TEST_F(BatchMetadataTest, RejectsInvalidRequests) {
  EXPECT_THAT(Build({}), StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("at least one request")));
  EXPECT_THAT(Build({{0, 4}, {-1, 4}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("request 1: negative context")));
  EXPECT_THAT(Build({{5, 0}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("request 0: needs at least one new token")));
  EXPECT_THAT(Build({{5, -3}}), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("at least one new token")));
  // glm-5.1 accepts 202752 positions.
  EXPECT_OK(Build({{202751, 1}}));
  EXPECT_THAT(Build({{202752, 1}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_position_embeddings 202752")));
  // Sums that would overflow int64 are caught before adding.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(Build({{kMax, kMax}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_position_embeddings")));
  EXPECT_THAT(Build({{kMax, 1}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_position_embeddings")));
  EXPECT_THAT(Build({{1, kMax}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_position_embeddings")));
}

TEST_F(BatchMetadataTest, RejectsInvalidEngineConfig) {
  EngineConfig engine;
  engine.num_speculative_tokens = -1;
  EXPECT_THAT(Build({{0, 8}}, engine),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_speculative_tokens")));
  engine.num_speculative_tokens = kMaxSpeculativeTokens + 1;
  EXPECT_THAT(Build({{0, 8}}, engine),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_speculative_tokens")));
  engine = {};
  engine.decode_context_parallel_size = 0;
  EXPECT_THAT(Build({{0, 8}}, engine),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("decode_context_parallel_size")));
}

TEST(ParseRequestsTest, ParsesContextPlusNew) {
  ASSERT_OK_AND_ASSIGN(std::vector<Request> r, ParseRequests("100+1,0+1024"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].num_context_tokens, 100);
  EXPECT_EQ(r[0].num_new_tokens, 1);
  EXPECT_EQ(r[1].num_context_tokens, 0);
  EXPECT_EQ(r[1].num_new_tokens, 1024);
}

TEST(ParseRequestsTest, RejectsMalformedLists) {
  for (const char* bad :
       {"", "1024", "+5", "5+", "1+2+3", "-1+5", "1+-5", "a+1", "1+1,", ",1+1",
        "1 +1", "1+1 ", "0x10+1", "1+99999999999999999999", "1.5+2"}) {
    EXPECT_THAT(ParseRequests(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("expected CONTEXT+NEW")))
        << bad;
  }
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
