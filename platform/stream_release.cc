#include "platform/stream_release.h"

#include <atomic>
#include <mutex>

namespace dsa::platform {
namespace {

// Slots fill in order and are never cleared: a reader sees a prefix of
// set slots without a lock.
std::atomic<StreamReleaseHook> g_hooks[kMaxStreamReleaseHooks];
std::mutex g_add_mu;

}  // namespace

bool AddStreamReleaseHook(StreamReleaseHook hook) {
  if (hook == nullptr) return false;
  std::lock_guard<std::mutex> lock(g_add_mu);
  for (std::atomic<StreamReleaseHook>& slot : g_hooks) {
    const StreamReleaseHook h = slot.load(std::memory_order_relaxed);
    if (h == hook) return true;
    if (h == nullptr) {
      slot.store(hook, std::memory_order_release);
      return true;
    }
  }
  return false;
}

void RunStreamReleaseHooks(void* stream) {
  if (stream == nullptr) return;
  for (std::atomic<StreamReleaseHook>& slot : g_hooks) {
    const StreamReleaseHook h = slot.load(std::memory_order_acquire);
    if (h == nullptr) return;
    h(stream);
  }
}

}  // namespace dsa::platform
