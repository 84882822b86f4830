#include "attention/cpu/dense_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/cpu/kernel_util.h"
#include "attention/cpu/parallel.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
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

// y[r, o] = sum_i x[r, i] w[o, i] for one batch entry: x as `rows` fp32
// rows of `in` (converted once: every block of outputs reads all of it),
// weight rows converted to fp32 by load_w(o0, n, out) a block of 32 at a time
// (every weight is converted once per call, whatever the number of rows),
// results stored by store(r, o0, n, values). Work items are blocks of
// outputs, so a decode (one row) spreads over the threads as well as a
// prefill does.
template <class LoadWeightRows, class StoreRow>
void DenseProduct(int threads, const std::vector<float>& x, int64_t rows,
                  int64_t in, int64_t out, const LoadWeightRows& load_w,
                  const StoreRow& store) {
  constexpr int64_t kOutBlock = 32;
  const int64_t out_blocks = (out + kOutBlock - 1) / kOutBlock;
  ParallelFor(out_blocks, threads, 1, [&](int, int64_t begin, int64_t end) {
    std::vector<float> w(static_cast<size_t>(kOutBlock * in));
    std::vector<float> y0(kOutBlock), y1(kOutBlock);
    for (int64_t block = begin; block < end; ++block) {
      const int64_t o0 = block * kOutBlock;
      const int64_t n = std::min(kOutBlock, out - o0);
      load_w(o0, n, w.data());
      for (int64_t r0 = 0; r0 < rows; r0 += 2) {
        // An odd last row is paired with itself; the copy is dropped.
        const int64_t r1 = std::min(r0 + 1, rows - 1);
        for (int64_t o = 0; o < n; ++o) {
          Dot2(x.data() + r0 * in, x.data() + r1 * in, w.data() + o * in, in,
               &y0[o], &y1[o]);
        }
        store(r0, o0, n, y0.data());
        if (r1 != r0) store(r1, o0, n, y1.data());
      }
    }
  });
}

// Fp8BlockQuant's rule (dense_ops.h) on the `n` values of one block row
// segment: the codes of v[i] / scale.
void QuantizeSegment(const float* v, int64_t n, float scale,
                     const Fp8Traits& traits, uint8_t* codes) {
  for (int64_t i = 0; i < n; ++i) codes[i] = FloatToFp8(v[i] / scale, traits);
}

// The 256 values of an fp8 encoding.
struct Fp8Values {
  float value[256];
};
const Fp8Values& Fp8ValuesOf(DType dtype) {
  static const auto make = [](DType d) {
    auto* t = new Fp8Values();
    for (int c = 0; c < 256; ++c) {
      t->value[c] = Fp8ToFloat(static_cast<uint8_t>(c), Fp8TraitsOf(d));
    }
    return t;
  };
  static const Fp8Values* const fn = make(DType::kFloat8E4m3fn);
  static const Fp8Values* const fnuz = make(DType::kFloat8E4m3fnuz);
  return dtype == DType::kFloat8E4m3fnuz ? *fnuz : *fn;
}

float AbsMax(const float* v, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  return amax;
}

// One token's `cols` values quantised per 128 columns (Fp8BlockQuant with
// block_rows 1): the codes, and group g's scale at scales[g * scale_stride].
void QuantizeToken(const float* v, int64_t cols, const Fp8Traits& traits,
                   float divisor, uint8_t* codes, float* scales,
                   int64_t scale_stride) {
  for (int64_t c0 = 0; c0 < cols; c0 += kFp8BlockSize) {
    const int64_t m = std::min<int64_t>(kFp8BlockSize, cols - c0);
    const float scale = Fp8BlockScale(AbsMax(v + c0, m), divisor);
    scales[(c0 / kFp8BlockSize) * scale_stride] = scale;
    QuantizeSegment(v + c0, m, scale, traits, codes + c0);
  }
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
    for (int64_t r = 0; r < rows; ++r) {
      LoadRow(a.x, b * a.x.stride(0) + r * a.x.stride(1), in,
              x.data() + r * in);
    }
    const uint16_t* wp = a.w.data_as<const uint16_t>() + b * a.w.stride(0);
    DenseProduct(
        threads, x, rows, in, out,
        [&](int64_t o0, int64_t n, float* w) {
          for (int64_t o = 0; o < n; ++o) {
            const uint16_t* row = wp + (o0 + o) * a.w.stride(1);
            for (int64_t i = 0; i < in; ++i) {
              w[o * in + i] = Bf16ToFloat(row[i * a.w.stride(2)]);
            }
          }
        },
        [&](int64_t r, int64_t o0, int64_t n, const float* y) {
          StoreFloats(a.y, b * a.y.stride(0) + r * a.y.stride(1) + o0, n, y);
        });
  }
  return OkStatus();
}

Status Fp8BlockQuantCpu(const ExecutionContext& ctx,
                        const Fp8BlockQuant::Args& a) {
  DSA_RETURN_IF_ERROR(Fp8BlockQuant::Validate(a));
  const int64_t rows = a.x.dim(0), cols = a.x.dim(1);
  if (rows == 0 || cols == 0) return OkStatus();
  const int64_t br = a.block_rows;
  const int64_t row_blocks = (rows + br - 1) / br;
  const int64_t col_blocks = Fp8Blocks(cols);
  const Fp8Traits traits = Fp8TraitsOf(a.q.dtype);
  const float divisor = VllmFp8ScaleDivisor(a.q.dtype);
  ParallelFor(
      row_blocks, ResolveNumThreads(ctx.num_threads), 1,
      [&](int, int64_t begin, int64_t end) {
        std::vector<float> v(static_cast<size_t>(br * cols));
        std::vector<float> amax(static_cast<size_t>(col_blocks));
        for (int64_t rb = begin; rb < end; ++rb) {
          const int64_t r0 = rb * br;
          const int64_t n = std::min(br, rows - r0);
          std::fill(amax.begin(), amax.end(), 0.0f);
          for (int64_t r = 0; r < n; ++r) {
            float* row = v.data() + r * cols;
            LoadRow(a.x, (r0 + r) * a.x.stride(0), cols, row);
            for (int64_t cb = 0; cb < col_blocks; ++cb) {
              const int64_t c0 = cb * kFp8BlockSize;
              amax[cb] = std::max(
                  amax[cb], AbsMax(row + c0, std::min<int64_t>(kFp8BlockSize,
                                                               cols - c0)));
            }
          }
          for (int64_t cb = 0; cb < col_blocks; ++cb) {
            const float scale = Fp8BlockScale(amax[cb], divisor);
            a.scale_inv.data_as<float>()[rb * a.scale_inv.stride(0) +
                                         cb * a.scale_inv.stride(1)] = scale;
            const int64_t c0 = cb * kFp8BlockSize;
            const int64_t m = std::min<int64_t>(kFp8BlockSize, cols - c0);
            for (int64_t r = 0; r < n; ++r) {
              QuantizeSegment(
                  v.data() + r * cols + c0, m, scale, traits,
                  a.q.data_as<uint8_t>() + (r0 + r) * a.q.stride(0) + c0);
            }
          }
        }
      });
  return OkStatus();
}

Status Fp8BlockGemmCpu(const ExecutionContext& ctx,
                       const Fp8BlockGemm::Args& a) {
  DSA_RETURN_IF_ERROR(Fp8BlockGemm::Validate(a));
  const bool quantised = !a.x_q.absent();
  const TensorView& act = quantised ? a.x_q : a.x;
  const int64_t rows = act.dim(0), in = act.dim(1), out = a.w.dim(0);
  if (rows == 0 || out == 0) return OkStatus();
  const int threads = ResolveNumThreads(ctx.num_threads);
  const Fp8Traits traits = Fp8TraitsOf(a.w.dtype);
  const float divisor = VllmFp8ScaleDivisor(a.w.dtype);
  const Fp8Values& table = Fp8ValuesOf(a.w.dtype);
  const int64_t groups = Fp8Blocks(in);
  // x quantised per token and 128 columns (here, or by the caller), then
  // dequantised: x~ = q * s.
  std::vector<float> x(static_cast<size_t>(rows * in));
  ParallelFor(rows, threads, 16, [&](int, int64_t begin, int64_t end) {
    std::vector<uint8_t> own_codes(static_cast<size_t>(quantised ? 0 : in));
    std::vector<float> own_scales(static_cast<size_t>(quantised ? 0 : groups));
    for (int64_t r = begin; r < end; ++r) {
      float* row = x.data() + r * in;
      const uint8_t* codes;
      const float* scales;
      int64_t scale_stride;
      if (quantised) {
        codes = a.x_q.data_as<const uint8_t>() + r * a.x_q.stride(0);
        scales =
            a.x_scale_inv.data_as<const float>() + r * a.x_scale_inv.stride(0);
        scale_stride = a.x_scale_inv.stride(1);
      } else {
        LoadRow(a.x, r * a.x.stride(0), in, row);
        QuantizeToken(row, in, traits, divisor, own_codes.data(),
                      own_scales.data(), 1);
        codes = own_codes.data();
        scales = own_scales.data();
        scale_stride = 1;
      }
      for (int64_t i = 0; i < in; ++i) {
        row[i] =
            table.value[codes[i]] * scales[(i / kFp8BlockSize) * scale_stride];
      }
    }
  });
  const uint8_t* wp = a.w.data_as<const uint8_t>();
  const float* sp = a.w_scale_inv.data_as<const float>();
  DenseProduct(
      threads, x, rows, in, out,
      [&](int64_t o0, int64_t n, float* w) {
        for (int64_t o = 0; o < n; ++o) {
          const uint8_t* row = wp + (o0 + o) * a.w.stride(0);
          const float* scales =
              sp + ((o0 + o) / kFp8BlockSize) * a.w_scale_inv.stride(0);
          for (int64_t i = 0; i < in; ++i) {
            w[o * in + i] = table.value[row[i]] * scales[i / kFp8BlockSize];
          }
        }
      },
      [&](int64_t r, int64_t o0, int64_t n, const float* y) {
        StoreFloats(a.y, r * a.y.stride(0) + o0, n, y);
      });
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
  const bool quantise = !a.y_q.absent();
  const bool fused = !a.residual.absent();
  const Fp8Traits traits =
      Fp8TraitsOf(quantise ? a.y_q.dtype : DType::kFloat8E4m3fn);
  const float divisor =
      VllmFp8ScaleDivisor(quantise ? a.y_q.dtype : DType::kFloat8E4m3fn);
  ParallelFor(
      rows, ResolveNumThreads(ctx.num_threads), 64,
      [&](int, int64_t begin, int64_t end) {
        std::vector<float> v(static_cast<size_t>(dim));
        std::vector<float> sum(fused ? static_cast<size_t>(dim) : 0);
        for (int64_t r = begin; r < end; ++r) {
          LoadRow(a.x, r * a.x.stride(0), dim, v.data());
          if (fused) {
            // residual += x (ResidualAdd's sum), then the norm of the sum
            // as stored.
            const int64_t off = r * a.residual.stride(0);
            LoadRow(a.residual, off, dim, sum.data());
            for (int64_t i = 0; i < dim; ++i) sum[i] += v[i];
            StoreFloats(a.residual, off, dim, sum.data());
            LoadRow(a.residual, off, dim, v.data());
          }
          double sum_sq = 0.0;
          for (float e : v) sum_sq += double{e} * e;
          const float inv = static_cast<float>(
              1.0 /
              std::sqrt(sum_sq / static_cast<double>(dim) + double{a.eps}));
          for (int64_t i = 0; i < dim; ++i) {
            v[i] = v[i] * inv * weight[i];
          }
          StoreFloats(a.y, r * a.y.stride(0), dim, v.data());
          if (quantise) {
            // y's values as stored.
            if (a.y.dtype == DType::kBFloat16) {
              for (float& e : v) e = RoundToBf16(e);
            }
            QuantizeToken(
                v.data(), dim, traits, divisor,
                a.y_q.data_as<uint8_t>() + r * a.y_q.stride(0),
                a.y_scale_inv.data_as<float>() + r * a.y_scale_inv.stride(0),
                a.y_scale_inv.stride(1));
          }
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
