// The Walsh-Hadamard rotation of the indexer's roped query and key
// (DeepSeek's rotate_activation, SGLang's _get_q_k_bf16; vLLM has none):
// y = H y / sqrt(n) with H the n x n Sylvester-Hadamard matrix
// (H[i][j] = (-1)^popcount(i & j)), n a power of two. Orthonormal, so it
// changes scores only through the fp8 rounding that follows.
//
// The canonical order, which the CPU and the GPU kernels both follow so that
// their fp8 codes are equal to the bit: log2(n) butterfly stages of distance
// h = 1, 2, 4, ..., n/2; in a stage every pair (i, i + h) with bit h of i
// clear becomes (a + b, a - b) in float32; then every element is multiplied
// by HadamardScale(n). Each step is one IEEE operation, so the order of the
// pairs within a stage does not matter.
#ifndef DSA_ATTENTION_DTYPES_HADAMARD_H_
#define DSA_ATTENTION_DTYPES_HADAMARD_H_

#include <cmath>
#include <cstdint>

#include "attention/dtypes/host_device.h"

namespace dsa::attention {

// 1 / sqrt(n) rounded once to float32.
DSA_HOST_DEVICE inline float HadamardScale(int64_t n) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(n)));
}

// Host form: y[0:n] <- H y / sqrt(n) in the canonical order.
inline void HadamardRotate(float* y, int64_t n) {
  for (int64_t h = 1; h < n; h *= 2) {
    for (int64_t i = 0; i < n; ++i) {
      if ((i & h) != 0) continue;
      const float a = y[i];
      const float b = y[i + h];
      y[i] = a + b;
      y[i + h] = a - b;
    }
  }
  const float scale = HadamardScale(n);
  for (int64_t i = 0; i < n; ++i) y[i] *= scale;
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_DTYPES_HADAMARD_H_
