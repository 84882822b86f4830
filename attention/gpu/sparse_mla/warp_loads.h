// The warp-level body's loads (warp_body.h): the compaction of a row's
// top-k indices into cache-entry offsets, the gather of a key tile
// (cp.async) and the dequantisation of a raw fp8_ds_mla tile into bf16; and
// the body's tile constants for this backend (config.h's warp::Config).
// Device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_SPARSE_MLA_WARP_LOADS_H_
#define DSA_ATTENTION_GPU_SPARSE_MLA_WARP_LOADS_H_

#include <cstdint>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/row_access.h"

namespace dsa::attention::gpu::sparse_mla {
namespace warp {

using Mma = ::dsa::gpu::Bf16WarpMma;
using C = Config<kDsaWarpSize>;
static_assert(Mma::kM == C::Mma::kM && Mma::kN == C::Mma::kN &&
                  Mma::kK == C::Mma::kK,
              "config.h's warp::MmaShape is this backend's Bf16WarpMma");
inline constexpr int kThreads = C::kThreads;
inline constexpr int kWarps = C::kWarps;
inline constexpr int kLd = C::kLd;
inline constexpr int kTileKeys = C::kTileKeys;
inline constexpr int kSLd = C::kSLd;
inline constexpr int kPLd = C::kPLd;

// Compacts top-k indices [begin, min(begin + kThreads * kIndicesPerThread,
// end)) of row t into slots[] (cache-entry byte offsets, in index order)
// and returns their number. Starts and ends with a barrier.
template <int kIndicesPerThread>
__device__ __forceinline__ int CompactChunk(const SparseMlaParams& p, int64_t t,
                                            const RowRequest& rr, int begin,
                                            int end, int64_t* slots,
                                            int* scan) {
  const int tid = threadIdx.x;
  const int lane = tid % kDsaWarpSize, warp = tid / kDsaWarpSize;
  int64_t off[kIndicesPerThread];
  int n = 0;
  const int32_t* row = p.topk_indices + t * p.topk_stride;
#pragma unroll
  for (int j = 0; j < kIndicesPerThread; ++j) {
    const int i = begin + tid * kIndicesPerThread + j;
    if (i < end && rr.request >= 0) {
      const int64_t o = EntryOffset(p, rr, row[i]);
      if (o >= 0) off[n++] = o;
    }
  }
  // Block-wide exclusive scan of n.
  int inclusive = n;
#pragma unroll
  for (int d = 1; d < kDsaWarpSize; d *= 2) {
    const int v = DSA_SHFL_UP(inclusive, d, kDsaWarpSize);
    if (lane >= d) inclusive += v;
  }
  __syncthreads();  // the previous chunk's slots and scan are no longer read
  if (lane == kDsaWarpSize - 1) scan[warp] = inclusive;
  __syncthreads();
  int base = 0, total = 0;
  for (int w = 0; w < kWarps; ++w) {
    const int s = scan[w];
    if (w < warp) base += s;
    total += s;
  }
  base += inclusive - n;
#pragma unroll
  for (int j = 0; j < kIndicesPerThread; ++j) {
    if (j < n) slots[base + j] = off[j];
  }
  __syncthreads();
  return total;
}

// Starts the gather of keys [first, first + kTileKeys) of the compacted list
// (count entries valid) into the tile at `dst` (bf16 cache: the bf16 tile;
// fp8 cache: the raw entries). Keys past count are zero-filled.
template <bool kFp8>
__device__ __forceinline__ void GatherTile(const SparseMlaParams& p,
                                           const int64_t* slots, int first,
                                           int count, uint8_t* dst) {
  constexpr int kChunks = (kFp8 ? kFp8EntryBytes : kDim * 2) / 16;
  constexpr int kDstStride = kFp8 ? kFp8EntryBytes : kLd * 2;
  // A warp copies whole entries, its lanes consecutive 16-byte chunks: one
  // slot lookup per entry and no index division.
  const int lane = threadIdx.x % kDsaWarpSize,
            warp = threadIdx.x / kDsaWarpSize;
  for (int key = warp; key < kTileKeys; key += kWarps) {
    const bool valid = first + key < count;
    const uint8_t* src = valid ? p.kv_cache + slots[first + key] : p.kv_cache;
    uint8_t* d = dst + key * kDstStride;
#pragma unroll
    for (int c = lane; c < kChunks; c += kDsaWarpSize) {
      CopyAsync16(d + c * 16, valid ? src + c * 16 : src, valid);
    }
  }
  CopyAsyncCommit();
}

// Dequantises a raw fp8_ds_mla tile into the bf16 key tile (exact: fp8
// values times power-of-two scales fit bf16). 16 codes per step; the bf16
// rope part is copied.
template <Fp8Format F>
__device__ __forceinline__ void DequantTile(const uint8_t* raw,
                                            uint16_t* keys) {
  constexpr int kCodeChunks = kLora / 16;
  for (int w = threadIdx.x; w < kTileKeys * kCodeChunks; w += kThreads) {
    const int key = w / kCodeChunks, part = w % kCodeChunks;
    const uint8_t* entry = raw + key * kFp8EntryBytes;
    const uint4 codes = *reinterpret_cast<const uint4*>(entry + part * 16);
    const float scale =
        *reinterpret_cast<const float*>(entry + kLora + 4 * (part * 16 / 128));
    const uint32_t in[4] = {codes.x, codes.y, codes.z, codes.w};
    uint32_t out[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      out[i] = Fp8PairToBf16<F>(in[i / 2] >> (16 * (i % 2)), scale);
    }
    uint4* d = reinterpret_cast<uint4*>(keys + key * kLd + part * 16);
    d[0] = make_uint4(out[0], out[1], out[2], out[3]);
    d[1] = make_uint4(out[4], out[5], out[6], out[7]);
  }
  constexpr int kRopeChunks = kRope / 8;
  for (int w = threadIdx.x; w < kTileKeys * kRopeChunks; w += kThreads) {
    const int key = w / kRopeChunks, r = w % kRopeChunks;
    *reinterpret_cast<uint4*>(keys + key * kLd + kLora + r * 8) =
        *reinterpret_cast<const uint4*>(raw + key * kFp8EntryBytes + kLora +
                                        4 * kFp8Tiles + r * 16);
  }
}

// AMD's layout (Layout::kLdsForm): a warp's Q fragments for its head
// group and dim slice, straight from global memory (no Q in LDS), rounded
// to bf16; heads past the last are zeros. The A layout of the 32x32x8 MFMA:
// lane l holds head row l % 32 at dims (l / 32) * 4 .. + 3 of each k-step.
template <class M, class L, int kSteps>
__device__ __forceinline__ void LoadQFragments(const SparseMlaParams& p,
                                               int64_t t, int h0, int group,
                                               int dim_slice, int lane,
                                               typename M::A (&q)[kSteps]) {
  static_assert(M::kM == 32 && M::kK == 8, "the 32x32x8 layout");
  static_assert(kSteps * M::kK == L::kQkDims, "the warp's whole dim slice");
  const int head = h0 + group * M::kM + lane % 32;
  const int d0 = dim_slice * L::kQkDims + (lane / 32) * 4;
  const int64_t row = t * p.q_token_stride + head * p.q_head_stride + d0;
  // One branch on the format, not one per element.
  const bool bf16 = p.q_format == FloatFormat::kBFloat16;
  const bool here = head < p.heads;
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t at = row + i * M::kK + j;
      v[j] = !here  ? 0.0f
             : bf16 ? Bf16ToFloat(static_cast<const uint16_t*>(p.q)[at])
                    : static_cast<const float*>(p.q)[at];
    }
    M::SetA(q[i], v);
  }
}

}  // namespace warp
}  // namespace dsa::attention::gpu::sparse_mla

#endif  // DSA_ATTENTION_GPU_SPARSE_MLA_WARP_LOADS_H_
