// dsa::StrCat formats each value byte for byte as a classic-locale
// std::ostream does (what it was built on before), without one: checked
// against such a stream on fresh random values of every type it prints, the
// edge values, and under a global locale that groups digits and writes a
// decimal comma.
#include "platform/core_status.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <locale>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace dsa {
namespace {

template <class T>
std::string ByStream(const T& value) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << value;
  return out.str();
}

template <class T>
T FromBits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

template <class Int>
void ExpectIntegersAsStream(std::mt19937_64& rng) {
  const Int edges[] = {0,
                       1,
                       static_cast<Int>(-1),
                       std::numeric_limits<Int>::min(),
                       std::numeric_limits<Int>::max(),
                       static_cast<Int>(std::numeric_limits<Int>::min() + 1),
                       static_cast<Int>(std::numeric_limits<Int>::max() - 1)};
  for (Int v : edges) EXPECT_EQ(StrCat(v), ByStream(v)) << +v;
  for (int i = 0; i < 2000; ++i) {
    // Every magnitude: a random width, then random bits within it.
    const int width = static_cast<int>(rng() % (8 * sizeof(Int))) + 1;
    const uint64_t mask =
        width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    const Int v = static_cast<Int>(rng() & mask);
    ASSERT_EQ(StrCat(v), ByStream(v)) << +v;
  }
}

TEST(StrCatTest, IntegersOfEveryWidthAsAStreamWritesThem) {
  std::mt19937_64 rng(std::random_device{}());
  ExpectIntegersAsStream<short>(rng);
  ExpectIntegersAsStream<unsigned short>(rng);
  ExpectIntegersAsStream<int>(rng);
  ExpectIntegersAsStream<unsigned>(rng);
  ExpectIntegersAsStream<long>(rng);
  ExpectIntegersAsStream<unsigned long>(rng);
  ExpectIntegersAsStream<long long>(rng);
  ExpectIntegersAsStream<unsigned long long>(rng);
  EXPECT_EQ(StrCat(int64_t{-9223372036854775807 - 1}), "-9223372036854775808");
  EXPECT_EQ(StrCat(size_t{18446744073709551615u}), "18446744073709551615");
}

template <class Float>
void ExpectFloatsAsStream(std::mt19937_64& rng) {
  const Float edges[] = {0,
                         -Float{0},
                         1,
                         -1,
                         Float{0.5},
                         Float{1e-5},
                         Float{123456},
                         Float{1234567},
                         Float{999999.5},
                         Float{0.0001},
                         Float{0.00001},
                         std::numeric_limits<Float>::min(),
                         std::numeric_limits<Float>::max(),
                         std::numeric_limits<Float>::lowest(),
                         std::numeric_limits<Float>::denorm_min(),
                         std::numeric_limits<Float>::epsilon(),
                         std::numeric_limits<Float>::infinity(),
                         -std::numeric_limits<Float>::infinity(),
                         std::numeric_limits<Float>::quiet_NaN(),
                         -std::numeric_limits<Float>::quiet_NaN()};
  for (Float v : edges) EXPECT_EQ(StrCat(v), ByStream(v)) << ByStream(v);
  for (int i = 0; i < 20000; ++i) {
    // Random bit patterns: every exponent, subnormals, NaNs.
    const Float bits = FromBits<Float>(rng() >> (64 - 8 * sizeof(Float)));
    ASSERT_EQ(StrCat(bits), ByStream(bits)) << ByStream(bits);
    // And values of the size messages print.
    std::uniform_real_distribution<double> dist(-1e7, 1e7);
    const Float plain = static_cast<Float>(
        dist(rng) * std::pow(10.0, -static_cast<int>(rng() % 12)));
    ASSERT_EQ(StrCat(plain), ByStream(plain)) << ByStream(plain);
  }
}

TEST(StrCatTest, FloatsWithSixSignificantDigitsAsAStreamWritesThem) {
  std::mt19937_64 rng(std::random_device{}());
  ExpectFloatsAsStream<float>(rng);
  ExpectFloatsAsStream<double>(rng);
  EXPECT_EQ(StrCat(0.5f), "0.5");
  EXPECT_EQ(StrCat(1e-5), "1e-05");
  EXPECT_EQ(StrCat(1.0 / 3), "0.333333");
  EXPECT_EQ(StrCat(123456789.0), "1.23457e+08");
  EXPECT_EQ(StrCat(-0.0f), "-0");
  EXPECT_EQ(StrCat(std::numeric_limits<float>::infinity()), "inf");
  EXPECT_EQ(StrCat(-std::numeric_limits<double>::quiet_NaN()), "-nan");
}

TEST(StrCatTest, StringsCharactersBoolsAndPointers) {
  const std::string s = "a string longer than the small-string buffer";
  const std::string_view view = "view";
  const char* null_text = nullptr;
  char mutable_text[] = "mutable";
  EXPECT_EQ(StrCat("lit", s, view, std::string(), mutable_text, null_text),
            "lit" + s + "view" + "mutable");
  EXPECT_EQ(StrCat('x', static_cast<signed char>('y'),
                   static_cast<unsigned char>('z')),
            ByStream('x') + ByStream(static_cast<signed char>('y')) +
                ByStream(static_cast<unsigned char>('z')));
  EXPECT_EQ(StrCat(true, false), ByStream(true) + ByStream(false));
  EXPECT_EQ(StrCat(true, false), "10");
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 1000; ++i) {
    const void* p = reinterpret_cast<const void*>(
        static_cast<uintptr_t>(rng() >> (rng() % 64)));
    ASSERT_EQ(StrCat(p), ByStream(p));
  }
  const void* null_pointer = nullptr;
  EXPECT_EQ(StrCat(null_pointer), ByStream(null_pointer));
  int object = 0;
  EXPECT_EQ(StrCat(&object), ByStream(static_cast<const void*>(&object)));
  enum Unscoped { kSeven = 7 };
  EXPECT_EQ(StrCat(kSeven), ByStream(kSeven));
}

TEST(StrCatTest, AMessageAsTheChecksWriteIt) {
  EXPECT_EQ(StrCat("dense_mha_prefill", ": ", "kv_b_proj", " dim ", 0, " (",
                   "heads * (qk_nope + v)", ") is ", 28672, ", expected ",
                   int64_t{28672} + 1, " (", 64, " heads * (", 192, " + ", 256,
                   ")", ")"),
            "dense_mha_prefill: kv_b_proj dim 0 (heads * (qk_nope + v)) is "
            "28672, expected 28673 (64 heads * (192 + 256))");
  EXPECT_EQ(StrCat("rms_norm: eps is ", -1e-6f, ", expected >= 0"),
            "rms_norm: eps is -1e-06, expected >= 0");
  EXPECT_EQ(StrCat(), "");
}

// A locale that would write 1234567.5 as "1.234.567,5".
struct CommaPunct : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

TEST(StrCatTest, TheGlobalLocaleChangesNothing) {
  const std::locale previous =
      std::locale::global(std::locale(std::locale::classic(), new CommaPunct));
  std::ostringstream localized;
  localized << 1234567.5 << ' ' << 1234567;
  EXPECT_EQ(localized.str(), "1,23457e+06 1.234.567");  // the locale is live
  EXPECT_EQ(StrCat(1234567.5, " ", 1234567, " ", 0.5f),
            "1.23457e+06 1234567 0.5");
  std::locale::global(previous);
}

}  // namespace
}  // namespace dsa
