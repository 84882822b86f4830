// Collectives among the N ranks of one process (a thread per rank) over
// memory the host can read: the CPU platform's communicator, and the stand-in
// NCCL of the tests. Every rank calls the same collectives in the same order;
// each call returns once every rank has taken part.
//
//   - AllReduceSum: every rank's buffer becomes the element-wise sum of all
//     ranks' buffers, added in rank order in float32 and, for bf16, rounded
//     to nearest even once: the same bits on every rank and in every run.
//   - AllGather: every rank's `recv` becomes the ranks' `send` blocks in rank
//     order; `send` may be the rank's own block of `recv` (in place).
//
// A rank that never arrives (its step failed before the collective) must not
// hang the others: a call waits at most `timeout` and then fails naming the
// ranks that did not arrive, and Abort() makes every waiting and later call
// fail at once. After a failed or aborted call the group is broken: every
// later call fails (the ranks' buffers of that call may hold partial sums).
//
// Free of Abseil: it runs inside platform plugin shared objects.
#ifndef DSA_PLATFORM_HOST_COLLECTIVES_H_
#define DSA_PLATFORM_HOST_COLLECTIVES_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "attention/dtypes/bf16.h"

namespace dsa::platform {

enum class CollectiveElement { kFloat32, kBFloat16 };

class HostCollectiveGroup {
 public:
  explicit HostCollectiveGroup(
      int size, std::chrono::milliseconds timeout = std::chrono::seconds(300))
      : size_(size),
        timeout_(timeout),
        posted_(static_cast<size_t>(size), nullptr),
        arrived_(static_cast<size_t>(size), false) {}

  int size() const { return size_; }

  // Empty on success, else why the call failed.
  std::string AllReduceSum(int rank, void* buffer, size_t count,
                           CollectiveElement type) {
    std::string error = Arrive(rank, buffer);
    if (!error.empty()) return error;
    // Each rank sums one slice of every buffer: no two threads touch the
    // same element.
    const size_t per = (count + size_ - 1) / size_;
    const size_t begin = std::min(count, per * rank);
    const size_t end = std::min(count, begin + per);
    if (type == CollectiveElement::kFloat32) {
      for (size_t i = begin; i < end; ++i) {
        float sum = 0.0f;
        for (int r = 0; r < size_; ++r) {
          sum += static_cast<const float*>(posted_[r])[i];
        }
        for (int r = 0; r < size_; ++r)
          static_cast<float*>(posted_[r])[i] = sum;
      }
    } else {
      for (size_t i = begin; i < end; ++i) {
        float sum = 0.0f;
        for (int r = 0; r < size_; ++r) {
          sum += attention::Bf16ToFloat(
              static_cast<const uint16_t*>(posted_[r])[i]);
        }
        const uint16_t bits = attention::FloatToBf16(sum);
        for (int r = 0; r < size_; ++r) {
          static_cast<uint16_t*>(posted_[r])[i] = bits;
        }
      }
    }
    return Depart(rank);
  }

  std::string AllGather(int rank, const void* send, void* recv, size_t bytes) {
    std::string error = Arrive(rank, const_cast<void*>(send));
    if (!error.empty()) return error;
    for (int r = 0; r < size_; ++r) {
      char* to = static_cast<char*>(recv) + r * bytes;
      if (to != posted_[r] && bytes > 0) std::memcpy(to, posted_[r], bytes);
    }
    return Depart(rank);
  }

  // Every waiting and later call fails with `why`.
  void Abort(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = why.empty() ? "aborted" : why;
    cv_.notify_all();
  }

 private:
  // Phase one: every rank has posted its buffer.
  std::string Arrive(int rank, void* buffer) {
    std::unique_lock<std::mutex> lock(mu_);
    if (rank < 0 || rank >= size_) {
      return "rank " + std::to_string(rank) + " of a group of " +
             std::to_string(size_);
    }
    posted_[rank] = buffer;
    return Wait(lock, rank);
  }
  // Phase two: every rank is done with every buffer.
  std::string Depart(int rank) {
    std::unique_lock<std::mutex> lock(mu_);
    return Wait(lock, rank);
  }
  // A barrier with a generation count; fails on timeout or abort.
  std::string Wait(std::unique_lock<std::mutex>& lock, int rank) {
    if (!broken_.empty()) return broken_;
    const uint64_t generation = generation_;
    arrived_[rank] = true;
    if (++count_ == size_) {
      count_ = 0;
      std::fill(arrived_.begin(), arrived_.end(), false);
      ++generation_;
      cv_.notify_all();
      return "";
    }
    const bool done = cv_.wait_for(lock, timeout_, [&] {
      return generation_ != generation || !broken_.empty();
    });
    if (generation_ != generation) return "";
    if (done) return broken_;
    std::string missing;
    for (int r = 0; r < size_; ++r) {
      if (!arrived_[r])
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    broken_ = "timed out after " + std::to_string(timeout_.count()) +
              " ms waiting for rank(s) " + missing + " of " +
              std::to_string(size_);
    cv_.notify_all();
    return broken_;
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<void*> posted_;
  std::vector<bool> arrived_;
  int count_ = 0;
  uint64_t generation_ = 0;
  std::string broken_;
};

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_HOST_COLLECTIVES_H_
