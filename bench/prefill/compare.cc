// The output hash, the cache hash and the round-by-round TTFT comparison
// (compare.h).
#include "bench/prefill/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "platform/status_macros.h"

namespace dsa::prefill_bench {

// Four lanes of 64-bit words, each an FNV-style xor-multiply with a
// xorshift (so a bit also reaches the lower bits), folded at the end; the
// bytes past the last 32 go in one at a time. The lanes' multiplies overlap,
// so it runs at about the memory's speed (50 MB in ~11 ms on this project's
// 2-core machine, against ~69 ms for byte-wise FNV-1a).
uint64_t HashBytes(const void* data, size_t bytes, uint64_t h) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t lane[4] = {h, h ^ 0x9e3779b97f4a7c15ull, h ^ 0xbf58476d1ce4e5b9ull,
                      h ^ 0x94d049bb133111ebull};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int j = 0; j < 4; ++j) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * j, sizeof(w));
      const uint64_t x = (lane[j] ^ w) * kPrime;
      lane[j] = x ^ (x >> 32);
    }
  }
  for (const uint64_t l : lane) {
    h = (h ^ l) * kPrime;
    h ^= h >> 32;
  }
  for (; i < bytes; ++i) {
    h ^= p[i];
    h *= kPrime;
  }
  return h;
}

absl::StatusOr<uint64_t> CacheHash(
    const model::deepseek_v32::DeepseekV32Model& model) {
  uint64_t h = kHashSeed;
  for (int l = 0; l < model.planner().config().num_layers(); ++l) {
    DSA_ASSIGN_OR_RETURN(std::vector<uint8_t> latent, model.ReadLatentCache(l));
    DSA_ASSIGN_OR_RETURN(std::vector<uint8_t> k, model.ReadIndexerKCache(l));
    h = HashBytes(latent.data(), latent.size(), h);
    h = HashBytes(k.data(), k.size(), h);
  }
  return h;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Change CompareRuns(const std::vector<double>& arm,
                   const std::vector<double>& reference) {
  Change c;
  const double reference_median = Median(reference);
  if (arm.empty() || reference.empty() || reference_median <= 0) return c;
  c.pct = 100.0 * (Median(arm) / reference_median - 1);
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < std::min(arm.size(), reference.size()); ++i) {
    if (reference[i] <= 0) continue;
    const double change = 100.0 * (arm[i] / reference[i] - 1);
    lo = std::min(lo, change);
    hi = std::max(hi, change);
  }
  c.verdict = "within noise";
  if (std::isfinite(lo)) {
    c.min_pct = lo;
    c.max_pct = hi;
    if (hi < -kNoiseFloorPct) c.verdict = "faster";
    if (lo > kNoiseFloorPct) c.verdict = "slower";
  }
  // One round says nothing about the noise.
  if (std::min(arm.size(), reference.size()) < 2) c.verdict = "one run";
  return c;
}

}  // namespace dsa::prefill_bench
