// What the sparse MLA kernels' tests build their inputs from (kernels_test.cc,
// gather_kernels_test.cc): bf16 rounding, data in the launcher's float
// formats, a paged block table over shuffled pages. Test-only.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_TEST_INPUTS_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_TEST_INPUTS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "attention/gpu/sparse_mla/launch.h"

namespace dsa::attention::gpu::sparse_mla_test {

#if defined(DSA_GPU_ROCM) || defined(DSA_GPU_CUDA)
inline constexpr bool kBuilt = true;
#else
inline constexpr bool kBuilt = false;
#endif

inline uint16_t Bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float Bf16Float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Float data in the launcher's format; `values` is rounded in place to what
// the kernel reads.
inline std::vector<uint8_t> Encode(std::vector<float>& values, FloatFormat f) {
  std::vector<uint8_t> bytes;
  if (f == FloatFormat::kFloat32) {
    bytes.resize(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  bytes.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t b = Bf16Bits(values[i]);
    values[i] = Bf16Float(b);
    std::memcpy(bytes.data() + 2 * i, &b, 2);
  }
  return bytes;
}

// A paged block table: each of `requests` rows, `table_stride` wide, names
// `max_blocks` pages drawn without repeats from [0, num_blocks) in shuffled
// order; the columns past them hold -7 (never read: past every length).
inline std::vector<int32_t> ShuffledBlockTable(int requests, int32_t max_blocks,
                                               int32_t table_stride,
                                               int64_t num_blocks,
                                               std::mt19937& rng) {
  std::vector<int32_t> pages(num_blocks);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  std::vector<int32_t> table(requests * table_stride, -7);
  for (int r = 0; r < requests; ++r) {
    for (int b = 0; b < max_blocks; ++b) {
      table[r * table_stride + b] = pages[r * max_blocks + b];
    }
  }
  return table;
}

}  // namespace dsa::attention::gpu::sparse_mla_test

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_TEST_INPUTS_H_
