// Timing of the memory-bound GPU kernels (launch.h) at the presets'
// shapes: median of event-timed calls after warm-up, and the bytes each
// call must move, as GB/s against the card's copy bandwidth (measured in the
// same call by the payload's torch script). The K write and Q run their
// default body (the register one at these shapes), then the staged body
// (force_staged_path), named by IndexerKWritePath / IndexerQPath.
//
// Usage: cache_bench [--iters=N]
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "attention/dtypes/bf16.h"
#include "attention/gpu/cache/launch.h"
#include "attention/gpu/device/runtime.h"

namespace dsa::attention::gpu {
namespace {

bool Check(const LaunchResult& r, const char* what) {
  if (!r.ok()) std::fprintf(stderr, "%s: %s\n", what, r.message);
  return r.ok();
}

void* Upload(const void* host, size_t bytes) {
  void* p = nullptr;
  if (!Check(DeviceMalloc(&p, bytes), "DeviceMalloc")) std::exit(1);
  if (!Check(CopyToDevice(p, host, bytes), "CopyToDevice")) std::exit(1);
  return p;
}

// Uniform in [-2, 2) plus an offset, as bf16; a cheap generator, since the
// largest inputs have 67M values.
std::vector<uint16_t> RandomBf16(std::mt19937_64& rng, int64_t n) {
  std::vector<uint16_t> v(n);
  uint64_t x = rng() | 1;
  for (auto& e : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    e = FloatToBf16(static_cast<float>(x >> 40) * 0x1p-22f - 2.0f + 0.25f);
  }
  return v;
}

std::vector<float> CosSin(int64_t positions, int64_t rope) {
  std::vector<float> cs(positions * rope);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < rope / 2; ++i) {
      const double f = std::pow(10000.0, -2.0 * i / rope);
      cs[p * rope + i] = static_cast<float>(std::cos(p * f));
      cs[p * rope + rope / 2 + i] = static_cast<float>(std::sin(p * f));
    }
  }
  return cs;
}

template <class P, LaunchResult (*L)(const P&, void*)>
LaunchResult Call(void* arg) {
  return L(*static_cast<const P*>(arg), nullptr);
}

void Report(const char* name, double ms, double bytes) {
  std::printf("%-48s %9.4f ms  %8.1f MB  %7.0f GB/s\n", name, ms, bytes / 1e6,
              bytes / (ms * 1e-3) / 1e9);
  std::fflush(stdout);
}

}  // namespace

int Main(int argc, char** argv) {
  int iters = 50;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--iters=", 8) == 0)
      iters = std::atoi(argv[i] + 8);
  }
  std::mt19937_64 rng(7);
  const int64_t kMaxPos = 16384, kRope = 64, kHeadDim = 128, kTopK = 2048;
  const std::vector<float> cs = CosSin(kMaxPos, kRope);
  const float* d_cs =
      static_cast<const float*>(Upload(cs.data(), cs.size() * sizeof(float)));

  for (int64_t tokens : {1024, 1900, 8192}) {
    std::vector<int64_t> pos(tokens), slots(tokens);
    for (int64_t t = 0; t < tokens; ++t) {
      pos[t] = t;
      slots[t] = t;
    }
    const int64_t* d_pos =
        static_cast<const int64_t*>(Upload(pos.data(), pos.size() * 8));
    const int64_t* d_slots =
        static_cast<const int64_t*>(Upload(slots.data(), slots.size() * 8));
    // K write, bf16 k, block 64.
    {
      const std::vector<uint16_t> k = RandomBf16(rng, tokens * kHeadDim);
      const std::vector<uint16_t> w = RandomBf16(rng, kHeadDim);
      const int64_t block = 64, blocks = (tokens + block - 1) / block;
      IndexerKWriteParams p;
      p.k = Upload(k.data(), k.size() * 2);
      p.k_type = FloatFormat::kBFloat16;
      p.k_row_stride = kHeadDim;
      p.ln_weight = Upload(w.data(), w.size() * 2);
      p.ln_weight_type = FloatFormat::kBFloat16;
      p.ln_bias = p.ln_weight;
      p.ln_bias_type = FloatFormat::kBFloat16;
      p.positions = d_pos;
      p.cos_sin_cache = d_cs;
      p.max_position = kMaxPos;
      p.cos_sin_stride = kRope;
      p.rope_dim = kRope;
      p.slot_mapping = d_slots;
      void* cache = nullptr;
      DeviceMalloc(&cache, blocks * block * (kHeadDim + 4));
      p.k_cache = static_cast<uint8_t*>(cache);
      p.num_blocks = blocks;
      p.block_size = block;
      void* topk = nullptr;
      DeviceMalloc(&topk, tokens * kTopK * 4);
      p.topk_indices = static_cast<int32_t*>(topk);
      p.topk = kTopK;
      p.topk_stride = kTopK;
      p.tokens = tokens;
      p.head_dim = kHeadDim;
      float ms = 0;
      if (!Check(TimeMedianMs(&Call<IndexerKWriteParams, IndexerKWriteLaunch>,
                              &p, 5, iters, &ms),
                 "k write")) {
        return 1;
      }
      const double bytes = tokens * (kHeadDim * 2.0 + kHeadDim + 4 +
                                     kTopK * 4.0 + 16 + kRope * 4.0);
      char name[96];
      std::snprintf(name, sizeof(name), "indexer_k_write T=%lld bf16 topk=2048",
                    static_cast<long long>(tokens));
      Report(name, ms, bytes);
      p.force_staged_path = true;  // the variant, for comparison
      Check(TimeMedianMs(&Call<IndexerKWriteParams, IndexerKWriteLaunch>, &p, 5,
                         iters, &ms),
            "k write");
      std::snprintf(name, sizeof(name),
                    "indexer_k_write T=%lld bf16 topk=2048 (%s)",
                    static_cast<long long>(tokens), IndexerKWritePath(p));
      Report(name, ms, bytes);
      p.force_staged_path = false;
      p.topk = 0;
      Check(TimeMedianMs(&Call<IndexerKWriteParams, IndexerKWriteLaunch>, &p, 5,
                         iters, &ms),
            "k write");
      std::snprintf(name, sizeof(name),
                    "indexer_k_write T=%lld bf16 (no top-k clear)",
                    static_cast<long long>(tokens));
      Report(name, ms,
             tokens * (kHeadDim * 2.0 + kHeadDim + 4 + 16 + kRope * 4.0));
    }
    // Q, bf16, 32 and 64 heads.
    for (int heads : {32, 64}) {
      const std::vector<uint16_t> q =
          RandomBf16(rng, tokens * heads * kHeadDim);
      const std::vector<uint16_t> w = RandomBf16(rng, tokens * heads);
      IndexerQParams p;
      p.q = Upload(q.data(), q.size() * 2);
      p.q_type = FloatFormat::kBFloat16;
      p.q_token_stride = heads * kHeadDim;
      p.q_head_stride = kHeadDim;
      p.weights = Upload(w.data(), w.size() * 2);
      p.weights_type = FloatFormat::kBFloat16;
      p.weights_token_stride = heads;
      p.weights_head_stride = 1;
      p.positions = d_pos;
      p.cos_sin_cache = d_cs;
      p.max_position = kMaxPos;
      p.cos_sin_stride = kRope;
      p.rope_dim = kRope;
      void* out = nullptr;
      DeviceMalloc(&out, tokens * heads * kHeadDim);
      p.q_fp8 = static_cast<uint8_t*>(out);
      p.q_fp8_token_stride = heads * kHeadDim;
      p.q_fp8_head_stride = kHeadDim;
      void* hw = nullptr;
      DeviceMalloc(&hw, tokens * heads * 4);
      p.head_weights = static_cast<float*>(hw);
      p.head_weights_token_stride = heads;
      p.head_weights_head_stride = 1;
      p.tokens = tokens;
      p.heads = heads;
      p.head_dim = kHeadDim;
      float ms = 0;
      if (!Check(TimeMedianMs(&Call<IndexerQParams, IndexerQLaunch>, &p, 5,
                              iters, &ms),
                 "q")) {
        return 1;
      }
      const double bytes =
          tokens *
          (heads * (kHeadDim * 2.0 + 2 + kHeadDim + 4) + 8 + kRope * 4.0);
      char name[96];
      std::snprintf(name, sizeof(name), "indexer_q T=%lld heads=%d bf16",
                    static_cast<long long>(tokens), heads);
      Report(name, ms, bytes);
      p.force_staged_path = true;  // the variant, for comparison
      Check(TimeMedianMs(&Call<IndexerQParams, IndexerQLaunch>, &p, 5, iters,
                         &ms),
            "q");
      std::snprintf(name, sizeof(name), "indexer_q T=%lld heads=%d bf16 (%s)",
                    static_cast<long long>(tokens), heads, IndexerQPath(p));
      Report(name, ms, bytes);
    }
    // MLA cache write 512 + 64, bf16 and fp8 layouts.
    for (bool fp8 : {false, true}) {
      const int64_t lora = 512, block = 64,
                    blocks = (tokens + block - 1) / block;
      const std::vector<uint16_t> kv = RandomBf16(rng, tokens * lora);
      const std::vector<uint16_t> pe = RandomBf16(rng, tokens * kRope);
      const int64_t width =
          fp8 ? lora + 4 * (lora / 128) + 2 * kRope : 2 * (lora + kRope);
      MlaCacheWriteParams p;
      p.kv_c = Upload(kv.data(), kv.size() * 2);
      p.kv_c_type = FloatFormat::kBFloat16;
      p.kv_c_stride = lora;
      p.k_pe = Upload(pe.data(), pe.size() * 2);
      p.k_pe_type = FloatFormat::kBFloat16;
      p.k_pe_stride = kRope;
      p.slot_mapping = d_slots;
      void* cache = nullptr;
      DeviceMalloc(&cache, blocks * block * width);
      p.kv_cache = static_cast<uint8_t*>(cache);
      p.num_blocks = blocks;
      p.block_size = block;
      p.block_stride_bytes = block * width;
      p.slot_stride_bytes = width;
      p.layout = fp8 ? LatentLayout::kFp8 : LatentLayout::kBFloat16;
      p.kv_lora_rank = lora;
      p.rope_dim = kRope;
      p.tokens = tokens;
      float ms = 0;
      if (!Check(TimeMedianMs(&Call<MlaCacheWriteParams, MlaCacheWriteLaunch>,
                              &p, 5, iters, &ms),
                 "mla write")) {
        return 1;
      }
      const double bytes = tokens * ((lora + kRope) * 2.0 + width + 8);
      char name[96];
      std::snprintf(name, sizeof(name), "mla_cache_write T=%lld %s",
                    static_cast<long long>(tokens),
                    fp8 ? "fp8_ds_mla" : "bf16");
      Report(name, ms, bytes);
    }
  }
  return 0;
}

}  // namespace dsa::attention::gpu

int main(int argc, char** argv) {
  return dsa::attention::gpu::Main(argc, argv);
}
