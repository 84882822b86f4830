// prefill_bench's command line: the Flags a run takes and one table of
// flags (name, value, help, how its value is read) that both the parser and
// --help read. A bad flag is an InvalidArgument of one line naming the flag
// and what it expects; the binary prints it and exits with status 2.
#ifndef DSA_BENCH_PREFILL_FLAGS_H_
#define DSA_BENCH_PREFILL_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bench/prefill/arms.h"

namespace dsa::prefill_bench {

// The preset when the step executes on the CPU: small enough that the whole
// default run takes seconds, with the seed's structure (an indexer on every
// layer, one MTP layer) and index_topk 64.
inline constexpr char kCpuDefaultModel[] = "tiny-glm-5.1";
// The seed's model, the default on a real GPU.
inline constexpr char kGpuDefaultModel[] = "glm-5.1";

struct Flags {
  std::string model;              // empty: kCpuDefaultModel / kGpuDefaultModel
  std::string platform = "auto";  // one of kPlatformChoices
  std::string arch;               // empty: gfx950 for (emulated-)rocm, else the
                                  // device's or the platform's default
  std::vector<std::string> workloads;            // empty: all four
  std::vector<const ArmSpec*> arms = AllArms();  // in the order given
  int runs = 2;
  int spec_tokens = 0;                 // MTP draft tokens (GLM-5.2: 3)
  int prompts = 0;                     // 0: each workload's own count
  int64_t max_num_batched_tokens = 0;  // 0: 8192 scaled to index_topk
  int block_size = 64;
  int num_blocks = 0;  // 0: what the largest workload needs
  // The MLA latent cache: "bfloat16", or "fp8" (the fp8_ds_mla layout the
  // seed serves with, vLLM's --kv-cache-dtype fp8).
  std::string kv_cache_dtype = "bfloat16";
  // Tensor-parallel ranks (vLLM's split of a DeepseekV32 layer): each holds
  // num_attention_heads / tp heads. With tp GPUs, a thread per GPU and the
  // collectives through NCCL / RCCL; with fewer, rank 0's share alone.
  int tp = 1;
  // The indexer under tensor parallelism: "replicated" (every rank scores
  // every row, vLLM) or "rows" (each rank its block, the top-k gathered).
  std::string indexer_tp = "replicated";
  // The projections' weights: "bfloat16", "fp8" (W8A8 with 128 x 128 weight
  // block scales, RuntimeOptions::weight_dtype), or empty: fp8 for a
  // checkpoint that stores fp8 matrices, else bfloat16.
  std::string weights;
  int threads = 0;  // 0: all cores
  uint64_t seed = 1;
  std::string json;    // write every figure here
  std::string plot;    // draw the medians here (PNG, SVG...)
  std::string commit;  // empty: asked of git
  // After each workload's runs, one more step per arm with every op timed
  // (StepOptions::time_ops): the share of the indexer's scoring, per op.
  bool op_times = false;
  // Each layer's ops up to the scoring and the attention as one graph launch
  // where the platform has graphs (RuntimeOptions::step_graphs).
  bool step_graphs = true;
  // How --op_times times an op (StepOptions::op_clock): "device" (between
  // synchronisations) or "host" (the op's call alone: the host's share).
  std::string op_clock = "device";
  bool help = false;
};

// One flag: --name=value. `help` is wrapped to fit beside the names; --help
// indents its lines.
struct FlagSpec {
  const char* name;
  const char* value;  // what --help shows after '='
  std::string help;
  // Reads `value` into `flags`; InvalidArgument naming --`flag` on a bad one.
  absl::Status (*set)(absl::string_view flag, absl::string_view value,
                      Flags& flags);
};

// Every flag but --help, in the order --help lists them and values are read
// (so of two bad values the first listed is the one reported).
absl::Span<const FlagSpec> FlagTable();

std::string Usage();

// --help or -h anywhere wins over everything else.
absl::StatusOr<Flags> ParseFlags(absl::Span<const std::string> args);

}  // namespace dsa::prefill_bench

#endif  // DSA_BENCH_PREFILL_FLAGS_H_
