// The dense MHA prefill launcher (and the bf16 GEMM it decompresses with)
// against float64 host references, on fresh random inputs (the seed is
// printed) with poisoned outputs: bf16 and fp8 latent caches, several
// requests with context (chunked prefill), one-token requests, query counts
// around the 64/128 tile edges, a request without queries, and pages handed
// out in shuffled order with poisoned block-table entries past each request.
// The launcher's defaults run (on the H200: the TMA attention body for the
// GLM / DeepSeek dims, 80- and 128-key tiles, the cp.async body for the tiny
// ones, cuBLASLt decompression; the glm_80key_* cases put query counts and
// contexts at and around multiples of 80, and key tiles that run past their
// request into the next one's rows or past the scratch); *_own_gemm cases
// decompress on gemm_bf16.h, and the *_warp / *_sm90_pipelined / *_sm90_tma
// cases ask for each attention body by name (params.attention_body), so that
// every body runs on sm_90a too (a body the device cannot run is skipped,
// saying so); the *_persistent_* cases cap the TMA body's persistent grid at
// one to three CTAs, so that each CTA runs many tiles in turn; the *_presplit
// cases pass W_UK and W_UV split (kv_b_proj poisoned), then run the same
// call from kv_b_proj, both against the reference.
// The GEMM alone runs its default and its warp body.
// Skips cleanly when built without a GPU backend or run without a device.
//
// Tolerance. The kernel multiplies bf16 values exactly and accumulates in
// fp32, but stores K_nope and V as bf16 (the decompression GEMM's output)
// and rounds the softmax probabilities P to bf16 before P V. The reference
// therefore decompresses in float64 and rounds K_nope and V to bf16 as the
// kernel does, then attends in float64. What is left:
//   - P's rounding: each weight is off by at most 2^-9 of itself, so an
//     output element moves by at most 2^-9 of the largest |v| the row sees
//     (vmax);
//   - the GEMM's fp32 sums may round an element of K_nope or V to the
//     neighbouring bf16 value where the reference's float64 sum does not:
//     rare, and one bf16 step, at most 2^-7 of that element (a value just
//     above a power of two), weighted by its probability. Over a row's keys
//     that is at most 2^-7 * sum_j p_j |v_j| (pabs), which a row of one key
//     reaches: its output is that key's v itself.
// The tolerance is 2^-8 * vmax + 2^-7 * pabs; bf16 outputs add their own
// rounding (2^-8 of the value). A wrong key, a missed mask, or a wrong head
// moves outputs by far more at the lengths tested here (a key of a 300-key
// row carries about 1/300 of the weight, several times the tolerance).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "attention/gpu/dense_mha/gemm_bf16.h"
#include "attention/gpu/dense_mha/launch.h"
#include "attention/gpu/device/features.h"
#include "attention/gpu/device/runtime.h"
#include "attention/gpu/device/test_util.h"
#include "gtest/gtest.h"
#include "platform/fault_injection.h"

namespace dsa::attention::gpu {
namespace {

#if defined(DSA_GPU_ROCM) || defined(DSA_GPU_CUDA)
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

double Bf16Round(double x) {
  return Bf16ToFloat(FloatToBf16(static_cast<float>(x)));
}

uint32_t FreshSeed() {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  return seed;
}

// ---------------------------------------------------------------------------
// The paged latent cache and the reference.

struct DenseCase {
  std::string name;
  int heads, nope, rope, v, lora, block_size;
  LatentCacheType encoding;
  std::vector<std::pair<int32_t, int32_t>> requests;  // (context, new)
  bool f32_io = false;       // fp32 q, kv_b_proj and output
  bool bf16_output = false;  // else fp32 output (with bf16 q and weights)
  bool own_gemm = false;     // decompress on gemm_bf16.h, not the vendor's
  // W_UK and W_UV given split (params.h) with kv_b_proj poisoned for the
  // launch; then the same launch from kv_b_proj, equal to the bit.
  bool presplit = false;
  DenseMhaBody body = DenseMhaBody::kAuto;  // the attention body asked for
  int ctas = 0;  // a cap on the persistent body's CTAs (0: its default)
};

// The path name DenseMhaAttentionPath reports for a body asked for.
std::string PathPrefix(DenseMhaBody body) {
  switch (body) {
    case DenseMhaBody::kWarp:
      return "warp";
    case DenseMhaBody::kSm90Pipelined:
      return "sm90-pipelined";
    case DenseMhaBody::kSm90Tma:
      return "sm90-tma";
    default:
      return "";
  }
}

// Whether the device in use runs sm_90a code (else the sm90 bodies cannot
// run and their cases skip).
bool DeviceHasSm90a() {
  DeviceFeatures f;
  return CurrentDeviceFeatures(&f).ok() && f.sm90a;
}

std::ostream& operator<<(std::ostream& os, const DenseCase& c) {
  return os << c.name;
}

struct HostCache {
  int64_t entry_bytes = 0;
  std::vector<uint8_t> bytes;
  std::vector<double> decoded;  // [slots, lora + rope]
};

HostCache MakeCache(const DenseCase& c, int64_t slots, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int dim = c.lora + c.rope;
  const bool fp8 = c.encoding != LatentCacheType::kBFloat16;
  const Fp8Traits traits = c.encoding == LatentCacheType::kFp8E4m3fnuz
                               ? kE4m3fnuzTraits
                               : kE4m3fnTraits;
  HostCache h;
  h.entry_bytes =
      fp8 ? c.lora + 4 * (c.lora / 128) + 2 * c.rope : 2 * int64_t{dim};
  h.bytes.assign(slots * h.entry_bytes, 0);
  h.decoded.assign(slots * dim, 0.0);
  for (int64_t s = 0; s < slots; ++s) {
    uint8_t* e = h.bytes.data() + s * h.entry_bytes;
    double* d = h.decoded.data() + s * dim;
    std::vector<float> x(dim);
    for (float& f : x) f = normal(rng);
    if (!fp8) {
      for (int i = 0; i < dim; ++i) {
        const uint16_t b = FloatToBf16(x[i]);
        std::memcpy(e + 2 * i, &b, 2);
        d[i] = Bf16ToFloat(b);
      }
      continue;
    }
    for (int tile = 0; tile < c.lora / 128; ++tile) {
      float amax = 0;
      for (int i = 0; i < 128; ++i) {
        amax = std::max(amax, std::fabs(x[tile * 128 + i]));
      }
      const float scale = Ue8m0Scale(amax, traits.max);
      std::memcpy(e + c.lora + 4 * tile, &scale, 4);
      for (int i = tile * 128; i < (tile + 1) * 128; ++i) {
        e[i] = FloatToFp8(x[i] / scale, traits);
        d[i] = static_cast<double>(Fp8ToFloat(e[i], traits)) * scale;
      }
    }
    for (int i = 0; i < c.rope; ++i) {
      const uint16_t b = FloatToBf16(x[c.lora + i]);
      std::memcpy(e + c.lora + 4 * (c.lora / 128) + 2 * i, &b, 2);
      d[c.lora + i] = Bf16ToFloat(b);
    }
  }
  return h;
}

class DenseMhaKernelTest : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseMhaKernelTest, MatchesFloat64Reference) {
  if (!kBuilt) GTEST_SKIP() << "built without --config=cuda/--config=rocm";
  const DenseCase& c = GetParam();
  std::mt19937 rng(FreshSeed());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int heads = c.heads, nope = c.nope, rope = c.rope, v = c.v;
  const int lora = c.lora, bs = c.block_size, qk = nope + rope;
  const int dim = lora + rope;
  const int32_t requests = static_cast<int32_t>(c.requests.size());

  // Lengths, shuffled pages, block-table entries past each request poisoned.
  std::vector<int32_t> seq_lens, starts = {0};
  int32_t max_blocks = 1;
  for (const auto& [context, fresh] : c.requests) {
    seq_lens.push_back(context + fresh);
    starts.push_back(starts.back() + fresh);
    max_blocks = std::max(max_blocks, (context + fresh + bs - 1) / bs);
  }
  const int64_t tokens = starts.back();
  const int32_t stride = max_blocks + 2;
  const int64_t num_blocks = int64_t{requests} * max_blocks + 3;
  std::vector<int32_t> pages(num_blocks);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  std::vector<int32_t> table(int64_t{requests} * stride);
  for (int32_t r = 0; r < requests; ++r) {
    const int32_t used = (seq_lens[r] + bs - 1) / bs;
    for (int32_t b = 0; b < stride; ++b) {
      table[r * stride + b] = b < used ? pages[r * max_blocks + b]
                              : b % 2  ? -7
                                       : 1 << 30;
    }
  }
  const HostCache cache = MakeCache(c, num_blocks * bs, rng);

  // Weights and queries; the kernel sees them rounded to bf16.
  const int64_t rows_w = int64_t{heads} * (nope + v);
  std::vector<float> w(rows_w * lora), q(tokens * heads * qk);
  const float w_std = 1.0f / std::sqrt(static_cast<float>(lora));
  for (float& x : w) x = normal(rng) * w_std;
  for (float& x : q) x = normal(rng);
  std::vector<uint16_t> w_bf16(w.size()), q_bf16(q.size());
  for (size_t i = 0; i < w.size(); ++i) w_bf16[i] = FloatToBf16(w[i]);
  for (size_t i = 0; i < q.size(); ++i) q_bf16[i] = FloatToBf16(q[i]);
  const double scale = 1.0 / std::sqrt(static_cast<double>(qk));

  DeviceArray d_q, d_cache, d_table, d_w, d_out;
  ASSERT_LAUNCH(c.f32_io ? d_q.Upload(q) : d_q.Upload(q_bf16));
  ASSERT_LAUNCH(d_cache.Upload(cache.bytes));
  ASSERT_LAUNCH(d_table.Upload(table));
  ASSERT_LAUNCH(c.f32_io ? d_w.Upload(w) : d_w.Upload(w_bf16));
  const bool out_bf16 = c.bf16_output && !c.f32_io;
  const int64_t out_elems = tokens * heads * v;
  if (out_bf16) {
    ASSERT_LAUNCH(d_out.Upload(std::vector<uint16_t>(out_elems, 0x7fc1)));
  } else {
    ASSERT_LAUNCH(d_out.Upload(std::vector<float>(
        out_elems, std::numeric_limits<float>::quiet_NaN())));
  }

  DenseMhaPrefillParams p;
  p.q = d_q.get<void>();
  p.q_format = c.f32_io ? FloatFormat::kFloat32 : FloatFormat::kBFloat16;
  p.kv_cache = d_cache.get<void>();
  p.cache_encoding = c.encoding;
  p.num_blocks = num_blocks;
  p.block_size = bs;
  p.kv_lora_rank = lora;
  p.rope_dim = rope;
  p.block_table = d_table.get<int32_t>();
  p.num_requests = requests;
  p.max_blocks_per_request = max_blocks;
  p.block_table_stride = stride;
  p.host_seq_lens = seq_lens.data();
  p.host_query_start_loc = starts.data();
  p.kv_b_proj = d_w.get<void>();
  p.kv_b_proj_format =
      c.f32_io ? FloatFormat::kFloat32 : FloatFormat::kBFloat16;
  p.output = d_out.get<void>();
  p.output_format = out_bf16 ? FloatFormat::kBFloat16 : FloatFormat::kFloat32;
  p.tokens = tokens;
  p.heads = heads;
  p.qk_nope_head_dim = nope;
  p.v_head_dim = v;
  p.softmax_scale = static_cast<float>(scale);
  p.own_decompression_gemm = c.own_gemm;
  p.attention_body = c.body;
  p.attention_ctas = c.ctas;
  if ((c.body == DenseMhaBody::kSm90Pipelined ||
       c.body == DenseMhaBody::kSm90Tma) &&
      !DeviceHasSm90a()) {
    GTEST_SKIP() << "the device runs no sm_90a code: no " << PathPrefix(c.body)
                 << " body";
  }
  const std::string path = DenseMhaAttentionPath(p);
  if (c.body != DenseMhaBody::kAuto) {
    EXPECT_EQ(path.rfind(PathPrefix(c.body), 0), 0u) << path;
  }
  DeviceArray d_wk, d_wv, d_poisoned;
  if (c.presplit) {
    // The caller's split: head h's first nope rows of kv_b_proj, then its
    // v rows, each block contiguous; kv_b_proj itself all NaN.
    std::vector<uint16_t> wk(int64_t{heads} * nope * lora);
    std::vector<uint16_t> wv(int64_t{heads} * v * lora);
    for (int h = 0; h < heads; ++h) {
      const uint16_t* head = w_bf16.data() + int64_t{h} * (nope + v) * lora;
      std::copy_n(head, int64_t{nope} * lora,
                  wk.data() + int64_t{h} * nope * lora);
      std::copy_n(head + int64_t{nope} * lora, int64_t{v} * lora,
                  wv.data() + int64_t{h} * v * lora);
    }
    ASSERT_LAUNCH(d_wk.Upload(wk));
    ASSERT_LAUNCH(d_wv.Upload(wv));
    ASSERT_LAUNCH(
        d_poisoned.Upload(std::vector<uint16_t>(w_bf16.size(), 0x7fc1)));
    p.w_uk = d_wk.get<uint16_t>();
    p.w_uv = d_wv.get<uint16_t>();
    p.kv_b_proj = d_poisoned.get<void>();
  }
  // The reference of every output element, the largest |v| its row attends
  // to, and sum_j p_j |v_j| (the tolerance's terms).
  std::vector<double> ref(out_elems), row_vmax(out_elems), pabs(out_elems);
  for (int32_t r = 0; r < requests; ++r) {
    const int64_t len = seq_lens[r];
    const int64_t n = starts[r + 1] - starts[r];
    if (n == 0) continue;
    // Decompressed keys and values, rounded to bf16 as the kernel stores
    // them: [len, heads, nope] and [len, heads, v].
    std::vector<double> k_nope(len * heads * nope), val(len * heads * v);
    for (int64_t j = 0; j < len; ++j) {
      const int32_t block = table[r * stride + j / bs];
      const double* lat = cache.decoded.data() + (block * bs + j % bs) * dim;
      for (int h = 0; h < heads; ++h) {
        for (int o = 0; o < nope + v; ++o) {
          const uint16_t* wr =
              w_bf16.data() + (int64_t{h} * (nope + v) + o) * lora;
          double acc = 0;
          for (int l = 0; l < lora; ++l) acc += Bf16ToFloat(wr[l]) * lat[l];
          if (o < nope) {
            k_nope[(j * heads + h) * nope + o] = Bf16Round(acc);
          } else {
            val[(j * heads + h) * v + o - nope] = Bf16Round(acc);
          }
        }
      }
    }
    std::vector<double> s(len);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = starts[r] + i;
      const int64_t last = len - n + i;
      for (int h = 0; h < heads; ++h) {
        const uint16_t* qr = q_bf16.data() + (t * heads + h) * qk;
        double mx = -INFINITY;
        for (int64_t j = 0; j <= last; ++j) {
          const int32_t block = table[r * stride + j / bs];
          const double* lat =
              cache.decoded.data() + (block * bs + j % bs) * dim;
          double acc = 0;
          for (int d = 0; d < nope; ++d) {
            acc += Bf16ToFloat(qr[d]) * k_nope[(j * heads + h) * nope + d];
          }
          for (int d = 0; d < rope; ++d) {
            acc += Bf16ToFloat(qr[nope + d]) * lat[lora + d];
          }
          s[j] = acc * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0, vmax = 0;
        std::vector<double> o(v, 0.0), o_abs(v, 0.0);
        for (int64_t j = 0; j <= last; ++j) {
          const double e = std::exp(s[j] - mx);
          sum += e;
          for (int d = 0; d < v; ++d) {
            const double x = val[(j * heads + h) * v + d];
            o[d] += e * x;
            o_abs[d] += e * std::fabs(x);
            vmax = std::max(vmax, std::fabs(x));
          }
        }
        for (int d = 0; d < v; ++d) {
          ref[(t * heads + h) * v + d] = o[d] / sum;
          row_vmax[(t * heads + h) * v + d] = vmax;
          pabs[(t * heads + h) * v + d] = o_abs[d] / sum;
        }
      }
    }
  }

  // Every element of the output in `dev` against the reference; returns the
  // worst |error| / vmax and the worst |error| / tolerance.
  auto check_output = [&](const DeviceArray& dev, const char* what,
                          double* worst_out, double* worst_of_tol) {
    std::vector<double> got(out_elems);
    if (out_bf16) {
      std::vector<uint16_t> raw;
      ASSERT_LAUNCH(dev.Download(&raw));
      for (int64_t i = 0; i < out_elems; ++i) got[i] = Bf16ToFloat(raw[i]);
    } else {
      std::vector<float> raw;
      ASSERT_LAUNCH(dev.Download(&raw));
      for (int64_t i = 0; i < out_elems; ++i) got[i] = raw[i];
    }
    for (int64_t e = 0; e < out_elems; ++e) {
      const double vmax = row_vmax[e];
      double tol = 0x1p-8 * vmax + 0x1p-7 * pabs[e];
      if (out_bf16) tol += 0x1p-8 * std::fabs(ref[e]);
      const int64_t t = e / (int64_t{heads} * v);
      ASSERT_LE(std::fabs(got[e] - ref[e]), tol)
          << what << ": token " << t << " head " << (e / v) % heads << " dim "
          << e % v << ": got " << got[e] << ", expected " << ref[e] << ", vmax "
          << vmax;
      *worst_out = std::max(*worst_out, std::fabs(got[e] - ref[e]) / vmax);
      *worst_of_tol = std::max(*worst_of_tol, std::fabs(got[e] - ref[e]) / tol);
    }
  };

  // Twice: the first call grows the stream's scratch arena as it needs; the
  // second, into a poisoned output again, takes its scratch from the arena
  // as it stands (no stream-ordered allocation) and, on the TMA body, its
  // tensor maps from the thread's cache.
  double worst = 0, worst_of_tol = 0;
  for (int call = 0; call < 2; ++call) {
    if (call == 1) {
      if (out_bf16) {
        ASSERT_LAUNCH(d_out.Upload(std::vector<uint16_t>(out_elems, 0x7fc1)));
      } else {
        ASSERT_LAUNCH(d_out.Upload(std::vector<float>(
            out_elems, std::numeric_limits<float>::quiet_NaN())));
      }
    }
    const SmallCacheStats maps_before = DenseMhaTensorMapStats();
    {
      platform::FaultInjector counter;  // counts the calls, fails none
      ASSERT_LAUNCH(DenseMhaPrefillLaunch(p, nullptr));
      if (call == 1) {
        EXPECT_EQ(counter.calls(platform::FaultSite::kStreamAlloc), 0)
            << "the repeated call allocated scratch";
      }
    }
    if (call == 1 && path.rfind("sm90-tma", 0) == 0) {
      const SmallCacheStats maps = DenseMhaTensorMapStats();
      EXPECT_EQ(maps.misses, maps_before.misses);
      EXPECT_EQ(maps.hits, maps_before.hits + 1);
    }
    ASSERT_LAUNCH(DeviceSynchronize());
    check_output(d_out, call == 0 ? "call 0" : "call 1", &worst, &worst_of_tol);
    if (HasFatalFailure()) return;
  }
  if (c.presplit) {
    // The same call from kv_b_proj (its W_UK / W_UV row groups read in
    // place): as close to the reference. Not compared to the bit: the
    // vendor GEMM may take another algorithm for the batched form.
    const int64_t out_bytes = out_elems * (out_bf16 ? 2 : 4);
    DenseMhaPrefillParams own = p;
    own.w_uk = own.w_uv = nullptr;
    own.kv_b_proj = d_w.get<void>();
    DeviceArray d_own_out;
    ASSERT_LAUNCH(d_own_out.Upload(std::vector<uint8_t>(out_bytes, 0xff)));
    own.output = d_own_out.get<void>();
    ASSERT_LAUNCH(DenseMhaPrefillLaunch(own, nullptr));
    ASSERT_LAUNCH(DeviceSynchronize());
    check_output(d_own_out, "from kv_b_proj", &worst, &worst_of_tol);
    if (HasFatalFailure()) return;
  }
  const DenseMhaFlops flops = DenseMhaPrefillFlops(p);
  std::printf(
      "%s (%s attention, %s decompression): worst |error| / vmax = %.3g, "
      "worst |error| / tolerance = %.3g; %.3g attention + %.3g "
      "decompression FLOP\n",
      c.name.c_str(), path.c_str(),
      c.own_gemm ? Bf16GemmPath(Bf16GemmParams{}) : DenseMhaDecompressionPath(),
      worst, worst_of_tol, flops.attention, flops.decompression);
}

// GLM-5.1 dims: qk 192 + 64, v 256; DeepSeek-V3.2: 128 + 64, v 128; the
// tiny presets: 64 + 32, v 64, kv_lora 128.
std::vector<DenseCase> Cases() {
  using Cache = LatentCacheType;
  constexpr bool kF32 = true, kBf16Out = true, kOwnGemm = true;
  // clang-format off
  // name, heads, nope, rope, v, kv_lora, block size, cache, (context, new)
  // per request, then f32_io, bf16_output, own_gemm.
  std::vector<DenseCase> cases = {
      {"glm_one_token", 2, 192, 64, 256, 512, 64, Cache::kBFloat16,
       {{0, 1}}},
      {"glm_tile_edges_e4m3fn", 2, 192, 64, 256, 512, 64, Cache::kFp8E4m3fn,
       {{0, 127}, {0, 128}, {0, 129}, {70, 64}, {5, 1}, {300, 200}}},
      {"glm_80key_edges", 2, 192, 64, 256, 512, 64, Cache::kBFloat16,
       {{0, 79}, {0, 80}, {0, 81}, {0, 159}, {0, 160}, {0, 161}, {1, 239},
        {77, 83}, {160, 80}, {0, 241}}},
      {"glm_80key_edges_e4m3fn", 2, 192, 64, 256, 512, 16, Cache::kFp8E4m3fn,
       {{80, 1}, {79, 2}, {0, 400}, {3, 77}, {0, 81}}, false, kBf16Out},
      {"glm_bf16_output", 2, 192, 64, 256, 512, 16, Cache::kBFloat16,
       {{0, 200}, {63, 1}}, false, kBf16Out},
      {"deepseek_context_e4m3fnuz", 3, 128, 64, 128, 512, 64,
       Cache::kFp8E4m3fnuz, {{0, 257}, {1000, 33}, {40, 0}, {63, 65}}},
      {"deepseek_1024", 1, 128, 64, 128, 512, 64, Cache::kFp8E4m3fn,
       {{0, 1024}}},
      {"deepseek_bf16_output", 3, 128, 64, 128, 512, 64, Cache::kBFloat16,
       {{0, 300}, {70, 129}, {5, 1}}, false, kBf16Out},
      {"deepseek_f32_io", 2, 128, 64, 128, 512, 16, Cache::kBFloat16,
       {{3, 70}, {0, 64}}, kF32},
      {"glm_tile_edges_own_gemm", 2, 192, 64, 256, 512, 64, Cache::kFp8E4m3fn,
       {{0, 127}, {0, 128}, {0, 129}, {70, 64}, {5, 1}, {300, 200}}, false,
       false, kOwnGemm},
      {"deepseek_f32_io_own_gemm", 2, 128, 64, 128, 512, 16, Cache::kBFloat16,
       {{3, 70}, {0, 64}}, kF32, false, kOwnGemm},
      {"tiny_v32", 4, 64, 32, 64, 128, 16, Cache::kFp8E4m3fn,
       {{0, 9}, {30, 5}, {2, 1}}},
      {"tiny_glm", 4, 32, 32, 64, 128, 16, Cache::kBFloat16,
       {{0, 9}, {30, 5}, {2, 1}, {0, 130}}},
  };
  // clang-format on
  // W_UK / W_UV split once by the caller, on the vendor GEMM path (the own
  // GEMM reads kv_b_proj's row groups in place either way).
  for (const char* base : {"glm_tile_edges_e4m3fn", "tiny_glm"}) {
    for (DenseCase c : std::vector<DenseCase>(cases)) {
      if (c.name != base) continue;
      c.name += "_presplit";
      c.presplit = true;
      cases.push_back(c);
    }
  }
  // The persistent TMA body on a few CTAs, so that each runs many tiles of
  // different requests, lengths and heads back to back (its rings, Q
  // buffer, tile slot and ping-pong carried across tiles); one CTA runs
  // them all.
  {
    DenseCase c{"glm_persistent_2ctas",
                3,
                192,
                64,
                256,
                512,
                64,
                Cache::kBFloat16,
                {{0, 300}, {70, 129}, {5, 1}, {0, 257}, {1000, 64}},
                false,
                kBf16Out};
    c.ctas = 2;
    cases.push_back(c);
    c = DenseCase{"deepseek_persistent_3ctas_e4m3fn",
                  5,
                  128,
                  64,
                  128,
                  512,
                  64,
                  Cache::kFp8E4m3fn,
                  {{0, 513}, {40, 0}, {63, 65}, {0, 128}}};
    c.ctas = 3;
    cases.push_back(c);
    c = DenseCase{"glm_persistent_1cta",
                  2,
                  192,
                  64,
                  256,
                  512,
                  16,
                  Cache::kBFloat16,
                  {{0, 127}, {0, 129}, {200, 200}}};
    c.ctas = 1;
    cases.push_back(c);
    c = DenseCase{"glm_80key_persistent_1cta",
                  3,
                  192,
                  64,
                  256,
                  512,
                  64,
                  Cache::kBFloat16,
                  {{0, 80}, {0, 161}, {0, 479}, {81, 159}, {0, 1}}};
    c.ctas = 1;
    cases.push_back(c);
    c = DenseCase{"deepseek_persistent_1cta",
                  2,
                  128,
                  64,
                  128,
                  512,
                  16,
                  Cache::kFp8E4m3fnuz,
                  {{0, 127}, {0, 129}, {200, 200}}};
    c.ctas = 1;
    cases.push_back(c);
  }
  // Each body asked for by name: GLM (80-key TMA tiles) and DeepSeek
  // (128-key tiles) dims on all three, the tiny ones on the two that take
  // any head dims.
  const std::pair<const char*, DenseMhaBody> bodies[] = {
      {"warp", DenseMhaBody::kWarp},
      {"sm90_pipelined", DenseMhaBody::kSm90Pipelined},
      {"sm90_tma", DenseMhaBody::kSm90Tma}};
  const size_t defaults = cases.size();
  for (size_t i = 0; i < defaults; ++i) {
    const DenseCase base = cases[i];
    if (base.name != "glm_tile_edges_e4m3fn" &&
        base.name != "deepseek_context_e4m3fnuz" &&
        base.name != "deepseek_f32_io" && base.name != "tiny_glm") {
      continue;
    }
    for (const auto& [suffix, body] : bodies) {
      if (body == DenseMhaBody::kSm90Tma && base.rope % 64 != 0) continue;
      DenseCase c = base;
      c.name += std::string("_") + suffix;
      c.body = body;
      cases.push_back(c);
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, DenseMhaKernelTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<DenseCase>& info) {
                           return info.param.name;
                         });

TEST(DenseMhaKernelArgsTest, RejectsWhatItCannotRun) {
  if (!kBuilt) GTEST_SKIP() << "built without --config=cuda/--config=rocm";
  std::vector<int32_t> seq_lens = {5}, starts = {0, 3};
  DenseMhaPrefillParams p;
  int dummy = 0;
  p.q = p.kv_cache = p.kv_b_proj = &dummy;
  p.output = &dummy;
  p.block_table = &dummy;
  p.num_blocks = 1;
  p.block_size = 16;
  p.num_requests = 1;
  p.max_blocks_per_request = 1;
  p.block_table_stride = 1;
  p.host_seq_lens = seq_lens.data();
  p.host_query_start_loc = starts.data();
  p.tokens = 3;
  p.heads = 2;
  p.qk_nope_head_dim = 128;
  p.v_head_dim = 128;
  p.softmax_scale = 0.1f;
  auto expect_invalid = [&](const DenseMhaPrefillParams& bad,
                            const std::string& msg) {
    const LaunchResult r = DenseMhaPrefillLaunch(bad, nullptr);
    EXPECT_EQ(r.code, LaunchCode::kInvalidArgument) << r.message;
    EXPECT_NE(std::string(r.message).find(msg), std::string::npos) << r.message;
  };
  DenseMhaPrefillParams bad = p;
  bad.qk_nope_head_dim = 12;
  expect_invalid(bad, "multiples of 8");
  bad = p;
  bad.v_head_dim = 512;
  expect_invalid(bad, "v <= 256");
  bad = p;
  bad.cache_encoding = LatentCacheType::kFp8E4m3fn;
  bad.kv_lora_rank = 64;
  expect_invalid(bad, "of 128 for an fp8 cache");
  bad = p;
  bad.tokens = 4;
  expect_invalid(bad, "query_start_loc runs from 0 to 3, expected 0 to 4");
  bad = p;
  std::vector<int32_t> short_len = {2};
  bad.host_seq_lens = short_len.data();
  expect_invalid(bad, "request 0 has 3 query tokens");
  bad = p;
  std::vector<int32_t> long_len = {17};
  bad.host_seq_lens = long_len.data();
  expect_invalid(bad, "exceeds its block table's 16 slots");
  // A body the head dims or the device cannot run (asked of the device).
  DeviceFeatures features;
  if (CurrentDeviceFeatures(&features).ok()) {
    bad = p;
    bad.rope_dim = 32;
    bad.attention_body = DenseMhaBody::kSm90Tma;
    expect_invalid(bad, "the sm90-tma body needs");
  }
  // Nothing to do: no launch, no access to the (host) pointers.
  bad = p;
  bad.tokens = 0;
  std::vector<int32_t> empty = {0, 0};
  bad.host_query_start_loc = empty.data();
  EXPECT_TRUE(DenseMhaPrefillLaunch(bad, nullptr).ok());
}

// ---------------------------------------------------------------------------
// The GEMM alone.

struct GemmCase {
  int64_t m, n, k, lda;
  Bf16GemmBody body = Bf16GemmBody::kAuto;
};

class Bf16GemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(Bf16GemmTest, MatchesFloat64Reference) {
  if (!kBuilt) GTEST_SKIP() << "built without --config=cuda/--config=rocm";
  const GemmCase g = GetParam();
  std::mt19937 rng(FreshSeed());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> a(g.m * g.lda), b(g.n * g.k);
  for (auto& x : a) x = FloatToBf16(normal(rng));
  for (auto& x : b) x = FloatToBf16(normal(rng));
  DeviceArray d_a, d_b, d_c;
  ASSERT_LAUNCH(d_a.Upload(a));
  ASSERT_LAUNCH(d_b.Upload(b));
  const int64_t ldc = g.n + 2;
  ASSERT_LAUNCH(d_c.Upload(std::vector<uint16_t>(g.m * ldc, 0x7fc1)));
  Bf16GemmParams p;
  p.a = d_a.get<uint16_t>();
  p.lda = g.lda;
  p.b = d_b.get<uint16_t>();
  p.ldb = g.k;
  p.c = d_c.get<uint16_t>();
  p.ldc = ldc;
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.body = g.body;
  std::printf("%lld x %lld x %lld on the %s body\n",
              static_cast<long long>(g.m), static_cast<long long>(g.n),
              static_cast<long long>(g.k), Bf16GemmPath(p));
  ASSERT_LAUNCH(Bf16GemmLaunch(p, nullptr));
  ASSERT_LAUNCH(DeviceSynchronize());
  std::vector<uint16_t> c;
  ASSERT_LAUNCH(d_c.Download(&c));
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const uint16_t bits = c[i * ldc + j];
      if (j >= g.n) {
        ASSERT_EQ(bits, 0x7fc1) << "padding column written: " << i << "," << j;
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t l = 0; l < g.k; ++l) {
        const double x =
            double{Bf16ToFloat(a[i * g.lda + l])} * Bf16ToFloat(b[j * g.k + l]);
        ref += x;
        mag += std::fabs(x);
      }
      // fp32 sums of exact products (k * 2^-24 * sum |a b|), then one bf16
      // rounding (2^-8 of the value, allowing for the sum's own error).
      ASSERT_LE(std::fabs(Bf16ToFloat(bits) - ref),
                0x1p-8 * std::fabs(ref) + g.k * 0x1p-24 * mag)
          << "c[" << i << "][" << j << "]";
    }
  }
}

// Each shape on the default body (wgmma on sm_90a) and on the warp body.
INSTANTIATE_TEST_SUITE_P(
    Shapes, Bf16GemmTest,
    ::testing::Values(GemmCase{128, 128, 64, 64}, GemmCase{300, 200, 512, 520},
                      GemmCase{1, 8, 8, 8}, GemmCase{257, 136, 40, 48},
                      GemmCase{128, 128, 64, 64, Bf16GemmBody::kWarp},
                      GemmCase{300, 200, 512, 520, Bf16GemmBody::kWarp},
                      GemmCase{1, 8, 8, 8, Bf16GemmBody::kWarp},
                      GemmCase{257, 136, 40, 48, Bf16GemmBody::kWarp}));

}  // namespace
}  // namespace dsa::attention::gpu
