#include "model/deepseek_v32/paged_cache.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The MLA's classification (decode threshold 1), as BuildBatchMetadata gives
// it, for a step's requests.
AttentionMetadata MlaOf(const std::vector<StepRequest>& requests) {
  AttentionMetadata m;
  for (const StepRequest& r : requests) {
    m.request_is_decode.push_back(r.num_new_tokens <= 1 ? 1 : 0);
  }
  return m;
}

absl::StatusOr<StepLayout> Prepare(BlockTables& tables,
                                   const std::vector<StepRequest>& requests) {
  return tables.PrepareStep(requests, MlaOf(requests));
}

TEST(BlockTablesTest, OrdersDecodesFirstAndMapsSlots) {
  ASSERT_OK_AND_ASSIGN(BlockTables tables, BlockTables::Create(4, 16));
  ASSERT_OK(Prepare(tables, {{7, 0, 5}}).status());  // blocks 0, 1
  // Caller order: a new prefill of 3, then request 7's decode.
  ASSERT_OK_AND_ASSIGN(StepLayout layout,
                       Prepare(tables, {{8, 0, 3}, {7, 5, 1}}));
  EXPECT_EQ(layout.num_requests, 2);
  EXPECT_EQ(layout.num_tokens, 4);
  EXPECT_EQ(layout.num_decode_requests, 1);
  EXPECT_EQ(layout.num_decode_tokens, 1);
  EXPECT_THAT(layout.request_order, ElementsAre(1, 0));
  // Internal token 0 is the decode (caller row 3), then rows 0..2.
  EXPECT_THAT(layout.token_source, ElementsAre(3, 0, 1, 2));
  EXPECT_THAT(layout.positions, ElementsAre(5, 0, 1, 2));
  EXPECT_THAT(layout.seq_lens, ElementsAre(6, 3));
  EXPECT_THAT(layout.query_start_loc, ElementsAre(0, 1, 4));
  EXPECT_THAT(layout.token_request, ElementsAre(0, 1, 1, 1));
  // Request 7 holds blocks 0 and 1; position 5 is block 1, offset 1. Request
  // 8 gets block 2.
  EXPECT_EQ(layout.max_blocks_per_request, 2);
  EXPECT_THAT(layout.block_table, ElementsAre(0, 1, 2, 0));
  EXPECT_THAT(layout.slot_mapping, ElementsAre(5, 8, 9, 10));
  EXPECT_EQ(layout.max_seq_len, 6);
  EXPECT_EQ(tables.cached_tokens(7), 6);
  EXPECT_EQ(tables.num_free_blocks(), 13);
}

// Undoing a step (one that failed) puts the requests' lengths, their blocks
// and the free list back as they were, so the same step prepared again maps
// the same slots.
TEST(BlockTablesTest, UndoStepRestoresTheTablesForARetry) {
  ASSERT_OK_AND_ASSIGN(BlockTables tables, BlockTables::Create(4, 16));
  ASSERT_OK(Prepare(tables, {{7, 0, 5}}).status());  // blocks 0, 1
  ASSERT_OK(Prepare(tables, {{9, 0, 2}}).status());  // block 2
  const std::vector<StepRequest> step = {{8, 0, 9}, {7, 5, 1}, {9, 2, 3}};
  ASSERT_OK_AND_ASSIGN(StepLayout first, Prepare(tables, step));
  EXPECT_EQ(tables.num_free_blocks(), 16 - 3 - 3 - 1);
  tables.UndoStep(step, first);
  EXPECT_EQ(tables.cached_tokens(7), 5);
  EXPECT_EQ(tables.cached_tokens(8), 0);
  EXPECT_EQ(tables.cached_tokens(9), 2);
  EXPECT_EQ(tables.num_free_blocks(), 13);
  ASSERT_OK_AND_ASSIGN(StepLayout again, Prepare(tables, step));
  EXPECT_EQ(again.slot_mapping, first.slot_mapping);
  EXPECT_EQ(again.block_table, first.block_table);
  EXPECT_EQ(again.seq_lens, first.seq_lens);
  // A request that was new is gone again: releasing it is NotFound.
  tables.UndoStep(step, again);
  EXPECT_THAT(tables.Release(8), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_OK(tables.Release(9));
  EXPECT_OK(tables.Release(7));
  EXPECT_EQ(tables.num_free_blocks(), 16);
}

TEST(BlockTablesTest, FailedStepsAllocateNothing) {
  ASSERT_OK_AND_ASSIGN(BlockTables tables, BlockTables::Create(4, 3));
  EXPECT_THAT(
      Prepare(tables, {{1, 0, 8}, {2, 0, 8}}),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("needs 4 more cache blocks of 4 tokens, 3 free")));
  EXPECT_THAT(Prepare(tables, {{1, 0, 2}, {1, 0, 2}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("repeats request id 1")));
  EXPECT_THAT(
      Prepare(tables, {{1, 3, 2}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("claims 3 context tokens but the cache holds 0")));
  EXPECT_THAT(
      Prepare(tables, {{1, 0, 0}}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0 new tokens")));
  EXPECT_THAT(Prepare(tables, {}), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("no requests")));
  EXPECT_THAT(tables.PrepareStep({{1, 0, 2}}, MlaOf({{1, 0, 2}, {2, 0, 1}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("classifies 2 requests, the step has 1")));
  EXPECT_EQ(tables.num_free_blocks(), 3);
  EXPECT_EQ(tables.cached_tokens(1), 0);
}

TEST(BlockTablesTest, ReleaseReturnsBlocks) {
  ASSERT_OK_AND_ASSIGN(BlockTables tables, BlockTables::Create(2, 4));
  ASSERT_OK(Prepare(tables, {{1, 0, 3}}).status());
  EXPECT_EQ(tables.num_free_blocks(), 2);
  ASSERT_OK(tables.Release(1));
  EXPECT_EQ(tables.num_free_blocks(), 4);
  EXPECT_THAT(tables.Release(1), StatusIs(absl::StatusCode::kNotFound,
                                          HasSubstr("unknown request id 1")));
  EXPECT_THAT(
      BlockTables::Create(0, 4),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block_size")));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
