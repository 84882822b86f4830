// A small table of values a launcher derives from its arguments (TMA tensor
// maps over the scratch or a layer's cache), so that a call with the same
// arguments as a recent one reuses them instead of asking the driver again.
// Keys are compared whole (operator==): a value is only ever returned for
// arguments equal to those it was made from, so an entry can never be
// stale. Past kCapacity keys the least recently used entry is replaced.
//
// The lookup starts at the entry of the previous hit: a run of calls that
// cycles through its keys in order (a step's layers, each with its own
// cache) finds each at the first or second probe.
//
// Not thread-safe: each thread keeps its own (ThreadCache). Plain C++
// (tested in small_cache_test.cc).
#ifndef DSA_ATTENTION_GPU_DEVICE_SMALL_CACHE_H_
#define DSA_ATTENTION_GPU_DEVICE_SMALL_CACHE_H_

#include <cstdint>
#include <memory>

namespace dsa::attention::gpu {

struct SmallCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
};

template <class Key, class Value, int kCapacity>
class SmallCache {
 public:
  static_assert(kCapacity >= 1, "at least one entry");

  // The value for `key`: the cached one, or one made by make(Value*)
  // (returning false when it could not; nothing is kept then and the result
  // is null).
  template <class Make>
  const Value* Find(const Key& key, Make&& make) {
    ++tick_;
    for (int n = 0; n < size_; ++n) {
      const int i = (last_ + n) % size_;
      if (entries_[i].key == key) {
        entries_[i].used = tick_;
        last_ = i;
        ++stats_.hits;
        return &entries_[i].value;
      }
    }
    ++stats_.misses;
    Value value;
    if (!make(&value)) return nullptr;
    int slot = size_;
    if (size_ < kCapacity) {
      ++size_;
    } else {
      slot = 0;
      for (int i = 1; i < kCapacity; ++i) {
        if (entries_[i].used < entries_[slot].used) slot = i;
      }
    }
    entries_[slot].key = key;
    entries_[slot].value = value;
    entries_[slot].used = tick_;
    last_ = slot;
    return &entries_[slot].value;
  }

  const SmallCacheStats& stats() const { return stats_; }
  int size() const { return size_; }

 private:
  struct Entry {
    Key key;
    Value value;
    uint64_t used = 0;
  };
  Entry entries_[kCapacity];
  int size_ = 0;
  int last_ = 0;
  uint64_t tick_ = 0;
  SmallCacheStats stats_;
};

// The calling thread's cache of type Cache (one per type and thread, on the
// heap, freed when the thread ends).
template <class Cache>
Cache& ThreadCache() {
  thread_local std::unique_ptr<Cache> cache;
  if (cache == nullptr) cache = std::make_unique<Cache>();
  return *cache;
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_SMALL_CACHE_H_
