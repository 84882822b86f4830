// Times the GPU indexer kernels at a causal prefill of T tokens (one
// request), or at a paged decode step (--decode=N: N requests of T cached
// tokens, one query row each): logits over the paged fp8 K cache, then top-k
// over those logits.
// Checks a sample of the logits against a float64 host reference and a
// sample of the top-k rows against a host sort first, so a timing is never
// reported for a wrong result. Prints one line per kernel:
//   <kernel> heads=H T=T median_ms=... tflops=... gbps=...
// (decode: ours_decode_logits heads=H T=T requests=N ...).
//
// Usage: indexer_bench [--heads=32] [--tokens=8192] [--topk=2048]
//                      [--iters=30] [--block_size=64] [--decode=0]
//                      [--check=1] [--body=auto] [--blocks=auto]
//                      [--keys=auto]
// --body / --blocks / --keys force a logits variant (IndexerLogitsOptions:
// fma | warp_mma | warpgroup_mma | persistent, narrow | wide,
// tma | cp_async) to time it against the heuristics' choice.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/dtypes/fp8.h"
#include "attention/gpu/device/runtime.h"
#include "attention/gpu/indexer/heuristics.h"
#include "attention/gpu/indexer/launch.h"

namespace dsa::attention::gpu {
namespace {

bool Check(const LaunchResult& r, const char* what) {
  if (r.ok()) return true;
  std::fprintf(stderr, "%s failed: %s\n", what, r.message);
  return false;
}

struct Buffers {
  void* q = nullptr;
  void* w = nullptr;
  void* cache = nullptr;
  void* table = nullptr;
  void* request = nullptr;
  void* start = nullptr;
  void* end = nullptr;
  void* logits = nullptr;
  void* topk = nullptr;
};

struct LogitsRun {
  IndexerLogitsParams params;
  IndexerLogitsOptions options;
};
LaunchResult RunLogits(void* arg) {
  const LogitsRun& run = *static_cast<LogitsRun*>(arg);
  return IndexerLogitsLaunch(run.params, nullptr, run.options);
}
LaunchResult RunTopK(void* arg) {
  return IndexerTopKLaunch(*static_cast<IndexerTopKParams*>(arg), nullptr);
}

int Main(int argc, char** argv) {
  int heads = 32, tokens = 8192, topk = 2048, iters = 30, block_size = 64;
  int decode = 0;
  int check = 1;  // 0: time only
  IndexerLogitsOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto choice = [&](const char* name, auto parse, auto* out) {
      const std::string prefix = std::string("--") + name + "=";
      if (a.rfind(prefix, 0) != 0) return false;
      if (!parse(a.substr(prefix.size()), out)) {
        std::fprintf(stderr, "unknown %s in %s\n", name, argv[i]);
        std::exit(2);
      }
      return true;
    };
    auto value = [&](const char* name, int* out) {
      const std::string prefix = std::string("--") + name + "=";
      if (a.rfind(prefix, 0) != 0) return false;
      *out = std::atoi(a.c_str() + prefix.size());
      return true;
    };
    if (!value("heads", &heads) && !value("tokens", &tokens) &&
        !value("topk", &topk) && !value("iters", &iters) &&
        !value("block_size", &block_size) && !value("decode", &decode) &&
        !value("check", &check) &&
        !choice("body", indexer::ParseBody, &options.body) &&
        !choice("blocks", indexer::ParseBlocks, &options.blocks) &&
        !choice("keys", indexer::ParseKeys, &options.keys)) {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (heads < 1 || tokens < 1 || topk < 1 || iters < 1 || block_size < 1 ||
      decode < 0) {
    std::fprintf(stderr, "every size must be positive\n");
    return 2;
  }
  constexpr int kDim = 128;
  const int64_t T = tokens;
  std::mt19937 rng(20261130);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  // Prefill: one request, row i sees keys [0, i + 1). Decode: `decode`
  // requests of T tokens, row r (request r) sees all of them.
  const int32_t requests = decode > 0 ? decode : 1;
  const int64_t rows = decode > 0 ? decode : T;
  // fp8 codes of N(0, 50^2) samples, drawn from a table of 4096 (the 67M
  // queries of 64 heads at T = 8192 would take seconds converted one by one).
  std::vector<uint8_t> code_table(4096);
  for (uint8_t& code : code_table) {
    code = FloatToFp8(normal(rng) * 50.0f, kE4m3fnTraits);
  }
  std::uniform_int_distribution<int> pick(0, 4095);
  auto random_code = [&]() { return code_table[pick(rng)]; };
  const int32_t max_blocks =
      static_cast<int32_t>((T + block_size - 1) / block_size);
  const int64_t num_blocks = int64_t{max_blocks} * requests;
  std::vector<int32_t> table(num_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const int64_t block_bytes = int64_t{block_size} * (kDim + 4);
  std::vector<uint8_t> cache(num_blocks * block_bytes);
  std::vector<float> kval(num_blocks * block_size * kDim);
  std::vector<float> kscale(num_blocks * block_size);
  for (int64_t slot = 0; slot < num_blocks * block_size; ++slot) {
    uint8_t* page = cache.data() + (slot / block_size) * block_bytes;
    for (int d = 0; d < kDim; ++d) {
      const uint8_t code = random_code();
      page[(slot % block_size) * kDim + d] = code;
      kval[slot * kDim + d] = Fp8ToFloat(code, kE4m3fnTraits);
    }
    const float scale = 0x1p-7f;
    std::memcpy(page + int64_t{block_size} * kDim + (slot % block_size) * 4,
                &scale, 4);
    kscale[slot] = scale;
  }
  std::vector<uint8_t> q(rows * heads * kDim);
  for (uint8_t& code : q) code = random_code();
  std::vector<float> w(rows * heads);
  for (float& x : w) x = normal(rng) * 0.01f;
  std::vector<int32_t> request(rows, 0), start(rows, 0), end(rows);
  for (int64_t i = 0; i < rows; ++i) {
    request[i] = decode > 0 ? static_cast<int32_t>(i) : 0;
    end[i] = static_cast<int32_t>(decode > 0 ? T : i + 1);
  }

  Buffers b;
  const size_t logits_bytes = rows * T * sizeof(float);
  if (!Check(DeviceMalloc(&b.q, q.size()), "malloc") ||
      !Check(DeviceMalloc(&b.w, w.size() * 4), "malloc") ||
      !Check(DeviceMalloc(&b.cache, cache.size()), "malloc") ||
      !Check(DeviceMalloc(&b.table, table.size() * 4), "malloc") ||
      !Check(DeviceMalloc(&b.request, rows * 4), "malloc") ||
      !Check(DeviceMalloc(&b.start, rows * 4), "malloc") ||
      !Check(DeviceMalloc(&b.end, rows * 4), "malloc") ||
      !Check(DeviceMalloc(&b.logits, logits_bytes), "malloc") ||
      !Check(DeviceMalloc(&b.topk, rows * topk * 4), "malloc") ||
      !Check(CopyToDevice(b.q, q.data(), q.size()), "copy") ||
      !Check(CopyToDevice(b.w, w.data(), w.size() * 4), "copy") ||
      !Check(CopyToDevice(b.cache, cache.data(), cache.size()), "copy") ||
      !Check(CopyToDevice(b.table, table.data(), table.size() * 4), "copy") ||
      !Check(CopyToDevice(b.request, request.data(), rows * 4), "copy") ||
      !Check(CopyToDevice(b.start, start.data(), rows * 4), "copy") ||
      !Check(CopyToDevice(b.end, end.data(), rows * 4), "copy") ||
      !Check(DeviceMemset(b.logits, 0xff, logits_bytes), "memset")) {
    return 1;
  }

  IndexerLogitsParams lp;
  lp.q_fp8 = static_cast<uint8_t*>(b.q);
  lp.head_weights = static_cast<float*>(b.w);
  lp.k_cache = static_cast<uint8_t*>(b.cache);
  lp.block_table = static_cast<int32_t*>(b.table);
  lp.row_request = static_cast<int32_t*>(b.request);
  lp.row_key_start = static_cast<int32_t*>(b.start);
  lp.row_key_end = static_cast<int32_t*>(b.end);
  lp.logits = static_cast<float*>(b.logits);
  lp.rows = rows;
  lp.heads = heads;
  lp.head_dim = kDim;
  lp.num_blocks = num_blocks;
  lp.block_size = block_size;
  lp.num_requests = requests;
  lp.max_blocks_per_request = max_blocks;
  lp.block_table_stride = max_blocks;
  lp.width = T;
  lp.logits_stride = T;
  if (!Check(IndexerLogitsLaunch(lp, nullptr, options), "indexer_logits") ||
      !Check(DeviceSynchronize(), "sync")) {
    return 1;
  }

  // Sampled check of the logits against float64.
  std::vector<float> logits(rows * T);
  if (!Check(CopyToHost(logits.data(), b.logits, logits_bytes), "copy"))
    return 1;
  double worst = 0.0;
  const int logit_samples = check ? 4000 : 0;
  for (int s = 0; s < logit_samples; ++s) {
    const int64_t i = rng() % rows;
    const int64_t j = rng() % T;
    const float got = logits[i * T + j];
    if (j >= end[i]) {
      if (!(std::isinf(got) && got < 0)) {
        std::fprintf(stderr, "logits[%lld,%lld] = %g, want -inf\n",
                     static_cast<long long>(i), static_cast<long long>(j), got);
        return 1;
      }
      continue;
    }
    const int64_t slot =
        int64_t{table[request[i] * int64_t{max_blocks} + j / block_size]} *
            block_size +
        j % block_size;
    double ref = 0.0, mag = 0.0;
    for (int h = 0; h < heads; ++h) {
      double dot = 0.0, abs_dot = 0.0;
      for (int d = 0; d < kDim; ++d) {
        const double product =
            double{Fp8ToFloat(q[(i * heads + h) * kDim + d], kE4m3fnTraits)} *
            kval[slot * kDim + d];
        dot += product;
        abs_dot += std::abs(product);
      }
      const double sc = dot * kscale[slot];
      if (sc > 0) ref += sc * w[i * heads + h];
      mag += abs_dot * kscale[slot] * std::abs(w[i * heads + h]);
    }
    const double err = std::abs(got - ref) / (mag + 1e-30);
    worst = std::max(worst, err);
    // See kernels_test.cc: 2^-12 of the sum of |products|.
    if (!(err <= 0x1p-12)) {
      std::fprintf(stderr, "logits[%lld,%lld] = %.8g, want %.8g\n",
                   static_cast<long long>(i), static_cast<long long>(j), got,
                   ref);
      return 1;
    }
  }
  std::printf(
      "check logits: %d samples, worst error %.3g of the sum of |products| "
      "(%s path)\n",
      logit_samples, worst, IndexerLogitsPath(lp, options));

  IndexerTopKParams tp;
  tp.logits = static_cast<float*>(b.logits);
  tp.row_key_start = static_cast<int32_t*>(b.start);
  tp.row_key_end = static_cast<int32_t*>(b.end);
  tp.topk_indices = static_cast<int32_t*>(b.topk);
  tp.rows = rows;
  tp.width = T;
  tp.logits_stride = T;
  tp.topk = topk;
  tp.topk_stride = topk;
  if (!Check(IndexerTopKLaunch(tp, nullptr), "indexer_topk") ||
      !Check(DeviceSynchronize(), "sync")) {
    return 1;
  }
  std::vector<int32_t> got(rows * topk);
  if (!Check(CopyToHost(got.data(), b.topk, got.size() * 4), "copy")) return 1;
  const int topk_rows = check ? 48 : 0;
  for (int s = 0; s < topk_rows; ++s) {
    const int64_t i = s == 0 ? rows - 1 : rng() % rows;
    const float* row = logits.data() + i * T;
    const int64_t n = end[i];
    std::vector<int32_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    if (n > topk) {
      std::stable_sort(idx.begin(), idx.end(),
                       [row](int32_t x, int32_t y) { return row[x] > row[y]; });
      idx.resize(topk);
      std::sort(idx.begin(), idx.end());
    }
    idx.resize(topk, -1);
    for (int k = 0; k < topk; ++k) {
      if (got[i * topk + k] != idx[k]) {
        std::fprintf(stderr, "topk row %lld slot %d: %d, want %d\n",
                     static_cast<long long>(i), k, got[i * topk + k], idx[k]);
        return 1;
      }
    }
  }
  std::printf("check topk: %d rows match a host sort\n", topk_rows);

  float logits_ms = 0.0f, topk_ms = 0.0f;
  LogitsRun logits_run{lp, options};
  if (!Check(TimeMedianMs(RunLogits, &logits_run, 5, iters, &logits_ms),
             "time logits") ||
      !Check(TimeMedianMs(RunTopK, &tp, 5, iters, &topk_ms), "time topk")) {
    return 1;
  }
  // Causal: row i scores i + 1 keys; decode: every row scores T.
  const double pairs = decode > 0 ? static_cast<double>(rows) * T
                                  : static_cast<double>(T) * (T + 1) / 2;
  const double flops = 2.0 * heads * kDim * pairs;
  // Fewest bytes: q, weights and the cache once, every logit written once.
  const double logits_bytes_min =
      static_cast<double>(q.size() + w.size() * 4 + cache.size()) +
      static_cast<double>(logits_bytes);
  std::printf(
      "ours_%slogits heads=%d T=%lld requests=%d median_ms=%.4f tflops=%.1f "
      "gbps=%.0f\n",
      decode > 0 ? "decode_" : "", heads, static_cast<long long>(T), requests,
      logits_ms, flops / (logits_ms * 1e-3) / 1e12,
      logits_bytes_min / (logits_ms * 1e-3) / 1e9);
  // Fewest bytes: the windows' logits read once, the indices written once.
  const double topk_bytes = pairs * 4 + static_cast<double>(rows) * topk * 4;
  std::printf("ours_%stopk k=%d T=%lld requests=%d median_ms=%.4f gbps=%.0f\n",
              decode > 0 ? "decode_" : "", topk, static_cast<long long>(T),
              requests, topk_ms, topk_bytes / (topk_ms * 1e-3) / 1e9);
  for (void* p : {b.q, b.w, b.cache, b.table, b.request, b.start, b.end,
                  b.logits, b.topk}) {
    (void)DeviceFree(p);
  }
  return 0;
}

}  // namespace
}  // namespace dsa::attention::gpu

int main(int argc, char** argv) {
  return dsa::attention::gpu::Main(argc, argv);
}
