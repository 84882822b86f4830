// The indexer K write's kernels (IndexerKWriteLaunch, launch.h): per token,
// LayerNorm, rope, the indexer's bf16 roundings and Hadamard rotation when
// asked, ue8m0 fp8 quantisation into the paged indexer K cache, and the
// clear of the token's top-k row to -1 (every token, padding included).
//
// Bytes bound it (per token at the presets' shapes: 256 B read, 132 B of
// cache and 8 KiB of top-k row written). One group of 32 lanes a token:
//   staged    (any head_dim; the Hadamard rotation): the group stages its row
//             in shared memory and runs staged_row.h's steps, the LayerNorm
//             statistics in the canonical order;
//   register  (head_dim 128, config.h's KWriteRegister): 4 dims a lane, the
//             canonical LayerNorm lanes, rope partners by shuffle, no block
//             barriers; the same arithmetic, operation for operation.
// heuristics.h picks one. The row's load never waits on the index loads
// (its address does not depend on them).
#include <cstdint>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "attention/dtypes/layer_norm.h"
#include "attention/gpu/cache/config.h"
#include "attention/gpu/cache/heuristics.h"
#include "attention/gpu/cache/launch.h"
#include "attention/gpu/cache/row_group.h"
#include "attention/gpu/cache/staged_row.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace cache {

// ---------------------------------------------------------------------------
// Steps of both bodies.

// Token t's row of k.
__device__ __forceinline__ const void* KRow(const IndexerKWriteParams& p,
                                            int64_t t) {
  return static_cast<const char*>(p.k) +
         t * p.k_row_stride * (p.k_type == FloatFormat::kFloat32 ? 4 : 2);
}

// Token t's top-k row set to -1 (16-byte stores when aligned).
__device__ __forceinline__ void ClearTopKRow(const IndexerKWriteParams& p,
                                             int64_t t, int lane) {
  if (p.topk <= 0) return;
  int32_t* row = p.topk_indices + t * p.topk_stride;
  if ((reinterpret_cast<uintptr_t>(row) & 15) == 0 && p.topk % 4 == 0) {
    int4* out = reinterpret_cast<int4*>(row);
    const int4 minus_one = make_int4(-1, -1, -1, -1);
    for (int u = lane; u < p.topk / 4; u += kLanes) out[u] = minus_one;
  } else {
    for (int j = lane; j < p.topk; j += kLanes) row[j] = -1;
  }
}

// ---------------------------------------------------------------------------
// The staged body.

// LayerNorm of the staged row y[0:n], in place, rounded to bf16 when asked:
// the statistics in the canonical order (layer_norm.h). Every lane of the
// group calls it (it shuffles); groups without a token (`active` false) sum
// nothing and discard the result.
__device__ __forceinline__ void LayerNormShared(const IndexerKWriteParams& p,
                                                float* y, int n, bool active,
                                                int lane) {
  double sum = 0.0;
  if (active) {
    DSA_CACHE_FOR_OWN_ELEMENTS(i, n, lane) {
      sum = __dadd_rn(sum, double{y[i]});
    }
  }
  sum = GroupSum(sum);
  const double mean = sum / static_cast<double>(n);
  double sq = 0.0;
  if (active) {
    DSA_CACHE_FOR_OWN_ELEMENTS(i, n, lane) {
      const double d = __dsub_rn(double{y[i]}, mean);
      sq = __dadd_rn(sq, __dmul_rn(d, d));
    }
  }
  sq = GroupSum(sq);
  if (!active) return;
  const float mean_f = static_cast<float>(mean);
  const float inv_std = LayerNormInvStd(sq, n, p.ln_eps);
  DSA_CACHE_FOR_OWN_ELEMENTS(i, n, lane) {
    const float w = LoadElement(p.ln_weight, p.ln_weight_type, i);
    const float b = LoadElement(p.ln_bias, p.ln_bias_type, i);
    y[i] =
        __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(y[i], mean_f), inv_std), w), b);
    if (p.round_to_bf16) y[i] = RoundToBf16(y[i]);
  }
}

__global__ void __launch_bounds__(kThreads)
    IndexerKWriteKernel(IndexerKWriteParams p, Fp8Traits traits, int groups) {
  extern __shared__ float staged[];
  const int group = threadIdx.x / kLanes;
  const int lane = threadIdx.x % kLanes;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * groups + group;
  const int n = p.head_dim;
  float* y = staged + group * n;
  const bool in_range = group < groups && t < p.tokens;

  // The top-k buffer clear: every token, padding included.
  if (in_range) ClearTopKRow(p, t, lane);

  int64_t slot = -1, pos = -1;
  if (in_range) {
    slot = p.slot_mapping[t * p.slot_mapping_stride];
    pos = p.positions[t * p.positions_stride];
  }
  // Padding, and (clamped) anything the CPU kernel would reject.
  const bool active = slot >= 0 && slot < p.num_blocks * p.block_size &&
                      pos >= 0 && pos < p.max_position;
  // The row is read whenever the token exists (its address does not depend
  // on the slot), so its load does not wait for the index loads.
  if (in_range) {
    StageRow(KRow(p, t), p.k_type, n, y, lane);
  }
  __syncthreads();

  LayerNormShared(p, y, n, active, lane);
  __syncthreads();
  if (active) {
    RopeShared(y, p.cos_sin_cache + pos * p.cos_sin_stride, p.rope_dim, p.rope,
               lane);
  }
  __syncthreads();
  RoundAndRotateShared(y, n, p.round_to_bf16, p.hadamard_rotation, active,
                       lane);
  __syncthreads();
  if (!active) return;  // no barrier follows
  const float scale =
      GroupScale(y, n, Fp8ScaleDivisorOf(traits, p.scale_divisor), lane);
  const float inv = 1.0f / scale;  // exact: scale is a power of two
  const int64_t block = slot / p.block_size;
  const int64_t offset = slot % p.block_size;
  uint8_t* base = p.k_cache + block * p.block_size * (int64_t{n} + 4);
  StoreCodes(y, n, inv, traits, base + offset * n, lane);
  if (lane == 0) {
    StoreFloatBytes(base + int64_t{p.block_size} * n + 4 * offset, scale);
  }
}

// ---------------------------------------------------------------------------
// The register body: lane l of a group holds dims 4l..4l+3 (config.h).

static_assert(KWriteRegister::kDimsPerLane == 4, "Load4, Rope4, Quantize4");

// v[0:4] = row[4 * lane + 0:4] (16-/8-byte load when aligned).
__device__ __forceinline__ void Load4(const void* row, FloatFormat type,
                                      int lane, float v[4]) {
  if (type == FloatFormat::kFloat32) {
    const float* r = static_cast<const float*>(row) + 4 * lane;
    if ((reinterpret_cast<uintptr_t>(r) & 15) == 0) {
      const float4 x = *reinterpret_cast<const float4*>(r);
      v[0] = x.x;
      v[1] = x.y;
      v[2] = x.z;
      v[3] = x.w;
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = r[k];
    }
  } else {
    const uint16_t* r = static_cast<const uint16_t*>(row) + 4 * lane;
    if ((reinterpret_cast<uintptr_t>(r) & 7) == 0) {
      const uint2 x = *reinterpret_cast<const uint2*>(r);
      v[0] = Bf16ToFloat(static_cast<uint16_t>(x.x));
      v[1] = Bf16ToFloat(static_cast<uint16_t>(x.x >> 16));
      v[2] = Bf16ToFloat(static_cast<uint16_t>(x.y));
      v[3] = Bf16ToFloat(static_cast<uint16_t>(x.y >> 16));
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = Bf16ToFloat(r[k]);
    }
  }
}

// LayerNorm of the group's 128 values, 4 a lane, rounded to bf16 when
// asked: the statistics in the canonical order (this lane's 4 dims in
// increasing order, then the xor butterfly). Every lane of the group calls
// it (it shuffles).
__device__ __forceinline__ void LayerNorm4(const IndexerKWriteParams& p,
                                           float v[4], int lane) {
  double sum = 0.0;
#pragma unroll
  for (int k = 0; k < 4; ++k) sum = __dadd_rn(sum, double{v[k]});
  sum = GroupSum(sum);
  const double mean = sum / static_cast<double>(kRegisterDim);
  double sq = 0.0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const double d = __dsub_rn(double{v[k]}, mean);
    sq = __dadd_rn(sq, __dmul_rn(d, d));
  }
  sq = GroupSum(sq);
  const float mean_f = static_cast<float>(mean);
  const float inv_std = LayerNormInvStd(sq, kRegisterDim, p.ln_eps);
  float w[4], b[4];
  Load4(p.ln_weight, p.ln_weight_type, lane, w);
  Load4(p.ln_bias, p.ln_bias_type, lane, b);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[k] = __fadd_rn(
        __fmul_rn(__fmul_rn(__fsub_rn(v[k], mean_f), inv_std), w[k]), b[k]);
    if (p.round_to_bf16) v[k] = RoundToBf16(v[k]);
  }
}

// Rope of dims 4*lane..4*lane+3 (ApplyRope's arithmetic). Every lane of the
// group must call it (it shuffles).
__device__ __forceinline__ void Rope4(float v[4], const float* cs, int rope_dim,
                                      RopeKind rope, int lane) {
  const int half = rope_dim / 2;
  const int e0 = 4 * lane;
  if (rope == RopeKind::kNeox) {
    const int distance = half / 4;  // lanes between a dim and its partner
    float other[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) other[k] = DSA_SHFL_XOR(v[k], distance, kLanes);
    if (e0 < rope_dim) {
      const bool first = e0 < half;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int i = first ? e0 + k : e0 + k - half;
        const float c = cs[i];
        const float s = cs[half + i];
        // first: (x1, x2) = (v, other); second: (x1, x2) = (other, v).
        v[k] = first ? __fsub_rn(__fmul_rn(v[k], c), __fmul_rn(other[k], s))
                     : __fadd_rn(__fmul_rn(v[k], c), __fmul_rn(other[k], s));
      }
    }
  } else if (e0 < rope_dim) {
#pragma unroll
    for (int k = 0; k < 4; k += 2) {
      const int i = (e0 + k) / 2;
      const float c = cs[i];
      const float s = cs[half + i];
      const float x1 = v[k];
      const float x2 = v[k + 1];
      v[k] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
      v[k + 1] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
    }
  }
}

// The ue8m0 scale of the group's 128 values and their 4 codes per lane,
// stored at codes + 4 * lane; returns the scale.
__device__ __forceinline__ float Quantize4(const float v[4],
                                           const Fp8Traits& traits,
                                           float divisor, uint8_t* codes,
                                           int lane) {
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) m = fmaxf(m, fabsf(v[k]));
  const float scale = Ue8m0Scale(GroupMax(m), divisor);
  const float inv = InversePow2(scale);
  uint8_t c[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) c[k] = EncodeFp8(__fmul_rn(v[k], inv), traits);
  uint8_t* out = codes + 4 * lane;
  if ((reinterpret_cast<uintptr_t>(out) & 3) == 0) {
    *reinterpret_cast<uint32_t*>(out) = uint32_t{c[0]} | (uint32_t{c[1]} << 8) |
                                        (uint32_t{c[2]} << 16) |
                                        (uint32_t{c[3]} << 24);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) out[k] = c[k];
  }
  return scale;
}

__global__ void __launch_bounds__(kThreads)
    IndexerKWriteRegisterKernel(IndexerKWriteParams p, Fp8Traits traits) {
  const int lane = threadIdx.x % kLanes;
  const int64_t t =
      (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
  if (t >= p.tokens) return;  // whole groups only: no barrier follows
  const int64_t slot = p.slot_mapping[t * p.slot_mapping_stride];
  const int64_t pos = p.positions[t * p.positions_stride];
  const bool active = slot >= 0 && slot < p.num_blocks * p.block_size &&
                      pos >= 0 && pos < p.max_position;
  // The row's load does not wait for the slot and position.
  float v[4];
  Load4(KRow(p, t), p.k_type, lane, v);
  // The top-k buffer clear (every token) while the row is in flight.
  ClearTopKRow(p, t, lane);
  if (!active) return;
  LayerNorm4(p, v, lane);
  Rope4(v, p.cos_sin_cache + pos * p.cos_sin_stride, p.rope_dim, p.rope, lane);
  if (p.round_to_bf16) {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = RoundToBf16(v[k]);
  }
  const int64_t block = slot / p.block_size;
  const int64_t offset = slot % p.block_size;
  uint8_t* base = p.k_cache + block * p.block_size * int64_t{kRegisterDim + 4};
  const float scale =
      Quantize4(v, traits, Fp8ScaleDivisorOf(traits, p.scale_divisor),
                base + offset * kRegisterDim, lane);
  if (lane == 0) {
    StoreFloatBytes(base + int64_t{p.block_size} * kRegisterDim + 4 * offset,
                    scale);
  }
}

}  // namespace cache

LaunchResult IndexerKWriteLaunch(const IndexerKWriteParams& p, void* stream) {
  cache::LaunchPlan plan;
  const LaunchResult planned = cache::PlanIndexerKWrite(p, &plan);
  if (!planned.ok() || plan.blocks == 0) return planned;
  const Fp8Traits traits = cache::TraitsOf(p.encoding);
  if (plan.body == cache::Body::kRegister) {
    hipLaunchKernelGGL(cache::IndexerKWriteRegisterKernel, dim3(plan.blocks),
                       dim3(plan.threads), 0, static_cast<hipStream_t>(stream),
                       p, traits);
  } else {
    hipLaunchKernelGGL(cache::IndexerKWriteKernel, dim3(plan.blocks),
                       dim3(plan.threads), plan.shared_bytes,
                       static_cast<hipStream_t>(stream), p, traits,
                       plan.groups);
  }
  return CheckLaunch("indexer_k_write");
}

const char* IndexerKWritePath(const IndexerKWriteParams& p) {
  return cache::BodyName(cache::ChooseIndexerKWriteBody(p));
}

}  // namespace dsa::attention::gpu
