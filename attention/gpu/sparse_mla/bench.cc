// Times the GPU sparse MLA (attention over each row's top-k latent cache
// entries, then W_UV) at the shapes that matter, after checking two rows of
// the result against a float64 host reference, so a timing is never
// reported for a wrong result. Prints one line per run:
//   sparse_mla mode=... cache=... heads=H rows=T topk=K v=V median_ms=...
//   tflops=... queued_ms=...
// (FLOPs: rows * heads * (2 * topk * (576 + 512) + 2 * v * 512)). median_ms
// is the median of single calls, each between two events and waited for:
// the host's work before the call's first launch is inside it. queued_ms is
// the time a call of `iters` calls enqueued back to back: the device's pace
// where the host keeps ahead of it, as in a step.
//
// Modes: prefill (one request of max(T, 2 * topk) tokens, every row naming
// topk distinct positions) and decode (--requests requests of --context
// tokens, --mtp rows each: 1 + the speculative tokens, each row its own
// top-k list). q, kv_b_proj and the output are bf16, as in serving.
//
// Usage: sparse_mla_bench [--mode=prefill|decode] [--cache=bf16|fp8]
//   [--heads=64] [--tokens=8192] [--topk=2048] [--v=256] [--nope=192]
//   [--requests=32] [--context=65536] [--mtp=1] [--iters=10]
//   [--block_size=64] [--paths=mma,picked] [--then <another run's
//   arguments>]...
// --paths: the kernels to run on the same inputs, one line each ("picked":
// the one the heuristics pick; "mma": the warp-level kernel, for a
// comparison; launch.h's SparseMlaLaunchOnPath). The line's path says which
// kernel ran (an fp8 prefill on sm_90a: "dequant+seesaw", an fp8 decode
// "gather+seesaw").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "attention/gpu/device/runtime.h"
#include "attention/gpu/sparse_mla/launch.h"

namespace dsa::attention::gpu {
namespace {

constexpr int kLora = 512, kRope = 64, kDim = kLora + kRope;

bool Check(const LaunchResult& r, const char* what) {
  if (r.ok()) return true;
  std::fprintf(stderr, "%s failed: %s\n", what, r.message);
  return false;
}

uint64_t Next(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}
// A random bf16 of magnitude in [2^-3, 2^3).
uint16_t RandomBf16(uint64_t& s) {
  const uint64_t r = Next(s);
  const uint32_t exponent = 124 + static_cast<uint32_t>(r % 6);
  return static_cast<uint16_t>(((r >> 8) & 0x8000u) | (exponent << 7) |
                               ((r >> 20) & 0x7fu));
}
float Bf16Float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double Fp8E4m3fn(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const double v = e == 0 ? m * std::ldexp(1.0, -9)
                          : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return (code & 0x80) ? -v : v;
}

struct Run {
  SparseMlaParams params;
  const char* path;  // nullptr: the picked kernel
};
LaunchResult RunSparse(void* arg) {
  const Run& run = *static_cast<const Run*>(arg);
  return SparseMlaLaunchOnPath(run.params, run.path, nullptr);
}

struct Config {
  std::string mode = "prefill", cache_name = "bf16", paths = "picked";
  int heads = 64, tokens = 8192, topk = 2048, v = 256, nope = 192;
  int requests = 32, context = 65536, iters = 10, block_size = 64, mtp = 1;
};

int RunOne(const Config& config);

// Arguments form groups separated by --then; each group is one run (from
// the defaults), all in one process so that the device is set up once.
int Main(int argc, char** argv) {
  std::vector<Config> configs(1);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--then") {
      configs.emplace_back();
      continue;
    }
    Config& c = configs.back();
    std::string& mode = c.mode;
    std::string& cache_name = c.cache_name;
    int &heads = c.heads, &tokens = c.tokens, &topk = c.topk, &v = c.v,
        &nope = c.nope, &requests = c.requests, &context = c.context,
        &iters = c.iters, &block_size = c.block_size, &mtp = c.mtp;
    auto value = [&](const char* name, int* out) {
      const std::string prefix = std::string("--") + name + "=";
      if (a.rfind(prefix, 0) != 0) return false;
      *out = std::atoi(a.c_str() + prefix.size());
      return true;
    };
    auto text = [&](const char* name, std::string* out) {
      const std::string prefix = std::string("--") + name + "=";
      if (a.rfind(prefix, 0) != 0) return false;
      *out = a.substr(prefix.size());
      return true;
    };
    if (!value("heads", &heads) && !value("tokens", &tokens) &&
        !value("topk", &topk) && !value("v", &v) && !value("nope", &nope) &&
        !value("requests", &requests) && !value("context", &context) &&
        !value("iters", &iters) && !value("block_size", &block_size) &&
        !value("mtp", &mtp) && !text("mode", &mode) &&
        !text("cache", &cache_name) && !text("paths", &c.paths)) {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  int rc = 0;
  for (const Config& c : configs) {
    const int r = RunOne(c);
    if (r != 0) rc = r;
  }
  return rc;
}

int RunOne(const Config& c) {
  const std::string& mode = c.mode;
  const std::string& cache_name = c.cache_name;
  const int heads = c.heads, tokens = c.tokens, topk = c.topk, v = c.v,
            nope = c.nope, requests = c.requests, context = c.context,
            iters = c.iters, block_size = c.block_size, mtp = c.mtp;
  const bool decode = mode == "decode";
  const bool fp8 = cache_name == "fp8";
  if (heads < 1 || topk < 1 || iters < 1 || block_size < 1 || v < 1 ||
      requests < 1 || context < topk || mtp < 1) {
    std::fprintf(stderr, "bad sizes\n");
    return 2;
  }
  // Sequence lengths are powers of two, so that idx = (a j + b) mod len with
  // odd a names topk distinct positions.
  int64_t seq = 1;
  const int64_t want = decode ? context : std::max<int64_t>(tokens, 2 * topk);
  while (seq < want) seq *= 2;
  const int64_t rows = decode ? int64_t{requests} * mtp : tokens;
  const int64_t nreq = decode ? requests : 1;
  const int64_t max_blocks = (seq + block_size - 1) / block_size;
  const int64_t entry = fp8 ? 656 : 2 * kDim;
  // Physical pages: what the requests need, at most ~256 MiB (5x the L2
  // cache; requests then share pages, which changes nothing here).
  int64_t num_blocks = nreq * max_blocks;
  const int64_t cap = (int64_t{256} << 20) / (entry * block_size);
  if (num_blocks > cap) num_blocks = cap;
  uint64_t s = 0x9e3779b97f4a7c15ull;
  std::vector<int32_t> table(nreq * max_blocks);
  for (auto& b : table) b = static_cast<int32_t>(Next(s) % num_blocks);
  std::vector<int32_t> seq_lens(nreq, static_cast<int32_t>(seq));
  std::vector<int32_t> token_request(rows);
  for (int64_t t = 0; t < rows; ++t) {
    token_request[t] = decode ? static_cast<int32_t>(t / mtp) : 0;
  }
  std::vector<int32_t> indices(rows * topk);
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t a = 2 * (Next(s) % (seq / 2)) + 1, b = Next(s) % seq;
    for (int j = 0; j < topk; ++j) {
      indices[t * topk + j] = static_cast<int32_t>((a * j + b) % seq);
    }
  }
  std::vector<uint8_t> cache(num_blocks * block_size * entry);
  for (int64_t e = 0; e < num_blocks * block_size; ++e) {
    uint8_t* p = cache.data() + e * entry;
    if (!fp8) {
      for (int d = 0; d < kDim; ++d) {
        const uint16_t x = RandomBf16(s);
        std::memcpy(p + 2 * d, &x, 2);
      }
      continue;
    }
    for (int d = 0; d < kLora; d += 8) {
      uint64_t r = Next(s);
      for (int k = 0; k < 8; ++k) {
        uint8_t code = static_cast<uint8_t>(r >> (8 * k));
        if ((code & 0x7f) == 0x7f) code ^= 1;  // no NaN
        p[d + k] = code;
      }
    }
    const float scale = 0x1p-6f;
    for (int tile = 0; tile < 4; ++tile)
      std::memcpy(p + 512 + 4 * tile, &scale, 4);
    for (int d = 0; d < kRope; ++d) {
      const uint16_t x = RandomBf16(s);
      std::memcpy(p + 528 + 2 * d, &x, 2);
    }
  }
  std::vector<uint16_t> q(rows * heads * kDim),
      w(int64_t{heads} * (nope + v) * kLora);
  {
    // q repeats a random pattern of a prime length (no two rows alike), so
    // that setting up 8192 rows of 128 heads takes a moment, not seconds.
    std::vector<uint16_t> pattern(1048573);
    for (auto& x : pattern) x = RandomBf16(s);
    for (size_t i = 0; i < q.size(); i += pattern.size()) {
      const size_t n = std::min(pattern.size(), q.size() - i);
      std::memcpy(q.data() + i, pattern.data(), n * 2);
    }
  }
  for (auto& x : w) x = static_cast<uint16_t>(RandomBf16(s) - (5 << 7));  // /32

  void *d_q, *d_cache, *d_table, *d_seq, *d_req, *d_idx, *d_w, *d_out;
  const size_t out_bytes = rows * heads * v * 2;
  if (!Check(DeviceMalloc(&d_q, q.size() * 2), "malloc") ||
      !Check(DeviceMalloc(&d_cache, cache.size()), "malloc") ||
      !Check(DeviceMalloc(&d_table, table.size() * 4), "malloc") ||
      !Check(DeviceMalloc(&d_seq, seq_lens.size() * 4), "malloc") ||
      !Check(DeviceMalloc(&d_req, rows * 4), "malloc") ||
      !Check(DeviceMalloc(&d_idx, indices.size() * 4), "malloc") ||
      !Check(DeviceMalloc(&d_w, w.size() * 2), "malloc") ||
      !Check(DeviceMalloc(&d_out, out_bytes), "malloc") ||
      !Check(CopyToDevice(d_q, q.data(), q.size() * 2), "copy") ||
      !Check(CopyToDevice(d_cache, cache.data(), cache.size()), "copy") ||
      !Check(CopyToDevice(d_table, table.data(), table.size() * 4), "copy") ||
      !Check(CopyToDevice(d_seq, seq_lens.data(), seq_lens.size() * 4),
             "copy") ||
      !Check(CopyToDevice(d_req, token_request.data(), rows * 4), "copy") ||
      !Check(CopyToDevice(d_idx, indices.data(), indices.size() * 4), "copy") ||
      !Check(CopyToDevice(d_w, w.data(), w.size() * 2), "copy") ||
      !Check(DeviceMemset(d_out, 0xff, out_bytes), "memset")) {
    return 1;
  }
  SparseMlaParams p;
  p.q = d_q;
  p.q_format = FloatFormat::kBFloat16;
  p.q_token_stride = int64_t{heads} * kDim;
  p.q_head_stride = kDim;
  p.kv_cache = static_cast<const uint8_t*>(d_cache);
  p.cache_type = fp8 ? LatentCacheType::kFp8E4m3fn : LatentCacheType::kBFloat16;
  p.cache_token_stride = entry;
  p.cache_block_stride = entry * block_size;
  p.num_blocks = num_blocks;
  p.block_size = block_size;
  p.block_table = static_cast<const int32_t*>(d_table);
  p.num_requests = static_cast<int32_t>(nreq);
  p.max_blocks_per_request = static_cast<int32_t>(max_blocks);
  p.block_table_stride = max_blocks;
  p.seq_lens = static_cast<const int32_t*>(d_seq);
  p.token_request = static_cast<const int32_t*>(d_req);
  p.topk_indices = static_cast<const int32_t*>(d_idx);
  p.topk = topk;
  p.topk_stride = topk;
  p.kv_b_proj = d_w;
  p.kv_b_proj_format = FloatFormat::kBFloat16;
  p.kv_b_proj_row_stride = kLora;
  p.qk_nope_head_dim = nope;
  p.v_head_dim = v;
  p.softmax_scale = static_cast<float>(1.0 / std::sqrt(double(nope + kRope)));
  p.output = d_out;
  p.output_format = FloatFormat::kBFloat16;
  p.output_token_stride = int64_t{heads} * v;
  p.output_head_stride = v;
  p.tokens = rows;
  p.heads = heads;
  // The float64 reference of the first and the last row.
  const int64_t checked[2] = {0, rows - 1};
  std::vector<std::vector<double>> refs(2);
  for (int k = 0; k < 2; ++k) {
    const int64_t t = checked[k];
    std::vector<std::vector<double>> keys(topk, std::vector<double>(kDim));
    for (int j = 0; j < topk; ++j) {
      const int32_t idx = indices[t * topk + j];
      const int64_t r = token_request[t];
      const int64_t slot =
          int64_t{table[r * max_blocks + idx / block_size]} * block_size +
          idx % block_size;
      const uint8_t* e = cache.data() + slot * entry;
      for (int d = 0; d < kDim; ++d) {
        uint16_t b;
        if (!fp8) {
          std::memcpy(&b, e + 2 * d, 2);
          keys[j][d] = Bf16Float(b);
        } else if (d < kLora) {
          keys[j][d] = Fp8E4m3fn(e[d]) * 0x1p-6;
        } else {
          std::memcpy(&b, e + 528 + 2 * (d - kLora), 2);
          keys[j][d] = Bf16Float(b);
        }
      }
    }
    refs[k].resize(int64_t{heads} * v);
    for (int h = 0; h < heads; ++h) {
      std::vector<double> sc(topk);
      double mx = -1e300;
      for (int j = 0; j < topk; ++j) {
        double dot = 0;
        for (int d = 0; d < kDim; ++d) {
          dot += Bf16Float(q[(t * heads + h) * kDim + d]) * keys[j][d];
        }
        sc[j] = dot * p.softmax_scale;
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (double& x : sc) sum += (x = std::exp(x - mx));
      std::vector<double> o(kLora, 0.0);
      for (int j = 0; j < topk; ++j) {
        for (int d = 0; d < kLora; ++d) o[d] += sc[j] / sum * keys[j][d];
      }
      for (int oo = 0; oo < v; ++oo) {
        const uint16_t* wr =
            w.data() + (int64_t{h} * (nope + v) + nope + oo) * kLora;
        double acc = 0;
        for (int d = 0; d < kLora; ++d) acc += Bf16Float(wr[d]) * o[d];
        refs[k][h * v + oo] = acc;
      }
    }
  }

  // Each path: poisoned output, one run checked against the reference,
  // then timed.
  int rc = 0;
  size_t from = 0;
  while (from <= c.paths.size()) {
    size_t to = c.paths.find(',', from);
    if (to == std::string::npos) to = c.paths.size();
    const std::string name = c.paths.substr(from, to - from);
    from = to + 1;
    if (name.empty()) continue;
    Run run{p, name == "picked" ? nullptr : name.c_str()};
    std::fprintf(stderr, "[bench] %s: launching\n", name.c_str());
    if (!Check(DeviceMemset(d_out, 0xff, out_bytes), "memset") ||
        !Check(RunSparse(&run), "sparse_mla") ||
        !Check(DeviceSynchronize(), "sync")) {
      rc = 1;
      continue;
    }
    double worst = 0;
    bool bad = false;
    for (int k = 0; k < 2 && !bad; ++k) {
      const int64_t t = checked[k];
      std::vector<uint16_t> got(int64_t{heads} * v);
      if (!Check(CopyToHost(got.data(),
                            static_cast<uint8_t*>(d_out) + t * heads * v * 2,
                            got.size() * 2),
                 "copy")) {
        return 1;
      }
      for (int h = 0; h < heads && !bad; ++h) {
        double scale = 0;
        for (int oo = 0; oo < v; ++oo) {
          scale = std::max(scale, std::fabs(refs[k][h * v + oo]));
        }
        for (int oo = 0; oo < v; ++oo) {
          const double want = refs[k][h * v + oo];
          const double err =
              std::fabs(Bf16Float(got[h * v + oo]) - want) / scale;
          worst = std::max(worst, err);
          if (!(err <= 1.0 / 64)) {
            std::fprintf(stderr,
                         "%s: row %lld head %d dim %d: got %g, want %g\n",
                         name.c_str(), static_cast<long long>(t), h, oo,
                         Bf16Float(got[h * v + oo]), want);
            bad = true;
            break;
          }
        }
      }
    }
    if (bad) {
      rc = 1;
      continue;
    }
    float ms = 0, queued_ms = 0;
    if (!Check(TimeMedianMs(&RunSparse, &run, 2, iters, &ms), "timing") ||
        !Check(TimeQueuedMs(&RunSparse, &run, 2, iters, &queued_ms),
               "queued timing")) {
      rc = 1;
      continue;
    }
    const double flops = static_cast<double>(rows) * heads *
                         (2.0 * topk * (kDim + kLora) + 2.0 * v * kLora);
    std::printf(
        "sparse_mla mode=%s cache=%s heads=%d requests=%lld mtp=%d "
        "context=%d rows=%lld topk=%d v=%d block_size=%d path=%s "
        "median_ms=%.4f tflops=%.1f check_worst=%.2g queued_ms=%.4f\n",
        mode.c_str(), cache_name.c_str(), heads, static_cast<long long>(nreq),
        decode ? mtp : 0, decode ? context : 0, static_cast<long long>(rows),
        topk, v, block_size, run.path != nullptr ? run.path : SparseMlaPath(p),
        ms, flops / (ms * 1e-3) / 1e12, worst, queued_ms);
  }
  for (void* ptr : {d_q, d_cache, d_table, d_seq, d_req, d_idx, d_w, d_out}) {
    (void)DeviceFree(ptr);
  }
  return rc;
}

}  // namespace
}  // namespace dsa::attention::gpu

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines show up even if killed
  return dsa::attention::gpu::Main(argc, argv);
}
