// The former indexer top-k kernel, kept beside the new one (topk.hip.cc) to
// time the two in one call; the path "legacy" runs it.
//
// One block per row. Logits map to 32-bit keys whose unsigned order is the
// selection order (value descending becomes key descending; -0 equals +0; NaN
// is the lowest key). A radix select over three digits (11, 11 and 10 bits,
// most significant first; each a shared-memory histogram of the keys that
// match the digits chosen so far) finds the k-th largest key T and how many
// keys equal to T are taken. A last pass keeps the keys above T and the first
// of those equal to T in index order (the lower index wins a tie), and writes
// their positions in ascending order with a block-wide prefix sum, so the
// output needs no sort. A window that fits in shared memory is staged there
// once as keys; a longer one is re-read from global memory (L2) each pass.
//
// Blocks start with the last rows: with causal windows they are the longest.
#include <cstdint>

#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/indexer/params.h"

namespace dsa::attention::gpu::indexer {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / kDsaWarpSize;
constexpr int kStageKeys = 8192;  // 32 KB of staged keys
constexpr int kMaxBins = 2048;
constexpr int kItemsPerThread = 8;  // consecutive keys per thread, last pass

__device__ __forceinline__ uint32_t OrderKey(float v) {
  uint32_t u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0;  // NaN
  if (u == 0x80000000u) u = 0;                    // -0 ranks as +0
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum over the block; *total receives the block's sum.
// Every thread must call it.
__device__ __forceinline__ uint32_t BlockExclusiveSum(uint32_t v,
                                                      uint32_t* warp_sums,
                                                      uint32_t* total) {
  const int lane = threadIdx.x % kDsaWarpSize;
  const int warp = threadIdx.x / kDsaWarpSize;
  uint32_t inclusive = v;
#pragma unroll
  for (int offset = 1; offset < kDsaWarpSize; offset *= 2) {
    const uint32_t other = DSA_SHFL_UP(inclusive, offset, kDsaWarpSize);
    if (lane >= offset) inclusive += other;
  }
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == kDsaWarpSize - 1) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    uint32_t s = lane < kWarps ? warp_sums[lane] : 0;
#pragma unroll
    for (int offset = 1; offset < kDsaWarpSize; offset *= 2) {
      const uint32_t other = DSA_SHFL_UP(s, offset, kDsaWarpSize);
      if (lane >= offset) s += other;
    }
    if (lane < kWarps) warp_sums[lane] = s;  // inclusive over warps
  }
  __syncthreads();
  *total = warp_sums[kWarps - 1];
  const uint32_t warp_before = warp == 0 ? 0 : warp_sums[warp - 1];
  return warp_before + inclusive - v;
}

__global__ void __launch_bounds__(kThreads)
    IndexerTopKLegacyKernel(IndexerTopKParams p) {
  __shared__ uint32_t staged[kStageKeys];
  __shared__ uint32_t hist[kMaxBins];
  __shared__ uint32_t warp_sums[kWarps];
  __shared__ uint32_t chosen_bin;
  __shared__ uint32_t chosen_remaining;
  __shared__ uint32_t chosen_count;

  const int tid = threadIdx.x;
  const int64_t row = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  // Windows lie within [0, width) and their ends are int32, so row-local
  // indices fit 32 bits (cheaper than 64-bit index math in every pass).
  const int64_t width = p.width < 0x7fffffff ? p.width : 0x7fffffff;
  int64_t start64 = p.row_key_start[row];
  int64_t end64 = p.row_key_end[row];
  start64 = start64 < 0 ? 0 : (start64 > width ? width : start64);
  end64 = end64 < start64 ? start64 : (end64 > width ? width : end64);
  const int32_t start = static_cast<int32_t>(start64);
  const int32_t n = static_cast<int32_t>(end64 - start64);
  int32_t* out = p.topk_indices + row * p.topk_stride;
  const int topk = p.topk;

  if (n <= topk) {
    // Every key is selected, already in ascending order.
    for (int j = tid; j < topk; j += kThreads) {
      out[j] = j < n ? start + j : -1;
    }
    return;
  }

  const float* src = p.logits + row * p.logits_stride + start;
  const bool stage = n <= kStageKeys;
  auto key_at = [&](int32_t j) -> uint32_t {
    return stage ? staged[j] : OrderKey(src[j]);
  };

  // Radix select of the k-th largest key. The first round's histogram is
  // built while the window is staged.
  uint32_t prefix = 0;
  uint32_t prefix_mask = 0;
  uint32_t remaining = static_cast<uint32_t>(topk);
  int resolved_shift = 32;  // keys agree with the threshold above this bit
  // Digits of 11, 11 and 10 bits, most significant first.
  constexpr int kFirstShift = 21;
  for (int b = tid; b < (1 << 11); b += kThreads) hist[b] = 0;
  __syncthreads();
  for (int32_t j = tid; j < n; j += kThreads) {
    const uint32_t u = OrderKey(src[j]);
    if (stage) staged[j] = u;
    atomicAdd(&hist[u >> kFirstShift], 1u);
  }
  __syncthreads();
  for (int round = 0; round < 3; ++round) {
    const int shift = round == 0 ? kFirstShift : (round == 1 ? 10 : 0);
    const int bins = round < 2 ? 2048 : 1024;
    const uint32_t digit_mask = static_cast<uint32_t>(bins - 1);
    if (round > 0) {
      for (int b = tid; b < bins; b += kThreads) hist[b] = 0;
      __syncthreads();
      for (int32_t j = tid; j < n; j += kThreads) {
        const uint32_t u = key_at(j);
        if ((u & prefix_mask) == prefix) {
          atomicAdd(&hist[(u >> shift) & digit_mask], 1u);
        }
      }
      __syncthreads();
    }
    // Thread t owns `per` bins, highest first, so a prefix sum over threads
    // counts the keys in higher bins.
    const int per = bins / kThreads;
    uint32_t counts[kMaxBins / kThreads];
    uint32_t mine = 0;
#pragma unroll
    for (int i = 0; i < kMaxBins / kThreads; ++i) {
      counts[i] = i < per ? hist[bins - 1 - (tid * per + i)] : 0;
      mine += counts[i];
    }
    uint32_t total;
    uint32_t above = BlockExclusiveSum(mine, warp_sums, &total);
#pragma unroll
    for (int i = 0; i < kMaxBins / kThreads; ++i) {
      if (i < per && above < remaining && above + counts[i] >= remaining) {
        chosen_bin = static_cast<uint32_t>(bins - 1 - (tid * per + i));
        chosen_remaining = remaining - above;
        chosen_count = counts[i];
      }
      above += counts[i];
    }
    __syncthreads();
    prefix |= chosen_bin << shift;
    prefix_mask |= digit_mask << shift;
    remaining = chosen_remaining;
    resolved_shift = shift;
    const bool whole_bin = chosen_count == remaining;
    __syncthreads();  // chosen_* are rewritten next round
    // Every key of the chosen bin is taken: the threshold needs no more
    // digits (keys "equal" to it are the whole bin).
    if (whole_bin) break;
  }
  const uint32_t threshold = prefix >> resolved_shift;
  const uint32_t take_equal = remaining;  // keys equal to the threshold to keep

  // Ordered compaction: keys above the threshold, and the first take_equal
  // keys equal to it.
  uint32_t base_above = 0;
  uint32_t base_equal = 0;
  for (int32_t chunk = 0; chunk < n; chunk += kThreads * kItemsPerThread) {
    const int32_t j0 = chunk + tid * kItemsPerThread;
    uint32_t keys[kItemsPerThread];
    uint32_t n_above = 0, n_equal = 0;
#pragma unroll
    for (int i = 0; i < kItemsPerThread; ++i) {
      // Only the resolved digits of a key decide (see whole_bin above).
      keys[i] = j0 + i < n ? key_at(j0 + i) >> resolved_shift : 0;
      n_above += (j0 + i < n && keys[i] > threshold) ? 1u : 0u;
      n_equal += (j0 + i < n && keys[i] == threshold) ? 1u : 0u;
    }
    // Both counts fit in 16 bits (at most kThreads * kItemsPerThread).
    uint32_t total;
    const uint32_t before =
        BlockExclusiveSum((n_above << 16) | n_equal, warp_sums, &total);
    uint32_t equal_seen = base_equal + (before & 0xffffu);
    uint32_t pos = base_above + (before >> 16) +
                   (equal_seen < take_equal ? equal_seen : take_equal);
#pragma unroll
    for (int i = 0; i < kItemsPerThread; ++i) {
      const bool valid = j0 + i < n;
      bool take = valid && keys[i] > threshold;
      if (valid && keys[i] == threshold) {
        take = equal_seen < take_equal;
        ++equal_seen;
      }
      if (take) out[pos++] = start + j0 + i;
    }
    base_above += total >> 16;
    base_equal += total & 0xffffu;
  }
}

}  // namespace

LaunchResult LaunchTopKLegacy(const IndexerTopKParams& p, hipStream_t stream) {
  hipLaunchKernelGGL(IndexerTopKLegacyKernel,
                     dim3(static_cast<unsigned>(p.rows)), dim3(kThreads), 0,
                     stream, p);
  return CheckLaunch("indexer_topk");
}

}  // namespace dsa::attention::gpu::indexer
