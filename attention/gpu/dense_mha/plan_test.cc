// The dense MHA prefill's host plan (plan.h) without a device: argument
// checks with their messages, scratch rows per request (multiples of 128,
// requests without queries skipped), work items per query tile (128 rows on
// NVIDIA, 64 on AMD; tile edges 127/128/129) longest first, metadata inline
// up to 16 requests / 320 items and uploaded past them, scratch sizes, and
// the bf16 conversions fp32 or unaligned inputs need.
#include "attention/gpu/dense_mha/plan.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attention/gpu/dense_mha/config.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu::dense_mha {
namespace {

// Host pointers stand in for device buffers: the plan never reads them.
alignas(16) char g_buffer[64];

struct Call {
  std::vector<int32_t> seq_lens;
  std::vector<int32_t> starts = {0};
  DenseMhaPrefillParams p;

  // Requests of (context, new tokens), DeepSeek-V3.2's head dims.
  explicit Call(const std::vector<std::pair<int32_t, int32_t>>& requests) {
    int32_t longest = 1;
    for (const auto& [context, fresh] : requests) {
      seq_lens.push_back(context + fresh);
      starts.push_back(starts.back() + fresh);
      longest = std::max(longest, context + fresh);
    }
    p.q = p.kv_cache = p.kv_b_proj = g_buffer;
    p.output = g_buffer;
    p.block_table = reinterpret_cast<const int32_t*>(g_buffer);
    p.block_size = 64;
    p.max_blocks_per_request = (longest + 63) / 64;
    p.block_table_stride = p.max_blocks_per_request;
    p.num_blocks = int64_t{p.max_blocks_per_request} * 4;
    p.num_requests = static_cast<int32_t>(requests.size());
    p.host_seq_lens = seq_lens.data();
    p.host_query_start_loc = starts.data();
    p.tokens = starts.back();
    p.heads = 2;
    p.qk_nope_head_dim = 128;
    p.rope_dim = 64;
    p.v_head_dim = 128;
    p.kv_lora_rank = 512;
    p.softmax_scale = 0.1f;
  }
};

Plan PlanOf(const DenseMhaPrefillParams& p, int block_m = 128) {
  Plan plan;
  const LaunchResult r = PlanDenseMhaPrefill(p, block_m, &plan);
  EXPECT_TRUE(r.ok()) << r.message;
  return plan;
}

void ExpectInvalid(const DenseMhaPrefillParams& p, const std::string& msg) {
  Plan plan;
  const LaunchResult r = PlanDenseMhaPrefill(p, 128, &plan);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument) << r.message;
  EXPECT_NE(std::string(r.message).find(msg), std::string::npos) << r.message;
}

TEST(DenseMhaPlanTest, RejectsWhatTheKernelsCannotRun) {
  Call c({{2, 3}});
  DenseMhaPrefillParams bad = c.p;
  bad.qk_nope_head_dim = 12;
  ExpectInvalid(bad, "multiples of 8");
  bad = c.p;
  bad.qk_nope_head_dim = 200;  // 200 + 64 > 256
  ExpectInvalid(bad, "nope + rope <= 256");
  bad = c.p;
  bad.v_head_dim = 512;
  ExpectInvalid(bad, "v <= 256");
  bad = c.p;
  bad.rope_dim = 0;
  ExpectInvalid(bad, "multiples of 8");
  bad = c.p;
  bad.heads = 65536;
  ExpectInvalid(bad, "heads=65536");
  bad = c.p;
  bad.cache_encoding = LatentCacheType::kFp8E4m3fn;
  bad.kv_lora_rank = 64;
  ExpectInvalid(bad, "of 128 for an fp8 cache");
  bad = c.p;
  bad.kv_cache = nullptr;
  ExpectInvalid(bad, "a pointer argument is null");
  bad = c.p;
  bad.block_table_stride = 0;
  ExpectInvalid(bad, "stride >= max_blocks");
  bad = c.p;
  bad.tokens = 4;
  ExpectInvalid(bad, "query_start_loc runs from 0 to 3, expected 0 to 4");
  bad = c.p;
  std::vector<int32_t> short_len = {2};
  bad.host_seq_lens = short_len.data();
  ExpectInvalid(bad, "request 0 has 3 query tokens");
  bad = c.p;
  std::vector<int32_t> long_len = {65};
  bad.host_seq_lens = long_len.data();
  ExpectInvalid(bad, "exceeds its block table's 64 slots");
  for (float scale : {0.0f, -0.1f, std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
    bad = c.p;
    bad.softmax_scale = scale;
    ExpectInvalid(bad, "needs a positive finite value");
  }
}

TEST(DenseMhaPlanTest, NoTokensPlansNothingAndReadsNoPointer) {
  Call c({{5, 0}});
  DenseMhaPrefillParams p = c.p;
  p.q = p.kv_cache = p.kv_b_proj = p.output = nullptr;
  p.host_seq_lens = nullptr;
  p.host_query_start_loc = nullptr;
  const Plan plan = PlanOf(p);
  EXPECT_TRUE(plan.requests.empty());
  EXPECT_TRUE(plan.items.empty());
  EXPECT_EQ(plan.kv_rows, 0);
}

TEST(DenseMhaPlanTest, ScratchRowsAndWorkItems) {
  // A request without queries takes no scratch rows; each of the others
  // starts at a multiple of kKeyAlign.
  Call c({{0, 127}, {40, 0}, {0, 129}, {300, 200}, {5, 1}});
  const Plan plan = PlanOf(c.p);
  ASSERT_EQ(plan.requests.size(), 4u);
  const int32_t table_rows[] = {0, 2, 3, 4};
  const int32_t kv_rows[] = {0, 128, 384, 896};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(plan.requests[i].table_row, table_rows[i]);
    EXPECT_EQ(plan.requests[i].kv_row, kv_rows[i]);
    EXPECT_EQ(plan.requests[i].kv_row % kKeyAlign, 0);
  }
  EXPECT_EQ(plan.requests[2].q_begin, 256);
  EXPECT_EQ(plan.requests[2].n, 200);
  EXPECT_EQ(plan.requests[2].seq_len, 500);
  EXPECT_EQ(plan.kv_rows, 1024);
  EXPECT_EQ(plan.max_rows, 512);
  // Tiles of 128 rows: 1 + 2 + 2 + 1; the keys each sees, longest first
  // (500, 428, 129, 128, 127, 6), ties in request order.
  ASSERT_EQ(plan.items.size(), 6u);
  const int32_t request[] = {2, 2, 1, 1, 0, 3};
  const int32_t tile[] = {1, 0, 1, 0, 0, 0};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(plan.items[i].request, request[i]) << i;
    EXPECT_EQ(plan.items[i].q_tile, tile[i]) << i;
  }
  // AMD's 64-row blocks: 2 + 3 + 4 + 1 tiles.
  EXPECT_EQ(PlanOf(c.p, 64).items.size(), 10u);
}

TEST(DenseMhaPlanTest, MetadataInlineUpToItsArrays) {
  // 16 requests of 20 tiles each: exactly what the kernel parameters hold.
  std::vector<std::pair<int32_t, int32_t>> requests(16, {0, 20 * 128});
  Call inline_call(requests);
  Plan plan = PlanOf(inline_call.p);
  EXPECT_EQ(plan.items.size(), 320u);
  EXPECT_TRUE(plan.meta.is_inline);
  EXPECT_TRUE(plan.meta_upload.empty());
  EXPECT_EQ(plan.meta.req[15].kv_row, plan.requests[15].kv_row);
  EXPECT_EQ(plan.meta.item[319].request, plan.items[319].request);
  // One tile more: the arrays go to device memory, requests then items.
  requests.back().second += 1;
  Call uploaded(requests);
  plan = PlanOf(uploaded.p);
  EXPECT_FALSE(plan.meta.is_inline);
  ASSERT_EQ(plan.meta_upload.size(),
            16 * sizeof(RequestInfo) + 321 * sizeof(WorkItem));
  RequestInfo last_request;
  WorkItem last_item;
  std::memcpy(&last_request, plan.meta_upload.data() + 15 * sizeof(RequestInfo),
              sizeof(RequestInfo));
  std::memcpy(&last_item,
              plan.meta_upload.data() + 16 * sizeof(RequestInfo) +
                  320 * sizeof(WorkItem),
              sizeof(WorkItem));
  EXPECT_EQ(last_request.kv_row, plan.requests[15].kv_row);
  EXPECT_EQ(last_item.request, plan.items[320].request);
  EXPECT_EQ(last_item.q_tile, plan.items[320].q_tile);
  // 17 requests of one tile each.
  Call many(std::vector<std::pair<int32_t, int32_t>>(17, {3, 1}));
  EXPECT_FALSE(PlanOf(many.p).meta.is_inline);
}

TEST(DenseMhaPlanTest, ScratchSizes) {
  Call c({{3, 70}, {0, 64}});
  c.p.cache_encoding = LatentCacheType::kFp8E4m3fn;
  const Plan plan = PlanOf(c.p);
  EXPECT_EQ(plan.entry_bytes, 512 + 4 * 4 + 2 * 64);
  EXPECT_EQ(plan.kv_rows, 256);
  EXPECT_EQ(plan.lat_ld, 576);
  EXPECT_EQ(plan.knope_ld, 2 * 128);
  EXPECT_EQ(plan.vt_rows, 2 * 128);
  EXPECT_EQ(plan.latent_bytes, 256u * 576 * 2);
  EXPECT_EQ(plan.knope_bytes, 256u * 256 * 2);
  EXPECT_EQ(plan.vt_bytes, 256u * 256 * 2);
  EXPECT_EQ(plan.wk_bytes, 2u * 128 * 512 * 2);
  EXPECT_EQ(plan.wv_bytes, 2u * 128 * 512 * 2);
  EXPECT_EQ(plan.weight_bytes, 2u * 256 * 512 * 2);
  EXPECT_EQ(plan.query_bytes, 134u * 2 * 192 * 2);
  EXPECT_FALSE(plan.convert_weights);
  EXPECT_FALSE(plan.convert_queries);
  c.p.cache_encoding = LatentCacheType::kBFloat16;
  EXPECT_EQ(PlanOf(c.p).entry_bytes, 2 * (512 + 64));
}

TEST(DenseMhaPlanTest, ConversionsForFp32OrUnalignedInputs) {
  Call c({{0, 8}});
  c.p.q_format = FloatFormat::kFloat32;
  Plan plan = PlanOf(c.p);
  EXPECT_TRUE(plan.convert_queries);
  EXPECT_FALSE(plan.convert_weights);
  c.p.q_format = FloatFormat::kBFloat16;
  c.p.kv_b_proj = g_buffer + 2;  // bf16-aligned, not 16-byte aligned
  plan = PlanOf(c.p);
  EXPECT_FALSE(plan.convert_queries);
  EXPECT_TRUE(plan.convert_weights);
}

TEST(DenseMhaPlanTest, RefusesMoreScratchRowsThanOneCallIndexes) {
  // Three one-token requests of 2^30 rows: nothing is allocated to plan them.
  Call c({{0, 1}});
  std::vector<int32_t> lens(3, 1 << 30), starts = {0, 1, 2, 3};
  c.p.num_requests = 3;
  c.p.host_seq_lens = lens.data();
  c.p.host_query_start_loc = starts.data();
  c.p.tokens = 3;
  c.p.block_size = 1 << 20;
  c.p.max_blocks_per_request = 1024;
  c.p.block_table_stride = 1024;
  ExpectInvalid(c.p, "more than 2^31 latent rows in one call");
}

}  // namespace
}  // namespace dsa::attention::gpu::dense_mha
