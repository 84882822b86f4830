// Device side of dense_mha_kernels.h: latent gather, key/value decompression
// (gemm_bf16) and FlashAttention-2-style causal attention on Bf16WarpMma.
//
// Attention work per block: 128 query rows (64 on AMD) of one request and
// one head; each warp owns Mma::kM of those rows (16 on NVIDIA, 32 on AMD),
// so its scores S = Q K^T for a key tile and its output rows stay in its own
// registers. Key tiles are visited from the last (diagonal) one down, so
// only the first one or two visited need the causal mask. Loads follow
// FlashAttention-2: K of tile t is in shared memory when the tile starts;
// V of tile t is fetched while S is computed, and K of tile t - 1 while
// O += P V runs. P goes through the warp's own shared-memory rows as bf16,
// which works for every fragment layout.
//
// FLOPs and bytes (GLM-5.1: 64 heads, qk 256, v 256, T = 8192): attention
// 2 * 64 * 8192^2 / 2 * 512 = 2.2 TFLOP; decompression 2 * 8192 * 512 * 64
// * 448 = 0.24 TFLOP; K/V scratch 8192 * 64 * 448 * 2 = 470 MB written once,
// then each (query tile, head) block reads its keys' K and V from L2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attention/gpu/async_copy.h"
#include "attention/gpu/dense_mha_kernels.h"
#include "attention/gpu/gemm_bf16.h"
#include "attention/gpu/launch_util.h"
#include "attention/gpu/stream_scratch.h"
#include "platform/gpu/hip_compat.h"
#include "platform/gpu/mma.h"

namespace dsa::attention::gpu {
namespace {

using Mma = ::dsa::gpu::Bf16WarpMma;
using ::dsa::gpu::Bf16ToFloat;
using ::dsa::gpu::DecodeFp8;
using ::dsa::gpu::FloatToBf16;
using ::dsa::gpu::Fp8Format;
using ::dsa::gpu::PackBf16x2;

constexpr const char* kOp = "dense_mha_prefill";

// Query rows per block and keys per tile. AMD's 64 KiB of LDS per
// workgroup asks for smaller tiles than the H100/H200's 227 KiB.
constexpr int kBlockM = kDsaWarpSize == 32 ? 128 : 64;
constexpr int kBlockN = kDsaWarpSize == 32 ? 64 : 32;
constexpr int kWarps = kBlockM / Mma::kM;
constexpr int kThreads = kWarps * kDsaWarpSize;
constexpr int kPad = 8;  // elements: 16 bytes, spreads ldmatrix rows over banks
constexpr int kMaxHeadDim = 256;
constexpr int kRows = Mma::kCRowsPerLane;
static_assert(kBlockM % Mma::kM == 0 && kBlockN % Mma::kN == 0 &&
                  kBlockN % Mma::kK == 0,
              "tiles must hold whole fragments");
static_assert(Mma::kCPerLane % 2 == 0, "stores take slots in pairs");

// One request with query tokens, in the order of the scratch rows.
struct RequestInfo {
  int32_t q_begin;    // first query token (row of q / output)
  int32_t n;          // query tokens
  int32_t seq_len;    // latent rows: context + n
  int32_t kv_row;     // first row of the request in the scratch buffers
  int32_t table_row;  // the request's block-table row
  int32_t pad[3];
};
// One block of attention work: query tile `q_tile` of request `request`
// (an index into the RequestInfo array).
struct WorkItem {
  int32_t request;
  int32_t q_tile;
};

constexpr int kGatherRows = 8;
constexpr int kGatherThreads = 256;

// Latent entries -> bf16 rows kv_c | k_pe (lat_ld elements apart). Grid:
// (latent rows / kGatherRows, requests).
template <int kEncoding>
__global__ void __launch_bounds__(kGatherThreads)
    GatherLatentKernel(const uint8_t* __restrict__ cache, int64_t entry_bytes,
                       int64_t num_blocks, int32_t block_size,
                       const int32_t* __restrict__ block_table,
                       int64_t table_stride, int32_t max_blocks,
                       const RequestInfo* __restrict__ requests, int32_t lora,
                       int32_t rope, uint16_t* __restrict__ lat,
                       int64_t lat_ld) {
  const RequestInfo req = requests[blockIdx.y];
  const int words = (lora + rope) / 2;  // bf16 pairs per row
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kGatherRows;
  for (int idx = threadIdx.x; idx < kGatherRows * words;
       idx += kGatherThreads) {
    const int64_t j = j0 + idx / words;
    if (j >= req.seq_len) break;  // rows are in increasing order
    const int w = idx % words;
    const int64_t col = j / block_size;
    int64_t block = block_table[req.table_row * table_stride +
                                (col < max_blocks ? col : max_blocks - 1)];
    block = block < 0 ? 0 : (block >= num_blocks ? num_blocks - 1 : block);
    const uint8_t* entry =
        cache + (block * block_size + j % block_size) * entry_bytes;
    uint32_t out;
    if constexpr (kEncoding == static_cast<int>(LatentEncoding::kBFloat16)) {
      out = reinterpret_cast<const uint32_t*>(entry)[w];
    } else {
      constexpr Fp8Format kF =
          kEncoding == static_cast<int>(LatentEncoding::kE4m3fn)
              ? Fp8Format::kE4m3fn
              : Fp8Format::kE4m3fnuz;
      const int e = 2 * w;
      const int tiles = lora / 128;
      if (e < lora) {
        const uint32_t codes = reinterpret_cast<const uint16_t*>(entry)[w];
        const float scale =
            reinterpret_cast<const float*>(entry + lora)[e / 128];
        // fp8 times a power of two: exact in bf16.
        out = PackBf16x2(DecodeFp8<kF>(codes & 0xffu) * scale,
                         DecodeFp8<kF>(codes >> 8) * scale);
      } else {
        out = reinterpret_cast<const uint32_t*>(entry + lora +
                                                4 * tiles)[(e - lora) / 2];
      }
    }
    reinterpret_cast<uint32_t*>(lat + (req.kv_row + j) * lat_ld)[w] = out;
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

struct AttentionArgs {
  const uint16_t* q;    // bf16 [tokens, heads, qk]
  const uint16_t* kv;   // bf16 [S, heads * (nope + v)]
  const uint16_t* lat;  // bf16 [S, lat_ld]: kv_c | k_pe
  void* out;            // [tokens, heads, v]
  const RequestInfo* requests;
  const WorkItem* items;
  int64_t kv_ld;
  int64_t lat_ld;
  int32_t heads, nope, rope, v, lora;
  float scale_log2;  // softmax_scale * log2(e)
  bool out_bf16;
  bool out_pairs;  // output 8-byte aligned: adjacent fp32 pairs in one store
};

template <int kQk, int kV>
struct AttentionSmem {
  static constexpr int kLdQ = kQk + kPad;
  static constexpr int kLdV = kV + kPad;
  static constexpr int kLdP = kBlockN + kPad;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kBlockM * kLdQ;
  static constexpr int kVOff = kK + kBlockN * kLdQ;
  static constexpr int kP = kVOff + kBlockN * kLdV;
  static constexpr int kElems = kP + kWarps * Mma::kM * kLdP;
  static constexpr size_t kBytes = sizeof(uint16_t) * kElems;
};

// Writes one output element pair (or single element) of row `token`, head.
__device__ __forceinline__ void StoreOut(const AttentionArgs& a, int64_t base,
                                         int col0, float v0, int col1, float v1,
                                         bool pair) {
  if (a.out_bf16) {
    uint16_t* o = static_cast<uint16_t*>(a.out) + base;
    if (pair && col0 % 2 == 0 && col1 < a.v) {
      *reinterpret_cast<uint32_t*>(o + col0) = PackBf16x2(v0, v1);
      return;
    }
    if (col0 < a.v) o[col0] = FloatToBf16(v0);
    if (col1 < a.v) o[col1] = FloatToBf16(v1);
  } else {
    float* o = static_cast<float*>(a.out) + base;
    if (pair && a.out_pairs && col0 % 2 == 0 && col1 < a.v) {
      *reinterpret_cast<float2*>(o + col0) = make_float2(v0, v1);
      return;
    }
    if (col0 < a.v) o[col0] = v0;
    if (col1 < a.v) o[col1] = v1;
  }
}

template <int kQk, int kV>
__global__ void __launch_bounds__(kThreads, 1)
    DenseAttentionKernel(const AttentionArgs a) {
  using L = AttentionSmem<kQk, kV>;
  constexpr int kLdQ = L::kLdQ;
  constexpr int kLdV = L::kLdV;
  constexpr int kLdP = L::kLdP;
  constexpr int kSBlocks = kBlockN / Mma::kN;
  constexpr int kOBlocks = kV / Mma::kN;
  constexpr float kNegInf = -__builtin_huge_valf();
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* q_s = smem + L::kQ;
  uint16_t* k_s = smem + L::kK;
  uint16_t* v_s = smem + L::kVOff;

  const int head = blockIdx.x;
  const WorkItem item = a.items[blockIdx.y];
  const RequestInfo req = a.requests[item.request];
  const int warp = threadIdx.x / kDsaWarpSize;
  const int lane = threadIdx.x % kDsaWarpSize;
  uint16_t* p_s = smem + L::kP + warp * Mma::kM * kLdP;
  const int qk = a.nope + a.rope;
  const int i0 = item.q_tile * kBlockM;
  const int rows = min(kBlockM, req.n - i0);
  const int first_pos = req.seq_len - req.n + i0;  // position of row 0
  const int last_pos = first_pos + rows - 1;
  const int num_tiles = last_pos / kBlockN + 1;
  const int64_t head_col = static_cast<int64_t>(head) * (a.nope + a.v);

  // Columns [qk, kQk) of Q and K and [v, kV) of V are zero (never loaded).
  for (int c = qk + threadIdx.x; c < kQk; c += kThreads) {
    for (int r = 0; r < kBlockM; ++r) q_s[r * kLdQ + c] = 0;
    for (int r = 0; r < kBlockN; ++r) k_s[r * kLdQ + c] = 0;
  }
  for (int c = a.v + threadIdx.x; c < kV; c += kThreads) {
    for (int r = 0; r < kBlockN; ++r) v_s[r * kLdV + c] = 0;
  }
  // Q rows (rows past the request's queries are zero).
  const int q_chunks = qk / 8;
  for (int c = threadIdx.x; c < kBlockM * q_chunks; c += kThreads) {
    const int r = c / q_chunks;
    const int col = (c % q_chunks) * 8;
    uint16_t* d = q_s + r * kLdQ + col;
    if (r < rows) {
      CopyAsync16(
          d, a.q +
                 (static_cast<int64_t>(req.q_begin + i0 + r) * a.heads + head) *
                     qk +
                 col);
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
  // K of tile t: K_nope of this head from the decompressed rows, k_pe from
  // the latent rows. Rows past seq_len repeat the last key (masked).
  auto load_k = [&](int t) {
    for (int c = threadIdx.x; c < kBlockN * q_chunks; c += kThreads) {
      const int r = c / q_chunks;
      const int col = (c % q_chunks) * 8;
      const int64_t row = req.kv_row + min(t * kBlockN + r, req.seq_len - 1);
      const uint16_t* src =
          col < a.nope ? a.kv + row * a.kv_ld + head_col + col
                       : a.lat + row * a.lat_ld + a.lora + (col - a.nope);
      CopyAsync16(k_s + r * kLdQ + col, src);
    }
  };
  auto load_v = [&](int t) {
    const int v_chunks = a.v / 8;
    for (int c = threadIdx.x; c < kBlockN * v_chunks; c += kThreads) {
      const int r = c / v_chunks;
      const int col = (c % v_chunks) * 8;
      const int64_t row = req.kv_row + min(t * kBlockN + r, req.seq_len - 1);
      CopyAsync16(v_s + r * kLdV + col,
                  a.kv + row * a.kv_ld + head_col + a.nope + col);
    }
  };

  Mma::C o[kOBlocks];
#pragma unroll
  for (int b = 0; b < kOBlocks; ++b) Mma::Zero(o[b]);
  float m[kRows], l[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = kNegInf;
    l[r] = 0.0f;
  }
  const uint16_t* q_w = q_s + warp * Mma::kM * kLdQ;
  const int row_base = warp * Mma::kM;

  load_k(num_tiles - 1);
  CopyAsyncCommit();
  for (int t = num_tiles - 1; t >= 0; --t) {
    CopyAsyncWait<0>();
    __syncthreads();  // K_t (and Q) visible; every warp is done with V_{t+1}
    load_v(t);
    CopyAsyncCommit();

    Mma::C s[kSBlocks];
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) Mma::Zero(s[b]);
#pragma unroll
    for (int kk = 0; kk < kQk; kk += Mma::kK) {
      Mma::A qa;
      Mma::LoadA(qa, q_w + kk, kLdQ, lane);
#pragma unroll
      for (int b = 0; b < kSBlocks; ++b) {
        Mma::B kb;
        Mma::LoadB(kb, k_s + b * Mma::kN * kLdQ + kk, kLdQ, lane);
        Mma::Run(s[b], qa, kb);
      }
    }

    // Online softmax in the log2 domain. Keys after a row's position are
    // masked; only tiles reaching past the block's first row need it.
    const int key0 = t * kBlockN;
    const bool masked = key0 + kBlockN - 1 > first_pos;
    float mx[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) mx[r] = kNegInf;
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; ++e) {
        float x = s[b].v[e] * a.scale_log2;
        if (masked) {
          const int key = key0 + b * Mma::kN + Mma::CCol(lane, e);
          const int pos = first_pos + row_base + Mma::CRow(lane, e);
          if (key > pos) x = kNegInf;
        }
        s[b].v[e] = x;
        mx[Mma::CRowSlot(e)] = fmaxf(mx[Mma::CRowSlot(e)], x);
      }
    }
    float base[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float tile_max = Mma::RowMax(mx[r]);
      const float new_max = fmaxf(m[r], tile_max);
      // A row with no unmasked key yet keeps max -inf; 0 as the base keeps
      // exp2(-inf - base) = 0 instead of NaN.
      base[r] = new_max == kNegInf ? 0.0f : new_max;
      const float alpha = exp2f(m[r] - base[r]);
      m[r] = new_max;
      l[r] *= alpha;
      mx[r] = alpha;
    }
#pragma unroll
    for (int b = 0; b < kOBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; ++e)
        o[b].v[e] *= mx[Mma::CRowSlot(e)];
    }
#pragma unroll
    for (int b = 0; b < kSBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < Mma::kCPerLane; e += 2) {
        const float p0 = exp2f(s[b].v[e] - base[Mma::CRowSlot(e)]);
        const float p1 = exp2f(s[b].v[e + 1] - base[Mma::CRowSlot(e + 1)]);
        l[Mma::CRowSlot(e)] += p0;
        l[Mma::CRowSlot(e + 1)] += p1;
        const int r0 = Mma::CRow(lane, e),
                  c0 = b * Mma::kN + Mma::CCol(lane, e);
        const int r1 = Mma::CRow(lane, e + 1);
        const int c1 = b * Mma::kN + Mma::CCol(lane, e + 1);
        if (r1 == r0 && c1 == c0 + 1 && c0 % 2 == 0) {
          *reinterpret_cast<uint32_t*>(p_s + r0 * kLdP + c0) =
              PackBf16x2(p0, p1);
        } else {
          p_s[r0 * kLdP + c0] = FloatToBf16(p0);
          p_s[r1 * kLdP + c1] = FloatToBf16(p1);
        }
      }
    }

    CopyAsyncWait<0>();
    __syncthreads();  // V_t and every warp's P visible; K_t no longer read
    if (t > 0) load_k(t - 1);
    CopyAsyncCommit();
#pragma unroll
    for (int kk = 0; kk < kBlockN; kk += Mma::kK) {
      Mma::A pa;
      Mma::LoadA(pa, p_s + kk, kLdP, lane);
#pragma unroll
      for (int b = 0; b < kOBlocks; ++b) {
        Mma::B vb;
        Mma::LoadBTrans(vb, v_s + kk * kLdV + b * Mma::kN, kLdV, lane);
        Mma::Run(o[b], pa, vb);
      }
    }
  }

  float inv[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = Mma::RowSum(l[r]);
    inv[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
#pragma unroll
  for (int b = 0; b < kOBlocks; ++b) {
#pragma unroll
    for (int e = 0; e < Mma::kCPerLane; e += 2) {
      const int r0 = row_base + Mma::CRow(lane, e);
      const int r1 = row_base + Mma::CRow(lane, e + 1);
      const int c0 = b * Mma::kN + Mma::CCol(lane, e);
      const int c1 = b * Mma::kN + Mma::CCol(lane, e + 1);
      const float v0 = o[b].v[e] * inv[Mma::CRowSlot(e)];
      const float v1 = o[b].v[e + 1] * inv[Mma::CRowSlot(e + 1)];
      const auto base_of = [&](int r) {
        return (static_cast<int64_t>(req.q_begin + i0 + r) * a.heads + head) *
               a.v;
      };
      if (r1 == r0 && c1 == c0 + 1) {
        if (r0 < rows) StoreOut(a, base_of(r0), c0, v0, c1, v1, true);
      } else {
        if (r0 < rows) StoreOut(a, base_of(r0), c0, v0, a.v, 0.0f, false);
        if (r1 < rows) StoreOut(a, base_of(r1), c1, v1, a.v, 0.0f, false);
      }
    }
  }
}

using AttentionFn = void (*)(AttentionArgs);

template <int kQk, int kV>
LaunchResult LaunchAttention(const AttentionArgs& args, int items, int heads,
                             hipStream_t stream) {
  using L = AttentionSmem<kQk, kV>;
  const AttentionFn fn = &DenseAttentionKernel<kQk, kV>;
  int device = 0, max_smem = 0;
  LaunchResult r =
      FromError(hipGetDevice(&device), "dense_mha_prefill: device");
  if (!r.ok()) return r;
  r = FromError(
      hipDeviceGetAttribute(&max_smem,
                            hipDeviceAttributeMaxSharedMemoryPerBlock, device),
      "dense_mha_prefill: shared memory limit");
  if (!r.ok()) return r;
  if (static_cast<size_t>(max_smem) < L::kBytes) {
    return Invalid(kOp,
                   "head dims qk<=%d v<=%d need %zu bytes of shared memory per "
                   "block; this device allows %d",
                   kQk, kV, L::kBytes, max_smem);
  }
  r = FromError(hipFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                    hipFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(L::kBytes)),
                "dense_mha_prefill: shared memory opt-in");
  if (!r.ok()) return r;
  hipLaunchKernelGGL(fn, dim3(heads, items), dim3(kThreads), L::kBytes, stream,
                     args);
  return CheckLaunch("dense_mha_prefill attention");
}

// Head dims rounded up to the instantiated tile widths.
int PadQk(int qk) {
  return qk <= 64 ? 64 : qk <= 128 ? 128 : qk <= 192 ? 192 : 256;
}
int PadV(int v) { return v <= 64 ? 64 : v <= 128 ? 128 : 256; }

LaunchResult DispatchAttention(const AttentionArgs& args, int qk, int v,
                               int items, int heads, hipStream_t stream) {
#define DSA_DENSE_CASE(Q, V)                                  \
  if (PadQk(qk) == Q && PadV(v) == V) {                       \
    return LaunchAttention<Q, V>(args, items, heads, stream); \
  }
  DSA_DENSE_CASE(64, 64)
  DSA_DENSE_CASE(64, 128)
  DSA_DENSE_CASE(64, 256)
  DSA_DENSE_CASE(128, 64)
  DSA_DENSE_CASE(128, 128)
  DSA_DENSE_CASE(128, 256)
  DSA_DENSE_CASE(192, 64)
  DSA_DENSE_CASE(192, 128)
  DSA_DENSE_CASE(192, 256)
  DSA_DENSE_CASE(256, 64)
  DSA_DENSE_CASE(256, 128)
  DSA_DENSE_CASE(256, 256)
#undef DSA_DENSE_CASE
  return Invalid(kOp, "qk %d / v %d: no kernel for these head dims", qk, v);
}

template <typename T>
LaunchResult ConvertToBf16(const T* in, uint16_t* out, int64_t n,
                           hipStream_t stream) {
  if (n == 0) return LaunchResult{};
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 8192);
  hipLaunchKernelGGL(ToBf16Kernel<T>, dim3(static_cast<unsigned>(blocks)),
                     dim3(256), 0, stream, in, out, n);
  return CheckLaunch("dense_mha_prefill bf16 conversion");
}

}  // namespace

LaunchResult DenseMhaPrefillLaunch(const DenseMhaPrefillParams& p,
                                   void* stream_ptr) {
  const hipStream_t stream = static_cast<hipStream_t>(stream_ptr);
  const int64_t nope = p.qk_nope_head_dim, rope = p.rope_dim, v = p.v_head_dim;
  const int64_t lora = p.kv_lora_rank;
  const int64_t qk = nope + rope;
  const bool fp8 = p.cache_encoding != LatentEncoding::kBFloat16;
  if (p.tokens < 0 || p.heads <= 0 || p.num_requests < 0) {
    return Invalid(kOp, "tokens=%lld heads=%d num_requests=%d out of range",
                   static_cast<long long>(p.tokens), p.heads, p.num_requests);
  }
  if (nope < 0 || nope % 8 != 0 || rope <= 0 || rope % 8 != 0 || v <= 0 ||
      v % 8 != 0 || qk > kMaxHeadDim || v > kMaxHeadDim) {
    return Invalid(kOp,
                   "qk_nope %lld, rope %lld, v %lld: the GPU kernel needs "
                   "multiples of 8 with nope + rope <= %d and v <= %d",
                   static_cast<long long>(nope), static_cast<long long>(rope),
                   static_cast<long long>(v), kMaxHeadDim, kMaxHeadDim);
  }
  if (lora <= 0 || lora % 8 != 0 || (fp8 && lora % 128 != 0)) {
    return Invalid(kOp,
                   "kv_lora_rank %lld: needs a positive multiple of 8 (of 128 "
                   "for an fp8 cache)",
                   static_cast<long long>(lora));
  }
  if (p.tokens == 0) return LaunchResult{};
  if (p.q == nullptr || p.kv_cache == nullptr || p.block_table == nullptr ||
      p.kv_b_proj == nullptr || p.output == nullptr ||
      p.host_seq_lens == nullptr || p.host_query_start_loc == nullptr) {
    return Invalid(kOp, "a pointer argument is null");
  }
  if (p.num_blocks <= 0 || p.block_size <= 0 || p.max_blocks_per_request <= 0 ||
      p.block_table_stride < p.max_blocks_per_request) {
    return Invalid(kOp,
                   "num_blocks %lld, block_size %d, max_blocks %d, block table "
                   "stride %lld: need positive sizes and stride >= max_blocks",
                   static_cast<long long>(p.num_blocks), p.block_size,
                   p.max_blocks_per_request,
                   static_cast<long long>(p.block_table_stride));
  }
  const int64_t entry_bytes =
      fp8 ? lora + 4 * (lora / 128) + 2 * rope : 2 * (lora + rope);

  // Requests with queries, their scratch rows, and the work items.
  if (p.host_query_start_loc[0] != 0 ||
      p.host_query_start_loc[p.num_requests] != p.tokens) {
    return Invalid(
        kOp, "query_start_loc runs from %d to %d, expected 0 to %lld",
        p.host_query_start_loc[0], p.host_query_start_loc[p.num_requests],
        static_cast<long long>(p.tokens));
  }
  std::vector<RequestInfo> requests;
  std::vector<std::pair<int64_t, WorkItem>> work;  // (keys, item)
  int64_t kv_rows = 0, max_len = 0;
  const int64_t capacity =
      static_cast<int64_t>(p.max_blocks_per_request) * p.block_size;
  for (int32_t r = 0; r < p.num_requests; ++r) {
    const int64_t n = static_cast<int64_t>(p.host_query_start_loc[r + 1]) -
                      p.host_query_start_loc[r];
    const int64_t len = p.host_seq_lens[r];
    if (n < 0 || n > len) {
      return Invalid(kOp,
                     "request %d has %lld query tokens (query_start_loc), "
                     "expected 0 to its seq_len %lld",
                     r, static_cast<long long>(n), static_cast<long long>(len));
    }
    if (len > capacity) {
      return Invalid(kOp,
                     "request %d: seq_len %lld exceeds its block table's %lld "
                     "slots",
                     r, static_cast<long long>(len),
                     static_cast<long long>(capacity));
    }
    if (n == 0) continue;
    RequestInfo info{};
    info.q_begin = p.host_query_start_loc[r];
    info.n = static_cast<int32_t>(n);
    info.seq_len = static_cast<int32_t>(len);
    info.kv_row = static_cast<int32_t>(kv_rows);
    info.table_row = r;
    const int32_t index = static_cast<int32_t>(requests.size());
    requests.push_back(info);
    for (int64_t tile = 0; tile * kBlockM < n; ++tile) {
      const int64_t keys = len - n + std::min<int64_t>((tile + 1) * kBlockM, n);
      work.push_back({keys, WorkItem{index, static_cast<int32_t>(tile)}});
    }
    kv_rows += len;
    max_len = std::max(max_len, len);
    if (kv_rows > 0x7fffffff) {
      return Invalid(kOp, "more than 2^31 latent rows in one call");
    }
  }
  // Longest blocks first, so the short ones fill the tail of the grid.
  std::stable_sort(work.begin(), work.end(), [](const auto& x, const auto& y) {
    return x.first > y.first;
  });
  if (work.size() > 65535) {
    return Invalid(kOp, "%zu query tiles: more than one launch holds",
                   work.size());
  }
  std::vector<uint8_t> meta(requests.size() * sizeof(RequestInfo) +
                            work.size() * sizeof(WorkItem));
  std::memcpy(meta.data(), requests.data(),
              requests.size() * sizeof(RequestInfo));
  for (size_t i = 0; i < work.size(); ++i) {
    std::memcpy(meta.data() + requests.size() * sizeof(RequestInfo) +
                    i * sizeof(WorkItem),
                &work[i].second, sizeof(WorkItem));
  }

  StreamScratch scratch(stream);
  const int64_t lat_ld = lora + rope;
  const int64_t kv_ld = static_cast<int64_t>(p.heads) * (nope + v);
  uint8_t* meta_dev = nullptr;
  uint16_t* lat = nullptr;
  uint16_t* kv = nullptr;
  LaunchResult r =
      scratch.Get(&meta_dev, meta.size(), "dense_mha_prefill metadata");
  if (!r.ok()) return r;
  r = scratch.Get(&lat, static_cast<size_t>(kv_rows * lat_ld * 2),
                  "dense_mha_prefill latent scratch");
  if (!r.ok()) return r;
  r = scratch.Get(&kv, static_cast<size_t>(kv_rows * kv_ld * 2),
                  "dense_mha_prefill K/V scratch");
  if (!r.ok()) return r;
  r = FromError(hipMemcpyAsync(meta_dev, meta.data(), meta.size(),
                               hipMemcpyHostToDevice, stream),
                "dense_mha_prefill metadata upload");
  if (!r.ok()) return r;
  const RequestInfo* req_dev = reinterpret_cast<const RequestInfo*>(meta_dev);
  const WorkItem* items_dev = reinterpret_cast<const WorkItem*>(
      meta_dev + requests.size() * sizeof(RequestInfo));

  // 1. Gather.
  {
    const dim3 grid(
        static_cast<unsigned>((max_len + kGatherRows - 1) / kGatherRows),
        static_cast<unsigned>(requests.size()));
    const uint8_t* cache = static_cast<const uint8_t*>(p.kv_cache);
#define DSA_GATHER(E)                                                         \
  hipLaunchKernelGGL(GatherLatentKernel<static_cast<int>(E)>, grid,           \
                     dim3(kGatherThreads), 0, stream, cache, entry_bytes,     \
                     p.num_blocks, p.block_size, p.block_table,               \
                     p.block_table_stride, p.max_blocks_per_request, req_dev, \
                     p.kv_lora_rank, p.rope_dim, lat, lat_ld)
    switch (p.cache_encoding) {
      case LatentEncoding::kBFloat16:
        DSA_GATHER(LatentEncoding::kBFloat16);
        break;
      case LatentEncoding::kE4m3fn:
        DSA_GATHER(LatentEncoding::kE4m3fn);
        break;
      case LatentEncoding::kE4m3fnuz:
        DSA_GATHER(LatentEncoding::kE4m3fnuz);
        break;
      default:
        return Invalid(kOp, "unknown cache encoding %d",
                       static_cast<int>(p.cache_encoding));
    }
#undef DSA_GATHER
    r = CheckLaunch("dense_mha_prefill gather");
    if (!r.ok()) return r;
  }

  // 2. Decompression: kv = lat[:, :lora] x kv_b_proj^T.
  const uint16_t* w = static_cast<const uint16_t*>(p.kv_b_proj);
  if (p.kv_b_proj_format == FloatFormat::kFloat32 ||
      reinterpret_cast<uintptr_t>(p.kv_b_proj) % 16 != 0) {
    uint16_t* wb = nullptr;
    r = scratch.Get(&wb, static_cast<size_t>(kv_ld * lora * 2),
                    "dense_mha_prefill weight scratch");
    if (!r.ok()) return r;
    r = p.kv_b_proj_format == FloatFormat::kFloat32
            ? ConvertToBf16(static_cast<const float*>(p.kv_b_proj), wb,
                            kv_ld * lora, stream)
            : ConvertToBf16(static_cast<const uint16_t*>(p.kv_b_proj), wb,
                            kv_ld * lora, stream);
    if (!r.ok()) return r;
    w = wb;
  }
  Bf16GemmParams g;
  g.a = lat;
  g.lda = lat_ld;
  g.b = w;
  g.ldb = lora;
  g.c = kv;
  g.ldc = kv_ld;
  g.m = kv_rows;
  g.n = kv_ld;
  g.k = lora;
  r = Bf16GemmLaunch(g, stream);
  if (!r.ok()) return r;

  // 3. Attention.
  const uint16_t* qb = static_cast<const uint16_t*>(p.q);
  if (p.q_format == FloatFormat::kFloat32 ||
      reinterpret_cast<uintptr_t>(p.q) % 16 != 0) {
    uint16_t* conv = nullptr;
    const int64_t n = p.tokens * p.heads * qk;
    r = scratch.Get(&conv, static_cast<size_t>(n * 2),
                    "dense_mha_prefill query scratch");
    if (!r.ok()) return r;
    r = p.q_format == FloatFormat::kFloat32
            ? ConvertToBf16(static_cast<const float*>(p.q), conv, n, stream)
            : ConvertToBf16(static_cast<const uint16_t*>(p.q), conv, n, stream);
    if (!r.ok()) return r;
    qb = conv;
  }
  AttentionArgs args;
  args.q = qb;
  args.kv = kv;
  args.lat = lat;
  args.out = p.output;
  args.requests = req_dev;
  args.items = items_dev;
  args.kv_ld = kv_ld;
  args.lat_ld = lat_ld;
  args.heads = p.heads;
  args.nope = static_cast<int32_t>(nope);
  args.rope = static_cast<int32_t>(rope);
  args.v = static_cast<int32_t>(v);
  args.lora = static_cast<int32_t>(lora);
  args.scale_log2 = p.softmax_scale * 1.4426950408889634f;
  args.out_bf16 = p.output_format == FloatFormat::kBFloat16;
  args.out_pairs = reinterpret_cast<uintptr_t>(p.output) % 8 == 0;
  return DispatchAttention(args, static_cast<int>(qk), static_cast<int>(v),
                           static_cast<int>(work.size()), p.heads, stream);
}

LaunchResult CopyToHostOnStream(void* dst, const void* src, size_t bytes,
                                void* stream_ptr) {
  const hipStream_t stream = static_cast<hipStream_t>(stream_ptr);
  if (bytes == 0) return LaunchResult{};
  LaunchResult r =
      FromError(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, stream),
                "copy to host");
  if (!r.ok()) return r;
  return FromError(hipStreamSynchronize(stream), "copy to host: synchronize");
}

}  // namespace dsa::attention::gpu
