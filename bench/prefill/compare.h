// How prefill_bench compares its arms: outputs and caches to the bit, through
// a hash of their bytes (a GLM-5.1 run produces some 70 GB of hidden states,
// too many to keep), and TTFTs round by round, the arms of a round having run
// interleaved under the same load.
#ifndef DSA_BENCH_PREFILL_COMPARE_H_
#define DSA_BENCH_PREFILL_COMPARE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/deepseek_v32/model_runner.h"

namespace dsa::prefill_bench {

// The hash that compares the arms' outputs and caches without keeping them:
// equal bytes give equal hashes, and a changed bit, a changed length or
// words in another order change it (not a cryptographic hash: the arms are
// not adversaries). `h` chains calls; start at kHashSeed.
inline constexpr uint64_t kHashSeed = 0xcbf29ce484222325ull;
uint64_t HashBytes(const void* data, size_t bytes, uint64_t h);

// Every layer's latent cache and indexer K cache of `model`, hashed in
// layer order.
absl::StatusOr<uint64_t> CacheHash(
    const model::deepseek_v32::DeepseekV32Model& model);

// The median; 0 for none.
double Median(std::vector<double> v);

// Arms doing identical work (skip and main on 8k_c1) differ by up to a few
// percent from run to run on a shared machine; a smaller change is noise.
inline constexpr double kNoiseFloorPct = 2.0;

// One arm against the reference: the change of the medians in percent,
// [min, max] of the change within each round, and "faster" / "slower" when
// every round's change is beyond kNoiseFloorPct with the same sign, else
// "within noise" ("one run" with a single round).
struct Change {
  std::optional<double> pct;
  std::optional<double> min_pct, max_pct;
  std::string verdict;
};
// `arm` against `reference`, from their runs in round order.
Change CompareRuns(const std::vector<double>& arm,
                   const std::vector<double>& reference);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_COMPARE_H_
