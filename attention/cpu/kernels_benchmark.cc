// Benchmarks of the CPU attention kernels at the tiny presets' sizes
// (model/deepseek_v32/presets/tiny-v3.2: 4 heads, kv_lora 128, qk 64+32,
// v 64, indexer 4 x 64, topk 64) over sequences of 256 to 2048 tokens, and
// one DeepSeek-V3.2-shaped case per op (128 heads, kv_lora 512, qk 128+64,
// v 128, indexer 64 x 128, topk 2048) at a size that finishes in seconds.
// Inputs are random; times are wall clock (the kernels are multithreaded).
//
//   bazel run -c opt //attention/cpu:kernels_benchmark --
//     --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// (one command line).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/cpu/kernels.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "attention/ops.h"
#include "attention/tensor.h"
#include "benchmark/benchmark.h"

namespace dsa::attention::cpu {
namespace {

struct Shape {
  int64_t heads;
  int64_t index_heads, index_head_dim, index_rope_dim;
  int64_t kv_lora, rope, nope, v;
  int64_t topk;
};
constexpr Shape kTiny = {4, 4, 64, 32, 128, 32, 64, 64, 64};
constexpr Shape kDeepSeek = {128, 64, 128, 64, 512, 64, 128, 128, 2048};
constexpr int64_t kBlockSize = 64;
constexpr int64_t kMaxPosition = 1 << 17;

const Shape& ShapeOf(int64_t preset) { return preset == 0 ? kTiny : kDeepSeek; }

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(12345);
  return rng;
}

std::vector<float> RandomFloats(int64_t n, double stddev = 1.0) {
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(normal(Rng()));
  return v;
}

std::vector<uint16_t> RandomBf16(int64_t n, double stddev = 1.0) {
  std::vector<uint16_t> v(n);
  std::vector<float> f = RandomFloats(n, stddev);
  for (int64_t i = 0; i < n; ++i) v[i] = FloatToBf16(f[i]);
  return v;
}

std::vector<uint8_t> RandomFp8(int64_t n, double stddev) {
  std::vector<uint8_t> v(n);
  std::vector<float> f = RandomFloats(n, stddev);
  for (int64_t i = 0; i < n; ++i) v[i] = FloatToFp8(f[i], kE4m3fnTraits);
  return v;
}

std::vector<float> CosSin(int64_t positions, int64_t rope_dim) {
  std::vector<float> c(positions * rope_dim);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < rope_dim / 2; ++i) {
      const double f = p * std::pow(10000.0, -2.0 * i / rope_dim);
      c[p * rope_dim + i] = static_cast<float>(std::cos(f));
      c[p * rope_dim + rope_dim / 2 + i] = static_cast<float>(std::sin(f));
    }
  }
  return c;
}

template <class T>
TensorView View(std::vector<T>& v, DType dtype,
                std::initializer_list<int64_t> shape) {
  return MakeTensorView(v.data(), dtype, shape);
}

// One request's block table over a cache of exactly its blocks, shuffled.
struct Paged {
  std::vector<int32_t> block_table, seq_lens;
  int64_t num_blocks = 0, max_blocks = 0;
  Paged(int64_t requests, int64_t seq_len) {
    max_blocks = (seq_len + kBlockSize - 1) / kBlockSize;
    num_blocks = requests * max_blocks;
    block_table.resize(num_blocks);
    std::iota(block_table.begin(), block_table.end(), 0);
    std::shuffle(block_table.begin(), block_table.end(), Rng());
    seq_lens.assign(requests, static_cast<int32_t>(seq_len));
  }
  int64_t requests() const { return static_cast<int64_t>(seq_lens.size()); }
  TensorView table() {
    return MakeTensorView(block_table.data(), DType::kInt32,
                          {requests(), max_blocks});
  }
  TensorView lens() {
    return MakeTensorView(seq_lens.data(), DType::kInt32, {requests()});
  }
};

void Check(const Status& status, benchmark::State& state) {
  if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
}

void SetFlops(benchmark::State& state, double flops_per_call) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops_per_call * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---------------------------------------------------------------------------

// args: preset, tokens
void BM_IndexerKWrite(benchmark::State& state) {
  const Shape& s = ShapeOf(state.range(0));
  const int64_t tokens = state.range(1);
  const int64_t d = s.index_head_dim;
  std::vector<uint16_t> k = RandomBf16(tokens * d);
  std::vector<uint16_t> w = RandomBf16(d), b = RandomBf16(d);
  std::vector<int64_t> positions(tokens), slots(tokens);
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<float> cos_sin = CosSin(tokens, s.index_rope_dim);
  const int64_t blocks = (tokens + kBlockSize - 1) / kBlockSize;
  std::vector<uint8_t> cache(blocks * kBlockSize * (d + 4));
  std::vector<int32_t> topk(tokens * s.topk);
  IndexerKWrite::Args a;
  a.k = View(k, DType::kBFloat16, {tokens, d});
  a.ln_weight = View(w, DType::kBFloat16, {d});
  a.ln_bias = View(b, DType::kBFloat16, {d});
  a.positions = View(positions, DType::kInt64, {tokens});
  a.cos_sin_cache = View(cos_sin, DType::kFloat32, {tokens, s.index_rope_dim});
  a.slot_mapping = View(slots, DType::kInt64, {tokens});
  a.k_cache = View(cache, DType::kUint8, {blocks, kBlockSize, d + 4});
  a.topk_indices = View(topk, DType::kInt32, {tokens, s.topk});
  for (auto _ : state) Check(IndexerKWriteCpu(ExecutionContext(), a), state);
  state.SetItemsProcessed(state.iterations() * tokens);
}

// args: preset, tokens
void BM_IndexerQ(benchmark::State& state) {
  const Shape& s = ShapeOf(state.range(0));
  const int64_t tokens = state.range(1);
  const int64_t h = s.index_heads, d = s.index_head_dim;
  std::vector<uint16_t> q = RandomBf16(tokens * h * d),
                        w = RandomBf16(tokens * h);
  std::vector<int64_t> positions(tokens);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<float> cos_sin = CosSin(tokens, s.index_rope_dim);
  std::vector<uint8_t> q_fp8(tokens * h * d);
  std::vector<float> head_weights(tokens * h);
  IndexerQ::Args a;
  a.q = View(q, DType::kBFloat16, {tokens, h, d});
  a.weights = View(w, DType::kBFloat16, {tokens, h});
  a.positions = View(positions, DType::kInt64, {tokens});
  a.cos_sin_cache = View(cos_sin, DType::kFloat32, {tokens, s.index_rope_dim});
  a.q_fp8 = View(q_fp8, DType::kFloat8E4m3fn, {tokens, h, d});
  a.head_weights = View(head_weights, DType::kFloat32, {tokens, h});
  for (auto _ : state) Check(IndexerQCpu(ExecutionContext(), a), state);
  state.SetItemsProcessed(state.iterations() * tokens);
}

// Indexer logits. Prefill (decode_rows = 0): one request of seq_len tokens,
// every token a row over its causal window. Decode: decode_rows requests of
// seq_len tokens, one row each over all of it.
// args: preset, seq_len, decode_rows
void BM_IndexerLogits(benchmark::State& state) {
  const Shape& s = ShapeOf(state.range(0));
  const int64_t seq_len = state.range(1);
  const int64_t decode_rows = state.range(2);
  const bool prefill = decode_rows == 0;
  const int64_t rows = prefill ? seq_len : decode_rows;
  const int64_t h = s.index_heads, d = s.index_head_dim;
  Paged paged(prefill ? 1 : decode_rows, seq_len);
  std::vector<uint8_t> cache =
      RandomFp8(paged.num_blocks * kBlockSize * (d + 4), 50.0);
  std::vector<uint8_t> q = RandomFp8(rows * h * d, 50.0);
  std::vector<float> w = RandomFloats(rows * h);
  std::vector<int32_t> request(rows), ks(rows, 0), ke(rows);
  double keys = 0;
  for (int64_t i = 0; i < rows; ++i) {
    request[i] = prefill ? 0 : static_cast<int32_t>(i);
    ke[i] = static_cast<int32_t>(prefill ? i + 1 : seq_len);
    keys += ke[i];
  }
  // Scales are finite: the cache's scale bytes hold random fp8 codes; set
  // them to 2^-7 so values are in a realistic range.
  for (int64_t b = 0; b < paged.num_blocks; ++b) {
    for (int64_t t = 0; t < kBlockSize; ++t) {
      const float scale = 1.0f / 128;
      std::memcpy(
          cache.data() + b * kBlockSize * (d + 4) + kBlockSize * d + 4 * t,
          &scale, 4);
    }
  }
  std::vector<float> logits(rows * seq_len);
  IndexerLogits::Args a;
  a.q_fp8 = View(q, DType::kFloat8E4m3fn, {rows, h, d});
  a.head_weights = View(w, DType::kFloat32, {rows, h});
  a.k_cache = View(cache, DType::kUint8, {paged.num_blocks, kBlockSize, d + 4});
  a.block_table = paged.table();
  a.seq_lens = paged.lens();
  a.row_request = View(request, DType::kInt32, {rows});
  a.row_key_start = View(ks, DType::kInt32, {rows});
  a.row_key_end = View(ke, DType::kInt32, {rows});
  a.logits = View(logits, DType::kFloat32, {rows, seq_len});
  for (auto _ : state) Check(IndexerLogitsCpu(ExecutionContext(), a), state);
  state.SetItemsProcessed(state.iterations() * rows);
  SetFlops(state, keys * h * d * 2);
}

// Top-k over causal prefill rows (decode_rows = 0) or decode rows of
// seq_len keys. args: preset, seq_len, decode_rows
void BM_IndexerTopK(benchmark::State& state) {
  const Shape& s = ShapeOf(state.range(0));
  const int64_t seq_len = state.range(1);
  const int64_t decode_rows = state.range(2);
  const bool prefill = decode_rows == 0;
  const int64_t rows = prefill ? seq_len : decode_rows;
  std::vector<float> logits = RandomFloats(rows * seq_len);
  std::vector<int32_t> ks(rows, 0), ke(rows);
  for (int64_t i = 0; i < rows; ++i) {
    ke[i] = static_cast<int32_t>(prefill ? i + 1 : seq_len);
  }
  std::vector<int32_t> out(rows * s.topk);
  IndexerTopK::Args a;
  a.logits = View(logits, DType::kFloat32, {rows, seq_len});
  a.row_key_start = View(ks, DType::kInt32, {rows});
  a.row_key_end = View(ke, DType::kInt32, {rows});
  a.topk_indices = View(out, DType::kInt32, {rows, s.topk});
  for (auto _ : state) Check(IndexerTopKCpu(ExecutionContext(), a), state);
  state.SetItemsProcessed(state.iterations() * rows);
}

LatentCacheFormat FormatOf(const Shape& s, bool fp8) {
  return {fp8 ? DType::kFloat8E4m3fn : DType::kBFloat16,
          static_cast<int32_t>(s.kv_lora), static_cast<int32_t>(s.rope)};
}

// A latent cache of `blocks` blocks filled through the cache-write kernel.
std::vector<uint8_t> FilledLatentCache(const Shape& s, bool fp8,
                                       int64_t blocks) {
  const LatentCacheFormat f = FormatOf(s, fp8);
  const int64_t width = LatentCacheEntryWidth(f);
  const int64_t tokens = blocks * kBlockSize;
  std::vector<uint8_t> cache(tokens * width * (fp8 ? 1 : 2));
  std::vector<uint16_t> kv_c = RandomBf16(tokens * s.kv_lora);
  std::vector<uint16_t> k_pe = RandomBf16(tokens * s.rope);
  std::vector<int64_t> slots(tokens);
  std::iota(slots.begin(), slots.end(), 0);
  MlaCacheWrite::Args a;
  a.kv_c = View(kv_c, DType::kBFloat16, {tokens, s.kv_lora});
  a.k_pe = View(k_pe, DType::kBFloat16, {tokens, s.rope});
  a.slot_mapping = View(slots, DType::kInt64, {tokens});
  a.kv_cache =
      MakeTensorView(cache.data(), fp8 ? DType::kUint8 : DType::kBFloat16,
                     {blocks, kBlockSize, width});
  a.cache_format = f;
  (void)MlaCacheWriteCpu(ExecutionContext(), a);
  return cache;
}

TensorView LatentView(std::vector<uint8_t>& cache, const Shape& s, bool fp8,
                      int64_t blocks) {
  return MakeTensorView(
      cache.data(), fp8 ? DType::kUint8 : DType::kBFloat16,
      {blocks, kBlockSize, LatentCacheEntryWidth(FormatOf(s, fp8))});
}

// args: preset, tokens, fp8
void BM_MlaCacheWrite(benchmark::State& state) {
  const Shape& s = ShapeOf(state.range(0));
  const int64_t tokens = state.range(1);
  const bool fp8 = state.range(2) != 0;
  const int64_t blocks = (tokens + kBlockSize - 1) / kBlockSize;
  const LatentCacheFormat f = FormatOf(s, fp8);
  std::vector<uint8_t> cache(blocks * kBlockSize * LatentCacheEntryWidth(f) *
                             (fp8 ? 1 : 2));
  std::vector<uint16_t> kv_c = RandomBf16(tokens * s.kv_lora);
  std::vector<uint16_t> k_pe = RandomBf16(tokens * s.rope);
  std::vector<int64_t> slots(tokens);
  std::iota(slots.begin(), slots.end(), 0);
  MlaCacheWrite::Args a;
  a.kv_c = View(kv_c, DType::kBFloat16, {tokens, s.kv_lora});
  a.k_pe = View(k_pe, DType::kBFloat16, {tokens, s.rope});
  a.slot_mapping = View(slots, DType::kInt64, {tokens});
  a.kv_cache = LatentView(cache, s, fp8, blocks);
  a.cache_format = f;
  for (auto _ : state) Check(MlaCacheWriteCpu(ExecutionContext(), a), state);
  state.SetItemsProcessed(state.iterations() * tokens);
}

// Sparse MLA. Prefill (decode_tokens = 0): one request of seq_len tokens,
// token p attending to min(p + 1, topk) keys (all causal keys, or a random
// top-k of them). Decode: decode_tokens requests of seq_len tokens, each
// token attending to topk random keys.
// args: preset, seq_len, decode_tokens, fp8
void BM_SparseMla(benchmark::State& state) {
  const Shape& s = ShapeOf(state.range(0));
  const int64_t seq_len = state.range(1);
  const int64_t decode_tokens = state.range(2);
  const bool fp8 = state.range(3) != 0;
  const bool prefill = decode_tokens == 0;
  const int64_t tokens = prefill ? seq_len : decode_tokens;
  const int64_t dim = s.kv_lora + s.rope;
  Paged paged(prefill ? 1 : decode_tokens, seq_len);
  std::vector<uint8_t> cache = FilledLatentCache(s, fp8, paged.num_blocks);
  std::vector<uint16_t> q = RandomBf16(tokens * s.heads * dim, 0.2);
  std::vector<uint16_t> w = RandomBf16(s.heads * (s.nope + s.v) * s.kv_lora,
                                       1.0 / std::sqrt(s.kv_lora));
  std::vector<int32_t> request(tokens), indices(tokens * s.topk, -1);
  double keys = 0;
  std::vector<int32_t> pool;
  for (int64_t t = 0; t < tokens; ++t) {
    request[t] = prefill ? 0 : static_cast<int32_t>(t);
    const int64_t causal = prefill ? t + 1 : seq_len;
    pool.resize(causal);
    std::iota(pool.begin(), pool.end(), 0);
    if (causal > s.topk) std::shuffle(pool.begin(), pool.end(), Rng());
    const int64_t n = std::min(causal, s.topk);
    std::copy(pool.begin(), pool.begin() + n, indices.begin() + t * s.topk);
    keys += n;
  }
  std::vector<uint16_t> out(tokens * s.heads * s.v);
  SparseMla::Args a;
  a.q = View(q, DType::kBFloat16, {tokens, s.heads, dim});
  a.kv_cache = LatentView(cache, s, fp8, paged.num_blocks);
  a.cache_format = FormatOf(s, fp8);
  a.block_table = paged.table();
  a.seq_lens = paged.lens();
  a.token_request = View(request, DType::kInt32, {tokens});
  a.topk_indices = View(indices, DType::kInt32, {tokens, s.topk});
  a.kv_b_proj =
      View(w, DType::kBFloat16, {s.heads * (s.nope + s.v), s.kv_lora});
  a.qk_nope_head_dim = static_cast<int32_t>(s.nope);
  a.softmax_scale = static_cast<float>(1.0 / std::sqrt(s.nope + s.rope));
  a.output = View(out, DType::kBFloat16, {tokens, s.heads, s.v});
  for (auto _ : state) Check(SparseMlaCpu(ExecutionContext(), a), state);
  state.SetItemsProcessed(state.iterations() * tokens);
  SetFlops(state, keys * s.heads * (dim + s.kv_lora) * 2 +
                      double(tokens) * s.heads * s.kv_lora * s.v * 2);
}

// Dense MHA prefill of one request of seq_len new tokens.
// args: preset, seq_len, fp8
void BM_DenseMhaPrefill(benchmark::State& state) {
  const Shape& s = ShapeOf(state.range(0));
  const int64_t seq_len = state.range(1);
  const bool fp8 = state.range(2) != 0;
  const int64_t qk = s.nope + s.rope;
  Paged paged(1, seq_len);
  std::vector<uint8_t> cache = FilledLatentCache(s, fp8, paged.num_blocks);
  std::vector<uint16_t> q = RandomBf16(seq_len * s.heads * qk);
  std::vector<uint16_t> w = RandomBf16(s.heads * (s.nope + s.v) * s.kv_lora,
                                       1.0 / std::sqrt(s.kv_lora));
  std::vector<int32_t> query_start_loc = {0, static_cast<int32_t>(seq_len)};
  std::vector<uint16_t> out(seq_len * s.heads * s.v);
  DenseMhaPrefill::Args a;
  a.q = View(q, DType::kBFloat16, {seq_len, s.heads, qk});
  a.kv_cache = LatentView(cache, s, fp8, paged.num_blocks);
  a.cache_format = FormatOf(s, fp8);
  a.block_table = paged.table();
  a.seq_lens = paged.lens();
  a.query_start_loc = View(query_start_loc, DType::kInt32, {2});
  a.kv_b_proj =
      View(w, DType::kBFloat16, {s.heads * (s.nope + s.v), s.kv_lora});
  a.softmax_scale = static_cast<float>(1.0 / std::sqrt(qk));
  a.output = View(out, DType::kBFloat16, {seq_len, s.heads, s.v});
  for (auto _ : state) Check(DenseMhaPrefillCpu(ExecutionContext(), a), state);
  state.SetItemsProcessed(state.iterations() * seq_len);
  const double pairs = double(seq_len) * (seq_len + 1) / 2;
  SetFlops(state, double(seq_len) * s.heads * (s.nope + s.v) * s.kv_lora * 2 +
                      pairs * s.heads * (qk + s.v) * 2);
}

// Preset 0 = tiny-v3.2, 1 = DeepSeek-V3.2.
BENCHMARK(BM_IndexerKWrite)
    ->ArgNames({"preset", "tokens"})
    ->Args({0, 256})
    ->Args({0, 1024})
    ->Args({0, 2048})
    ->Args({1, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_IndexerQ)
    ->ArgNames({"preset", "tokens"})
    ->Args({0, 256})
    ->Args({0, 1024})
    ->Args({0, 2048})
    ->Args({1, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_IndexerLogits)
    ->ArgNames({"preset", "seq", "decode_rows"})
    ->Args({0, 256, 0})
    ->Args({0, 1024, 0})
    ->Args({0, 2048, 0})
    ->Args({1, 8192, 16})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_IndexerTopK)
    ->ArgNames({"preset", "seq", "decode_rows"})
    ->Args({0, 256, 0})
    ->Args({0, 1024, 0})
    ->Args({0, 2048, 0})
    ->Args({1, 4096, 0})
    ->Args({1, 65536, 16})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_MlaCacheWrite)
    ->ArgNames({"preset", "tokens", "fp8"})
    ->Args({0, 2048, 0})
    ->Args({0, 2048, 1})
    ->Args({1, 2048, 0})
    ->Args({1, 2048, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_SparseMla)
    ->ArgNames({"preset", "seq", "decode_tokens", "fp8"})
    ->Args({0, 256, 0, 0})
    ->Args({0, 1024, 0, 0})
    ->Args({0, 2048, 0, 0})
    ->Args({0, 2048, 0, 1})
    ->Args({1, 8192, 4, 0})
    ->Args({1, 8192, 4, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_DenseMhaPrefill)
    ->ArgNames({"preset", "seq", "fp8"})
    ->Args({0, 256, 0})
    ->Args({0, 1024, 0})
    ->Args({0, 2048, 0})
    ->Args({0, 2048, 1})
    ->Args({1, 128, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace dsa::attention::cpu
