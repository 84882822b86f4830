// The kernels before the attention: the latent gather (paged cache ->
// contiguous bf16 scratch rows), the bf16 conversion of fp32 or unaligned
// inputs, and the split of kv_b_proj into W_UK and W_UV for the vendor GEMM.
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_PROLOGUE_KERNELS_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_PROLOGUE_KERNELS_H_

#include <cstdint>
#include <type_traits>

#include "attention/gpu/dense_mha/attention_args.h"
#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/dense_mha/plan.h"
#include "attention/gpu/device/formats.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"

namespace dsa::attention::gpu::dense_mha {

using ::dsa::gpu::DecodeFp8;
using ::dsa::gpu::FloatToBf16;
using ::dsa::gpu::Fp8Format;
using ::dsa::gpu::PackBf16x2;

// Latent entries -> bf16 rows kv_c | k_pe (lat_ld elements apart); rows
// from seq_len to the next multiple of kKeyAlign are zero. Each thread
// moves kVec consecutive elements of a row at a time: 8 (16-byte stores;
// heuristics.h's GatherVectorElems says when the layout allows) or 2. A
// chunk never straddles kv_c and k_pe (lora % 8 == 0), nor two fp8 scale
// tiles (128 values). Grid: (latent rows / kGatherRows, requests). Block
// (0, 0) also zeroes the persistent attention's tile counter
// (attention_args.h), which the attention, later on the same stream, counts
// up from.
template <int kEncoding, int kVec>
__global__ void __launch_bounds__(kGatherThreads)
    GatherLatentKernel(const uint8_t* __restrict__ cache, int64_t entry_bytes,
                       int64_t num_blocks, int32_t block_size,
                       const int32_t* __restrict__ block_table,
                       int64_t table_stride, int32_t max_blocks,
                       const Meta meta, int32_t lora, int32_t rope,
                       uint16_t* __restrict__ lat, int64_t lat_ld,
                       int32_t* __restrict__ tile_counter) {
  static_assert(kVec == 2 || kVec == 8, "bf16 pairs or 16-byte chunks");
  using Chunk = std::conditional_t<kVec == 8, uint4, uint32_t>;
  constexpr int kWords = kVec / 2;  // bf16 pairs a chunk
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    *tile_counter = 0;
  }
  const RequestInfo req = MetaRequest(meta, blockIdx.y);
  const int chunks = (lora + rope) / kVec;  // per row
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kGatherRows;
  const int64_t padded = (static_cast<int64_t>(req.seq_len) + kKeyAlign - 1) /
                         kKeyAlign * kKeyAlign;
  for (int idx = threadIdx.x; idx < kGatherRows * chunks;
       idx += kGatherThreads) {
    const int64_t j = j0 + idx / chunks;
    if (j >= padded) break;               // rows are in increasing order
    const int e = (idx % chunks) * kVec;  // first element of the chunk
    Chunk* dst = reinterpret_cast<Chunk*>(lat + (req.kv_row + j) * lat_ld + e);
    if (j >= req.seq_len) {
      *dst = Chunk{};
      continue;
    }
    const int64_t col = j / block_size;
    int64_t block = block_table[req.table_row * table_stride +
                                (col < max_blocks ? col : max_blocks - 1)];
    block = block < 0 ? 0 : (block >= num_blocks ? num_blocks - 1 : block);
    const uint8_t* entry =
        cache + (block * block_size + j % block_size) * entry_bytes;
    if constexpr (kEncoding == static_cast<int>(LatentCacheType::kBFloat16)) {
      *dst = *reinterpret_cast<const Chunk*>(entry + 2 * e);
    } else {
      constexpr Fp8Format kF =
          kEncoding == static_cast<int>(LatentCacheType::kFp8E4m3fn)
              ? Fp8Format::kE4m3fn
              : Fp8Format::kE4m3fnuz;
      const int tiles = lora / 128;
      if (e < lora) {
        const float scale =
            reinterpret_cast<const float*>(entry + lora)[e / 128];
        uint32_t codes[(kVec + 3) / 4];
        if constexpr (kVec == 8) {
          const uint2 raw = *reinterpret_cast<const uint2*>(entry + e);
          codes[0] = raw.x;
          codes[1] = raw.y;
        } else {
          codes[0] = *reinterpret_cast<const uint16_t*>(entry + e);
        }
        uint32_t out[kWords];
#pragma unroll
        for (int k = 0; k < kWords; ++k) {
          const uint32_t pair = codes[k / 2] >> (16 * (k % 2));
          // fp8 times a power of two: exact in bf16.
          out[k] = PackBf16x2(DecodeFp8<kF>(pair & 0xffu) * scale,
                              DecodeFp8<kF>((pair >> 8) & 0xffu) * scale);
        }
        Chunk c;
        __builtin_memcpy(&c, out, sizeof(c));
        *dst = c;
      } else {
        *dst = *reinterpret_cast<const Chunk*>(entry + lora + 4 * tiles +
                                               2 * (e - lora));
      }
    }
  }
}

// n values -> bf16 bits (fp32 rounded to nearest even, bf16 copied).
template <typename T>
__global__ void ToBf16Kernel(const T* __restrict__ in,
                             uint16_t* __restrict__ out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(T) == 4) {
      out[i] = FloatToBf16(in[i]);
    } else {
      out[i] = in[i];
    }
  }
}

// kv_b_proj [heads, nope + v, lora] (fp32 or bf16, any alignment) -> bf16
// W_UK [heads * nope, lora] and W_UV [heads * v, lora], both contiguous, for
// the vendor GEMM (which takes one row stride per operand, not row groups).
// Each thread moves 8 consecutive elements of a row (lora % 8 == 0).
template <typename T>
__global__ void SplitWeightsKernel(const T* __restrict__ w,
                                   uint16_t* __restrict__ wk,
                                   uint16_t* __restrict__ wv, int64_t rows,
                                   int32_t nope, int32_t v, int32_t lora) {
  const int64_t chunks_per_row = lora / 8;
  const int64_t total = rows * chunks_per_row;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       c < total; c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = c / chunks_per_row;
    const int col = static_cast<int>(c % chunks_per_row) * 8;
    const int64_t head = row / (nope + v);
    const int j = static_cast<int>(row % (nope + v));
    uint16_t* dst = j < nope ? wk + (head * nope + j) * lora + col
                             : wv + (head * v + (j - nope)) * lora + col;
    const T* src = w + row * lora + col;
    uint32_t packed[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (sizeof(T) == 4) {
        packed[i] = PackBf16x2(src[2 * i], src[2 * i + 1]);
      } else {
        packed[i] = static_cast<uint32_t>(src[2 * i]) |
                    (static_cast<uint32_t>(src[2 * i + 1]) << 16);
      }
    }
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_PROLOGUE_KERNELS_H_
