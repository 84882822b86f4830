// What every sparse MLA kernel reads and writes the same way: q and
// kv_b_proj values as float, a query row's request, the cache entry of a
// top-k index (or none: padding and invalid indices are skipped, never
// read), fp8_ds_mla codes as bf16, a block's top-k split and output row.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_ROW_ACCESS_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_ROW_ACCESS_H_

#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/params.h"

// hipcc (clang) warns where an unroll pragma of these kernels cannot be
// honoured for AMD; the loops stay correct, rolled.
#if defined(__clang__) && !defined(__CUDA__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

namespace dsa::attention::gpu::sparse_mla {

using ::dsa::gpu::Bf16ToFloat;
using ::dsa::gpu::FloatToBf16;
using ::dsa::gpu::Fp8Format;

inline constexpr float kNegInf = -__builtin_huge_valf();
inline constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float LoadFloat(const void* base, FloatFormat f,
                                           int64_t i) {
  return f == FloatFormat::kBFloat16
             ? Bf16ToFloat(static_cast<const uint16_t*>(base)[i])
             : static_cast<const float*>(base)[i];
}

// The row's request and the number of its tokens the block table can hold;
// an invalid request gives no tokens.
struct RowRequest {
  int32_t request;
  int64_t seq_len;
};

__device__ __forceinline__ RowRequest LoadRowRequest(const SparseMlaParams& p,
                                                     int64_t t) {
  RowRequest rr{-1, 0};
  const int32_t r = p.token_request[t];
  if (r < 0 || r >= p.num_requests) return rr;
  int64_t len = p.seq_lens[r];
  const int64_t capacity =
      static_cast<int64_t>(p.max_blocks_per_request) * p.block_size;
  if (len > capacity) len = capacity;
  if (len < 0) len = 0;
  rr.request = r;
  rr.seq_len = len;
  return rr;
}

// Byte offset of the cache entry of top-k index `idx`, or -1 when the index
// is padding or invalid (outside the request, or its block outside the
// cache). In two steps where a lookahead wants its block-table load waited
// on only where the offset is used: EntryBlock (the table's entry, -1 for
// padding or an index outside the request), then EntryOffsetOf.
// EntryOffset keeps its one-step form below: written as the two steps, the
// bf16 seesaw body's machine code changed and measured 10 % slower on the
// H200 (prefill at T = 8192, RESULTS.md).
__device__ __forceinline__ int32_t EntryBlock(const SparseMlaParams& p,
                                              const RowRequest& rr,
                                              int32_t idx) {
  return idx >= 0 && idx < rr.seq_len
             ? p.block_table[rr.request * p.block_table_stride +
                             idx / p.block_size]
             : -1;
}
__device__ __forceinline__ int64_t EntryOffsetOf(const SparseMlaParams& p,
                                                 const RowRequest& rr,
                                                 int32_t idx, int32_t block) {
  if (idx < 0 || idx >= rr.seq_len || block < 0 || block >= p.num_blocks) {
    return -1;
  }
  return block * p.cache_block_stride +
         static_cast<int64_t>(idx % p.block_size) * p.cache_token_stride;
}
__device__ __forceinline__ int64_t EntryOffset(const SparseMlaParams& p,
                                               const RowRequest& rr,
                                               int32_t idx) {
  if (idx < 0 || idx >= rr.seq_len) return -1;
  const int32_t block =
      p.block_table[rr.request * p.block_table_stride + idx / p.block_size];
  if (block < 0 || block >= p.num_blocks) return -1;
  return block * p.cache_block_stride +
         static_cast<int64_t>(idx % p.block_size) * p.cache_token_stride;
}

// 2^(127 - exponent bias): 2^120 (e4m3fn), 2^119 (e4m3fnuz).
template <Fp8Format F>
inline constexpr float kFp8Rebias =
    F == Fp8Format::kE4m3fn ? 0x1p120f : 0x1p119f;

// Two fp8 codes (bits 0-7 and 8-15 of `pair`) times `scale`, as two bf16
// (PackBf16x2). The 7 magnitude bits go to float bits 20-26, which reads
// them as a float of exponent field eeee and mantissa mmm, normal or
// subnormal alike; a multiply by 2^(127 - bias) gives the value exactly, a
// second by the scale (kept apart so that no scale can overflow it); NaN
// codes stay NaN. Fp8Fast below is its fast form where the codes and the
// scale allow.
template <Fp8Format F>
__device__ __forceinline__ uint32_t Fp8PairToBf16(uint32_t pair, float scale) {
  float v[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t code = (pair >> (8 * i)) & 0xffu;
    const float mag =
        __uint_as_float((code & 0x7fu) << 20) * kFp8Rebias<F> * scale;
    const bool nan =
        F == Fp8Format::kE4m3fn ? (code & 0x7fu) == 0x7fu : code == 0x80u;
    v[i] = nan ? __uint_as_float(0x7fc00000u)
               : __uint_as_float(__float_as_uint(mag) | ((code & 0x80u) << 24));
  }
  return ::dsa::gpu::PackBf16x2(v[0], v[1]);
}

// Fp8PairToBf16's fast form, giving the same bits where it applies: codes
// that are not NaN, and a scale s whose bits lie below kScaleBitsLimit (+0
// <= s < 2^7 for e4m3fn, 2^8 for e4m3fnuz; not -0, negative, inf or NaN),
// so that s 2^(127 - bias) is exact and finite. The rebias is folded into
// the scale once (Fold); a code becomes its float by a shift that puts it
// in bits 24-31, a sign-extending shift by 4 and a mask (sign at bit 31,
// the 7 other bits at 20-26, as above), then one multiply by the folded
// scale, which rounds the same product once: 4 instructions a code, about
// half of Fp8PairToBf16's. The caller checks Folds and NanBytes over a
// thread's scales and codes once and takes Fp8PairToBf16 where they fail
// (NaN codes, and the cache writer's power-of-two scales from 2^7 up: an
// amax of 2^7 x 448 or more).
template <Fp8Format F>
struct Fp8Fast {
  static constexpr uint32_t kScaleBitsLimit =
      F == Fp8Format::kE4m3fn ? 0x43000000u : 0x43800000u;

  __device__ __forceinline__ static bool Folds(float scale) {
    return __float_as_uint(scale) < kScaleBitsLimit;
  }
  __device__ __forceinline__ static float Fold(float scale) {
    return scale * kFp8Rebias<F>;
  }
  // Nonzero where a byte of w is a NaN code (e4m3fn: magnitude 0x7f, the
  // only one that 0x01 carries into bit 7; e4m3fnuz: 0x80, a zero byte of
  // w ^ 0x80808080).
  __device__ __forceinline__ static uint32_t NanBytes(uint32_t w) {
    if constexpr (F == Fp8Format::kE4m3fn) {
      return ((w & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u;
    } else {
      const uint32_t x = w ^ 0x80808080u;
      return (x - 0x01010101u) & ~x & 0x80808080u;
    }
  }
  // Codes 2 kJ and 2 kJ + 1 of w (bits 16 kJ .. 16 kJ + 15) times the
  // folded scale, as two bf16.
  template <int kJ>
  __device__ __forceinline__ static uint32_t Pair(uint32_t w, float folded) {
    float v[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int code = 2 * kJ + i;
      const int32_t top = static_cast<int32_t>(w << (24 - 8 * code));
      v[i] = __uint_as_float(static_cast<uint32_t>(top >> 4) & 0x87f00000u) *
             folded;
    }
    return ::dsa::gpu::PackBf16x2(v[0], v[1]);
  }
};

#if defined(DSA_GPU_CUDA)
// Fp8PairToBf16 in the bf16 domain, giving the same bits where it applies:
// codes that are not NaN, and a scale s that bf16 holds exactly (the low 16
// bits of its float clear: every ue8m0 scale) with 2^-100 <= s <
// Fp8Fast's limit, or s = +0, so that s 2^(127 - bias) is an exact finite
// bf16 (Fold) and no product of a nonzero code underflows bf16's normal
// range. A code becomes a bf16 of value code x 2^(bias - 127) by bits
// alone, sign at bit 15 and the 7 other bits at 4-10 (a byte permute that
// sign-extends two codes to 16 bits each, a shift by 4 and a mask, for two
// codes at once), then one bf16 multiply by the folded scale rounds the
// exact product once, as Fp8PairToBf16's float product (exact: 4 by 8
// significant bits) rounded to bf16 does: 2 instructions a code, half of
// Fp8Fast's. The multiply reads codes of exponent field 0 as bf16
// subnormals, which bf16 arithmetic keeps (the gather test checks every
// code). CUDA only; the caller checks Folds and Fp8Fast::NanBytes over a
// thread's scales and codes once.
template <Fp8Format F>
struct Fp8Bf16Form {
  // 2^-100 as float bits.
  static constexpr uint32_t kMinScaleBits = (127u - 100u) << 23;

  __device__ __forceinline__ static bool Folds(float scale) {
    const uint32_t bits = __float_as_uint(scale);
    return (bits & 0xffffu) == 0 &&
           (bits == 0 ||
            (bits >= kMinScaleBits && bits < Fp8Fast<F>::kScaleBitsLimit));
  }
  // The folded scale, as two equal bf16.
  __device__ __forceinline__ static uint32_t Fold(float scale) {
    const uint32_t b = __float_as_uint(scale * kFp8Rebias<F>) >> 16;
    return b | (b << 16);
  }
  // Codes 2 kJ and 2 kJ + 1 of w (bits 16 kJ .. 16 kJ + 15) times the
  // folded scale, as two bf16.
  template <int kJ>
  __device__ __forceinline__ static uint32_t Pair(uint32_t w, uint32_t folded) {
    // Byte 2 i + 1 of x repeats the sign of code 2 kJ + i (selector bit 3).
    constexpr uint32_t kSelect = kJ == 0 ? 0x9180u : 0xb3a2u;
    uint32_t x;
    asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(x) : "r"(w), "n"(kSelect));
    const uint32_t bits = (x << 4) & 0x87f087f0u;
    uint32_t r;
    // bf16 x2 multiply (fma with -0, exact for every sign of zero): sm_80.
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n"
        : "=r"(r)
        : "r"(bits), "r"(folded), "r"(0x80008000u));
    return r;
  }
};
#endif  // DSA_GPU_CUDA

// One fp8_ds_mla entry as 576 bf16 (the 512 codes times their tile's
// scale, then the rope) at `out`, by 32 threads (any warp width) of lane
// 0 .. 31: 16 codes each (Fp8Bf16Form on CUDA, else Fp8Fast, else
// Fp8PairToBf16), 8 of them copying
// the rope.
// Needs the entry and `out` 16-byte aligned.
template <Fp8Format F>
__device__ __forceinline__ void DequantiseEntry(const uint8_t* entry,
                                                uint16_t* out, int lane) {
  const uint4 codes = *reinterpret_cast<const uint4*>(entry + 16 * lane);
  float scale;  // this thread's codes lie in tile lane / 8
  __builtin_memcpy(&scale, entry + kLora + 4 * (lane / 8), 4);
  const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
  uint32_t bf16[8];
  using Fast = Fp8Fast<F>;
  const bool no_nan =
      (Fast::NanBytes(words[0]) | Fast::NanBytes(words[1]) |
       Fast::NanBytes(words[2]) | Fast::NanBytes(words[3])) == 0;
#if defined(DSA_GPU_CUDA)
  using Bf16Form = Fp8Bf16Form<F>;
  if (no_nan && Bf16Form::Folds(scale)) {
    const uint32_t folded = Bf16Form::Fold(scale);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      bf16[2 * k] = Bf16Form::template Pair<0>(words[k], folded);
      bf16[2 * k + 1] = Bf16Form::template Pair<1>(words[k], folded);
    }
  } else
#endif
      if (no_nan && Fast::Folds(scale)) {
    const float folded = Fast::Fold(scale);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      bf16[2 * k] = Fast::template Pair<0>(words[k], folded);
      bf16[2 * k + 1] = Fast::template Pair<1>(words[k], folded);
    }
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      bf16[2 * k] = Fp8PairToBf16<F>(words[k], scale);
      bf16[2 * k + 1] = Fp8PairToBf16<F>(words[k] >> 16, scale);
    }
  }
  *reinterpret_cast<uint4*>(out + 16 * lane) =
      make_uint4(bf16[0], bf16[1], bf16[2], bf16[3]);
  *reinterpret_cast<uint4*>(out + 16 * lane + 8) =
      make_uint4(bf16[4], bf16[5], bf16[6], bf16[7]);
  constexpr int kRopeChunks = kRope * 2 / 16;
  if (lane < kRopeChunks) {
    *reinterpret_cast<uint4*>(out + kLora + 8 * lane) =
        *reinterpret_cast<const uint4*>(entry + kLora + 4 * kFp8Tiles +
                                        16 * lane);
  }
}

// The top-k range [begin, end) of split blockIdx.z of `splits`.
struct SplitRange {
  int begin;
  int end;
};
__device__ __forceinline__ SplitRange BlockSplitRange(int topk, int splits) {
  const int per_split = (topk + splits - 1) / splits;
  const int begin = blockIdx.z * per_split;
  return {begin, topk - begin < per_split ? topk : begin + per_split};
}

// Row 0 of the block's heads in the output (latent or part_o / part_lse):
// (split, token - token_begin, head h0), for a grid of (head groups, the
// launch's rows, splits).
__device__ __forceinline__ int64_t BlockOutputRow(const SparseMlaParams& p,
                                                  int64_t t,
                                                  int64_t token_begin, int h0) {
  return (static_cast<int64_t>(blockIdx.z) * gridDim.y + (t - token_begin)) *
             p.heads +
         h0;
}

}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_ROW_ACCESS_H_
