// PlanCache (plan_cache.h) over plans that count their lives: a plan is made
// once per key for all threads, found again from the thread's own entries
// without the table, the table never holds more than its capacity (the
// least recently used plan goes), and a plan is destroyed only when no
// thread holds it any more.
#include "attention/gpu/dense_ops/plan_cache.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

struct Key {
  int64_t rows = 0;
  int64_t out = 0;
  bool operator==(const Key& o) const { return rows == o.rows && out == o.out; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<int64_t>()(k.rows * 1000003 + k.out);
  }
};

std::atomic<int> g_live{0};
struct Plan {
  explicit Plan(const Key& k) : key(k) { ++g_live; }
  ~Plan() { --g_live; }
  Key key;
};

using Cache = PlanCache<Key, Plan, KeyHash>;

std::shared_ptr<const Plan> Make(const Key& k, std::atomic<int>* made) {
  ++*made;
  return std::make_shared<const Plan>(k);
}

TEST(PlanCacheTest, AStepsShapesAreMadeOnceAndFoundWithoutTheTable) {
  std::atomic<int> made{0};
  {
    Cache cache(64);
    // A layer's GEMMs: 9 shapes at one T, 79 layers, 3 steps.
    for (int step = 0; step < 3; ++step) {
      for (int layer = 0; layer < 79; ++layer) {
        for (int shape = 0; shape < 9; ++shape) {
          const Key k{64, 1000 + shape};
          const Plan* p = cache.Find(k, [&] { return Make(k, &made); });
          ASSERT_NE(p, nullptr);
          ASSERT_EQ(p->key, k);
        }
      }
    }
    const PlanCacheStats s = cache.Stats();
    EXPECT_EQ(made, 9);
    EXPECT_EQ(s.made, 9);
    EXPECT_EQ(s.table_hits, 0);  // every later call found its own entry
    EXPECT_EQ(s.size, 9u);
    EXPECT_EQ(s.evicted, 0);
  }
}

TEST(PlanCacheTest, ThreadsShareTheTablesPlans) {
  std::atomic<int> made{0};
  Cache cache(64);
  std::vector<std::thread> threads;
  std::atomic<bool> wrong{false};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        const Key k{64, i % 12};
        const Plan* p = cache.Find(k, [&] { return Make(k, &made); });
        if (p == nullptr || !(p->key == k)) wrong = true;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(wrong);
  EXPECT_EQ(made, 12);  // once per key, whichever thread asked first
  const PlanCacheStats s = cache.Stats();
  EXPECT_EQ(s.made + s.table_hits, 4 * 12);  // each thread's first of each
}

TEST(PlanCacheTest, NewShapesCannotGrowTheTablePastItsCapacity) {
  std::atomic<int> made{0};
  const int live_before = g_live;
  {
    Cache cache(32);
    // Every T of a long run: one new shape each.
    for (int t = 1; t <= 500; ++t) {
      const Key k{t, 7};
      ASSERT_NE(cache.Find(k, [&] { return Make(k, &made); }), nullptr);
      ASSERT_LE(cache.Stats().size, 32u);
    }
    const PlanCacheStats s = cache.Stats();
    EXPECT_EQ(s.made, 500);
    EXPECT_EQ(s.evicted, 500 - 32);
    // Dropped plans are gone but for the ones this thread still holds.
    EXPECT_LE(g_live - live_before, 32 + Cache::kThreadEntries);
  }
}

TEST(PlanCacheTest, TheLeastRecentlyUsedPlanIsEvictedNotAHotOne) {
  std::atomic<int> made{0};
  Cache cache(4);
  const Key hot{1, 1};
  cache.Find(hot, [&] { return Make(hot, &made); });
  for (int t = 2; t < 40; ++t) {
    const Key k{t, 1};
    cache.Find(k, [&] { return Make(k, &made); });
    // The hot plan is used between the new ones (from the thread's entries).
    ASSERT_NE(cache.Find(hot, [&] { return Make(hot, &made); }), nullptr);
  }
  // A thread without entries finds it in the table, unmade again.
  const int before = made;
  std::thread([&] {
    ASSERT_NE(cache.Find(hot, [&] { return Make(hot, &made); }), nullptr);
  }).join();
  EXPECT_EQ(made, before);
}

TEST(PlanCacheTest, APlanAThreadHoldsOutlivesItsEviction) {
  std::atomic<int> made{0};
  Cache cache(1);
  const Key a{1, 1}, b{2, 2};
  const Plan* held = nullptr;
  std::thread([&] {
    held = cache.Find(a, [&] { return Make(a, &made); });
  }).join();
  // That thread is gone (its entries with it); this one holds nothing yet.
  const Plan* mine = cache.Find(a, [&] { return Make(a, &made); });
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine, held);
  // b evicts a from the table, but this thread's entry still holds it.
  ASSERT_NE(cache.Find(b, [&] { return Make(b, &made); }), nullptr);
  EXPECT_EQ(cache.Stats().evicted, 1);
  EXPECT_EQ(cache.Find(a, [&] { return Make(a, &made); }), mine);
  EXPECT_EQ(mine->key, a);  // still alive: the thread's entry holds it
  EXPECT_EQ(made, 2);
}

TEST(PlanCacheTest, AFailedMakeKeepsNothing) {
  Cache cache(8);
  const Key k{3, 3};
  EXPECT_EQ(cache.Find(k, [] { return std::shared_ptr<const Plan>(); }),
            nullptr);
  EXPECT_EQ(cache.Stats().size, 0u);
  std::atomic<int> made{0};
  ASSERT_NE(cache.Find(k, [&] { return Make(k, &made); }), nullptr);
  EXPECT_EQ(made, 1);
}

TEST(PlanCacheTest, AnotherCacheOfTheSameTypeSharesNothing) {
  std::atomic<int> made{0};
  const Key k{9, 9};
  for (int round = 0; round < 3; ++round) {
    Cache cache(8);
    ASSERT_NE(cache.Find(k, [&] { return Make(k, &made); }), nullptr);
    EXPECT_EQ(cache.Stats().made, 1);
  }
  EXPECT_EQ(made, 3);
}

}  // namespace
}  // namespace dsa::attention::gpu
