// The vendor GEMM's views of a product (vendor_gemm_args.h), run through the
// CPU gemm and compared with the product as gemm_bf16.h defines it (row
// groups included), on fresh random bf16 inputs with poisoned outputs: the
// K_nope form (B's row groups: W_UK of every head), the V^T form (A's row
// groups: W_UV), the plain form, and the refusals.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attention/cpu/dense_kernels.h"
#include "attention/dtypes/bf16.h"
#include "attention/gpu/dense_mha/vendor_gemm_args.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

// Row `i` of an operand with row groups (gemm_bf16.h).
int64_t PhysicalRow(int64_t i, int64_t group_rows, int64_t group_stride) {
  return group_rows == 0 ? i : (i / group_rows) * group_stride + i % group_rows;
}

struct Form {
  std::string name;
  int64_t m, n, k;
  int64_t a_group_rows = 0, a_group_stride = 0;
  int64_t b_group_rows = 0, b_group_stride = 0;
};

void RunForm(const Form& f, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Operands as the launcher holds them: A and B with padded rows (lda, ldb
  // > k) over as many physical rows as their groups reach; C with ldc > n
  // where the form allows.
  const int64_t lda = f.k + 64, ldb = f.k + 64;
  const int64_t a_rows =
      f.a_group_rows == 0 ? f.m : (f.m / f.a_group_rows) * f.a_group_stride;
  const int64_t b_rows =
      f.b_group_rows == 0 ? f.n : (f.n / f.b_group_rows) * f.b_group_stride;
  const int64_t ldc = f.n + 8;
  std::vector<uint16_t> a(a_rows * lda), b(b_rows * ldb);
  for (uint16_t& x : a) x = FloatToBf16(normal(rng));
  for (uint16_t& x : b) x = FloatToBf16(normal(rng));
  std::vector<uint16_t> c(f.m * ldc, 0x7fc1);  // NaN
  Bf16GemmParams p;
  p.a = a.data();
  p.lda = lda;
  p.b = b.data();
  p.ldb = ldb;
  p.c = c.data();
  p.ldc = ldc;
  p.m = f.m;
  p.n = f.n;
  p.k = f.k;
  p.a_group_rows = f.a_group_rows;
  p.a_group_stride = f.a_group_stride;
  p.b_group_rows = f.b_group_rows;
  p.b_group_stride = f.b_group_stride;
  Gemm::Args g;
  const LaunchResult r = DenseMhaVendorGemmArgs(p, &g);
  ASSERT_TRUE(r.ok()) << r.message;
  ExecutionContext ctx;
  const Status s = cpu::GemmCpu(ctx, g);
  ASSERT_TRUE(s.ok()) << s.message();
  for (int64_t i = 0; i < f.m; ++i) {
    const int64_t ai = PhysicalRow(i, f.a_group_rows, f.a_group_stride);
    for (int64_t j = 0; j < f.n; ++j) {
      const int64_t bj = PhysicalRow(j, f.b_group_rows, f.b_group_stride);
      double ref = 0, mag = 0;
      for (int64_t t = 0; t < f.k; ++t) {
        const double x = static_cast<double>(Bf16ToFloat(a[ai * lda + t])) *
                         Bf16ToFloat(b[bj * ldb + t]);
        ref += x;
        mag += std::fabs(x);
      }
      const double got = Bf16ToFloat(c[i * ldc + j]);
      // bf16 output: half an ulp of the value, plus fp32 sums.
      ASSERT_LE(std::fabs(got - ref), 0x1p-8 * std::fabs(ref) + 1e-5 * mag)
          << f.name << ": C[" << i << ", " << j << "] = " << got
          << ", expected " << ref;
    }
    for (int64_t j = f.n; j < ldc; ++j) {
      ASSERT_EQ(c[i * ldc + j], 0x7fc1) << f.name << ": wrote past n";
    }
  }
}

TEST(DenseMhaVendorGemmArgsTest, MatchesRowGroupProduct) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  // kv_b_proj of 3 heads, nope 16 + v 24: K_nope = lat W_UK^T (B's groups),
  // V^T = W_UV lat^T (A's groups), and a plain product.
  Form knope{"K_nope", 37, 3 * 16, 40};
  knope.b_group_rows = 16;
  knope.b_group_stride = 16 + 24;
  Form vt{"V^T", 3 * 24, 37, 40};
  vt.a_group_rows = 24;
  vt.a_group_stride = 16 + 24;
  const Form plain{"plain", 19, 23, 40};
  for (const Form& f : {knope, vt, plain}) RunForm(f, rng);
}

TEST(DenseMhaVendorGemmArgsTest, RefusesWhatItCannotExpress) {
  Bf16GemmParams p;
  p.m = 8;
  p.n = 8;
  p.k = 8;
  p.a_group_rows = 4;
  p.a_group_stride = 6;
  p.b_group_rows = 4;
  p.b_group_stride = 6;
  Gemm::Args g;
  LaunchResult r = DenseMhaVendorGemmArgs(p, &g);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("both operands"), std::string::npos)
      << r.message;
  p.b_group_rows = 0;
  p.a_group_rows = 3;
  r = DenseMhaVendorGemmArgs(p, &g);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("do not divide"), std::string::npos)
      << r.message;
}

}  // namespace
}  // namespace dsa::attention::gpu
