// The sparse MLA's kernels without matrix instructions: the FMA pair that
// runs the whole op for every shape the matrix bodies do not take
// (kv_lora_rank / rope_dim other than 512 / 64, cache entries not 16-byte
// aligned, a device without the shared memory: one block per (row, head),
// the keys one after another, everything in fp32, then W_UV the same way);
// the merge of a row's top-k splits after a matrix body (MmaOutput); W_UV
// converted to bf16 rows for the W_UV GEMM (wuv.h) where it cannot read
// kv_b_proj in place.
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/mma.h"
#include "attention/gpu/sparse_mla/config.h"
#include "attention/gpu/sparse_mla/kernels.h"
#include "attention/gpu/sparse_mla/row_access.h"

namespace dsa::attention::gpu::sparse_mla {

using ::dsa::gpu::DecodeFp8;

template <Fp8Format F>
__device__ __forceinline__ float CacheValue(const SparseMlaParams& p,
                                            const uint8_t* entry, int d) {
  if (p.cache_type == LatentCacheType::kBFloat16) {
    return Bf16ToFloat(reinterpret_cast<const uint16_t*>(entry)[d]);
  }
  const int lora = p.kv_lora_rank;
  if (d >= lora) {
    const uint8_t* rope = entry + lora + 4 * (lora / 128) + 2 * (d - lora);
    return Bf16ToFloat(static_cast<uint16_t>(rope[0] | (rope[1] << 8)));
  }
  float scale;
  __builtin_memcpy(&scale, entry + lora + 4 * (d / 128), 4);
  return DecodeFp8<F>(entry[d]) * scale;
}

// latent[t, h, :] (fp32). Dynamic shared memory: q and the running output,
// (kv_lora + rope) + kv_lora floats, then the reduction scratch.
template <Fp8Format F>
__global__ void __launch_bounds__(kFmaThreads)
    SparseMlaFmaKernel(SparseMlaParams p, int64_t token_begin, float* latent) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int lora = p.kv_lora_rank;
  const int dim = lora + p.rope_dim;
  float* q = reinterpret_cast<float*>(smem);
  float* acc = q + dim;
  float* red = acc + lora;
  const int64_t t = token_begin + blockIdx.x;
  const int h = blockIdx.y;
  const int tid = threadIdx.x;
  constexpr int kWarpsFma = kFmaThreads / kDsaWarpSize;
  for (int d = tid; d < dim; d += kFmaThreads) {
    q[d] = LoadFloat(p.q, p.q_format,
                     t * p.q_token_stride + h * p.q_head_stride + d);
  }
  for (int d = tid; d < lora; d += kFmaThreads) acc[d] = 0.0f;
  const RowRequest rr = LoadRowRequest(p, t);
  float m = kNegInf, l = 0.0f;
  __syncthreads();
  const int32_t* row = p.topk_indices + t * p.topk_stride;
  for (int j = 0; j < p.topk && rr.request >= 0; ++j) {
    const int64_t off = EntryOffset(p, rr, row[j]);
    if (off < 0) continue;
    const uint8_t* entry = p.kv_cache + off;
    float part = 0.0f;
    for (int d = tid; d < dim; d += kFmaThreads) {
      part += q[d] * CacheValue<F>(p, entry, d);
    }
    for (int d = kDsaWarpSize / 2; d > 0; d /= 2) {
      part += DSA_SHFL_XOR(part, d, kDsaWarpSize);
    }
    if (tid % kDsaWarpSize == 0) red[tid / kDsaWarpSize] = part;
    __syncthreads();
    float s = 0.0f;
    for (int w = 0; w < kWarpsFma; ++w) s += red[w];
    __syncthreads();  // red is rewritten by the next key
    s *= p.softmax_scale;
    const float m_new = fmaxf(m, s);
    const float m_use = m_new == kNegInf ? 0.0f : m_new;
    const float alpha = expf(m - m_use);
    const float pr = expf(s - m_use);
    l = l * alpha + pr;
    m = m_new;
    for (int d = tid; d < lora; d += kFmaThreads) {
      acc[d] = acc[d] * alpha + pr * CacheValue<F>(p, entry, d);
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  float* out = latent + ((t - token_begin) * p.heads + h) * lora;
  for (int d = tid; d < lora; d += kFmaThreads) out[d] = acc[d] * inv;
}

// output[t, h, :] = W_UV[h] latent[t, h, :], one block per (row, head).
__global__ void __launch_bounds__(kFmaThreads)
    WuvFmaKernel(SparseMlaParams p, int64_t token_begin, const float* latent) {
  extern __shared__ __align__(16) uint8_t smem[];
  float* x = reinterpret_cast<float*>(smem);
  const int lora = p.kv_lora_rank;
  const int64_t t = token_begin + blockIdx.x;
  const int h = blockIdx.y;
  const float* in =
      latent + (blockIdx.x * static_cast<int64_t>(p.heads) + h) * lora;
  for (int c = threadIdx.x; c < lora; c += kFmaThreads) x[c] = in[c];
  __syncthreads();
  for (int o = threadIdx.x; o < p.v_head_dim; o += kFmaThreads) {
    const int64_t row =
        static_cast<int64_t>(h) * (p.qk_nope_head_dim + p.v_head_dim) +
        p.qk_nope_head_dim + o;
    float sum = 0.0f;
    for (int c = 0; c < lora; ++c) {
      sum += LoadFloat(p.kv_b_proj, p.kv_b_proj_format,
                       row * p.kv_b_proj_row_stride + c) *
             x[c];
    }
    const int64_t at = t * p.output_token_stride + h * p.output_head_stride + o;
    if (p.output_format == FloatFormat::kBFloat16) {
      static_cast<uint16_t*>(p.output)[at] = FloatToBf16(sum);
    } else {
      static_cast<float*>(p.output)[at] = sum;
    }
  }
}

LaunchResult LaunchFmaKernels(const SparseMlaParams& p, int64_t begin,
                              int64_t rows, float* latent, hipStream_t stream) {
  // Both kernels' shared memory is at most kFmaMaxSharedBytes (the
  // launcher checks), which needs no opt-in.
  const size_t attn_smem =
      static_cast<size_t>(FmaSharedBytes(p.kv_lora_rank, p.rope_dim));
  const size_t wuv_smem = static_cast<size_t>(p.kv_lora_rank) * 4;
  auto attn = p.cache_type == LatentCacheType::kFp8E4m3fnuz
                  ? &SparseMlaFmaKernel<Fp8Format::kE4m3fnuz>
                  : &SparseMlaFmaKernel<Fp8Format::kE4m3fn>;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(p.heads));
  hipLaunchKernelGGL(attn, grid, dim3(kFmaThreads), attn_smem, stream, p, begin,
                     latent);
  LaunchResult r = CheckLaunch(kOp);
  if (!r.ok()) return r;
  hipLaunchKernelGGL(WuvFmaKernel, grid, dim3(kFmaThreads), wuv_smem, stream, p,
                     begin, latent);
  return CheckLaunch(kOp);
}

// ---------------------------------------------------------------------------
// The merge of top-k splits.
// latent[t, h, :] = the splits' outputs weighted by their share of the
// softmax mass (exp2 of their log2-sum-exp); zeros when no split saw a key.
// Grid: (rows, heads); 128 threads, 4 dims each.
__global__ void __launch_bounds__(128)
    CombineSplitsKernel(int64_t rows, int heads, int splits,
                        const float* part_o, const float* part_lse,
                        uint16_t* latent) {
  const int64_t th = blockIdx.x * static_cast<int64_t>(heads) + blockIdx.y;
  const int64_t stride = rows * heads;
  float m = kNegInf;
  for (int s = 0; s < splits; ++s) m = fmaxf(m, part_lse[s * stride + th]);
  float acc[kLora / 128] = {};
  float total = 0.0f;
  if (m != kNegInf) {
    for (int s = 0; s < splits; ++s) {
      const float w = exp2f(part_lse[s * stride + th] - m);
      if (w == 0.0f) continue;
      total += w;
      const float* o = part_o + (s * stride + th) * kLora;
#pragma unroll
      for (int k = 0; k < kLora / 128; ++k)
        acc[k] += w * o[threadIdx.x + 128 * k];
    }
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
#pragma unroll
  for (int k = 0; k < kLora / 128; ++k) {
    latent[th * kLora + threadIdx.x + 128 * k] = FloatToBf16(acc[k] * inv);
  }
}

LaunchResult LaunchCombineSplits(int64_t rows, int heads, const MmaOutput& out,
                                 hipStream_t stream) {
  hipLaunchKernelGGL(
      CombineSplitsKernel,
      dim3(static_cast<unsigned>(rows), static_cast<unsigned>(heads)),
      dim3(128), 0, stream, rows, heads, out.splits, out.part_o, out.part_lse,
      out.latent);
  return CheckLaunch(kOp);
}

// ---------------------------------------------------------------------------
// W_UV in bf16 rows.
// w[h, o, c] = bf16(kv_b_proj[h * (nope + v) + nope + o, c]).
__global__ void ConvertWuvKernel(SparseMlaParams p, int lora, uint16_t* w) {
  const int64_t total = static_cast<int64_t>(p.heads) * p.v_head_dim * lora;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % lora;
    const int64_t ho = i / lora;
    const int64_t h = ho / p.v_head_dim, o = ho % p.v_head_dim;
    const int64_t row =
        h * (p.qk_nope_head_dim + p.v_head_dim) + p.qk_nope_head_dim + o;
    w[i] = FloatToBf16(LoadFloat(p.kv_b_proj, p.kv_b_proj_format,
                                 row * p.kv_b_proj_row_stride + c));
  }
}

LaunchResult LaunchConvertWuv(const SparseMlaParams& p, uint16_t* w,
                              hipStream_t stream) {
  const int64_t total = static_cast<int64_t>(p.heads) * p.v_head_dim * kLora;
  const int64_t blocks = (total + 255) / 256;
  hipLaunchKernelGGL(ConvertWuvKernel,
                     dim3(static_cast<unsigned>(blocks < 4096 ? blocks : 4096)),
                     dim3(256), 0, stream, p, kLora, w);
  return CheckLaunch(kOp);
}

}  // namespace dsa::attention::gpu::sparse_mla
