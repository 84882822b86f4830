// Times DenseMhaPrefillLaunch (gather + decompression GEMM + attention) at the
// presets' shapes, and the decompression GEMM alone, with device events
// (median of many calls after warm-up, default stream). Prints one line per
// shape with milliseconds and TFLOP/s; torch_baseline.py times the torch
// equivalent (SDPA + the decompression matmul) in the same device call.
// "total" is the median of calls timed one at a time (the host's work before
// the first kernel and between kernels included, as torch's figures are);
// "queued" the time per call of calls enqueued back to back (the device's
// time where the host keeps ahead); "host" the median time the host spends
// inside one call (planning and issuing its kernels).
//
//   dense_mha_bench [--quick | --t8192 | --floor | --once | --compare]
//                   [--body=warp | sm90-pipelined | sm90-tma]
// --body runs that attention body instead of the default one (for
// comparisons; params.attention_body). Each line names the body that ran.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "attention/gpu/dense_mha/gemm_bf16.h"
#include "attention/gpu/dense_mha/launch.h"
#include "attention/gpu/dense_mha/vendor_gemm.h"
#include "attention/gpu/device/runtime.h"

namespace dsa::attention::gpu {
namespace {

struct Preset {
  const char* name;
  int heads, nope, rope, v;
};
constexpr Preset kGlm = {"glm5.1", 64, 192, 64, 256};
constexpr Preset kDeepSeek = {"deepseek3.2", 128, 128, 64, 128};
constexpr int kLora = 512;
constexpr int kBlockSize = 64;

// The attention body asked for (--body), default: the heuristics' choice.
DenseMhaBody g_body = DenseMhaBody::kAuto;

// Fast deterministic uniform floats in [-1, 1).
struct Rng {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  float Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<float>(static_cast<int32_t>(s >> 32)) * 0x1p-31f;
  }
};

// Random bf16 values in [-scale, scale): a block of 2^20 fresh values
// repeated, so the host does not spend seconds on the large query arrays.
void FillBf16(std::vector<uint16_t>& v, float scale, Rng& rng) {
  const size_t block = std::min<size_t>(v.size(), size_t{1} << 20);
  for (size_t i = 0; i < block; ++i) v[i] = FloatToBf16(rng.Next() * scale);
  for (size_t i = block; i < v.size(); i += block) {
    std::memcpy(v.data() + i, v.data(), std::min(block, v.size() - i) * 2);
  }
}

bool Check(const LaunchResult& r, const char* what) {
  if (!r.ok()) std::fprintf(stderr, "%s: %s\n", what, r.message);
  return r.ok();
}

struct Buffer {
  void* p = nullptr;
  ~Buffer() {
    if (p != nullptr) (void)DeviceFree(p);
  }
  template <typename T>
  bool Upload(const std::vector<T>& host) {
    return Check(DeviceMalloc(&p, host.size() * sizeof(T)), "malloc") &&
           Check(CopyToDevice(p, host.data(), host.size() * sizeof(T)),
                 "upload");
  }
  bool Alloc(size_t bytes) { return Check(DeviceMalloc(&p, bytes), "malloc"); }
};

// The host's time inside each DenseMhaPrefillLaunch (planning and
// issuing every kernel, until the call returns), in microseconds.
std::vector<double> g_host_us;

LaunchResult RunDense(void* arg) {
  const auto begin = std::chrono::steady_clock::now();
  const LaunchResult r =
      DenseMhaPrefillLaunch(*static_cast<DenseMhaPrefillParams*>(arg), nullptr);
  g_host_us.push_back(std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - begin)
                          .count());
  return r;
}

// The median of the last `n` host times.
double MedianHostUs(int n) {
  std::vector<double> last(
      g_host_us.end() - std::min<size_t>(n, g_host_us.size()), g_host_us.end());
  if (last.empty()) return 0;
  std::sort(last.begin(), last.end());
  return last[last.size() / 2];
}
// The decompression as the launcher runs it: K_nope, then V^T, on
// gemm_bf16.h over kv_b_proj's row groups ...
LaunchResult RunGemm(void* arg) {
  const Bf16GemmParams* g = static_cast<Bf16GemmParams*>(arg);
  LaunchResult r = Bf16GemmLaunch(g[0], nullptr);
  return r.ok() ? Bf16GemmLaunch(g[1], nullptr) : r;
}
// ... or on the vendor GEMM: over contiguous W_UK / W_UV (what a caller
// that splits kv_b_proj once passes), or over kv_b_proj's row groups in
// place (what the launcher runs without that split).
LaunchResult RunVendorGemm(void* arg) {
  const Bf16GemmParams* g = static_cast<Bf16GemmParams*>(arg);
  LaunchResult r = DenseMhaVendorGemmLaunch(g[0], nullptr);
  return r.ok() ? DenseMhaVendorGemmLaunch(g[1], nullptr) : r;
}

// One shape: requests of (context, new tokens), one cache encoding.
bool Bench(const Preset& pre, const char* label,
           const std::vector<std::pair<int32_t, int32_t>>& requests,
           LatentCacheType enc, int iters) {
  Rng rng;
  std::vector<int32_t> seq_lens, starts = {0};
  int32_t max_blocks = 1;
  for (const auto& [context, fresh] : requests) {
    seq_lens.push_back(context + fresh);
    starts.push_back(starts.back() + fresh);
    max_blocks =
        std::max(max_blocks, (context + fresh + kBlockSize - 1) / kBlockSize);
  }
  const int32_t nreq = static_cast<int32_t>(requests.size());
  const int64_t tokens = starts.back();
  const int64_t num_blocks = int64_t{nreq} * max_blocks;
  std::vector<int32_t> table(num_blocks);
  for (int64_t i = 0; i < num_blocks; ++i) {
    table[i] = static_cast<int32_t>((i * 7919) % num_blocks);  // scattered
  }
  const bool fp8 = enc != LatentCacheType::kBFloat16;
  const int64_t entry =
      fp8 ? kLora + 4 * (kLora / 128) + 2 * pre.rope : 2 * (kLora + pre.rope);
  std::vector<uint8_t> cache(num_blocks * kBlockSize * entry);
  const Fp8Traits traits = Fp8TraitsOf(DType::kFloat8E4m3fn);
  for (int64_t s = 0; s < num_blocks * kBlockSize; ++s) {
    uint8_t* e = cache.data() + s * entry;
    if (!fp8) {
      for (int i = 0; i < kLora + pre.rope; ++i) {
        const uint16_t b = FloatToBf16(rng.Next());
        std::memcpy(e + 2 * i, &b, 2);
      }
    } else {
      for (int i = 0; i < kLora; ++i)
        e[i] = FloatToFp8(rng.Next() * 400, traits);
      for (int t = 0; t < kLora / 128; ++t) {
        const float scale = 1.0f / 256;
        std::memcpy(e + kLora + 4 * t, &scale, 4);
      }
      for (int i = 0; i < pre.rope; ++i) {
        const uint16_t b = FloatToBf16(rng.Next());
        std::memcpy(e + kLora + 4 * (kLora / 128) + 2 * i, &b, 2);
      }
    }
  }
  const int qk = pre.nope + pre.rope;
  std::vector<uint16_t> q(tokens * pre.heads * qk);
  FillBf16(q, 1.0f, rng);
  std::vector<uint16_t> w(int64_t{pre.heads} * (pre.nope + pre.v) * kLora);
  FillBf16(w, 0.05f, rng);

  Buffer d_q, d_cache, d_table, d_w, d_out;
  if (!d_q.Upload(q) || !d_cache.Upload(cache) || !d_table.Upload(table) ||
      !d_w.Upload(w) || !d_out.Alloc(tokens * pre.heads * pre.v * 2)) {
    return false;
  }
  DenseMhaPrefillParams p;
  p.q = d_q.p;
  p.q_format = FloatFormat::kBFloat16;
  p.kv_cache = d_cache.p;
  p.cache_encoding = enc;
  p.num_blocks = num_blocks;
  p.block_size = kBlockSize;
  p.kv_lora_rank = kLora;
  p.rope_dim = pre.rope;
  p.block_table = static_cast<const int32_t*>(d_table.p);
  p.num_requests = nreq;
  p.max_blocks_per_request = max_blocks;
  p.block_table_stride = max_blocks;
  p.host_seq_lens = seq_lens.data();
  p.host_query_start_loc = starts.data();
  p.kv_b_proj = d_w.p;
  p.kv_b_proj_format = FloatFormat::kBFloat16;
  p.output = d_out.p;
  p.output_format = FloatFormat::kBFloat16;
  p.tokens = tokens;
  p.heads = pre.heads;
  p.qk_nope_head_dim = pre.nope;
  p.v_head_dim = pre.v;
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(qk));
  p.attention_body = g_body;
  float ms = 0, queued_ms = 0;
  if (!Check(TimeMedianMs(&RunDense, &p, 3, iters, &ms), "dense")) {
    return false;
  }
  const double host_us = MedianHostUs(iters);
  if (!Check(TimeQueuedMs(&RunDense, &p, 3, iters, &queued_ms), "dense")) {
    return false;
  }
  // Output sanity: finite.
  std::vector<uint16_t> out(tokens * pre.heads * pre.v);
  if (!Check(CopyToHost(out.data(), d_out.p, out.size() * 2), "download")) {
    return false;
  }
  int64_t bad = 0;
  for (uint16_t b : out) bad += !std::isfinite(Bf16ToFloat(b));

  // The decompression GEMMs alone, same shapes (rows padded to 64 per
  // request as in the launcher).
  int64_t rows = 0;
  for (int32_t r = 0; r < nreq; ++r) rows += (seq_lens[r] + 63) / 64 * 64;
  Buffer d_lat, d_k, d_vt;
  if (!d_lat.Alloc(rows * (kLora + pre.rope) * 2) ||
      !d_k.Alloc(rows * int64_t{pre.heads} * pre.nope * 2) ||
      !d_vt.Alloc(rows * int64_t{pre.heads} * pre.v * 2) ||
      !Check(DeviceMemset(d_lat.p, 0x3c, rows * (kLora + pre.rope) * 2),
             "memset")) {
    return false;
  }
  Bf16GemmParams g[2];
  g[0].a = static_cast<const uint16_t*>(d_lat.p);
  g[0].lda = kLora + pre.rope;
  g[0].b = static_cast<const uint16_t*>(d_w.p);
  g[0].ldb = kLora;
  g[0].b_group_rows = pre.nope;
  g[0].b_group_stride = pre.nope + pre.v;
  g[0].c = static_cast<uint16_t*>(d_k.p);
  g[0].ldc = int64_t{pre.heads} * pre.nope;
  g[0].m = rows;
  g[0].n = g[0].ldc;
  g[0].k = kLora;
  g[1].a = static_cast<const uint16_t*>(d_w.p) + pre.nope * kLora;
  g[1].lda = kLora;
  g[1].a_group_rows = pre.v;
  g[1].a_group_stride = pre.nope + pre.v;
  g[1].b = static_cast<const uint16_t*>(d_lat.p);
  g[1].ldb = kLora + pre.rope;
  g[1].c = static_cast<uint16_t*>(d_vt.p);
  g[1].ldc = rows;
  g[1].m = int64_t{pre.heads} * pre.v;
  g[1].n = rows;
  g[1].k = kLora;
  float gemm_ms = 0, inplace_ms = 0;
  if (std::strcmp(DenseMhaDecompressionPath(), "gemm_bf16") != 0) {
    // The vendor GEMM over kv_b_proj's row groups in place (one batched
    // product per operand, no weight split).
    if (!Check(TimeMedianMs(&RunVendorGemm, g, 3, iters, &inplace_ms),
               "gemm in place")) {
      inplace_ms = -1;
    }
    // Contiguous weights: W_UK rows, then W_UV rows, of the same buffer.
    Bf16GemmParams vg[2] = {g[0], g[1]};
    vg[0].b_group_rows = vg[0].b_group_stride = 0;
    vg[1].a_group_rows = vg[1].a_group_stride = 0;
    vg[1].a = static_cast<const uint16_t*>(d_w.p) +
              int64_t{pre.heads} * pre.nope * kLora;
    if (!Check(TimeMedianMs(&RunVendorGemm, vg, 3, iters, &gemm_ms), "gemm")) {
      return false;
    }
  } else if (!Check(TimeMedianMs(&RunGemm, g, 3, iters, &gemm_ms), "gemm")) {
    return false;
  }
  const DenseMhaFlops f = DenseMhaPrefillFlops(p);
  std::printf(
      "dense %-11s %-22s cache=%-6s tokens=%6lld  total %8.3f ms "
      "(%6.1f TFLOP/s)  queued %8.3f ms  gemm %7.3f ms (%6.1f TFLOP/s)  "
      "rest %8.3f ms (attention %6.1f TFLOP/s) %s%s  gemm in place %7.3f "
      "ms  host %6.1f us\n",
      pre.name, label, fp8 ? "fp8" : "bf16", static_cast<long long>(tokens), ms,
      (f.attention + f.decompression) / (ms * 1e9), queued_ms, gemm_ms,
      f.decompression / (gemm_ms * 1e9), ms - gemm_ms,
      f.attention / ((ms - gemm_ms) * 1e9), DenseMhaAttentionPath(p),
      bad ? " NON-FINITE OUTPUT" : "", inplace_ms, host_us);
  std::fflush(stdout);
  return bad == 0;
}

}  // namespace
}  // namespace dsa::attention::gpu

int main(int argc, char** argv) {
  using namespace dsa::attention::gpu;
  std::string mode;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--body=warp") {
      g_body = DenseMhaBody::kWarp;
    } else if (arg == "--body=sm90-pipelined") {
      g_body = DenseMhaBody::kSm90Pipelined;
    } else if (arg == "--body=sm90-tma") {
      g_body = DenseMhaBody::kSm90Tma;
    } else if (arg.rfind("--body=", 0) == 0) {
      std::fprintf(stderr, "dense_mha_bench: unknown body %s\n", arg.c_str());
      return 2;
    } else {
      mode = arg;
    }
  }
  const bool quick = mode == "--quick";
  const bool only_long = mode == "--t8192";  // the floor's shapes alone
  // The floor's shapes and T = 1024, bf16 cache, full iterations.
  const bool floor_only = mode == "--floor";
  // One call per timing after the warm-ups, GLM-5.1 and DeepSeek-V3.2 at
  // T = 1024, GLM-5.1 at T = 8192, then (after those three, which older
  // builds' --once also ran) GLM-5.1 4 x 2048, DeepSeek-V3.2 4 x 2048 and
  // DeepSeek-V3.2 T = 8192, for a profiler.
  const std::vector<std::pair<int32_t, int32_t>> four_2k = {
      {0, 2048}, {0, 2048}, {0, 2048}, {0, 2048}};
  if (mode == "--once") {
    bool ok = true;
    for (const Preset* pre : {&kGlm, &kDeepSeek}) {
      ok &= Bench(*pre, "T=1024", {{0, 1024}}, LatentCacheType::kBFloat16, 1);
    }
    ok &= Bench(kGlm, "T=8192", {{0, 8192}}, LatentCacheType::kBFloat16, 1);
    for (const Preset* pre : {&kGlm, &kDeepSeek}) {
      ok &= Bench(*pre, "4 requests x 2048", four_2k,
                  LatentCacheType::kBFloat16, 1);
    }
    ok &=
        Bench(kDeepSeek, "T=8192", {{0, 8192}}, LatentCacheType::kBFloat16, 1);
    return ok ? 0 : 1;
  }
  // The shapes where the call is closest to torch's (T = 8192, 4 x 2048,
  // 8 x 1024), alone, so that a device call can run this and
  // torch_baseline.py --compare in turns several times and compare medians
  // taken under the same conditions.
  if (mode == "--compare") {
    bool ok = true;
    for (const Preset* pre : {&kGlm, &kDeepSeek}) {
      ok &= Bench(*pre, "T=8192", {{0, 8192}}, LatentCacheType::kBFloat16, 20);
      ok &= Bench(*pre, "4 requests x 2048", four_2k,
                  LatentCacheType::kBFloat16, 20);
      ok &= Bench(*pre, "8 requests x 1024",
                  std::vector<std::pair<int32_t, int32_t>>(8, {0, 1024}),
                  LatentCacheType::kBFloat16, 20);
    }
    return ok ? 0 : 1;
  }
  std::printf("decompression: %s (own gemm body: %s)\n",
              DenseMhaDecompressionPath(), Bf16GemmPath(Bf16GemmParams{}));
  const int iters = quick ? 5 : 20;
  bool ok = true;
  // The floor's shapes first (T = 8192), then the rest.
  for (const Preset* pre : {&kGlm, &kDeepSeek}) {
    ok &= Bench(*pre, "T=8192", {{0, 8192}}, LatentCacheType::kBFloat16, iters);
  }
  for (const Preset* pre : {&kGlm, &kDeepSeek}) {
    if (only_long) break;
    for (int32_t t : {1024, 1900}) {
      if (floor_only && t != 1024) continue;
      char label[64];
      std::snprintf(label, sizeof(label), "T=%d", t);
      ok &= Bench(*pre, label, {{0, t}}, LatentCacheType::kBFloat16, iters);
    }
    if (!quick && !floor_only) {
      ok &= Bench(*pre, "T=8192", {{0, 8192}}, LatentCacheType::kFp8E4m3fn,
                  iters);
      ok &= Bench(*pre, "8 requests x 1024",
                  std::vector<std::pair<int32_t, int32_t>>(8, {0, 1024}),
                  LatentCacheType::kBFloat16, iters);
      ok &= Bench(*pre, "4 requests x 2048",
                  {{0, 2048}, {0, 2048}, {0, 2048}, {0, 2048}},
                  LatentCacheType::kBFloat16, iters);
      ok &= Bench(*pre, "ctx 6144 + chunk 2048", {{6144, 2048}},
                  LatentCacheType::kFp8E4m3fn, iters);
    }
  }
  return ok ? 0 : 1;
}
