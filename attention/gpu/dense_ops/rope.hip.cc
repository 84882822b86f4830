// Rope in place, one thread per rotated pair in a grid-stride loop, each
// product rounded before the sum as the CPU kernel computes it.
#include <cstdint>

#include "attention/gpu/dense_ops/element_access.h"
#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace {

__global__ void RopeKernel(RopeParams p) {
  const int64_t half = p.rope_dim / 2;
  const int64_t n = p.tokens * p.heads * half;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < n; e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % half;
    const int64_t h = (e / half) % p.heads;
    const int64_t t = e / (half * p.heads);
    int64_t pos = p.positions[t * p.position_stride];
    pos = pos < 0 ? 0 : (pos >= p.max_position ? p.max_position - 1 : pos);
    const float c = p.cos_sin[pos * p.cos_sin_stride + i];
    const float s = p.cos_sin[pos * p.cos_sin_stride + half + i];
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
  hipLaunchKernelGGL(RopeKernel, dim3(GridFor(n, 256)), dim3(256), 0,
                     static_cast<hipStream_t>(stream), p);
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
