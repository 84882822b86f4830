// Conformance suite of the dense ops' FP8 side (attention/dense_ops.h:
// fp8_block_quant, fp8_block_gemm, rms_norm's quantised output, the W8A8
// product of quantised activations), run on every platform of
// OpTestPlatforms() against float64 references and the quantisation rule,
// with fresh random inputs and poisoned outputs (the fixture:
// dense_ops_test_fixture.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/dense_ops.h"
#include "attention/dense_ops_test_fixture.h"
#include "attention/dtypes/bf16.h"
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
using dense_ops_test::GemmTolerance;
using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

// FP8 block quantisation and the W8A8 product (dense_ops.h).

constexpr int64_t kBlock = 128;

// Fp8BlockQuant's rule, written from its definition: s = max(amax, 1e-10) /
// D in float32, codes the reference's nearest fp8 code to the float32
// quotient x / s. `x` [rows, cols], blocks of block_rows x 128.
struct QuantizedRef {
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // [ceil(rows / block_rows), ceil(cols / 128)]
};
QuantizedRef QuantizeRef(const std::vector<float>& x, int64_t rows,
                         int64_t cols, int64_t block_rows, DType fp8) {
  const reference::Fp8Kind kind = testing::KindOf(fp8);
  const float divisor = fp8 == DType::kFloat8E4m3fnuz ? 224.0f : 448.0f;
  const int64_t rb_count = (rows + block_rows - 1) / block_rows;
  const int64_t cb_count = (cols + kBlock - 1) / kBlock;
  QuantizedRef q;
  q.codes.resize(rows * cols);
  q.scales.resize(rb_count * cb_count);
  for (int64_t rb = 0; rb < rb_count; ++rb) {
    for (int64_t cb = 0; cb < cb_count; ++cb) {
      double amax = 0.0;
      for (int64_t r = rb * block_rows;
           r < std::min(rows, (rb + 1) * block_rows); ++r) {
        for (int64_t c = cb * kBlock; c < std::min(cols, (cb + 1) * kBlock);
             ++c) {
          amax = std::max(amax, std::abs(double{x[r * cols + c]}));
        }
      }
      const float s =
          std::max(static_cast<float>(amax), 1e-10f) / divisor;  // float32
      q.scales[rb * cb_count + cb] = s;
      for (int64_t r = rb * block_rows;
           r < std::min(rows, (rb + 1) * block_rows); ++r) {
        for (int64_t c = cb * kBlock; c < std::min(cols, (cb + 1) * kBlock);
             ++c) {
          const float v = x[r * cols + c] / s;  // float32 division
          q.codes[r * cols + c] = reference::Fp8Nearest(v, kind);
        }
      }
    }
  }
  return q;
}

// Values of x that exercise the edges: row 0 all zero (amax 0), and in the
// other rows, when there is a second column block, one block of zeros.
void ZeroEdges(std::vector<float>& x, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) x[c] = 0.0f;
  if (rows > 2 && cols > kBlock) {
    for (int64_t c = kBlock; c < std::min(cols, 2 * kBlock); ++c) {
      x[2 * cols + c] = 0.0f;
    }
  }
}

// Half the subnormal step of an encoding: the largest rounding error below
// its smallest normal value, in units of the scale.
double HalfSubnormalStep(DType fp8) {
  return fp8 == DType::kFloat8E4m3fnuz ? 0x1p-11 : 0x1p-10;
}

TEST_P(DenseOpTest, Fp8BlockQuantFollowsTheRuleBitForBit) {
  struct Shape {
    int64_t rows, cols;
  };
  for (const Shape& sh : {Shape{1, 128}, Shape{1, 1}, Shape{5, 127},
                          Shape{3, 300}, Shape{130, 129}, Shape{257, 256}}) {
    for (int64_t block_rows : {int64_t{1}, kBlock}) {
      for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
        for (DType x_type : {DType::kFloat32, DType::kBFloat16}) {
          SCOPED_TRACE(absl::StrCat(sh.rows, " x ", sh.cols, " block_rows ",
                                    block_rows, " ", DTypeName(fp8), " x ",
                                    DTypeName(x_type)));
          std::vector<float> x = RandomFloats(sh.rows * sh.cols, 3.0);
          ZeroEdges(x, sh.rows, sh.cols);
          Fp8BlockQuant::Args a;
          a.x = FloatsToDevice(x, x_type, {sh.rows, sh.cols});
          a.block_rows = static_cast<int32_t>(block_rows);
          a.q = Poisoned(fp8, {sh.rows, sh.cols});
          const int64_t rb = (sh.rows + block_rows - 1) / block_rows;
          const int64_t cb = (sh.cols + kBlock - 1) / kBlock;
          a.scale_inv = Poisoned(DType::kFloat32, {rb, cb});
          ASSERT_THAT(Run<Fp8BlockQuant>(a), IsOk());
          const QuantizedRef ref =
              QuantizeRef(x, sh.rows, sh.cols, block_rows, fp8);
          const std::vector<uint8_t> codes = ToHost<uint8_t>(a.q);
          const std::vector<float> scales = ToHost<float>(a.scale_inv);
          ASSERT_EQ(
              std::memcmp(scales.data(), ref.scales.data(), scales.size() * 4),
              0);
          int bad = 0;
          for (int64_t i = 0; i < sh.rows * sh.cols; ++i) {
            if (codes[i] != ref.codes[i] && ++bad <= 5) {
              ADD_FAILURE()
                  << "q[" << i << "] = " << int{codes[i]} << ", expected "
                  << int{ref.codes[i]} << " for " << x[i];
            }
            // Dequantised, within the encoding's rounding of x.
            const int64_t r = i / sh.cols, c = i % sh.cols;
            const double s = scales[(r / block_rows) * cb + c / kBlock];
            const double back =
                reference::Fp8Value(codes[i], testing::KindOf(fp8)) * s;
            ASSERT_LE(
                std::abs(back - x[i]),
                0x1p-4 * std::abs(x[i]) + HalfSubnormalStep(fp8) * s + 1e-12)
                << i;
          }
          EXPECT_EQ(bad, 0);
          // Row 0 is zero: its scale is the floor's and its codes are zero.
          if (block_rows == 1) {
            EXPECT_EQ(
                scales[0],
                1e-10f / (fp8 == DType::kFloat8E4m3fnuz ? 224.0f : 448.0f));
            for (int64_t c = 0; c < sh.cols; ++c) {
              ASSERT_EQ(reference::Fp8Value(codes[c], testing::KindOf(fp8)),
                        0.0);
            }
          }
        }
      }
    }
  }
}

// The W8A8 product against two float64 references: the product of the
// quantised activations with the dequantised weight (within fp32
// accumulation, GemmTolerance), and the product of the activations
// themselves with the dequantised weight (within fp8's bound, dense_ops.h).
TEST_P(DenseOpTest, Fp8BlockGemmMatchesFloat64ReferencesWithinFp8Error) {
  for (const GemmShape& sh :
       {GemmShape{1, 128, 128}, GemmShape{1, 200, 136}, GemmShape{7, 384, 257},
        GemmShape{130, 300, 72}, GemmShape{33, 64, 512}, GemmShape{5, 129, 129},
        GemmShape{64, 1024, 576}}) {
    for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
      for (DType x_type : {DType::kFloat32, DType::kBFloat16}) {
        for (DType y_type : {DType::kFloat32, DType::kBFloat16}) {
          SCOPED_TRACE(absl::StrCat("rows ", sh.rows, " in ", sh.in, " out ",
                                    sh.out, " ", DTypeName(fp8), " x ",
                                    DTypeName(x_type), " y ",
                                    DTypeName(y_type)));
          std::vector<float> x = RandomFloats(sh.rows * sh.in, 2.0);
          ZeroEdges(x, sh.rows, sh.in);
          // A weight as a checkpoint holds it: 128 x 128 blocks.
          const std::vector<float> w_full = RandomFloats(sh.out * sh.in, 0.05);
          const QuantizedRef w =
              QuantizeRef(w_full, sh.out, sh.in, kBlock, fp8);
          Fp8BlockGemm::Args a;
          a.x = FloatsToDevice(x, x_type, {sh.rows, sh.in});
          a.w = ToDevice(w.codes, fp8, {sh.out, sh.in});
          a.w_scale_inv = ToDevice(
              w.scales, DType::kFloat32,
              {(sh.out + kBlock - 1) / kBlock, (sh.in + kBlock - 1) / kBlock});
          a.y = Poisoned(y_type, {sh.rows, sh.out});
          ASSERT_THAT(Run<Fp8BlockGemm>(a), IsOk());
          const std::vector<double> y = Read(a.y);
          const QuantizedRef xq = QuantizeRef(x, sh.rows, sh.in, 1, fp8);
          const reference::Fp8Kind kind = testing::KindOf(fp8);
          const int64_t groups = (sh.in + kBlock - 1) / kBlock;
          // Dequantised operands, and each x element's rounding allowance.
          std::vector<double> wd(sh.out * sh.in), xd(sh.rows * sh.in),
              allowance(sh.rows * sh.in);
          for (int64_t o = 0; o < sh.out; ++o) {
            for (int64_t i = 0; i < sh.in; ++i) {
              wd[o * sh.in + i] =
                  reference::Fp8Value(w.codes[o * sh.in + i], kind) *
                  w.scales[(o / kBlock) * groups + i / kBlock];
            }
          }
          for (int64_t r = 0; r < sh.rows; ++r) {
            for (int64_t i = 0; i < sh.in; ++i) {
              const double sx = xq.scales[r * groups + i / kBlock];
              xd[r * sh.in + i] =
                  reference::Fp8Value(xq.codes[r * sh.in + i], kind) * sx;
              allowance[r * sh.in + i] =
                  (0x1p-4 + 0x1p-22) * std::abs(x[r * sh.in + i]) +
                  HalfSubnormalStep(fp8) * sx;
            }
          }
          int bad = 0;
          double worst_fp8 = 0.0;
          for (int64_t r = 0; r < sh.rows; ++r) {
            for (int64_t o = 0; o < sh.out; ++o) {
              double ref_q = 0.0, mag_q = 0.0, ref = 0.0, bound = 0.0;
              const double* wr = wd.data() + o * sh.in;
              const double* xr = xd.data() + r * sh.in;
              const double* ar = allowance.data() + r * sh.in;
              const float* x0 = x.data() + r * sh.in;
              for (int64_t i = 0; i < sh.in; ++i) {
                ref_q += xr[i] * wr[i];
                mag_q += std::abs(xr[i] * wr[i]);
                ref += double{x0[i]} * wr[i];
                bound += std::abs(wr[i]) * ar[i];
              }
              const double got = y[r * sh.out + o];
              const double tight = GemmTolerance(mag_q, sh.in, y_type, ref_q);
              if (!(std::abs(got - ref_q) <= tight) && ++bad <= 5) {
                ADD_FAILURE() << "y[" << r << ", " << o << "] = " << got
                              << ", expected " << ref_q << " (quantised x)";
              }
              const double fp8_bound = bound + tight;
              if (!(std::abs(got - ref) <= fp8_bound) && ++bad <= 5) {
                ADD_FAILURE()
                    << "y[" << r << ", " << o << "] = " << got << ", more than "
                    << fp8_bound << " from " << ref << " (fp8's bound)";
              }
              if (fp8_bound > 0) {
                worst_fp8 =
                    std::max(worst_fp8, std::abs(got - ref) / fp8_bound);
              }
              // The zero row gives exact zeros.
              if (r == 0) {
                ASSERT_EQ(got, 0.0) << "column " << o;
              }
            }
          }
          EXPECT_EQ(bad, 0);
          RecordProperty(
              absl::StrCat("fp8_bound_use_", sh.rows, "x", sh.in, "x", sh.out),
              std::to_string(worst_fp8));
        }
      }
    }
  }
}

// A weight's rows addressed through a view into a larger (concatenated)
// weight: a row stride, and block scales whose rows start at the view's
// first block (a fused projection whose first part has a multiple of 128
// rows).
TEST_P(DenseOpTest, Fp8BlockGemmOnARowSliceOfAConcatenatedWeight) {
  const int64_t rows = 9, in = 256, first = 256, second = 200;
  const int64_t total = first + second;
  std::vector<float> x = RandomFloats(rows * in);
  const std::vector<float> w_full = RandomFloats(total * in, 0.05);
  const QuantizedRef w =
      QuantizeRef(w_full, total, in, kBlock, DType::kFloat8E4m3fn);
  const TensorView whole_w =
      ToDevice(w.codes, DType::kFloat8E4m3fn, {total, in});
  const TensorView whole_s =
      ToDevice(w.scales, DType::kFloat32, {(total + kBlock - 1) / kBlock, 2});
  Fp8BlockGemm::Args a;
  a.x = FloatsToDevice(x, DType::kFloat32, {rows, in});
  a.w = MakeTensorView(static_cast<uint8_t*>(whole_w.data) + first * in,
                       DType::kFloat8E4m3fn, {second, in});
  a.w_scale_inv =
      MakeTensorView(static_cast<float*>(whole_s.data) + (first / kBlock) * 2,
                     DType::kFloat32, {(second + kBlock - 1) / kBlock, 2});
  a.y = Poisoned(DType::kFloat32, {rows, second});
  ASSERT_THAT(Run<Fp8BlockGemm>(a), IsOk());
  const std::vector<double> y = Read(a.y);
  const QuantizedRef xq = QuantizeRef(x, rows, in, 1, DType::kFloat8E4m3fn);
  EXPECT_EQ(
      GemmMismatches(
          rows, second, in, DType::kFloat32, "y",
          [&](int64_t r, int64_t o) { return y[r * second + o]; },
          [&](int64_t r, int64_t o, int64_t i) {
            const double wd = reference::Fp8Value(w.codes[(first + o) * in + i],
                                                  reference::Fp8Kind::kE4m3fn) *
                              w.scales[((first + o) / kBlock) * 2 + i / kBlock];
            const double xd = reference::Fp8Value(xq.codes[r * in + i],
                                                  reference::Fp8Kind::kE4m3fn) *
                              xq.scales[r * 2 + i / kBlock];
            return xd * wd;
          }),
      0);
}

// Quantising a weight with the op (block_rows 128) and multiplying with the
// result is the same product as with the reference's quantisation.
TEST_P(DenseOpTest, Fp8BlockQuantOfAWeightFeedsTheProduct) {
  const int64_t rows = 17, in = 320, out = 200;
  std::vector<float> w_full = RandomFloats(out * in, 0.05);
  Fp8BlockQuant::Args qa;
  qa.x = FloatsToDevice(w_full, DType::kBFloat16, {out, in});
  qa.block_rows = kBlock;
  qa.q = Poisoned(DType::kFloat8E4m3fn, {out, in});
  qa.scale_inv = Poisoned(DType::kFloat32, {2, 3});
  ASSERT_THAT(Run<Fp8BlockQuant>(qa), IsOk());
  std::vector<float> x = RandomFloats(rows * in);
  Fp8BlockGemm::Args a;
  a.x = FloatsToDevice(x, DType::kBFloat16, {rows, in});
  a.w = qa.q;
  a.w_scale_inv = qa.scale_inv;
  a.y = Poisoned(DType::kFloat32, {rows, out});
  ASSERT_THAT(Run<Fp8BlockGemm>(a), IsOk());
  const std::vector<double> y = Read(a.y);
  // w_full holds the bf16-rounded values the op read.
  const QuantizedRef w =
      QuantizeRef(w_full, out, in, kBlock, DType::kFloat8E4m3fn);
  const QuantizedRef xq = QuantizeRef(x, rows, in, 1, DType::kFloat8E4m3fn);
  EXPECT_EQ(GemmMismatches(
                rows, out, in, DType::kFloat32, "y",
                [&](int64_t r, int64_t o) { return y[r * out + o]; },
                [&](int64_t r, int64_t o, int64_t i) {
                  return reference::Fp8Value(xq.codes[r * in + i],
                                             reference::Fp8Kind::kE4m3fn) *
                         xq.scales[r * 3 + i / kBlock] *
                         reference::Fp8Value(w.codes[o * in + i],
                                             reference::Fp8Kind::kE4m3fn) *
                         w.scales[(o / kBlock) * 3 + i / kBlock];
                }),
            0);
}

// RMSNorm with y_q writes y unchanged and, beside it, y's quantisation per
// token and 128 columns: the reference's codes and scales of y's values as
// stored (after a bf16 y's rounding), bit for bit, into group-major scales.
TEST_P(DenseOpTest, RmsNormAlsoWritesTheQuantisationOfItsOutputBitForBit) {
  struct Shape {
    int64_t rows, dim, stride;
  };
  for (const Shape& sh :
       {Shape{37, 300, 320}, Shape{5, 128, 128}, Shape{64, 1024, 1024},
        Shape{3, 1, 4}, Shape{9, 257, 257}}) {
    for (DType type : {DType::kFloat32, DType::kBFloat16}) {
      for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
        SCOPED_TRACE(absl::StrCat(sh.rows, " x ", sh.dim, " ", DTypeName(type),
                                  " -> ", DTypeName(fp8)));
        std::vector<float> x = RandomFloats(sh.rows * sh.stride, 3.0);
        for (int64_t c = 0; c < sh.stride; ++c) x[c] = 0.0f;  // row 0: zeros
        std::vector<float> w = RandomFloats(sh.dim);
        RmsNorm::Args a;
        a.x = FloatsToDevice(x, type, {sh.rows, sh.stride});
        a.x.shape[1] = sh.dim;
        a.weight = FloatsToDevice(w, type, {sh.dim});
        a.eps = 1e-6f;
        a.y = Poisoned(type, {sh.rows, sh.dim});
        // Without the quantisation first: the same y.
        ASSERT_THAT(Run<RmsNorm>(a), IsOk());
        const std::vector<uint8_t> plain_y =
            ToHost<uint8_t>(a.y, sh.rows * sh.dim * DTypeSize(type));
        const int64_t groups = (sh.dim + kBlock - 1) / kBlock;
        a.y = Poisoned(type, {sh.rows, sh.dim});
        a.y_q = Poisoned(fp8, {sh.rows, sh.dim});
        a.y_scale_inv = PoisonedGroupMajor(sh.rows, groups);
        ASSERT_THAT(Run<RmsNorm>(a), IsOk());
        ASSERT_EQ(ToHost<uint8_t>(a.y, sh.rows * sh.dim * DTypeSize(type)),
                  plain_y);
        const std::vector<double> y_values = Read(a.y);
        const std::vector<float> y(y_values.begin(), y_values.end());
        const QuantizedRef ref = QuantizeRef(y, sh.rows, sh.dim, 1, fp8);
        const std::vector<uint8_t> codes = ToHost<uint8_t>(a.y_q);
        const std::vector<float> scales =
            ToHost<float>(a.y_scale_inv, sh.rows * groups);
        int bad = 0;
        for (int64_t r = 0; r < sh.rows; ++r) {
          for (int64_t g = 0; g < groups; ++g) {
            const float got = scales[g * sh.rows + r];
            const float want = ref.scales[r * groups + g];
            if (std::memcmp(&got, &want, 4) != 0 && ++bad <= 5) {
              ADD_FAILURE() << "scale of row " << r << " group " << g << " is "
                            << got << ", expected " << want;
            }
          }
          for (int64_t c = 0; c < sh.dim; ++c) {
            const int64_t i = r * sh.dim + c;
            if (codes[i] != ref.codes[i] && ++bad <= 5) {
              ADD_FAILURE()
                  << "y_q[" << r << ", " << c << "] = " << int{codes[i]}
                  << ", expected " << int{ref.codes[i]} << " for " << y[i];
            }
          }
        }
        EXPECT_EQ(bad, 0);
        // Row 0 (zeros) takes the floor's scale.
        EXPECT_EQ(scales[0],
                  1e-10f / (fp8 == DType::kFloat8E4m3fnuz ? 224.0f : 448.0f));
      }
    }
  }
}

// rms_norm with the residual: residual_add then rms_norm of the residual,
// bit for bit (the sum, y and y's quantisation), for f32 and bf16 streams
// and inputs, strided rows, dims that are not a multiple of the block, rows
// of GLM-5.x's hidden size and longer; and
// its bad arguments named.
TEST_P(DenseOpTest, RmsNormWithTheResidualIsResidualAddThenRmsNormBitForBit) {
  struct Shape {
    int64_t rows, dim, stride;
  };
  for (const Shape& sh :
       {Shape{37, 300, 320}, Shape{64, 1024, 1024}, Shape{3, 1, 4},
        Shape{9, 257, 257}, Shape{3, 6144, 6144}, Shape{2, 8193, 8200}}) {
    for (DType stream : {DType::kFloat32, DType::kBFloat16}) {
      for (DType x_type : {DType::kFloat32, DType::kBFloat16}) {
        for (bool quantise : {false, true}) {
          SCOPED_TRACE(absl::StrCat(sh.rows, " x ", sh.dim, " residual ",
                                    DTypeName(stream), " x ", DTypeName(x_type),
                                    quantise ? " y_q" : ""));
          std::vector<float> r0 = RandomFloats(sh.rows * sh.stride, 3.0);
          std::vector<float> x = RandomFloats(sh.rows * sh.stride, 2.0);
          std::vector<float> w = RandomFloats(sh.dim);
          const int64_t groups = (sh.dim + kBlock - 1) / kBlock;
          const int64_t y_bytes =
              sh.rows * sh.dim * DTypeSize(DType::kBFloat16);
          // Unfused: residual_add, then rms_norm of the residual.
          ResidualAdd::Args add;
          add.residual = FloatsToDevice(r0, stream, {sh.rows, sh.stride});
          add.residual.shape[1] = sh.dim;
          add.x = FloatsToDevice(x, x_type, {sh.rows, sh.stride});
          add.x.shape[1] = sh.dim;
          ASSERT_THAT(Run<ResidualAdd>(add), IsOk());
          RmsNorm::Args plain;
          plain.x = add.residual;
          plain.weight = FloatsToDevice(w, DType::kBFloat16, {sh.dim});
          plain.eps = 1e-5f;
          plain.y = Poisoned(DType::kBFloat16, {sh.rows, sh.dim});
          if (quantise) {
            plain.y_q = Poisoned(DType::kFloat8E4m3fn, {sh.rows, sh.dim});
            plain.y_scale_inv = PoisonedGroupMajor(sh.rows, groups);
          }
          ASSERT_THAT(Run<RmsNorm>(plain), IsOk());
          // Fused, from the same inputs.
          RmsNorm::Args fused = plain;
          fused.residual = FloatsToDevice(r0, stream, {sh.rows, sh.stride});
          fused.residual.shape[1] = sh.dim;
          fused.x = add.x;
          fused.y = Poisoned(DType::kBFloat16, {sh.rows, sh.dim});
          if (quantise) {
            fused.y_q = Poisoned(DType::kFloat8E4m3fn, {sh.rows, sh.dim});
            fused.y_scale_inv = PoisonedGroupMajor(sh.rows, groups);
          }
          ASSERT_THAT(Run<RmsNorm>(fused), IsOk());
          const int64_t stream_bytes = sh.rows * sh.stride * DTypeSize(stream);
          EXPECT_EQ(ToHost<uint8_t>(fused.residual, stream_bytes),
                    ToHost<uint8_t>(add.residual, stream_bytes));
          EXPECT_EQ(ToHost<uint8_t>(fused.y, y_bytes),
                    ToHost<uint8_t>(plain.y, y_bytes));
          if (quantise) {
            EXPECT_EQ(ToHost<uint8_t>(fused.y_q), ToHost<uint8_t>(plain.y_q));
            EXPECT_EQ(ToHost<float>(fused.y_scale_inv, sh.rows * groups),
                      ToHost<float>(plain.y_scale_inv, sh.rows * groups));
          }
          // And against float64: the sum rounded to the stream's type, then
          // the norm.
          const std::vector<double> got = Read(fused.y);
          double worst = 0;
          for (int64_t row = 0; row < sh.rows; ++row) {
            std::vector<double> v(sh.dim);
            double ss = 0;
            for (int64_t c = 0; c < sh.dim; ++c) {
              const int64_t i = row * sh.stride + c;
              const float xi =
                  x_type == DType::kBFloat16 ? RoundToBf16(x[i]) : x[i];
              const float ri =
                  stream == DType::kBFloat16 ? RoundToBf16(r0[i]) : r0[i];
              float sum = ri + xi;
              if (stream == DType::kBFloat16) sum = RoundToBf16(sum);
              v[c] = sum;
              ss += v[c] * v[c];
            }
            const double inv = 1.0 / std::sqrt(ss / sh.dim + 1e-5);
            for (int64_t c = 0; c < sh.dim; ++c) {
              const double want = v[c] * inv * RoundToBf16(w[c]);
              worst = std::max(worst, std::abs(got[row * sh.dim + c] - want) /
                                          std::max(1.0, std::abs(want)));
            }
          }
          EXPECT_LT(worst, 1.0 / 128);  // bf16 y's rounding
        }
      }
    }
  }
  // Bad arguments, named.
  std::vector<float> xs = RandomFloats(4 * 8), ws = RandomFloats(8),
                     wide = RandomFloats(4 * 9);
  RmsNorm::Args a;
  a.x = FloatsToDevice(xs, DType::kFloat32, {4, 8});
  a.weight = FloatsToDevice(ws, DType::kFloat32, {8});
  a.y = Poisoned(DType::kFloat32, {4, 8});
  a.residual = FloatsToDevice(wide, DType::kFloat32, {4, 9});
  EXPECT_THAT(Run<RmsNorm>(a), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("rms_norm: residual")));
  a.residual = ToDevice(std::vector<int32_t>(32), DType::kInt32, {4, 8});
  EXPECT_THAT(Run<RmsNorm>(a), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("rms_norm: residual")));
  a.residual = a.y;  // the output in place of the stream
  EXPECT_THAT(Run<RmsNorm>(a), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("overlap")));
}

// rms_norm gives the same bits whether its rows are aligned for vector
// accesses or not: rows of stride dim and of stride dim + 1 (every other
// row then starts off a vector boundary), plain and with the residual, with
// and without the fp8 copy, at the models' hidden and narrow-norm sizes.
TEST_P(DenseOpTest, RmsNormGivesTheSameBitsWhateverItsRowsAlignment) {
  constexpr int64_t kRows = 5;
  for (int64_t dim : {int64_t{6144}, int64_t{2048}, int64_t{1536}, int64_t{512},
                      int64_t{160}, int64_t{8192}}) {
    for (DType type : {DType::kFloat32, DType::kBFloat16}) {
      for (bool fused : {false, true}) {
        for (bool quantise : {false, true}) {
          SCOPED_TRACE(absl::StrCat(dim, " ", DTypeName(type),
                                    fused ? " with the residual" : "",
                                    quantise ? " y_q" : ""));
          const std::vector<float> x = RandomFloats(kRows * dim, 2.0);
          const std::vector<float> r0 = RandomFloats(kRows * dim, 3.0);
          std::vector<float> w = RandomFloats(dim);
          const int64_t groups = (dim + kBlock - 1) / kBlock;
          struct Result {
            std::vector<uint8_t> y, residual, y_q;
            std::vector<float> scales;
          };
          auto run = [&](int64_t stride) {
            // The same rows, `stride` apart.
            auto spread = [&](const std::vector<float>& rows) {
              std::vector<float> out(kRows * stride, 0.0f);
              for (int64_t r = 0; r < kRows; ++r) {
                std::copy_n(rows.begin() + r * dim, dim,
                            out.begin() + r * stride);
              }
              return out;
            };
            RmsNorm::Args a;
            std::vector<float> xs = spread(x), rs = spread(r0);
            a.x = FloatsToDevice(xs, type, {kRows, stride});
            a.x.shape[1] = dim;
            a.weight = FloatsToDevice(w, DType::kBFloat16, {dim});
            a.eps = 1e-6f;
            a.y = Poisoned(DType::kBFloat16, {kRows, dim});
            if (fused) {
              a.residual = FloatsToDevice(rs, type, {kRows, stride});
              a.residual.shape[1] = dim;
            }
            if (quantise) {
              a.y_q = Poisoned(DType::kFloat8E4m3fn, {kRows, dim});
              a.y_scale_inv = PoisonedGroupMajor(kRows, groups);
            }
            Result res;
            EXPECT_THAT(Run<RmsNorm>(a), IsOk());
            res.y = ToHost<uint8_t>(a.y, kRows * dim * 2);
            if (fused) {
              const std::vector<uint8_t> all =
                  ToHost<uint8_t>(a.residual, kRows * stride * DTypeSize(type));
              for (int64_t r = 0; r < kRows; ++r) {
                res.residual.insert(
                    res.residual.end(),
                    all.begin() + r * stride * DTypeSize(type),
                    all.begin() + (r * stride + dim) * DTypeSize(type));
              }
            }
            if (quantise) {
              res.y_q = ToHost<uint8_t>(a.y_q);
              res.scales = ToHost<float>(a.y_scale_inv, kRows * groups);
            }
            return res;
          };
          const Result aligned = run(dim), unaligned = run(dim + 1);
          EXPECT_EQ(aligned.y, unaligned.y);
          EXPECT_EQ(aligned.residual, unaligned.residual);
          EXPECT_EQ(aligned.y_q, unaligned.y_q);
          EXPECT_EQ(aligned.scales, unaligned.scales);
        }
      }
    }
  }
}

// The product of activations quantised beforehand (x_q, x_scale_inv; x
// absent) equals the product of x, which quantises the same way inside: to
// the bit with group-major scales (the layout the vendor path takes), and
// within the accumulation's rounding of the reference with token-major ones.
TEST_P(DenseOpTest, Fp8BlockGemmOfQuantisedActivationsIsTheProductOfX) {
  for (const GemmShape& sh :
       {GemmShape{64, 1024, 576}, GemmShape{7, 384, 257},
        GemmShape{130, 300, 72}, GemmShape{1, 128, 128}}) {
    for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
      for (DType y_type : {DType::kFloat32, DType::kBFloat16}) {
        SCOPED_TRACE(absl::StrCat("rows ", sh.rows, " in ", sh.in, " out ",
                                  sh.out, " ", DTypeName(fp8), " y ",
                                  DTypeName(y_type)));
        std::vector<float> x = RandomFloats(sh.rows * sh.in, 2.0);
        ZeroEdges(x, sh.rows, sh.in);
        const QuantizedRef w = QuantizeRef(RandomFloats(sh.out * sh.in, 0.05),
                                           sh.out, sh.in, kBlock, fp8);
        const int64_t groups = (sh.in + kBlock - 1) / kBlock;
        Fp8BlockGemm::Args a;
        a.x = FloatsToDevice(x, DType::kBFloat16, {sh.rows, sh.in});
        a.w = ToDevice(w.codes, fp8, {sh.out, sh.in});
        a.w_scale_inv = ToDevice(w.scales, DType::kFloat32,
                                 {(sh.out + kBlock - 1) / kBlock, groups});
        a.y = Poisoned(y_type, {sh.rows, sh.out});
        ASSERT_THAT(Run<Fp8BlockGemm>(a), IsOk());
        const std::vector<uint8_t> of_x =
            ToHost<uint8_t>(a.y, sh.rows * sh.out * DTypeSize(y_type));

        Fp8BlockQuant::Args q;
        q.x = a.x;
        q.block_rows = 1;
        q.q = Poisoned(fp8, {sh.rows, sh.in});
        q.scale_inv = PoisonedGroupMajor(sh.rows, groups);
        ASSERT_THAT(Run<Fp8BlockQuant>(q), IsOk());
        Fp8BlockGemm::Args b = a;
        b.x = TensorView();
        b.x_q = q.q;
        b.x_scale_inv = q.scale_inv;
        b.y = Poisoned(y_type, {sh.rows, sh.out});
        ASSERT_THAT(Run<Fp8BlockGemm>(b), IsOk());
        EXPECT_EQ(ToHost<uint8_t>(b.y, sh.rows * sh.out * DTypeSize(y_type)),
                  of_x);

        // Token-major scales: the same quantisation, another layout.
        q.scale_inv = Poisoned(DType::kFloat32, {sh.rows, groups});
        ASSERT_THAT(Run<Fp8BlockQuant>(q), IsOk());
        b.x_scale_inv = q.scale_inv;
        b.y = Poisoned(y_type, {sh.rows, sh.out});
        ASSERT_THAT(Run<Fp8BlockGemm>(b), IsOk());
        const std::vector<double> y = Read(b.y);
        const QuantizedRef xq = QuantizeRef(x, sh.rows, sh.in, 1, fp8);
        const reference::Fp8Kind kind = testing::KindOf(fp8);
        EXPECT_EQ(
            GemmMismatches(
                sh.rows, sh.out, sh.in, y_type, "y",
                [&](int64_t r, int64_t o) { return y[r * sh.out + o]; },
                [&](int64_t r, int64_t o, int64_t i) {
                  return reference::Fp8Value(xq.codes[r * sh.in + i], kind) *
                         xq.scales[r * groups + i / kBlock] *
                         reference::Fp8Value(w.codes[o * sh.in + i], kind) *
                         w.scales[(o / kBlock) * groups + i / kBlock];
                }),
            0);
      }
    }
  }
}

// The quantised activations' and RMSNorm's fp8 output's argument errors.
TEST_P(DenseOpTest, QuantisedActivationsBadArgumentsAreClearErrors) {
  const int64_t rows = 4, in = 200, out = 136;
  std::vector<float> x = RandomFloats(rows * in);
  std::vector<uint8_t> codes(out * in, 0x38), x_codes(rows * in, 0x38);
  std::vector<float> scales(2 * 2, 0.01f), x_scales(rows * 2, 0.01f);
  Fp8BlockGemm::Args a;
  a.w = ToDevice(codes, DType::kFloat8E4m3fn, {out, in});
  a.w_scale_inv = ToDevice(scales, DType::kFloat32, {2, 2});
  a.y = Poisoned(DType::kFloat32, {rows, out});
  a.x_q = ToDevice(x_codes, DType::kFloat8E4m3fn, {rows, in});
  a.x_scale_inv = ToDevice(x_scales, DType::kFloat32, {rows, 2});
  ASSERT_THAT(Run<Fp8BlockGemm>(a), IsOk());
  const TensorView x_q = a.x_q, x_scale_inv = a.x_scale_inv;
  a.x_scale_inv = TensorView();
  EXPECT_THAT(Run<Fp8BlockGemm>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_gemm: x_q is given without "
                                 "x_scale_inv, expected both or neither")));
  a.x_scale_inv = x_scale_inv;
  a.x = FloatsToDevice(x, DType::kFloat32, {rows, in});
  EXPECT_THAT(Run<Fp8BlockGemm>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_gemm: x and x_q are both given")));
  a.x = TensorView();
  a.x_q = ToDevice(x_codes, DType::kFloat8E4m3fnuz, {rows, in});
  EXPECT_THAT(Run<Fp8BlockGemm>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_gemm: x_q has dtype "
                                 "float8_e4m3fnuz, expected w's "
                                 "float8_e4m3fn")));
  a.x_q = x_q;
  std::vector<float> narrow(rows, 0.01f);
  a.x_scale_inv = ToDevice(narrow, DType::kFloat32, {rows, 1});
  EXPECT_THAT(Run<Fp8BlockGemm>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_gemm: x_scale_inv dim 1 (in "
                                 "blocks) is 1, expected 2")));
  a.x_scale_inv = x_scale_inv;
  std::vector<uint8_t> short_codes(rows * 72, 0x38);
  a.x_q = ToDevice(short_codes, DType::kFloat8E4m3fn, {rows, 72});
  EXPECT_THAT(Run<Fp8BlockGemm>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_gemm: w dim 1 (in) is 200, "
                                 "expected 72 (x_q's in)")));

  RmsNorm::Args n;
  std::vector<float> weight = RandomFloats(in);
  n.x = FloatsToDevice(x, DType::kFloat32, {rows, in});
  n.weight = FloatsToDevice(weight, DType::kFloat32, {in});
  n.y = Poisoned(DType::kFloat32, {rows, in});
  n.y_q = Poisoned(DType::kFloat8E4m3fn, {rows, in});
  EXPECT_THAT(Run<RmsNorm>(n),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rms_norm: y_q is given without "
                                 "y_scale_inv")));
  n.y_scale_inv = PoisonedGroupMajor(rows, 3);
  EXPECT_THAT(Run<RmsNorm>(n),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rms_norm: y_scale_inv dim 1 (dim blocks) "
                                 "is 3, expected 2")));
  n.y_scale_inv = PoisonedGroupMajor(rows, 2);
  n.y_q = Poisoned(DType::kBFloat16, {rows, in});
  EXPECT_THAT(Run<RmsNorm>(n), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("rms_norm: y_q has dtype")));
  n.y_q = Poisoned(DType::kFloat8E4m3fn, {rows, in - 1});
  EXPECT_THAT(Run<RmsNorm>(n), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("rms_norm: y_q dim 1")));
}

TEST_P(DenseOpTest, Fp8BadArgumentsAreClearErrors) {
  std::vector<float> x = RandomFloats(4 * 200);
  std::vector<uint8_t> codes(136 * 200, 0x38);
  std::vector<float> scales(2 * 2, 0.01f);
  Fp8BlockGemm::Args a;
  a.x = FloatsToDevice(x, DType::kFloat32, {4, 200});
  a.w = ToDevice(codes, DType::kFloat8E4m3fn, {136, 200});
  a.w_scale_inv = ToDevice(scales, DType::kFloat32, {2, 2});
  a.y = Poisoned(DType::kFloat32, {4, 136});
  ASSERT_THAT(Run<Fp8BlockGemm>(a), IsOk());
  // Scales of the wrong shape.
  std::vector<float> wrong(3 * 2, 0.01f);
  a.w_scale_inv = ToDevice(wrong, DType::kFloat32, {3, 2});
  EXPECT_THAT(Run<Fp8BlockGemm>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_gemm: w_scale_inv dim 0 (out "
                                 "blocks) is 3, expected 2 (ceil(w's out 136 "
                                 "/ 128))")));
  a.w_scale_inv = ToDevice(scales, DType::kFloat32, {2, 2});
  std::vector<float> narrow(2 * 1, 0.01f);
  a.w_scale_inv = ToDevice(narrow, DType::kFloat32, {2, 1});
  EXPECT_THAT(Run<Fp8BlockGemm>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("w_scale_inv dim 1 (in blocks) is 1, "
                                 "expected 2")));
  a.w_scale_inv = ToDevice(scales, DType::kFloat32, {2, 2});
  // Scales in bf16, a bf16 weight, an fp8 x.
  std::vector<uint16_t> bf(4, 0x3c00);
  a.w_scale_inv = ToDevice(bf, DType::kBFloat16, {2, 2});
  EXPECT_THAT(Run<Fp8BlockGemm>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_gemm: w_scale_inv")));
  a.w_scale_inv = ToDevice(scales, DType::kFloat32, {2, 2});
  std::vector<uint16_t> wb(136 * 200, 0x3c00);
  const TensorView fp8_w = a.w;
  a.w = ToDevice(wb, DType::kBFloat16, {136, 200});
  EXPECT_THAT(Run<Fp8BlockGemm>(a), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("fp8_block_gemm: w")));
  a.w = fp8_w;
  a.x = ToDevice(codes, DType::kFloat8E4m3fn, {136, 200});
  a.y = Poisoned(DType::kFloat32, {136, 136});
  EXPECT_THAT(Run<Fp8BlockGemm>(a), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("fp8_block_gemm: x")));
  // The quantiser: block_rows other than 1 and 128, scales of the wrong
  // shape for the block rows.
  Fp8BlockQuant::Args q;
  q.x = FloatsToDevice(x, DType::kFloat32, {4, 200});
  q.block_rows = 64;
  q.q = Poisoned(DType::kFloat8E4m3fn, {4, 200});
  q.scale_inv = Poisoned(DType::kFloat32, {4, 2});
  EXPECT_THAT(Run<Fp8BlockQuant>(q),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_quant: block_rows is 64")));
  q.block_rows = kBlock;
  EXPECT_THAT(Run<Fp8BlockQuant>(q),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_quant: scale_inv dim 0 (rows "
                                 "blocks) is 4, expected 1")));
  q.q = Poisoned(DType::kFloat32, {4, 200});
  EXPECT_THAT(Run<Fp8BlockQuant>(q),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_block_quant: q")));
}

INSTANTIATE_TEST_SUITE_P(Platforms, DenseOpTest,
                         ::testing::ValuesIn(testing::OpTestPlatforms()),
                         testing::PlatformName);

}  // namespace
}  // namespace dsa::attention
