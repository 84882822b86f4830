// Device memory, copies and event timing behind plain C++ functions, so that
// tests, benchmarks and the op kernels, built by the host compiler, need no
// GPU runtime headers. Each returns a LaunchResult; in a build without a GPU
// backend every call answers kNotBuilt (runtime_unbuilt.cc).
#ifndef DSA_ATTENTION_GPU_DEVICE_RUNTIME_H_
#define DSA_ATTENTION_GPU_DEVICE_RUNTIME_H_

#include <cstddef>

#include "attention/gpu/device/launch_result.h"
#include "attention/gpu/device/scratch_arena.h"

namespace dsa::attention::gpu {

LaunchResult DeviceMalloc(void** ptr, size_t bytes);
LaunchResult DeviceFree(void* ptr);
LaunchResult CopyToDevice(void* dst, const void* src, size_t bytes);
LaunchResult CopyToHost(void* dst, const void* src, size_t bytes);
LaunchResult DeviceMemset(void* dst, int byte, size_t bytes);
LaunchResult DeviceSynchronize();
// Waits for the work queued on `stream` (not a fault site: for teardown).
LaunchResult StreamSynchronize(void* stream);
// `bytes` (at least 1) of device memory from the runtime's stream-ordered
// pool, usable by work enqueued on `stream` until DeviceFreeAsync gives it
// back on the same stream (host code's StreamScratch, device/
// stream_scratch.h). A fault site (kStreamAlloc).
LaunchResult DeviceMallocAsync(void** ptr, size_t bytes, void* stream);
LaunchResult DeviceFreeAsync(void* ptr, void* stream);
// `bytes` from device `src` to host `dst` in stream order, then waits for
// the stream.
LaunchResult CopyToHostOnStream(void* dst, const void* src, size_t bytes,
                                void* stream);
// Milliseconds per call of `fn(arg)` on the default stream: `warmup` untimed
// calls, then the median over `iters` calls each timed by device events.
LaunchResult TimeMedianMs(LaunchResult (*fn)(void*), void* arg, int warmup,
                          int iters, float* median_ms);
// Milliseconds per call with `iters` calls enqueued back to back between
// two device events (after `warmup` untimed calls): the device's time per
// call where the host issues faster than the device runs, else the host's.
LaunchResult TimeQueuedMs(LaunchResult (*fn)(void*), void* arg, int warmup,
                          int iters, float* ms_per_call);
// "cuda", "rocm" or "none".
const char* GpuBackend();

// The process's scratch arenas (scratch_arena.h) over the runtime's
// stream-ordered allocator: `bytes` of scratch for one launcher call on
// `stream` of `device` (the current device), held until `lease` ends. An
// arena grows on its stream (hipMallocAsync; a fault site of kind
// kStreamAlloc: a failure names `what` and the bytes and leaves the arena as
// it was) and gives an outgrown block back there (hipFreeAsync). No scratch
// is handed out while the stream is captured into a graph
// (kInvalidArgument): the graph would keep the block a later growth frees.
// Arenas are given back at process end or plugin unload, after waiting for
// their device.
LaunchResult AcquireStreamScratch(void* stream, int device, size_t bytes,
                                  const char* what,
                                  ScratchArenas::Lease* lease);
// The arena of `stream` on the current device, as the calling thread's
// launchers see it (for tests and benchmarks).
LaunchResult StreamScratchStats(void* stream, ScratchArenaStats* stats);
// Gives every arena's memory back now (waiting for their devices).
void ReleaseStreamScratch();

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_RUNTIME_H_
