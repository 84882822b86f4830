#include "platform/host_collectives.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "attention/dtypes/bf16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dsa::platform {
namespace {

using ::testing::HasSubstr;

// Runs f(rank) on one thread per rank; returns each rank's error.
std::vector<std::string> OnEveryRank(int n,
                                     const std::function<std::string(int)>& f) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { errors[r] = f(r); });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

TEST(HostCollectivesTest, AllReduceSumsInRankOrderOnEveryRank) {
  std::mt19937 rng(5);
  for (int n : {1, 2, 3, 4, 7}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{1000}}) {
      HostCollectiveGroup group(n);
      std::vector<std::vector<float>> f32(n, std::vector<float>(count));
      std::vector<std::vector<uint16_t>> bf16(n, std::vector<uint16_t>(count));
      std::uniform_real_distribution<float> u(-4.0f, 4.0f);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) {
          f32[r][i] = u(rng);
          bf16[r][i] = attention::FloatToBf16(u(rng));
        }
      }
      std::vector<float> want32(count, 0.0f), want16(count, 0.0f);
      for (size_t i = 0; i < count; ++i) {
        for (int r = 0; r < n; ++r) {
          want32[i] += f32[r][i];
          want16[i] += attention::Bf16ToFloat(bf16[r][i]);
        }
      }
      // Two collectives back to back on the same group.
      const std::vector<std::string> errors = OnEveryRank(n, [&](int r) {
        std::string e = group.AllReduceSum(r, f32[r].data(), count,
                                           CollectiveElement::kFloat32);
        if (!e.empty()) return e;
        return group.AllReduceSum(r, bf16[r].data(), count,
                                  CollectiveElement::kBFloat16);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(errors[r], "") << r;
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(f32[r][i], want32[i]) << "rank " << r << " of " << n;
          ASSERT_EQ(bf16[r][i], attention::FloatToBf16(want16[i]))
              << "rank " << r << " of " << n;
        }
      }
    }
  }
}

TEST(HostCollectivesTest, AllGatherInRankOrderInPlaceOrNot) {
  for (int n : {1, 2, 4}) {
    for (bool in_place : {false, true}) {
      HostCollectiveGroup group(n);
      const size_t bytes = 13;
      std::vector<std::vector<uint8_t>> send(n, std::vector<uint8_t>(bytes));
      std::vector<std::vector<uint8_t>> recv(
          n, std::vector<uint8_t>(bytes * n, 0xee));
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < bytes; ++i) {
          send[r][i] = static_cast<uint8_t>(r * 31 + i);
          if (in_place) recv[r][r * bytes + i] = send[r][i];
        }
      }
      const std::vector<std::string> errors = OnEveryRank(n, [&](int r) {
        const void* from =
            in_place ? recv[r].data() + r * bytes : send[r].data();
        return group.AllGather(r, from, recv[r].data(), bytes);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(errors[r], "");
        for (int q = 0; q < n; ++q) {
          for (size_t i = 0; i < bytes; ++i) {
            ASSERT_EQ(recv[r][q * bytes + i], send[q][i])
                << "rank " << r << " block " << q
                << (in_place ? " in place" : "");
          }
        }
      }
    }
  }
}

TEST(HostCollectivesTest, ARankThatNeverArrivesTimesOutAndBreaksTheGroup) {
  HostCollectiveGroup group(3, std::chrono::milliseconds(50));
  float x = 1.0f;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> errors = OnEveryRank(2, [&](int r) {
    float mine = x;
    return group.AllReduceSum(r, &mine, 1, CollectiveElement::kFloat32);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  for (const std::string& e : errors) {
    EXPECT_THAT(e, HasSubstr("waiting for rank(s) 2 of 3"));
  }
  // The late rank, and any later call, fails at once.
  EXPECT_THAT(group.AllReduceSum(2, &x, 1, CollectiveElement::kFloat32),
              HasSubstr("timed out"));
  EXPECT_THAT(group.AllGather(0, &x, &x, 0), HasSubstr("timed out"));
}

TEST(HostCollectivesTest, AbortWakesEveryWaitingRank) {
  HostCollectiveGroup group(2);  // the default timeout: minutes
  std::string error;
  std::thread waiting([&] {
    float v = 0.0f;
    error = group.AllReduceSum(0, &v, 1, CollectiveElement::kFloat32);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  group.Abort("rank 1: step failed");
  waiting.join();
  EXPECT_EQ(error, "rank 1: step failed");
  float v = 0.0f;
  EXPECT_EQ(group.AllReduceSum(1, &v, 1, CollectiveElement::kFloat32),
            "rank 1: step failed");
}

TEST(HostCollectivesTest, ARankOutsideTheGroupIsRefused) {
  HostCollectiveGroup group(2);
  float v = 0.0f;
  EXPECT_EQ(group.AllReduceSum(2, &v, 1, CollectiveElement::kFloat32),
            "rank 2 of a group of 2");
  EXPECT_EQ(group.AllReduceSum(-1, &v, 1, CollectiveElement::kFloat32),
            "rank -1 of a group of 2");
}

}  // namespace
}  // namespace dsa::platform
