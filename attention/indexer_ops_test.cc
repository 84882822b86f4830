// Conformance suite of the lightning-indexer ops (indexer K write, indexer
// Q, logits, top-k), run on every platform of OpTestPlatforms() against the
// float64 references, with fresh random inputs and poisoned outputs.
#include <algorithm>
#include <array>
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
#include "attention/dtypes/fp8.h"
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
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int32_t kIndexPoison = static_cast<int32_t>(0xAAAAAAAAu);
constexpr int64_t kHeadDim = 128;
constexpr int64_t kRopeDim = 64;
constexpr int64_t kMaxPosition = 4096;

// Quantisation tolerance, in units of the fp8 value (x = y / scale): the
// kernel's code must be a correct rounding of the exact value, i.e. within
// half an fp8 step, plus 1e-3 for the float32 arithmetic before rounding
// (LayerNorm and rope in float32 are off by ~1e-6 relative to amax, and x is
// at most fp8_max ~ 448 * that = ~5e-4). Any real error (wrong rope pair,
// wrong statistics, wrong scale) is off by whole fp8 steps.
constexpr double kQuantSlack = 1e-3;

// Logits tolerance relative to the magnitude of what was summed
// (sum_h |w_h| sum_d |q_hd k_d| k_scale): float32 accumulation of ~136
// terms is within 136 * 2^-24 = 8.1e-6 of that in the worst case.
constexpr double kLogitsRelTol = 1e-5;

std::string FormatName(DType fp8) { return DTypeName(fp8); }

// The indexer K cache as the interface documents it, read on the host
// independently of the kernels' own addressing.
struct HostIndexerCache {
  std::vector<uint8_t> bytes;
  int64_t num_blocks, block_size, head_dim;

  HostIndexerCache(int64_t blocks, int64_t bs, int64_t hd)
      : bytes(blocks * bs * (hd + 4)),
        num_blocks(blocks),
        block_size(bs),
        head_dim(hd) {}
  int64_t num_slots() const { return num_blocks * block_size; }
  // Const, returning mutable bytes: test code only, for brevity.
  uint8_t* values(int64_t slot) const {
    return const_cast<uint8_t*>(bytes.data()) +
           (slot / block_size) * block_size * (head_dim + 4) +
           (slot % block_size) * head_dim;
  }
  uint8_t* scale_bytes(int64_t slot) const {
    return const_cast<uint8_t*>(bytes.data()) +
           (slot / block_size) * block_size * (head_dim + 4) +
           block_size * head_dim + (slot % block_size) * 4;
  }
  float scale(int64_t slot) const {
    float s;
    std::memcpy(&s, scale_bytes(slot), 4);
    return s;
  }
  void set_scale(int64_t slot, float s) {
    std::memcpy(scale_bytes(slot), &s, 4);
  }
  // NaN everywhere: the format's NaN code for values, NaN bits for scales.
  void Poison(DType fp8) {
    const uint8_t nan_code = fp8 == DType::kFloat8E4m3fnuz ? 0x80 : 0x7f;
    for (int64_t s = 0; s < num_slots(); ++s) {
      std::fill(values(s), values(s) + head_dim, nan_code);
      std::fill(scale_bytes(s), scale_bytes(s) + 4, 0xff);
    }
  }
  TensorView View() const {
    return MakeTensorView(nullptr, DType::kUint8,
                          {num_blocks, block_size, head_dim + 4});
  }
};

bool IsPowerOfTwo(double x) {
  return x > 0 && std::isfinite(x) && std::exp2(std::round(std::log2(x))) == x;
}

// The power-of-two scale a quantiser may legitimately pick: the reference's,
// or (only when amax / fp8_max is within float32 rounding of a power of
// two) the one next to it.
void ExpectScale(double scale, double amax, reference::Fp8Kind kind,
                 const std::string& where) {
  EXPECT_TRUE(IsPowerOfTwo(scale)) << where << ": scale " << scale;
  const double expected = reference::Ue8m0Scale(amax, kind);
  if (scale == expected) return;
  const double ratio = std::max(amax, 1e-4) / reference::Fp8MaxValue(kind);
  const double log2_ratio = std::log2(ratio);
  EXPECT_LT(std::fabs(log2_ratio - std::round(log2_ratio)), 1e-5)
      << where << ": scale " << scale << ", expected " << expected
      << " for amax " << amax;
}

// Checks codes[0:n] against exact values y (before scaling) and `scale`.
void ExpectQuantized(const uint8_t* codes, const std::vector<double>& y,
                     double scale, reference::Fp8Kind kind,
                     const std::string& where) {
  for (size_t d = 0; d < y.size(); ++d) {
    const double x = y[d] / scale;
    const double got = reference::Fp8Value(codes[d], kind);
    ASSERT_LE(std::fabs(got - x),
              0.5 * reference::Fp8Ulp(x, kind) + kQuantSlack)
        << where << " dim " << d << ": code " << int{codes[d]} << " = " << got
        << ", exact " << x;
  }
}

// Fresh random fp8 codes of N(0, spread) values, never NaN.
std::vector<uint8_t> RandomCodes(std::mt19937_64& rng, int64_t n, DType fp8,
                                 double spread) {
  std::normal_distribution<double> normal(0.0, spread);
  std::vector<uint8_t> codes(n);
  for (uint8_t& c : codes) c = reference::Fp8Nearest(normal(rng), KindOf(fp8));
  return codes;
}

class IndexerOpsTest : public testing::OpTest {
 protected:
  // K write and Q; the pipeline test also scores (LogitsTest and TopKTest
  // narrow this to their op).
  std::vector<std::string> RequiredOps() const override {
    return {IndexerKWrite::kName, IndexerQ::kName, IndexerLogits::kName,
            IndexerTopK::kName};
  }

  // Inputs of one indexer K write, kept on the host for the reference.
  struct KWrite {
    DType fp8;
    RopeStyle style;
    int64_t tokens;
    int64_t head_dim = kHeadDim, rope_dim = kRopeDim;
    std::vector<float> k, ln_weight, ln_bias, cos_sin;
    std::vector<int64_t> positions, slots;
    HostIndexerCache cache{1, 1, kHeadDim};
    IndexerKWrite::Args args;
  };

  // Builds valid arguments for `tokens` tokens into a cache of `num_blocks`
  // blocks; about a fifth of the tokens are padding (slot -1).
  KWrite MakeKWrite(DType fp8, RopeStyle style, DType k_dtype, int64_t tokens,
                    int64_t num_blocks, int64_t block_size, bool strided_k,
                    int64_t head_dim = kHeadDim, int64_t rope_dim = kRopeDim) {
    KWrite w;
    w.fp8 = fp8;
    w.style = style;
    w.tokens = tokens;
    w.head_dim = head_dim;
    w.rope_dim = rope_dim;
    w.cache = HostIndexerCache(num_blocks, block_size, head_dim);
    // wk(x) rows with an offset, so the LayerNorm mean matters.
    w.k = RandomFloats(tokens * head_dim, 2.0);
    for (float& v : w.k) v += 0.75f;
    w.ln_weight = RandomFloats(head_dim, 0.5);
    for (float& v : w.ln_weight) v += 1.0f;
    w.ln_bias = RandomFloats(head_dim, 0.2);
    w.cos_sin = testing::RopeCosSinCache(kMaxPosition, rope_dim);
    std::vector<int64_t> free_slots(w.cache.num_slots());
    std::iota(free_slots.begin(), free_slots.end(), 0);
    std::shuffle(free_slots.begin(), free_slots.end(), rng());
    for (int64_t t = 0; t < tokens; ++t) {
      w.positions.push_back(RandomInt(0, kMaxPosition - 1));
      w.slots.push_back(RandomInt(0, 4) == 0 ? -1 : free_slots[t]);
    }
    w.cache.Poison(fp8);

    IndexerKWrite::Args& a = w.args;
    if (strided_k) {
      // k as the second half of a fused [tokens, 2 * head_dim] projection.
      std::vector<float> fused = RandomFloats(tokens * 2 * head_dim);
      if (k_dtype == DType::kBFloat16) {
        for (float& v : w.k) {
          v = static_cast<float>(
              reference::Bf16Value(reference::Bf16Nearest(v)));
        }
      }
      for (int64_t t = 0; t < tokens; ++t) {
        std::copy(w.k.begin() + t * head_dim, w.k.begin() + (t + 1) * head_dim,
                  fused.begin() + t * 2 * head_dim + head_dim);
      }
      TensorView view = MakeTensorView(nullptr, k_dtype, {tokens, head_dim});
      view.strides[0] = 2 * head_dim;
      if (k_dtype == DType::kBFloat16) {
        std::vector<uint16_t> bits(fused.size());
        for (size_t i = 0; i < fused.size(); ++i) {
          bits[i] = reference::Bf16Nearest(fused[i]);
        }
        a.k = ToDeviceStrided(bits, view, head_dim);
      } else {
        a.k = ToDeviceStrided(fused, view, head_dim);
      }
    } else {
      a.k = FloatsToDevice(w.k, k_dtype, {tokens, head_dim});
    }
    a.ln_weight = FloatsToDevice(w.ln_weight, k_dtype, {head_dim});
    a.ln_bias = FloatsToDevice(w.ln_bias, k_dtype, {head_dim});
    a.ln_eps = 1e-6f;
    a.positions = ToDevice(w.positions, DType::kInt64, {tokens});
    a.cos_sin_cache =
        ToDevice(w.cos_sin, DType::kFloat32, {kMaxPosition, rope_dim});
    a.rope_style = style;
    a.slot_mapping = ToDevice(w.slots, DType::kInt64, {tokens});
    a.k_cache = w.cache.View();
    a.k_cache = ToDevice(w.cache.bytes, DType::kUint8,
                         {num_blocks, block_size, head_dim + 4});
    a.cache_dtype = fp8;
    a.topk_indices = ToDevice(std::vector<int32_t>(tokens * 64, kIndexPoison),
                              DType::kInt32, {tokens, 64});
    return w;
  }

  // The exact (float64) normalised and roped key of token t.
  std::vector<double> ExactKey(const KWrite& w, int64_t t) {
    std::vector<double> x(w.k.begin() + t * w.head_dim,
                          w.k.begin() + (t + 1) * w.head_dim);
    std::vector<double> y = reference::LayerNorm(
        x, std::vector<double>(w.ln_weight.begin(), w.ln_weight.end()),
        std::vector<double>(w.ln_bias.begin(), w.ln_bias.end()), 1e-6);
    const int64_t pos = w.positions[t];
    reference::Rope(
        y,
        std::vector<double>(w.cos_sin.begin() + pos * w.rope_dim,
                            w.cos_sin.begin() + (pos + 1) * w.rope_dim),
        w.style == RopeStyle::kNeox);
    return y;
  }

  // Checks the cache after a successful write: written slots hold the
  // quantised keys, every other slot still holds the poison, and every
  // top-k row is -1.
  void ExpectKWritten(KWrite& w) {
    HostIndexerCache got = w.cache;
    got.bytes = ToHost<uint8_t>(w.args.k_cache);
    std::vector<int64_t> token_of(got.num_slots(), -1);
    for (int64_t t = 0; t < w.tokens; ++t) {
      if (w.slots[t] >= 0) token_of[w.slots[t]] = t;
    }
    const reference::Fp8Kind kind = KindOf(w.fp8);
    for (int64_t slot = 0; slot < got.num_slots(); ++slot) {
      const int64_t t = token_of[slot];
      if (t < 0) {
        ASSERT_TRUE(std::equal(got.values(slot), got.values(slot) + w.head_dim,
                               w.cache.values(slot)) &&
                    std::equal(got.scale_bytes(slot), got.scale_bytes(slot) + 4,
                               w.cache.scale_bytes(slot)))
            << "slot " << slot << " is not in slot_mapping but was written";
        continue;
      }
      const std::vector<double> y = ExactKey(w, t);
      double amax = 0;
      for (double v : y) amax = std::max(amax, std::fabs(v));
      const std::string where = absl::StrCat("token ", t, " slot ", slot);
      ExpectScale(got.scale(slot), amax, kind, where);
      ExpectQuantized(got.values(slot), y, got.scale(slot), kind, where);
    }
    for (int32_t v : ToHost<int32_t>(w.args.topk_indices)) {
      ASSERT_EQ(v, -1) << "top-k buffer not cleared";
    }
  }
};

TEST_P(IndexerOpsTest, KWriteMatchesReference) {
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
      for (DType k_dtype : {DType::kFloat32, DType::kBFloat16}) {
        SCOPED_TRACE(absl::StrCat(FormatName(fp8), " rope ",
                                  static_cast<int>(style), " k ",
                                  DTypeName(k_dtype)));
        KWrite w = MakeKWrite(fp8, style, k_dtype, /*tokens=*/45,
                              /*num_blocks=*/5, /*block_size=*/16,
                              /*strided_k=*/false);
        ASSERT_THAT(Run<IndexerKWrite>(w.args), IsOk());
        ExpectKWritten(w);
      }
    }
  }
}

// The tiny presets' indexer: head_dim 64, rope 32 (tiny-v3.2 NeoX,
// tiny-glm-5.x interleaved).
TEST_P(IndexerOpsTest, KWriteAtTinyPresetDims) {
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
      SCOPED_TRACE(
          absl::StrCat(FormatName(fp8), " rope ", static_cast<int>(style)));
      KWrite w = MakeKWrite(fp8, style, DType::kBFloat16, 40, 3, 16,
                            /*strided_k=*/false, /*head_dim=*/64,
                            /*rope_dim=*/32);
      ASSERT_THAT(Run<IndexerKWrite>(w.args), IsOk());
      ExpectKWritten(w);
    }
  }
}

TEST_P(IndexerOpsTest, KWriteReadsStridedRows) {
  for (DType k_dtype : {DType::kFloat32, DType::kBFloat16}) {
    KWrite w = MakeKWrite(DType::kFloat8E4m3fn, RopeStyle::kNeox, k_dtype, 30,
                          4, 64, /*strided_k=*/true);
    ASSERT_THAT(Run<IndexerKWrite>(w.args), IsOk());
    ExpectKWritten(w);
  }
}

// The engines' numerics of the indexer (appended arguments): bf16 roundings
// after the LayerNorm, after rope and after the Hadamard rotation, vLLM's
// divisor 224 on e4m3fnuz, DeepSeek's Hadamard rotation. The reference
// applies each step in float64 and rounds where the kernel must; the
// kernel's codes must each be within half an fp8 step of a value within two
// bf16 steps (relative to amax) of the reference's, and equal the
// reference's rounding for nearly all elements (a missing rounding flips
// about 3% of them, a missing rotation nearly all).
struct EngineNumerics {
  DType intermediate;
  bool hadamard;
};
const EngineNumerics kEngineNumerics[] = {
    {DType::kBFloat16, false},  // vLLM
    {DType::kBFloat16, true},   // DeepSeek's reference, SGLang
    {DType::kFloat32, true},
};

// y rounded to the intermediate type.
std::vector<double> Rounded(std::vector<double> y, const EngineNumerics& n) {
  if (n.intermediate == DType::kBFloat16) {
    for (double& x : y) x = reference::RoundBf16(x);
  }
  return y;
}

struct NumericsCheck {
  int64_t elements = 0;
  int64_t exact = 0;
};

// One vector's codes against the reference vector y (after every rounding)
// and the divisor.
void ExpectEngineQuantized(const uint8_t* codes, double scale,
                           const std::vector<double>& y, double divisor,
                           const EngineNumerics& n, reference::Fp8Kind kind,
                           const std::string& where, NumericsCheck* check) {
  double amax = 0;
  for (double v : y) amax = std::max(amax, std::fabs(v));
  EXPECT_TRUE(IsPowerOfTwo(scale)) << where << ": scale " << scale;
  const double expected = reference::Ue8m0ScaleWithDivisor(amax, divisor);
  if (scale != expected) {
    const double log2_ratio = std::log2(std::max(amax, 1e-4) / divisor);
    const double slack = n.intermediate == DType::kBFloat16 ? 1.2e-2 : 1e-5;
    EXPECT_LT(std::fabs(log2_ratio - std::round(log2_ratio)), slack)
        << where << ": scale " << scale << ", expected " << expected
        << " for amax " << amax << " and divisor " << divisor;
  }
  const double bf16_slack =
      n.intermediate == DType::kBFloat16 ? std::ldexp(amax / scale, -7) : 0.0;
  for (size_t d = 0; d < y.size(); ++d) {
    const double x = y[d] / scale;
    const double got = reference::Fp8Value(codes[d], kind);
    ASSERT_LE(std::fabs(got - x),
              0.5 * reference::Fp8Ulp(x, kind) + bf16_slack + kQuantSlack)
        << where << " dim " << d << ": code " << int{codes[d]} << " = " << got
        << ", reference " << x;
    ++check->elements;
    if (codes[d] == reference::Fp8Nearest(x, kind)) ++check->exact;
  }
}

TEST_P(IndexerOpsTest, KWriteWithEngineNumericsMatchesReference) {
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
      for (const EngineNumerics& n : kEngineNumerics) {
        SCOPED_TRACE(absl::StrCat(
            FormatName(fp8), " rope ", static_cast<int>(style), " round to ",
            DTypeName(n.intermediate), n.hadamard ? " hadamard" : ""));
        KWrite w = MakeKWrite(fp8, style, DType::kBFloat16, /*tokens=*/64,
                              /*num_blocks=*/6, /*block_size=*/16,
                              /*strided_k=*/false);
        const float divisor = VllmFp8ScaleDivisor(fp8);  // 448 or 224
        w.args.intermediate_dtype = n.intermediate;
        w.args.fp8_scale_divisor = divisor;
        w.args.hadamard_rotation = n.hadamard ? 1 : 0;
        ASSERT_THAT(Run<IndexerKWrite>(w.args), IsOk());
        HostIndexerCache got = w.cache;
        got.bytes = ToHost<uint8_t>(w.args.k_cache);
        NumericsCheck check;
        for (int64_t t = 0; t < w.tokens; ++t) {
          const int64_t slot = w.slots[t];
          if (slot < 0) continue;
          std::vector<double> x(w.k.begin() + t * w.head_dim,
                                w.k.begin() + (t + 1) * w.head_dim);
          std::vector<double> y = Rounded(
              reference::LayerNorm(
                  x,
                  std::vector<double>(w.ln_weight.begin(), w.ln_weight.end()),
                  std::vector<double>(w.ln_bias.begin(), w.ln_bias.end()),
                  1e-6),
              n);
          const int64_t pos = w.positions[t];
          reference::Rope(
              y,
              std::vector<double>(w.cos_sin.begin() + pos * w.rope_dim,
                                  w.cos_sin.begin() + (pos + 1) * w.rope_dim),
              style == RopeStyle::kNeox);
          y = Rounded(y, n);
          if (n.hadamard) {
            y = Rounded(reference::HadamardRotate(y), n);
          }
          ExpectEngineQuantized(got.values(slot), got.scale(slot), y, divisor,
                                n, KindOf(fp8), absl::StrCat("token ", t),
                                &check);
        }
        EXPECT_GE(check.exact, check.elements * 995 / 1000)
            << check.exact << " of " << check.elements
            << " codes equal the reference's";
      }
    }
  }
}

TEST_P(IndexerOpsTest, QWithEngineNumericsMatchesReference) {
  constexpr int64_t kTokens = 19, kHeads = 4;
  const std::vector<float> cos_sin =
      testing::RopeCosSinCache(kMaxPosition, kRopeDim);
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
      for (const EngineNumerics& n : kEngineNumerics) {
        SCOPED_TRACE(absl::StrCat(
            FormatName(fp8), " rope ", static_cast<int>(style), " round to ",
            DTypeName(n.intermediate), n.hadamard ? " hadamard" : ""));
        std::vector<float> q = RandomFloats(kTokens * kHeads * kHeadDim);
        for (float& v : q) {  // bf16 inputs, as the projection gives them
          v = static_cast<float>(reference::RoundBf16(v));
        }
        std::vector<float> weights = RandomFloats(kTokens * kHeads);
        std::vector<int64_t> positions;
        for (int64_t t = 0; t < kTokens; ++t) {
          positions.push_back(RandomInt(0, kMaxPosition - 1));
        }
        const float divisor = VllmFp8ScaleDivisor(fp8);
        IndexerQ::Args a;
        a.q = FloatsToDevice(q, DType::kBFloat16, {kTokens, kHeads, kHeadDim});
        a.weights = FloatsToDevice(weights, DType::kFloat32, {kTokens, kHeads});
        a.positions = ToDevice(positions, DType::kInt64, {kTokens});
        a.cos_sin_cache =
            ToDevice(cos_sin, DType::kFloat32, {kMaxPosition, kRopeDim});
        a.rope_style = style;
        a.q_fp8 = ToDevice(
            std::vector<uint8_t>(kTokens * kHeads * kHeadDim,
                                 fp8 == DType::kFloat8E4m3fnuz ? 0x80 : 0x7f),
            fp8, {kTokens, kHeads, kHeadDim});
        a.head_weights = ToDevice(std::vector<float>(kTokens * kHeads, kNaN),
                                  DType::kFloat32, {kTokens, kHeads});
        a.intermediate_dtype = n.intermediate;
        a.fp8_scale_divisor = divisor;
        a.hadamard_rotation = n.hadamard ? 1 : 0;
        ASSERT_THAT(Run<IndexerQ>(a), IsOk());
        const std::vector<uint8_t> codes = ToHost<uint8_t>(a.q_fp8);
        const std::vector<float> head_weights = ToHost<float>(a.head_weights);
        const double c =
            1.0 / std::sqrt(static_cast<double>(kHeadDim * kHeads));
        NumericsCheck check;
        for (int64_t t = 0; t < kTokens; ++t) {
          for (int64_t h = 0; h < kHeads; ++h) {
            std::vector<double> y(q.begin() + (t * kHeads + h) * kHeadDim,
                                  q.begin() + (t * kHeads + h + 1) * kHeadDim);
            reference::Rope(
                y,
                std::vector<double>(
                    cos_sin.begin() + positions[t] * kRopeDim,
                    cos_sin.begin() + (positions[t] + 1) * kRopeDim),
                style == RopeStyle::kNeox);
            y = Rounded(y, n);
            if (n.hadamard) {
              y = Rounded(reference::HadamardRotate(y), n);
            }
            const double w = weights[t * kHeads + h];
            const double scale = std::exp2(
                std::round(std::log2(head_weights[t * kHeads + h] / (w * c))));
            ExpectEngineQuantized(
                codes.data() + (t * kHeads + h) * kHeadDim, scale, y, divisor,
                n, KindOf(fp8), absl::StrCat("token ", t, " head ", h), &check);
          }
        }
        EXPECT_GE(check.exact, check.elements * 995 / 1000)
            << check.exact << " of " << check.elements
            << " codes equal the reference's";
      }
    }
  }
}

// The appended numerics are checked like every other argument.
TEST_P(IndexerOpsTest, EngineNumericsArgumentsAreChecked) {
  KWrite w = MakeKWrite(DType::kFloat8E4m3fnuz, RopeStyle::kNeox,
                        DType::kFloat32, 4, 1, 16, false);
  IndexerKWrite::Args a = w.args;
  a.intermediate_dtype = DType::kFloat8E4m3fn;
  EXPECT_THAT(Run<IndexerKWrite>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("intermediate_dtype is float8_e4m3fn")));
  a = w.args;
  a.fp8_scale_divisor = 448;  // above e4m3fnuz's 240: codes would saturate
  EXPECT_THAT(Run<IndexerKWrite>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_scale_divisor is 448, expected 0")));
  a = w.args;
  a.fp8_scale_divisor = -1;
  EXPECT_THAT(Run<IndexerKWrite>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fp8_scale_divisor is -1")));
  a = w.args;
  a.hadamard_rotation = 2;
  EXPECT_THAT(Run<IndexerKWrite>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("hadamard_rotation is 2")));
  KWrite odd = MakeKWrite(DType::kFloat8E4m3fn, RopeStyle::kNeox,
                          DType::kFloat32, 4, 1, 16, false, /*head_dim=*/96,
                          /*rope_dim=*/32);
  odd.args.hadamard_rotation = 1;
  EXPECT_THAT(Run<IndexerKWrite>(odd.args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("hadamard_rotation needs head_dim a power of "
                                 "two, got 96")));
}

TEST_P(IndexerOpsTest, KWriteRejectsBadArguments) {
  auto fresh = [&] {
    return MakeKWrite(DType::kFloat8E4m3fn, RopeStyle::kNeox, DType::kFloat32,
                      12, 2, 16, false);
  };
  {
    KWrite w = fresh();
    IndexerKWrite::Args a = w.args;
    a.k = MakeTensorView(a.k.data, DType::kFloat32, {12, 1, kHeadDim});
    EXPECT_THAT(Run<IndexerKWrite>(a),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "indexer_k_write: k has 3 dims, expected 2: "
                         "[tokens, head_dim]"));
    a = w.args;
    a.cache_dtype = DType::kBFloat16;
    EXPECT_THAT(Run<IndexerKWrite>(a),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "indexer_k_write: cache_dtype is bfloat16, expected "
                         "float8_e4m3fn or float8_e4m3fnuz"));
    a = w.args;
    a.k_cache =
        MakeTensorView(a.k_cache.data, DType::kUint8, {2, 16, kHeadDim});
    EXPECT_THAT(Run<IndexerKWrite>(a),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("k_cache dim 2 (head_dim + 4) is 128, "
                                   "expected 132")));
    a = w.args;
    a.ln_weight = MakeTensorView(a.ln_weight.data, DType::kFloat32, {64});
    EXPECT_THAT(Run<IndexerKWrite>(a),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("ln_weight dim 0 (head_dim) is 64")));
    a = w.args;
    a.topk_indices.dtype = DType::kInt64;
    EXPECT_THAT(Run<IndexerKWrite>(a),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("topk_indices has dtype int64")));
    a = w.args;
    a.slot_mapping.dtype = DType::kInt32;
    EXPECT_THAT(Run<IndexerKWrite>(a),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("slot_mapping has dtype int32")));
    a = w.args;
    a.rope_style = static_cast<RopeStyle>(7);
    EXPECT_THAT(Run<IndexerKWrite>(a),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("rope_style 7")));
    a = w.args;
    a.ln_eps = 0;
    EXPECT_THAT(
        Run<IndexerKWrite>(a),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ln_eps is 0")));
  }
  if (!ChecksIndexValues()) {
    // GPU kernels do not read index values on the host: a token whose slot
    // or position is out of range is skipped (never written outside the
    // cache), and every top-k row is still cleared.
    KWrite w = fresh();
    w.slots[3] = 32;  // the cache has 2 * 16 slots
    w.slots[5] = -2;
    w.positions[4] = kMaxPosition;
    w.args.slot_mapping = ToDevice(w.slots, DType::kInt64, {12});
    w.args.positions = ToDevice(w.positions, DType::kInt64, {12});
    EXPECT_THAT(Run<IndexerKWrite>(w.args), IsOk());
    for (int32_t v : ToHost<int32_t>(w.args.topk_indices)) ASSERT_EQ(v, -1);
    return;
  }
  // Value errors are found before anything is written: the cache and the
  // top-k buffer keep their poison.
  auto expect_untouched = [&](KWrite& w) {
    EXPECT_EQ(ToHost<uint8_t>(w.args.k_cache), w.cache.bytes);
    for (int32_t v : ToHost<int32_t>(w.args.topk_indices)) {
      ASSERT_EQ(v, kIndexPoison);
    }
  };
  {
    KWrite w = fresh();
    w.slots[3] = 32;  // the cache has 2 * 16 slots
    w.args.slot_mapping = ToDevice(w.slots, DType::kInt64, {12});
    EXPECT_THAT(Run<IndexerKWrite>(w.args),
                StatusIs(absl::StatusCode::kOutOfRange,
                         "indexer_k_write: slot_mapping[3] is 32, outside the "
                         "cache's 32 slots (-1 marks padding)"));
    expect_untouched(w);
  }
  {
    KWrite w = fresh();
    w.slots[5] = -2;
    w.args.slot_mapping = ToDevice(w.slots, DType::kInt64, {12});
    EXPECT_THAT(Run<IndexerKWrite>(w.args),
                StatusIs(absl::StatusCode::kOutOfRange,
                         HasSubstr("slot_mapping[5] is -2")));
    expect_untouched(w);
  }
  {
    KWrite w = fresh();
    std::iota(w.slots.begin(), w.slots.end(), 0);
    w.slots[7] = 2;
    w.args.slot_mapping = ToDevice(w.slots, DType::kInt64, {12});
    EXPECT_THAT(
        Run<IndexerKWrite>(w.args),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 "indexer_k_write: slot_mapping[7] repeats slot 2 of token 2"));
    expect_untouched(w);
  }
  {
    KWrite w = fresh();
    std::iota(w.slots.begin(), w.slots.end(), 0);
    w.positions[4] = kMaxPosition;
    w.args.slot_mapping = ToDevice(w.slots, DType::kInt64, {12});
    w.args.positions = ToDevice(w.positions, DType::kInt64, {12});
    EXPECT_THAT(Run<IndexerKWrite>(w.args),
                StatusIs(absl::StatusCode::kOutOfRange,
                         HasSubstr("positions[4] is 4096")));
    expect_untouched(w);
  }
}

// ---------------------------------------------------------------------------
// Indexer Q.

TEST_P(IndexerOpsTest, QMatchesReference) {
  constexpr int64_t kTokens = 23, kHeads = 4;
  struct Dims {
    int64_t head_dim, rope_dim;
  };
  // DeepSeek-V3.2 / GLM-5.x indexer (128, rope 64) and the tiny presets'
  // (64, rope 32).
  for (const Dims dims : {Dims{kHeadDim, kRopeDim}, Dims{64, 32}}) {
    const int64_t head_dim = dims.head_dim, rope_dim = dims.rope_dim;
    for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
      for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
        for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
          for (bool strided : {false, true}) {
            SCOPED_TRACE(absl::StrCat(FormatName(fp8), " head_dim ", head_dim,
                                      " rope ", static_cast<int>(style), " ",
                                      DTypeName(dtype),
                                      strided ? " strided" : ""));
            const reference::Fp8Kind kind = KindOf(fp8);
            // Heads of different sizes, so their scales differ.
            std::vector<float> q = RandomFloats(kTokens * kHeads * head_dim);
            for (int64_t i = 0; i < static_cast<int64_t>(q.size()); ++i) {
              q[i] *= std::exp2(static_cast<int>((i / head_dim) % kHeads) - 2);
            }
            std::vector<float> weights = RandomFloats(kTokens * kHeads);
            std::vector<int64_t> positions;
            for (int64_t t = 0; t < kTokens; ++t) {
              positions.push_back(RandomInt(0, kMaxPosition - 1));
            }
            const std::vector<float> cos_sin =
                testing::RopeCosSinCache(kMaxPosition, rope_dim);
            IndexerQ::Args a;
            // Strided: per-head padding in q, weights every other column, and
            // head_weights rows with padding, as fused projections give them.
            constexpr int64_t kQPad = 16, kWPad = 3;
            if (strided) {
              std::vector<float> padded =
                  RandomFloats(kTokens * kHeads * (head_dim + kQPad));
              for (int64_t i = 0; i < kTokens * kHeads; ++i) {
                std::copy(q.begin() + i * head_dim,
                          q.begin() + (i + 1) * head_dim,
                          padded.begin() + i * (head_dim + kQPad));
              }
              TensorView qv =
                  MakeTensorView(nullptr, dtype, {kTokens, kHeads, head_dim});
              qv.strides[0] = kHeads * (head_dim + kQPad);
              qv.strides[1] = head_dim + kQPad;
              std::vector<float> wide = RandomFloats(kTokens * kHeads * 2);
              for (int64_t i = 0; i < kTokens * kHeads; ++i)
                wide[2 * i] = weights[i];
              TensorView wv = MakeTensorView(nullptr, dtype, {kTokens, kHeads});
              wv.strides[0] = 2 * kHeads;
              wv.strides[1] = 2;
              if (dtype == DType::kBFloat16) {
                std::vector<uint16_t> pb(padded.size()), wb(wide.size());
                for (size_t i = 0; i < padded.size(); ++i) {
                  pb[i] = reference::Bf16Nearest(padded[i]);
                }
                for (size_t i = 0; i < wide.size(); ++i) {
                  wb[i] = reference::Bf16Nearest(wide[i]);
                }
                for (float& v : q) {
                  v = static_cast<float>(
                      reference::Bf16Value(reference::Bf16Nearest(v)));
                }
                for (float& v : weights) {
                  v = static_cast<float>(
                      reference::Bf16Value(reference::Bf16Nearest(v)));
                }
                a.q = ToDeviceStrided(pb, qv);
                a.weights = ToDeviceStrided(wb, wv);
              } else {
                a.q = ToDeviceStrided(padded, qv);
                a.weights = ToDeviceStrided(wide, wv);
              }
            } else {
              a.q = FloatsToDevice(q, dtype, {kTokens, kHeads, head_dim});
              a.weights = FloatsToDevice(weights, dtype, {kTokens, kHeads});
            }
            a.positions = ToDevice(positions, DType::kInt64, {kTokens});
            a.cos_sin_cache =
                ToDevice(cos_sin, DType::kFloat32, {kMaxPosition, rope_dim});
            a.rope_style = style;
            const uint8_t nan_code =
                fp8 == DType::kFloat8E4m3fnuz ? 0x80 : 0x7f;
            a.q_fp8 = ToDevice(
                std::vector<uint8_t>(kTokens * kHeads * head_dim, nan_code),
                fp8, {kTokens, kHeads, head_dim});
            const int64_t hw_stride = strided ? kHeads + kWPad : kHeads;
            TensorView hw =
                MakeTensorView(nullptr, DType::kFloat32, {kTokens, kHeads});
            hw.strides[0] = hw_stride;
            a.head_weights = ToDeviceStrided(
                std::vector<float>(kTokens * hw_stride, kNaN), hw);
            ASSERT_THAT(Run<IndexerQ>(a), IsOk());

            const std::vector<uint8_t> codes = ToHost<uint8_t>(a.q_fp8);
            const std::vector<float> head_weights =
                ToHost<float>(a.head_weights, kTokens * hw_stride);
            const double c =
                1.0 / std::sqrt(static_cast<double>(head_dim * kHeads));
            for (int64_t t = 0; t < kTokens; ++t) {
              for (int64_t h = 0; h < kHeads; ++h) {
                const std::string where =
                    absl::StrCat("token ", t, " head ", h);
                std::vector<double> v(
                    q.begin() + (t * kHeads + h) * head_dim,
                    q.begin() + (t * kHeads + h + 1) * head_dim);
                reference::Rope(
                    v,
                    std::vector<double>(
                        cos_sin.begin() + positions[t] * rope_dim,
                        cos_sin.begin() + (positions[t] + 1) * rope_dim),
                    style == RopeStyle::kNeox);
                double amax = 0;
                for (double x : v) amax = std::max(amax, std::fabs(x));
                // The q scale is folded into head_weights; recover it.
                const double w = weights[t * kHeads + h];
                const double got_hw = head_weights[t * hw_stride + h];
                const double scale =
                    std::exp2(std::round(std::log2(got_hw / (w * c))));
                ExpectScale(scale, amax, kind, where);
                // Two float32 roundings of w * scale * c.
                EXPECT_NEAR(got_hw, w * scale * c,
                            1e-6 * std::fabs(w * scale * c))
                    << where;
                ExpectQuantized(codes.data() + (t * kHeads + h) * head_dim, v,
                                scale, kind, where);
              }
              for (int64_t h = kHeads; h < hw_stride; ++h) {
                ASSERT_TRUE(std::isnan(head_weights[t * hw_stride + h]))
                    << "head_weights padding written";
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(IndexerOpsTest, QRejectsBadArguments) {
  constexpr int64_t kTokens = 3, kHeads = 2;
  std::vector<float> q = RandomFloats(kTokens * kHeads * kHeadDim);
  std::vector<float> weights = RandomFloats(kTokens * kHeads);
  IndexerQ::Args a;
  a.q = FloatsToDevice(q, DType::kFloat32, {kTokens, kHeads, kHeadDim});
  a.weights = FloatsToDevice(weights, DType::kFloat32, {kTokens, kHeads});
  a.positions =
      ToDevice(std::vector<int64_t>{0, 1, 2}, DType::kInt64, {kTokens});
  a.cos_sin_cache = ToDevice(testing::RopeCosSinCache(8, kRopeDim),
                             DType::kFloat32, {8, kRopeDim});
  a.q_fp8 = ToDevice(std::vector<uint8_t>(kTokens * kHeads * kHeadDim, 0x7f),
                     DType::kFloat8E4m3fn, {kTokens, kHeads, kHeadDim});
  a.head_weights = ToDevice(std::vector<float>(kTokens * kHeads, kNaN),
                            DType::kFloat32, {kTokens, kHeads});
  ASSERT_THAT(Run<IndexerQ>(a), IsOk());

  IndexerQ::Args b = a;
  b.q = MakeTensorView(a.q.data, DType::kFloat32, {kTokens, kHeads * kHeadDim});
  EXPECT_THAT(Run<IndexerQ>(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                         "indexer_q: q has 2 dims, expected 3: "
                                         "[tokens, heads, head_dim]"));
  b = a;
  b.q_fp8.dtype = DType::kUint8;
  EXPECT_THAT(Run<IndexerQ>(b),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "indexer_q: q_fp8 has dtype uint8, expected "
                       "float8_e4m3fn or float8_e4m3fnuz"));
  b = a;
  b.weights = MakeTensorView(a.weights.data, DType::kFloat32, {kTokens, 1});
  EXPECT_THAT(Run<IndexerQ>(b),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("weights dim 1 (heads) is 1, expected 2")));
  b = a;
  b.head_weights.dtype = DType::kBFloat16;
  EXPECT_THAT(Run<IndexerQ>(b),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("head_weights has dtype bfloat16")));
  b = a;
  b.cos_sin_cache =
      MakeTensorView(a.cos_sin_cache.data, DType::kFloat32, {4, 130});
  EXPECT_THAT(Run<IndexerQ>(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("rope_dim is 130")));
  // A position outside the rope table: nothing is written.
  a.q_fp8 = ToDevice(std::vector<uint8_t>(kTokens * kHeads * kHeadDim, 0x7f),
                     DType::kFloat8E4m3fn, {kTokens, kHeads, kHeadDim});
  a.head_weights = ToDevice(std::vector<float>(kTokens * kHeads, kNaN),
                            DType::kFloat32, {kTokens, kHeads});
  a.positions =
      ToDevice(std::vector<int64_t>{0, 8, 2}, DType::kInt64, {kTokens});
  if (!ChecksIndexValues()) {
    // GPU kernels skip the token (its rows keep their poison) instead.
    EXPECT_THAT(Run<IndexerQ>(a), IsOk());
    const std::vector<uint8_t> codes = ToHost<uint8_t>(a.q_fp8);
    const std::vector<float> weights = ToHost<float>(a.head_weights);
    for (int64_t h = 0; h < kHeads; ++h) {
      EXPECT_TRUE(std::isnan(weights[1 * kHeads + h]));
      for (int64_t d = 0; d < kHeadDim; ++d) {
        ASSERT_EQ(codes[(1 * kHeads + h) * kHeadDim + d], 0x7f);
      }
    }
    return;
  }
  EXPECT_THAT(Run<IndexerQ>(a), StatusIs(absl::StatusCode::kOutOfRange,
                                         HasSubstr("positions[1] is 8")));
  for (uint8_t c : ToHost<uint8_t>(a.q_fp8)) ASSERT_EQ(c, 0x7f);
  for (float v : ToHost<float>(a.head_weights)) ASSERT_TRUE(std::isnan(v));
}

// ---------------------------------------------------------------------------
// Logits.

// Random logits inputs over a paged cache of random keys.
struct LogitsCase {
  DType fp8;
  int64_t head_dim = kHeadDim;
  int64_t heads;
  PagedLayout layout;
  HostIndexerCache cache{1, 1, kHeadDim};
  std::vector<uint8_t> q;           // [rows, heads, head_dim]
  std::vector<float> head_weights;  // [rows, heads]
  std::vector<int32_t> row_request, row_ks, row_ke;
  int64_t width = 0;
  int64_t rows() const { return static_cast<int64_t>(row_request.size()); }
};

// Compares every logit of every row with the reference.
void ExpectLogits(const LogitsCase& c, const std::vector<float>& logits) {
  const reference::Fp8Kind kind = KindOf(c.fp8);
  int64_t checked = 0;
  for (int64_t i = 0; i < c.rows(); ++i) {
    std::vector<double> q(c.heads * c.head_dim), w(c.heads);
    for (int64_t d = 0; d < c.heads * c.head_dim; ++d) {
      q[d] = reference::Fp8Value(c.q[i * c.heads * c.head_dim + d], kind);
    }
    for (int64_t h = 0; h < c.heads; ++h)
      w[h] = c.head_weights[i * c.heads + h];
    for (int64_t j = 0; j < c.width; ++j) {
      const float got = logits[i * c.width + j];
      if (j < c.row_ks[i] || j >= c.row_ke[i]) {
        ASSERT_EQ(got, kNegInf) << "row " << i << " column " << j;
        continue;
      }
      const int64_t slot = c.layout.Slot(c.row_request[i], j);
      std::vector<double> k(c.head_dim);
      for (int64_t d = 0; d < c.head_dim; ++d) {
        k[d] = reference::Fp8Value(c.cache.values(slot)[d], kind);
      }
      double magnitude = 0;
      const double expected =
          reference::IndexerLogit(q, w, k, c.cache.scale(slot), &magnitude);
      ASSERT_LE(std::fabs(got - expected), kLogitsRelTol * magnitude + 1e-30)
          << "row " << i << " column " << j << ": got " << got << ", expected "
          << expected;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

class LogitsTest : public IndexerOpsTest {
 protected:
  std::vector<std::string> RequiredOps() const override {
    return {IndexerLogits::kName};
  }

  LogitsCase MakeCase(DType fp8, int64_t heads,
                      const std::vector<int32_t>& seq_lens, int64_t block_size,
                      int64_t head_dim = kHeadDim) {
    LogitsCase c;
    c.fp8 = fp8;
    c.heads = heads;
    c.head_dim = head_dim;
    c.layout = MakePagedLayout(seq_lens, block_size, rng());
    c.cache = HostIndexerCache(c.layout.num_blocks, block_size, head_dim);
    // Every slot, used or spare, holds a random key: the kernel must read
    // exactly the request's slots to match.
    const double fp8_max = reference::Fp8MaxValue(KindOf(fp8));
    const std::vector<uint8_t> codes =
        RandomCodes(rng(), c.cache.num_slots() * head_dim, fp8, fp8_max / 4);
    for (int64_t s = 0; s < c.cache.num_slots(); ++s) {
      std::copy(codes.begin() + s * head_dim,
                codes.begin() + (s + 1) * head_dim, c.cache.values(s));
      c.cache.set_scale(s, static_cast<float>(std::exp2(RandomInt(-12, -6))));
    }
    // Rows: each request's last token (decode), some prefill rows with
    // causal windows [0, p + 1), windows that start mid-sequence, and an
    // empty window; half grouped by request, half shuffled.
    std::vector<std::array<int32_t, 3>> rows;
    for (size_t r = 0; r < seq_lens.size(); ++r) {
      const int32_t len = seq_lens[r];
      rows.push_back({static_cast<int32_t>(r), 0, len});
      for (int i = 0; i < 3; ++i) {
        const int32_t p = static_cast<int32_t>(RandomInt(0, len - 1));
        rows.push_back({static_cast<int32_t>(r), 0, p + 1});
      }
      for (int i = 0; i < 3; ++i) {
        const int32_t ks = static_cast<int32_t>(RandomInt(1, len));
        const int32_t ke = static_cast<int32_t>(RandomInt(ks, len));
        rows.push_back({static_cast<int32_t>(r), ks, ke});
      }
      const int32_t empty = static_cast<int32_t>(RandomInt(0, len));
      rows.push_back({static_cast<int32_t>(r), empty, empty});
    }
    std::shuffle(rows.begin() + rows.size() / 2, rows.end(), rng());
    for (const auto& row : rows) {
      c.row_request.push_back(row[0]);
      c.row_ks.push_back(row[1]);
      c.row_ke.push_back(row[2]);
    }
    c.width = *std::max_element(seq_lens.begin(), seq_lens.end()) + 5;
    c.q = RandomCodes(rng(), c.rows() * heads * head_dim, fp8, fp8_max / 4);
    c.head_weights = RandomFloats(c.rows() * heads);
    return c;
  }

  IndexerLogits::Args ToArgs(const LogitsCase& c) {
    IndexerLogits::Args a;
    a.q_fp8 = ToDevice(c.q, c.fp8, {c.rows(), c.heads, c.head_dim});
    a.head_weights =
        ToDevice(c.head_weights, DType::kFloat32, {c.rows(), c.heads});
    a.k_cache =
        ToDevice(c.cache.bytes, DType::kUint8,
                 {c.cache.num_blocks, c.cache.block_size, c.head_dim + 4});
    const int64_t requests = static_cast<int64_t>(c.layout.seq_lens.size());
    a.block_table = ToDevice(c.layout.block_table, DType::kInt32,
                             {requests, c.layout.max_blocks});
    a.seq_lens = ToDevice(c.layout.seq_lens, DType::kInt32, {requests});
    a.row_request = ToDevice(c.row_request, DType::kInt32, {c.rows()});
    a.row_key_start = ToDevice(c.row_ks, DType::kInt32, {c.rows()});
    a.row_key_end = ToDevice(c.row_ke, DType::kInt32, {c.rows()});
    // The logits buffer is sized by the workspace query, as an engine's
    // profile run would reserve it.
    const int64_t bytes =
        IndexerLogits::WorkspaceBytes(c.rows(), c.width).value();
    EXPECT_EQ(bytes, c.rows() * c.width * 4);
    a.logits = ToDevice(std::vector<float>(bytes / 4, kNaN), DType::kFloat32,
                        {c.rows(), c.width});
    return a;
  }
};

TEST_P(LogitsTest, MatchesReferenceOverPagedCache) {
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    for (int64_t block_size : {16, 64}) {
      SCOPED_TRACE(absl::StrCat(FormatName(fp8), " block_size ", block_size));
      LogitsCase c = MakeCase(fp8, /*heads=*/4, {1, 37, 150, 64}, block_size);
      IndexerLogits::Args a = ToArgs(c);
      ASSERT_THAT(Run<IndexerLogits>(a), IsOk());
      ExpectLogits(c, ToHost<float>(a.logits));
    }
  }
}

TEST_P(LogitsTest, MatchesReferenceAtTinyPresetDims) {
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    SCOPED_TRACE(FormatName(fp8));
    LogitsCase c = MakeCase(fp8, /*heads=*/4, {1, 37, 150}, /*block_size=*/16,
                            /*head_dim=*/64);
    IndexerLogits::Args a = ToArgs(c);
    ASSERT_THAT(Run<IndexerLogits>(a), IsOk());
    ExpectLogits(c, ToHost<float>(a.logits));
  }
}

TEST_P(LogitsTest, SameResultOnAnyThreadCount) {
  LogitsCase c = MakeCase(DType::kFloat8E4m3fn, 4, {300, 77}, 16);
  IndexerLogits::Args a = ToArgs(c);
  ctx_.num_threads = 1;
  ASSERT_THAT(Run<IndexerLogits>(a), IsOk());
  const std::vector<float> one = ToHost<float>(a.logits);
  ExpectLogits(c, one);
  ctx_.num_threads = 3;
  a = ToArgs(c);
  ASSERT_THAT(Run<IndexerLogits>(a), IsOk());
  const std::vector<float> three = ToHost<float>(a.logits);
  ASSERT_EQ(std::memcmp(one.data(), three.data(), one.size() * 4), 0);
}

TEST_P(LogitsTest, RejectsBadArguments) {
  LogitsCase c = MakeCase(DType::kFloat8E4m3fnuz, 2, {40, 20}, 16);
  const IndexerLogits::Args good = ToArgs(c);
  IndexerLogits::Args a = good;
  a.q_fp8 = MakeTensorView(good.q_fp8.data, good.q_fp8.dtype,
                           {c.rows(), 2 * kHeadDim});
  EXPECT_THAT(Run<IndexerLogits>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "indexer_logits: q_fp8 has 2 dims, expected 3: "
                       "[rows, heads, head_dim]"));
  a = good;
  a.q_fp8.dtype = DType::kFloat32;
  EXPECT_THAT(Run<IndexerLogits>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("q_fp8 has dtype float32")));
  a = good;
  a.head_weights = MakeTensorView(good.head_weights.data, DType::kFloat32,
                                  {c.rows() - 1, 2});
  EXPECT_THAT(Run<IndexerLogits>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("head_weights dim 0 (rows)")));
  a = good;
  a.k_cache.dtype = DType::kFloat8E4m3fnuz;
  EXPECT_THAT(Run<IndexerLogits>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("k_cache has dtype float8_e4m3fnuz, expected "
                                 "uint8")));
  a = good;
  a.seq_lens = MakeTensorView(good.seq_lens.data, DType::kInt32, {1});
  EXPECT_THAT(Run<IndexerLogits>(a),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("seq_lens dim 0")));

  // Value errors: nothing is written (the logits keep their NaN poison).
  if (!ChecksIndexValues()) return;
  auto expect_out_of_range = [&](IndexerLogits::Args bad,
                                 const std::string& message) {
    EXPECT_THAT(Run<IndexerLogits>(bad),
                StatusIs(absl::StatusCode::kOutOfRange, HasSubstr(message)));
    for (float v : ToHost<float>(bad.logits)) ASSERT_TRUE(std::isnan(v));
  };
  {
    std::vector<int32_t> ke = c.row_ke;
    ke[2] = 41;  // request 0 has 40 tokens
    std::vector<int32_t> rq = c.row_request;
    rq[2] = 0;
    a = good;
    a.row_key_end = ToDevice(ke, DType::kInt32, {c.rows()});
    a.row_request = ToDevice(rq, DType::kInt32, {c.rows()});
    expect_out_of_range(a, "row 2 has key window");
  }
  {
    a = ToArgs(c);
    a.logits = ToDevice(std::vector<float>(c.rows() * 30, kNaN),
                        DType::kFloat32, {c.rows(), 30});
    expect_out_of_range(a, "logits width");
  }
  {
    std::vector<int32_t> rq = c.row_request;
    rq[1] = 2;
    a = ToArgs(c);
    a.row_request = ToDevice(rq, DType::kInt32, {c.rows()});
    expect_out_of_range(a, "row_request[1] is 2, outside the 2 requests");
  }
  {
    std::vector<int32_t> table = c.layout.block_table;
    table[0] = static_cast<int32_t>(c.layout.num_blocks);
    a = ToArgs(c);
    a.block_table = ToDevice(table, DType::kInt32, {2, c.layout.max_blocks});
    expect_out_of_range(
        a, absl::StrCat("block_table[0, 0] is ", c.layout.num_blocks));
  }
  {
    std::vector<int32_t> lens = c.layout.seq_lens;
    lens[1] = static_cast<int32_t>(c.layout.max_blocks * 16 + 1);
    a = ToArgs(c);
    a.seq_lens = ToDevice(lens, DType::kInt32, {2});
    expect_out_of_range(a, "seq_lens[1]");
  }
}

// ---------------------------------------------------------------------------
// Top-k.

class TopKTest : public IndexerOpsTest {
 protected:
  std::vector<std::string> RequiredOps() const override {
    return {IndexerTopK::kName};
  }

  // Runs top-k over `logits` [rows, width] with the given windows and
  // compares every output element with the reference.
  void ExpectTopK(const std::vector<float>& logits, int64_t width,
                  const std::vector<int32_t>& ks,
                  const std::vector<int32_t>& ke, int64_t topk) {
    const int64_t rows = static_cast<int64_t>(ks.size());
    IndexerTopK::Args a;
    a.logits = ToDevice(logits, DType::kFloat32, {rows, width});
    a.row_key_start = ToDevice(ks, DType::kInt32, {rows});
    a.row_key_end = ToDevice(ke, DType::kInt32, {rows});
    a.topk_indices = ToDevice(std::vector<int32_t>(rows * topk, kIndexPoison),
                              DType::kInt32, {rows, topk});
    ASSERT_THAT(Run<IndexerTopK>(a), IsOk());
    const std::vector<int32_t> got = ToHost<int32_t>(a.topk_indices);
    for (int64_t i = 0; i < rows; ++i) {
      const std::vector<float> row(logits.begin() + i * width,
                                   logits.begin() + (i + 1) * width);
      const std::vector<int32_t> expected =
          reference::TopK(row, ks[i], ke[i], topk);
      const std::vector<int32_t> got_row(got.begin() + i * topk,
                                         got.begin() + (i + 1) * topk);
      ASSERT_EQ(got_row, expected)
          << "row " << i << " window [" << ks[i] << ", " << ke[i] << ")";
    }
  }

  // Rows over windows of the given lengths, starting at 0 or mid-sequence.
  // Logits outside a window are huge, so reading outside it shows.
  void RunLengths(const std::vector<int32_t>& lengths, int64_t topk,
                  bool with_ties) {
    std::vector<int32_t> ks, ke;
    for (int32_t len : lengths) {
      ks.push_back(0);
      ke.push_back(len);
      const int32_t start = static_cast<int32_t>(RandomInt(1, 100));
      ks.push_back(start);
      ke.push_back(start + len);
    }
    const int64_t width = *std::max_element(ke.begin(), ke.end()) + 3;
    std::vector<float> logits(ks.size() * width, 1e30f);
    for (size_t i = 0; i < ks.size(); ++i) {
      std::vector<float> values = RandomFloats(ke[i] - ks[i]);
      for (int32_t j = ks[i]; j < ke[i]; ++j) {
        float v = values[j - ks[i]];
        if (with_ties) v = std::floor(v * 2);  // a handful of distinct values
        logits[i * width + j] = v;
      }
    }
    ExpectTopK(logits, width, ks, ke, topk);
  }
};

TEST_P(TopKTest, LengthsAroundSmallTopK) {
  RunLengths({0, 1, 2, 63, 64, 65, 200, 1000}, 64, /*with_ties=*/false);
}

TEST_P(TopKTest, TiesPickTheLowerIndex) {
  RunLengths({63, 64, 65, 300}, 64, /*with_ties=*/true);
}

TEST_P(TopKTest, LengthsAroundRealTopK) {
  RunLengths({2047, 2048, 2049, 5000}, 2048, /*with_ties=*/false);
  RunLengths({2049, 3000}, 2048, /*with_ties=*/true);
}

TEST_P(TopKTest, MinusInfinityAndNanRankLast) {
  constexpr int64_t kWidth = 200;
  std::vector<float> logits = RandomFloats(3 * kWidth);
  for (int64_t j = 0; j < kWidth; ++j) {
    if (j % 3 == 0) logits[j] = kNegInf;
    if (j % 5 == 0) logits[kWidth + j] = kNaN;
    if (j % 2 == 0) logits[2 * kWidth + j] = kNegInf;
    if (j % 7 == 0) logits[2 * kWidth + j] = kNaN;
  }
  ExpectTopK(logits, kWidth, {0, 10, 0}, {200, 190, 200}, 150);
}

TEST_P(TopKTest, RejectsBadArguments) {
  IndexerTopK::Args a;
  a.logits = ToDevice(RandomFloats(2 * 10), DType::kFloat32, {2, 10});
  a.row_key_start = ToDevice(std::vector<int32_t>{0, 5}, DType::kInt32, {2});
  a.row_key_end = ToDevice(std::vector<int32_t>{10, 4}, DType::kInt32, {2});
  a.topk_indices = ToDevice(std::vector<int32_t>(2 * 4, kIndexPoison),
                            DType::kInt32, {2, 4});
  if (ChecksIndexValues()) {
    EXPECT_THAT(Run<IndexerTopK>(a),
                StatusIs(absl::StatusCode::kOutOfRange,
                         "indexer_topk: row 1 has key window [5, 4), expected "
                         "0 <= start <= end <= 10 (the logits width)"));
    a.row_key_end = ToDevice(std::vector<int32_t>{11, 6}, DType::kInt32, {2});
    EXPECT_THAT(Run<IndexerTopK>(a),
                StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("row 0")));
    for (int32_t v : ToHost<int32_t>(a.topk_indices)) {
      ASSERT_EQ(v, kIndexPoison);
    }
  }
  // Metadata errors are caught on every platform, before anything runs.
  IndexerTopK::Args b = a;
  b.topk_indices.dtype = DType::kInt64;
  EXPECT_THAT(Run<IndexerTopK>(b),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "indexer_topk: topk_indices has dtype int64, expected "
                       "int32"));
  b = a;
  b.row_key_start = MakeTensorView(a.row_key_start.data, DType::kInt32, {3});
  EXPECT_THAT(Run<IndexerTopK>(b), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("row_key_start dim 0")));
}

// ---------------------------------------------------------------------------
// The whole indexer at the real index_topk (2048), for sequences of 2047,
// 2048 and 2049 tokens: K write of every token, Q and logits for rows
// around the end and windows that start mid-sequence, then top-k. Each
// stage is checked against its reference from the previous stage's kernel
// output; rows with at most 2048 keys must select every key.
TEST_P(IndexerOpsTest, PipelineAtTopk2048) {
  constexpr int64_t kTopK = 2048, kHeads = 4, kBlockSize = 64;
  const std::vector<int32_t> seq_lens = {2047, 2048, 2049};
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    SCOPED_TRACE(FormatName(fp8));
    const PagedLayout layout = MakePagedLayout(seq_lens, kBlockSize, rng());
    int64_t tokens = 0;
    for (int32_t len : seq_lens) tokens += len;

    // K write of every token of every request.
    KWrite w = MakeKWrite(fp8, RopeStyle::kNeox, DType::kBFloat16, tokens,
                          layout.num_blocks, kBlockSize, false);
    w.positions.clear();
    w.slots.clear();
    for (size_t r = 0; r < seq_lens.size(); ++r) {
      for (int32_t p = 0; p < seq_lens[r]; ++p) {
        w.positions.push_back(p);
        w.slots.push_back(layout.Slot(r, p));
      }
    }
    w.args.positions = ToDevice(w.positions, DType::kInt64, {tokens});
    w.args.slot_mapping = ToDevice(w.slots, DType::kInt64, {tokens});
    w.args.topk_indices =
        ToDevice(std::vector<int32_t>(tokens * kTopK, kIndexPoison),
                 DType::kInt32, {tokens, kTopK});
    ASSERT_THAT(Run<IndexerKWrite>(w.args), IsOk());
    ExpectKWritten(w);

    // Rows: the last two tokens of each request (decode-like, window
    // [0, p + 1)) and a window of 2049 keys starting mid-sequence.
    std::vector<int32_t> row_request, ks, ke;
    std::vector<int64_t> positions;
    for (size_t r = 0; r < seq_lens.size(); ++r) {
      for (int32_t p : {seq_lens[r] - 2, seq_lens[r] - 1}) {
        row_request.push_back(static_cast<int32_t>(r));
        ks.push_back(0);
        ke.push_back(p + 1);
        positions.push_back(p);
      }
    }
    row_request.push_back(2);
    ks.push_back(0);
    ke.push_back(2049);
    positions.push_back(2048);
    row_request.push_back(1);
    ks.push_back(7);
    ke.push_back(2048);
    positions.push_back(2047);
    const int64_t rows = static_cast<int64_t>(row_request.size());

    IndexerQ::Args qa;
    std::vector<float> q = RandomFloats(rows * kHeads * kHeadDim);
    std::vector<float> weights = RandomFloats(rows * kHeads);
    qa.q = FloatsToDevice(q, DType::kBFloat16, {rows, kHeads, kHeadDim});
    qa.weights = FloatsToDevice(weights, DType::kBFloat16, {rows, kHeads});
    qa.positions = ToDevice(positions, DType::kInt64, {rows});
    qa.cos_sin_cache = w.args.cos_sin_cache;
    qa.rope_style = RopeStyle::kNeox;
    qa.q_fp8 = ToDevice(std::vector<uint8_t>(rows * kHeads * kHeadDim, 0x80),
                        fp8, {rows, kHeads, kHeadDim});
    qa.head_weights = ToDevice(std::vector<float>(rows * kHeads, kNaN),
                               DType::kFloat32, {rows, kHeads});
    ASSERT_THAT(Run<IndexerQ>(qa), IsOk());

    LogitsCase c;
    c.fp8 = fp8;
    c.heads = kHeads;
    c.layout = layout;
    c.cache = w.cache;
    c.cache.bytes = ToHost<uint8_t>(w.args.k_cache);
    c.q = ToHost<uint8_t>(qa.q_fp8);
    c.head_weights = ToHost<float>(qa.head_weights);
    c.row_request = row_request;
    c.row_ks = ks;
    c.row_ke = ke;
    c.width = 2049;
    IndexerLogits::Args la;
    la.q_fp8 = qa.q_fp8;
    la.head_weights = qa.head_weights;
    la.k_cache = w.args.k_cache;
    la.block_table =
        ToDevice(layout.block_table, DType::kInt32, {3, layout.max_blocks});
    la.seq_lens = ToDevice(seq_lens, DType::kInt32, {3});
    la.row_request = ToDevice(row_request, DType::kInt32, {rows});
    la.row_key_start = ToDevice(ks, DType::kInt32, {rows});
    la.row_key_end = ToDevice(ke, DType::kInt32, {rows});
    la.logits = ToDevice(std::vector<float>(rows * c.width, kNaN),
                         DType::kFloat32, {rows, c.width});
    ASSERT_THAT(Run<IndexerLogits>(la), IsOk());
    const std::vector<float> logits = ToHost<float>(la.logits);
    ExpectLogits(c, logits);

    IndexerTopK::Args ta;
    ta.logits = la.logits;
    ta.row_key_start = la.row_key_start;
    ta.row_key_end = la.row_key_end;
    ta.topk_indices = ToDevice(std::vector<int32_t>(rows * kTopK, kIndexPoison),
                               DType::kInt32, {rows, kTopK});
    ASSERT_THAT(Run<IndexerTopK>(ta), IsOk());
    const std::vector<int32_t> topk = ToHost<int32_t>(ta.topk_indices);
    for (int64_t i = 0; i < rows; ++i) {
      const std::vector<int32_t> got(topk.begin() + i * kTopK,
                                     topk.begin() + (i + 1) * kTopK);
      const std::vector<float> row(logits.begin() + i * c.width,
                                   logits.begin() + (i + 1) * c.width);
      ASSERT_EQ(got, reference::TopK(row, ks[i], ke[i], kTopK)) << "row " << i;
      const int64_t n = ke[i] - ks[i];
      if (n <= kTopK) {
        // Top-k keeps every key of the window: dense attention is exact.
        for (int64_t j = 0; j < kTopK; ++j) {
          ASSERT_EQ(got[j], j < n ? ks[i] + j : -1) << "row " << i;
        }
      } else {
        // 2049 keys: exactly the smallest logit is dropped (of equal
        // smallest ones, the higher index).
        int64_t dropped = ks[i];
        for (int64_t j = ks[i]; j < ke[i]; ++j) {
          if (row[j] <= row[dropped]) dropped = j;
        }
        EXPECT_EQ(std::count(got.begin(), got.end(), dropped), 0);
        EXPECT_EQ(std::count(got.begin(), got.end(), -1), 0);
      }
    }
  }
}

// The workspace a profile run reserves: rows x max_seq_len floats, zero for
// an empty batch, and past int64 an overflowed size, never a wrapped one.
TEST(LogitsWorkspaceTest, BytesAreCheckedForOverflow) {
  EXPECT_EQ(IndexerLogits::WorkspaceBytes(512, 1024).value(), 512 * 1024 * 4);
  EXPECT_EQ(IndexerLogits::WorkspaceBytes(0, 1024).value(), 0);
  EXPECT_EQ(IndexerLogits::WorkspaceBytes(512, -1).value(), 0);
  // 2^31 rows (int32 token indices' limit) x 2^31 keys x 4 bytes = 2^64.
  const int64_t big = int64_t{1} << 31;
  EXPECT_FALSE(IndexerLogits::WorkspaceBytes(big, big).ok());
  EXPECT_EQ(IndexerLogits::WorkspaceBytes(big, big / 2 - 1).value(),
            big * (big / 2 - 1) * 4);
  EXPECT_FALSE(IndexerLogits::WorkspaceBytes(big, big / 2).ok());
}

INSTANTIATE_TEST_SUITE_P(Platforms, IndexerOpsTest,
                         ::testing::ValuesIn(testing::OpTestPlatforms()),
                         testing::PlatformName);
INSTANTIATE_TEST_SUITE_P(Platforms, LogitsTest,
                         ::testing::ValuesIn(testing::OpTestPlatforms()),
                         testing::PlatformName);
INSTANTIATE_TEST_SUITE_P(Platforms, TopKTest,
                         ::testing::ValuesIn(testing::OpTestPlatforms()),
                         testing::PlatformName);

}  // namespace
}  // namespace dsa::attention
