#include "attention/cpu/dense_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/cpu/kernel_util.h"
#include "attention/cpu/parallel.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/random_fill.h"

namespace dsa::attention::cpu {
namespace {

// A row of `n` elements of a view whose last dim is contiguous, as floats.
void LoadRow(const TensorView& t, int64_t offset, int64_t n, float* out) {
  LoadFloats(t, offset, n, out);
}

// Sixteen partial sums per dot product, which the compiler keeps in SIMD
// lanes (one float accumulator is a serial dependency it may not reorder);
// two rows of x share each weight row while it is in cache.
constexpr int kLanes = 16;
inline void Dot2(const float* x0, const float* x1, const float* w, int64_t n,
                 float* out0, float* out1) {
  float a0[kLanes] = {}, a1[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      a0[k] += x0[i + k] * w[i + k];
      a1[k] += x1[i + k] * w[i + k];
    }
  }
  float s0 = 0.0f, s1 = 0.0f;
  for (; i < n; ++i) {
    s0 += x0[i] * w[i];
    s1 += x1[i] * w[i];
  }
  for (int k = 0; k < kLanes; ++k) {
    s0 += a0[k];
    s1 += a1[k];
  }
  *out0 = s0;
  *out1 = s1;
}

}  // namespace

Status GemmCpu(const ExecutionContext& ctx, const Gemm::Args& a) {
  DSA_RETURN_IF_ERROR(Gemm::Validate(a));
  const int64_t batch = a.x.dim(0), rows = a.x.dim(1), in = a.x.dim(2);
  const int64_t out = a.w.dim(1);
  if (batch == 0 || rows == 0 || out == 0) return OkStatus();
  const int threads = ResolveNumThreads(ctx.num_threads);
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (int64_t b = 0; b < batch; ++b) {
    // x as fp32 rows, once: every block of outputs reads all of it.
    for (int64_t r = 0; r < rows; ++r) {
      LoadRow(a.x, b * a.x.stride(0) + r * a.x.stride(1), in,
              x.data() + r * in);
    }
    // Work items are blocks of outputs: each converts its block of weight
    // rows to fp32 once (every weight is converted once per call, whatever
    // the number of rows) and multiplies every row pair with it, so a decode
    // (one row) spreads over the threads as well as a prefill does.
    constexpr int64_t kOutBlock = 32;
    const int64_t out_blocks = (out + kOutBlock - 1) / kOutBlock;
    const uint16_t* wp = a.w.data_as<const uint16_t>() + b * a.w.stride(0);
    ParallelFor(out_blocks, threads, 1, [&](int, int64_t begin, int64_t end) {
      std::vector<float> w(static_cast<size_t>(kOutBlock * in));
      std::vector<float> y0(kOutBlock), y1(kOutBlock);
      for (int64_t block = begin; block < end; ++block) {
        const int64_t o0 = block * kOutBlock;
        const int64_t n = std::min(kOutBlock, out - o0);
        for (int64_t o = 0; o < n; ++o) {
          const uint16_t* row = wp + (o0 + o) * a.w.stride(1);
          for (int64_t i = 0; i < in; ++i) {
            w[o * in + i] = Bf16ToFloat(row[i * a.w.stride(2)]);
          }
        }
        for (int64_t r0 = 0; r0 < rows; r0 += 2) {
          // An odd last row is paired with itself; the copy is dropped.
          const int64_t r1 = std::min(r0 + 1, rows - 1);
          for (int64_t o = 0; o < n; ++o) {
            Dot2(x.data() + r0 * in, x.data() + r1 * in, w.data() + o * in, in,
                 &y0[o], &y1[o]);
          }
          StoreFloats(a.y, b * a.y.stride(0) + r0 * a.y.stride(1) + o0, n,
                      y0.data());
          if (r1 != r0) {
            StoreFloats(a.y, b * a.y.stride(0) + r1 * a.y.stride(1) + o0, n,
                        y1.data());
          }
        }
      }
    });
  }
  return OkStatus();
}

Status RmsNormCpu(const ExecutionContext& ctx, const RmsNorm::Args& a) {
  DSA_RETURN_IF_ERROR(RmsNorm::Validate(a));
  const int64_t rows = a.x.dim(0), dim = a.x.dim(1);
  if (rows == 0 || dim == 0) return OkStatus();
  std::vector<float> weight(static_cast<size_t>(dim));
  for (int64_t i = 0; i < dim; ++i) {
    weight[i] = LoadFloat(a.weight, i * a.weight.stride(0));
  }
  ParallelFor(rows, ResolveNumThreads(ctx.num_threads), 64,
              [&](int, int64_t begin, int64_t end) {
                std::vector<float> v(static_cast<size_t>(dim));
                for (int64_t r = begin; r < end; ++r) {
                  LoadRow(a.x, r * a.x.stride(0), dim, v.data());
                  double sum_sq = 0.0;
                  for (float e : v) sum_sq += double{e} * e;
                  const float inv = static_cast<float>(
                      1.0 / std::sqrt(sum_sq / static_cast<double>(dim) +
                                      double{a.eps}));
                  for (int64_t i = 0; i < dim; ++i) {
                    v[i] = v[i] * inv * weight[i];
                  }
                  StoreFloats(a.y, r * a.y.stride(0), dim, v.data());
                }
              });
  return OkStatus();
}

Status RopeCpu(const ExecutionContext& ctx, const Rope::Args& a) {
  DSA_RETURN_IF_ERROR(Rope::Validate(a));
  const int64_t tokens = a.x.dim(0), heads = a.x.dim(1), dim = a.x.dim(2);
  const int64_t max_position = a.cos_sin_cache.dim(0);
  // Every position is checked before anything is written.
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t p = LoadIndex<int64_t>(a.positions, t);
    if (p < 0 || p >= max_position) {
      return OutOfRangeError(StrCat(Rope::kName, ": positions[", t, "] is ", p,
                                    ", outside the cos_sin_cache's ",
                                    max_position, " positions"));
    }
  }
  ParallelFor(tokens, ResolveNumThreads(ctx.num_threads), 64,
              [&](int, int64_t begin, int64_t end) {
                std::vector<float> v(static_cast<size_t>(dim));
                std::vector<float> cs(static_cast<size_t>(dim));
                for (int64_t t = begin; t < end; ++t) {
                  const int64_t p = LoadIndex<int64_t>(a.positions, t);
                  LoadRow(a.cos_sin_cache, p * a.cos_sin_cache.stride(0), dim,
                          cs.data());
                  for (int64_t h = 0; h < heads; ++h) {
                    const int64_t off = a.x.offset(t, h);
                    LoadRow(a.x, off, dim, v.data());
                    ApplyRope(v.data(), cs.data(), dim, a.rope_style);
                    StoreFloats(a.x, off, dim, v.data());
                  }
                }
              });
  return OkStatus();
}

Status ResidualAddCpu(const ExecutionContext& ctx, const ResidualAdd::Args& a) {
  DSA_RETURN_IF_ERROR(ResidualAdd::Validate(a));
  const int64_t rows = a.x.dim(0), cols = a.x.dim(1);
  ParallelFor(rows, ResolveNumThreads(ctx.num_threads), 64,
              [&](int, int64_t begin, int64_t end) {
                std::vector<float> r(static_cast<size_t>(cols));
                std::vector<float> x(static_cast<size_t>(cols));
                for (int64_t i = begin; i < end; ++i) {
                  LoadRow(a.residual, i * a.residual.stride(0), cols, r.data());
                  LoadRow(a.x, i * a.x.stride(0), cols, x.data());
                  for (int64_t j = 0; j < cols; ++j) r[j] += x[j];
                  StoreFloats(a.residual, i * a.residual.stride(0), cols,
                              r.data());
                }
              });
  return OkStatus();
}

Status CastCpu(const ExecutionContext& ctx, const Cast::Args& a) {
  DSA_RETURN_IF_ERROR(Cast::Validate(a));
  const int64_t rows = a.x.dim(0), cols = a.x.dim(1);
  ParallelFor(rows, ResolveNumThreads(ctx.num_threads), 256,
              [&](int, int64_t begin, int64_t end) {
                std::vector<float> v(static_cast<size_t>(cols));
                for (int64_t i = begin; i < end; ++i) {
                  LoadRow(a.x, i * a.x.stride(0), cols, v.data());
                  StoreFloats(a.y, i * a.y.stride(0), cols, v.data());
                }
              });
  return OkStatus();
}

Status RandomFillCpu(const ExecutionContext& ctx, const RandomFill::Args& a) {
  DSA_RETURN_IF_ERROR(RandomFill::Validate(a));
  const int64_t n = a.y.num_elements();
  ParallelFor(n, ResolveNumThreads(ctx.num_threads), 1 << 16,
              [&](int, int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                  const float v = RandomFillValue(a.seed, a.stream,
                                                  static_cast<uint64_t>(i),
                                                  a.scale, a.offset);
                  if (a.y.dtype == DType::kFloat32) {
                    a.y.data_as<float>()[i] = v;
                  } else {
                    a.y.data_as<uint16_t>()[i] = FloatToBf16(v);
                  }
                }
              });
  return OkStatus();
}

}  // namespace dsa::attention::cpu
