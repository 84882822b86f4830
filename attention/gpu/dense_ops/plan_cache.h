// Plans (a vendor GEMM's descriptors and chosen algorithm) shared by every
// thread, found without a lock: each thread keeps the plans it used last
// (kThreadEntries, compared whole by key; the scan starts at its last hit,
// so a step that cycles through its layer's few GEMM shapes finds each at
// the first probes), and only a miss there takes the table's mutex. The
// table is bounded: past `capacity` plans the one used least recently is
// dropped, so new shapes (every new batch size) cannot grow it without
// limit. A plan is destroyed (its descriptors freed) when neither the table
// nor any thread's cache holds it, so a plan another thread is using is
// never freed under it.
//
// Plain C++ (plan_cache_test.cc runs it without a device).
#ifndef DSA_ATTENTION_GPU_DENSE_OPS_PLAN_CACHE_H_
#define DSA_ATTENTION_GPU_DENSE_OPS_PLAN_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace dsa::attention::gpu {

struct PlanCacheStats {
  int64_t made = 0;        // plans made (table misses)
  int64_t table_hits = 0;  // thread-cache misses the table answered
  int64_t evicted = 0;     // plans dropped from the table
  size_t size = 0;         // plans in the table
};

template <class Key, class Plan, class Hash>
class PlanCache {
 public:
  static constexpr int kThreadEntries = 16;

  explicit PlanCache(size_t capacity)
      : capacity_(capacity < 1 ? 1 : capacity), generation_(NextGeneration()) {}
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // The plan of `key`, made by make() -> std::shared_ptr<const Plan> on a
  // miss (under the table's lock; null when it failed: nothing is kept and
  // the result is null). The pointer stays valid until this thread's next
  // Find on a cache of this type.
  template <class Make>
  const Plan* Find(const Key& key, Make&& make) {
    ThreadEntries& mine = Mine();
    for (int n = 0; n < kThreadEntries; ++n) {
      const int i = (mine.last + n) % kThreadEntries;
      Entry& e = mine.entries[i];
      if (e.node != nullptr && e.generation == generation_ && e.key == key) {
        e.node->last_use.store(clock_.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
        e.used = ++mine.tick;
        mine.last = i;
        return e.node->plan.get();
      }
    }
    std::shared_ptr<Node> node = FindInTable(key, make);
    if (node == nullptr) return nullptr;
    // Replace the thread's least recently used entry.
    int slot = 0;
    for (int i = 1; i < kThreadEntries; ++i) {
      if (mine.entries[i].used < mine.entries[slot].used) slot = i;
    }
    Entry& e = mine.entries[slot];
    e.generation = generation_;
    e.key = key;
    e.node = std::move(node);
    e.used = ++mine.tick;
    mine.last = slot;
    return e.node->plan.get();
  }

  PlanCacheStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    PlanCacheStats s = stats_;
    s.size = table_.size();
    return s;
  }

 private:
  struct Node {
    explicit Node(std::shared_ptr<const Plan> p) : plan(std::move(p)) {}
    std::shared_ptr<const Plan> plan;
    // clock_ at its last use by any thread, for eviction.
    std::atomic<uint64_t> last_use{0};
  };
  struct Entry {
    uint64_t generation = 0;
    Key key{};
    std::shared_ptr<Node> node;
    uint64_t used = 0;
  };
  struct ThreadEntries {
    Entry entries[kThreadEntries];
    int last = 0;
    uint64_t tick = 0;
  };

  static uint64_t NextGeneration() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }
  // One set per thread and cache type; entries of another instance (an
  // earlier one, destroyed) never match this one's generation.
  static ThreadEntries& Mine() {
    thread_local ThreadEntries entries;
    return entries;
  }

  template <class Make>
  std::shared_ptr<Node> FindInTable(const Key& key, Make& make) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t now = clock_.fetch_add(1, std::memory_order_relaxed) + 1;
    auto it = table_.find(key);
    if (it != table_.end()) {
      ++stats_.table_hits;
      it->second->last_use.store(now, std::memory_order_relaxed);
      return it->second;
    }
    std::shared_ptr<const Plan> made = make();
    if (made == nullptr) return nullptr;
    ++stats_.made;
    auto node = std::make_shared<Node>(std::move(made));
    node->last_use.store(now, std::memory_order_relaxed);
    if (table_.size() >= capacity_) {
      auto victim = table_.begin();
      for (auto i = table_.begin(); i != table_.end(); ++i) {
        if (i->second->last_use.load(std::memory_order_relaxed) <
            victim->second->last_use.load(std::memory_order_relaxed)) {
          victim = i;
        }
      }
      table_.erase(victim);
      ++stats_.evicted;
    }
    table_.emplace(key, node);
    return node;
  }

  const size_t capacity_;
  const uint64_t generation_;
  // Ticks at each thread-cache miss: a plan's last use.
  std::atomic<uint64_t> clock_{0};
  std::mutex mu_;  // thread-cache misses only
  std::unordered_map<Key, std::shared_ptr<Node>, Hash> table_;
  PlanCacheStats stats_;
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DENSE_OPS_PLAN_CACHE_H_
