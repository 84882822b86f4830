// Times the GPU indexer kernels at a causal prefill of T tokens (one
// request), or at a paged decode step (--decode=N: N requests of T cached
// tokens, one query row each): logits over the paged fp8 K cache, then top-k
// over those logits. --topk_only=1 times the top-k alone over N(0, 1)
// logits: T causal rows (row i sees keys [0, i + 1)), or --topk_rows=R rows
// of T keys each (decode).
// Checks a sample of the logits against a float64 host reference and a
// sample of the top-k rows against a host sort first, so a timing is never
// reported for a wrong result. Prints one line per kernel:
//   <kernel> heads=H T=T median_ms=... tflops=... gbps=...
// (decode: ours_decode_logits heads=H T=T requests=N ...; top-k:
// ours_topk k=K T=T rows=R causal=0|1 logits=indexer|normal path=P auto=0|1
// median_ms=... gbps=...; auto=1: the heuristics chose P).
//
// Usage: indexer_bench [--heads=32] [--tokens=8192] [--topk=2048]
//                      [--iters=30] [--block_size=64] [--decode=0]
//                      [--check=1] [--body=auto] [--blocks=auto]
//                      [--keys=auto] [--groups=auto] [--topk_paths=auto]
//                      [--topk_only=0] [--topk_rows=0]
// --body / --blocks / --keys / --groups force a logits variant
// (IndexerLogitsOptions: fma | warp_mma | warpgroup_mma | persistent,
// narrow | wide, tma | cp_async, 2 | 4) to time it against the heuristics'
// choice; --groups takes a comma list (each checked and timed in turn, on
// the same inputs); --topk_paths
// (a comma list of DSA_INDEXER_TOPK_PATHS names and auto) times each top-k
// path in turn.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
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
struct TopKRun {
  IndexerTopKParams params;
  IndexerTopKOptions options;
};
LaunchResult RunTopK(void* arg) {
  const TopKRun& run = *static_cast<TopKRun*>(arg);
  return IndexerTopKLaunch(run.params, nullptr, run.options);
}

// The top-k paths of a comma list ("auto,staged_512"), or false.
bool ParseTopKPaths(const std::string& list,
                    std::vector<IndexerTopKPath>* paths) {
  paths->clear();
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find(',', begin), list.size());
    IndexerTopKPath path;
    if (!indexer::ParseTopKPath(list.substr(begin, end - begin), &path)) {
      return false;
    }
    paths->push_back(path);
    begin = end + 1;
  }
  return !paths->empty();
}

// Checks `rows` sampled rows of a top-k result (the last one always)
// against a host sort of the same logits; false, saying which, on the
// first difference.
bool CheckTopK(const std::vector<float>& logits, int64_t width,
               const std::vector<int32_t>& end, int topk,
               const std::vector<int32_t>& got, int rows, std::mt19937& rng) {
  const int64_t num_rows = static_cast<int64_t>(end.size());
  for (int s = 0; s < rows; ++s) {
    const int64_t i = s == 0 ? num_rows - 1 : rng() % num_rows;
    const float* row = logits.data() + i * width;
    const int64_t n = end[i];
    std::vector<int32_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    if (n > topk) {
      std::nth_element(idx.begin(), idx.begin() + topk, idx.end(),
                       [row](int32_t x, int32_t y) {
                         return row[x] > row[y] || (row[x] == row[y] && x < y);
                       });
      idx.resize(topk);
      std::sort(idx.begin(), idx.end());
    }
    idx.resize(topk, -1);
    for (int k = 0; k < topk; ++k) {
      if (got[i * topk + k] != idx[k]) {
        std::fprintf(stderr, "topk row %lld slot %d: %d, want %d\n",
                     static_cast<long long>(i), k, got[i * topk + k], idx[k]);
        return false;
      }
    }
  }
  return true;
}

// Checks and times each path of `paths` over `tp` (logits already on the
// device, `logits` their host copy), printing an ours_topk line each.
// `source` names the logits: "indexer" (the logits kernel's) or "normal"
// (N(0, 1) samples).
bool TimeTopKPaths(IndexerTopKParams tp, const std::vector<float>& logits,
                   const std::vector<int32_t>& end, bool causal,
                   const char* source,
                   const std::vector<IndexerTopKPath>& paths, int iters,
                   int check_rows, std::mt19937& rng) {
  double keys = 0.0;
  for (int32_t e : end) keys += e;
  const double bytes = keys * 4 + static_cast<double>(tp.rows) * tp.topk * 4;
  for (IndexerTopKPath path : paths) {
    TopKRun run{tp, {}};
    run.options.path = path;
    const std::string name = IndexerTopKPathName(tp, run.options);
    if (!Check(DeviceMemset(tp.topk_indices, 0x7f,
                            tp.rows * tp.topk * sizeof(int32_t)),
               "memset") ||
        !Check(RunTopK(&run), "indexer_topk") ||
        !Check(DeviceSynchronize(), "sync")) {
      return false;
    }
    std::vector<int32_t> got(tp.rows * tp.topk);
    if (!Check(CopyToHost(got.data(), tp.topk_indices, got.size() * 4),
               "copy") ||
        !CheckTopK(logits, tp.logits_stride, end, tp.topk, got, check_rows,
                   rng)) {
      std::fprintf(stderr, "path %s gave a wrong top-k\n", name.c_str());
      return false;
    }
    float ms = 0.0f;
    if (!Check(TimeMedianMs(RunTopK, &run, 5, iters, &ms), "time topk")) {
      return false;
    }
    std::printf(
        "ours_topk k=%d T=%lld rows=%lld causal=%d logits=%s path=%s "
        "auto=%d median_ms=%.4f gbps=%.0f\n",
        tp.topk, static_cast<long long>(tp.width),
        static_cast<long long>(tp.rows), causal ? 1 : 0, source, name.c_str(),
        path == IndexerTopKPath::kAuto ? 1 : 0, ms, bytes / (ms * 1e-3) / 1e9);
  }
  return true;
}

// --topk_only: N(0, 1) logits (-inf outside the causal windows), top-k alone.
int TopKOnly(int tokens, int topk_rows, int topk, int iters, int check,
             const std::vector<IndexerTopKPath>& paths) {
  const bool causal = topk_rows == 0;
  const int64_t T = tokens;
  const int64_t rows = causal ? T : topk_rows;
  std::vector<float> logits(rows * T);
  // Box-Muller over a 64-bit LCG: tens of millions of samples in well
  // under a second.
  uint64_t state = 20261201;
  auto uniform = [&state]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (static_cast<double>(state >> 11) + 0.5) * 0x1p-53;
  };
  for (int64_t i = 0; i < rows * T; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double a = 6.283185307179586 * uniform();
    logits[i] = static_cast<float>(r * std::cos(a));
    if (i + 1 < rows * T) logits[i + 1] = static_cast<float>(r * std::sin(a));
  }
  std::vector<int32_t> start(rows, 0), end(rows);
  for (int64_t i = 0; i < rows; ++i) {
    end[i] = static_cast<int32_t>(causal ? i + 1 : T);
    for (int64_t j = end[i]; j < T; ++j) {
      logits[i * T + j] = -std::numeric_limits<float>::infinity();
    }
  }
  void* d_logits = nullptr;
  void* d_start = nullptr;
  void* d_end = nullptr;
  void* d_topk = nullptr;
  if (!Check(DeviceMalloc(&d_logits, logits.size() * 4), "malloc") ||
      !Check(DeviceMalloc(&d_start, rows * 4), "malloc") ||
      !Check(DeviceMalloc(&d_end, rows * 4), "malloc") ||
      !Check(DeviceMalloc(&d_topk, rows * topk * 4), "malloc") ||
      !Check(CopyToDevice(d_logits, logits.data(), logits.size() * 4),
             "copy") ||
      !Check(CopyToDevice(d_start, start.data(), rows * 4), "copy") ||
      !Check(CopyToDevice(d_end, end.data(), rows * 4), "copy")) {
    return 1;
  }
  IndexerTopKParams tp;
  tp.logits = static_cast<float*>(d_logits);
  tp.row_key_start = static_cast<int32_t*>(d_start);
  tp.row_key_end = static_cast<int32_t*>(d_end);
  tp.topk_indices = static_cast<int32_t*>(d_topk);
  tp.rows = rows;
  tp.width = T;
  tp.logits_stride = T;
  tp.topk = topk;
  tp.topk_stride = topk;
  std::mt19937 rng(20261201);
  const bool ok = TimeTopKPaths(tp, logits, end, causal, "normal", paths, iters,
                                check ? 8 : 0, rng);
  for (void* p : {d_logits, d_start, d_end, d_topk}) (void)DeviceFree(p);
  return ok ? 0 : 1;
}

int Main(int argc, char** argv) {
  int heads = 32, tokens = 8192, topk = 2048, iters = 30, block_size = 64;
  int decode = 0;
  int check = 1;  // 0: time only
  int topk_only = 0, topk_rows = 0;
  std::vector<IndexerTopKPath> topk_paths = {IndexerTopKPath::kAuto};
  std::vector<IndexerLogitsGroups> groups_list = {IndexerLogitsGroups::kAuto};
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
    const std::string groups_flag = "--groups=";
    if (a.rfind(groups_flag, 0) == 0) {
      groups_list.clear();
      std::string list = a.substr(groups_flag.size());
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        IndexerLogitsGroups g;
        if (!indexer::ParseGroups(list.substr(at, comma - at), &g)) {
          std::fprintf(stderr, "unknown groups in %s\n", argv[i]);
          return 2;
        }
        groups_list.push_back(g);
        at = comma + 1;
      }
      continue;
    }
    const std::string paths_flag = "--topk_paths=";
    if (a.rfind(paths_flag, 0) == 0) {
      if (!ParseTopKPaths(a.substr(paths_flag.size()), &topk_paths)) {
        std::fprintf(stderr, "unknown top-k path in %s\n", argv[i]);
        return 2;
      }
      continue;
    }
    if (!value("heads", &heads) && !value("tokens", &tokens) &&
        !value("topk_only", &topk_only) && !value("topk_rows", &topk_rows) &&
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
      decode < 0 || topk_rows < 0) {
    std::fprintf(stderr, "every size must be positive\n");
    return 2;
  }
  if (topk_only)
    return TopKOnly(tokens, topk_rows, topk, iters, check, topk_paths);
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
  // Each variant on the same inputs: logits poisoned, launched, a sample
  // checked against float64, then timed.
  std::vector<float> logits(rows * T);
  for (const IndexerLogitsGroups groups : groups_list) {
    options.groups = groups;
    if (!Check(DeviceMemset(b.logits, 0xff, logits_bytes), "memset")) return 1;
    if (!Check(IndexerLogitsLaunch(lp, nullptr, options), "indexer_logits") ||
        !Check(DeviceSynchronize(), "sync")) {
      return 1;
    }

    // Sampled check of the logits against float64.
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
                       static_cast<long long>(i), static_cast<long long>(j),
                       got);
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

    float logits_ms = 0.0f;
    LogitsRun logits_run{lp, options};
    if (!Check(TimeMedianMs(RunLogits, &logits_run, 5, iters, &logits_ms),
               "time logits")) {
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
        "gbps=%.0f path=%s\n",
        decode > 0 ? "decode_" : "", heads, static_cast<long long>(T), requests,
        logits_ms, flops / (logits_ms * 1e-3) / 1e12,
        logits_bytes_min / (logits_ms * 1e-3) / 1e9,
        IndexerLogitsPath(lp, options));
  }
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
  // The top-k over those logits, each path checked against a host sort of
  // 48 sampled rows first.
  if (!TimeTopKPaths(tp, logits, end, decode == 0, "indexer", topk_paths, iters,
                     check ? 48 : 0, rng)) {
    return 1;
  }
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
