// The host's share of an op call, on the CPU: the pieces of the GPU ops'
// host path that run on every call, timed apart (nanoseconds per call):
//   - Validate of the layer step's ops at GLM-5.1's shapes (64 tokens);
//   - StrCat of an error message (what the checks no longer build on
//     success);
//   - a GEMM plan found in the thread's entries (PlanCache) for a layer's 9
//     shapes in turn, and the table's path when the entries miss;
//   - a stream's scratch arena acquired and released (ScratchArenas over a
//     host allocator: the bookkeeping, no device call);
//   - the indexer's key maps found per layer (SmallCache, 79 layers).
// Run with
//   bazel run -c opt //attention/gpu:host_path_benchmark
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "attention/dense_ops.h"
#include "attention/gpu/dense_ops/plan_cache.h"
#include "attention/gpu/device/scratch_arena.h"
#include "attention/gpu/device/small_cache.h"
#include "attention/ops.h"
#include "benchmark/benchmark.h"

namespace dsa::attention::gpu {
namespace {

constexpr int64_t kTokens = 64, kHidden = 6144, kHeads = 64, kNope = 192,
                  kRope = 64, kV = 256, kLora = 512;

class Views {
 public:
  TensorView Make(DType dtype, std::initializer_list<int64_t> shape) {
    next_ += uint64_t{1} << 36;
    return MakeTensorView(reinterpret_cast<void*>(next_), dtype, shape);
  }

 private:
  uint64_t next_ = 0;
};

void BM_ValidateGemm(benchmark::State& state) {
  Views v;
  Gemm::Args a;
  a.x = v.Make(DType::kBFloat16, {1, kTokens, kHidden});
  a.w = v.Make(DType::kBFloat16, {1, 2048, kHidden});
  a.y = v.Make(DType::kFloat32, {1, kTokens, 2048});
  for (auto _ : state) benchmark::DoNotOptimize(Gemm::Validate(a));
}
BENCHMARK(BM_ValidateGemm);

void BM_ValidateResidualAdd(benchmark::State& state) {
  Views v;
  ResidualAdd::Args a;
  a.residual = v.Make(DType::kFloat32, {kTokens, kHidden});
  a.x = v.Make(DType::kFloat32, {kTokens, kHidden});
  for (auto _ : state) benchmark::DoNotOptimize(ResidualAdd::Validate(a));
}
BENCHMARK(BM_ValidateResidualAdd);

void BM_ValidateDenseMhaPrefill(benchmark::State& state) {
  Views v;
  DenseMhaPrefill::Args a;
  a.q = v.Make(DType::kBFloat16, {kTokens, kHeads, kNope + kRope});
  a.kv_cache = v.Make(DType::kBFloat16, {64, 64, kLora + kRope});
  a.block_table = v.Make(DType::kInt32, {2, 16});
  a.seq_lens = v.Make(DType::kInt32, {2});
  a.query_start_loc = v.Make(DType::kInt32, {3});
  a.kv_b_proj = v.Make(DType::kBFloat16, {kHeads * (kNope + kV), kLora});
  a.softmax_scale = 0.0625f;
  a.output = v.Make(DType::kBFloat16, {kTokens, kHeads, kV});
  a.seq_lens_host = v.Make(DType::kInt32, {2});
  a.query_start_loc_host = v.Make(DType::kInt32, {3});
  for (auto _ : state) benchmark::DoNotOptimize(DenseMhaPrefill::Validate(a));
}
BENCHMARK(BM_ValidateDenseMhaPrefill);

void BM_StrCatErrorMessage(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(StrCat("dense_mha_prefill", ": ", "kv_b_proj",
                                    " dim ", 0, " is ", int64_t{28672},
                                    ", expected ", int64_t{28680}, " (", 64,
                                    " heads * (", 192, " + ", 256, "))"));
  }
}
BENCHMARK(BM_StrCatErrorMessage);

struct Key {
  int64_t rows, out;
  bool operator==(const Key& o) const { return rows == o.rows && out == o.out; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return static_cast<size_t>(k.rows * 1000003 + k.out);
  }
};
struct Plan {
  int64_t algo[16];
};
using Plans = PlanCache<Key, Plan, KeyHash>;

// A layer's GEMM shapes in turn, as a step issues them.
void BM_GemmPlanThreadHit(benchmark::State& state) {
  Plans plans(512);
  int shape = 0;
  for (auto _ : state) {
    const Key k{kTokens, 1000 + shape};
    shape = (shape + 1) % 9;
    benchmark::DoNotOptimize(
        plans.Find(k, [] { return std::make_shared<const Plan>(); }));
  }
}
BENCHMARK(BM_GemmPlanThreadHit);

// More shapes than a thread keeps: every call takes the table's lock.
void BM_GemmPlanTableHit(benchmark::State& state) {
  Plans plans(512);
  int shape = 0;
  for (auto _ : state) {
    const Key k{kTokens, 1000 + shape};
    shape = (shape + 1) % (Plans::kThreadEntries + 1);
    benchmark::DoNotOptimize(
        plans.Find(k, [] { return std::make_shared<const Plan>(); }));
  }
}
BENCHMARK(BM_GemmPlanTableHit);

LaunchResult HostAllocate(void*, const ScratchKey&, size_t bytes, const char*,
                          void** ptr) {
  *ptr = std::aligned_alloc(ScratchLayout::kAlignment, bytes);
  return LaunchResult{};
}
void HostRelease(void*, const ScratchKey&, void* ptr) { std::free(ptr); }

void BM_ScratchArenaAcquire(benchmark::State& state) {
  ScratchArenas arenas(
      ScratchAllocator{HostAllocate, HostRelease, HostRelease, nullptr}, 32);
  static int stream;
  const ScratchKey key{0, &stream};
  for (auto _ : state) {
    ScratchLayout layout;
    for (size_t bytes : {size_t{4096}, size_t{1} << 20, size_t{3} << 20,
                         size_t{3} << 20, size_t{1} << 16}) {
      layout.Add(bytes);
    }
    ScratchArenas::Lease lease;
    benchmark::DoNotOptimize(
        arenas.Acquire(key, layout.bytes(), "scratch", &lease));
  }
}
BENCHMARK(BM_ScratchArenaAcquire);

struct MapKey {
  const void* cache;
  int64_t num_blocks;
  int32_t block_size;
  bool operator==(const MapKey& o) const {
    return cache == o.cache && num_blocks == o.num_blocks &&
           block_size == o.block_size;
  }
};
struct Maps {
  alignas(64) unsigned char bytes[256];
};

// The indexer's key maps, one per layer's K cache, 79 layers in turn.
void BM_KeyMapsPerLayer(benchmark::State& state) {
  static int caches[79];
  auto cache = std::make_unique<SmallCache<MapKey, Maps, 128>>();
  int layer = 0;
  for (auto _ : state) {
    const MapKey k{&caches[layer], 4096, 64};
    layer = (layer + 1) % 79;
    benchmark::DoNotOptimize(cache->Find(k, [](Maps*) { return true; }));
  }
}
BENCHMARK(BM_KeyMapsPerLayer);

}  // namespace
}  // namespace dsa::attention::gpu

BENCHMARK_MAIN();
