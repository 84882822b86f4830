// What the current GPU and the device code loaded for it can do, asked once
// per device: the facts every family's heuristics choose a kernel body by
// (indexer/heuristics.h, sparse_mla/heuristics.h, dense_mha/heuristics.h).
// Plain C++, so that the heuristics are host code and their tests run
// without a device (they build DeviceFeatures by hand).
#ifndef DSA_ATTENTION_GPU_DEVICE_FEATURES_H_
#define DSA_ATTENTION_GPU_DEVICE_FEATURES_H_

#include <cstring>
#include <initializer_list>

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
  // A kernel may be launched after its prior grid (programmatic dependent
  // launch, device/dependent_launch.h): CUDA with device code built for
  // sm_90a, whose kernels hold the grid-dependency controls.
  bool dependent_launch = false;
};

// How a launcher orders its kernel after the work before it on the stream:
// kAuto lets the heuristics choose (after the prior grid wherever the device
// has dependent launch), kStream is plain stream order, kAfterPrior the
// programmatic dependent launch of device/dependent_launch.h. Tests and
// benchmarks name one to compare them; the op layer passes kAuto.
enum class LaunchOrder : int { kAuto = 0, kStream, kAfterPrior };

// kOk and *after_prior for `asked` on a device of `features`, or
// kInvalidArgument from `op` where kAfterPrior is asked of a device without
// dependent launch.
inline LaunchResult ResolveLaunchOrder(LaunchOrder asked,
                                       const DeviceFeatures& features,
                                       const char* op, bool* after_prior) {
  *after_prior = false;
  switch (asked) {
    case LaunchOrder::kAuto:
      *after_prior = features.dependent_launch;
      return LaunchResult{};
    case LaunchOrder::kStream:
      return LaunchResult{};
    case LaunchOrder::kAfterPrior:
      if (!features.dependent_launch) {
        return Invalid(op,
                       "a launch after the prior grid was asked for, and this "
                       "device's code has no grid-dependency control (it "
                       "needs CUDA device code built for sm_90a)");
      }
      *after_prior = true;
      return LaunchResult{};
  }
  return Invalid(op, "launch order %d is not one of auto, stream, after_prior",
                 static_cast<int>(asked));
}

// "auto", "stream", "after_prior", and back (false for an unknown name).
inline const char* LaunchOrderName(LaunchOrder order) {
  switch (order) {
    case LaunchOrder::kAuto:
      return "auto";
    case LaunchOrder::kStream:
      return "stream";
    case LaunchOrder::kAfterPrior:
      return "after_prior";
  }
  return "unknown";
}
inline bool ParseLaunchOrder(const char* name, LaunchOrder* order) {
  for (LaunchOrder o :
       {LaunchOrder::kAuto, LaunchOrder::kStream, LaunchOrder::kAfterPrior}) {
    if (std::strcmp(name, LaunchOrderName(o)) == 0) {
      *order = o;
      return true;
    }
  }
  return false;
}

// The current device's features. The first call per device asks the runtime
// (attributes only: no allocation, copy or launch, so it is safe while a
// stream is captured into a graph); later calls answer from a cache.
LaunchResult CurrentDeviceFeatures(DeviceFeatures* features);

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_FEATURES_H_
