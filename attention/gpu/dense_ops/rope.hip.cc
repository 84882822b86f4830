// Rope in place, one thread per rotated pair, each product rounded before
// the sum as the CPU kernel computes it.
#include <cstdint>

#include "attention/gpu/dense_ops/element_access.h"
#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace {

// blockDim.y tokens a block (grid-stride over tokens), blockDim.x threads
// over a token's heads * rope_dim / 2 pairs: 32-bit index arithmetic, one
// position and rope-table row a token.
__global__ void RopeKernel(RopeParams p) {
  const int half = static_cast<int>(p.rope_dim / 2);
  const int pairs = static_cast<int>(p.heads) * half;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
       t < p.tokens; t += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    int64_t pos = p.positions[t * p.position_stride];
    pos = pos < 0 ? 0 : (pos >= p.max_position ? p.max_position - 1 : pos);
    const float* cs = p.cos_sin + pos * p.cos_sin_stride;
    for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
      const int h = j / half, i = j - h * half;
      const float c = cs[i];
      const float s = cs[half + i];
      const int64_t base = t * p.token_stride + h * p.head_stride;
      const int64_t ia = base + (p.neox ? i : 2 * i);
      const int64_t ib = base + (p.neox ? i + half : 2 * i + 1);
      const float x1 = LoadF(p.x, p.type, ia);
      const float x2 = LoadF(p.x, p.type, ib);
      // The CPU kernel's expression, each product rounded before the sum.
      StoreF(p.x, p.type, ia, __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
      StoreF(p.x, p.type, ib, __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
    }
  }
}

}  // namespace

LaunchResult RopeLaunch(const RopeParams& p, void* stream) {
  constexpr const char* op = "rope";
  if (p.tokens < 0 || p.heads < 0 || p.rope_dim < 0 || p.rope_dim % 2 != 0) {
    return Invalid(op, "bad sizes");
  }
  const int64_t n = p.tokens * p.heads * (p.rope_dim / 2);
  if (n == 0) return LaunchResult();
  if (p.x == nullptr || p.positions == nullptr || p.cos_sin == nullptr ||
      p.max_position < 1) {
    return Invalid(op, "a device pointer is null or the rope table is empty");
  }
  if (p.heads * (p.rope_dim / 2) > 0x7fffffff) {
    return Invalid(op, "%lld heads of %lld dims are too many for one launch",
                   static_cast<long long>(p.heads),
                   static_cast<long long>(p.rope_dim));
  }
  // Threads over a token's pairs: a power of two, at least their number, up
  // to 256; the rest of the 256 over tokens.
  const int64_t pairs = p.heads * (p.rope_dim / 2);
  unsigned threads_x = 1;
  while (threads_x < 256 && threads_x < pairs) threads_x *= 2;
  const unsigned threads_y = 256 / threads_x;
  const int64_t blocks = (p.tokens + threads_y - 1) / threads_y;
  hipLaunchKernelGGL(
      RopeKernel, dim3(static_cast<unsigned>(blocks < 65535 ? blocks : 65535)),
      dim3(threads_x, threads_y), 0, static_cast<hipStream_t>(stream), p);
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
