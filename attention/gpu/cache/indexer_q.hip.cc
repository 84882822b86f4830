// The indexer Q preparation's kernels (IndexerQLaunch, launch.h): per
// (token, head) row, rope, the indexer's bf16 roundings and Hadamard
// rotation when asked, ue8m0 fp8 quantisation, and the head weight times
// the row's scale and weight_scale.
//
// Bytes bound it (per head 256 B read, 132 B written; the rope row is read
// once a token and stays in L1/L2 across its heads):
//   staged    (any shape; the Hadamard rotation): a group of 32 lanes a row,
//             staged in shared memory, staged_row.h's steps;
//   register  (head_dim 128, rope_dim 32/64/128, config.h's QRegister): 8
//             lanes a row, 16 dims a lane, 4 rows a group at once and two
//             passes in flight, rope partners by shuffle, 32-bit row
//             indices, no block barriers; the same arithmetic.
// heuristics.h picks one; the row loads never wait on the position loads.
#include <cmath>
#include <cstdint>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
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
// A step of both bodies.

// head_weights[t, h] = weights[t, h] * scale * weight_scale, each product
// rounded, as the CPU kernel computes it.
__device__ __forceinline__ void StoreHeadWeight(const IndexerQParams& p,
                                                int64_t t, int64_t h,
                                                float scale,
                                                float weight_scale) {
  const float w =
      LoadElement(p.weights, p.weights_type,
                  t * p.weights_token_stride + h * p.weights_head_stride);
  p.head_weights[t * p.head_weights_token_stride +
                 h * p.head_weights_head_stride] =
      __fmul_rn(__fmul_rn(w, scale), weight_scale);
}

// ---------------------------------------------------------------------------
// The staged body.

__global__ void __launch_bounds__(kThreads)
    IndexerQKernel(IndexerQParams p, Fp8Traits traits, int groups,
                   float weight_scale) {
  extern __shared__ float staged[];
  const int group = threadIdx.x / kLanes;
  const int lane = threadIdx.x % kLanes;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * groups + group;
  const int n = p.head_dim;
  float* y = staged + group * n;
  int64_t t = 0, h = 0, pos = -1;
  const bool in_range = group < groups && item < p.tokens * p.heads;
  if (in_range) {
    t = item / p.heads;
    h = item % p.heads;
    pos = p.positions[t * p.positions_stride];
  }
  const bool active = pos >= 0 && pos < p.max_position;
  if (in_range) {  // not waiting for the position
    const int esize = p.q_type == FloatFormat::kFloat32 ? 4 : 2;
    StageRow(static_cast<const char*>(p.q) +
                 (t * p.q_token_stride + h * p.q_head_stride) * esize,
             p.q_type, n, y, lane);
  }
  __syncthreads();
  if (active) {
    RopeShared(y, p.cos_sin_cache + pos * p.cos_sin_stride, p.rope_dim, p.rope,
               lane);
  }
  __syncthreads();
  RoundAndRotateShared(y, n, p.round_to_bf16, p.hadamard_rotation, active,
                       lane);
  __syncthreads();
  if (!active) return;
  const float scale =
      GroupScale(y, n, Fp8ScaleDivisorOf(traits, p.scale_divisor), lane);
  const float inv = 1.0f / scale;
  StoreCodes(y, n, inv, traits,
             p.q_fp8 + t * p.q_fp8_token_stride + h * p.q_fp8_head_stride,
             lane);
  if (lane == 0) StoreHeadWeight(p, t, h, scale, weight_scale);
}

// ---------------------------------------------------------------------------
// The register body: lane `sub` (0..7) of a row holds its dims
// 16 * sub .. 16 * sub + 15.

namespace {
constexpr int kDimsPerLane = QRegister::kDimsPerLane;  // 16
constexpr int kLanesPerRow = QRegister::kLanesPerRow;  // 8
}  // namespace

// v = row[16 * sub + 0:16] (16-byte loads when aligned).
__device__ __forceinline__ void Load16(const void* row, FloatFormat type,
                                       int sub, float v[kDimsPerLane]) {
  if (type == FloatFormat::kFloat32) {
    const float* r = static_cast<const float*>(row) + kDimsPerLane * sub;
    if ((reinterpret_cast<uintptr_t>(r) & 15) == 0) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 x = reinterpret_cast<const float4*>(r)[q];
        v[4 * q] = x.x;
        v[4 * q + 1] = x.y;
        v[4 * q + 2] = x.z;
        v[4 * q + 3] = x.w;
      }
    } else {
#pragma unroll
      for (int k = 0; k < kDimsPerLane; ++k) v[k] = r[k];
    }
  } else {
    const uint16_t* r = static_cast<const uint16_t*>(row) + kDimsPerLane * sub;
    if ((reinterpret_cast<uintptr_t>(r) & 15) == 0) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const uint4 x = reinterpret_cast<const uint4*>(r)[q];
        const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          v[8 * q + 2 * k] = Bf16ToFloat(static_cast<uint16_t>(w[k]));
          v[8 * q + 2 * k + 1] = Bf16ToFloat(static_cast<uint16_t>(w[k] >> 16));
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < kDimsPerLane; ++k) v[k] = Bf16ToFloat(r[k]);
    }
  }
}

// Rope of this lane's 16 dims at position `pos` (ApplyRope's arithmetic;
// -1: a row without a token, left as it is). Every lane of the group calls
// it: NeoX partners rope/2 dims apart are 1, 2 or 4 lanes away.
__device__ __forceinline__ void Rope16(const IndexerQParams& p, int64_t pos,
                                       int half, int e0,
                                       float v[kDimsPerLane]) {
  if (p.rope == RopeKind::kNeox) {
    const int distance = half / kDimsPerLane;
    float other[kDimsPerLane];
#pragma unroll
    for (int k = 0; k < kDimsPerLane; ++k) {
      other[k] = DSA_SHFL_XOR(v[k], distance, kLanes);
    }
    if (pos >= 0 && e0 < p.rope_dim) {
      const float* cs = p.cos_sin_cache + pos * p.cos_sin_stride;
      const bool first = e0 < half;
      const int i0 = first ? e0 : e0 - half;
#pragma unroll
      for (int k = 0; k < kDimsPerLane; ++k) {
        const float c = cs[i0 + k];
        const float s = cs[half + i0 + k];
        v[k] = first ? __fsub_rn(__fmul_rn(v[k], c), __fmul_rn(other[k], s))
                     : __fadd_rn(__fmul_rn(v[k], c), __fmul_rn(other[k], s));
      }
    }
  } else if (pos >= 0 && e0 < p.rope_dim) {
    const float* cs = p.cos_sin_cache + pos * p.cos_sin_stride;
#pragma unroll
    for (int k = 0; k < kDimsPerLane; k += 2) {
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

// The amax of the row over its 8 lanes (xor 4, 2, 1 stays within them).
// Every lane of the group calls it.
__device__ __forceinline__ float RowAmax16(const float v[kDimsPerLane]) {
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < kDimsPerLane; ++k) m = fmaxf(m, fabsf(v[k]));
#pragma unroll
  for (int o = kLanesPerRow / 2; o >= 1; o /= 2) {
    m = fmaxf(m, DSA_SHFL_XOR(m, o, kLanes));
  }
  return m;
}

// This lane's 16 codes fp8(v * inv) of row (t, h) of q_fp8: one 16-byte
// store when aligned.
__device__ __forceinline__ void StoreCodes16(const IndexerQParams& p,
                                             uint32_t t, uint32_t h, int sub,
                                             const float v[kDimsPerLane],
                                             float inv,
                                             const Fp8Traits& traits) {
  uint32_t w[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    w[q] = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      w[q] |= uint32_t{EncodeFp8(__fmul_rn(v[4 * q + k], inv), traits)}
              << (8 * k);
    }
  }
  uint8_t* out = p.q_fp8 + int64_t{t} * p.q_fp8_token_stride +
                 int64_t{h} * p.q_fp8_head_stride + kDimsPerLane * sub;
  if ((reinterpret_cast<uintptr_t>(out) & 15) == 0) {
    *reinterpret_cast<uint4*>(out) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        out[4 * q + k] = static_cast<uint8_t>(w[q] >> (8 * k));
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    IndexerQRegisterKernel(IndexerQParams p, Fp8Traits traits,
                           float weight_scale) {
  constexpr int kPasses = QRegister::kPasses;
  const int lane = threadIdx.x % kLanes;
  const int sub = lane % kLanesPerRow;   // 16 dims of the row
  const int slot = lane / kLanesPerRow;  // which of the 4 rows
  // At most 2^31 - 1 rows (heuristics.h): row indices fit 32 bits.
  const uint32_t group = static_cast<uint32_t>(
      (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes);
  const uint32_t items = static_cast<uint32_t>(p.tokens * p.heads);
  const uint32_t heads = static_cast<uint32_t>(p.heads);
  const int esize = p.q_type == FloatFormat::kFloat32 ? 4 : 2;
  float v[kPasses][kDimsPerLane];
  uint32_t t[kPasses], h[kPasses];
  int64_t pos[kPasses];
  // Every pass's load first, so they are in flight together.
#pragma unroll
  for (int j = 0; j < kPasses; ++j) {
    const uint32_t item = (group * kPasses + j) * QRegister::kRowsAtOnce + slot;
    pos[j] = -1;
    t[j] = h[j] = 0;
    if (item < items) {
      t[j] = item / heads;
      h[j] = item - t[j] * heads;
      pos[j] = p.positions[int64_t{t[j]} * p.positions_stride];
      // Not waiting for the position: the row's address does not need it.
      Load16(static_cast<const char*>(p.q) + (int64_t{t[j]} * p.q_token_stride +
                                              int64_t{h[j]} * p.q_head_stride) *
                                                 esize,
             p.q_type, sub, v[j]);
    }
    if (!(pos[j] >= 0 && pos[j] < p.max_position)) pos[j] = -1;
  }
  const int half = p.rope_dim / 2;
  const int e0 = kDimsPerLane * sub;
#pragma unroll
  for (int j = 0; j < kPasses; ++j) {
    // Every lane shuffles, rows without a token included.
    Rope16(p, pos[j], half, e0, v[j]);
    if (p.round_to_bf16) {
#pragma unroll
      for (int k = 0; k < kDimsPerLane; ++k) v[j][k] = RoundToBf16(v[j][k]);
    }
    const float m = RowAmax16(v[j]);
    if (pos[j] < 0) continue;
    const float scale =
        Ue8m0Scale(m, Fp8ScaleDivisorOf(traits, p.scale_divisor));
    StoreCodes16(p, t[j], h[j], sub, v[j], InversePow2(scale), traits);
    if (sub == 0) StoreHeadWeight(p, t[j], h[j], scale, weight_scale);
  }
}

}  // namespace cache

LaunchResult IndexerQLaunch(const IndexerQParams& p, void* stream) {
  cache::LaunchPlan plan;
  const LaunchResult planned = cache::PlanIndexerQ(p, &plan);
  if (!planned.ok() || plan.blocks == 0) return planned;
  // head_dim^-0.5 * heads^-0.5, rounded once, as the CPU kernel does.
  const float weight_scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim) *
                                         static_cast<double>(p.heads)));
  const Fp8Traits traits = cache::TraitsOf(p.encoding);
  if (plan.body == cache::Body::kRegister) {
    hipLaunchKernelGGL(cache::IndexerQRegisterKernel, dim3(plan.blocks),
                       dim3(plan.threads), 0, static_cast<hipStream_t>(stream),
                       p, traits, weight_scale);
  } else {
    hipLaunchKernelGGL(cache::IndexerQKernel, dim3(plan.blocks),
                       dim3(plan.threads), plan.shared_bytes,
                       static_cast<hipStream_t>(stream), p, traits, plan.groups,
                       weight_scale);
  }
  return CheckLaunch("indexer_q");
}

const char* IndexerQPath(const IndexerQParams& p) {
  return cache::BodyName(cache::ChooseIndexerQBody(p));
}

}  // namespace dsa::attention::gpu
