// Global -> shared memory copies of 16 bytes for the tiled kernels
// (gemm_bf16, dense_mha, sparse_mla): asynchronous (cp.async, completion
// tracked in commit groups) on NVIDIA sm_80 and later, so a kernel loads the
// next tile while it multiplies the current one; plain loads and stores
// elsewhere, where CopyAsyncCommit/CopyAsyncWait are no-ops and the copy has
// completed when the call returns. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_ASYNC_COPY_H_
#define DSA_ATTENTION_GPU_ASYNC_COPY_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"

namespace dsa::attention::gpu {

#if defined(DSA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define DSA_HAS_CP_ASYNC 1
#endif

// 16 bytes from `gmem` to `smem`, both 16-byte aligned.
__device__ __forceinline__ void CopyAsync16(void* smem, const void* gmem) {
#if defined(DSA_HAS_CP_ASYNC)
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(addr),
               "l"(gmem)
               : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}

#if defined(DSA_GPU_CUDA)
// cp.async to a shared-memory address (the form of kernels that compute
// their stage addresses as offsets); zeros and nothing read when `valid` is
// false. NVIDIA only; nothing is copied below sm_80, so only kernels that run
// on sm_80 and later use these.
__device__ __forceinline__ void CopyAsync16(uint32_t dst, const void* src,
                                            bool valid) {
#if defined(DSA_HAS_CP_ASYNC)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#endif
}
// The same 16-byte copy with an L2 cache policy (`policy`, from
// L2EvictLastPolicy) and a hint that the 256 bytes around the source are
// worth fetching into L2 (a gather that reads whole rows of a few hundred
// bytes, chunk by chunk).
__device__ __forceinline__ void CopyAsync16L2(uint32_t dst, const void* src,
                                              bool valid, uint64_t policy) {
#if defined(DSA_HAS_CP_ASYNC)
  asm volatile(
      "cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, "
      "%3;\n" ::"r"(dst),
      "l"(src), "r"(valid ? 16 : 0), "l"(policy)
      : "memory");
#endif
}
// An L2 policy that keeps what it loads over other lines (data that many
// blocks read again, such as a latent cache under top-k gathers).
__device__ __forceinline__ uint64_t L2EvictLastPolicy() {
  uint64_t policy = 0;
#if defined(DSA_HAS_CP_ASYNC)
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n"
               : "=l"(policy));
#endif
  return policy;
}
// Arrives on the mbarrier at shared address `bar` once every cp.async this
// thread issued so far has landed; the arrival is one of the barrier's
// expected count (noinc), so a barrier that producer threads complete this
// way is initialised with their number.
__device__ __forceinline__ void CopyAsyncArriveOnMbar(uint32_t bar) {
#if defined(DSA_HAS_CP_ASYNC)
  asm volatile(
      "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar)
      : "memory");
#endif
}
__device__ __forceinline__ void CopyAsync4(uint32_t dst, const void* src,
                                           bool valid) {
#if defined(DSA_HAS_CP_ASYNC)
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst),
               "l"(src), "r"(valid ? 4 : 0)
               : "memory");
#endif
}
#endif  // DSA_GPU_CUDA

// 16 bytes from `gmem` to `smem`, or 16 zero bytes and nothing read when
// `valid` is false (a key past the end of a row, an invalid top-k index).
__device__ __forceinline__ void CopyAsync16(void* smem, const void* gmem,
                                            bool valid) {
#if defined(DSA_HAS_CP_ASYNC)
  CopyAsync16(static_cast<uint32_t>(__cvta_generic_to_shared(smem)), gmem,
              valid);
#else
  *static_cast<uint4*>(smem) =
      valid ? *static_cast<const uint4*>(gmem) : make_uint4(0, 0, 0, 0);
#endif
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void CopyAsyncCommit() {
#if defined(DSA_HAS_CP_ASYNC)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `kPending` committed groups are still in flight (this
// thread's copies only: a barrier must follow before other threads read).
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
#if defined(DSA_HAS_CP_ASYNC)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Waits until every copy this thread issued has landed, committed or not.
__device__ __forceinline__ void CopyAsyncWaitAll() {
#if defined(DSA_HAS_CP_ASYNC)
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Makes one warp's shared-memory stores visible to the rest of that warp.
// On AMD it is a block barrier, so every thread of the block must call it.
__device__ __forceinline__ void SyncWarpShared() {
#if defined(DSA_GPU_CUDA)
  __syncwarp();
#else
  __syncthreads();
#endif
}

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_ASYNC_COPY_H_
