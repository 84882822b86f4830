// A small parallel-for for the CPU kernels.
//
// The kernels run for milliseconds to seconds, so starting a few std::threads
// per call costs little next to the work and keeps the library free of a
// global pool (and of its shutdown-order problems inside a plugin shared
// object). Work is handed out in chunks from an atomic counter, which keeps
// threads busy when items differ in cost (causal rows, ragged windows).
#ifndef DSA_ATTENTION_CPU_PARALLEL_H_
#define DSA_ATTENTION_CPU_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace dsa::attention::cpu {

// Worker threads for a requested count: 0 means one per hardware thread.
inline int ResolveNumThreads(int32_t requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Calls fn(thread_index, begin, end) over disjoint chunks covering [0, n),
// on up to `num_threads` threads (the caller's thread is thread 0), with
// chunks of at least `grain` items. thread_index < the returned thread count
// identifies per-thread scratch. Returns when every chunk is done.
template <class Fn>
int ParallelFor(int64_t n, int num_threads, int64_t grain, Fn&& fn) {
  if (n <= 0) return 1;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_useful = (n + grain - 1) / grain;
  const int threads =
      static_cast<int>(std::min<int64_t>(std::max(num_threads, 1), max_useful));
  if (threads <= 1) {
    fn(0, int64_t{0}, n);
    return 1;
  }
  // About sixteen chunks per thread: causal rows grow in cost along the
  // range, so a few big chunks would leave the last one running alone; an
  // atomic increment per chunk costs nothing next to a chunk's work.
  const int64_t chunk = std::max<int64_t>(grain, n / (int64_t{threads} * 16));
  std::atomic<int64_t> next{0};
  auto worker = [&](int thread_index) {
    for (;;) {
      const int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
      if (begin >= n) return;
      fn(thread_index, begin, std::min(n, begin + chunk));
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker, i);
  worker(0);
  for (std::thread& t : pool) t.join();
  return threads;
}

// The number of threads ParallelFor will use for these arguments, so callers
// can size per-thread scratch before the call.
inline int ParallelForThreads(int64_t n, int num_threads, int64_t grain) {
  if (n <= 0) return 1;
  grain = std::max<int64_t>(grain, 1);
  return static_cast<int>(
      std::min<int64_t>(std::max(num_threads, 1), (n + grain - 1) / grain));
}

}  // namespace dsa::attention::cpu

#endif  // DSA_ATTENTION_CPU_PARALLEL_H_
