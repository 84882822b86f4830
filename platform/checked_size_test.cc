// CheckedSize: exact below INT64_MAX, overflowed at and past it (never a
// wrapped value), a negative or too large operand overflowed, and an
// overflowed operand poisoning the whole expression.
#include "platform/checked_size.h"

#include <cstdint>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace dsa {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(CheckedSizeTest, ExactWhereInt64Holds) {
  EXPECT_EQ(CheckedSize().value(), 0);
  EXPECT_EQ((CheckedSize(3) * 4 + 5).value(), 17);
  EXPECT_EQ((CheckedSize(int64_t{1} << 31) * (int64_t{1} << 31)).value(),
            int64_t{1} << 62);
  EXPECT_EQ((CheckedSize(kMax - 1) + 1).value(), kMax);
  EXPECT_EQ((CheckedSize(kMax) * 1).value(), kMax);
  EXPECT_EQ((CheckedSize(kMax) * 0).value(), 0);
  EXPECT_EQ((CheckedSize(sizeof(float)) * 2).value(), 8);
  CheckedSize s = 2;
  s *= 3;
  s += 1;
  EXPECT_EQ(s.value(), 7);
  EXPECT_TRUE(s.AtMost(7));
  EXPECT_FALSE(s.AtMost(6));
}

TEST(CheckedSizeTest, OverflowIsAValueThatStays) {
  const CheckedSize sum = CheckedSize(kMax) + 1;
  EXPECT_FALSE(sum.ok());
  EXPECT_EQ(sum.value(), -1);
  EXPECT_EQ(sum.value_or(42), 42);
  EXPECT_FALSE(sum.AtMost(kMax));
  const CheckedSize product =
      CheckedSize(int64_t{1} << 32) * (int64_t{1} << 31);
  EXPECT_FALSE(product.ok());
  // 2^63 exactly is past int64.
  EXPECT_FALSE((CheckedSize(int64_t{1} << 62) * 2).ok());
  EXPECT_TRUE(
      (CheckedSize(int64_t{1} << 62) * 1 + ((int64_t{1} << 62) - 1)).ok());
  // Once overflowed, always: even times zero.
  EXPECT_FALSE((product * 0).ok());
  EXPECT_FALSE((product + 0).ok());
  EXPECT_EQ(product, CheckedSize::Overflowed());
  EXPECT_NE(product, CheckedSize(0));
  CheckedSize acc = 1;
  for (int i = 0; i < 70; ++i) acc *= 2;
  EXPECT_FALSE(acc.ok());
}

TEST(CheckedSizeTest, NegativeAndTooLargeOperandsAreOverflowed) {
  EXPECT_FALSE(CheckedSize(-1).ok());
  EXPECT_FALSE((CheckedSize(5) * -1).ok());
  EXPECT_FALSE((CheckedSize(5) + int64_t{-1}).ok());
  EXPECT_FALSE(CheckedSize(std::numeric_limits<uint64_t>::max()).ok());
  EXPECT_FALSE(CheckedSize(uint64_t{1} << 63).ok());
  EXPECT_TRUE(CheckedSize((uint64_t{1} << 63) - 1).ok());
}

// Random operands against 128-bit arithmetic.
TEST(CheckedSizeTest, AgreesWithWideArithmetic) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 100000; ++i) {
    // Operands of every magnitude, so that both outcomes are common.
    const int64_t a = static_cast<int64_t>(rng() >> (1 + rng() % 63));
    const int64_t b = static_cast<int64_t>(rng() >> (1 + rng() % 63));
    const __int128 sum = static_cast<__int128>(a) + b;
    const __int128 product = static_cast<__int128>(a) * b;
    const CheckedSize s = CheckedSize(a) + b, p = CheckedSize(a) * b;
    ASSERT_EQ(s.ok(), sum <= kMax) << a << " + " << b;
    ASSERT_EQ(p.ok(), product <= kMax) << a << " * " << b;
    if (s.ok()) ASSERT_EQ(s.value(), static_cast<int64_t>(sum));
    if (p.ok()) ASSERT_EQ(p.value(), static_cast<int64_t>(product));
  }
}

TEST(BytesForMessageTest, TheLargestUnitFromGibUp) {
  constexpr int64_t kGib = int64_t{1} << 30;
  EXPECT_EQ(BytesForMessage(kGib / 2), "0.5 GiB");
  EXPECT_EQ(BytesForMessage(12 * kGib + kGib / 4), "12.2 GiB");
  EXPECT_EQ(BytesForMessage(1023 * kGib), "1023.0 GiB");
  EXPECT_EQ(BytesForMessage(1024 * kGib), "1.0 TiB");
  EXPECT_EQ(BytesForMessage(int64_t{3} << 50), "3.0 PiB");
  EXPECT_EQ(BytesForMessage(kMax), "8.0 EiB");
  EXPECT_EQ(BytesForMessage(CheckedSize::Overflowed()), "more than 8.0 EiB");
}

}  // namespace
}  // namespace dsa
