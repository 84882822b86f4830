#include "attention/gpu/dense_mha/heuristics.h"

#include <algorithm>
#include <cstdint>

#include "attention/gpu/dense_mha/config.h"

namespace dsa::attention::gpu::dense_mha {
namespace {

constexpr const char* kOp = "dense_mha_prefill";

// A TMA box of 64 columns covers one swizzle block of one source (K_nope,
// k_pe or V^T), so every head dim must be a whole number of them.
bool TmaHeadDims(const DenseMhaPrefillParams& p) {
  return p.qk_nope_head_dim % 64 == 0 && p.rope_dim % 64 == 0 &&
         p.v_head_dim % 64 == 0;
}

}  // namespace

LaunchResult ChooseAttention(const DenseMhaPrefillParams& p,
                             const DeviceFeatures& f, AttentionChoice* choice) {
  AttentionChoice c;
  c.qk_width = QkWidth(p.qk_nope_head_dim + p.rope_dim);
  c.v_width = VWidth(p.v_head_dim);
  if (p.attention_ctas < 0) {
    return Invalid(kOp, "attention_ctas %d: 0 (the heuristics' grid) or a cap",
                   p.attention_ctas);
  }
  switch (p.attention_body) {
    case DenseMhaBody::kAuto:
      c.body = !f.sm90a                          ? DenseMhaBody::kWarp
               : f.tensor_maps && TmaHeadDims(p) ? DenseMhaBody::kSm90Tma
                                                 : DenseMhaBody::kSm90Pipelined;
      break;
    case DenseMhaBody::kWarp:
      c.body = DenseMhaBody::kWarp;
      break;
    case DenseMhaBody::kSm90Pipelined:
    case DenseMhaBody::kSm90Tma:
      c.body = p.attention_body;
      if (!f.sm90a) {
        return Invalid(
            kOp,
            "the %s body needs sm_90a device code, which this "
            "build or device lacks",
            c.body == DenseMhaBody::kSm90Tma ? "sm90-tma" : "sm90-pipelined");
      }
      if (c.body == DenseMhaBody::kSm90Tma && !f.tensor_maps) {
        return Invalid(kOp,
                       "the sm90-tma body needs the driver's tensor-map "
                       "encoder (cuTensorMapEncodeTiled), which it lacks");
      }
      if (c.body == DenseMhaBody::kSm90Tma && !TmaHeadDims(p)) {
        return Invalid(kOp,
                       "the sm90-tma body needs nope, rope and v multiples of "
                       "64 (got %d, %d, %d)",
                       p.qk_nope_head_dim, p.rope_dim, p.v_head_dim);
      }
      break;
    default:
      return Invalid(kOp, "unknown attention body %d",
                     static_cast<int>(p.attention_body));
  }
  if (c.body == DenseMhaBody::kSm90Tma) {
    c.tma_tile_keys = TmaTileKeys(c.qk_width, c.v_width);
  }
  *choice = c;
  return LaunchResult{};
}

LaunchResult ScheduleTmaAttention(const AttentionChoice& c, int64_t items,
                                  int heads, int64_t kv_rows, int max_ctas,
                                  int multiprocessors, TmaSchedule* schedule) {
  const int64_t tiles = items * heads;
  if (items <= 0 || heads <= 0 || tiles > 0x7fffffff) {
    return Invalid(kOp,
                   "%lld work items x %d heads: not a tile count one launch "
                   "holds",
                   static_cast<long long>(items), heads);
  }
  TmaSchedule s;
  s.tiles = static_cast<int>(tiles);
  int64_t ctas = std::min<int64_t>(tiles, std::max(multiprocessors, 1));
  if (max_ctas > 0) ctas = std::min<int64_t>(ctas, max_ctas);
  s.ctas = static_cast<int>(ctas);
  const int64_t head_bytes =
      std::max<int64_t>(kv_rows, 1) * (c.qk_width + c.v_width) * 2;
  s.heads_per_section = static_cast<int>(std::clamp<int64_t>(
      kL2SectionBytes / head_bytes, 1, static_cast<int64_t>(heads)));
  *schedule = s;
  return LaunchResult{};
}

int GatherVectorElems(const DenseMhaPrefillParams& p, int64_t entry_bytes) {
  const bool fp8 = p.cache_encoding != LatentCacheType::kBFloat16;
  const int64_t rope_offset =
      fp8 ? int64_t{p.kv_lora_rank} + 4 * (p.kv_lora_rank / 128) : 0;
  const bool aligned = reinterpret_cast<uintptr_t>(p.kv_cache) % 16 == 0 &&
                       entry_bytes % 16 == 0 && rope_offset % 16 == 0 &&
                       p.kv_lora_rank % 8 == 0 && p.rope_dim % 8 == 0;
  return aligned ? 8 : 2;
}

const char* AttentionPathName(const AttentionChoice& c) {
  switch (c.body) {
    case DenseMhaBody::kWarp:
      return "warp";
    case DenseMhaBody::kSm90Pipelined:
      return "sm90-pipelined";
    case DenseMhaBody::kSm90Tma:
      return c.tma_tile_keys == 128  ? "sm90-tma-128"
             : c.tma_tile_keys == 80 ? "sm90-tma-80"
                                     : "sm90-tma-64";
    default:
      return "none";
  }
}

LaunchResult ChooseBf16Gemm(const Bf16GemmParams& p, const DeviceFeatures& f,
                            Bf16GemmBody* body) {
  switch (p.body) {
    case Bf16GemmBody::kAuto:
      *body = f.sm90a ? Bf16GemmBody::kSm90 : Bf16GemmBody::kWarp;
      return LaunchResult{};
    case Bf16GemmBody::kWarp:
      *body = Bf16GemmBody::kWarp;
      return LaunchResult{};
    case Bf16GemmBody::kSm90:
      if (!f.sm90a) {
        return Invalid("bf16_gemm",
                       "the sm90 body needs sm_90a device code, which this "
                       "build or device lacks");
      }
      *body = Bf16GemmBody::kSm90;
      return LaunchResult{};
    default:
      return Invalid("bf16_gemm", "unknown body %d", static_cast<int>(p.body));
  }
}

const char* Bf16GemmPathName(Bf16GemmBody body) {
  return body == Bf16GemmBody::kSm90 ? "sm90" : "warp";
}

}  // namespace dsa::attention::gpu::dense_mha
