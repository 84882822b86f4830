// The launchers of each logits kernel instance: declared here for
// logits_launch.hip.cc, defined in matrix_kernels.h / persistent_kernel.h
// and instantiated by instantiations/*.hip.cc (so that the kernels compile
// in parallel). Each runs one LogitsPlan (heuristics.h) on `stream` and returns
// the launch's result. Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_INDEXER_LAUNCHERS_H_
#define DSA_ATTENTION_GPU_INDEXER_LAUNCHERS_H_

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_result.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/indexer/heuristics.h"
#include "attention/gpu/indexer/params.h"

#if defined(DSA_GPU_CUDA)
#include <cuda.h>  // CUtensorMap
#endif

namespace dsa::attention::gpu::indexer {

// The FMA kernel (fma) and the matrix kernel (warp_mma or warpgroup_mma,
// whichever the device code holds), per fp8 encoding.
template <::dsa::gpu::Fp8Format F>
LaunchResult LaunchFma(const IndexerLogitsParams& p, const LogitsPlan& plan,
                       hipStream_t stream);
template <::dsa::gpu::Fp8Format F>
LaunchResult LaunchMatrix(const IndexerLogitsParams& p, const LogitsPlan& plan,
                          hipStream_t stream);

#if defined(DSA_GPU_CUDA)
// The persistent kernel (e4m3fn) for blocks of R rows, narrow or wide, with
// key tiles by TMA through key_map / scale_map or by cp.async (maps unused),
// and kGroups math warpgroups.
template <int R, bool kWide, bool kTma, int kGroups>
LaunchResult LaunchPersistent(const IndexerLogitsParams& p,
                              const LogitsPlan& plan,
                              const CUtensorMap& key_map,
                              const CUtensorMap& scale_map, int device,
                              hipStream_t stream);
#endif

}  // namespace dsa::attention::gpu::indexer

#endif  // DSA_ATTENTION_GPU_INDEXER_LAUNCHERS_H_
