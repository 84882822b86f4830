// Hopper's producer / consumer plumbing for the warp-specialised kernels
// (indexer logits, dense prefill, sparse MLA): mbarriers and the rings of
// stages they guard (RingStage), the shared memory of a cluster's blocks,
// tensor-memory-accelerator (TMA) tile loads that complete on them, named
// barriers between warpgroups and the ping-pong of two math warpgroups
// (PingPong), and warpgroup register reallocation (cp.async on shared-memory
// addresses is in async_copy.h). NVIDIA only, device-compiler sources only.
//
// The mbarrier, TMA and register instructions exist on sm_90a alone
// (DSA_HAS_HOPPER_PIPELINE, the same condition as mma.h's warpgroup
// products): on other device passes those calls compile to nothing, so the
// kernels that use them are the ones that also issue warpgroup products and
// are launched on sm_90a devices only.
#ifndef DSA_ATTENTION_GPU_DEVICE_SM90_PIPELINE_H_
#define DSA_ATTENTION_GPU_DEVICE_SM90_PIPELINE_H_

#if defined(DSA_GPU_CUDA)

#include <cuda.h>  // CUtensorMap (the tensor-map encoder is the driver's)

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"

namespace dsa::attention::gpu {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DSA_HAS_HOPPER_PIPELINE 1
#endif

// The shared-memory address (the form every instruction below takes) of a
// pointer into shared memory.
__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// --- mbarriers: 8 bytes of shared memory each, 8-byte aligned.

// Expects `count` arrivals a phase.
__device__ __forceinline__ void MbarInit(uint32_t bar, int count) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar),
               "r"(count)
               : "memory");
#endif
}
// Makes the initialised barriers visible to the async proxy (TMA); one
// thread after its MbarInit calls, before the block synchronises.
__device__ __forceinline__ void MbarFenceInit() {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void MbarArrive(uint32_t bar) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar)
               : "memory");
#endif
}
// Arrives and adds `bytes` to the transfer count the phase waits for: the
// phase completes when every arrival is in and the TMA loads issued against
// the barrier have landed that many bytes.
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, uint32_t bytes) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
      "r"(bytes)
      : "memory");
#endif
}
// True once the phase of `parity` has completed (a fresh barrier counts the
// phase before its first as completed: parity 1).
__device__ __forceinline__ bool MbarTryWait(uint32_t bar, uint32_t parity) {
  uint32_t done = 1;
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
#endif
  return done != 0;
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  while (!MbarTryWait(bar, parity)) {
  }
}

// --- Clusters (the sparse MLA crossover's pair of blocks): this block's
// rank in its cluster; an address of this block's shared memory as the same
// place in block `rank`'s; a 16-byte store into a peer's shared memory that
// completes `bytes` on the peer's mbarrier `bar` (both shared::cluster
// addresses); an arrival on a peer's mbarrier, releasing this thread's
// reads and writes at cluster scope; a wait that acquires at cluster scope
// (what the peers' arrivals released); every thread of the cluster at a
// barrier.
__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t r = 0;
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}
__device__ __forceinline__ uint32_t ClusterAddress(uint32_t addr,
                                                   uint32_t rank) {
  uint32_t r = addr;
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(r)
               : "r"(addr), "r"(rank));
#endif
  return r;
}
__device__ __forceinline__ void StoreToPeer(uint32_t addr, const uint4& v,
                                            uint32_t bar) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], "
      "{%1, %2, %3, %4}, [%5];\n" ::"r"(addr),
      "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar)
      : "memory");
#endif
}
__device__ __forceinline__ void MbarArrivePeer(uint32_t bar) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(
          bar)
      : "memory");
#endif
}
__device__ __forceinline__ void MbarWaitCluster(uint32_t bar, uint32_t parity) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  uint32_t done = 0;
  while (done == 0) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], "
        "%2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
#endif
}
__device__ __forceinline__ void ClusterSync() {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
#endif
}

// --- Rings: kStages shared-memory stages, each with a "full" barrier (the
// consumers wait, the producer's loads complete it) and an "empty" one (the
// producer waits, the consumers arrive when done). Item i of the stream
// (counting from 0) uses stage i % kStages; the consumer waits for the full
// phase (i / kStages) & 1, the producer for the empty phase before it (a
// fresh barrier counts its previous phase as completed, so the producer's
// first pass through the ring does not wait).
template <int kStages, typename Index = int>
struct RingStage {
  static_assert(kStages > 0, "a ring has stages");
  __device__ __forceinline__ static int Stage(Index i) {
    return static_cast<int>(i % kStages);
  }
  __device__ __forceinline__ static uint32_t FullParity(Index i) {
    return static_cast<uint32_t>((i / kStages) & 1);
  }
  __device__ __forceinline__ static uint32_t EmptyParity(Index i) {
    return FullParity(i) ^ 1u;
  }
};

// --- TMA: one thread moves a whole box of a tensor described by a
// CUtensorMap (in kernel-parameter, constant or global memory) into shared
// memory; the bytes count against `bar` (MbarExpectTx). A box wholly outside
// the tensor lands as zeros and still counts its bytes. Coordinates are
// innermost first.
__device__ __forceinline__ void TmaLoad2d(uint32_t dst, const CUtensorMap* map,
                                          int32_t c0, int32_t c1,
                                          uint32_t bar) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_"
      "tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#endif
}
__device__ __forceinline__ void TmaLoad3d(uint32_t dst, const CUtensorMap* map,
                                          int32_t c0, int32_t c1, int32_t c2,
                                          uint32_t bar) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_"
      "tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
#endif
}
// Fetches a tensor map into the TMA unit's cache ahead of its first load.
__device__ __forceinline__ void TmaPrefetchMap(const CUtensorMap* map) {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile(
      "prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map))
      : "memory");
#endif
}

// --- Named barriers (ids 1..15; 0 is __syncthreads) over `kThreads`
// threads, a multiple of the warp size: Sync waits for all of them, Arrive
// counts this warp in without waiting.
template <int kThreads>
__device__ __forceinline__ void NamedBarrierSync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kThreads) : "memory");
}
template <int kThreads>
__device__ __forceinline__ void NamedBarrierArrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(kThreads) : "memory");
}

// Named barrier ids of the kernels (0 is __syncthreads).
enum NamedBarrierId : int {
  // PingPong's: math warpgroup g waits on kPingPongTurn + g.
  kPingPongTurn = 1,
};

// Two math warpgroups taking turns to issue their products, so that one
// group's softmax or epilogue runs under the other's products (CUTLASS's
// ordered math warpgroups; FlashAttention-3's ping-pong). Group 0 goes
// first: group 1 calls Start() once before its first round. In each round a
// group calls WaitTurn() before issuing and PassTurn() after; every
// PassTurn must be matched by the other group's WaitTurn, so the last group
// to finish skips its final PassTurn (or the other group drains it).
// kThreads: the threads of both groups.
template <int kThreads>
struct PingPong {
  int group;  // 0 or 1
  __device__ __forceinline__ void Start() const {
    if (group == 1) NamedBarrierArrive<kThreads>(kPingPongTurn);
  }
  __device__ __forceinline__ void WaitTurn() const {
    NamedBarrierSync<kThreads>(kPingPongTurn + group);
  }
  __device__ __forceinline__ void PassTurn() const {
    NamedBarrierArrive<kThreads>(kPingPongTurn + 1 - group);
  }
  // After the last round, when both groups passed every turn: group 0
  // takes the turn group 1 gave it at Start(), which leaves both barriers
  // balanced.
  __device__ __forceinline__ void Finish() const {
    if (group == 0) NamedBarrierSync<kThreads>(kPingPongTurn);
  }
};

// --- Warpgroup register reallocation: every thread of the warpgroup calls
// it; a producer gives registers up, the math warpgroups take them.
template <int kRegs>
__device__ __forceinline__ void WarpgroupRegsDecrease() {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void WarpgroupRegsIncrease() {
#if defined(DSA_HAS_HOPPER_PIPELINE)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

}  // namespace dsa::attention::gpu

#endif  // DSA_GPU_CUDA

#endif  // DSA_ATTENTION_GPU_DEVICE_SM90_PIPELINE_H_
