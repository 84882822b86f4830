// Scratch device memory held across launcher calls: one grow-only arena per
// (device, stream), from which each call carves its intermediate buffers
// (the dense prefill's latent rows, decompressed K and V^T, the sparse MLA's
// latent tiles) at 256-byte aligned offsets of one allocation. A call that
// fits what its stream's arena holds makes no allocation and no free; one
// that needs more allocates the larger block first (a failure leaves the
// arena as it was and returns the allocator's error, naming the call), then
// gives the old block back in the stream's order, after the work already
// enqueued on it. So a run that starts with its largest call (a profile
// run at the largest step) never allocates again.
//
// Calls on one stream run in the order they are enqueued, so reusing the
// memory is safe once each call holds its arena from carving until its last
// kernel is enqueued (Lease): a second thread enqueueing on the same stream
// waits for that, and its kernels run after the first call's. A lease is
// held by one call at a time per thread (a launcher that holds one and asks
// again gets an error, never a deadlock).
//
// The arenas' table is bounded: past `max_arenas` streams, the one used
// least recently gives its memory back (after waiting for its device) and
// serves the new stream. The memory is given back when the stream is
// destroyed (ReleaseStream, which the platform's stream_destroy runs through
// platform/stream_release.h), when the table is destroyed (at plugin unload
// or process end) or by ReleaseAll.
//
// A CUDA graph captured over a call keeps the addresses of its stream's
// arena: replay it only while the arena has not grown (growing it while a
// stream is captured is refused by the device side, runtime.hip.cc).
//
// Plain C++ with the device calls behind ScratchAllocator, so that the
// bookkeeping is tested without a device (scratch_arena_test.cc); the
// process's arenas over the HIP/CUDA runtime are in runtime.h.
#ifndef DSA_ATTENTION_GPU_DEVICE_SCRATCH_ARENA_H_
#define DSA_ATTENTION_GPU_DEVICE_SCRATCH_ARENA_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu {

// Where a call's buffers sit in its one block of scratch: each at a multiple
// of kAlignment bytes from the block's start (itself so aligned).
class ScratchLayout {
 public:
  static constexpr size_t kAlignment = 256;
  // The offset of the next buffer of `bytes`. A layout whose sum does not
  // fit in size_t has bytes() == SIZE_MAX, which no allocator grants.
  size_t Add(size_t bytes);
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_ = 0;
};

// Which arena serves a call.
struct ScratchKey {
  int device = -1;
  const void* stream = nullptr;
  // Set for a stream handle that names another stream on each thread (the
  // per-thread default stream): the calling thread.
  const void* thread = nullptr;
  bool operator==(const ScratchKey& o) const {
    return device == o.device && stream == o.stream && thread == o.thread;
  }
};

// How the arenas get device memory and give it back. `context` is passed
// to each.
struct ScratchAllocator {
  // `bytes` at *ptr, usable by work enqueued on the key's stream from now
  // on; an error names `what` (out of memory is kOutOfMemory).
  LaunchResult (*allocate)(void* context, const ScratchKey& key, size_t bytes,
                           const char* what, void** ptr) = nullptr;
  // Gives `ptr` back once the work enqueued on the key's stream so far is
  // done (without waiting for it).
  void (*release_in_order)(void* context, const ScratchKey& key,
                           void* ptr) = nullptr;
  // Gives `ptr` back now, after waiting until nothing on the key's device
  // uses it (an arena evicted, the table destroyed).
  void (*release_now)(void* context, const ScratchKey& key,
                      void* ptr) = nullptr;
  void* context = nullptr;
};

struct ScratchArenaStats {
  size_t capacity = 0;  // bytes the arena holds
  int64_t grows = 0;    // allocations it made
  int64_t leases = 0;   // calls it served
};

class ScratchArenas {
 public:
  // Sizes are rounded up to this before allocating.
  static constexpr size_t kGranularity = size_t{2} << 20;

  ScratchArenas(const ScratchAllocator& allocator, int max_arenas);
  ~ScratchArenas();  // gives every arena's memory back (release_now)
  ScratchArenas(const ScratchArenas&) = delete;
  ScratchArenas& operator=(const ScratchArenas&) = delete;

  // One call's hold on its arena: the arena's memory is the call's until the
  // lease ends (destroyed or Reset, on the thread that acquired it).
  class Lease {
   public:
    Lease() = default;
    ~Lease() { Reset(); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    uint8_t* base() const { return base_; }
    void Reset();

   private:
    friend class ScratchArenas;
    std::unique_lock<std::mutex> lock_;
    uint8_t* base_ = nullptr;
  };

  // `bytes` (> 0) of the key's arena, growing it when it holds less.
  // Errors: the allocator's (the arena as before), kInvalidArgument when
  // this thread already holds a lease.
  LaunchResult Acquire(const ScratchKey& key, size_t bytes, const char* what,
                       Lease* lease);

  // The key's arena as it stands (zeros when it has none); waits for a call
  // that holds it.
  ScratchArenaStats Stats(const ScratchKey& key);
  // Gives every arena's memory back now (release_now); the next call on a
  // stream grows its arena again.
  void ReleaseAll();
  // Forgets the arenas of `stream` (every device and thread), giving their
  // memory back in the stream's order (release_in_order), once a call that
  // holds one is done: for a stream about to be destroyed, whose handle a
  // later stream may get. A later call on that handle starts from an empty
  // arena, as on a stream never seen. Returns how many arenas it released.
  int ReleaseStream(const void* stream);

 private:
  struct Arena;
  Arena* FindOrAssign(const ScratchKey& key,
                      std::unique_lock<std::mutex>* lock);

  const ScratchAllocator allocator_;
  const int max_arenas_;
  // Tells this table's entries in the threads' caches from those of a table
  // destroyed before (whose arenas are gone).
  const uint64_t generation_;
  // Ticks at each call: an arena's last use.
  std::atomic<uint64_t> clock_{0};
  std::mutex table_mu_;  // lookups that miss a thread's cache; eviction
  std::vector<std::unique_ptr<Arena>> arenas_;
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_SCRATCH_ARENA_H_
