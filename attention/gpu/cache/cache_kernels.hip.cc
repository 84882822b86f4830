// The indexer K write, indexer Q and MLA latent cache write on the GPU; see
// launch.h.
//
// Bytes, not FLOPs, bound all three (a few float ops per byte). Per token at
// DeepSeek-V3.2 / GLM-5.x shapes (bf16 inputs, head_dim 128, topk 2048):
//   K write   256 B read, 132 B cache written, 8 KiB of -1 written to the
//             top-k buffer (the bulk of it), 16 B index reads, 256 B rope row;
//   Q         per head 256 B read, 132 B written (+ weights), 256 B rope row
//             per token (cached in L1/L2 across its heads);
//   MLA write 1152 B read, 1152 B (bf16) or 656 B (fp8) written.
// Each group of 32 lanes owns one row, staged in shared memory with 16-byte
// loads when aligned, so the stores of consecutive lanes are contiguous and
// the groups of a block keep enough loads in flight.
#include <cmath>
#include <cstdint>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "attention/dtypes/hadamard.h"
#include "attention/dtypes/layer_norm.h"
#include "attention/gpu/cache/launch.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"

namespace dsa::attention::gpu {
namespace {

// Lanes of a group: the canonical LayerNorm order is defined for 32 lanes
// (attention/dtypes/layer_norm.h); on 64-wide AMD wavefronts two groups
// share one, and every shuffle below stays within its 32-lane half.
constexpr int kLanes = kLayerNormLanes;
static_assert(kDsaWarpSize % kLanes == 0, "a group must fit in a warp");
constexpr int kThreads = 256;
constexpr int kMaxGroups = kThreads / kLanes;
// Shared memory a block may stage (floats of all its groups' rows).
constexpr int kMaxStagedFloats = 12 * 1024;

// float -> fp8 as FloatToFp8 (attention/dtypes/fp8.h) computes it. On
// NVIDIA sm_89 and newer, e4m3fn uses the hardware conversion (cvt.rn.
// satfinite: round to nearest even, saturating to +-448, as FloatToFp8 does)
// instead of ~20 integer instructions; NaN keeps FloatToFp8's sign rule.
// cache_kernels_test compares the two over 2^25 float32 bit patterns.
__device__ __forceinline__ uint8_t EncodeFp8(float x, const Fp8Traits& t) {
#if defined(DSA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (t.has_negative_zero && !isnan(x)) {
    uint16_t pair;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(pair) : "f"(x));
    return static_cast<uint8_t>(pair);
  }
#endif
  return FloatToFp8(x, t);
}

__device__ __forceinline__ float LoadElement(const void* base, FloatFormat type,
                                             int64_t i) {
  if (type == FloatFormat::kFloat32) return static_cast<const float*>(base)[i];
  return Bf16ToFloat(static_cast<const uint16_t*>(base)[i]);
}

// Stages n elements of `row` as floats in `dst` (shared), lanes striding.
__device__ void StageRow(const void* row, FloatFormat type, int n, float* dst,
                         int lane) {
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

template <class T>
__device__ __forceinline__ T GroupSum(T v) {
#pragma unroll
  for (int o = kLanes / 2; o >= 1; o /= 2) v += DSA_SHFL_XOR(v, o, kLanes);
  return v;
}

__device__ __forceinline__ float GroupMax(float v) {
#pragma unroll
  for (int o = kLanes / 2; o >= 1; o /= 2) {
    v = fmaxf(v, DSA_SHFL_XOR(v, o, kLanes));
  }
  return v;
}

// The elements lane `lane` owns in the canonical order: chunks of
// kLayerNormChunk starting at chunk `lane`, every kLanes chunks.
#define FOR_OWN_ELEMENTS(i, n, lane)              \
  for (int c_ = (lane)*kLayerNormChunk; c_ < (n); \
       c_ += kLanes * kLayerNormChunk)            \
    for (int i = c_; i < c_ + kLayerNormChunk && i < (n); ++i)

// Rope on y[0:rope_dim] at cos_sin row `cs` (cos then sin), as ApplyRope
// of the CPU kernels: x1 * c - x2 * s and x2 * c + x1 * s, each product
// rounded. Pairs are spread over the lanes; the caller syncs around it.
__device__ void RopeShared(float* y, const float* cs, int rope_dim,
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
__device__ float GroupScale(const float* y, int n, float divisor, int lane) {
  float m = 0.0f;
  FOR_OWN_ELEMENTS(i, n, lane) { m = fmaxf(m, fabsf(y[i])); }
  return Ue8m0Scale(GroupMax(m), divisor);
}

// The indexer numerics after rope (ops.h): y[0:n] rounded to bf16 when
// asked, then with `hadamard` rotated by H / sqrt(n) in the canonical order
// of attention/dtypes/hadamard.h and rounded again. Every thread of the
// block calls it (barriers); `active` groups do the work.
__device__ void RoundAndRotateShared(float* y, int n, bool round_to_bf16,
                                     bool hadamard, bool active, int lane) {
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
__device__ void StoreCodes(const float* y, int n, float inv,
                           const Fp8Traits& traits, uint8_t* codes, int lane) {
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

__device__ __forceinline__ void StoreFloatBytes(uint8_t* p, float v) {
  if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) {
    *reinterpret_cast<float*>(p) = v;
    return;
  }
  const uint32_t bits = __float_as_uint(v);
#pragma unroll
  for (int k = 0; k < 4; ++k) p[k] = static_cast<uint8_t>(bits >> (8 * k));
}

__device__ __forceinline__ void StoreBf16Bytes(uint8_t* p, float v) {
  const uint16_t bits = FloatToBf16(v);
  if ((reinterpret_cast<uintptr_t>(p) & 1) == 0) {
    *reinterpret_cast<uint16_t*>(p) = bits;
    return;
  }
  p[0] = static_cast<uint8_t>(bits);
  p[1] = static_cast<uint8_t>(bits >> 8);
}

Fp8Traits TraitsOf(Fp8Encoding e) {
  return e == Fp8Encoding::kE4m3fnuz ? kE4m3fnuzTraits : kE4m3fnTraits;
}

// A params' scale_divisor, or the format's max for 0.
__device__ __forceinline__ float Fp8ScaleDivisorOf(const Fp8Traits& traits,
                                                   float divisor) {
  return divisor > 0.0f ? divisor : traits.max;
}

// ---------------------------------------------------------------------------
// Indexer K write.

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
  if (in_range && p.topk > 0) {
    int32_t* row = p.topk_indices + t * p.topk_stride;
    if ((reinterpret_cast<uintptr_t>(row) & 15) == 0 && p.topk % 4 == 0) {
      int4* out = reinterpret_cast<int4*>(row);
      const int4 minus_one = make_int4(-1, -1, -1, -1);
      for (int u = lane; u < p.topk / 4; u += kLanes) out[u] = minus_one;
    } else {
      for (int j = lane; j < p.topk; j += kLanes) row[j] = -1;
    }
  }

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
    StageRow(
        static_cast<const char*>(p.k) +
            t * p.k_row_stride * (p.k_type == FloatFormat::kFloat32 ? 4 : 2),
        p.k_type, n, y, lane);
  }
  __syncthreads();

  // LayerNorm statistics in the canonical order (layer_norm.h); groups
  // without a token sum nothing and discard the result.
  double sum = 0.0;
  if (active) {
    FOR_OWN_ELEMENTS(i, n, lane) { sum = __dadd_rn(sum, double{y[i]}); }
  }
  sum = GroupSum(sum);
  const double mean = sum / static_cast<double>(n);
  double sq = 0.0;
  if (active) {
    FOR_OWN_ELEMENTS(i, n, lane) {
      const double d = __dsub_rn(double{y[i]}, mean);
      sq = __dadd_rn(sq, __dmul_rn(d, d));
    }
  }
  sq = GroupSum(sq);
  if (active) {
    const float mean_f = static_cast<float>(mean);
    const float inv_std = LayerNormInvStd(sq, n, p.ln_eps);
    FOR_OWN_ELEMENTS(i, n, lane) {
      const float w = LoadElement(p.ln_weight, p.ln_weight_type, i);
      const float b = LoadElement(p.ln_bias, p.ln_bias_type, i);
      y[i] = __fadd_rn(
          __fmul_rn(__fmul_rn(__fsub_rn(y[i], mean_f), inv_std), w), b);
      if (p.round_to_bf16) y[i] = RoundToBf16(y[i]);
    }
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
// Indexer Q.

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
  if (lane == 0) {
    const float w =
        LoadElement(p.weights, p.weights_type,
                    t * p.weights_token_stride + h * p.weights_head_stride);
    p.head_weights[t * p.head_weights_token_stride +
                   h * p.head_weights_head_stride] =
        __fmul_rn(__fmul_rn(w, scale), weight_scale);
  }
}

// ---------------------------------------------------------------------------
// MLA latent cache write.

__global__ void __launch_bounds__(kThreads)
    MlaCacheWriteKernel(MlaCacheWriteParams p, Fp8Traits traits, int groups) {
  extern __shared__ float staged[];
  const int group = threadIdx.x / kLanes;
  const int lane = threadIdx.x % kLanes;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * groups + group;
  const int lora = p.kv_lora_rank;
  const int rope = p.rope_dim;
  float* y = staged + group * (lora + rope);
  int64_t slot = -1;
  const bool in_range = group < groups && t < p.tokens;
  if (in_range) {
    slot = p.slot_mapping[t * p.slot_mapping_stride];
  }
  const bool active = slot >= 0 && slot < p.num_blocks * p.block_size;
  if (in_range) {  // not waiting for the slot
    const int kv_esize = p.kv_c_type == FloatFormat::kFloat32 ? 4 : 2;
    const int pe_esize = p.k_pe_type == FloatFormat::kFloat32 ? 4 : 2;
    StageRow(static_cast<const char*>(p.kv_c) + t * p.kv_c_stride * kv_esize,
             p.kv_c_type, lora, y, lane);
    StageRow(static_cast<const char*>(p.k_pe) + t * p.k_pe_stride * pe_esize,
             p.k_pe_type, rope, y + lora, lane);
  }
  __syncthreads();
  if (!active) return;  // no barrier follows
  uint8_t* entry = p.kv_cache + (slot / p.block_size) * p.block_stride_bytes +
                   (slot % p.block_size) * p.slot_stride_bytes;
  if (p.layout == LatentLayout::kBFloat16) {
    const int n = lora + rope;
    if ((reinterpret_cast<uintptr_t>(entry) & 15) == 0 && n % 8 == 0) {
      uint4* out = reinterpret_cast<uint4*>(entry);
      for (int u = lane; u < n / 8; u += kLanes) {
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          w[k] = uint32_t{FloatToBf16(y[8 * u + 2 * k])} |
                 (uint32_t{FloatToBf16(y[8 * u + 2 * k + 1])} << 16);
        }
        out[u] = make_uint4(w[0], w[1], w[2], w[3]);
      }
    } else {
      for (int i = lane; i < n; i += kLanes)
        StoreBf16Bytes(entry + 2 * i, y[i]);
    }
    return;
  }
  const int tiles = lora / 128;
  for (int tile = 0; tile < tiles; ++tile) {
    const float* x = y + tile * 128;
    const float scale = GroupScale(x, 128, traits.max, lane);
    StoreCodes(x, 128, 1.0f / scale, traits, entry + tile * 128, lane);
    if (lane == 0) StoreFloatBytes(entry + lora + 4 * tile, scale);
  }
  uint8_t* pe = entry + lora + 4 * tiles;
  for (int i = lane; i < rope; i += kLanes)
    StoreBf16Bytes(pe + 2 * i, y[lora + i]);
}

// ---------------------------------------------------------------------------
// Register path for head_dim 128 (every preset's indexer): lane l of a group
// holds dims 4l..4l+3, which is also the canonical LayerNorm lane
// assignment (layer_norm.h), so the statistics need no shared memory; rope
// pairs across lanes are exchanged with one xor shuffle (NeoX: the partner
// of dim i < rope/2 is dim i + rope/2, rope/8 lanes away; interleaved: in
// the same lane), which needs rope_dim / 8 to be a power of two. No block
// barriers: each group works alone. Q rows spread wider (8 lanes a row,
// 4 rows per group at once, 8 in flight; below). The arithmetic is the
// staged path's, operation for operation.

constexpr int kRegDim = 128;

// 1 / scale for an ue8m0 scale (a power of two in [2^-22, 2^121], or +inf
// for an infinite amax) without a division: exact, so equal to the CPU's
// 1.0f / scale.
__device__ __forceinline__ float InversePow2(float scale) {
  const uint32_t bits = __float_as_uint(scale);
  if (bits >= (253u << 23)) return 1.0f / scale;  // 2^126 and up, inf
  return __uint_as_float((254u << 23) - bits);
}

bool RegisterPathFits(int head_dim, int rope_dim) {
  if (head_dim != kRegDim || rope_dim < 8 || rope_dim > kRegDim ||
      rope_dim % 8 != 0) {
    return false;
  }
  const int d = rope_dim / 8;
  return (d & (d - 1)) == 0;
}

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

// Q rows of head_dim 128 take 8 lanes each, 16 dims per lane, so a group
// works on 4 rows at once and the per-row work (index math, the scale, the
// head weight) is spread over lanes instead of repeated by all 32.
constexpr int kQLanesPerRow = 8;
constexpr int kQDimsPerLane = kRegDim / kQLanesPerRow;  // 16
constexpr int kQRowsAtOnce = kLanes / kQLanesPerRow;    // 4
constexpr int kQPasses = 2;  // rows in flight per group: 8

bool QRegisterPathFits(int head_dim, int rope_dim, int64_t rows) {
  // NeoX partners half = rope/2 dims apart must be whole lanes apart, a
  // power of two of them (xor shuffle within the row's 8 lanes).
  return head_dim == kRegDim &&
         (rope_dim == 32 || rope_dim == 64 || rope_dim == 128) &&
         rows <= 0x7fffffff;
}

// v = row[16 * sub + 0:16] (16-byte loads when aligned).
__device__ __forceinline__ void Load16(const void* row, FloatFormat type,
                                       int sub, float v[kQDimsPerLane]) {
  if (type == FloatFormat::kFloat32) {
    const float* r = static_cast<const float*>(row) + kQDimsPerLane * sub;
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
      for (int k = 0; k < kQDimsPerLane; ++k) v[k] = r[k];
    }
  } else {
    const uint16_t* r = static_cast<const uint16_t*>(row) + kQDimsPerLane * sub;
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
      for (int k = 0; k < kQDimsPerLane; ++k) v[k] = Bf16ToFloat(r[k]);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    IndexerQRegisterKernel(IndexerQParams p, Fp8Traits traits,
                           float weight_scale) {
  const int lane = threadIdx.x % kLanes;
  const int sub = lane % kQLanesPerRow;   // 16 dims of the row
  const int slot = lane / kQLanesPerRow;  // which of the 4 rows
  // At most 2^31 rows (QRegisterPathFits): row indices fit 32 bits.
  const uint32_t group = static_cast<uint32_t>(
      (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes);
  const uint32_t items = static_cast<uint32_t>(p.tokens * p.heads);
  const uint32_t heads = static_cast<uint32_t>(p.heads);
  const int esize = p.q_type == FloatFormat::kFloat32 ? 4 : 2;
  float v[kQPasses][kQDimsPerLane];
  uint32_t t[kQPasses], h[kQPasses];
  int64_t pos[kQPasses];
  // Every pass's load first, so they are in flight together.
#pragma unroll
  for (int j = 0; j < kQPasses; ++j) {
    const uint32_t item = (group * kQPasses + j) * kQRowsAtOnce + slot;
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
  const int e0 = kQDimsPerLane * sub;
#pragma unroll
  for (int j = 0; j < kQPasses; ++j) {
    // Rope. Every lane shuffles (rows without a token included).
    if (p.rope == RopeKind::kNeox) {
      const int distance = half / kQDimsPerLane;  // 1, 2 or 4 lanes
      float other[kQDimsPerLane];
#pragma unroll
      for (int k = 0; k < kQDimsPerLane; ++k) {
        other[k] = DSA_SHFL_XOR(v[j][k], distance, kLanes);
      }
      if (pos[j] >= 0 && e0 < p.rope_dim) {
        const float* cs = p.cos_sin_cache + pos[j] * p.cos_sin_stride;
        const bool first = e0 < half;
        const int i0 = first ? e0 : e0 - half;
#pragma unroll
        for (int k = 0; k < kQDimsPerLane; ++k) {
          const float c = cs[i0 + k];
          const float s = cs[half + i0 + k];
          v[j][k] =
              first ? __fsub_rn(__fmul_rn(v[j][k], c), __fmul_rn(other[k], s))
                    : __fadd_rn(__fmul_rn(v[j][k], c), __fmul_rn(other[k], s));
        }
      }
    } else if (pos[j] >= 0 && e0 < p.rope_dim) {
      const float* cs = p.cos_sin_cache + pos[j] * p.cos_sin_stride;
#pragma unroll
      for (int k = 0; k < kQDimsPerLane; k += 2) {
        const int i = (e0 + k) / 2;
        const float c = cs[i];
        const float s = cs[half + i];
        const float x1 = v[j][k];
        const float x2 = v[j][k + 1];
        v[j][k] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
        v[j][k + 1] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
      }
    }
    if (p.round_to_bf16) {
#pragma unroll
      for (int k = 0; k < kQDimsPerLane; ++k) v[j][k] = RoundToBf16(v[j][k]);
    }
    // amax over the row's 8 lanes (xor 4, 2, 1 stays within them).
    float m = 0.0f;
#pragma unroll
    for (int k = 0; k < kQDimsPerLane; ++k) m = fmaxf(m, fabsf(v[j][k]));
#pragma unroll
    for (int o = kQLanesPerRow / 2; o >= 1; o /= 2) {
      m = fmaxf(m, DSA_SHFL_XOR(m, o, kLanes));
    }
    if (pos[j] < 0) continue;
    const float scale =
        Ue8m0Scale(m, Fp8ScaleDivisorOf(traits, p.scale_divisor));
    const float inv = InversePow2(scale);
    uint32_t w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      w[q] = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        w[q] |= uint32_t{EncodeFp8(__fmul_rn(v[j][4 * q + k], inv), traits)}
                << (8 * k);
      }
    }
    uint8_t* out = p.q_fp8 + int64_t{t[j]} * p.q_fp8_token_stride +
                   int64_t{h[j]} * p.q_fp8_head_stride + kQDimsPerLane * sub;
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
    if (sub == 0) {
      const float wt = LoadElement(p.weights, p.weights_type,
                                   int64_t{t[j]} * p.weights_token_stride +
                                       int64_t{h[j]} * p.weights_head_stride);
      p.head_weights[int64_t{t[j]} * p.head_weights_token_stride +
                     int64_t{h[j]} * p.head_weights_head_stride] =
          __fmul_rn(__fmul_rn(wt, scale), weight_scale);
    }
  }
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
  Load4(static_cast<const char*>(p.k) +
            t * p.k_row_stride * (p.k_type == FloatFormat::kFloat32 ? 4 : 2),
        p.k_type, lane, v);
  // The top-k buffer clear (every token) while the row is in flight.
  if (p.topk > 0) {
    int32_t* row = p.topk_indices + t * p.topk_stride;
    if ((reinterpret_cast<uintptr_t>(row) & 15) == 0 && p.topk % 4 == 0) {
      int4* out = reinterpret_cast<int4*>(row);
      const int4 minus_one = make_int4(-1, -1, -1, -1);
      for (int u = lane; u < p.topk / 4; u += kLanes) out[u] = minus_one;
    } else {
      for (int j = lane; j < p.topk; j += kLanes) row[j] = -1;
    }
  }
  if (!active) return;
  // LayerNorm statistics in the canonical order: this lane's 4 dims in
  // increasing order, then the xor butterfly.
  double sum = 0.0;
#pragma unroll
  for (int k = 0; k < 4; ++k) sum = __dadd_rn(sum, double{v[k]});
  sum = GroupSum(sum);
  const double mean = sum / static_cast<double>(kRegDim);
  double sq = 0.0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const double d = __dsub_rn(double{v[k]}, mean);
    sq = __dadd_rn(sq, __dmul_rn(d, d));
  }
  sq = GroupSum(sq);
  const float mean_f = static_cast<float>(mean);
  const float inv_std = LayerNormInvStd(sq, kRegDim, p.ln_eps);
  float w[4], b[4];
  Load4(p.ln_weight, p.ln_weight_type, lane, w);
  Load4(p.ln_bias, p.ln_bias_type, lane, b);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[k] = __fadd_rn(
        __fmul_rn(__fmul_rn(__fsub_rn(v[k], mean_f), inv_std), w[k]), b[k]);
    if (p.round_to_bf16) v[k] = RoundToBf16(v[k]);
  }
  Rope4(v, p.cos_sin_cache + pos * p.cos_sin_stride, p.rope_dim, p.rope, lane);
  if (p.round_to_bf16) {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = RoundToBf16(v[k]);
  }
  const int64_t block = slot / p.block_size;
  const int64_t offset = slot % p.block_size;
  uint8_t* base = p.k_cache + block * p.block_size * int64_t{kRegDim + 4};
  const float scale =
      Quantize4(v, traits, Fp8ScaleDivisorOf(traits, p.scale_divisor),
                base + offset * kRegDim, lane);
  if (lane == 0) {
    StoreFloatBytes(base + int64_t{p.block_size} * kRegDim + 4 * offset, scale);
  }
}

__global__ void Fp8EncodeKernel(const float* in, uint8_t* out, int64_t n,
                                Fp8Traits traits) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = EncodeFp8(in[i], traits);
}

// Groups per block for rows of `floats` staged floats each.
int GroupsFor(int64_t floats) {
  int64_t g = kMaxStagedFloats / (floats > 0 ? floats : 1);
  return static_cast<int>(g < 1 ? 1 : (g > kMaxGroups ? kMaxGroups : g));
}

}  // namespace

LaunchResult IndexerKWriteLaunch(const IndexerKWriteParams& p, void* stream) {
  constexpr const char* op = "indexer_k_write";
  if (p.tokens < 0 || p.head_dim < 1 || p.topk < 0 || p.block_size < 1 ||
      p.num_blocks < 0 || p.max_position < 0) {
    return Invalid(op,
                   "tokens %lld, head_dim %d, topk %d, block_size %d, "
                   "num_blocks %lld, max_position %lld: expected tokens, topk, "
                   "num_blocks, max_position >= 0, head_dim, block_size >= 1",
                   static_cast<long long>(p.tokens), p.head_dim, p.topk,
                   p.block_size, static_cast<long long>(p.num_blocks),
                   static_cast<long long>(p.max_position));
  }
  if (p.rope_dim < 0 || p.rope_dim % 2 != 0 || p.rope_dim > p.head_dim) {
    return Invalid(op, "rope_dim %d, expected an even number <= head_dim %d",
                   p.rope_dim, p.head_dim);
  }
  if (p.head_dim > kMaxStagedFloats) {
    return Invalid(op, "head_dim %d is above the GPU kernel's %d", p.head_dim,
                   kMaxStagedFloats);
  }
  if (p.tokens == 0) return LaunchResult{};
  if (p.k == nullptr || p.ln_weight == nullptr || p.ln_bias == nullptr ||
      p.positions == nullptr || p.cos_sin_cache == nullptr ||
      p.slot_mapping == nullptr || (p.k_cache == nullptr && p.num_blocks > 0) ||
      (p.topk_indices == nullptr && p.topk > 0)) {
    return Invalid(op, "a null pointer for a non-empty tensor");
  }
  if (p.hadamard_rotation && (p.head_dim & (p.head_dim - 1)) != 0) {
    return Invalid(op,
                   "hadamard_rotation needs head_dim a power of two, got %d",
                   p.head_dim);
  }
  if (!p.force_staged_path && !p.hadamard_rotation &&
      RegisterPathFits(p.head_dim, p.rope_dim)) {
    constexpr int kGroups = kThreads / kLanes;
    const int64_t blocks = (p.tokens + kGroups - 1) / kGroups;
    if (blocks > 0x7fffffff) {
      return Invalid(op, "%lld tokens are too many for one launch",
                     static_cast<long long>(p.tokens));
    }
    hipLaunchKernelGGL(IndexerKWriteRegisterKernel,
                       dim3(static_cast<uint32_t>(blocks)), dim3(kThreads), 0,
                       static_cast<hipStream_t>(stream), p,
                       TraitsOf(p.encoding));
    return CheckLaunch(op);
  }
  const int groups = GroupsFor(p.head_dim);
  const int64_t blocks = (p.tokens + groups - 1) / groups;
  if (blocks > 0x7fffffff) {
    return Invalid(op, "%lld tokens are too many for one launch",
                   static_cast<long long>(p.tokens));
  }
  hipLaunchKernelGGL(IndexerKWriteKernel, dim3(static_cast<uint32_t>(blocks)),
                     dim3(groups * kLanes), groups * p.head_dim * sizeof(float),
                     static_cast<hipStream_t>(stream), p, TraitsOf(p.encoding),
                     groups);
  return CheckLaunch(op);
}

LaunchResult IndexerQLaunch(const IndexerQParams& p, void* stream) {
  constexpr const char* op = "indexer_q";
  if (p.tokens < 0 || p.heads < 1 || p.head_dim < 1 || p.max_position < 0) {
    return Invalid(op,
                   "tokens %lld, heads %d, head_dim %d, max_position %lld: "
                   "expected tokens, max_position >= 0, heads, head_dim >= 1",
                   static_cast<long long>(p.tokens), p.heads, p.head_dim,
                   static_cast<long long>(p.max_position));
  }
  if (p.rope_dim < 0 || p.rope_dim % 2 != 0 || p.rope_dim > p.head_dim) {
    return Invalid(op, "rope_dim %d, expected an even number <= head_dim %d",
                   p.rope_dim, p.head_dim);
  }
  if (p.head_dim > kMaxStagedFloats) {
    return Invalid(op, "head_dim %d is above the GPU kernel's %d", p.head_dim,
                   kMaxStagedFloats);
  }
  if (p.tokens == 0) return LaunchResult{};
  if (p.q == nullptr || p.weights == nullptr || p.positions == nullptr ||
      p.cos_sin_cache == nullptr || p.q_fp8 == nullptr ||
      p.head_weights == nullptr) {
    return Invalid(op, "a null pointer for a non-empty tensor");
  }
  // head_dim^-0.5 * heads^-0.5, rounded once, as the CPU kernel does.
  const float weight_scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim) *
                                         static_cast<double>(p.heads)));
  const int64_t items = p.tokens * p.heads;
  if (p.hadamard_rotation && (p.head_dim & (p.head_dim - 1)) != 0) {
    return Invalid(op,
                   "hadamard_rotation needs head_dim a power of two, got %d",
                   p.head_dim);
  }
  if (!p.force_staged_path && !p.hadamard_rotation &&
      QRegisterPathFits(p.head_dim, p.rope_dim, items)) {
    constexpr int64_t kRowsPerBlock =
        kThreads / kLanes * kQRowsAtOnce * kQPasses;
    const int64_t blocks = (items + kRowsPerBlock - 1) / kRowsPerBlock;
    if (blocks > 0x7fffffff) {
      return Invalid(op, "%lld (token, head) rows are too many for one launch",
                     static_cast<long long>(items));
    }
    hipLaunchKernelGGL(IndexerQRegisterKernel,
                       dim3(static_cast<uint32_t>(blocks)), dim3(kThreads), 0,
                       static_cast<hipStream_t>(stream), p,
                       TraitsOf(p.encoding), weight_scale);
    return CheckLaunch(op);
  }
  const int groups = GroupsFor(p.head_dim);
  const int64_t blocks = (items + groups - 1) / groups;
  if (blocks > 0x7fffffff) {
    return Invalid(op, "%lld (token, head) rows are too many for one launch",
                   static_cast<long long>(items));
  }
  hipLaunchKernelGGL(IndexerQKernel, dim3(static_cast<uint32_t>(blocks)),
                     dim3(groups * kLanes), groups * p.head_dim * sizeof(float),
                     static_cast<hipStream_t>(stream), p, TraitsOf(p.encoding),
                     groups, weight_scale);
  return CheckLaunch(op);
}

LaunchResult MlaCacheWriteLaunch(const MlaCacheWriteParams& p, void* stream) {
  constexpr const char* op = "mla_cache_write";
  if (p.tokens < 0 || p.kv_lora_rank < 1 || p.rope_dim < 0 ||
      p.block_size < 1 || p.num_blocks < 0) {
    return Invalid(op,
                   "tokens %lld, kv_lora_rank %d, rope_dim %d, block_size %d, "
                   "num_blocks %lld: expected tokens, rope_dim, num_blocks >= "
                   "0, kv_lora_rank, block_size >= 1",
                   static_cast<long long>(p.tokens), p.kv_lora_rank, p.rope_dim,
                   p.block_size, static_cast<long long>(p.num_blocks));
  }
  if (p.layout == LatentLayout::kFp8 && p.kv_lora_rank % 128 != 0) {
    return Invalid(op, "kv_lora_rank %d is not a multiple of 128 (fp8 tiles)",
                   p.kv_lora_rank);
  }
  const int64_t row = int64_t{p.kv_lora_rank} + p.rope_dim;
  if (row > kMaxStagedFloats) {
    return Invalid(op,
                   "kv_lora_rank + rope_dim = %lld is above the GPU "
                   "kernel's %d",
                   static_cast<long long>(row), kMaxStagedFloats);
  }
  if (p.tokens == 0) return LaunchResult{};
  if (p.kv_c == nullptr || p.k_pe == nullptr || p.slot_mapping == nullptr ||
      (p.kv_cache == nullptr && p.num_blocks > 0)) {
    return Invalid(op, "a null pointer for a non-empty tensor");
  }
  const int groups = GroupsFor(row);
  const int64_t blocks = (p.tokens + groups - 1) / groups;
  if (blocks > 0x7fffffff) {
    return Invalid(op, "%lld tokens are too many for one launch",
                   static_cast<long long>(p.tokens));
  }
  hipLaunchKernelGGL(MlaCacheWriteKernel, dim3(static_cast<uint32_t>(blocks)),
                     dim3(groups * kLanes), groups * row * sizeof(float),
                     static_cast<hipStream_t>(stream), p, TraitsOf(p.encoding),
                     groups);
  return CheckLaunch(op);
}

LaunchResult Fp8EncodeForTesting(const float* in, uint8_t* out, int64_t n,
                                 Fp8Encoding encoding, void* stream) {
  constexpr const char* op = "fp8_encode";
  if (n < 0 || (n > 0 && (in == nullptr || out == nullptr))) {
    return Invalid(op, "n %lld with a null pointer", static_cast<long long>(n));
  }
  if (n == 0) return LaunchResult{};
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return Invalid(op, "n is too large");
  hipLaunchKernelGGL(Fp8EncodeKernel, dim3(static_cast<uint32_t>(blocks)),
                     dim3(kThreads), 0, static_cast<hipStream_t>(stream), in,
                     out, n, TraitsOf(encoding));
  return CheckLaunch(op);
}

}  // namespace dsa::attention::gpu
