// Device side of gemm_bf16.h: a tiled bf16 GEMM on Bf16WarpMma, and on
// WarpgroupBf16Mma (wgmma) where the device code is sm_90a (see
// WarpgroupGemmBody).
//
// Each block computes a 128 x 128 tile of C with 256 threads (8 warps of 32
// on NVIDIA, each a 64 x 32 sub-tile of 4 x 4 m16n8k16 products; 4
// wavefronts of 64 on AMD, each 64 x 64 of 2 x 2 32x32x8 products). K runs in
// steps of 32 through a 4-stage ring of shared-memory tiles, filled with
// cp.async where the target has it, so the loads of step s + 3 overlap the
// products of step s. Rows are padded by 8 elements (16 bytes), which puts
// the 8 rows an ldmatrix reads in 8 different bank groups.
#include "attention/gpu/dense_mha/gemm_bf16.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "attention/gpu/device/async_copy.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"

namespace dsa::attention::gpu {
namespace {

using Mma = ::dsa::gpu::Bf16WarpMma;

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 32;
constexpr int kStages = 4;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kDsaWarpSize;
constexpr int kWarpsM = 2;
constexpr int kWarpsN = kWarps / kWarpsM;
constexpr int kWM = kBM / kWarpsM;
constexpr int kWN = kBN / kWarpsN;
constexpr int kFragM = kWM / Mma::kM;
constexpr int kFragN = kWN / Mma::kN;
constexpr int kLd = kBK + 8;
constexpr int kStageElems = (kBM + kBN) * kLd;
constexpr size_t kSmemBytes = sizeof(uint16_t) * kStageElems * kStages;
constexpr int kChunksPerRow = kBK / 8;  // 16-byte chunks

static_assert(kWM % Mma::kM == 0 && kWN % Mma::kN == 0, "warp tile");
static_assert(kBK % Mma::kK == 0, "k step");
static_assert(Mma::kCPerLane % 2 == 0, "the epilogue takes slots in pairs");

// Logical rows of an operand, in groups (see Bf16GemmParams).
struct RowMap {
  int64_t group_rows;  // 0: no groups
  int64_t group_stride;
  __device__ __forceinline__ int64_t operator()(int64_t row) const {
    return group_rows > 0 ? (row / group_rows) * group_stride + row % group_rows
                          : row;
  }
};

// Loads rows [row0, row0 + kRows) x k columns [k0, k0 + kBK) of a
// row-major matrix into `dst` (row stride kLd). Rows past `rows` repeat the
// last row (their results are never stored); columns past `k` are zero.
template <int kRows>
__device__ __forceinline__ void LoadTile(uint16_t* dst, const uint16_t* src,
                                         int64_t ld, RowMap map, int64_t row0,
                                         int64_t rows, int64_t k0, int64_t k) {
  for (int c = threadIdx.x; c < kRows * kChunksPerRow; c += kThreads) {
    const int r = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * 8;
    uint16_t* d = dst + r * kLd + col;
    if (k0 + col < k) {
      const int64_t row = map(row0 + r < rows ? row0 + r : rows - 1);
      CopyAsync16(d, src + row * ld + k0 + col);
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
}

__device__ __forceinline__ void WarpGemmBody(const uint16_t* __restrict__ a,
                                             int64_t lda, RowMap a_map,
                                             const uint16_t* __restrict__ b,
                                             int64_t ldb, RowMap b_map,
                                             uint16_t* __restrict__ c,
                                             int64_t ldc, int64_t m, int64_t n,
                                             int64_t k, uint16_t* smem) {
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int warp_m = warp / kWarpsN;
  const int warp_n = warp % kWarpsN;
  // blockIdx.x walks n fastest, so consecutive blocks share their A tile.
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int k_steps = static_cast<int>((k + kBK - 1) / kBK);

  auto load_stage = [&](int step) {
    uint16_t* s = smem + (step % kStages) * kStageElems;
    LoadTile<kBM>(s, a, lda, a_map, m0, m, static_cast<int64_t>(step) * kBK, k);
    LoadTile<kBN>(s + kBM * kLd, b, ldb, b_map, n0, n,
                  static_cast<int64_t>(step) * kBK, k);
  };

  Mma::C acc[kFragM][kFragN];
#pragma unroll
  for (int i = 0; i < kFragM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragN; ++j) Mma::Zero(acc[i][j]);
  }

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_steps) load_stage(s);
    CopyAsyncCommit();
  }
  for (int step = 0; step < k_steps; ++step) {
    CopyAsyncWait<kStages - 2>();
    __syncthreads();
    // The slot refilled here was read in step - 1, which every warp has
    // finished (barrier above).
    if (step + kStages - 1 < k_steps) load_stage(step + kStages - 1);
    CopyAsyncCommit();
    const uint16_t* s = smem + (step % kStages) * kStageElems;
    const uint16_t* sa = s + warp_m * kWM * kLd;
    const uint16_t* sb = s + kBM * kLd + warp_n * kWN * kLd;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += Mma::kK) {
      Mma::A fa[kFragM];
      Mma::B fb[kFragN];
#pragma unroll
      for (int i = 0; i < kFragM; ++i) {
        Mma::LoadA(fa[i], sa + i * Mma::kM * kLd + kk, kLd, lane);
      }
#pragma unroll
      for (int j = 0; j < kFragN; ++j) {
        Mma::LoadB(fb[j], sb + j * Mma::kN * kLd + kk, kLd, lane);
      }
#pragma unroll
      for (int i = 0; i < kFragM; ++i) {
#pragma unroll
        for (int j = 0; j < kFragN; ++j) Mma::Run(acc[i][j], fa[i], fb[j]);
      }
    }
  }
  CopyAsyncWait<0>();

  // Epilogue: C rounded to bf16; adjacent columns of one row go out as one
  // 4-byte store where the fragment layout has them in one lane.
#pragma unroll
  for (int i = 0; i < kFragM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragN; ++j) {
      const int64_t rb = m0 + warp_m * kWM + i * Mma::kM;
      const int64_t cb = n0 + warp_n * kWN + j * Mma::kN;
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; e += 2) {
        const float v0 = acc[i][j].v[e];
        const float v1 = acc[i][j].v[e + 1];
        const int64_t r0 = rb + Mma::CRow(lane, e);
        const int64_t c0 = cb + Mma::CCol(lane, e);
        const int64_t r1 = rb + Mma::CRow(lane, e + 1);
        const int64_t c1 = cb + Mma::CCol(lane, e + 1);
        if (r1 == r0 && c1 == c0 + 1 && c0 % 2 == 0 && r0 < m && c1 < n) {
          *reinterpret_cast<uint32_t*>(c + r0 * ldc + c0) =
              ::dsa::gpu::PackBf16x2(v0, v1);
        } else {
          if (r0 < m && c0 < n) c[r0 * ldc + c0] = ::dsa::gpu::FloatToBf16(v0);
          if (r1 < m && c1 < n) c[r1 * ldc + c1] = ::dsa::gpu::FloatToBf16(v1);
        }
      }
    }
  }
}

#if defined(DSA_GPU_CUDA)
// sm_90a: two warpgroups, each 64 rows x 128 columns of the tile on wgmma
// (WarpgroupBf16Mma<128>), operands in the core-matrix layout; k in steps of
// 64 through a 3-stage ring of 32 KiB stages.
constexpr int kWgBK = 64;
constexpr int kWgStages = 3;
constexpr int kWgGroup = kWgBK * 16;  // bytes per 8 rows
constexpr int kWgTileBytes = 128 * kWgBK * 2;
constexpr int kWgStageBytes = 2 * kWgTileBytes;

// Chunk c of a 128-row x kWgBK tile: pairs of threads cover a 32-byte
// global segment, eight pairs the eight rows of a core matrix.
__device__ __forceinline__ void WgChunk(int c, int* row, int* col) {
  constexpr int kPerGroup = 8 * (kWgBK / 8);
  const int group = c / kPerGroup;
  const int i = c % kPerGroup;
  *row = group * 8 + (i / 2) % 8;
  *col = ((i % 2) + 2 * (i / 16)) * 8;
}

__device__ __forceinline__ void WarpgroupGemmBody(
    const uint16_t* __restrict__ a, int64_t lda, RowMap a_map,
    const uint16_t* __restrict__ b, int64_t ldb, RowMap b_map,
    uint16_t* __restrict__ c, int64_t ldc, int64_t m, int64_t n, int64_t k,
    uint8_t* smem) {
  using Wg = ::dsa::gpu::WarpgroupBf16Mma<128>;
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  const int group = warp / 4;
  const int warp_in_group = warp % 4;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int k_steps = static_cast<int>((k + kWgBK - 1) / kWgBK);
  // This thread's chunks (same rows and column in every k step): source
  // rows found once.
  constexpr int kPerThread = 128 * (kWgBK / 8) / kThreads;
  const uint16_t* a_src[kPerThread];
  const uint16_t* b_src[kPerThread];
  uint32_t dst_off[kPerThread];
  int chunk_col = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    int r;
    WgChunk(threadIdx.x + i * kThreads, &r, &chunk_col);
    dst_off[i] = Wg::Offset(r, chunk_col, kWgGroup);
    a_src[i] = a + a_map(m0 + r < m ? m0 + r : m - 1) * lda + chunk_col;
    b_src[i] = b + b_map(n0 + r < n ? n0 + r : n - 1) * ldb + chunk_col;
  }
  auto load_stage = [&](int step) {
    uint8_t* s = smem + (step % kWgStages) * kWgStageBytes;
    const int64_t k0 = static_cast<int64_t>(step) * kWgBK;
    const bool in_k = k0 + chunk_col < k;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      uint8_t* da = s + dst_off[i];
      uint8_t* db = da + kWgTileBytes;
      if (in_k) {
        CopyAsync16(da, a_src[i] + k0);
        CopyAsync16(db, b_src[i] + k0);
      } else {
        *reinterpret_cast<uint4*>(da) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(db) = make_uint4(0, 0, 0, 0);
      }
    }
  };
  float acc[Wg::kAccPerThread];
#pragma unroll
  for (int i = 0; i < Wg::kAccPerThread; ++i) acc[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < kWgStages - 1; ++s) {
    if (s < k_steps) load_stage(s);
    CopyAsyncCommit();
  }
  for (int step = 0; step < k_steps; ++step) {
    CopyAsyncWait<kWgStages - 2>();
    Wg::FenceStores();
    __syncthreads();
    if (step + kWgStages - 1 < k_steps) load_stage(step + kWgStages - 1);
    CopyAsyncCommit();
    const uint8_t* s = smem + (step % kWgStages) * kWgStageBytes;
    Wg::Issue<kWgBK>(acc, s + group * 8 * kWgGroup, kWgGroup, s + kWgTileBytes,
                     kWgGroup, true);
    Wg::Wait(acc);
  }
  CopyAsyncWait<0>();
#pragma unroll
  for (int i = 0; i < Wg::kAccPerThread; i += 2) {
    const int64_t row = m0 + group * 64 + Wg::AccRow(warp_in_group, lane, i);
    const int64_t col = n0 + Wg::AccCol(lane, i);
    if (row >= m) continue;
    if (col + 1 < n) {
      *reinterpret_cast<uint32_t*>(c + row * ldc + col) =
          ::dsa::gpu::PackBf16x2(acc[i], acc[i + 1]);
    } else if (col < n) {
      c[row * ldc + col] = ::dsa::gpu::FloatToBf16(acc[i]);
    }
  }
}
#endif

constexpr size_t kWarpgroupSmemBytes =
#if defined(DSA_GPU_CUDA)
    static_cast<size_t>(kWgStageBytes) * kWgStages;
#else
    0;
#endif
constexpr size_t kKernelSmemBytes =
    kSmemBytes > kWarpgroupSmemBytes ? kSmemBytes : kWarpgroupSmemBytes;

// kWarpgroup picks the wgmma body on sm_90a; elsewhere both
// instantiations run the warp-level body.
template <bool kWarpgroup>
__global__ void __launch_bounds__(kThreads)
    Bf16GemmKernel(const uint16_t* __restrict__ a, int64_t lda, RowMap a_map,
                   const uint16_t* __restrict__ b, int64_t ldb, RowMap b_map,
                   uint16_t* __restrict__ c, int64_t ldc, int64_t m, int64_t n,
                   int64_t k) {
  extern __shared__ __align__(128) uint16_t smem[];
#if defined(DSA_GPU_CUDA)
  if constexpr (kWarpgroup && ::dsa::gpu::kHasWarpgroupBf16Mma) {
    WarpgroupGemmBody(a, lda, a_map, b, ldb, b_map, c, ldc, m, n, k,
                      reinterpret_cast<uint8_t*>(smem));
  } else {
    WarpGemmBody(a, lda, a_map, b, ldb, b_map, c, ldc, m, n, k, smem);
  }
#else
  WarpGemmBody(a, lda, a_map, b, ldb, b_map, c, ldc, m, n, k, smem);
#endif
}

__global__ void ProbeWarpgroupGemmKernel(int* out) {
#if defined(DSA_GPU_CUDA)
  *out = ::dsa::gpu::kHasWarpgroupBf16Mma ? 1 : 0;
#else
  *out = 0;
#endif
}

// Whether to run the wgmma body: the device code has it (asked of the
// device once per device) and DSA_BF16_GEMM is not "warp".
LaunchResult UseWarpgroupGemm(bool* result) {
  static std::atomic<int> cache[64];  // 0 unknown, 1 no, 2 yes
  static const bool wanted = [] {
    const char* env = std::getenv("DSA_BF16_GEMM");
    return env == nullptr || std::strcmp(env, "warp") != 0;
  }();
  *result = false;
  if (!wanted) return LaunchResult{};
  int device = 0;
  LaunchResult r = FromError(hipGetDevice(&device), "bf16_gemm: device");
  if (!r.ok()) return r;
  const int known = cache[device & 63].load(std::memory_order_relaxed);
  if (known != 0) {
    *result = known == 2;
    return r;
  }
  int* flag = nullptr;
  r = FromError(hipMalloc(reinterpret_cast<void**>(&flag), sizeof(int)),
                "bf16_gemm: probe");
  if (!r.ok()) return r;
  hipLaunchKernelGGL(ProbeWarpgroupGemmKernel, dim3(1), dim3(1), 0, 0, flag);
  int host = 0;
  r = CheckLaunch("bf16_gemm: probe launch");
  if (r.ok()) {
    r = FromError(hipMemcpy(&host, flag, sizeof(int), hipMemcpyDeviceToHost),
                  "bf16_gemm: probe result");
  }
  (void)hipFree(flag);
  if (!r.ok()) return r;
  cache[device & 63].store(host ? 2 : 1, std::memory_order_relaxed);
  *result = host != 0;
  return r;
}

}  // namespace

const char* Bf16GemmPath() {
  bool warpgroup = false;
  if (!UseWarpgroupGemm(&warpgroup).ok()) return "none";
  return warpgroup ? "warpgroup" : "warp";
}

LaunchResult Bf16GemmLaunch(const Bf16GemmParams& p, void* stream) {
  constexpr const char* kOp = "bf16_gemm";
  if (p.m < 0 || p.n < 0 || p.k < 0) {
    return Invalid(kOp, "m=%lld n=%lld k=%lld: sizes must be >= 0",
                   static_cast<long long>(p.m), static_cast<long long>(p.n),
                   static_cast<long long>(p.k));
  }
  if (p.m == 0 || p.n == 0) return LaunchResult{};
  if (p.k == 0) return Invalid(kOp, "k is 0: nothing to multiply");
  if (p.a == nullptr || p.b == nullptr || p.c == nullptr) {
    return Invalid(kOp, "a, b and c must be device pointers (got null)");
  }
  if (p.k % 8 != 0 || p.lda % 8 != 0 || p.ldb % 8 != 0 || p.ldc % 2 != 0 ||
      p.lda < p.k || p.ldb < p.k || p.ldc < p.n) {
    return Invalid(kOp,
                   "k=%lld lda=%lld ldb=%lld ldc=%lld n=%lld: need k, lda, "
                   "ldb multiples of 8, ldc even, lda, ldb >= k, ldc >= n",
                   static_cast<long long>(p.k), static_cast<long long>(p.lda),
                   static_cast<long long>(p.ldb), static_cast<long long>(p.ldc),
                   static_cast<long long>(p.n));
  }
  if (p.a_group_rows < 0 || p.b_group_rows < 0 ||
      (p.a_group_rows > 0 && p.a_group_stride < p.a_group_rows) ||
      (p.b_group_rows > 0 && p.b_group_stride < p.b_group_rows)) {
    return Invalid(kOp, "row groups: need group_stride >= group_rows > 0");
  }
  if (reinterpret_cast<uintptr_t>(p.a) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.b) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.c) % 4 != 0) {
    return Invalid(kOp, "a and b must be 16-byte aligned, c 4-byte aligned");
  }
  const int64_t grid_n = (p.n + kBN - 1) / kBN;
  const int64_t grid_m = (p.m + kBM - 1) / kBM;
  if (grid_m > 65535 || grid_n > 0x7fffffff) {
    return Invalid(kOp, "m=%lld n=%lld: too many tiles for one launch",
                   static_cast<long long>(p.m), static_cast<long long>(p.n));
  }
  bool warpgroup = false;
  LaunchResult r = UseWarpgroupGemm(&warpgroup);
  if (!r.ok()) return r;
  const auto kernel =
      warpgroup ? &Bf16GemmKernel<true> : &Bf16GemmKernel<false>;
  // Per call, not once: the opt-in belongs to the current device.
  r = FromError(hipFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                    hipFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kKernelSmemBytes)),
                "bf16_gemm: shared memory opt-in");
  if (!r.ok()) return r;
  hipLaunchKernelGGL(
      kernel,
      dim3(static_cast<unsigned>(grid_n), static_cast<unsigned>(grid_m)),
      dim3(kThreads), kKernelSmemBytes, static_cast<hipStream_t>(stream), p.a,
      p.lda, RowMap{p.a_group_rows, p.a_group_stride}, p.b, p.ldb,
      RowMap{p.b_group_rows, p.b_group_stride}, p.c, p.ldc, p.m, p.n, p.k);
  return CheckLaunch(kOp);
}

}  // namespace dsa::attention::gpu
