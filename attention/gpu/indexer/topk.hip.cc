// Indexer top-k on the GPU; see launch.h.
//
// One block a row. Logits map to 32-bit keys whose unsigned order is the
// selection order (value descending becomes key descending; -0 equals +0;
// NaN is the lowest key). The steps:
//
//   1. A histogram of coarse keys: 2048 bins of a monotone 11-bit map of the
//      key (sign, 5 exponent and 5 mantissa bits, as a float16 has, so that
//      logits of one magnitude spread over 32 bins an octave rather than the
//      4 of the key's own top 11 bits). A window that fits is staged in
//      shared memory on the way.
//   2. The threshold bin: the bin holding the k-th largest key, by a
//      block-wide prefix sum over the bins from the top. Keys in higher bins
//      are all taken (the map is monotone), keys in lower ones none.
//   3. One more walk over the row: the threshold bin's keys are gathered
//      (key and index) into shared memory, and where the row fits its bitmap
//      (config.h), a bitmap of the keys above the bin is built on the way
//      (bit v: the key at position v from the window's first quad): on a
//      staged row a thread compares a run of 16 staged keys in registers and
//      writes the run's half-word; on a streamed row a warp's vote over 32
//      consecutive keys is a word.
//   4. The gathered keys are resolved: ranked against each other when few,
//      by radix rounds (11/11/10 bits of the key, then of the index where
//      keys equal to the threshold are not all taken) when more; the taken
//      ones join the bitmap. A bin too large to gather is resolved by the
//      radix rounds over the row.
//   5. The output, in ascending order with no sort: the bitmap's positions
//      by one block-wide prefix sum of its words' counts, written to shared
//      memory first and copied out whole (scattered global writes cost more
//      than the walks); or, without a bitmap, an ordered compaction over the
//      row (the keys above the threshold key T and the first of those equal
//      to it), a block-wide prefix sum a chunk.
//
// The streamed instances guess the threshold first (kSampleShift): steps 1
// and 2 over every 8th key give a window of bins that holds the topk-th key
// unless the sample misled (3 standard deviations of its count either
// side); step 3 marks the keys above the window and gathers those in it,
// and where the window did hold the topk-th key (fewer than topk above it,
// at least topk with it) and its keys fit, step 4 resolves among them.
// Otherwise the row starts over with every key counted. A decode row then
// reads a sample and the row once, instead of the row twice.
//
// Keys are read a quad (four keys, 16 bytes) at a time from the 16-byte
// aligned quad holding the window's first key; the partial quads at either
// end of the window are read key by key. Slot s of thread t in a chunk is
// quad chunk + s * threads + t, so that a warp's loads are contiguous, and
// the chunk's prefix sum runs over (slot, warp, lane) in one pass. Step 3
// on a streamed row reads key by key, a warp's consecutive positions at a
// time, so that a vote is a word of the bitmap.
//
// Blocks start with the last rows: with causal windows they are the longest.
#include <cstdint>

#include "attention/gpu/device/features.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/indexer/config.h"
#include "attention/gpu/indexer/heuristics.h"
#include "attention/gpu/indexer/launch.h"

namespace dsa::attention::gpu {
namespace indexer {

namespace {

constexpr const char* kOp = "indexer_topk";

// Warp votes: a lane mask is 32 bits on NVIDIA, 64 on AMD.
#if defined(DSA_GPU_CUDA)
using LaneMask = unsigned;
__device__ __forceinline__ LaneMask WarpBallot(bool p) {
  return __ballot_sync(0xffffffffu, p);
}
__device__ __forceinline__ uint32_t MaskCount(LaneMask m) { return __popc(m); }
__device__ __forceinline__ int LowestLane(LaneMask m) { return __ffs(m) - 1; }
__device__ __forceinline__ uint32_t WarpBroadcast(uint32_t v, int lane) {
  return __shfl_sync(0xffffffffu, v, lane);
}
#else
using LaneMask = unsigned long long;
__device__ __forceinline__ LaneMask WarpBallot(bool p) { return __ballot(p); }
__device__ __forceinline__ uint32_t MaskCount(LaneMask m) {
  return __popcll(m);
}
__device__ __forceinline__ int LowestLane(LaneMask m) { return __ffsll(m) - 1; }
__device__ __forceinline__ uint32_t WarpBroadcast(uint32_t v, int lane) {
  return __shfl(v, lane);
}
#endif
__device__ __forceinline__ LaneMask LanesBelow() {
  return (LaneMask{1} << (threadIdx.x % kDsaWarpSize)) - 1;
}

__device__ __forceinline__ uint32_t OrderKey(float v) {
  uint32_t u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0;  // NaN
  if (u == 0x80000000u) u = 0;                    // -0 ranks as +0
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The coarse bin of a key: 1024 bins a sign, by the magnitude's exponent and
// top 5 mantissa bits over the 32 octaves from 2^-15 (smaller magnitudes
// share the bin next to zero, larger ones the outermost bin; NaN, the lowest
// key, lands in bin 0 with the largest negative values). Monotone: a higher
// bin means a strictly larger key.
constexpr int kCoarseBase = (127 - 15) << 5;
static_assert(kTopKBins == 2048, "1024 coarse bins a sign");
__device__ __forceinline__ uint32_t CoarseBin(uint32_t key) {
  const bool positive = key >= 0x80000000u;
  const uint32_t magnitude = (positive ? key : ~key) & 0x7fffffffu;
  int m = static_cast<int>(magnitude >> 18) - kCoarseBase;
  m = m < 0 ? 0 : (m > 1023 ? 1023 : m);
  return positive ? 1024u + static_cast<uint32_t>(m)
                  : 1023u - static_cast<uint32_t>(m);
}

// The lowest key of coarse bin b (b in 0..2047): a key's bin is b or higher
// exactly when the key is this or higher (CoarseBin is monotone), so that
// the walks after the histogram compare keys rather than compute bins.
__device__ __forceinline__ uint32_t CoarseLowestKey(uint32_t b) {
  if (b == 0) return 0;
  // Negative: bin b holds the magnitudes whose m is 1023 - b.
  if (b < 1024) return 0x80000000u - ((1024u - b + kCoarseBase) << 18);
  if (b == 1024) return 0x80000000u;
  return 0x80000000u | ((b - 1024u + kCoarseBase) << 18);
}

// A gathered key: ordered as the selection orders keys (larger key first,
// then the lower index), so that rank = the number of larger entries.
__device__ __forceinline__ uint64_t Candidate(uint32_t key, int32_t j) {
  return (static_cast<uint64_t>(key) << 32) | (~static_cast<uint32_t>(j));
}

// Bitmap words a warp-wide step fills.
constexpr int kWordsAStep = kDsaWarpSize / 32;

// A row's window and where its quads start.
struct TopKRow {
  const float* quads;  // 16-byte aligned: key j is quads[lead + j]
  int32_t lead;        // 0..3
  int32_t n;           // keys in the window
  int32_t num_quads;   // quads holding them
  int32_t start;       // the window's first column
  // Warp-wide steps over the positions [0, 4 * num_quads), each filling
  // kWordsAStep bitmap words (whole wavefronts: 64 bits a step on AMD).
  int32_t steps;

  __device__ bool Valid(int32_t v) const {
    return static_cast<uint32_t>(v - lead) < static_cast<uint32_t>(n);
  }
};

// Exclusive prefix sums over the block of kSlots values a thread, in
// (slot, warp, lane) order: before[s] receives the sum of the values ahead
// of the thread's slot s, the return value the block's total. Every thread
// must call it; scan holds kSlots * warps + 1 words.
template <int kThreads, int kSlots>
__device__ __forceinline__ uint32_t SlotScan(const uint32_t (&value)[kSlots],
                                             uint32_t (&before)[kSlots],
                                             uint32_t* scan) {
  constexpr int kWarps = kThreads / kDsaWarpSize;
  constexpr int kEntries = kSlots * kWarps;
  constexpr int kPerLane = (kEntries + kDsaWarpSize - 1) / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int warp = threadIdx.x / kDsaWarpSize;
  uint32_t inclusive[kSlots];
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    inclusive[s] = value[s];
#pragma unroll
    for (int offset = 1; offset < kDsaWarpSize; offset *= 2) {
      const uint32_t other = DSA_SHFL_UP(inclusive[s], offset, kDsaWarpSize);
      if (lane >= offset) inclusive[s] += other;
    }
  }
  __syncthreads();  // scan may still be read by a previous call
  if (lane == kDsaWarpSize - 1) {
#pragma unroll
    for (int s = 0; s < kSlots; ++s) scan[s * kWarps + warp] = inclusive[s];
  }
  __syncthreads();
  if (warp == 0) {
    uint32_t mine[kPerLane];
    uint32_t sum = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane * kPerLane + i;
      mine[i] = e < kEntries ? scan[e] : 0;
      sum += mine[i];
    }
    uint32_t running = sum;
#pragma unroll
    for (int offset = 1; offset < kDsaWarpSize; offset *= 2) {
      const uint32_t other = DSA_SHFL_UP(running, offset, kDsaWarpSize);
      if (lane >= offset) running += other;
    }
    if (lane == kDsaWarpSize - 1) scan[kEntries] = running;
    running -= sum;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane * kPerLane + i;
      if (e < kEntries) scan[e] = running;
      running += mine[i];
    }
  }
  __syncthreads();
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    before[s] = scan[s * kWarps + warp] + inclusive[s] - value[s];
  }
  return scan[kEntries];
}

// The bin of hist[0, bins) holding the remaining-th largest key, counting
// down from the top bin: sh.bin, the keys in the bins above it (sh.bin_above)
// and its own count (sh.bin_count). Every thread must call it; they may read
// the answer on return.
template <typename Shape>
__device__ __forceinline__ void SelectBin(const uint32_t* hist, int bins,
                                          uint32_t remaining,
                                          TopKShared<Shape>& sh) {
  // Thread t owns `per` bins, highest first, so a prefix sum over threads
  // counts the keys in higher bins.
  const int per = bins / Shape::kThreads;
  const int top = bins - 1 - static_cast<int>(threadIdx.x) * per;
  uint32_t mine[1] = {0};
  for (int i = 0; i < per; ++i) mine[0] += hist[top - i];
  uint32_t above[1];
  SlotScan<Shape::kThreads, 1>(mine, above, sh.scan);
  if (above[0] < remaining && above[0] + mine[0] >= remaining) {
    for (int i = 0; i < per; ++i) {
      const uint32_t count = hist[top - i];
      if (above[0] < remaining && above[0] + count >= remaining) {
        sh.bin = static_cast<uint32_t>(top - i);
        sh.bin_above = above[0];
        sh.bin_count = count;
      }
      above[0] += count;
    }
  }
  __syncthreads();
}

// Marks a quad not loaded whole (any value: LoadQuadEdge overwrites it).
constexpr uint32_t kEdge = 0;

// One quad's keys from global memory (0 where outside the window).
__device__ __forceinline__ void LoadQuadEdge(const TopKRow& r, int32_t q,
                                             uint32_t (&k)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int32_t v = 4 * q + e;
    k[e] = r.Valid(v) ? OrderKey(r.quads[v]) : 0u;
  }
}

// The keys of one chunk's slots, from the stage or from global memory (every
// whole quad's load issued before the first is used).
template <typename Shape, bool kStaged, int kSlots = Shape::kSlots>
__device__ __forceinline__ void LoadChunk(const TopKRow& r,
                                          const uint32_t* stage, int32_t q0,
                                          uint32_t (&k)[kSlots][4]) {
  if constexpr (kStaged) {
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int32_t q = q0 + s * Shape::kThreads + threadIdx.x;
      const uint4 u = q < r.num_quads ? reinterpret_cast<const uint4*>(stage)[q]
                                      : make_uint4(0u, 0u, 0u, 0u);
      k[s][0] = u.x;
      k[s][1] = u.y;
      k[s][2] = u.z;
      k[s][3] = u.w;
    }
  } else {
    // Whole quads' loads first, all in flight, then the edges key by key.
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int32_t q = q0 + s * Shape::kThreads + threadIdx.x;
      if (4 * q >= r.lead && 4 * q + 4 <= r.lead + r.n) {
        const float4 f = reinterpret_cast<const float4*>(r.quads)[q];
        k[s][0] = __float_as_uint(f.x);
        k[s][1] = __float_as_uint(f.y);
        k[s][2] = __float_as_uint(f.z);
        k[s][3] = __float_as_uint(f.w);
      } else {
        k[s][0] = k[s][1] = k[s][2] = k[s][3] = kEdge;
      }
    }
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int32_t q = q0 + s * Shape::kThreads + threadIdx.x;
      if (4 * q >= r.lead && 4 * q + 4 <= r.lead + r.n) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          k[s][e] = OrderKey(__uint_as_float(k[s][e]));
      } else {
        LoadQuadEdge(r, q, k[s]);
      }
    }
  }
}

// Step 1: the coarse histogram, staging the window's keys when kStaged.
template <typename Shape, bool kStaged>
__device__ void CoarseHistogram(const TopKRow& r, TopKShared<Shape>& sh) {
  constexpr int kThreads = Shape::kThreads;
  constexpr int kSlots = Shape::kLoadSlots;
  for (int32_t q0 = 0; q0 < r.num_quads; q0 += kThreads * kSlots) {
    uint32_t k[kSlots][4];
    LoadChunk<Shape, false, kSlots>(r, nullptr, q0, k);
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int32_t q = q0 + s * kThreads + threadIdx.x;
      if (q >= r.num_quads) continue;
      if (kStaged) {
        reinterpret_cast<uint4*>(sh.stage)[q] =
            make_uint4(k[s][0], k[s][1], k[s][2], k[s][3]);
      }
      if (4 * q >= r.lead && 4 * q + 4 <= r.lead + r.n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) atomicAdd(&sh.hist[CoarseBin(k[s][e])], 1u);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (r.Valid(4 * q + e)) atomicAdd(&sh.hist[CoarseBin(k[s][e])], 1u);
        }
      }
    }
  }
}

// Step 1 of a sampled row: the coarse histogram of the keys at every
// kSampleStride-th position from the window's first quad (each quad's first
// key); sampled rows are streamed.
template <typename Shape>
__device__ void SampleHistogram(const TopKRow& r, TopKShared<Shape>& sh) {
  constexpr int kThreads = Shape::kThreads;
  constexpr int kStride = Shape::kSampleStride;
  // Only the sampled keys are read, all of a chunk's loads in flight.
  constexpr int kUnroll = 2 * Shape::kLoadSlots;
  const int32_t samples = (4 * r.num_quads + kStride - 1) / kStride;
  for (int32_t i0 = 0; i0 < samples; i0 += kThreads * kUnroll) {
    uint32_t key[kUnroll];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t v = (i0 + u * kThreads + threadIdx.x) * kStride;
      valid[u] = r.Valid(v);
      key[u] = valid[u] ? OrderKey(r.quads[v]) : 0u;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (valid[u]) atomicAdd(&sh.hist[CoarseBin(key[u])], 1u);
    }
  }
}

// The keys a sampled row's histogram counted.
template <typename Shape>
__device__ __forceinline__ uint32_t SampleCount(const TopKRow& r) {
  constexpr int kStride = Shape::kSampleStride;
  return static_cast<uint32_t>((r.lead + r.n + kStride - 1) / kStride -
                               (r.lead + kStride - 1) / kStride);
}

// The window of a sampled row: bins lo..hi (sh.bin_lo, sh.bin) that should
// hold the row's topk-th largest key. Of `samples` keys, a number with mean
// m = samples * topk / n lie above that key; the window spans the sample's
// ranks m -+ (kTopKSampleSpread standard deviations + 2). Every thread must
// call it; they may read the answer on return.
template <typename Shape>
__device__ void SelectWindow(const uint32_t* hist, uint32_t samples, uint32_t n,
                             uint32_t topk, TopKShared<Shape>& sh) {
  const float p = static_cast<float>(topk) / static_cast<float>(n);
  const float mean = p * static_cast<float>(samples);
  const float spread = kTopKSampleSpread * sqrtf(mean * (1.0f - p)) + 2.0f;
  // Ranks 1.. from the top; 0: no such rank (the window reaches the top
  // bin, or the bottom one).
  const float hi_rank = floorf(mean - spread);
  const float lo_rank = ceilf(mean + spread);
  const uint32_t t_hi = hi_rank >= 1.0f ? static_cast<uint32_t>(hi_rank) : 0u;
  const uint32_t t_lo = lo_rank <= static_cast<float>(samples)
                            ? static_cast<uint32_t>(lo_rank)
                            : 0u;
  const int per = kTopKBins / Shape::kThreads;
  const int top = kTopKBins - 1 - static_cast<int>(threadIdx.x) * per;
  uint32_t mine[1] = {0};
  for (int i = 0; i < per; ++i) mine[0] += hist[top - i];
  if (threadIdx.x == 0) {
    sh.bin = kTopKBins - 1;
    sh.bin_lo = 0;
  }
  uint32_t above[1];
  SlotScan<Shape::kThreads, 1>(mine, above, sh.scan);
  if (mine[0] > 0) {
    uint32_t a = above[0];
    for (int i = 0; i < per; ++i) {
      const uint32_t count = hist[top - i];
      if (a < t_hi && a + count >= t_hi)
        sh.bin = static_cast<uint32_t>(top - i);
      if (a < t_lo && a + count >= t_lo) {
        sh.bin_lo = static_cast<uint32_t>(top - i);
      }
      a += count;
    }
  }
  __syncthreads();
}

// Calls f(key) for every key of the row in coarse bin `bin`.
template <typename Shape, bool kStaged, typename F>
__device__ __forceinline__ void ForEachInBin(const TopKRow& r, uint32_t bin,
                                             const uint32_t* stage, F&& f) {
  for (int32_t q0 = 0; q0 < r.num_quads; q0 += Shape::kChunkQuads) {
    uint32_t k[Shape::kSlots][4];
    LoadChunk<Shape, kStaged>(r, stage, q0, k);
#pragma unroll
    for (int s = 0; s < Shape::kSlots; ++s) {
      const int32_t q = q0 + s * Shape::kThreads + threadIdx.x;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (r.Valid(4 * q + e) && CoarseBin(k[s][e]) == bin) f(k[s][e]);
      }
    }
  }
}

// Step 3 without a bitmap: the threshold bin's keys into sh.candidates (in no
// particular order; the resolution does not depend on it), a warp's at a time.
// A chunk is first reduced to one bit a key (in the bin or not); a key in the
// bin is read again to be stored (they are few).
template <typename Shape, bool kStaged>
__device__ void GatherBin(const TopKRow& r, uint32_t bin,
                          TopKShared<Shape>& sh) {
  static_assert(Shape::kSlots * 4 <= 32, "a chunk's bits fit a word");
  const int lane = threadIdx.x % kDsaWarpSize;
  for (int32_t q0 = 0; q0 < r.num_quads; q0 += Shape::kChunkQuads) {
    uint32_t in_bin = 0;
    {
      uint32_t k[Shape::kSlots][4];
      LoadChunk<Shape, kStaged>(r, sh.stage, q0, k);
#pragma unroll
      for (int s = 0; s < Shape::kSlots; ++s) {
        const int32_t q = q0 + s * Shape::kThreads + threadIdx.x;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (r.Valid(4 * q + e) && CoarseBin(k[s][e]) == bin) {
            in_bin |= 1u << (4 * s + e);
          }
        }
      }
    }
    // Whole warps skip chunks with nothing in the bin.
    if (WarpBallot(in_bin != 0) == 0) continue;
#pragma unroll 1
    for (int s = 0; s < Shape::kSlots; ++s) {
      const int32_t q = q0 + s * Shape::kThreads + threadIdx.x;
#pragma unroll 1
      for (int e = 0; e < 4; ++e) {
        const bool take = (in_bin >> (4 * s + e)) & 1u;
        const LaneMask mask = WarpBallot(take);
        if (mask == 0) continue;  // the whole warp's
        const int leader = LowestLane(mask);
        uint32_t base = 0;
        if (lane == leader) {
          base = atomicAdd(&sh.candidate_count, MaskCount(mask));
        }
        base = WarpBroadcast(base, leader);
        if (take) {
          const int32_t v = 4 * q + e;
          const uint32_t key = kStaged ? sh.stage[v] : OrderKey(r.quads[v]);
          sh.candidates[base + MaskCount(mask & LanesBelow())] =
              Candidate(key, v - r.lead);
        }
      }
    }
  }
}

// Appends the lanes' entries that `take` (in the warp's vote `mask`) to
// sh.candidates, one shared-memory atomic a warp. Every lane must call it.
template <typename Shape>
__device__ __forceinline__ void AppendCandidates(LaneMask mask, bool take,
                                                 uint64_t entry,
                                                 TopKShared<Shape>& sh) {
  if (mask == 0) return;  // the whole warp's
  const int leader = LowestLane(mask);
  uint32_t base = 0;
  if (static_cast<int>(threadIdx.x % kDsaWarpSize) == leader) {
    base = atomicAdd(&sh.candidate_count, MaskCount(mask));
  }
  base = WarpBroadcast(base, leader);
  // (A sampled window may hold more keys than fit: counted, not stored.)
  const uint32_t slot = base + MaskCount(mask & LanesBelow());
  if (take && slot < static_cast<uint32_t>(Shape::kCandidates)) {
    sh.candidates[slot] = entry;
  }
}

// Step 3 with a bitmap over a streamed row: warp-wide steps over the row's
// positions, a key a lane; each step's vote on "above bin hi" is its bitmap
// words (every word of the row is written), and the keys in bins lo..hi are
// gathered. Each warp's count of the keys above goes to sh.warp_above.
template <typename Shape>
__device__ void MarkAboveAndGather(const TopKRow& r, uint32_t lo, uint32_t hi,
                                   TopKShared<Shape>& sh) {
  constexpr int kWarps = Shape::kThreads / kDsaWarpSize;
  // Loads in flight a lane: more from global memory (L2 latency); half as
  // many on AMD's 64-wide wavefronts.
  constexpr int kUnroll = 2 * Shape::kLoadSlots * 32 / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int warp = threadIdx.x / kDsaWarpSize;
  // Keys above bin hi are those above its last key; bins lo..hi hold the
  // keys from lo's lowest to that one.
  const uint32_t last_key =
      hi + 1 < kTopKBins ? CoarseLowestKey(hi + 1) - 1 : 0xffffffffu;
  const uint32_t first_key = CoarseLowestKey(lo);
  uint32_t above_count = 0;  // lane 0's
  for (int32_t first = warp; first < r.steps; first += kWarps * kUnroll) {
    uint32_t key[kUnroll];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t v = (first + u * kWarps) * kDsaWarpSize + lane;
      valid[u] = first + u * kWarps < r.steps && r.Valid(v);
      key[u] = 0;
      if (valid[u]) key[u] = OrderKey(r.quads[v]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t step = first + u * kWarps;
      if (step >= r.steps) break;  // the whole warp's
      const LaneMask above = WarpBallot(valid[u] && key[u] > last_key);
      const bool take = valid[u] && key[u] >= first_key && key[u] <= last_key;
      const LaneMask in_bin = WarpBallot(take);
      if (lane == 0) {
        above_count += MaskCount(above);
#pragma unroll
        for (int w = 0; w < kWordsAStep; ++w) {
          sh.selected[step * kWordsAStep + w] =
              static_cast<uint32_t>(above >> (32 * w));
        }
      }
      const int32_t v = step * kDsaWarpSize + lane;
      AppendCandidates<Shape>(in_bin, take, Candidate(key[u], v - r.lead), sh);
    }
  }
  if (lane == 0) sh.warp_above[warp] = above_count;
}

// Step 3 with a bitmap over a staged row, a thread a run of 16 positions
// (four quads) rather than a lane a key: the keys are compared in registers
// and packed into the run's half-word of the bitmap (bit i: the key at
// position 16 h + i is above bin hi), written whole, and the run's keys in
// bins lo..hi are gathered by the threads that hold any. A thread reads its
// quads starting at quad (t / 2) % 4 of its run, so that the 16-byte reads
// of a quarter-warp fall in distinct banks. The stage holds 0, the lowest
// key, at the positions of partial quads outside the window.
template <typename Shape>
__device__ void MarkAboveAndGatherStaged(const TopKRow& r, uint32_t lo,
                                         uint32_t hi, TopKShared<Shape>& sh) {
  static_assert(Shape::kSampleShift == 0, "no per-warp counts kept");
  const uint32_t last_key =
      hi + 1 < kTopKBins ? CoarseLowestKey(hi + 1) - 1 : 0xffffffffu;
  const uint32_t first_key = CoarseLowestKey(lo);
  const int32_t halves = 2 * r.steps * kWordsAStep;
  const int rot = (threadIdx.x / 2) % 4;
  uint16_t* half_words = reinterpret_cast<uint16_t*>(sh.selected);
  const uint4* stage = reinterpret_cast<const uint4*>(sh.stage);
  for (int32_t h = threadIdx.x; h < halves; h += Shape::kThreads) {
    // Nibble j: quad (j + rot) % 4; in_bins first holds the keys of bin lo
    // or higher.
    uint32_t above = 0, in_bins = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int32_t q = 4 * h + ((j + rot) % 4);
      const uint4 u = q < r.num_quads ? stage[q] : make_uint4(0u, 0u, 0u, 0u);
      const uint32_t k[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (k[e] > last_key) above |= 1u << (4 * j + e);
        if (k[e] >= first_key) in_bins |= 1u << (4 * j + e);
      }
    }
    // To position order: nibble j moves to nibble (j + rot) % 4.
    const int shift = 4 * rot;
    above = ((above << shift) | (above >> (16 - shift))) & 0xffffu;
    in_bins = ((in_bins << shift) | (in_bins >> (16 - shift))) & 0xffffu;
    const int32_t p0 = 16 * h;
    const int32_t from = min(max(r.lead - p0, 0), 16);
    const int32_t to = min(max(r.lead + r.n - p0, 0), 16);
    const uint32_t valid = ((1u << to) - 1u) & ~((1u << from) - 1u);
    half_words[h] = static_cast<uint16_t>(above & valid);
    in_bins &= valid & ~above;
    if (in_bins != 0) {
      uint32_t slot = atomicAdd(&sh.candidate_count, __popc(in_bins));
      do {
        const int32_t v = p0 + __ffs(in_bins) - 1;
        sh.candidates[slot++] = Candidate(sh.stage[v], v - r.lead);
        in_bins &= in_bins - 1;
      } while (in_bins != 0);
    }
  }
}

// Sets the bitmap bit of the key at row index j.
template <typename Shape>
__device__ __forceinline__ void MarkSelected(const TopKRow& r, int32_t j,
                                             TopKShared<Shape>& sh) {
  const int32_t v = j + r.lead;
  atomicOr(&sh.selected[v >> 5], 1u << (v & 31));
}

// Step 4, few candidates: each one's rank among them (how many come
// first: a larger key, or an equal key at a lower index), found by `group`
// threads a candidate. The one of rank remaining - 1 is the last taken: its
// key is T, and the candidates equal to it that are taken are the remaining
// ones after those with larger keys.
template <typename Shape>
__device__ void RankResolve(const TopKRow& r, uint32_t count,
                            uint32_t remaining, bool mark,
                            TopKShared<Shape>& sh, uint32_t* threshold,
                            uint32_t* take_equal) {
  uint32_t group = 1;
  while (group < kDsaWarpSize && 2 * group * count <= Shape::kThreads) {
    group *= 2;
  }
  const uint32_t per_round = Shape::kThreads / group;
  const uint32_t sub = threadIdx.x % group;
  for (uint32_t first = 0; first < count; first += per_round) {
    const uint32_t i = first + threadIdx.x / group;
    const bool live = i < count;
    const uint64_t mine = live ? sh.candidates[i] : 0;
    const uint32_t key = static_cast<uint32_t>(mine >> 32);
    uint32_t ahead = 0;   // entries ordered before this one
    uint32_t larger = 0;  // entries with a larger key
    if (live) {
      for (uint32_t m = sub; m < count; m += group) {
        const uint64_t other = sh.candidates[m];
        ahead += other > mine ? 1u : 0u;
        larger += static_cast<uint32_t>(other >> 32) > key ? 1u : 0u;
      }
    }
    for (uint32_t offset = 1; offset < group; offset *= 2) {
      ahead += DSA_SHFL_XOR(ahead, static_cast<int>(offset), kDsaWarpSize);
      larger += DSA_SHFL_XOR(larger, static_cast<int>(offset), kDsaWarpSize);
    }
    if (live && sub == 0 && ahead < remaining && mark) {
      MarkSelected<Shape>(r, static_cast<int32_t>(~static_cast<uint32_t>(mine)),
                          sh);
    }
    if (live && sub == 0 && ahead == remaining - 1) {
      sh.threshold = key;
      sh.take_equal = remaining - larger;
    }
  }
  __syncthreads();
  *threshold = sh.threshold;
  *take_equal = sh.take_equal;
}

// Step 4, more candidates (or the whole row): radix rounds of 11, 11 and 10
// bits over the keys for_each_key visits, down to the exact threshold key
// and the number of keys equal to it that are taken.
template <typename Shape, typename ForEachKey>
__device__ void RadixResolve(ForEachKey&& for_each_key, uint32_t remaining,
                             TopKShared<Shape>& sh, uint32_t* threshold,
                             uint32_t* take_equal,
                             uint32_t* equal_count = nullptr) {
  uint32_t prefix = 0;
  uint32_t prefix_mask = 0;
#pragma unroll 1
  for (int round = 0; round < 3; ++round) {
    const int shift = round == 0 ? 21 : (round == 1 ? 10 : 0);
    const int bins = round < 2 ? kTopKBins : kTopKBins / 2;
    const uint32_t digit = static_cast<uint32_t>(bins - 1);
    for (int b = threadIdx.x; b < bins; b += Shape::kThreads) sh.hist[b] = 0;
    __syncthreads();
    for_each_key([&](uint32_t key) {
      if ((key & prefix_mask) == prefix) {
        atomicAdd(&sh.hist[(key >> shift) & digit], 1u);
      }
    });
    __syncthreads();
    SelectBin<Shape>(sh.hist, bins, remaining, sh);
    prefix |= sh.bin << shift;
    prefix_mask |= digit << shift;
    remaining -= sh.bin_above;
  }
  *threshold = prefix;
  *take_equal = remaining;
  // The last round's bin holds exactly the keys equal to the threshold.
  if (equal_count != nullptr) *equal_count = sh.bin_count;
}

// Step 4 for more candidates than ranking takes, with a bitmap: the
// threshold key T by radix rounds over the candidates' keys; where not
// every candidate equal to T is taken, the last index taken among them by
// radix rounds over their indices (largest ~index first: the lower index
// wins); then the taken candidates join the bitmap.
template <typename Shape>
__device__ void RadixResolveAndMark(const TopKRow& r, uint32_t count,
                                    uint32_t remaining, TopKShared<Shape>& sh) {
  uint32_t threshold = 0, take_equal = 0, equal_count = 0;
  RadixResolve<Shape>(
      [&](auto&& f) {
        for (uint32_t i = threadIdx.x; i < count; i += Shape::kThreads) {
          f(static_cast<uint32_t>(sh.candidates[i] >> 32));
        }
      },
      remaining, sh, &threshold, &take_equal, &equal_count);
  uint32_t last_not_index = 0;  // ~(the last index taken among keys == T)
  if (take_equal < equal_count) {
    uint32_t unused = 0;
    RadixResolve<Shape>(
        [&](auto&& f) {
          for (uint32_t i = threadIdx.x; i < count; i += Shape::kThreads) {
            const uint64_t c = sh.candidates[i];
            if (static_cast<uint32_t>(c >> 32) == threshold) {
              f(static_cast<uint32_t>(c));
            }
          }
        },
        take_equal, sh, &last_not_index, &unused);
  }
  for (uint32_t i = threadIdx.x; i < count; i += Shape::kThreads) {
    const uint64_t c = sh.candidates[i];
    const uint32_t key = static_cast<uint32_t>(c >> 32);
    const uint32_t not_index = static_cast<uint32_t>(c);
    if (key > threshold || (key == threshold && not_index >= last_not_index)) {
      MarkSelected<Shape>(r, static_cast<int32_t>(~not_index), sh);
    }
  }
}

// Step 5 without a bitmap: the keys above the threshold and the first
// take_equal keys equal to it, as ascending columns. A chunk is reduced to two
// bits a key (above, equal) before its prefix sum, so that no key is held
// across it.
template <typename Shape, bool kStaged>
__device__ void Compact(const TopKRow& r, uint32_t threshold,
                        uint32_t take_equal, uint32_t topk, int32_t* out,
                        TopKShared<Shape>& sh) {
  static_assert(Shape::kSlots * 4 <= 32, "a chunk's bits fit a word");
  const uint32_t all_above = topk - take_equal;
  uint32_t base_above = 0;
  uint32_t base_equal = 0;
  for (int32_t q0 = 0; q0 < r.num_quads; q0 += Shape::kChunkQuads) {
    uint32_t above_bits = 0, equal_bits = 0;
    // Both counts of a slot and of the chunk fit in 16 bits (config.h).
    uint32_t counts[Shape::kSlots];
    {
      uint32_t k[Shape::kSlots][4];
      LoadChunk<Shape, kStaged>(r, sh.stage, q0, k);
#pragma unroll
      for (int s = 0; s < Shape::kSlots; ++s) {
        const int32_t q = q0 + s * Shape::kThreads + threadIdx.x;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool valid = r.Valid(4 * q + e);
          if (valid && k[s][e] > threshold) above_bits |= 1u << (4 * s + e);
          if (valid && k[s][e] == threshold) equal_bits |= 1u << (4 * s + e);
        }
        counts[s] = (__popc((above_bits >> (4 * s)) & 0xfu) << 16) |
                    __popc((equal_bits >> (4 * s)) & 0xfu);
      }
    }
    uint32_t before[Shape::kSlots];
    const uint32_t total =
        SlotScan<Shape::kThreads, Shape::kSlots>(counts, before, sh.scan);
#pragma unroll
    for (int s = 0; s < Shape::kSlots; ++s) {
      if (counts[s] == 0) continue;
      const int32_t q = q0 + s * Shape::kThreads + threadIdx.x;
      uint32_t equal_seen = base_equal + (before[s] & 0xffffu);
      uint32_t pos = base_above + (before[s] >> 16) +
                     (equal_seen < take_equal ? equal_seen : take_equal);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int32_t column = r.start + (4 * q + e - r.lead);
        bool take = (above_bits >> (4 * s + e)) & 1u;
        if ((equal_bits >> (4 * s + e)) & 1u) {
          take = equal_seen < take_equal;
          ++equal_seen;
        }
        if (take) out[pos++] = column;
      }
    }
    base_above += total >> 16;
    base_equal += total & 0xffffu;
    // Every output is written (block-uniform: the totals are the block's).
    if (base_above == all_above && base_equal >= take_equal) break;
  }
}

// Step 5 with a bitmap: each thread's run of words counted, one block-wide
// prefix sum, and each set bit's column written in order.
template <typename Shape>
__device__ void EmitBitmap(const TopKRow& r, uint32_t topk, int32_t* out,
                           TopKShared<Shape>& sh) {
  const int32_t words = r.steps * kWordsAStep;
  const int32_t per = (words + Shape::kThreads - 1) / Shape::kThreads;
  const int32_t w0 = static_cast<int32_t>(threadIdx.x) * per;
  const int32_t w1 = min(w0 + per, words);
  uint32_t count[1] = {0};
  for (int32_t w = w0; w < w1; ++w) count[0] += __popc(sh.selected[w]);
  uint32_t before[1];
  SlotScan<Shape::kThreads, 1>(count, before, sh.scan);
  // The columns go to shared memory first where they fit (the stage, or the
  // candidates, both free by now), and out to global memory whole, a warp's
  // consecutive columns at a time: the scattered writes stay on chip.
  constexpr uint32_t kStageInts = 4 * Shape::kStageQuads;
  constexpr uint32_t kCandidateInts = 2 * Shape::kCandidates;
  constexpr bool kInStage = kStageInts >= kCandidateInts;
  const bool staged_out =
      topk <= (kInStage ? kStageInts : kCandidateInts);  // block-uniform
  int32_t* buffer = out;
  if (staged_out) {
    buffer = kInStage ? reinterpret_cast<int32_t*>(sh.stage)
                      : reinterpret_cast<int32_t*>(sh.candidates);
  }
  int32_t* dst = buffer + before[0];
  // Column of bit b of word w: start + 32 w + b - lead.
  int32_t column = r.start - r.lead + 32 * w0;
  for (int32_t w = w0; w < w1; ++w, column += 32) {
    uint32_t bits = sh.selected[w];
    while (bits != 0) {
      *dst++ = column + __ffs(bits) - 1;
      bits &= bits - 1;
    }
  }
  if (staged_out) {
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < topk; i += Shape::kThreads) {
      out[i] = buffer[i];
    }
  }
}

// Steps 1 to 5 for a row with a bitmap, its threshold guessed from a
// sample: the window of bins that should hold the topk-th key (steps 1 and
// 2 over the sample), its keys gathered and those above it marked (step 3),
// and, where the window holds the topk-th key (fewer than topk keys above
// it, at least topk with it) and its keys fit, resolved among them (step 4)
// and written (step 5). False where the window missed: nothing is written
// yet. Streamed rows only.
template <typename Shape>
__device__ bool SampledSelectRow(const TopKRow& r, uint32_t topk, int32_t* out,
                                 TopKShared<Shape>& sh) {
  SampleHistogram<Shape>(r, sh);
  __syncthreads();
  SelectWindow<Shape>(sh.hist, SampleCount<Shape>(r),
                      static_cast<uint32_t>(r.n), topk, sh);
  MarkAboveAndGather<Shape>(r, sh.bin_lo, sh.bin, sh);
  __syncthreads();
  uint32_t above = 0;
  for (int w = 0; w < Shape::kThreads / kDsaWarpSize; ++w) {
    above += sh.warp_above[w];
  }
  const uint32_t count = sh.candidate_count;
  if (above >= topk || above + count < topk ||
      count > static_cast<uint32_t>(Shape::kCandidates)) {
    return false;
  }
  const uint32_t remaining = topk - above;
  if (count <= static_cast<uint32_t>(kTopKRankMax)) {
    uint32_t unused_threshold, unused_take;
    RankResolve<Shape>(r, count, remaining, true, sh, &unused_threshold,
                       &unused_take);
  } else {
    RadixResolveAndMark<Shape>(r, count, remaining, sh);
  }
  __syncthreads();
  EmitBitmap<Shape>(r, topk, out, sh);
  return true;
}

template <typename Shape, bool kStaged>
__device__ void SelectRow(const TopKRow& r, uint32_t topk, int32_t* out,
                          TopKShared<Shape>& sh) {
  static_assert(!(kStaged && Shape::kSampleShift > 0),
                "staged rows count every key");
  for (int b = threadIdx.x; b < kTopKBins; b += Shape::kThreads) sh.hist[b] = 0;
  if (threadIdx.x == 0) sh.candidate_count = 0;
  __syncthreads();
  if constexpr (Shape::kSampleShift > 0) {
    if (r.steps * kWordsAStep <= Shape::kBitmapWords) {
      if (SampledSelectRow<Shape>(r, topk, out, sh)) return;
      // The window missed: every key counted.
      __syncthreads();  // the counts read
      for (int b = threadIdx.x; b < kTopKBins; b += Shape::kThreads) {
        sh.hist[b] = 0;
      }
      if (threadIdx.x == 0) sh.candidate_count = 0;
      __syncthreads();
    }
  }
  CoarseHistogram<Shape, kStaged>(r, sh);
  __syncthreads();
  SelectBin<Shape>(sh.hist, kTopKBins, topk, sh);
  const uint32_t bin = sh.bin;
  const uint32_t count = sh.bin_count;
  const uint32_t remaining = topk - sh.bin_above;
  const bool gathered = count <= static_cast<uint32_t>(Shape::kCandidates);
  const bool bitmap = gathered && r.steps * kWordsAStep <= Shape::kBitmapWords;
  if constexpr (Shape::kBitmapWords > 0) {
    if (bitmap) {
      if constexpr (kStaged) {
        MarkAboveAndGatherStaged<Shape>(r, bin, bin, sh);
      } else {
        MarkAboveAndGather<Shape>(r, bin, bin, sh);
      }
      __syncthreads();
      if (count <= static_cast<uint32_t>(kTopKRankMax)) {
        uint32_t unused_threshold, unused_take;
        RankResolve<Shape>(r, count, remaining, true, sh, &unused_threshold,
                           &unused_take);
      } else {
        RadixResolveAndMark<Shape>(r, count, remaining, sh);
      }
      __syncthreads();
      EmitBitmap<Shape>(r, topk, out, sh);
      return;
    }
  }
  uint32_t threshold = 0, take_equal = 0;
  if (gathered) {
    GatherBin<Shape, kStaged>(r, bin, sh);
    __syncthreads();
    if (count <= static_cast<uint32_t>(kTopKRankMax)) {
      RankResolve<Shape>(r, count, remaining, false, sh, &threshold,
                         &take_equal);
    } else {
      RadixResolve<Shape>(
          [&](auto&& f) {
            for (uint32_t i = threadIdx.x; i < count; i += Shape::kThreads) {
              f(static_cast<uint32_t>(sh.candidates[i] >> 32));
            }
          },
          remaining, sh, &threshold, &take_equal);
    }
  } else {
    RadixResolve<Shape>(
        [&](auto&& f) { ForEachInBin<Shape, kStaged>(r, bin, sh.stage, f); },
        remaining, sh, &threshold, &take_equal);
  }
  Compact<Shape, kStaged>(r, threshold, take_equal, topk, out, sh);
}

template <typename Shape>
#if defined(DSA_GPU_CUDA)
inline constexpr int kMinBlocks = Shape::kMinBlocks;
#else
inline constexpr int kMinBlocks = 1;
#endif

template <typename Shape>
__global__ void __launch_bounds__(Shape::kThreads, kMinBlocks<Shape>)
    IndexerTopKKernel(IndexerTopKParams p) {
  extern __shared__ __align__(16) uint8_t topk_smem[];
  TopKShared<Shape>& sh = *reinterpret_cast<TopKShared<Shape>*>(topk_smem);
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
    for (int j = threadIdx.x; j < topk; j += Shape::kThreads) {
      out[j] = j < n ? start + j : -1;
    }
    return;
  }

  const float* src = p.logits + row * p.logits_stride + start;
  TopKRow r;
  r.lead = static_cast<int32_t>((reinterpret_cast<uintptr_t>(src) / 4) % 4);
  r.quads = src - r.lead;
  r.n = n;
  r.num_quads = (r.lead + n + 3) / 4;
  r.start = start;
  r.steps = (4 * r.num_quads + kDsaWarpSize - 1) / kDsaWarpSize;
  // The staged instances run only where every window fits the stage (the
  // heuristics' width bound).
  SelectRow<Shape, (Shape::kStageQuads > 0)>(r, static_cast<uint32_t>(topk),
                                             out, sh);
}

template <typename Shape>
LaunchResult LaunchShape(const IndexerTopKParams& p, int device,
                         hipStream_t stream) {
  constexpr auto kKernel = IndexerTopKKernel<Shape>;
  constexpr int kBytes = static_cast<int>(sizeof(TopKShared<Shape>));
  if constexpr (kBytes > 48 * 1024) {
    LaunchResult r = OptInSharedMemory<kKernel, kBytes>(
        device, "indexer_topk: shared memory opt-in");
    if (!r.ok()) return r;
  }
  hipLaunchKernelGGL(kKernel, dim3(static_cast<unsigned>(p.rows)),
                     dim3(Shape::kThreads), kBytes, stream, p);
  return CheckLaunch(kOp);
}

LaunchResult CheckTopKParams(const IndexerTopKParams& p) {
  if (p.rows < 0 || p.rows > 0x7fffffff || p.width < 0 ||
      p.width > kTopKMaxWidth || p.logits_stride < p.width || p.topk < 1 ||
      p.topk_stride < p.topk) {
    return Invalid(kOp,
                   "sizes: rows %lld, width %lld, logits_stride %lld, topk %d, "
                   "topk_stride %lld (expected rows < 2^31, width <= 2^30, "
                   "topk >= 1, strides >= their row lengths)",
                   static_cast<long long>(p.rows),
                   static_cast<long long>(p.width),
                   static_cast<long long>(p.logits_stride), p.topk,
                   static_cast<long long>(p.topk_stride));
  }
  if (p.logits == nullptr || p.row_key_start == nullptr ||
      p.row_key_end == nullptr || p.topk_indices == nullptr) {
    return Invalid(kOp, "a device pointer is null");
  }
  if (reinterpret_cast<uintptr_t>(p.logits) % 4 != 0) {
    return Invalid(kOp, "logits are not 4-byte aligned");
  }
  return LaunchResult{};
}

}  // namespace
}  // namespace indexer

const char* IndexerTopKPathName(const IndexerTopKParams& params,
                                const IndexerTopKOptions& options) {
  DeviceFeatures features;
  indexer::TopKPlan plan;
  if (!CurrentDeviceFeatures(&features).ok() ||
      !indexer::PlanIndexerTopK(params, options, features, &plan).ok()) {
    return "none";
  }
  return indexer::TopKPathName(plan.path);
}

LaunchResult IndexerTopKLaunch(const IndexerTopKParams& p, void* stream,
                               const IndexerTopKOptions& options) {
  if (p.rows == 0) return LaunchResult{};
  LaunchResult r = indexer::CheckTopKParams(p);
  if (!r.ok()) return r;
  DeviceFeatures features;
  r = CurrentDeviceFeatures(&features);
  if (!r.ok()) return r;
  indexer::TopKPlan plan;
  r = indexer::PlanIndexerTopK(p, options, features, &plan);
  if (!r.ok()) return r;
  auto s = static_cast<hipStream_t>(stream);
  switch (plan.path) {
    case IndexerTopKPath::kStaged512:
      return indexer::LaunchShape<indexer::TopKStaged512>(p, features.device,
                                                          s);
    case IndexerTopKPath::kStreamed1024:
      return indexer::LaunchShape<indexer::TopKStreamed1024>(p, features.device,
                                                             s);
    case IndexerTopKPath::kStreamed512:
      return indexer::LaunchShape<indexer::TopKStreamed512>(p, features.device,
                                                            s);
    default:
      return Invalid(indexer::kOp, "path %s is not built",
                     indexer::TopKPathName(plan.path));
  }
}

}  // namespace dsa::attention::gpu
