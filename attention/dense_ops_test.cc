// Conformance suite of the dense ops (attention/dense_ops.h: gemm, rms_norm,
// rope, residual_add, cast, random_fill), run on every platform of
// OpTestPlatforms() against float64 references, with fresh random inputs and
// poisoned outputs (the fixture: dense_ops_test_fixture.h; the FP8 block
// quantisation and W8A8 product: dense_fp8_ops_test.cc).
#include "attention/dense_ops.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/dense_ops_test_fixture.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/random_fill.h"
#include "attention/reference/reference.h"
#include "attention/testing/op_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::attention {
namespace {

using dense_ops_test::DenseOpTest;
using dense_ops_test::GemmMismatches;
using dense_ops_test::GemmShape;
using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

TEST_P(DenseOpTest, GemmMatchesFloat64ReferenceForEveryTypeAndShape) {
  for (const GemmShape& s : {GemmShape{1, 64, 96}, GemmShape{7, 136, 200},
                             GemmShape{130, 272, 72}, GemmShape{33, 8, 512}}) {
    for (DType x_type : {DType::kFloat32, DType::kBFloat16}) {
      for (DType y_type : {DType::kFloat32, DType::kBFloat16}) {
        SCOPED_TRACE(absl::StrCat("rows ", s.rows, " in ", s.in, " out ", s.out,
                                  " x ", DTypeName(x_type), " y ",
                                  DTypeName(y_type)));
        std::vector<float> x = RandomFloats(s.rows * s.in);
        std::vector<uint16_t> w = RandomBf16(s.out * s.in, 0.1);
        Gemm::Args a;
        a.x = FloatsToDevice(x, x_type, {1, s.rows, s.in});
        a.w = ToDevice(w, DType::kBFloat16, {1, s.out, s.in});
        a.y = Poisoned(y_type, {1, s.rows, s.out});
        ASSERT_THAT(Run<Gemm>(a), IsOk());
        const std::vector<double> y = Read(a.y);
        EXPECT_EQ(GemmMismatches(
                      s.rows, s.out, s.in, y_type, "y",
                      [&](int64_t r, int64_t o) { return y[r * s.out + o]; },
                      [&](int64_t r, int64_t o, int64_t i) {
                        return double{x[r * s.in + i]} *
                               reference::Bf16Value(w[o * s.in + i]);
                      }),
                  0);
      }
    }
  }
}

// The MLA's absorption: per head, q_nope[h] (a strided slice of q) times
// W_UK[h] read as a transposed view of kv_b_proj, into a strided output.
TEST_P(DenseOpTest, BatchedGemmOverStridedAndTransposedViews) {
  const int64_t heads = 3, tokens = 9, nope = 24, rope = 8, v = 16,
                kv_lora = 64;
  const int64_t qk = nope + rope, width = kv_lora + rope;
  // bf16 x takes the vendor GEMM on GPUs (strided batches, transposed A),
  // fp32 x the own kernel.
  for (DType x_type : {DType::kFloat32, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(x_type));
    std::vector<float> q = RandomFloats(tokens * heads * qk);
    std::vector<uint16_t> q_bits(q.size());
    for (size_t i = 0; i < q.size(); ++i) {
      q_bits[i] = reference::Bf16Nearest(q[i]);
      if (x_type == DType::kBFloat16) {
        q[i] = static_cast<float>(reference::Bf16Value(q_bits[i]));
      }
    }
    std::vector<uint16_t> kv_b = RandomBf16(heads * (nope + v) * kv_lora, 0.2);
    Gemm::Args a;
    // x[h, t, n] = q[t, h, n].
    a.x = MakeTensorView(nullptr, x_type, {heads, tokens, nope});
    a.x.strides[0] = qk;
    a.x.strides[1] = heads * qk;
    a.x = x_type == DType::kFloat32 ? ToDeviceStrided(q, a.x)
                                    : ToDeviceStrided(q_bits, a.x);
    // w[h, j, n] = kv_b[h * (nope + v) + n, j].
    a.w = MakeTensorView(nullptr, DType::kBFloat16, {heads, kv_lora, nope});
    a.w.strides[0] = (nope + v) * kv_lora;
    a.w.strides[1] = 1;
    a.w.strides[2] = kv_lora;
    a.w = ToDeviceStrided(kv_b, a.w);
    // y[h, t, j] = q_abs[t, h, j], rows of `width` with a tail untouched.
    std::vector<float> out(tokens * heads * width, -7.0f);
    a.y = MakeTensorView(nullptr, DType::kFloat32, {heads, tokens, kv_lora});
    a.y.strides[0] = width;
    a.y.strides[1] = heads * width;
    a.y = ToDeviceStrided(out, a.y);
    ASSERT_THAT(Run<Gemm>(a), IsOk());
    const std::vector<float> got = ToHost<float>(a.y, tokens * heads * width);
    // Row t * heads + h of q_abs is (t, h).
    int tails = 0;
    for (int64_t r = 0; r < tokens * heads; ++r) {
      for (int64_t j = kv_lora; j < width; ++j) {
        if (got[r * width + j] != -7.0f && ++tails <= 5) {
          ADD_FAILURE() << "tail written";
        }
      }
    }
    EXPECT_EQ(tails, 0);
    EXPECT_EQ(GemmMismatches(
                  tokens * heads, kv_lora, nope, DType::kFloat32, "q_abs",
                  [&](int64_t r, int64_t j) { return got[r * width + j]; },
                  [&](int64_t r, int64_t j, int64_t n) {
                    const int64_t h = r % heads;
                    return double{q[r * qk + n]} *
                           reference::Bf16Value(
                               kv_b[(h * (nope + v) + n) * kv_lora + j]);
                  }),
              0);
  }
}

// Odd row strides and a start one element past an aligned address: vendor
// GEMMs want 16-byte alignment for their fast kernels; whatever a platform
// takes (a slower algorithm, or the own kernel), the result is the same.
TEST_P(DenseOpTest, GemmOnMisalignedStridedRows) {
  const int64_t rows = 21, in = 67, out = 45, x_stride = 70, y_stride = 47;
  std::vector<uint16_t> x = RandomBf16(1 + rows * x_stride);
  std::vector<uint16_t> w = RandomBf16(out * in, 0.1);
  Gemm::Args a;
  a.x = MakeTensorView(nullptr, DType::kBFloat16, {1, rows, in});
  a.x.strides[0] = rows * x_stride;
  a.x.strides[1] = x_stride;
  a.x = ToDeviceStrided(x, a.x, /*element_offset=*/1);
  a.w = ToDevice(w, DType::kBFloat16, {1, out, in});
  std::vector<float> y(1 + rows * y_stride, -3.0f);
  a.y = MakeTensorView(nullptr, DType::kFloat32, {1, rows, out});
  a.y.strides[0] = rows * y_stride;
  a.y.strides[1] = y_stride;
  a.y = ToDeviceStrided(y, a.y, /*element_offset=*/1);
  ASSERT_THAT(Run<Gemm>(a), IsOk());
  TensorView whole = a.y;
  whole.data = static_cast<float*>(a.y.data) - 1;
  const std::vector<float> got = ToHost<float>(whole, 1 + rows * y_stride);
  EXPECT_EQ(got[0], -3.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = out; o < y_stride; ++o) {
      ASSERT_EQ(got[1 + r * y_stride + o], -3.0f)
          << "row " << r << " padding " << o;
    }
  }
  EXPECT_EQ(GemmMismatches(
                rows, out, in, DType::kFloat32, "y",
                [&](int64_t r, int64_t o) { return got[1 + r * y_stride + o]; },
                [&](int64_t r, int64_t o, int64_t i) {
                  return reference::Bf16Value(x[1 + r * x_stride + i]) *
                         reference::Bf16Value(w[o * in + i]);
                }),
            0);
}

// Narrow rows, the models' hidden sizes, and rows longer than a GPU block
// has threads many times over.
TEST_P(DenseOpTest, RmsNormMatchesFloat64Reference) {
  struct Shape {
    int64_t rows, dim, stride;
  };
  for (const Shape& sh : {Shape{37, 160, 200}, Shape{3, 6144, 6144},
                          Shape{2, 8192, 8200}, Shape{2, 8193, 8193}})
    for (DType type : {DType::kFloat32, DType::kBFloat16}) {
      SCOPED_TRACE(absl::StrCat(sh.rows, " x ", sh.dim, " ", DTypeName(type)));
      const int64_t rows = sh.rows, dim = sh.dim, stride = sh.stride;
      std::vector<float> x = RandomFloats(rows * stride, 3.0);
      std::vector<float> w = RandomFloats(dim);
      RmsNorm::Args a;
      a.x = FloatsToDevice(x, type, {rows, stride});
      a.x.shape[1] = dim;  // a slice of wider rows, as kv_c of kv
      a.weight = FloatsToDevice(w, type, {dim});
      a.eps = 1e-6f;
      a.y = Poisoned(type, {rows, dim});
      ASSERT_THAT(Run<RmsNorm>(a), IsOk());
      const std::vector<double> y = Read(a.y);
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < dim; ++i)
          ss += double{x[r * stride + i]} * x[r * stride + i];
        const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
        for (int64_t i = 0; i < dim; ++i) {
          const double ref = x[r * stride + i] * inv * w[i];
          const double tol =
              (type == DType::kBFloat16 ? 0x1p-8 : 1e-5) * std::abs(ref) + 1e-6;
          ASSERT_NEAR(y[r * dim + i], ref, tol) << "row " << r << " dim " << i;
        }
      }
    }
}

// Few heads, and a query's many (GLM-5.1's 64 heads of 64 rope dims; 70
// heads, whose 2240 pairs a token are not a whole number of a GPU block's
// threads).
TEST_P(DenseOpTest, RopeRotatesAStridedSliceInPlace) {
  struct Shape {
    int64_t tokens, heads, nope, rope;
  };
  for (const Shape& sh :
       {Shape{11, 3, 10, 16}, Shape{5, 64, 192, 64}, Shape{3, 70, 8, 64}})
    for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
      SCOPED_TRACE(absl::StrCat(sh.tokens, " tokens x ", sh.heads, " heads, ",
                                sh.rope, " rope dims"));
      const int64_t tokens = sh.tokens, heads = sh.heads, nope = sh.nope,
                    rope = sh.rope;
      const int64_t qk = nope + rope, max_position = 300;
      const std::vector<float> cs =
          testing::RopeCosSinCache(max_position, rope);
      std::vector<float> q = RandomFloats(tokens * heads * qk);
      std::vector<int64_t> pos(tokens);
      for (int64_t& p : pos) p = RandomInt(0, max_position - 1);
      Rope::Args a;
      a.x = MakeTensorView(nullptr, DType::kFloat32, {tokens, heads, rope});
      a.x.strides[0] = heads * qk;
      a.x.strides[1] = qk;
      a.x = ToDeviceStrided(q, a.x, nope);
      a.positions = ToDevice(pos, DType::kInt64, {tokens});
      a.cos_sin_cache = ToDevice(cs, DType::kFloat32, {max_position, rope});
      a.rope_style = style;
      ASSERT_THAT(Run<Rope>(a), IsOk());
      TensorView whole = a.x;
      whole.data = static_cast<float*>(a.x.data) - nope;
      const std::vector<float> got = ToHost<float>(whole, tokens * heads * qk);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
          const float* in = q.data() + (t * heads + h) * qk;
          const float* out = got.data() + (t * heads + h) * qk;
          for (int64_t i = 0; i < nope; ++i) ASSERT_EQ(out[i], in[i]);
          for (int64_t i = 0; i < rope / 2; ++i) {
            const double c = cs[pos[t] * rope + i];
            const double s = cs[pos[t] * rope + rope / 2 + i];
            const int64_t ia = style == RopeStyle::kNeox ? i : 2 * i;
            const int64_t ib =
                style == RopeStyle::kNeox ? i + rope / 2 : 2 * i + 1;
            const double x1 = in[nope + ia], x2 = in[nope + ib];
            EXPECT_NEAR(out[nope + ia], x1 * c - x2 * s, 1e-5);
            EXPECT_NEAR(out[nope + ib], x2 * c + x1 * s, 1e-5);
          }
        }
      }
    }
}

TEST_P(DenseOpTest, ResidualAddAndCast) {
  const int64_t rows = 19, cols = 300;
  std::vector<float> r = RandomFloats(rows * cols);
  std::vector<float> x = RandomFloats(rows * cols);
  ResidualAdd::Args add;
  add.residual = FloatsToDevice(r, DType::kFloat32, {rows, cols});
  add.x = FloatsToDevice(x, DType::kBFloat16, {rows, cols});
  ASSERT_THAT(Run<ResidualAdd>(add), IsOk());
  const std::vector<float> sum = ToHost<float>(add.residual);
  for (int64_t i = 0; i < rows * cols; ++i) {
    ASSERT_EQ(sum[i], r[i] + x[i]) << i;  // one fp32 addition: exact match
  }
  Cast::Args cast;
  cast.x = add.residual;
  cast.y = Poisoned(DType::kBFloat16, {rows, cols});
  ASSERT_THAT(Run<Cast>(cast), IsOk());
  const std::vector<uint16_t> bf = ToHost<uint16_t>(cast.y);
  for (int64_t i = 0; i < rows * cols; ++i) {
    ASSERT_EQ(bf[i], FloatToBf16(sum[i])) << i;
  }
}

// Weights drawn on any platform are the same bits as on the host.
TEST_P(DenseOpTest, RandomFillEqualsTheHostValuesBitForBit) {
  for (DType type : {DType::kFloat32, DType::kBFloat16}) {
    const int64_t n = 100003;
    RandomFill::Args a;
    a.y = Poisoned(type, {n});
    a.seed = 7;
    a.stream = 12345;
    a.scale = 0.0437f;
    a.offset = 1.0f;
    ASSERT_THAT(Run<RandomFill>(a), IsOk());
    const std::vector<uint8_t> bytes =
        ToHost<uint8_t>(a.y, n * DTypeSize(type));
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = RandomFillValue(7, 12345, i, 0.0437f, 1.0f);
      if (type == DType::kFloat32) {
        float got;
        std::memcpy(&got, bytes.data() + 4 * i, 4);
        ASSERT_EQ(std::memcmp(&got, &v, 4), 0) << i;
      } else {
        uint16_t got;
        std::memcpy(&got, bytes.data() + 2 * i, 2);
        ASSERT_EQ(got, FloatToBf16(v)) << i;
      }
      sum += RandomUniform(7, 12345, i);
    }
    EXPECT_LT(std::abs(sum / n), 0.01) << "u is centred";
  }
}

TEST_P(DenseOpTest, BadArgumentsAreClearErrors) {
  std::vector<float> x = RandomFloats(4 * 8);
  std::vector<uint16_t> w = RandomBf16(5 * 9);
  Gemm::Args a;
  a.x = FloatsToDevice(x, DType::kFloat32, {1, 4, 8});
  a.w = ToDevice(w, DType::kBFloat16, {1, 5, 9});
  a.y = Poisoned(DType::kFloat32, {1, 4, 5});
  EXPECT_THAT(Run<Gemm>(a), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("gemm: w dim 2 (in)")));
  std::vector<float> wf = RandomFloats(5 * 8);
  a.w = FloatsToDevice(wf, DType::kFloat32, {1, 5, 8});
  EXPECT_THAT(Run<Gemm>(a), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("gemm: w")));
  RandomFill::Args fill;
  fill.y = Poisoned(DType::kFloat32, {16});
  fill.scale = std::numeric_limits<float>::infinity();
  EXPECT_THAT(Run<RandomFill>(fill),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("random_fill: scale")));
}

INSTANTIATE_TEST_SUITE_P(Platforms, DenseOpTest,
                         ::testing::ValuesIn(testing::OpTestPlatforms()),
                         testing::PlatformName);

}  // namespace
}  // namespace dsa::attention
