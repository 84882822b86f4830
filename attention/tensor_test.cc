#include "attention/tensor.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::attention {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

TEST(TensorViewTest, MakeTensorViewIsRowMajor) {
  std::vector<float> data(2 * 3 * 4);
  TensorView t = MakeTensorView(data.data(), DType::kFloat32, {2, 3, 4});
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.stride(1), 4);
  EXPECT_EQ(t.stride(2), 1);
  EXPECT_EQ(t.num_elements(), 24);
  EXPECT_EQ(t.offset(1, 2, 3), 23);
  EXPECT_EQ(DescribeTensor(t), "[2, 3, 4] float32");
}

TEST(TensorViewTest, CheckTensorNamesOpArgumentAndLayout) {
  std::vector<float> data(6);
  TensorView t = MakeTensorView(data.data(), DType::kFloat32, {2, 3});
  EXPECT_THAT(CheckTensor("indexer_logits", "q", t, 2, "[rows, dim]",
                          {DType::kFloat32}),
              IsOk());
  EXPECT_THAT(CheckTensor("indexer_logits", "q", t, 3,
                          "[rows, heads, head_dim]", {DType::kFloat32}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "indexer_logits: q has 2 dims, expected 3: "
                       "[rows, heads, head_dim]"));
  EXPECT_THAT(CheckTensor("op", "q", t, 2, "[a, b]",
                          {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "op: q has dtype float32, expected float8_e4m3fn or "
                       "float8_e4m3fnuz"));
  EXPECT_THAT(CheckDim("op", "q", t, 1, "dim", 4, "k's dim"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "op: q dim 1 (dim) is 3, expected 4 (k's dim)"));
}

TEST(TensorViewTest, CheckTensorRejectsBadMetadata) {
  std::vector<float> data(6);
  TensorView t = MakeTensorView(data.data(), DType::kFloat32, {2, 3});
  TensorView strided = t;
  strided.strides[1] = 2;
  EXPECT_THAT(CheckTensor("op", "x", strided, 2, "[a, b]", {DType::kFloat32}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("stride 2 in its last dim")));
  EXPECT_THAT(CheckTensor("op", "x", strided, 2, "[a, b]", {DType::kFloat32},
                          /*contiguous_last_dim=*/false),
              IsOk());
  TensorView null_data = t;
  null_data.data = nullptr;
  EXPECT_THAT(
      CheckTensor("op", "x", null_data, 2, "[a, b]", {DType::kFloat32}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("x has no data")));
  TensorView empty = MakeTensorView(nullptr, DType::kFloat32, {0, 3});
  EXPECT_THAT(CheckTensor("op", "x", empty, 2, "[a, b]", {DType::kFloat32}),
              IsOk());
  TensorView negative = t;
  negative.shape[0] = -1;
  EXPECT_THAT(
      CheckTensor("op", "x", negative, 2, "[a, b]", {DType::kFloat32}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dim 0 is -1")));
  TensorView huge = t;
  huge.strides[0] = int64_t{1} << 40;
  EXPECT_THAT(
      CheckTensor("op", "x", huge, 2, "[a, b]", {DType::kFloat32}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stride 0")));
  EXPECT_THAT(CheckContiguous("op", "cache", strided),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be contiguous")));
  EXPECT_THAT(CheckContiguous("op", "cache", t), IsOk());
}

TEST(TensorViewTest, ElementCountsAndExtentsNeverOverflow) {
  // Each dim is in range, but [2^30, 2^30, 16] has 2^64 elements: it used to
  // wrap to 0 and pass with null data.
  TensorView huge = MakeTensorView(nullptr, DType::kUint8,
                                   {int64_t{1} << 30, int64_t{1} << 30, 16});
  huge.strides[0] = huge.strides[1] = huge.strides[2] = 1;  // each in range
  EXPECT_THAT(CheckTensor("indexer_k_write", "k_cache", huge, 3, "[a, b, c]",
                          {DType::kUint8}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("more elements than an int64 can count")));
  EXPECT_EQ(huge.num_elements(), INT64_MAX);  // saturates
  // Every rank: four dims of 2^20 hold 2^80 elements.
  TensorView rank4 = MakeTensorView(
      nullptr, DType::kFloat32,
      {int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 20});
  for (int d = 0; d < 4; ++d) rank4.strides[d] = 1;
  EXPECT_THAT(
      CheckTensor("op", "t", rank4, 4, "[a, b, c, d]", {DType::kFloat32}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("more elements than an int64 can count")));
  // Few elements, but strides that reach past 2^63 bytes.
  std::vector<float> data(8);
  TensorView far = MakeTensorView(data.data(), DType::kFloat32, {2, 2, 2, 1});
  far.strides[0] = far.strides[1] = far.strides[2] = kMaxTensorDim - 1;
  far.shape[0] = far.shape[1] = far.shape[2] = kMaxTensorDim - 1;
  EXPECT_THAT(
      CheckTensor("op", "t", far, 4, "[a, b, c, d]", {DType::kFloat32}, false),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("int64")));
  // In range: the extent is the last element's offset plus one, in bytes.
  TensorView ok = MakeTensorView(data.data(), DType::kFloat32, {2, 4});
  EXPECT_EQ(TensorByteExtent(ok), 32);
  ok.strides[0] = 5;  // rows 5 apart: elements 0..8
  EXPECT_EQ(TensorByteExtent(ok), 36);
  EXPECT_EQ(
      TensorByteExtent(MakeTensorView(data.data(), DType::kFloat32, {0, 4})),
      0);
}

TEST(TensorViewTest, WrittenViewsMustNotAlias) {
  std::vector<uint8_t> cache(4 * 8 * 16);
  std::vector<float> input(64);
  TensorView k_cache = MakeTensorView(cache.data(), DType::kUint8, {4, 8, 16});
  TensorView k = MakeTensorView(input.data(), DType::kFloat32, {4, 16});
  EXPECT_THAT(
      CheckNoAliasing("op", {{"k", &k, false}, {"k_cache", &k_cache, true}}),
      IsOk());
  // A zero block stride makes every block the same memory: a token's write
  // would be silently lost.
  TensorView aliased_blocks = k_cache;
  aliased_blocks.strides[0] = 0;
  EXPECT_THAT(CheckNoAliasing("op", {{"k_cache", &aliased_blocks, true}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("zero stride over a dim longer than 1")));
  // Non-zero strides that still make blocks overlap.
  TensorView overlapping = k_cache;
  overlapping.strides[0] = 16;  // one entry apart, blocks of 8 entries
  EXPECT_THAT(CheckNoAliasing("op", {{"k_cache", &overlapping, true}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the same element")));
  // A zero stride over a dim of length 1 is harmless, and so is aliasing
  // among inputs.
  TensorView broadcast_row =
      MakeTensorView(input.data(), DType::kFloat32, {1, 16});
  broadcast_row.strides[0] = 0;
  EXPECT_THAT(CheckNoAliasing("op", {{"out", &broadcast_row, true}}), IsOk());
  EXPECT_THAT(CheckNoAliasing("op", {{"a", &k, false}, {"b", &k, false}}),
              IsOk());
  // An output overlapping an input, or another output.
  TensorView out_over_input =
      MakeTensorView(input.data() + 8, DType::kFloat32, {2, 4});
  EXPECT_THAT(CheckNoAliasing(
                  "op", {{"k", &k, false}, {"logits", &out_over_input, true}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("k and logits overlap in memory")));
  TensorView first = MakeTensorView(input.data(), DType::kFloat32, {8});
  TensorView second = MakeTensorView(input.data() + 7, DType::kFloat32, {8});
  EXPECT_THAT(
      CheckNoAliasing(
          "op", {{"q_fp8", &first, true}, {"head_weights", &second, true}}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overlap")));
  TensorView adjacent = MakeTensorView(input.data() + 8, DType::kFloat32, {8});
  EXPECT_THAT(CheckNoAliasing("op", {{"q_fp8", &first, true},
                                     {"head_weights", &adjacent, true}}),
              IsOk());
}

}  // namespace
}  // namespace dsa::attention
