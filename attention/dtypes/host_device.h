// Marks the numeric helpers of attention/dtypes as callable from both host
// code and GPU device code, so the CPU kernels and the later HIP kernels
// (compiled by hipcc, or by nvcc through attention/gpu/device/hip_compat.h)
// share one definition of every conversion and cannot drift apart.
#ifndef DSA_ATTENTION_DTYPES_HOST_DEVICE_H_
#define DSA_ATTENTION_DTYPES_HOST_DEVICE_H_

#include <cstdint>
#include <cstring>

#if defined(__HIPCC__) || defined(__CUDACC__)
#define DSA_HOST_DEVICE __host__ __device__
#else
#define DSA_HOST_DEVICE
#endif

namespace dsa::attention {

// std::bit_cast is C++20; memcpy of a scalar compiles to a register move on
// every compiler we use, host and device.
template <class To, class From>
DSA_HOST_DEVICE inline To BitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "BitCast needs equal sizes");
  To to;
#if defined(__HIP_DEVICE_COMPILE__)
  // HIP 5.2's device pass has no std::memcpy; the builtin is the same.
  __builtin_memcpy(&to, &from, sizeof(To));
#else
  std::memcpy(&to, &from, sizeof(To));
#endif
  return to;
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_DTYPES_HOST_DEVICE_H_
