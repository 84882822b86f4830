// The scratch arenas' bookkeeping (scratch_arena.h) over an allocator of
// host memory that counts its calls and fails on demand: growth and reuse,
// a failed growth leaving the arena as it was, one arena per key, leases
// exclusive across threads, eviction past the table's bound, everything
// given back at the end (the ASan build checks nothing leaks).
#include "attention/gpu/device/scratch_arena.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

using ::testing::HasSubstr;

// Host blocks standing in for device memory.
struct FakeDevice {
  int allocations = 0;
  int released_in_order = 0;
  int released_now = 0;
  bool fail_next = false;
  std::set<void*> live;
  std::vector<size_t> sizes;
  std::mutex mu;
};

LaunchResult FakeAllocate(void* context, const ScratchKey&, size_t bytes,
                          const char* what, void** ptr) {
  FakeDevice& d = *static_cast<FakeDevice*>(context);
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.fail_next) {
    d.fail_next = false;
    LaunchResult r;
    r.code = LaunchCode::kOutOfMemory;
    std::snprintf(r.message, sizeof(r.message), "%s: out of memory (%zu)", what,
                  bytes);
    return r;
  }
  ++d.allocations;
  d.sizes.push_back(bytes);
  *ptr = std::aligned_alloc(ScratchLayout::kAlignment, bytes);
  d.live.insert(*ptr);
  return LaunchResult{};
}
void FakeReleaseInOrder(void* context, const ScratchKey&, void* ptr) {
  FakeDevice& d = *static_cast<FakeDevice*>(context);
  std::lock_guard<std::mutex> lock(d.mu);
  ++d.released_in_order;
  EXPECT_EQ(d.live.erase(ptr), 1u);
  std::free(ptr);
}
void FakeReleaseNow(void* context, const ScratchKey&, void* ptr) {
  FakeDevice& d = *static_cast<FakeDevice*>(context);
  std::lock_guard<std::mutex> lock(d.mu);
  ++d.released_now;
  EXPECT_EQ(d.live.erase(ptr), 1u);
  std::free(ptr);
}

ScratchAllocator Over(FakeDevice* d) {
  ScratchAllocator a;
  a.allocate = FakeAllocate;
  a.release_in_order = FakeReleaseInOrder;
  a.release_now = FakeReleaseNow;
  a.context = d;
  return a;
}

int g_streams[8];
ScratchKey Key(int device, int stream) { return {device, &g_streams[stream]}; }
constexpr size_t kMiB = size_t{1} << 20;

TEST(ScratchLayoutTest, BuffersAtAlignedOffsets) {
  ScratchLayout l;
  EXPECT_EQ(l.Add(1000), 0u);
  EXPECT_EQ(l.Add(0), 1024u);
  EXPECT_EQ(l.Add(256), 1024u);
  EXPECT_EQ(l.Add(1), 1280u);
  EXPECT_EQ(l.bytes(), 1536u);
  std::mt19937_64 rng(std::random_device{}());
  ScratchLayout r;
  size_t end = 0;
  for (int i = 0; i < 100; ++i) {
    const size_t bytes = rng() % 100000;
    const size_t at = r.Add(bytes);
    EXPECT_EQ(at % ScratchLayout::kAlignment, 0u);
    EXPECT_GE(at, end);
    end = at + bytes;
    EXPECT_GE(r.bytes(), end);
  }
}

TEST(ScratchLayoutTest, AnOverflowingLayoutAsksForTooMuch) {
  ScratchLayout l;
  l.Add(std::numeric_limits<size_t>::max() - 100);
  EXPECT_EQ(l.bytes(), std::numeric_limits<size_t>::max());
  l.Add(1);
  EXPECT_EQ(l.bytes(), std::numeric_limits<size_t>::max());
}

TEST(ScratchArenasTest, GrowsToTheLargestCallAndThenReuses) {
  FakeDevice d;
  {
    ScratchArenas arenas(Over(&d), 8);
    ScratchArenas::Lease lease;
    ASSERT_TRUE(arenas.Acquire(Key(0, 0), 3 * kMiB, "call", &lease).ok());
    uint8_t* const first = lease.base();
    ASSERT_NE(first, nullptr);
    std::memset(first, 0x5a, 3 * kMiB);  // the whole grant is there
    lease.Reset();
    EXPECT_EQ(d.allocations, 1);
    EXPECT_EQ(d.sizes.back(), 4 * kMiB);  // rounded up to the granularity
    // Smaller and equal calls: the same block, no device call.
    for (size_t bytes : {size_t{1}, kMiB, 4 * kMiB, size_t{0}}) {
      ASSERT_TRUE(arenas.Acquire(Key(0, 0), bytes, "call", &lease).ok());
      EXPECT_EQ(lease.base(), first);
      lease.Reset();
    }
    EXPECT_EQ(d.allocations, 1);
    // A larger one: a new block, the old one given back in stream order.
    ASSERT_TRUE(arenas.Acquire(Key(0, 0), 4 * kMiB + 1, "call", &lease).ok());
    EXPECT_EQ(d.allocations, 2);
    EXPECT_EQ(d.released_in_order, 1);
    EXPECT_EQ(d.sizes.back(), 6 * kMiB);
    lease.Reset();
    const ScratchArenaStats s = arenas.Stats(Key(0, 0));
    EXPECT_EQ(s.capacity, 6 * kMiB);
    EXPECT_EQ(s.grows, 2);
    EXPECT_EQ(s.leases, 6);
    EXPECT_EQ(d.live.size(), 1u);
  }
  // Destroyed: everything given back.
  EXPECT_EQ(d.released_now, 1);
  EXPECT_TRUE(d.live.empty());
}

TEST(ScratchArenasTest, AFailedGrowthLeavesTheArenaAsItWas) {
  FakeDevice d;
  ScratchArenas arenas(Over(&d), 8);
  ScratchArenas::Lease lease;
  ASSERT_TRUE(arenas.Acquire(Key(0, 0), kMiB, "first", &lease).ok());
  uint8_t* const block = lease.base();
  block[0] = 42;
  lease.Reset();
  d.fail_next = true;
  const LaunchResult r =
      arenas.Acquire(Key(0, 0), 10 * kMiB, "dense_mha_prefill scratch", &lease);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code, LaunchCode::kOutOfMemory);
  EXPECT_THAT(r.message, HasSubstr("dense_mha_prefill scratch"));
  EXPECT_EQ(lease.base(), nullptr);
  EXPECT_EQ(arenas.Stats(Key(0, 0)).capacity, 2 * kMiB);
  EXPECT_EQ(d.released_in_order, 0);
  // Still usable as before, and not held by the failed call.
  ASSERT_TRUE(arenas.Acquire(Key(0, 0), kMiB, "again", &lease).ok());
  EXPECT_EQ(lease.base(), block);
  EXPECT_EQ(lease.base()[0], 42);
  lease.Reset();
  // The retry of the large call grows.
  ASSERT_TRUE(arenas.Acquire(Key(0, 0), 10 * kMiB, "retry", &lease).ok());
  lease.Reset();
  EXPECT_EQ(arenas.Stats(Key(0, 0)).grows, 2);
  EXPECT_EQ(arenas.Stats(Key(0, 0)).capacity, 10 * kMiB);
  EXPECT_EQ(d.released_in_order, 1);
}

TEST(ScratchArenasTest, OneArenaPerDeviceStreamAndThread) {
  FakeDevice d;
  ScratchArenas arenas(Over(&d), 8);
  std::set<uint8_t*> bases;
  int thread_a = 0, thread_b = 0;
  const ScratchKey keys[] = {Key(0, 0),
                             Key(0, 1),
                             Key(1, 0),
                             {0, &g_streams[2], &thread_a},
                             {0, &g_streams[2], &thread_b}};
  for (int round = 0; round < 3; ++round) {
    for (const ScratchKey& k : keys) {
      ScratchArenas::Lease lease;
      ASSERT_TRUE(arenas.Acquire(k, kMiB, "call", &lease).ok());
      if (round == 0) {
        EXPECT_TRUE(bases.insert(lease.base()).second);
      } else {
        EXPECT_EQ(bases.count(lease.base()), 1u);
      }
    }
  }
  EXPECT_EQ(d.allocations, 5);
  for (const ScratchKey& k : keys) EXPECT_EQ(arenas.Stats(k).leases, 3);
}

TEST(ScratchArenasTest, ASecondLeaseOnOneThreadIsAnErrorNotADeadlock) {
  FakeDevice d;
  ScratchArenas arenas(Over(&d), 8);
  ScratchArenas::Lease outer, inner;
  ASSERT_TRUE(arenas.Acquire(Key(0, 0), kMiB, "outer", &outer).ok());
  for (int stream : {0, 1}) {
    const LaunchResult r =
        arenas.Acquire(Key(0, stream), kMiB, "inner", &inner);
    EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
    EXPECT_THAT(r.message, HasSubstr("inner: this thread already holds"));
  }
  outer.Reset();
  EXPECT_TRUE(arenas.Acquire(Key(0, 0), kMiB, "inner", &inner).ok());
}

TEST(ScratchArenasTest, CallsOnOneStreamHoldItsArenaOneAtATime) {
  FakeDevice d;
  ScratchArenas arenas(Over(&d), 8);
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false}, failed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 300; ++i) {
        const size_t bytes = (rng() % 8 + 1) * kMiB / 2;
        ScratchArenas::Lease lease;
        if (!arenas.Acquire(Key(0, 0), bytes, "call", &lease).ok()) {
          failed = true;
          return;
        }
        if (inside.fetch_add(1) != 0) overlapped = true;
        // The call's own pattern survives until its lease ends.
        std::memset(lease.base(), t, bytes);
        std::this_thread::yield();
        for (size_t k = 0; k < bytes; k += 4099) {
          if (lease.base()[k] != t) overlapped = true;
        }
        inside.fetch_sub(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(failed);
  EXPECT_FALSE(overlapped);
  const ScratchArenaStats s = arenas.Stats(Key(0, 0));
  EXPECT_EQ(s.leases, 1200);
  EXPECT_EQ(s.capacity, 4 * kMiB);
  EXPECT_LE(s.grows, 4);  // once per new largest size at most
}

TEST(ScratchArenasTest, PastTheBoundTheLeastRecentlyUsedArenaServesANewStream) {
  FakeDevice d;
  ScratchArenas arenas(Over(&d), 2);
  ScratchArenas::Lease lease;
  ASSERT_TRUE(arenas.Acquire(Key(0, 0), kMiB, "a", &lease).ok());
  lease.Reset();
  ASSERT_TRUE(arenas.Acquire(Key(0, 1), kMiB, "b", &lease).ok());
  lease.Reset();
  // Stream 0 again (a cache hit): stream 1 is now the older one...
  ASSERT_TRUE(arenas.Acquire(Key(0, 1), kMiB, "b", &lease).ok());
  lease.Reset();
  ASSERT_TRUE(arenas.Acquire(Key(0, 0), kMiB, "a", &lease).ok());
  lease.Reset();
  // ... and is evicted for stream 2, its block given back at once.
  ASSERT_TRUE(arenas.Acquire(Key(0, 2), 3 * kMiB, "c", &lease).ok());
  lease.Reset();
  EXPECT_EQ(d.released_now, 1);
  EXPECT_EQ(arenas.Stats(Key(0, 1)).capacity, 0u);
  EXPECT_EQ(arenas.Stats(Key(0, 0)).capacity, 2 * kMiB);
  EXPECT_EQ(arenas.Stats(Key(0, 2)).capacity, 4 * kMiB);
  // Stream 1 comes back (its cached entry is stale): it gets an arena again.
  ASSERT_TRUE(arenas.Acquire(Key(0, 1), kMiB, "b", &lease).ok());
  lease.Reset();
  EXPECT_EQ(arenas.Stats(Key(0, 1)).capacity, 2 * kMiB);
  EXPECT_EQ(d.released_now, 2);
  EXPECT_EQ(d.live.size(), 2u);
}

TEST(ScratchArenasTest, ReleaseAllGivesBackAndTheNextCallGrowsAgain) {
  FakeDevice d;
  ScratchArenas arenas(Over(&d), 8);
  ScratchArenas::Lease lease;
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(arenas.Acquire(Key(0, s), kMiB, "call", &lease).ok());
    lease.Reset();
  }
  arenas.ReleaseAll();
  EXPECT_EQ(d.released_now, 3);
  EXPECT_TRUE(d.live.empty());
  ASSERT_TRUE(arenas.Acquire(Key(0, 0), kMiB, "call", &lease).ok());
  lease.Reset();
  EXPECT_EQ(d.allocations, 4);
}

// A destroyed stream's handle may come back as a new stream's: the new
// stream must start as one never seen (the same allocations, which a fault
// test counts), and the old one's memory must have been given back.
TEST(ScratchArenasTest, ReleaseStreamForgetsItsArenasAndOnlyThose) {
  FakeDevice d;
  ScratchArenas arenas(Over(&d), 3);
  ScratchArenas::Lease lease;
  for (const ScratchKey& key : {Key(0, 0), Key(1, 0), Key(0, 1)}) {
    ASSERT_TRUE(arenas.Acquire(key, 3 * kMiB, "call", &lease).ok());
    lease.Reset();
  }
  // Stream 0 on device 0 once more: now in this thread's cache.
  ASSERT_TRUE(arenas.Acquire(Key(0, 0), kMiB, "call", &lease).ok());
  lease.Reset();
  ASSERT_EQ(d.allocations, 3);

  EXPECT_EQ(arenas.ReleaseStream(&g_streams[0]), 2);  // both devices
  EXPECT_EQ(d.released_in_order, 2);
  EXPECT_EQ(d.released_now, 0);
  EXPECT_EQ(d.live.size(), 1u);
  EXPECT_EQ(arenas.Stats(Key(0, 0)).capacity, 0u);
  EXPECT_EQ(arenas.Stats(Key(1, 0)).capacity, 0u);
  EXPECT_EQ(arenas.Stats(Key(0, 1)).capacity, 4 * kMiB);  // untouched
  EXPECT_EQ(arenas.ReleaseStream(&g_streams[0]), 0);      // nothing left
  EXPECT_EQ(arenas.ReleaseStream(&g_streams[5]), 0);      // never seen

  // The handle again (this thread's cache still names the old arena): it
  // grows from nothing, as the first call on it did.
  ASSERT_TRUE(arenas.Acquire(Key(0, 0), kMiB, "call", &lease).ok());
  ASSERT_NE(lease.base(), nullptr);
  lease.Reset();
  EXPECT_EQ(d.allocations, 4);
  const ScratchArenaStats again = arenas.Stats(Key(0, 0));
  EXPECT_EQ(again.capacity, 2 * kMiB);
  EXPECT_EQ(again.grows, 1);
  EXPECT_EQ(again.leases, 1);
  // The released slots serve new streams before anything is evicted.
  ASSERT_TRUE(arenas.Acquire(Key(0, 2), kMiB, "call", &lease).ok());
  lease.Reset();
  EXPECT_EQ(d.released_now, 0);
  EXPECT_EQ(arenas.Stats(Key(0, 1)).capacity, 4 * kMiB);
  EXPECT_EQ(d.live.size(), 3u);
}

TEST(ScratchArenasTest, ATableMadeAfterAnotherSharesNothingWithIt) {
  // The threads' caches name the first table's arenas, which are gone.
  for (int round = 0; round < 3; ++round) {
    FakeDevice d;
    auto arenas = std::make_unique<ScratchArenas>(Over(&d), 8);
    ScratchArenas::Lease lease;
    ASSERT_TRUE(arenas->Acquire(Key(0, 0), kMiB, "call", &lease).ok());
    lease.Reset();
    EXPECT_EQ(arenas->Stats(Key(0, 0)).leases, 1);
    EXPECT_EQ(d.allocations, 1);
  }
}

}  // namespace
}  // namespace dsa::attention::gpu
