// DenseMhaPrefillLaunch (launch.h): the plan (plan.h) and the body choice
// (heuristics.h) first, then on the stream: the metadata upload when it
// does not fit the kernel parameters, the latent gather, the K/V
// decompression (the vendor GEMM through vendor_gemm.h, or gemm_bf16.h),
// the bf16 conversion of q where needed, and the attention (one of the
// instantiations/ by head-dim widths).
#include "attention/gpu/dense_mha/launch.h"

#include <algorithm>
#include <cstdint>

#include "attention/gpu/dense_mha/attention_launch.h"
#include "attention/gpu/dense_mha/config.h"
#include "attention/gpu/dense_mha/gemm_bf16.h"
#include "attention/gpu/dense_mha/heuristics.h"
#include "attention/gpu/dense_mha/plan.h"
#include "attention/gpu/dense_mha/prologue_kernels.h"
#include "attention/gpu/dense_mha/tma_maps.h"
#include "attention/gpu/dense_mha/vendor_gemm.h"
#include "attention/gpu/device/features.h"
#include "attention/gpu/device/hip_compat.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/stream_scratch.h"

namespace dsa::attention::gpu {
namespace dense_mha {
namespace {

constexpr const char* kOp = "dense_mha_prefill";

// The decompression's GEMM in this process: the platform's vendor GEMM
// (cuBLASLt / rocBLAS, when loaded) or gemm_bf16.
const char* DecompressionBackend() {
  const char* vendor = DenseMhaVendorGemmBackend();
  return vendor != nullptr ? vendor : "gemm_bf16";
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

LaunchResult Gather(const DenseMhaPrefillParams& p, const Plan& plan,
                    const Meta& meta, uint16_t* lat, int32_t* tile_counter,
                    hipStream_t stream) {
  const dim3 grid(
      static_cast<unsigned>((plan.max_rows + kGatherRows - 1) / kGatherRows),
      static_cast<unsigned>(plan.requests.size()));
  const uint8_t* cache = static_cast<const uint8_t*>(p.kv_cache);
  const int vec = GatherVectorElems(p, plan.entry_bytes);
#define DSA_GATHER(E)                                                        \
  {                                                                          \
    auto* kernel = vec == 8 ? &GatherLatentKernel<static_cast<int>(E), 8>    \
                            : &GatherLatentKernel<static_cast<int>(E), 2>;   \
    hipLaunchKernelGGL(kernel, grid, dim3(kGatherThreads), 0, stream, cache, \
                       plan.entry_bytes, p.num_blocks, p.block_size,         \
                       p.block_table, p.block_table_stride,                  \
                       p.max_blocks_per_request, meta, p.kv_lora_rank,       \
                       p.rope_dim, lat, plan.lat_ld, tile_counter);          \
  }
  switch (p.cache_encoding) {
    case LatentCacheType::kBFloat16:
      DSA_GATHER(LatentCacheType::kBFloat16);
      break;
    case LatentCacheType::kFp8E4m3fn:
      DSA_GATHER(LatentCacheType::kFp8E4m3fn);
      break;
    case LatentCacheType::kFp8E4m3fnuz:
      DSA_GATHER(LatentCacheType::kFp8E4m3fnuz);
      break;
    default:
      return Invalid(kOp, "unknown cache encoding %d",
                     static_cast<int>(p.cache_encoding));
  }
#undef DSA_GATHER
  return CheckLaunch("dense_mha_prefill gather");
}

// The decompression on the vendor GEMM: K_nope [S, heads * nope] =
// lat W_UK^T and V^T [heads * v, S] = W_UV lat^T. W_UK and W_UV are read
// where they are: the caller's split (params.h), or kv_b_proj's per-head
// row groups in place, one strided-batched product per operand with a batch
// per head (vendor_gemm.h; as fast as the contiguous product, and no split
// kernel or weight copy). Only a kv_b_proj the GEMM cannot read as it is
// (fp32, or not 16-byte aligned: plan.h's convert_weights) is first split
// into contiguous bf16 scratch.
LaunchResult DecompressOnVendorGemm(const DenseMhaPrefillParams& p,
                                    const Plan& plan, const uint16_t* lat,
                                    uint16_t* knope, uint16_t* vt, uint16_t* wk,
                                    uint16_t* wv, hipStream_t stream) {
  const int64_t nope = p.qk_nope_head_dim, v = p.v_head_dim;
  const int64_t lora = p.kv_lora_rank, heads = p.heads;
  const int64_t w_rows = heads * (nope + v);
  LaunchResult r;
  const bool presplit = p.w_uv != nullptr;
  const bool in_place = !presplit && !plan.convert_weights;
  const uint16_t* w_uk = wk;
  const uint16_t* w_uv = wv;
  if (presplit) {
    w_uk = p.w_uk;
    w_uv = p.w_uv;
  } else if (in_place) {
    w_uk = static_cast<const uint16_t*>(p.kv_b_proj);
    w_uv = w_uk + nope * lora;
  } else {
    const int64_t chunks = w_rows * (lora / 8);
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>((chunks + 255) / 256, 16384));
    if (p.kv_b_proj_format == FloatFormat::kFloat32) {
      hipLaunchKernelGGL(SplitWeightsKernel<float>, dim3(blocks), dim3(256), 0,
                         stream, static_cast<const float*>(p.kv_b_proj), wk, wv,
                         w_rows, static_cast<int32_t>(nope),
                         static_cast<int32_t>(v), static_cast<int32_t>(lora));
    } else {
      hipLaunchKernelGGL(SplitWeightsKernel<uint16_t>, dim3(blocks), dim3(256),
                         0, stream, static_cast<const uint16_t*>(p.kv_b_proj),
                         wk, wv, w_rows, static_cast<int32_t>(nope),
                         static_cast<int32_t>(v), static_cast<int32_t>(lora));
    }
    r = CheckLaunch("dense_mha_prefill weight split");
    if (!r.ok()) return r;
  }
  if (nope > 0) {
    Bf16GemmParams g;
    g.a = lat;
    g.lda = plan.lat_ld;
    g.b = w_uk;
    g.ldb = lora;
    if (in_place) {
      g.b_group_rows = nope;
      g.b_group_stride = nope + v;
    }
    g.c = knope;
    g.ldc = plan.knope_ld;
    g.m = plan.kv_rows;
    g.n = plan.knope_ld;
    g.k = lora;
    r = DenseMhaVendorGemmLaunch(g, stream);
    if (!r.ok()) return r;
  }
  Bf16GemmParams g;
  g.a = w_uv;
  g.lda = lora;
  if (in_place) {
    g.a_group_rows = v;
    g.a_group_stride = nope + v;
  }
  g.b = lat;
  g.ldb = plan.lat_ld;
  g.c = vt;
  g.ldc = plan.kv_rows;
  g.m = plan.vt_rows;
  g.n = plan.kv_rows;
  g.k = lora;
  return DenseMhaVendorGemmLaunch(g, stream);
}

// The decompression on gemm_bf16.h, reading kv_b_proj's per-head row groups
// (W_UK, W_UV) in place: K_nope = lat[:, :lora] W_UK^T and
// V^T = W_UV lat[:, :lora]^T.
LaunchResult DecompressOnOwnGemm(const DenseMhaPrefillParams& p,
                                 const Plan& plan, const uint16_t* lat,
                                 uint16_t* knope, uint16_t* vt, uint16_t* wb,
                                 hipStream_t stream) {
  const int64_t nope = p.qk_nope_head_dim, v = p.v_head_dim;
  const int64_t lora = p.kv_lora_rank;
  const int64_t w_elems = static_cast<int64_t>(p.heads) * (nope + v) * lora;
  const uint16_t* w = static_cast<const uint16_t*>(p.kv_b_proj);
  LaunchResult r;
  if (plan.convert_weights) {
    r = p.kv_b_proj_format == FloatFormat::kFloat32
            ? ConvertToBf16(static_cast<const float*>(p.kv_b_proj), wb, w_elems,
                            stream)
            : ConvertToBf16(static_cast<const uint16_t*>(p.kv_b_proj), wb,
                            w_elems, stream);
    if (!r.ok()) return r;
    w = wb;
  }
  if (nope > 0) {
    Bf16GemmParams g;
    g.a = lat;
    g.lda = plan.lat_ld;
    g.b = w;
    g.ldb = lora;
    g.b_group_rows = nope;
    g.b_group_stride = nope + v;
    g.c = knope;
    g.ldc = plan.knope_ld;
    g.m = plan.kv_rows;
    g.n = plan.knope_ld;
    g.k = lora;
    r = Bf16GemmLaunch(g, stream);
    if (!r.ok()) return r;
  }
  Bf16GemmParams g;
  g.a = w + nope * lora;
  g.lda = lora;
  g.a_group_rows = v;
  g.a_group_stride = nope + v;
  g.b = lat;
  g.ldb = plan.lat_ld;
  g.c = vt;
  g.ldc = plan.kv_rows;
  g.m = plan.vt_rows;
  g.n = plan.kv_rows;
  g.k = lora;
  return Bf16GemmLaunch(g, stream);
}

LaunchResult DispatchAttention(const AttentionLaunch& l) {
#define DSA_DENSE_MHA_DISPATCH(QK, V)                     \
  if (l.choice.qk_width == QK && l.choice.v_width == V) { \
    return LaunchAttention<QK, V>(l);                     \
  }
#define DSA_DENSE_MHA_DISPATCH_QK(QK) \
  DSA_DENSE_MHA_V_WIDTHS(DSA_DENSE_MHA_DISPATCH, QK)
  DSA_DENSE_MHA_QK_WIDTHS(DSA_DENSE_MHA_DISPATCH_QK)
#undef DSA_DENSE_MHA_DISPATCH_QK
#undef DSA_DENSE_MHA_DISPATCH
  return Invalid(kOp, "qk %d / v %d: no kernel for these head dims",
                 l.args.nope + l.args.rope, l.args.v);
}

LaunchResult Prefill(const DenseMhaPrefillParams& p, hipStream_t stream) {
  Plan plan;
  LaunchResult r = PlanDenseMhaPrefill(p, kBlockM, &plan);
  if (!r.ok() || p.tokens == 0) return r;
  AttentionLaunch launch;
  r = CurrentDeviceFeatures(&launch.features);
  if (!r.ok()) return r;
  r = ChooseAttention(p, launch.features, &launch.choice);
  if (!r.ok()) return r;

  // Every scratch buffer of the call, from one block of the stream's arena:
  // the metadata (when not inline), the latent rows with the attention's
  // tile counter after them, K_nope, V^T, the weights as the decompression
  // reads them, q in bf16 where needed.
  const bool vendor_gemm =
      !p.own_decompression_gemm && DenseMhaVendorGemmBackend() != nullptr;
  Meta& meta = plan.meta;
  StreamScratch scratch(stream, launch.features.device);
  uint8_t* meta_dev = nullptr;
  if (!meta.is_inline) scratch.Add(&meta_dev, plan.meta_upload.size());
  uint16_t* lat = nullptr;
  uint16_t* knope = nullptr;
  uint16_t* vt = nullptr;
  const size_t counter_offset = (plan.latent_bytes + 255) / 256 * 256;
  scratch.Add(&lat, counter_offset + sizeof(int32_t));
  scratch.Add(&knope, plan.knope_bytes);
  scratch.Add(&vt, plan.vt_bytes);
  uint16_t* wk = nullptr;
  uint16_t* wv = nullptr;
  uint16_t* wb = nullptr;
  if (vendor_gemm && p.w_uv == nullptr && plan.convert_weights) {
    // Split here: not by the caller, and not readable in place.
    if (p.qk_nope_head_dim > 0) scratch.Add(&wk, plan.wk_bytes);
    scratch.Add(&wv, plan.wv_bytes);
  } else if (!vendor_gemm && plan.convert_weights) {
    scratch.Add(&wb, plan.weight_bytes);
  }
  uint16_t* q_bf16 = nullptr;
  if (plan.convert_queries) scratch.Add(&q_bf16, plan.query_bytes);
  r = scratch.Allocate("dense_mha_prefill scratch");
  if (!r.ok() || p.reserve_only) return r;

  if (!meta.is_inline) {
    // From pageable memory: the runtime stages it before returning.
    r = FallibleCall(platform::FaultSite::kStreamCopy,
                     "dense_mha_prefill metadata upload", [&] {
                       return hipMemcpyAsync(meta_dev, plan.meta_upload.data(),
                                             plan.meta_upload.size(),
                                             hipMemcpyHostToDevice, stream);
                     });
    if (!r.ok()) return r;
    meta.requests = reinterpret_cast<const RequestInfo*>(meta_dev);
    meta.items = reinterpret_cast<const WorkItem*>(
        meta_dev + plan.requests.size() * sizeof(RequestInfo));
  }
  int32_t* tile_counter = reinterpret_cast<int32_t*>(
      reinterpret_cast<uint8_t*>(lat) + counter_offset);

  r = Gather(p, plan, meta, lat, tile_counter, stream);
  if (!r.ok()) return r;
  r = vendor_gemm
          ? DecompressOnVendorGemm(p, plan, lat, knope, vt, wk, wv, stream)
          : DecompressOnOwnGemm(p, plan, lat, knope, vt, wb, stream);
  if (!r.ok()) return r;

  const uint16_t* qb = static_cast<const uint16_t*>(p.q);
  if (plan.convert_queries) {
    const int64_t n =
        p.tokens * p.heads * (int64_t{p.qk_nope_head_dim} + p.rope_dim);
    r = p.q_format == FloatFormat::kFloat32
            ? ConvertToBf16(static_cast<const float*>(p.q), q_bf16, n, stream)
            : ConvertToBf16(static_cast<const uint16_t*>(p.q), q_bf16, n,
                            stream);
    if (!r.ok()) return r;
    qb = q_bf16;
  }
  AttentionArgs& args = launch.args;
  args.q = qb;
  args.knope = knope;
  args.vt = vt;
  args.lat = lat;
  args.out = p.output;
  args.meta = meta;
  args.knope_ld = plan.knope_ld;
  args.vt_ld = plan.kv_rows;
  args.lat_ld = plan.lat_ld;
  args.heads = p.heads;
  args.nope = p.qk_nope_head_dim;
  args.rope = p.rope_dim;
  args.v = p.v_head_dim;
  args.lora = p.kv_lora_rank;
  args.tokens = p.tokens;
  args.scale_log2 = p.softmax_scale * 1.4426950408889634f;
  args.out_bf16 = p.output_format == FloatFormat::kBFloat16;
  args.out_pairs = reinterpret_cast<uintptr_t>(p.output) % 8 == 0;
  args.out_chunks =
      args.out_bf16 && reinterpret_cast<uintptr_t>(p.output) % 16 == 0;
  launch.items = static_cast<int>(plan.items.size());
  launch.stream = stream;
  args.num_items = launch.items;
  args.tile_counter = tile_counter;
  if (launch.choice.body == DenseMhaBody::kSm90Tma) {
    r = ScheduleTmaAttention(launch.choice, launch.items, p.heads, plan.kv_rows,
                             p.attention_ctas, launch.features.multiprocessors,
                             &launch.schedule);
    if (!r.ok()) return r;
    args.num_tiles = launch.schedule.tiles;
    args.heads_per_section = launch.schedule.heads_per_section;
  }
  return DispatchAttention(launch);
}

}  // namespace
}  // namespace dense_mha

LaunchResult DenseMhaPrefillLaunch(const DenseMhaPrefillParams& params,
                                   void* stream) {
  return dense_mha::Prefill(params, static_cast<hipStream_t>(stream));
}

const char* DenseMhaAttentionPath(const DenseMhaPrefillParams& p) {
  DeviceFeatures features;
  dense_mha::AttentionChoice choice;
  if (!CurrentDeviceFeatures(&features).ok() ||
      !dense_mha::ChooseAttention(p, features, &choice).ok()) {
    return "none";
  }
  return dense_mha::AttentionPathName(choice);
}

const char* DenseMhaDecompressionPath() {
  return dense_mha::DecompressionBackend();
}

SmallCacheStats DenseMhaTensorMapStats() {
#if defined(DSA_GPU_CUDA)
  return ThreadCache<dense_mha::TmaMapsCache>().stats();
#else
  return SmallCacheStats();
#endif
}

}  // namespace dsa::attention::gpu
