// What the current GPU and the device code loaded for it can do, asked once
// per device: the facts every family's heuristics choose a kernel body by
// (indexer/heuristics.h, sparse_mla/heuristics.h, dense_mha/heuristics.h).
// Plain C++, so that the heuristics are host code and their tests run
// without a device (they build DeviceFeatures by hand).
#ifndef DSA_ATTENTION_GPU_DEVICE_FEATURES_H_
#define DSA_ATTENTION_GPU_DEVICE_FEATURES_H_

#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu {

struct DeviceFeatures {
  int device = -1;
  int multiprocessors = 0;
  // Threads per warp (wavefront): 32 on NVIDIA, 64 on AMD CDNA; the
  // kDsaWarpSize the device code was built with.
  int warp_size = 0;
  // Shared memory one block may use once its kernel opts in (bytes).
  int max_shared_bytes_per_block = 0;
  // The device code loaded for this device was built for sm_90a: Hopper's
  // warpgroup products (wgmma), TMA and mbarriers, register reallocation.
  bool sm90a = false;
  // The driver encodes TMA tensor maps (cuTensorMapEncodeTiled).
  bool tensor_maps = false;
};

// The current device's features. The first call per device asks the runtime
// (attributes only: no allocation, copy or launch, so it is safe while a
// stream is captured into a graph); later calls answer from a cache.
LaunchResult CurrentDeviceFeatures(DeviceFeatures* features);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_FEATURES_H_
