// Helpers shared by the CPU attention kernels: element loads and stores for
// the float formats, fp8 decode tables, paged-cache addressing, the value
// checks every kernel runs before it writes anything, and the small vector
// primitives the hot loops are built from.
#ifndef DSA_ATTENTION_CPU_KERNEL_UTIL_H_
#define DSA_ATTENTION_CPU_KERNEL_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/dtype.h"
#include "attention/dtypes/fp8.h"
#include "attention/ops.h"
#include "attention/tensor.h"

namespace dsa::attention::cpu {

// n consecutive float32 or bfloat16 elements starting at element `offset`.
inline void LoadFloats(const TensorView& t, int64_t offset, int64_t n,
                       float* out) {
  if (t.dtype == DType::kFloat32) {
    std::memcpy(out, t.data_as<const float>() + offset, n * sizeof(float));
  } else {
    const uint16_t* p = t.data_as<const uint16_t>() + offset;
    for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(p[i]);
  }
}

inline float LoadFloat(const TensorView& t, int64_t offset) {
  if (t.dtype == DType::kFloat32) return t.data_as<const float>()[offset];
  return Bf16ToFloat(t.data_as<const uint16_t>()[offset]);
}

inline void StoreFloats(const TensorView& t, int64_t offset, int64_t n,
                        const float* in) {
  if (t.dtype == DType::kFloat32) {
    std::memcpy(t.data_as<float>() + offset, in, n * sizeof(float));
  } else {
    uint16_t* p = t.data_as<uint16_t>() + offset;
    for (int64_t i = 0; i < n; ++i) p[i] = FloatToBf16(in[i]);
  }
}

template <class T>
T LoadIndex(const TensorView& t, int64_t i) {
  return t.data_as<const T>()[i * t.strides[0]];
}

// The 256 values of an fp8 encoding (NaN codes decode to NaN).
struct Fp8DecodeTable {
  float value[256];
};
const Fp8DecodeTable& Fp8Table(DType fp8_dtype);

// fp32 read from possibly unaligned bytes (cache scales sit at arbitrary
// byte offsets; a plain load would be undefined behaviour).
inline float LoadUnalignedFloat(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void StoreUnalignedFloat(uint8_t* p, float v) {
  std::memcpy(p, &v, sizeof(v));
}

// Rope in place on v[0 : rope_dim] with cos = cs[0 : rope_dim/2] and
// sin = cs[rope_dim/2 : rope_dim].
inline void ApplyRope(float* v, const float* cs, int64_t rope_dim,
                      RopeStyle style) {
  const int64_t half = rope_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float c = cs[i];
    const float s = cs[half + i];
    const int64_t a = style == RopeStyle::kNeox ? i : 2 * i;
    const int64_t b = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
    const float x1 = v[a];
    const float x2 = v[b];
    v[a] = x1 * c - x2 * s;
    v[b] = x2 * c + x1 * s;
  }
}

// Dot product with eight independent partial sums: the compiler can keep
// them in SIMD lanes without reassociating (no -ffast-math needed).
inline float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
            ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += alpha * x
inline void Axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// A register block of scores: out[r][c] = sum_d a[r * a_stride + d] *
// bt[d * bt_stride + c] for kScoreRows rows of `a` against kScoreCols
// columns of a transposed (dim-major) `bt`. Each step broadcasts one value
// per row against a vector of columns, so the accumulators stay in
// registers and no horizontal sums are needed. All kScoreRows rows and
// kScoreCols columns are read: callers pad their buffers.
inline constexpr int64_t kScoreRows = 4;
inline constexpr int64_t kScoreCols = 8;
inline void ScoreBlock(const float* a, int64_t a_stride, const float* bt,
                       int64_t bt_stride, int64_t dim,
                       float out[kScoreRows][kScoreCols]) {
  float acc[kScoreRows][kScoreCols] = {};
  for (int64_t d = 0; d < dim; ++d) {
    const float* b = bt + d * bt_stride;
    for (int64_t r = 0; r < kScoreRows; ++r) {
      const float av = a[r * a_stride + d];
      for (int64_t c = 0; c < kScoreCols; ++c) acc[r][c] += av * b[c];
    }
  }
  for (int64_t r = 0; r < kScoreRows; ++r) {
    for (int64_t c = 0; c < kScoreCols; ++c) out[r][c] = acc[r][c];
  }
}

inline float MaxAbs(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

// Quantises n values with an ue8m0 scale of max(amax, 1e-4) / divisor;
// returns the scale.
inline float QuantizeUe8m0(const float* x, int64_t n, const Fp8Traits& traits,
                           float divisor, uint8_t* codes) {
  const float scale = Ue8m0Scale(MaxAbs(x, n), divisor);
  // 1/scale is exact (a power of two), so x * inv equals x / scale.
  const float inv = 1.0f / scale;
  for (int64_t i = 0; i < n; ++i) codes[i] = FloatToFp8(x[i] * inv, traits);
  return scale;
}
inline float QuantizeUe8m0(const float* x, int64_t n, const Fp8Traits& traits,
                           uint8_t* codes) {
  return QuantizeUe8m0(x, n, traits, traits.max, codes);
}

// Rounds v[0:n] to bfloat16 in place when `dtype` is kBFloat16 (an
// intermediate_dtype of the indexer ops); float32 leaves it.
inline void RoundInPlace(float* v, int64_t n, DType dtype) {
  if (dtype != DType::kBFloat16) return;
  for (int64_t i = 0; i < n; ++i) v[i] = RoundToBf16(v[i]);
}

// ---------------------------------------------------------------------------
// Value checks. They run before a kernel writes anything, so a bad value
// leaves every output untouched.

// slot_mapping entries are -1 or a slot in [0, num_slots), each used once
// (two tokens writing one slot would race).
Status CheckSlotMapping(std::string_view op, const TensorView& slot_mapping,
                        int64_t num_slots);

// For every request: 0 <= seq_len <= max_blocks * block_size and the block
// ids covering its seq_len tokens are in [0, num_blocks).
Status CheckBlockTableValues(std::string_view op, const TensorView& block_table,
                             const TensorView& seq_lens, int64_t num_blocks,
                             int64_t block_size);

// Each entry of `request_of` (rows or tokens) is a request index.
Status CheckRequestIndices(std::string_view op, std::string_view arg,
                           const TensorView& request_of, int64_t num_requests);

// The physical slot of the request's token `position` (already checked).
inline int64_t SlotOf(const TensorView& block_table, int64_t request,
                      int64_t position, int64_t block_size) {
  const int32_t block = block_table.data_as<const int32_t>()[block_table.offset(
      request, position / block_size)];
  return int64_t{block} * block_size + position % block_size;
}

// ---------------------------------------------------------------------------
// Paged caches.

// The indexer K cache [num_blocks, block_size, head_dim + 4] (contiguous):
// per block, block_size * head_dim fp8 values then block_size fp32 scales.
struct IndexerKCacheRef {
  uint8_t* base;
  int64_t block_size;
  int64_t head_dim;

  explicit IndexerKCacheRef(const TensorView& k_cache)
      : base(k_cache.data_as<uint8_t>()),
        block_size(k_cache.dim(1)),
        head_dim(k_cache.dim(2) - 4) {}
  int64_t num_slots(const TensorView& k_cache) const {
    return k_cache.dim(0) * block_size;
  }
  uint8_t* values(int64_t slot) const {
    return base + (slot / block_size) * block_size * (head_dim + 4) +
           (slot % block_size) * head_dim;
  }
  uint8_t* scale(int64_t slot) const {
    return base + (slot / block_size) * block_size * (head_dim + 4) +
           block_size * head_dim + (slot % block_size) * 4;
  }
};

// The MLA latent cache (see LatentCacheFormat): one entry per slot.
struct LatentCacheRef {
  uint8_t* base;
  int64_t block_size;
  int64_t block_stride_bytes;
  int64_t slot_stride_bytes;
  LatentCacheFormat format;

  LatentCacheRef(const TensorView& kv_cache, const LatentCacheFormat& f)
      : base(kv_cache.data_as<uint8_t>()),
        block_size(kv_cache.dim(1)),
        block_stride_bytes(kv_cache.stride(0) * DTypeSize(kv_cache.dtype)),
        slot_stride_bytes(kv_cache.stride(1) * DTypeSize(kv_cache.dtype)),
        format(f) {}

  uint8_t* entry(int64_t slot) const {
    return base + (slot / block_size) * block_stride_bytes +
           (slot % block_size) * slot_stride_bytes;
  }
  // Decodes one entry into kv_lora_rank + rope_dim floats.
  void Decode(int64_t slot, const Fp8DecodeTable* table, float* out) const;
  // Encodes kv_c (kv_lora_rank) and k_pe (rope_dim) into one entry.
  void Encode(int64_t slot, const float* kv_c, const float* k_pe) const;
};

}  // namespace dsa::attention::cpu

#endif  // DSA_ATTENTION_CPU_KERNEL_UTIL_H_
