// Global -> shared memory copies of 16 bytes for the tiled bf16 kernels
// (gemm_bf16, dense_mha): asynchronous (cp.async, completion tracked in
// commit groups) on NVIDIA sm_80 and later, so a kernel loads the next tile
// while it multiplies the current one; plain loads and stores elsewhere, where
// CopyAsyncCommit/CopyAsyncWait are no-ops and the copy has completed when
// the call returns. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_ASYNC_COPY_H_
#define DSA_ATTENTION_GPU_ASYNC_COPY_H_

#include <cstdint>

#include "platform/gpu/hip_compat.h"

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
