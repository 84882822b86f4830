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
  EXPECT_THAT(
      CheckTensor("indexer_logits", "q", t, 3, "[rows, heads, head_dim]",
                  {DType::kFloat32}),
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
  EXPECT_THAT(CheckTensor("op", "x", null_data, 2, "[a, b]", {DType::kFloat32}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("x has no data")));
  TensorView empty = MakeTensorView(nullptr, DType::kFloat32, {0, 3});
  EXPECT_THAT(CheckTensor("op", "x", empty, 2, "[a, b]", {DType::kFloat32}),
              IsOk());
  TensorView negative = t;
  negative.shape[0] = -1;
  EXPECT_THAT(CheckTensor("op", "x", negative, 2, "[a, b]", {DType::kFloat32}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dim 0 is -1")));
  TensorView huge = t;
  huge.strides[0] = int64_t{1} << 40;
  EXPECT_THAT(CheckTensor("op", "x", huge, 2, "[a, b]", {DType::kFloat32}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("stride 0")));
  EXPECT_THAT(CheckContiguous("op", "cache", strided),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be contiguous")));
  EXPECT_THAT(CheckContiguous("op", "cache", t), IsOk());
}

}  // namespace
}  // namespace dsa::attention
