// The fixture of the dense ops' conformance suites, run on every platform
// of OpTestPlatforms() against float64 references with fresh random inputs
// and poisoned outputs: dense_ops_test.cc (gemm, rms_norm, rope,
// residual_add, cast, random_fill) and dense_fp8_ops_test.cc (the FP8 block
// quantisation, the W8A8 product and the norms that quantise their output).
#ifndef DSA_ATTENTION_DENSE_OPS_TEST_FIXTURE_H_
#define DSA_ATTENTION_DENSE_OPS_TEST_FIXTURE_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "attention/dense_ops.h"
#include "attention/reference/reference.h"
#include "attention/testing/op_test.h"

namespace dsa::attention::dense_ops_test {

// A gemm output is within fp32 rounding of sum_i |x_i w_i|: at most `in`
// additions, each off by 2^-24 of a partial sum, so in * 2^-24 of the
// magnitude in the worst case (1.6e-5 at in = 272); cuBLASLt and the tiled
// kernel split the sum differently, which stays inside that bound. A bf16
// output adds its own rounding, 2^-9 of the value.
inline double GemmTolerance(double magnitude, int64_t in, DType out,
                            double reference) {
  double tol = magnitude * (static_cast<double>(in) * 0x1p-24 + 1e-6);
  if (out == DType::kBFloat16) tol += std::abs(reference) * 0x1p-8;
  return tol;
}

// Gemm elements off their float64 references: for every r < rows and
// o < out, got(r, o) against sum_i term(r, o, i) over i < in, within
// GemmTolerance for a `y_type` output; the first five named as
// what[r, o]. 0 where every element holds.
template <class Got, class Term>
int GemmMismatches(int64_t rows, int64_t out, int64_t in, DType y_type,
                   const char* what, Got got, Term term) {
  int bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double ref = 0.0, mag = 0.0;
      for (int64_t i = 0; i < in; ++i) {
        const double p = term(r, o, i);
        ref += p;
        mag += std::abs(p);
      }
      const double g = got(r, o);
      if (!(std::abs(g - ref) <= GemmTolerance(mag, in, y_type, ref)) &&
          ++bad <= 5) {
        ADD_FAILURE() << what << "[" << r << ", " << o << "] = " << g
                      << ", expected " << ref;
      }
    }
  }
  return bad;
}

// Elements read back as double.
inline std::vector<double> AsDoubles(const std::vector<uint8_t>& bytes,
                                     DType dtype) {
  std::vector<double> out;
  if (dtype == DType::kFloat32) {
    out.resize(bytes.size() / 4);
    for (size_t i = 0; i < out.size(); ++i) {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      out[i] = v;
    }
  } else {
    out.resize(bytes.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t v;
      std::memcpy(&v, bytes.data() + 2 * i, 2);
      out[i] = reference::Bf16Value(v);
    }
  }
  return out;
}

class DenseOpTest : public testing::OpTest {
 protected:
  std::vector<std::string> RequiredOps() const override {
#define DSA_DENSE_OP_NAME(CxxName, LIST, PREFIX) CxxName::kName,
    return {DSA_DENSE_OPS(DSA_DENSE_OP_NAME)};
#undef DSA_DENSE_OP_NAME
  }

  // A poisoned output of `n` elements of `dtype` ([rows, cols] view).
  TensorView Poisoned(DType dtype, std::initializer_list<int64_t> shape) {
    TensorView v = MakeTensorView(nullptr, dtype, shape);
    std::vector<uint8_t> poison(v.num_elements() * DTypeSize(dtype), 0xA5);
    return ToDeviceStrided(poison, v);
  }
  std::vector<double> Read(const TensorView& v) {
    return AsDoubles(ToHost<uint8_t>(v, v.num_elements() * DTypeSize(v.dtype)),
                     v.dtype);
  }
  // Poisoned float32 scales [rows, groups] laid out group-major, strides
  // (1, rows): the layout the W8A8 products' quantised activations take.
  TensorView PoisonedGroupMajor(int64_t rows, int64_t groups) {
    TensorView v = MakeTensorView(nullptr, DType::kFloat32, {rows, groups});
    v.strides[0] = 1;
    v.strides[1] = rows;
    std::vector<uint8_t> poison(rows * groups * 4, 0xA5);
    return ToDeviceStrided(poison, v);
  }
};

struct GemmShape {
  int64_t rows, in, out;
};

}  // namespace dsa::attention::dense_ops_test

#endif  // DSA_ATTENTION_DENSE_OPS_TEST_FIXTURE_H_
