// The steps of the staged body, on a row a group has staged as floats in
// shared memory (any length, any rope pairing): the 16-byte staging loads,
// rope, the indexer's bf16 roundings and Hadamard rotation, the ue8m0 scale
// and the fp8 codes' stores. The K write, Q and the MLA cache write run
// them in their kernels (indexer_k_write.hip.cc, indexer_q.hip.cc,
// mla_cache_write.hip.cc). Lanes stride over the row; the caller syncs
// around the steps that read other lanes' elements. Device-compiler sources
// only.
//
// The steps are inline, not __forceinline__: both compilers inline them
// anyway, but forced, clang gives the AMD staged Q kernel 64 VGPRs instead
// of 38 and spills SGPRs on gfx90a.
#ifndef DSA_ATTENTION_GPU_CACHE_STAGED_ROW_H_
#define DSA_ATTENTION_GPU_CACHE_STAGED_ROW_H_

#include <cstdint>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "attention/dtypes/hadamard.h"
#include "attention/gpu/cache/config.h"
#include "attention/gpu/cache/params.h"
#include "attention/gpu/cache/row_group.h"
#include "attention/gpu/device/formats.h"
#include "attention/gpu/device/hip_compat.h"

namespace dsa::attention::gpu::cache {

// Stages n elements of `row` as floats in `dst` (shared), lanes striding.
__device__ inline void StageRow(const void* row, FloatFormat type, int n,
                                float* dst, int lane) {
  const int esize = type == FloatFormat::kFloat32 ? 4 : 2;
  const bool vec =
      (reinterpret_cast<uintptr_t>(row) & 15) == 0 && (n * esize) % 16 == 0;
  if (vec) {
    const uint4* src = static_cast<const uint4*>(row);
    const int units = n * esize / 16;
    for (int u = lane; u < units; u += kLanes) {
      const uint4 v = src[u];
      if (type == FloatFormat::kFloat32) {
        dst[4 * u + 0] = __uint_as_float(v.x);
        dst[4 * u + 1] = __uint_as_float(v.y);
        dst[4 * u + 2] = __uint_as_float(v.z);
        dst[4 * u + 3] = __uint_as_float(v.w);
      } else {
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          dst[8 * u + 2 * k] = Bf16ToFloat(static_cast<uint16_t>(w[k]));
          dst[8 * u + 2 * k + 1] =
              Bf16ToFloat(static_cast<uint16_t>(w[k] >> 16));
        }
      }
    }
  } else {
    for (int i = lane; i < n; i += kLanes) dst[i] = LoadElement(row, type, i);
  }
}

// Rope on y[0:rope_dim] at cos_sin row `cs` (cos then sin), as ApplyRope
// of the CPU kernels: x1 * c - x2 * s and x2 * c + x1 * s, each product
// rounded. Pairs are spread over the lanes; the caller syncs around it.
__device__ inline void RopeShared(float* y, const float* cs, int rope_dim,
                                  RopeKind rope, int lane) {
  const int half = rope_dim / 2;
  for (int i = lane; i < half; i += kLanes) {
    const float c = cs[i];
    const float s = cs[half + i];
    const int a = rope == RopeKind::kNeox ? i : 2 * i;
    const int b = rope == RopeKind::kNeox ? i + half : 2 * i + 1;
    const float x1 = y[a];
    const float x2 = y[b];
    y[a] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    y[b] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
  }
}

// The ue8m0 scale of y[0:n] (every lane gets it).
__device__ inline float GroupScale(const float* y, int n, float divisor,
                                   int lane) {
  float m = 0.0f;
  DSA_CACHE_FOR_OWN_ELEMENTS(i, n, lane) { m = fmaxf(m, fabsf(y[i])); }
  return Ue8m0Scale(GroupMax(m), divisor);
}

// The indexer numerics after rope (ops.h): y[0:n] rounded to bf16 when
// asked, then with `hadamard` rotated by H / sqrt(n) in the canonical order
// of attention/dtypes/hadamard.h and rounded again. Every thread of the
// block calls it (barriers); `active` groups do the work.
__device__ inline void RoundAndRotateShared(float* y, int n, bool round_to_bf16,
                                            bool hadamard, bool active,
                                            int lane) {
  if (active && round_to_bf16) {
    for (int i = lane; i < n; i += kLanes) y[i] = RoundToBf16(y[i]);
  }
  if (!hadamard) return;
  __syncthreads();
  for (int h = 1; h < n; h *= 2) {
    if (active) {
      for (int q = lane; q < n / 2; q += kLanes) {
        const int i = (q / h) * 2 * h + q % h;
        const float a = y[i];
        const float b = y[i + h];
        y[i] = __fadd_rn(a, b);
        y[i + h] = __fsub_rn(a, b);
      }
    }
    __syncthreads();
  }
  if (active) {
    const float scale = HadamardScale(n);
    for (int i = lane; i < n; i += kLanes) {
      const float v = __fmul_rn(y[i], scale);
      y[i] = round_to_bf16 ? RoundToBf16(v) : v;
    }
  }
}

// codes[0:n] = fp8(y * inv), 4 codes per lane and store when `codes` is
// 4-byte aligned and n a multiple of 4, else byte by byte.
__device__ inline void StoreCodes(const float* y, int n, float inv,
                                  const Fp8Traits& traits, uint8_t* codes,
                                  int lane) {
  if ((reinterpret_cast<uintptr_t>(codes) & 3) == 0 && n % 4 == 0) {
    uint32_t* out = reinterpret_cast<uint32_t*>(codes);
    for (int c = lane; c < n / 4; c += kLanes) {
      uint32_t word = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        word |= uint32_t{EncodeFp8(__fmul_rn(y[4 * c + k], inv), traits)}
                << (8 * k);
      }
      out[c] = word;
    }
  } else {
    for (int i = lane; i < n; i += kLanes) {
      codes[i] = EncodeFp8(__fmul_rn(y[i], inv), traits);
    }
  }
}

}  // namespace dsa::attention::gpu::cache

#endif  // DSA_ATTENTION_GPU_CACHE_STAGED_ROW_H_
