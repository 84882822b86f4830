// What a kernel library keeps per stream (scratch arenas, a vendor library's
// workspace), given back when the platform destroys that stream.
//
// The GPU kernels key such state by the stream's handle. A handle is an
// address, and the driver hands a destroyed stream's address to a later
// stream, which would then find the dead stream's state: memory never given
// back, and a new owner that allocates less than a fresh stream does. So a
// library that keys state by stream adds a hook here (once, when it first
// makes such state), and the CUDA and ROCm platforms' stream_destroy runs
// every hook with the stream, before destroying it: a hook may still queue
// work on the stream (a stream-ordered free) or wait for it.
//
// Process-wide within one linked image (a platform plugin's shared object
// carries its platform and its kernels, so both see the one table). Plain C++
// without Abseil, as the plugins need.
#ifndef DSA_PLATFORM_STREAM_RELEASE_H_
#define DSA_PLATFORM_STREAM_RELEASE_H_

namespace dsa::platform {

// Gives back what the library keeps for `stream` (never NULL). Must not
// fail: it reports nothing, and the stream is destroyed after it either way.
using StreamReleaseHook = void (*)(void* stream);

// At most this many hooks; adding one more returns false (and adds nothing).
inline constexpr int kMaxStreamReleaseHooks = 8;

// Adds `hook` (not NULL). Adding one already added is a no-op; true either
// way. Thread-safe.
bool AddStreamReleaseHook(StreamReleaseHook hook);

// Runs every hook added so far with `stream`, in the order they were added.
// Thread-safe; called by a platform's stream_destroy.
void RunStreamReleaseHooks(void* stream);

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_STREAM_RELEASE_H_
