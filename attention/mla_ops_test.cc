// Conformance suite of the MLA ops (latent cache write, sparse MLA, dense
// MHA prefill), run on every platform of OpTestPlatforms() against the
// float64 references, plus the property the indexer skip relies on: dense
// MHA prefill equals sparse MQA attention with full top-k for every length
// up to index_topk.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/dtypes/dtype.h"
#include "attention/ops.h"
#include "attention/reference/reference.h"
#include "attention/testing/op_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::attention {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;
using testing::KindOf;
using testing::MakePagedLayout;
using testing::PagedLayout;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// DeepSeek-V3.2 / GLM-5.x latent dims; the tiny presets use 128 / 32.
// Code below takes kLora, kRope and kDim from the case's format.
constexpr int32_t kFullLora = 512;
constexpr int32_t kFullRope = 64;

// Attention tolerance. Kernels accumulate in float32: scores are 576-term
// (or 192/256-term) dots of O(1) values, whose float32 error is ~1e-6
// relative to sum |q_d k_d|; softmax weights inherit that relative error,
// and the output (a weighted mean of values, then a 512-term W_UV product)
// is off by about 1e-6 of its own scale. Measured worst cases are 2.3e-6
// of the largest output element of the (token, head); 2e-5 leaves a margin
// of 8x, while a wrong key, a missed -1, a wrong softmax or a wrong weight
// row moves outputs by 1e-2 of that scale or more.
constexpr double kAttentionRelTol = 2e-5;
// bfloat16 outputs add one rounding: 2^-8 of the value.
constexpr double kBf16RelTol = 1.0 / 256;
// The GPU kernels multiply on bf16 matrix cores: q, the softmax weights, the
// latent output and W_UV are each rounded to bf16 (2^-9) before their fp32
// products, a few 2^-9 of the output's scale in all; 2^-6 of the scale
// leaves a 4x margin (attention/gpu/sparse_mla/kernels_test.cc).
constexpr double kGpuAttentionRelTol = 1.0 / 64;

std::vector<LatentCacheFormat> AllFormats(int32_t lora = kFullLora,
                                          int32_t rope = kFullRope) {
  return {{DType::kBFloat16, lora, rope},
          {DType::kFloat8E4m3fn, lora, rope},
          {DType::kFloat8E4m3fnuz, lora, rope}};
}

std::string FormatName(const LatentCacheFormat& f) {
  return DTypeName(f.dtype);
}

// The latent cache as the interface documents it, read and written on the
// host independently of the kernels.
struct HostLatentCache {
  LatentCacheFormat format;
  int64_t num_blocks = 0, block_size = 0;
  std::vector<uint8_t> bytes;

  HostLatentCache() = default;
  HostLatentCache(const LatentCacheFormat& f, int64_t blocks, int64_t bs)
      : format(f),
        num_blocks(blocks),
        block_size(bs),
        bytes(blocks * bs * entry_bytes()) {}
  bool fp8() const { return IsFp8(format.dtype); }
  int64_t lora() const { return format.kv_lora_rank; }
  int64_t rope() const { return format.rope_dim; }
  int64_t tiles() const { return lora() / 128; }
  // Elements per entry: bf16 values, or bytes of the fp8 layout.
  int64_t width() const {
    return fp8() ? lora() + 4 * tiles() + 2 * rope() : lora() + rope();
  }
  int64_t entry_bytes() const { return fp8() ? width() : 2 * width(); }
  int64_t num_slots() const { return num_blocks * block_size; }
  uint8_t* entry(int64_t slot) const {
    return const_cast<uint8_t*>(bytes.data()) + slot * entry_bytes();
  }
  float tile_scale(int64_t slot, int64_t tile) const {
    float s;
    std::memcpy(&s, entry(slot) + lora() + 4 * tile, 4);
    return s;
  }
  // Offset of the bf16 k_pe in an fp8 entry.
  int64_t rope_offset() const { return lora() + 4 * tiles(); }
  uint16_t bf16_at(const uint8_t* p) const {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  // kv_c | k_pe of one entry, decoded in double.
  std::vector<double> Decode(int64_t slot) const {
    std::vector<double> out(lora() + rope());
    const uint8_t* e = entry(slot);
    if (!fp8()) {
      for (int64_t i = 0; i < lora() + rope(); ++i) {
        out[i] = reference::Bf16Value(bf16_at(e + 2 * i));
      }
      return out;
    }
    for (int64_t i = 0; i < lora(); ++i) {
      out[i] = reference::Fp8Value(e[i], KindOf(format.dtype)) *
               tile_scale(slot, i / 128);
    }
    for (int64_t i = 0; i < rope(); ++i) {
      out[lora() + i] =
          reference::Bf16Value(bf16_at(e + rope_offset() + 2 * i));
    }
    return out;
  }
  // Encodes as the documented rules say (reference rounding).
  void Encode(int64_t slot, const std::vector<double>& kv_c,
              const std::vector<double>& k_pe) {
    uint8_t* e = entry(slot);
    if (!fp8()) {
      for (int64_t i = 0; i < lora() + rope(); ++i) {
        const uint16_t b =
            reference::Bf16Nearest(i < lora() ? kv_c[i] : k_pe[i - lora()]);
        std::memcpy(e + 2 * i, &b, 2);
      }
      return;
    }
    const reference::Fp8Kind kind = KindOf(format.dtype);
    for (int64_t tile = 0; tile < tiles(); ++tile) {
      double amax = 0;
      for (int i = 0; i < 128; ++i) {
        amax = std::max(amax, std::fabs(kv_c[tile * 128 + i]));
      }
      const float scale = static_cast<float>(reference::Ue8m0Scale(amax, kind));
      for (int i = 0; i < 128; ++i) {
        e[tile * 128 + i] =
            reference::Fp8Nearest(kv_c[tile * 128 + i] / scale, kind);
      }
      std::memcpy(e + lora() + 4 * tile, &scale, 4);
    }
    for (int64_t i = 0; i < rope(); ++i) {
      const uint16_t b = reference::Bf16Nearest(k_pe[i]);
      std::memcpy(e + rope_offset() + 2 * i, &b, 2);
    }
  }
  // NaN in every field: bf16 NaN bits, the fp8 NaN code, NaN scale bits.
  void Poison() {
    std::fill(bytes.begin(), bytes.end(), 0xff);
    if (format.dtype == DType::kFloat8E4m3fnuz) {
      for (int64_t s = 0; s < num_slots(); ++s) {
        std::fill(entry(s), entry(s) + lora(), 0x80);
      }
    }
  }
  TensorView View() const {
    return MakeTensorView(nullptr, fp8() ? DType::kUint8 : DType::kBFloat16,
                          {num_blocks, block_size, width()});
  }
};

// Largest |x| of a vector.
double MaxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

class MlaOpsTest : public testing::OpTest {
 protected:
  // A cache of `num_blocks` blocks whose every slot holds a random entry.
  HostLatentCache RandomCache(const LatentCacheFormat& f, int64_t num_blocks,
                              int64_t block_size) {
    HostLatentCache cache(f, num_blocks, block_size);
    for (int64_t s = 0; s < cache.num_slots(); ++s) {
      const std::vector<float> kv_c = RandomFloats(cache.lora());
      const std::vector<float> k_pe = RandomFloats(cache.rope());
      cache.Encode(s, std::vector<double>(kv_c.begin(), kv_c.end()),
                   std::vector<double>(k_pe.begin(), k_pe.end()));
    }
    return cache;
  }

  TensorView CacheToDevice(const HostLatentCache& cache) {
    return ToDeviceStrided(cache.bytes, cache.View());
  }

  // A kv_b_proj of `heads` heads, rows of N(0, 1/kv_lora) so W c is O(1).
  std::vector<float> RandomKvBProj(int64_t heads, int64_t nope, int64_t v,
                                   int64_t lora) {
    return RandomFloats(heads * (nope + v) * lora,
                        1.0 / std::sqrt(static_cast<double>(lora)));
  }

  TensorView PoisonedOutput(int64_t tokens, int64_t heads, int64_t v,
                            DType dtype) {
    if (dtype == DType::kFloat32) {
      return ToDevice(std::vector<float>(tokens * heads * v, kNaN),
                      DType::kFloat32, {tokens, heads, v});
    }
    return ToDevice(std::vector<uint16_t>(tokens * heads * v, 0x7fc0),
                    DType::kBFloat16, {tokens, heads, v});
  }

  std::vector<float> OutputToHost(const TensorView& out) {
    if (out.dtype == DType::kFloat32) return ToHost<float>(out);
    std::vector<float> f;
    for (uint16_t b : ToHost<uint16_t>(out)) {
      f.push_back(static_cast<float>(reference::Bf16Value(b)));
    }
    return f;
  }

  // Compares outputs [tokens, heads, v] with the reference's, per (token,
  // head) vector, and returns the largest error relative to that vector's
  // largest element.
  double ExpectOutputs(const std::vector<float>& got,
                       const std::vector<std::vector<double>>& expected,
                       DType out_dtype) {
    double worst = 0;
    const size_t v = expected.empty() ? 0 : expected[0].size();
    for (size_t th = 0; th < expected.size(); ++th) {
      const double scale = MaxAbs(expected[th]);
      for (size_t d = 0; d < v; ++d) {
        const double e = expected[th][d];
        const double g = got[th * v + d];
        double tol =
            (GetParam() == "cpu" ? kAttentionRelTol : kGpuAttentionRelTol) *
                scale +
            1e-6;
        if (out_dtype == DType::kBFloat16) tol += kBf16RelTol * std::fabs(e);
        EXPECT_LE(std::fabs(g - e), tol)
            << "(token, head) " << th << " dim " << d << ": got " << g
            << ", expected " << e;
        if (std::fabs(g - e) > tol) return worst;
        if (scale > 0) worst = std::max(worst, std::fabs(g - e) / scale);
      }
    }
    return worst;
  }
};

// ---------------------------------------------------------------------------
// Latent cache write.

struct CacheWrite {
  HostLatentCache poisoned;
  std::vector<float> kv_c, k_pe;
  std::vector<int64_t> slots;
  MlaCacheWrite::Args args;
};

class MlaCacheWriteTest : public MlaOpsTest {
 protected:
  std::vector<std::string> RequiredOps() const override {
    return {MlaCacheWrite::kName};
  }

  CacheWrite Make(const LatentCacheFormat& f, DType in_dtype, int64_t tokens,
                  int64_t num_blocks, int64_t block_size, bool fused_input) {
    const int64_t kLora = f.kv_lora_rank, kRope = f.rope_dim;
    const int64_t kDim = kLora + kRope;
    CacheWrite w;
    w.poisoned = HostLatentCache(f, num_blocks, block_size);
    w.poisoned.Poison();
    w.kv_c = RandomFloats(tokens * kLora);
    w.k_pe = RandomFloats(tokens * kRope);
    std::vector<int64_t> free_slots(w.poisoned.num_slots());
    std::iota(free_slots.begin(), free_slots.end(), 0);
    std::shuffle(free_slots.begin(), free_slots.end(), rng());
    for (int64_t t = 0; t < tokens; ++t) {
      w.slots.push_back(RandomInt(0, 4) == 0 ? -1 : free_slots[t]);
    }
    MlaCacheWrite::Args& a = w.args;
    if (fused_input) {
      // kv_a_proj's output [tokens, kv_lora + rope]: kv_c and k_pe are
      // column slices of it.
      std::vector<float> fused(tokens * kDim);
      for (int64_t t = 0; t < tokens; ++t) {
        std::copy(w.kv_c.begin() + t * kLora, w.kv_c.begin() + (t + 1) * kLora,
                  fused.begin() + t * kDim);
        std::copy(w.k_pe.begin() + t * kRope, w.k_pe.begin() + (t + 1) * kRope,
                  fused.begin() + t * kDim + kLora);
      }
      TensorView fused_view = FloatsToDevice(fused, in_dtype, {tokens, kDim});
      for (int64_t t = 0; t < tokens; ++t) {  // the rounded values
        std::copy(fused.begin() + t * kDim, fused.begin() + t * kDim + kLora,
                  w.kv_c.begin() + t * kLora);
        std::copy(fused.begin() + t * kDim + kLora,
                  fused.begin() + (t + 1) * kDim, w.k_pe.begin() + t * kRope);
      }
      a.kv_c = MakeTensorView(fused_view.data, in_dtype, {tokens, kLora});
      a.kv_c.strides[0] = kDim;
      a.k_pe = MakeTensorView(
          static_cast<uint8_t*>(fused_view.data) + kLora * DTypeSize(in_dtype),
          in_dtype, {tokens, kRope});
      a.k_pe.strides[0] = kDim;
    } else {
      a.kv_c = FloatsToDevice(w.kv_c, in_dtype, {tokens, kLora});
      a.k_pe = FloatsToDevice(w.k_pe, in_dtype, {tokens, kRope});
    }
    a.slot_mapping = ToDevice(w.slots, DType::kInt64, {tokens});
    a.kv_cache = CacheToDevice(w.poisoned);
    a.cache_format = f;
    return w;
  }

  void ExpectWritten(const CacheWrite& w) {
    const int64_t kLora = w.poisoned.lora(), kRope = w.poisoned.rope();
    const int64_t kDim = kLora + kRope;
    HostLatentCache got = w.poisoned;
    got.bytes = ToHost<uint8_t>(w.args.kv_cache, got.bytes.size());
    std::vector<int64_t> token_of(got.num_slots(), -1);
    for (size_t t = 0; t < w.slots.size(); ++t) {
      if (w.slots[t] >= 0) token_of[w.slots[t]] = static_cast<int64_t>(t);
    }
    const reference::Fp8Kind kind = KindOf(got.format.dtype);
    for (int64_t slot = 0; slot < got.num_slots(); ++slot) {
      const int64_t t = token_of[slot];
      const uint8_t* e = got.entry(slot);
      if (t < 0) {
        ASSERT_TRUE(
            std::equal(e, e + got.entry_bytes(), w.poisoned.entry(slot)))
            << "slot " << slot << " is not in slot_mapping but was written";
        continue;
      }
      const float* kv_c = w.kv_c.data() + t * kLora;
      const float* k_pe = w.k_pe.data() + t * kRope;
      if (!got.fp8()) {
        // bf16 round-to-nearest-even is exact to check.
        for (int64_t i = 0; i < kDim; ++i) {
          ASSERT_EQ(
              got.bf16_at(e + 2 * i),
              reference::Bf16Nearest(i < kLora ? kv_c[i] : k_pe[i - kLora]))
              << "slot " << slot << " element " << i;
        }
        continue;
      }
      for (int tile = 0; tile < kLora / 128; ++tile) {
        double amax = 0;
        for (int i = 0; i < 128; ++i) {
          amax = std::max(amax, std::fabs(double{kv_c[tile * 128 + i]}));
        }
        const double scale = got.tile_scale(slot, tile);
        const double expected_scale = reference::Ue8m0Scale(amax, kind);
        if (scale != expected_scale) {
          // Only when amax / fp8_max is within float rounding of a power
          // of two may float32 division pick the neighbouring scale.
          const double l =
              std::log2(std::max(amax, 1e-4) / reference::Fp8MaxValue(kind));
          ASSERT_LT(std::fabs(l - std::round(l)), 1e-6)
              << "slot " << slot << " tile " << tile << ": scale " << scale
              << ", expected " << expected_scale;
        }
        // Dividing by a power of two is exact, so the code must be exactly
        // the nearest one to kv_c / scale.
        for (int i = 0; i < 128; ++i) {
          ASSERT_EQ(static_cast<int>(e[tile * 128 + i]),
                    static_cast<int>(reference::Fp8Nearest(
                        kv_c[tile * 128 + i] / scale, kind)))
              << "slot " << slot << " element " << tile * 128 + i;
        }
      }
      for (int64_t i = 0; i < kRope; ++i) {
        ASSERT_EQ(got.bf16_at(e + got.rope_offset() + 2 * i),
                  reference::Bf16Nearest(k_pe[i]))
            << "slot " << slot << " rope element " << i;
      }
    }
  }
};

TEST_P(MlaCacheWriteTest, MatchesReference) {
  for (const LatentCacheFormat& f : AllFormats()) {
    for (DType in : {DType::kFloat32, DType::kBFloat16}) {
      for (bool fused : {false, true}) {
        SCOPED_TRACE(absl::StrCat(FormatName(f), " input ", DTypeName(in),
                                  fused ? " fused" : ""));
        CacheWrite w = Make(f, in, /*tokens=*/50, /*num_blocks=*/5,
                            /*block_size=*/16, fused);
        ASSERT_THAT(Run<MlaCacheWrite>(w.args), IsOk());
        ExpectWritten(w);
      }
    }
  }
}

// The tiny presets' latent: kv_lora 128 (one fp8 tile), rope 32.
TEST_P(MlaCacheWriteTest, MatchesReferenceAtTinyPresetDims) {
  for (const LatentCacheFormat& f : AllFormats(128, 32)) {
    SCOPED_TRACE(FormatName(f));
    CacheWrite w = Make(f, DType::kBFloat16, 30, 3, 16, /*fused_input=*/true);
    ASSERT_THAT(Run<MlaCacheWrite>(w.args), IsOk());
    ExpectWritten(w);
  }
}

TEST_P(MlaCacheWriteTest, RejectsBadArguments) {
  constexpr int64_t kLora = kFullLora, kRope = kFullRope;
  constexpr int64_t kDim = kLora + kRope;
  const LatentCacheFormat fp8{DType::kFloat8E4m3fn, kLora, kRope};
  CacheWrite w = Make(fp8, DType::kFloat32, 10, 2, 16, false);
  MlaCacheWrite::Args a = w.args;
  a.kv_c = MakeTensorView(w.args.kv_c.data, DType::kFloat32, {10, 256});
  EXPECT_THAT(Run<MlaCacheWrite>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "mla_cache_write: kv_c dim 1 (kv_lora_rank) is 256, "
                       "expected 512 (cache_format.kv_lora_rank)"));
  a = w.args;
  a.kv_cache =
      MakeTensorView(w.args.kv_cache.data, DType::kUint8, {2, 16, kDim});
  EXPECT_THAT(Run<MlaCacheWrite>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("kv_cache dim 2 (entry width) is 576, "
                                 "expected 656")));
  a = w.args;
  a.kv_cache.dtype = DType::kBFloat16;
  EXPECT_THAT(
      Run<MlaCacheWrite>(a),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("kv_cache has dtype bfloat16, expected uint8")));
  a = w.args;
  a.cache_format.dtype = DType::kFloat32;
  EXPECT_THAT(Run<MlaCacheWrite>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cache_format.dtype is float32")));
  a = w.args;
  a.cache_format.kv_lora_rank = 500;
  EXPECT_THAT(Run<MlaCacheWrite>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("kv_lora_rank is 500, expected a positive "
                                 "multiple of 128")));
  a = w.args;
  a.k_pe = MakeTensorView(w.args.k_pe.data, DType::kFloat32, {9, kRope});
  EXPECT_THAT(Run<MlaCacheWrite>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("k_pe dim 0 (tokens) is 9, expected 10")));
  // A slot past the cache: OutOfRange and nothing written.
  w.slots[6] = 32;
  w.args.slot_mapping = ToDevice(w.slots, DType::kInt64, {10});
  if (!ChecksIndexValues()) {
    // GPU kernels skip that token (never writing outside the cache).
    EXPECT_THAT(Run<MlaCacheWrite>(w.args), IsOk());
    return;
  }
  EXPECT_THAT(Run<MlaCacheWrite>(w.args),
              StatusIs(absl::StatusCode::kOutOfRange,
                       "mla_cache_write: slot_mapping[6] is 32, outside the "
                       "cache's 32 slots (-1 marks padding)"));
  EXPECT_EQ(ToHost<uint8_t>(w.args.kv_cache, w.poisoned.bytes.size()),
            w.poisoned.bytes);
}

// ---------------------------------------------------------------------------
// Sparse MLA.

// A batch of query rows over a random latent cache.
struct SparseCase {
  LatentCacheFormat format;
  int64_t heads = 0, nope = 0, v = 0, topk = 0;
  PagedLayout layout;
  HostLatentCache cache;
  std::vector<float> q;          // [tokens, heads, 576]
  std::vector<float> kv_b_proj;  // [heads * (nope + v), 512]
  std::vector<int32_t> token_request;
  std::vector<int32_t> indices;  // [tokens, topk]
  double softmax_scale = 0;
  int64_t tokens() const { return static_cast<int64_t>(token_request.size()); }
  int64_t lora() const { return format.kv_lora_rank; }
  int64_t dim() const { return format.kv_lora_rank + format.rope_dim; }
};

class SparseMlaTest : public MlaOpsTest {
 protected:
  // Runs on a platform as soon as it has this kernel.
  std::vector<std::string> RequiredOps() const override {
    return {SparseMla::kName};
  }

  SparseCase MakeCase(const LatentCacheFormat& f, int64_t heads, int64_t nope,
                      int64_t v, int64_t topk,
                      const std::vector<int32_t>& seq_lens,
                      int64_t block_size) {
    SparseCase c;
    c.format = f;
    c.heads = heads;
    c.nope = nope;
    c.v = v;
    c.topk = topk;
    c.layout = MakePagedLayout(seq_lens, block_size, rng());
    c.cache = RandomCache(f, c.layout.num_blocks, block_size);
    c.kv_b_proj = RandomKvBProj(heads, nope, v, f.kv_lora_rank);
    c.softmax_scale = 1.0 / std::sqrt(static_cast<double>(nope + f.rope_dim));
    return c;
  }

  // A row of request r selecting `count` random distinct positions, with
  // -1 holes spread among them.
  void AddRow(SparseCase& c, int32_t r, int64_t count) {
    const int64_t len = c.layout.seq_lens[r];
    std::vector<int32_t> positions(len);
    std::iota(positions.begin(), positions.end(), 0);
    std::shuffle(positions.begin(), positions.end(), rng());
    positions.resize(std::min(count, len));
    positions.resize(c.topk, -1);
    std::shuffle(positions.begin(), positions.end(), rng());
    c.token_request.push_back(r);
    c.indices.insert(c.indices.end(), positions.begin(), positions.end());
  }

  SparseMla::Args ToArgs(SparseCase& c, DType dtype) {
    const int64_t kLora = c.lora(), kDim = c.dim();
    const int64_t tokens = c.tokens();
    c.q = RandomFloats(tokens * c.heads * kDim);
    SparseMla::Args a;
    a.q = FloatsToDevice(c.q, dtype, {tokens, c.heads, kDim});
    a.kv_cache = CacheToDevice(c.cache);
    a.cache_format = c.format;
    const int64_t requests = static_cast<int64_t>(c.layout.seq_lens.size());
    a.block_table = ToDevice(c.layout.block_table, DType::kInt32,
                             {requests, c.layout.max_blocks});
    a.seq_lens = ToDevice(c.layout.seq_lens, DType::kInt32, {requests});
    a.token_request = ToDevice(c.token_request, DType::kInt32, {tokens});
    a.topk_indices = ToDevice(c.indices, DType::kInt32, {tokens, c.topk});
    a.kv_b_proj =
        FloatsToDevice(c.kv_b_proj, dtype, {c.heads * (c.nope + c.v), kLora});
    a.qk_nope_head_dim = static_cast<int32_t>(c.nope);
    a.softmax_scale = static_cast<float>(c.softmax_scale);
    a.output = PoisonedOutput(tokens, c.heads, c.v, dtype);
    return a;
  }

  // Reference outputs per (token, head).
  std::vector<std::vector<double>> Reference(const SparseCase& c) {
    const int64_t kLora = c.lora(), kDim = c.dim();
    std::vector<std::vector<double>> out;
    for (int64_t t = 0; t < c.tokens(); ++t) {
      std::vector<std::vector<double>> keys, values;
      for (int64_t j = 0; j < c.topk; ++j) {
        const int32_t idx = c.indices[t * c.topk + j];
        if (idx == -1) continue;
        keys.push_back(c.cache.Decode(c.layout.Slot(c.token_request[t], idx)));
        values.emplace_back(keys.back().begin(), keys.back().begin() + kLora);
      }
      for (int64_t h = 0; h < c.heads; ++h) {
        const std::vector<double> q(c.q.begin() + (t * c.heads + h) * kDim,
                                    c.q.begin() + (t * c.heads + h + 1) * kDim);
        std::vector<double> latent =
            reference::Attention(q, 1, keys, values, c.softmax_scale);
        if (latent.empty()) latent.assign(kLora, 0.0);
        const int64_t row0 = h * (c.nope + c.v) + c.nope;
        const std::vector<double> w_uv(
            c.kv_b_proj.begin() + row0 * kLora,
            c.kv_b_proj.begin() + (row0 + c.v) * kLora);
        out.push_back(reference::MatVec(w_uv, c.v, latent));
      }
    }
    return out;
  }
};

TEST_P(SparseMlaTest, MatchesReferenceWithSmallTopK) {
  for (const LatentCacheFormat& f : AllFormats()) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      SCOPED_TRACE(absl::StrCat(FormatName(f), " ", DTypeName(dtype)));
      SparseCase c = MakeCase(f, /*heads=*/4, /*nope=*/128, /*v=*/128,
                              /*topk=*/64, {1, 50, 130, 64}, /*block_size=*/16);
      for (int32_t r = 0; r < 4; ++r) {
        for (int64_t count :
             {int64_t{1}, int64_t{20}, int64_t{63}, int64_t{64}}) {
          AddRow(c, r, count);
        }
      }
      // A row without any valid index, and one that names a key twice.
      c.token_request.push_back(2);
      c.indices.insert(c.indices.end(), c.topk, -1);
      AddRow(c, 2, 10);
      c.indices[c.indices.size() - c.topk + 5] = 17;
      c.indices[c.indices.size() - c.topk + 40] = 17;
      SparseMla::Args a = ToArgs(c, dtype);
      ASSERT_THAT(Run<SparseMla>(a), IsOk());
      const std::vector<float> got = OutputToHost(a.output);
      const std::vector<std::vector<double>> expected = Reference(c);
      ExpectOutputs(got, expected, dtype);
      // The row with no index outputs exact zeros.
      const int64_t empty_row = c.tokens() - 2;
      for (int64_t i = 0; i < c.heads * c.v; ++i) {
        ASSERT_EQ(got[empty_row * c.heads * c.v + i], 0.0f);
      }
    }
  }
}

TEST_P(SparseMlaTest, MatchesReferenceAtTopk2048) {
  for (const LatentCacheFormat& f : AllFormats()) {
    SCOPED_TRACE(FormatName(f));
    SparseCase c = MakeCase(f, /*heads=*/2, /*nope=*/192, /*v=*/256,
                            /*topk=*/2048, {2047, 2048, 2049}, 64);
    for (int32_t r = 0; r < 3; ++r) AddRow(c, r, 2048);
    AddRow(c, 2, 2047);
    SparseMla::Args a = ToArgs(c, DType::kFloat32);
    ASSERT_THAT(Run<SparseMla>(a), IsOk());
    ExpectOutputs(OutputToHost(a.output), Reference(c), DType::kFloat32);
  }
}

// fp8_ds_mla caches at the real models' head counts (64: GLM-5.x, 128:
// DeepSeek-V3.2): on an sm_90a device these shapes run the seesaw body over
// the cache dequantised into a bf16 workspace (the heuristics pin the choice
// in sparse_mla/heuristics_test.cc, the GPU kernels test checks the path),
// elsewhere the warp-level or the CPU kernels. Requests of topk - 1, topk
// and topk + 1 tokens and a short one, -1 padding, a duplicate key, a row
// without any valid index; both fp8 formats, bf16 (as served) and f32.
TEST_P(SparseMlaTest, MatchesReferenceWithFp8CachesAt64And128Heads) {
  const std::vector<LatentCacheFormat> formats = AllFormats();
  for (const LatentCacheFormat& f : {formats[1], formats[2]}) {
    const DType dtype =
        f.dtype == DType::kFloat8E4m3fn ? DType::kBFloat16 : DType::kFloat32;
    for (int64_t heads : {64, 128}) {
      SCOPED_TRACE(absl::StrCat(FormatName(f), " ", DTypeName(dtype), " ",
                                heads, " heads"));
      const int32_t topk = 512;
      SparseCase c =
          MakeCase(f, heads, /*nope=*/heads == 64 ? 192 : 128,
                   /*v=*/heads == 64 ? 256 : 128, topk,
                   {topk - 1, topk, topk + 1, 40}, /*block_size=*/64);
      for (int32_t r = 0; r < 4; ++r) AddRow(c, r, topk);
      AddRow(c, 2, topk - 1);
      c.token_request.push_back(1);  // no valid index
      c.indices.insert(c.indices.end(), c.topk, -1);
      AddRow(c, 3, 30);  // a key twice
      c.indices[c.indices.size() - c.topk + 7] = 11;
      c.indices[c.indices.size() - c.topk + 300] = 11;
      SparseMla::Args a = ToArgs(c, dtype);
      ASSERT_THAT(Run<SparseMla>(a), IsOk());
      const std::vector<float> got = OutputToHost(a.output);
      ExpectOutputs(got, Reference(c), dtype);
      const int64_t empty_row = c.tokens() - 2;
      for (int64_t i = 0; i < c.heads * c.v; ++i) {
        ASSERT_EQ(got[empty_row * c.heads * c.v + i], 0.0f);
      }
    }
  }
  // Top-k 2048 at 64 heads, e4m3fn, bf16.
  SparseCase c = MakeCase(formats[1], /*heads=*/64, /*nope=*/192, /*v=*/256,
                          /*topk=*/2048, {2047, 2048, 2049}, 64);
  for (int32_t r = 0; r < 3; ++r) AddRow(c, r, 2048);
  AddRow(c, 2, 2047);
  SparseMla::Args a = ToArgs(c, DType::kBFloat16);
  ASSERT_THAT(Run<SparseMla>(a), IsOk());
  ExpectOutputs(OutputToHost(a.output), Reference(c), DType::kBFloat16);
}

TEST_P(SparseMlaTest, MatchesReferenceAtTinyPresetDims) {
  for (const LatentCacheFormat& f : AllFormats(128, 32)) {
    SCOPED_TRACE(FormatName(f));
    SparseCase c = MakeCase(f, /*heads=*/4, /*nope=*/64, /*v=*/64,
                            /*topk=*/64, {1, 50, 130}, /*block_size=*/16);
    for (int32_t r = 0; r < 3; ++r) {
      for (int64_t count : {int64_t{1}, int64_t{33}, int64_t{64}}) {
        AddRow(c, r, count);
      }
    }
    SparseMla::Args a = ToArgs(c, DType::kFloat32);
    ASSERT_THAT(Run<SparseMla>(a), IsOk());
    ExpectOutputs(OutputToHost(a.output), Reference(c), DType::kFloat32);
  }
}

TEST_P(SparseMlaTest, SameResultOnAnyThreadCount) {
  SparseCase c = MakeCase(AllFormats()[1], 3, 128, 128, 64, {100, 70}, 16);
  for (int i = 0; i < 40; ++i) AddRow(c, i % 2, 64);
  SparseMla::Args a = ToArgs(c, DType::kFloat32);
  ctx_.num_threads = 1;
  ASSERT_THAT(Run<SparseMla>(a), IsOk());
  const std::vector<float> one = ToHost<float>(a.output);
  a.output = PoisonedOutput(c.tokens(), c.heads, c.v, DType::kFloat32);
  ctx_.num_threads = 3;
  ASSERT_THAT(Run<SparseMla>(a), IsOk());
  const std::vector<float> three = ToHost<float>(a.output);
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * 4), 0);
  ExpectOutputs(one, Reference(c), DType::kFloat32);
}

TEST_P(SparseMlaTest, RejectsBadArguments) {
  constexpr int64_t kLora = kFullLora;
  SparseCase c = MakeCase(AllFormats()[2], 2, 128, 128, 8, {20, 9}, 16);
  AddRow(c, 0, 8);
  AddRow(c, 1, 5);
  const SparseMla::Args good = ToArgs(c, DType::kFloat32);
  ASSERT_THAT(Run<SparseMla>(good), IsOk());
  SparseMla::Args a = good;
  a.q = MakeTensorView(good.q.data, DType::kFloat32, {2, 2, kLora});
  EXPECT_THAT(Run<SparseMla>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sparse_mla: q dim 2 (kv_lora_rank + "
                                 "rope_dim) is 512, expected 576")));
  a = good;
  a.kv_b_proj =
      MakeTensorView(good.kv_b_proj.data, DType::kFloat32, {2 * 200, kLora});
  EXPECT_THAT(Run<SparseMla>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("kv_b_proj dim 0 (heads * (qk_nope + v)) is "
                                 "400, expected 512 (2 heads * (128 + 128))")));
  a = good;
  a.softmax_scale = 0;
  EXPECT_THAT(Run<SparseMla>(a), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("softmax_scale is 0")));
  a = good;
  a.topk_indices.dtype = DType::kInt64;
  EXPECT_THAT(Run<SparseMla>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("topk_indices has dtype int64")));
  a = good;
  a.output = MakeTensorView(good.output.data, DType::kFloat32, {2, 3, 128});
  EXPECT_THAT(Run<SparseMla>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("output dim 1 (heads) is 3, expected 2")));

  // Value errors: nothing is written. GPU kernels skip bad indices instead.
  if (!ChecksIndexValues()) return;
  auto expect_out_of_range = [&](SparseMla::Args bad, const std::string& msg) {
    bad.output = PoisonedOutput(2, 2, 128, DType::kFloat32);
    EXPECT_THAT(Run<SparseMla>(bad),
                StatusIs(absl::StatusCode::kOutOfRange, HasSubstr(msg)));
    for (float v : ToHost<float>(bad.output)) ASSERT_TRUE(std::isnan(v));
  };
  {
    std::vector<int32_t> indices = c.indices;
    indices[8 + 3] = 9;  // request 1 has 9 tokens
    a = good;
    a.topk_indices = ToDevice(indices, DType::kInt32, {2, 8});
    expect_out_of_range(a,
                        "sparse_mla: topk_indices[1, 3] is 9, outside "
                        "request 1's 9 tokens (-1 marks padding)");
    indices[8 + 3] = -2;
    a.topk_indices = ToDevice(indices, DType::kInt32, {2, 8});
    expect_out_of_range(a, "topk_indices[1, 3] is -2");
  }
  {
    a = good;
    a.token_request = ToDevice(std::vector<int32_t>{0, 2}, DType::kInt32, {2});
    expect_out_of_range(a, "token_request[1] is 2, outside the 2 requests");
  }
  {
    std::vector<int32_t> table = c.layout.block_table;
    table[1 * c.layout.max_blocks] = -5;
    a = good;
    a.block_table = ToDevice(table, DType::kInt32, {2, c.layout.max_blocks});
    expect_out_of_range(a, "block_table[1, 0] is -5");
  }
}

// ---------------------------------------------------------------------------
// Dense MHA prefill.

struct DenseCase {
  LatentCacheFormat format;
  int64_t heads = 0, nope = 0, v = 0;
  PagedLayout layout;
  HostLatentCache cache;
  std::vector<int32_t> query_start_loc;
  std::vector<float> q;  // [tokens, heads, nope + rope]
  std::vector<float> kv_b_proj;
  double softmax_scale = 0;
  int64_t tokens() const { return query_start_loc.back(); }
  int64_t qk() const { return nope + format.rope_dim; }
  int64_t lora() const { return format.kv_lora_rank; }
};

class DenseMhaTest : public SparseMlaTest {
 protected:
  std::vector<std::string> RequiredOps() const override {
    return {DenseMhaPrefill::kName};
  }

  // Requests of (context, new tokens).
  DenseCase MakeCase(const LatentCacheFormat& f, int64_t heads, int64_t nope,
                     int64_t v,
                     const std::vector<std::pair<int32_t, int32_t>>& requests,
                     int64_t block_size) {
    DenseCase c;
    c.format = f;
    c.heads = heads;
    c.nope = nope;
    c.v = v;
    std::vector<int32_t> seq_lens;
    c.query_start_loc = {0};
    for (const auto& [context, fresh] : requests) {
      seq_lens.push_back(context + fresh);
      c.query_start_loc.push_back(c.query_start_loc.back() + fresh);
    }
    c.layout = MakePagedLayout(seq_lens, block_size, rng());
    c.cache = RandomCache(f, c.layout.num_blocks, block_size);
    c.kv_b_proj = RandomKvBProj(heads, nope, v, f.kv_lora_rank);
    c.q = RandomFloats(c.tokens() * heads * c.qk());
    c.softmax_scale = 1.0 / std::sqrt(static_cast<double>(c.qk()));
    return c;
  }

  DenseMhaPrefill::Args ToArgs(DenseCase& c, DType dtype) {
    const int64_t kLora = c.lora();
    DenseMhaPrefill::Args a;
    const int64_t requests = static_cast<int64_t>(c.layout.seq_lens.size());
    a.q = FloatsToDevice(c.q, dtype, {c.tokens(), c.heads, c.qk()});
    a.kv_cache = CacheToDevice(c.cache);
    a.cache_format = c.format;
    a.block_table = ToDevice(c.layout.block_table, DType::kInt32,
                             {requests, c.layout.max_blocks});
    a.seq_lens = ToDevice(c.layout.seq_lens, DType::kInt32, {requests});
    a.query_start_loc =
        ToDevice(c.query_start_loc, DType::kInt32, {requests + 1});
    a.kv_b_proj =
        FloatsToDevice(c.kv_b_proj, dtype, {c.heads * (c.nope + c.v), kLora});
    a.softmax_scale = static_cast<float>(c.softmax_scale);
    a.output = PoisonedOutput(c.tokens(), c.heads, c.v, dtype);
    return a;
  }

  // Keys and values decompressed in double, then causal attention.
  std::vector<std::vector<double>> Reference(const DenseCase& c) {
    const int64_t kLora = c.lora();
    std::vector<std::vector<double>> out(c.tokens() * c.heads);
    for (size_t r = 0; r + 1 < c.query_start_loc.size(); ++r) {
      const int64_t len = c.layout.seq_lens[r];
      const int64_t first = c.query_start_loc[r];
      const int64_t n = c.query_start_loc[r + 1] - first;
      std::vector<std::vector<double>> keys(len), values(len);
      for (int64_t j = 0; j < len; ++j) {
        const std::vector<double> latent = c.cache.Decode(c.layout.Slot(r, j));
        const std::vector<double> kv_c(latent.begin(), latent.begin() + kLora);
        for (int64_t h = 0; h < c.heads; ++h) {
          const int64_t row0 = h * (c.nope + c.v);
          const std::vector<double> k_nope = reference::MatVec(
              std::vector<double>(
                  c.kv_b_proj.begin() + row0 * kLora,
                  c.kv_b_proj.begin() + (row0 + c.nope) * kLora),
              c.nope, kv_c);
          const std::vector<double> v = reference::MatVec(
              std::vector<double>(
                  c.kv_b_proj.begin() + (row0 + c.nope) * kLora,
                  c.kv_b_proj.begin() + (row0 + c.nope + c.v) * kLora),
              c.v, kv_c);
          keys[j].insert(keys[j].end(), k_nope.begin(), k_nope.end());
          keys[j].insert(keys[j].end(), latent.begin() + kLora, latent.end());
          values[j].insert(values[j].end(), v.begin(), v.end());
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        const int64_t t = first + i;
        const int64_t last = len - n + i;
        const std::vector<double> q(c.q.begin() + t * c.heads * c.qk(),
                                    c.q.begin() + (t + 1) * c.heads * c.qk());
        const std::vector<double> o =
            reference::Attention(q, c.heads,
                                 std::vector<std::vector<double>>(
                                     keys.begin(), keys.begin() + last + 1),
                                 std::vector<std::vector<double>>(
                                     values.begin(), values.begin() + last + 1),
                                 c.softmax_scale);
        for (int64_t h = 0; h < c.heads; ++h) {
          out[t * c.heads + h].assign(o.begin() + h * c.v,
                                      o.begin() + (h + 1) * c.v);
        }
      }
    }
    return out;
  }
};

TEST_P(DenseMhaTest, MatchesReference) {
  struct Dims {
    int64_t nope, v;
  };
  // DeepSeek-V3.2 (qk 192, v 128) and GLM-5.x (qk 256, v 256).
  for (Dims dims : {Dims{128, 128}, Dims{192, 256}}) {
    for (const LatentCacheFormat& f : AllFormats()) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        SCOPED_TRACE(absl::StrCat("nope ", dims.nope, " v ", dims.v, " ",
                                  FormatName(f), " ", DTypeName(dtype)));
        DenseCase c =
            MakeCase(f, /*heads=*/3, dims.nope, dims.v,
                     {{0, 5}, {20, 7}, {3, 1}, {0, 1}, {40, 0}, {13, 19}},
                     /*block_size=*/16);
        DenseMhaPrefill::Args a = ToArgs(c, dtype);
        ASSERT_THAT(Run<DenseMhaPrefill>(a), IsOk());
        ExpectOutputs(OutputToHost(a.output), Reference(c), dtype);
      }
    }
  }
}

TEST_P(DenseMhaTest, MatchesReferenceAtTinyPresetDims) {
  struct Dims {
    int64_t nope, v;
  };
  // tiny-v3.2 (qk 64 + 32, v 64) and tiny-glm-5.x (qk 32 + 32, v 64).
  for (Dims dims : {Dims{64, 64}, Dims{32, 64}}) {
    for (const LatentCacheFormat& f : AllFormats(128, 32)) {
      SCOPED_TRACE(absl::StrCat("nope ", dims.nope, " ", FormatName(f)));
      DenseCase c = MakeCase(f, /*heads=*/4, dims.nope, dims.v,
                             {{0, 9}, {30, 5}, {2, 1}}, /*block_size=*/16);
      DenseMhaPrefill::Args a = ToArgs(c, DType::kFloat32);
      ASSERT_THAT(Run<DenseMhaPrefill>(a), IsOk());
      ExpectOutputs(OutputToHost(a.output), Reference(c), DType::kFloat32);
    }
  }
}

TEST_P(DenseMhaTest, RejectsBadArguments) {
  DenseCase c = MakeCase(AllFormats()[0], 2, 128, 128, {{4, 3}, {0, 2}}, 16);
  const DenseMhaPrefill::Args good = ToArgs(c, DType::kFloat32);
  ASSERT_THAT(Run<DenseMhaPrefill>(good), IsOk());
  DenseMhaPrefill::Args a = good;
  a.q = MakeTensorView(good.q.data, DType::kFloat32, {5, 2 * 192});
  EXPECT_THAT(Run<DenseMhaPrefill>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "dense_mha_prefill: q has 2 dims, expected 3: "
                       "[tokens, heads, qk_nope_head_dim + rope_dim]"));
  a = good;
  a.query_start_loc =
      MakeTensorView(good.query_start_loc.data, DType::kInt32, {2});
  EXPECT_THAT(Run<DenseMhaPrefill>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("query_start_loc dim 0")));
  a = good;
  a.kv_b_proj =
      MakeTensorView(good.kv_b_proj.data, DType::kFloat32, {2 * 256, 256});
  EXPECT_THAT(Run<DenseMhaPrefill>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("kv_b_proj dim 1 (kv_lora_rank) is 256")));
  a = good;
  a.cache_format.rope_dim = 32;
  EXPECT_THAT(Run<DenseMhaPrefill>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("kv_cache dim 2 (entry width) is 576, "
                                 "expected 544")));

  auto expect_out_of_range = [&](DenseMhaPrefill::Args bad,
                                 const std::string& msg) {
    bad.output = PoisonedOutput(5, 2, 128, DType::kFloat32);
    EXPECT_THAT(Run<DenseMhaPrefill>(bad),
                StatusIs(absl::StatusCode::kOutOfRange, HasSubstr(msg)));
    for (float v : ToHost<float>(bad.output)) ASSERT_TRUE(std::isnan(v));
  };
  a = good;
  a.query_start_loc =
      ToDevice(std::vector<int32_t>{0, 3, 4}, DType::kInt32, {3});
  expect_out_of_range(a, "query_start_loc runs from 0 to 4, expected 0 to 5");
  a.query_start_loc =
      ToDevice(std::vector<int32_t>{0, 8, 5}, DType::kInt32, {3});
  expect_out_of_range(a, "request 0 has 8 query tokens");
  a = good;
  a.seq_lens = ToDevice(std::vector<int32_t>{7, 1}, DType::kInt32, {2});
  expect_out_of_range(a,
                      "request 1 has 2 query tokens (query_start_loc), "
                      "expected 0 to its seq_len 1");
}

// The optional host copies of the lengths: the same output to the bit (on a
// GPU the launch is then planned from them, without reading the device's
// back), and both or neither.
TEST_P(DenseMhaTest, HostCopiesOfTheLengthsGiveTheSameOutput) {
  DenseCase c = MakeCase(AllFormats()[0], /*heads=*/3, 128, 128,
                         {{0, 5}, {20, 7}, {3, 1}, {0, 1}, {40, 0}, {13, 19}},
                         /*block_size=*/16);
  const DenseMhaPrefill::Args without = ToArgs(c, DType::kBFloat16);
  ASSERT_THAT(Run<DenseMhaPrefill>(without), IsOk());
  const int64_t requests = static_cast<int64_t>(c.layout.seq_lens.size());
  DenseMhaPrefill::Args with = without;
  with.output = PoisonedOutput(c.tokens(), c.heads, c.v, DType::kBFloat16);
  with.seq_lens_host =
      MakeTensorView(c.layout.seq_lens.data(), DType::kInt32, {requests});
  with.query_start_loc_host =
      MakeTensorView(c.query_start_loc.data(), DType::kInt32, {requests + 1});
  ASSERT_THAT(Run<DenseMhaPrefill>(with), IsOk());
  EXPECT_EQ(ToHost<uint16_t>(with.output), ToHost<uint16_t>(without.output));

  DenseMhaPrefill::Args bad = with;
  bad.query_start_loc_host = TensorView();
  EXPECT_THAT(Run<DenseMhaPrefill>(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "dense_mha_prefill: seq_lens_host is given without "
                       "query_start_loc_host; pass both host copies or "
                       "neither"));
  bad = with;
  bad.seq_lens_host = TensorView();
  EXPECT_THAT(Run<DenseMhaPrefill>(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("query_start_loc_host is given without "
                                 "seq_lens_host")));
  bad = with;
  bad.seq_lens_host =
      MakeTensorView(c.layout.seq_lens.data(), DType::kInt32, {requests - 1});
  EXPECT_THAT(Run<DenseMhaPrefill>(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("seq_lens_host dim 0")));
  bad = with;
  bad.query_start_loc_host =
      MakeTensorView(c.query_start_loc.data(), DType::kInt64, {requests + 1});
  EXPECT_THAT(Run<DenseMhaPrefill>(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("query_start_loc_host")));
}

// reserve_only: the call checks its arguments and computes nothing (the
// poisoned output stays as it was), on every platform; the same call after
// it computes the output as before. It needs the host copies of the
// lengths, and 0 or 1; a bad argument is the same error as without it.
TEST_P(DenseMhaTest, AReservationWritesNothingAndChecksItsArguments) {
  DenseCase c = MakeCase(AllFormats()[0], /*heads=*/3, 128, 128,
                         {{0, 5}, {20, 7}, {3, 1}, {13, 19}},
                         /*block_size=*/16);
  const int64_t requests = static_cast<int64_t>(c.layout.seq_lens.size());
  DenseMhaPrefill::Args computed = ToArgs(c, DType::kBFloat16);
  computed.seq_lens_host =
      MakeTensorView(c.layout.seq_lens.data(), DType::kInt32, {requests});
  computed.query_start_loc_host =
      MakeTensorView(c.query_start_loc.data(), DType::kInt32, {requests + 1});
  ASSERT_THAT(Run<DenseMhaPrefill>(computed), IsOk());

  DenseMhaPrefill::Args reserve = computed;
  reserve.output = PoisonedOutput(c.tokens(), c.heads, c.v, DType::kBFloat16);
  reserve.reserve_only = 1;
  const std::vector<uint16_t> poison = ToHost<uint16_t>(reserve.output);
  ASSERT_THAT(Run<DenseMhaPrefill>(reserve), IsOk());
  EXPECT_EQ(ToHost<uint16_t>(reserve.output), poison);
  DenseMhaPrefill::Args after = reserve;
  after.reserve_only = 0;
  ASSERT_THAT(Run<DenseMhaPrefill>(after), IsOk());
  EXPECT_EQ(ToHost<uint16_t>(after.output), ToHost<uint16_t>(computed.output));

  DenseMhaPrefill::Args bad = reserve;
  bad.reserve_only = 2;
  EXPECT_THAT(Run<DenseMhaPrefill>(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "dense_mha_prefill: reserve_only is 2, expected 0 or "
                       "1"));
  bad = reserve;
  bad.seq_lens_host = TensorView();
  bad.query_start_loc_host = TensorView();
  EXPECT_THAT(Run<DenseMhaPrefill>(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("reserve_only needs seq_lens_host")));
  bad = reserve;
  bad.softmax_scale = 0.0f;
  EXPECT_THAT(
      Run<DenseMhaPrefill>(bad),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("softmax_scale")));
}

// W_UK and W_UV split out of kv_b_proj once by the caller: the same output
// to the bit. In bf16 kv_b_proj is then all NaN, so an output equal to the
// split-free call's shows the kernel read the split copies only (a GPU
// splits a float32 kv_b_proj per call as before, so there it stays real).
// Both or neither, shaped and typed as kv_b_proj's blocks.
TEST_P(DenseMhaTest, SplitWeightsGiveTheSameOutput) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
    SCOPED_TRACE(DTypeName(dtype));
    const int64_t heads = 3, nope = 192, v = 256;
    DenseCase c = MakeCase(AllFormats()[0], heads, nope, v,
                           {{0, 5}, {20, 7}, {3, 1}, {40, 0}, {13, 19}},
                           /*block_size=*/16);
    const int64_t lora = c.lora();
    const DenseMhaPrefill::Args without = ToArgs(c, dtype);
    ASSERT_THAT(Run<DenseMhaPrefill>(without), IsOk());
    // c.kv_b_proj holds the values the kernel read (ToArgs rounded them).
    std::vector<float> w_uk, w_uv;
    for (int64_t h = 0; h < heads; ++h) {
      const auto head = c.kv_b_proj.begin() + h * (nope + v) * lora;
      w_uk.insert(w_uk.end(), head, head + nope * lora);
      w_uv.insert(w_uv.end(), head + nope * lora, head + (nope + v) * lora);
    }
    DenseMhaPrefill::Args with = without;
    with.output = PoisonedOutput(c.tokens(), heads, v, dtype);
    with.w_uk = FloatsToDevice(w_uk, dtype, {heads, nope, lora});
    with.w_uv = FloatsToDevice(w_uv, dtype, {heads, v, lora});
    if (dtype == DType::kBFloat16) {
      std::vector<float> nan(c.kv_b_proj.size(),
                             std::numeric_limits<float>::quiet_NaN());
      with.kv_b_proj = FloatsToDevice(nan, dtype, {heads * (nope + v), lora});
    }
    ASSERT_THAT(Run<DenseMhaPrefill>(with), IsOk());
    if (dtype == DType::kBFloat16) {
      EXPECT_EQ(ToHost<uint16_t>(with.output),
                ToHost<uint16_t>(without.output));
    } else {
      EXPECT_EQ(ToHost<uint32_t>(with.output),
                ToHost<uint32_t>(without.output));
    }

    DenseMhaPrefill::Args bad = with;
    bad.w_uv = TensorView();
    EXPECT_THAT(Run<DenseMhaPrefill>(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "dense_mha_prefill: w_uk is given without w_uv; "
                         "pass both split weights or neither"));
    bad = with;
    bad.w_uk = TensorView();
    EXPECT_THAT(Run<DenseMhaPrefill>(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("w_uv is given without w_uk")));
    bad = with;
    bad.w_uk = MakeTensorView(with.w_uk.data, dtype, {heads, v, lora});
    EXPECT_THAT(
        Run<DenseMhaPrefill>(bad),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 HasSubstr("w_uk dim 1 (qk_nope) is 256, expected 192")));
    bad = with;
    bad.w_uv = MakeTensorView(with.w_uv.data, dtype, {heads - 1, v, lora});
    EXPECT_THAT(Run<DenseMhaPrefill>(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("w_uv dim 0 (heads) is 2, expected 3")));
    bad = with;
    bad.w_uv = MakeTensorView(
        with.w_uv.data,
        dtype == DType::kFloat32 ? DType::kBFloat16 : DType::kFloat32,
        {heads, v, lora});
    EXPECT_THAT(Run<DenseMhaPrefill>(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("w_uv has dtype")));
  }
}

// ---------------------------------------------------------------------------
// Dense MHA prefill == sparse MQA with full top-k, for every length up to
// index_topk. This is what makes skipping the indexer's scoring safe: when
// every causal key is selected, the two paths compute the same attention.
// Both read the same latent cache (bf16 or fp8, so the same dequantised
// keys) and both accumulate in float32; they differ only in evaluation
// order (W_UK c then q . k, versus (W_UK^T q) . c), which moves outputs by
// ~1e-6 of their scale. The tolerance is kAttentionRelTol (2e-5) of each
// (token, head) vector's largest element.
class DenseEqualsSparseTest : public DenseMhaTest {
 protected:
  std::vector<std::string> RequiredOps() const override {
    return {DenseMhaPrefill::kName, IndexerTopK::kName, SparseMla::kName};
  }

  void Check(const LatentCacheFormat& f, int64_t topk,
             const std::vector<std::pair<int32_t, int32_t>>& requests,
             int64_t heads, int64_t nope, int64_t v, int64_t block_size) {
    const int64_t kLora = f.kv_lora_rank, kRope = f.rope_dim;
    const int64_t kDim = kLora + kRope;
    DenseCase d = MakeCase(f, heads, nope, v, requests, block_size);
    DenseMhaPrefill::Args dense = ToArgs(d, DType::kFloat32);
    ASSERT_THAT(Run<DenseMhaPrefill>(dense), IsOk());
    const std::vector<float> dense_out = ToHost<float>(dense.output);

    // The sparse path's inputs: absorbed queries, and top-k indices from
    // the top-k op over each query's causal window [0, position + 1).
    const int64_t tokens = d.tokens();
    std::vector<float> q_abs(tokens * heads * kDim);
    std::vector<int32_t> token_request, ks, ke;
    for (size_t r = 0; r + 1 < d.query_start_loc.size(); ++r) {
      const int64_t n = d.query_start_loc[r + 1] - d.query_start_loc[r];
      for (int64_t i = 0; i < n; ++i) {
        token_request.push_back(static_cast<int32_t>(r));
        ks.push_back(0);
        ke.push_back(static_cast<int32_t>(d.layout.seq_lens[r] - n + i + 1));
      }
    }
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const float* qn = d.q.data() + (t * heads + h) * d.qk();
        float* out = q_abs.data() + (t * heads + h) * kDim;
        const int64_t row0 = h * (nope + v);
        for (int64_t c = 0; c < kLora; ++c) {
          double acc = 0;
          for (int64_t o = 0; o < nope; ++o) {
            acc += double{d.kv_b_proj[(row0 + o) * kLora + c]} * qn[o];
          }
          out[c] = static_cast<float>(acc);
        }
        std::copy(qn + nope, qn + nope + kRope, out + kLora);
      }
    }
    const int64_t width = *std::max_element(ke.begin(), ke.end());
    IndexerTopK::Args tk;
    tk.logits = ToDevice(RandomFloats(tokens * width), DType::kFloat32,
                         {tokens, width});
    tk.row_key_start = ToDevice(ks, DType::kInt32, {tokens});
    tk.row_key_end = ToDevice(ke, DType::kInt32, {tokens});
    tk.topk_indices = ToDevice(std::vector<int32_t>(tokens * topk, 0x7eadbeef),
                               DType::kInt32, {tokens, topk});
    ASSERT_THAT(Run<IndexerTopK>(tk), IsOk());
    // With at most topk causal keys, top-k must have selected all of them.
    const std::vector<int32_t> indices = ToHost<int32_t>(tk.topk_indices);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t j = 0; j < topk; ++j) {
        ASSERT_EQ(indices[t * topk + j], j < ke[t] ? j : -1);
      }
    }

    SparseMla::Args sparse;
    sparse.q = ToDevice(q_abs, DType::kFloat32, {tokens, heads, kDim});
    sparse.kv_cache = dense.kv_cache;
    sparse.cache_format = f;
    sparse.block_table = dense.block_table;
    sparse.seq_lens = dense.seq_lens;
    sparse.token_request = ToDevice(token_request, DType::kInt32, {tokens});
    sparse.topk_indices = tk.topk_indices;
    sparse.kv_b_proj = dense.kv_b_proj;
    sparse.qk_nope_head_dim = static_cast<int32_t>(nope);
    sparse.softmax_scale = dense.softmax_scale;
    sparse.output = PoisonedOutput(tokens, heads, v, DType::kFloat32);
    ASSERT_THAT(Run<SparseMla>(sparse), IsOk());
    const std::vector<float> sparse_out = ToHost<float>(sparse.output);

    std::vector<std::vector<double>> expected(tokens * heads);
    for (int64_t th = 0; th < tokens * heads; ++th) {
      expected[th].assign(dense_out.begin() + th * v,
                          dense_out.begin() + (th + 1) * v);
    }
    ExpectOutputs(sparse_out, expected, DType::kFloat32);
  }
};

TEST_P(DenseEqualsSparseTest, EveryLengthUpToSmallTopK) {
  // topk 64: one request of each total length 1..64, about a third of it
  // context already in the cache and the rest new tokens.
  std::vector<std::pair<int32_t, int32_t>> requests;
  for (int32_t len = 1; len <= 64; ++len)
    requests.push_back({len / 3, len - len / 3});
  for (const LatentCacheFormat& f : AllFormats()) {
    SCOPED_TRACE(FormatName(f));
    Check(f, /*topk=*/64, requests, /*heads=*/2, 128, 128, /*block_size=*/16);
  }
}

TEST_P(DenseEqualsSparseTest, EveryLengthUpToTopKAtTinyPresetDims) {
  // tiny-v3.2: topk 64, 4 heads, kv_lora 128, qk 64 + 32, v 64.
  std::vector<std::pair<int32_t, int32_t>> requests;
  for (int32_t len = 1; len <= 64; ++len)
    requests.push_back({len / 2, len - len / 2});
  for (const LatentCacheFormat& f : AllFormats(128, 32)) {
    SCOPED_TRACE(FormatName(f));
    Check(f, /*topk=*/64, requests, /*heads=*/4, 64, 64, /*block_size=*/16);
  }
}

TEST_P(DenseEqualsSparseTest, LengthsAtRealTopK) {
  // index_topk 2048: sequences of 2047 and 2048 tokens (long context, a
  // few new tokens), GLM-5.x head dims.
  for (const LatentCacheFormat& f : AllFormats()) {
    SCOPED_TRACE(FormatName(f));
    Check(f, /*topk=*/2048, {{2044, 3}, {2044, 4}}, /*heads=*/1, 192, 256,
          /*block_size=*/64);
  }
}

INSTANTIATE_TEST_SUITE_P(Platforms, MlaCacheWriteTest,
                         ::testing::ValuesIn(testing::OpTestPlatforms()),
                         testing::PlatformName);
INSTANTIATE_TEST_SUITE_P(Platforms, SparseMlaTest,
                         ::testing::ValuesIn(testing::OpTestPlatforms()),
                         testing::PlatformName);
INSTANTIATE_TEST_SUITE_P(Platforms, DenseMhaTest,
                         ::testing::ValuesIn(testing::OpTestPlatforms()),
                         testing::PlatformName);
INSTANTIATE_TEST_SUITE_P(Platforms, DenseEqualsSparseTest,
                         ::testing::ValuesIn(testing::OpTestPlatforms()),
                         testing::PlatformName);

}  // namespace
}  // namespace dsa::attention
