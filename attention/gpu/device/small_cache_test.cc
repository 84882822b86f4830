// SmallCache (small_cache.h): a value is made once per key and found again
// while the key is among the kCapacity used last; a step's layers, each with
// its own key, all hit from the second step on; a failed make keeps nothing.
#include "attention/gpu/device/small_cache.h"

#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

struct Key {
  const void* pointer = nullptr;
  int64_t dim = 0;
  bool operator==(const Key& o) const {
    return pointer == o.pointer && dim == o.dim;
  }
};
struct Value {
  int64_t made_from = -1;
  int serial = 0;
};

int g_buffers[256];

TEST(SmallCacheTest, EveryLayerOfAStepHitsFromTheSecondStepOn) {
  SmallCache<Key, Value, 128> cache;
  int made = 0;
  for (int step = 0; step < 5; ++step) {
    for (int layer = 0; layer < 79; ++layer) {
      const Key key{&g_buffers[layer], 4096};
      const Value* v = cache.Find(key, [&](Value* out) {
        out->made_from = layer;
        out->serial = ++made;
        return true;
      });
      ASSERT_NE(v, nullptr);
      EXPECT_EQ(v->made_from, layer);
      EXPECT_EQ(v->serial, layer + 1);  // made in the first step only
    }
  }
  EXPECT_EQ(cache.stats().misses, 79);
  EXPECT_EQ(cache.stats().hits, 4 * 79);
  EXPECT_EQ(cache.size(), 79);
}

TEST(SmallCacheTest, KeysDifferingInAnyFieldAreDifferentEntries) {
  SmallCache<Key, Value, 8> cache;
  const Key a{&g_buffers[0], 1}, b{&g_buffers[0], 2}, c{&g_buffers[1], 1};
  for (const Key& k : {a, b, c, a, b, c}) {
    const Value* v = cache.Find(k, [&](Value* out) {
      out->made_from = k.dim * 100 + (k.pointer == &g_buffers[0] ? 0 : 1);
      return true;
    });
    EXPECT_EQ(v->made_from, k.dim * 100 + (k.pointer == &g_buffers[0] ? 0 : 1));
  }
  EXPECT_EQ(cache.stats().misses, 3);
  EXPECT_EQ(cache.stats().hits, 3);
}

TEST(SmallCacheTest, TheLeastRecentlyUsedEntryIsReplaced) {
  SmallCache<Key, Value, 4> cache;
  auto find = [&](int i) {
    return cache.Find(Key{&g_buffers[i], 0}, [&](Value* out) {
      out->made_from = i;
      return true;
    });
  };
  for (int i : {0, 1, 2, 3}) find(i);
  find(0);  // 1 is now the oldest
  find(4);
  EXPECT_EQ(cache.stats().misses, 5);
  for (int i : {0, 2, 3, 4}) EXPECT_EQ(find(i)->made_from, i);
  EXPECT_EQ(cache.stats().misses, 5);
  EXPECT_EQ(find(1)->made_from, 1);  // made again
  EXPECT_EQ(cache.stats().misses, 6);
  // Random keys over a few more than fit: every answer is its key's.
  std::mt19937 rng(std::random_device{}());
  for (int n = 0; n < 1000; ++n) {
    const int i = static_cast<int>(rng() % 6);
    ASSERT_EQ(find(i)->made_from, i);
  }
  EXPECT_EQ(cache.size(), 4);
}

TEST(SmallCacheTest, AFailedMakeKeepsNothing) {
  SmallCache<Key, Value, 4> cache;
  const Key k{&g_buffers[7], 3};
  EXPECT_EQ(cache.Find(k, [](Value*) { return false; }), nullptr);
  EXPECT_EQ(cache.size(), 0);
  const Value* v = cache.Find(k, [](Value* out) {
    out->made_from = 7;
    return true;
  });
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->made_from, 7);
  EXPECT_EQ(cache.stats().misses, 2);
}

struct ThreadTestCache : SmallCache<Key, Value, 4> {};

TEST(SmallCacheTest, EachThreadHasItsOwn) {
  ThreadCache<ThreadTestCache>().Find(Key{&g_buffers[0], 0}, [](Value* out) {
    out->made_from = 1;
    return true;
  });
  int other_misses = -1;
  std::thread([&] {
    other_misses =
        static_cast<int>(ThreadCache<ThreadTestCache>().stats().misses);
  }).join();
  EXPECT_EQ(other_misses, 0);
  EXPECT_EQ(ThreadCache<ThreadTestCache>().stats().misses, 1);
}

}  // namespace
}  // namespace dsa::attention::gpu
