#include "attention/gpu/device/scratch_arena.h"

#include <cstdio>
#include <limits>

namespace dsa::attention::gpu {

size_t ScratchLayout::Add(size_t bytes) {
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  const size_t offset = bytes_;
  if (bytes_ == kMax || bytes > kMax - bytes_ - (kAlignment - 1)) {
    bytes_ = kMax;
    return offset;
  }
  bytes_ = (bytes_ + bytes + kAlignment - 1) / kAlignment * kAlignment;
  return offset;
}

struct ScratchArenas::Arena {
  std::mutex mu;  // held by a lease
  // Changed under both table_mu_ and mu; read under either. A released
  // arena (ReleaseStream) serves no key until the table assigns it again.
  ScratchKey key;
  bool released = false;
  // Under mu.
  void* base = nullptr;
  ScratchArenaStats stats;
  // clock_ at the arena's last call, for eviction.
  std::atomic<uint64_t> last_use{0};
};

namespace {

std::atomic<uint64_t> g_next_generation{1};

// The arenas this thread used last, so that a call finds its own without the
// table's lock; an entry is checked against the arena's key under the
// arena's lock (it may have been evicted meanwhile).
struct CachedArena {
  uint64_t generation = 0;
  ScratchKey key;
  void* arena = nullptr;
};
constexpr int kCachedArenas = 4;
thread_local CachedArena t_cached[kCachedArenas];
thread_local int t_next_cached = 0;
// Leases this thread holds (0 or 1).
thread_local int t_leases = 0;

}  // namespace

ScratchArenas::ScratchArenas(const ScratchAllocator& allocator, int max_arenas)
    : allocator_(allocator),
      max_arenas_(max_arenas < 1 ? 1 : max_arenas),
      generation_(g_next_generation.fetch_add(1, std::memory_order_relaxed)) {}

ScratchArenas::~ScratchArenas() { ReleaseAll(); }

void ScratchArenas::Lease::Reset() {
  if (lock_.owns_lock()) {
    lock_.unlock();
    --t_leases;
  }
  lock_ = std::unique_lock<std::mutex>();
  base_ = nullptr;
}

ScratchArenas::Arena* ScratchArenas::FindOrAssign(
    const ScratchKey& key, std::unique_lock<std::mutex>* lock) {
  std::lock_guard<std::mutex> table(table_mu_);
  const uint64_t now = clock_.fetch_add(1, std::memory_order_relaxed) + 1;
  Arena* unused = nullptr;
  for (const std::unique_ptr<Arena>& a : arenas_) {
    if (a->released) {
      if (unused == nullptr) unused = a.get();
    } else if (a->key == key) {
      *lock = std::unique_lock<std::mutex>(a->mu);
      a->last_use.store(now, std::memory_order_relaxed);
      return a.get();
    }
  }
  if (unused != nullptr) {  // a released stream's arena, holding nothing
    *lock = std::unique_lock<std::mutex>(unused->mu);
    unused->key = key;
    unused->released = false;
    unused->last_use.store(now, std::memory_order_relaxed);
    return unused;
  }
  if (static_cast<int>(arenas_.size()) < max_arenas_) {
    arenas_.push_back(std::make_unique<Arena>());
    Arena* a = arenas_.back().get();
    *lock = std::unique_lock<std::mutex>(a->mu);
    a->key = key;
    a->last_use.store(now, std::memory_order_relaxed);
    return a;
  }
  // The arena used least recently serves the new stream, once the call that
  // may hold it is done and its device no longer reads its memory.
  Arena* victim = arenas_.front().get();
  for (const std::unique_ptr<Arena>& a : arenas_) {
    if (a->last_use.load(std::memory_order_relaxed) <
        victim->last_use.load(std::memory_order_relaxed)) {
      victim = a.get();
    }
  }
  *lock = std::unique_lock<std::mutex>(victim->mu);
  if (victim->base != nullptr) {
    allocator_.release_now(allocator_.context, victim->key, victim->base);
  }
  victim->key = key;
  victim->base = nullptr;
  victim->stats = ScratchArenaStats();
  victim->last_use.store(now, std::memory_order_relaxed);
  return victim;
}

LaunchResult ScratchArenas::Acquire(const ScratchKey& key, size_t bytes,
                                    const char* what, Lease* lease) {
  lease->Reset();
  if (t_leases > 0) {
    return Invalid(what,
                   "this thread already holds a call's scratch (a launcher "
                   "asked for scratch inside another's)");
  }
  std::unique_lock<std::mutex> lock;
  Arena* arena = nullptr;
  for (const CachedArena& c : t_cached) {
    if (c.generation == generation_ && c.key == key) {
      Arena* a = static_cast<Arena*>(c.arena);
      lock = std::unique_lock<std::mutex>(a->mu);
      if (!a->released && a->key == key) {
        arena = a;
        a->last_use.store(clock_.fetch_add(1, std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
      } else {
        lock.unlock();  // evicted or released since: ask the table
      }
      break;
    }
  }
  if (arena == nullptr) {
    arena = FindOrAssign(key, &lock);
    CachedArena& slot = t_cached[t_next_cached];
    t_next_cached = (t_next_cached + 1) % kCachedArenas;
    slot.generation = generation_;
    slot.key = key;
    slot.arena = arena;
  }
  if (bytes == 0) bytes = 1;
  if (arena->stats.capacity < bytes) {
    constexpr size_t kMax = std::numeric_limits<size_t>::max();
    if (bytes > kMax - (kGranularity - 1)) {
      LaunchResult r;
      r.code = LaunchCode::kOutOfMemory;
      std::snprintf(r.message, sizeof(r.message),
                    "%s: %zu bytes of scratch, more than any device holds",
                    what, bytes);
      return r;
    }
    const size_t grant =
        (bytes + kGranularity - 1) / kGranularity * kGranularity;
    void* block = nullptr;
    LaunchResult r =
        allocator_.allocate(allocator_.context, key, grant, what, &block);
    if (!r.ok()) return r;  // the arena as it was
    if (arena->base != nullptr) {
      allocator_.release_in_order(allocator_.context, key, arena->base);
    }
    arena->base = block;
    arena->stats.capacity = grant;
    ++arena->stats.grows;
  }
  ++arena->stats.leases;
  ++t_leases;
  lease->lock_ = std::move(lock);
  lease->base_ = static_cast<uint8_t*>(arena->base);
  return LaunchResult{};
}

ScratchArenaStats ScratchArenas::Stats(const ScratchKey& key) {
  std::lock_guard<std::mutex> table(table_mu_);
  for (const std::unique_ptr<Arena>& a : arenas_) {
    if (!a->released && a->key == key) {
      std::lock_guard<std::mutex> lock(a->mu);
      return a->stats;
    }
  }
  return ScratchArenaStats();
}

int ScratchArenas::ReleaseStream(const void* stream) {
  std::lock_guard<std::mutex> table(table_mu_);
  int released = 0;
  for (const std::unique_ptr<Arena>& a : arenas_) {
    if (a->released || a->key.stream != stream) continue;
    std::lock_guard<std::mutex> lock(a->mu);  // after a call that holds it
    if (a->base != nullptr) {
      allocator_.release_in_order(allocator_.context, a->key, a->base);
    }
    a->base = nullptr;
    a->stats = ScratchArenaStats();
    a->key = ScratchKey();
    a->released = true;
    a->last_use.store(0, std::memory_order_relaxed);
    ++released;
  }
  return released;
}

void ScratchArenas::ReleaseAll() {
  std::lock_guard<std::mutex> table(table_mu_);
  for (const std::unique_ptr<Arena>& a : arenas_) {
    std::lock_guard<std::mutex> lock(a->mu);
    if (a->base != nullptr) {
      allocator_.release_now(allocator_.context, a->key, a->base);
    }
    a->base = nullptr;
    a->stats.capacity = 0;
  }
}

}  // namespace dsa::attention::gpu
