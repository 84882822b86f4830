// The argument checks every op call runs (Validate) build no string and
// allocate nothing when the arguments are good: a check compares first and
// formats its message only on failure. Counted by //testing:heap_allocations's
// operator new, at GLM-5.1's shapes in a 64-token step (views over distinct
// fake addresses: Validate reads only metadata). Each op's bad case still
// gets its message.
#include <cstdint>
#include <string>

#include "attention/dense_ops.h"
#include "attention/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/heap_allocations.h"

namespace dsa::attention {
namespace {

using ::dsa::testing::AllocationsOf;
using ::testing::HasSubstr;

constexpr int64_t kTokens = 64, kHidden = 6144, kHeads = 64, kNope = 192,
                  kRope = 64, kV = 256, kLora = 512, kRequests = 2,
                  kBlocks = 64, kBlockSize = 64, kMaxBlocks = 16, kTopk = 2048;

// Row-major views at addresses 2^36 apart: distinct, never overlapping.
class Views {
 public:
  TensorView Make(DType dtype, std::initializer_list<int64_t> shape) {
    next_ += uint64_t{1} << 36;
    return MakeTensorView(reinterpret_cast<void*>(next_), dtype, shape);
  }

 private:
  uint64_t next_ = 0;
};

TEST(ValidateAllocationsTest, TheDenseOpsAllocateNothingOnGoodArguments) {
  Views v;
  Gemm::Args gemm;
  gemm.x = v.Make(DType::kBFloat16, {1, kTokens, kHidden});
  gemm.w = v.Make(DType::kBFloat16, {1, 2048, kHidden});
  gemm.y = v.Make(DType::kFloat32, {1, kTokens, 2048});
  RmsNorm::Args norm;
  norm.x = v.Make(DType::kFloat32, {kTokens, kHidden});
  norm.weight = v.Make(DType::kBFloat16, {kHidden});
  norm.y = v.Make(DType::kBFloat16, {kTokens, kHidden});
  ResidualAdd::Args add;
  add.residual = v.Make(DType::kFloat32, {kTokens, kHidden});
  add.x = v.Make(DType::kFloat32, {kTokens, kHidden});
  Cast::Args cast;
  cast.x = v.Make(DType::kFloat32, {kTokens, kHidden});
  cast.y = v.Make(DType::kBFloat16, {kTokens, kHidden});
  EXPECT_EQ(AllocationsOf([&] {
              for (int i = 0; i < 100; ++i) {
                ASSERT_TRUE(Gemm::Validate(gemm).ok());
                ASSERT_TRUE(RmsNorm::Validate(norm).ok());
                ASSERT_TRUE(ResidualAdd::Validate(add).ok());
                ASSERT_TRUE(Cast::Validate(cast).ok());
              }
            }),
            0);
  // The lazily built parts of the messages are still there.
  add.x.shape[1] = kHidden - 1;
  EXPECT_THAT(ResidualAdd::Validate(add).message(),
              HasSubstr("expected 6144 (residual's cols)"));
  cast.y.shape[0] = kTokens + 1;
  EXPECT_THAT(Cast::Validate(cast).message(),
              HasSubstr("expected 64 (x's rows)"));
}

struct AttentionViews {
  TensorView kv_cache, block_table, seq_lens, kv_b_proj;
  LatentCacheFormat format;
};

AttentionViews MakeAttentionViews(Views& v) {
  AttentionViews a;
  a.kv_cache = v.Make(DType::kBFloat16, {kBlocks, kBlockSize, kLora + kRope});
  a.block_table = v.Make(DType::kInt32, {kRequests, kMaxBlocks});
  a.seq_lens = v.Make(DType::kInt32, {kRequests});
  a.kv_b_proj = v.Make(DType::kBFloat16, {kHeads * (kNope + kV), kLora});
  return a;
}

TEST(ValidateAllocationsTest, TheAttentionOpsAllocateNothingOnGoodArguments) {
  Views v;
  const AttentionViews shared = MakeAttentionViews(v);
  DenseMhaPrefill::Args dense;
  dense.q = v.Make(DType::kBFloat16, {kTokens, kHeads, kNope + kRope});
  dense.kv_cache = shared.kv_cache;
  dense.cache_format = shared.format;
  dense.block_table = shared.block_table;
  dense.seq_lens = shared.seq_lens;
  dense.query_start_loc = v.Make(DType::kInt32, {kRequests + 1});
  dense.kv_b_proj = shared.kv_b_proj;
  dense.softmax_scale = 0.0625f;
  dense.output = v.Make(DType::kBFloat16, {kTokens, kHeads, kV});
  dense.seq_lens_host = v.Make(DType::kInt32, {kRequests});
  dense.query_start_loc_host = v.Make(DType::kInt32, {kRequests + 1});
  SparseMla::Args sparse;
  sparse.q = v.Make(DType::kBFloat16, {kTokens, kHeads, kLora + kRope});
  sparse.kv_cache = shared.kv_cache;
  sparse.cache_format = shared.format;
  sparse.block_table = shared.block_table;
  sparse.seq_lens = shared.seq_lens;
  sparse.token_request = v.Make(DType::kInt32, {kTokens});
  sparse.topk_indices = v.Make(DType::kInt32, {kTokens, kTopk});
  sparse.kv_b_proj = shared.kv_b_proj;
  sparse.qk_nope_head_dim = kNope;
  sparse.softmax_scale = 0.0625f;
  sparse.output = v.Make(DType::kBFloat16, {kTokens, kHeads, kV});
  EXPECT_EQ(AllocationsOf([&] {
              for (int i = 0; i < 100; ++i) {
                ASSERT_TRUE(DenseMhaPrefill::Validate(dense).ok())
                    << DenseMhaPrefill::Validate(dense).message();
                ASSERT_TRUE(SparseMla::Validate(sparse).ok())
                    << SparseMla::Validate(sparse).message();
              }
            }),
            0);
  dense.kv_b_proj.shape[0] = kHeads * (kNope + kV) - 8;
  EXPECT_THAT(DenseMhaPrefill::Validate(dense).message(),
              HasSubstr("expected 28672 (64 heads * (192 + 256))"));
}

}  // namespace
}  // namespace dsa::attention
