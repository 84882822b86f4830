// RandomFill's values (attention/dense_ops.h), shared by the host (CPU
// kernel, LayerWeights::Random) and the GPU kernels so that weights drawn on
// any platform are the same bits.
#ifndef DSA_ATTENTION_DTYPES_RANDOM_FILL_H_
#define DSA_ATTENTION_DTYPES_RANDOM_FILL_H_

#include <cstdint>

#include "attention/dtypes/host_device.h"

namespace dsa::attention {

// RandomFill's uniform value in [-1, 1): 24 bits of a SplitMix64-style hash
// of (seed, stream, index), exact in fp32.
DSA_HOST_DEVICE inline float RandomUniform(uint64_t seed, uint64_t stream,
                                           uint64_t index) {
  uint64_t z =
      seed * 0x9e3779b97f4a7c15ull ^ (stream + 1) * 0xd1b54a32d192ed03ull;
  z += (index + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1p-23f - 1.0f;
}

// offset + scale * u, each operation rounded to fp32 on its own: device
// compilers contract a * b + c into one fma unless told not to.
DSA_HOST_DEVICE inline float RandomFillValue(uint64_t seed, uint64_t stream,
                                             uint64_t index, float scale,
                                             float offset) {
  const float u = RandomUniform(seed, stream, index);
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __fadd_rn(__fmul_rn(scale, u), offset);
#else
  volatile float product = scale * u;  // no contraction on any host compiler
  return product + offset;
#endif
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_DTYPES_RANDOM_FILL_H_
