// The arms' comparisons: the round-by-round TTFT change and its verdict, the
// median, and the output hash (every flipped bit, swapped words and lengths
// change it).
#include "bench/prefill/compare.h"

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace dsa::prefill_bench {
namespace {

TEST(CompareRunsTest, ChangeSpreadAndVerdictFromPairedRounds) {
  Change faster = CompareRuns({90, 80}, {100, 100});
  EXPECT_DOUBLE_EQ(*faster.pct, -15.0);
  EXPECT_DOUBLE_EQ(*faster.min_pct, -20.0);
  EXPECT_DOUBLE_EQ(*faster.max_pct, -10.0);
  EXPECT_EQ(faster.verdict, "faster");
  // Round 2 ran under more load for both arms: paired, it is still faster.
  EXPECT_EQ(CompareRuns({90, 180}, {100, 200}).verdict, "faster");
  EXPECT_EQ(CompareRuns({97, 105}, {100, 100}).verdict, "within noise");
  EXPECT_EQ(CompareRuns({101, 101.5}, {100, 100}).verdict, "within noise");
  EXPECT_EQ(CompareRuns({110, 105}, {100, 100}).verdict, "slower");
  EXPECT_EQ(CompareRuns({50}, {100}).verdict, "one run");
  EXPECT_FALSE(CompareRuns({}, {100}).pct.has_value());
}

TEST(CompareRunsTest, TheNoiseFloorIsExclusiveAndRoundsWithoutAReferenceSkip) {
  // Within the floor is noise; beyond it is not.
  EXPECT_EQ(CompareRuns({98.1, 98.1}, {100, 100}).verdict, "within noise");
  EXPECT_EQ(CompareRuns({97.9, 97.9}, {100, 100}).verdict, "faster");
  // A round whose reference took no time says nothing; the others decide.
  Change c = CompareRuns({90, 5}, {100, 0});
  EXPECT_DOUBLE_EQ(*c.min_pct, -10.0);
  EXPECT_DOUBLE_EQ(*c.max_pct, -10.0);
  // A reference of zero has no change at all.
  EXPECT_FALSE(CompareRuns({1, 2}, {0, 0}).pct.has_value());
  EXPECT_EQ(CompareRuns({1, 2}, {0, 0}).verdict, "");
  // Unequal round counts pair the rounds both have.
  Change uneven = CompareRuns({90, 80, 10}, {100, 100});
  EXPECT_DOUBLE_EQ(*uneven.min_pct, -20.0);
}

TEST(MedianTest, OddEvenAndEmpty) {
  EXPECT_EQ(Median({}), 0.0);
  EXPECT_EQ(Median({3}), 3.0);
  EXPECT_EQ(Median({5, 1, 3}), 3.0);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

TEST(HashBytesTest, EqualBytesEqualHashesAnyChangeAnother) {
  // 77 bytes: two 32-byte blocks through the lanes and a 13-byte tail.
  std::mt19937_64 rng(7);
  std::vector<uint8_t> bytes(77);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const uint64_t h = HashBytes(bytes.data(), bytes.size(), kHashSeed);
  std::vector<uint8_t> copy = bytes;
  EXPECT_EQ(HashBytes(copy.data(), copy.size(), kHashSeed), h);
  // Every single flipped bit, in the lanes and in the tail.
  std::set<uint64_t> seen = {h};
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      copy[i] ^= static_cast<uint8_t>(1u << bit);
      const uint64_t flipped = HashBytes(copy.data(), copy.size(), kHashSeed);
      EXPECT_NE(flipped, h) << "byte " << i << " bit " << bit;
      seen.insert(flipped);
      copy[i] ^= static_cast<uint8_t>(1u << bit);
    }
  }
  EXPECT_EQ(seen.size(), 1 + 8 * bytes.size());
  // Two 8-byte words swapped: in one block (two lanes), and in one lane
  // (two blocks).
  for (const int other : {8, 32}) {
    copy = bytes;
    std::swap_ranges(copy.begin(), copy.begin() + 8, copy.begin() + other);
    EXPECT_NE(HashBytes(copy.data(), copy.size(), kHashSeed), h) << other;
  }
  // A shorter buffer; the seed chains calls.
  EXPECT_NE(HashBytes(bytes.data(), bytes.size() - 1, kHashSeed), h);
  EXPECT_NE(HashBytes(bytes.data(), bytes.size(), kHashSeed + 1), h);
}

TEST(HashBytesTest, ChainedCallsDependOnTheSplit) {
  // The arms hash the same steps with the same splits; a different split of
  // the same bytes is a different output and must not collide by accident.
  std::mt19937_64 rng(::testing::UnitTest::GetInstance()->random_seed());
  std::vector<uint8_t> bytes(256);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const uint64_t whole = HashBytes(bytes.data(), bytes.size(), kHashSeed);
  const uint64_t halves = HashBytes(bytes.data() + 128, 128,
                                    HashBytes(bytes.data(), 128, kHashSeed));
  EXPECT_NE(whole, halves);
  EXPECT_EQ(halves, HashBytes(bytes.data() + 128, 128,
                              HashBytes(bytes.data(), 128, kHashSeed)));
  EXPECT_NE(HashBytes(bytes.data(), 0, kHashSeed),
            HashBytes(bytes.data(), 0, kHashSeed + 1));
}

}  // namespace
}  // namespace dsa::prefill_bench
