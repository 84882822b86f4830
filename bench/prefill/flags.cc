// The flag table, its parser and --help (flags.h).
//
// A small parser over the table rather than Abseil's flags: Debian's Abseil
// (20220623) offers only absl::ParseCommandLine over process-global
// ABSL_FLAGs, which on a bad flag prints its own lines and exits with status
// 1, takes the last of a repeated flag, and reads yes/no/t/f as booleans;
// this bench's contract is one line on stderr and status 2, a repeated flag
// refused, and a parser a test can call again and again.
#include "bench/prefill/flags.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "bench/prefill/platform_choice.h"
#include "bench/prefill/workloads.h"
#include "model/deepseek_v32/forward_context.h"
#include "platform/plugin_file.h"
#include "platform/status_macros.h"

namespace dsa::prefill_bench {
namespace {

// Where --help starts a flag's text: past "  --max_num_batched_tokens=N ".
constexpr size_t kHelpColumn = 29;

absl::Status UsageError(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

// A user's value as a message shows it: at most 80 characters, then "...
// (N bytes)"; control characters escaped (platform/plugin_file.h).
std::string Echo(absl::string_view value) {
  return platform::EchoForMessage(std::string_view(value.data(), value.size()));
}

absl::StatusOr<int64_t> ParseInt(absl::string_view flag,
                                 absl::string_view value, int64_t lo,
                                 int64_t hi) {
  int64_t n = 0;
  const bool digits = !value.empty() &&
                      std::all_of(value.begin(), value.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || !absl::SimpleAtoi(value, &n) || n < lo || n > hi) {
    return UsageError(absl::StrCat("--", flag, "=", Echo(value),
                                   ": expected an integer in [", lo, ", ", hi,
                                   "]"));
  }
  return n;
}

// A comma-separated list of names, each one of `known` and none twice: the
// one reading of --workloads and --arms. An empty list or an empty name
// ("--arms=,", "--workloads=a,,b") is refused, not read as the default.
absl::StatusOr<std::vector<std::string>> ParseNameList(
    absl::string_view flag, absl::string_view value, absl::string_view what,
    const std::vector<std::string>& known) {
  const std::vector<std::string> names = absl::StrSplit(value, ',');
  const std::string list = absl::StrJoin(known, ", ");
  if (std::all_of(names.begin(), names.end(),
                  [](const std::string& n) { return n.empty(); })) {
    return UsageError(absl::StrCat("--", flag, "=", Echo(value),
                                   ": name at least one ", what, " (", list,
                                   ")"));
  }
  for (const std::string& name : names) {
    if (name.empty()) {
      return UsageError(absl::StrCat("--", flag, "=", Echo(value),
                                     ": an empty ", what, " name"));
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return UsageError(absl::StrCat("--", flag, ": unknown ", what, " \"",
                                     Echo(name), "\"; expected ", list));
    }
  }
  if (std::set<std::string>(names.begin(), names.end()).size() !=
      names.size()) {
    return UsageError(absl::StrCat("--", flag, ": a",
                                   what == "arm" ? "n " : " ", what,
                                   " is named twice"));
  }
  return names;
}

template <auto kField>
absl::Status SetText(absl::string_view, absl::string_view value, Flags& flags) {
  flags.*kField = std::string(value);
  return absl::OkStatus();
}

template <auto kField>
absl::Status SetBool(absl::string_view flag, absl::string_view value,
                     Flags& flags) {
  if (value != "true" && value != "false") {
    return UsageError(
        absl::StrCat("--", flag, "=", Echo(value), ": expected true or false"));
  }
  flags.*kField = value == "true";
  return absl::OkStatus();
}

template <auto kField, int64_t kLo, int64_t kHi>
absl::Status SetInt(absl::string_view flag, absl::string_view value,
                    Flags& flags) {
  DSA_ASSIGN_OR_RETURN(const int64_t n, ParseInt(flag, value, kLo, kHi));
  flags.*kField =
      static_cast<std::remove_reference_t<decltype(flags.*kField)>>(n);
  return absl::OkStatus();
}

absl::Status SetPlatform(absl::string_view flag, absl::string_view value,
                         Flags& flags) {
  for (const char* choice : kPlatformChoices) {
    if (value == choice) {
      flags.platform = std::string(value);
      return absl::OkStatus();
    }
  }
  const absl::Span<const char* const> choices(kPlatformChoices);
  return UsageError(
      absl::StrCat("--", flag, "=", Echo(value), ": expected ",
                   absl::StrJoin(choices.first(choices.size() - 1), ", "),
                   " or ", choices.back()));
}

// An architecture's name as the registry spells them (gfx942, sm_90,
// x86_64), checked here so that no later message echoes a long one.
absl::Status SetArch(absl::string_view flag, absl::string_view value,
                     Flags& flags) {
  constexpr size_t kMaxArchChars = 32;
  const bool ok =
      value.size() <= kMaxArchChars &&
      std::all_of(value.begin(), value.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      });
  if (!ok) {
    return UsageError(absl::StrCat("--", flag, "=", Echo(value),
                                   ": expected an architecture name such as "
                                   "gfx942 or sm_90"));
  }
  flags.arch = std::string(value);
  return absl::OkStatus();
}

absl::Status SetWorkloads(absl::string_view flag, absl::string_view value,
                          Flags& flags) {
  DSA_ASSIGN_OR_RETURN(flags.workloads,
                       ParseNameList(flag, value, "workload", WorkloadNames()));
  return absl::OkStatus();
}

absl::Status SetArms(absl::string_view flag, absl::string_view value,
                     Flags& flags) {
  std::vector<std::string> known;
  for (const ArmSpec* arm : AllArms()) known.push_back(arm->name);
  DSA_ASSIGN_OR_RETURN(const std::vector<std::string> names,
                       ParseNameList(flag, value, "arm", known));
  flags.arms.clear();
  for (const std::string& name : names) flags.arms.push_back(FindArm(name));
  return absl::OkStatus();
}

absl::Status SetKvCacheDtype(absl::string_view flag, absl::string_view value,
                             Flags& flags) {
  if (value != "bfloat16" && value != "fp8") {
    return UsageError(absl::StrCat("--", flag, "=", Echo(value),
                                   ": expected bfloat16 or fp8"));
  }
  flags.kv_cache_dtype = std::string(value);
  return absl::OkStatus();
}

absl::Status SetIndexerTp(absl::string_view flag, absl::string_view value,
                          Flags& flags) {
  if (value != "replicated" && value != "rows") {
    return UsageError(absl::StrCat("--", flag, "=", Echo(value),
                                   ": expected replicated or rows"));
  }
  flags.indexer_tp = std::string(value);
  return absl::OkStatus();
}

absl::Status SetWeights(absl::string_view flag, absl::string_view value,
                        Flags& flags) {
  if (value != "bfloat16" && value != "fp8") {
    return UsageError(absl::StrCat("--", flag, "=", Echo(value),
                                   ": expected bfloat16 or fp8"));
  }
  flags.weights = std::string(value);
  return absl::OkStatus();
}

absl::Status SetOpClock(absl::string_view flag, absl::string_view value,
                        Flags& flags) {
  if (value != "device" && value != "host") {
    return UsageError(absl::StrCat("--", flag, "=", Echo(value),
                                   ": expected device or host"));
  }
  flags.op_clock = std::string(value);
  return absl::OkStatus();
}

std::vector<FlagSpec> MakeFlagTable() {
  constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
  using model::deepseek_v32::kMaxSpeculativeTokens;
  return {
      {"model", "NAME|PATH",
       absl::StrCat("preset (deepseek-v3.2, glm-5.1, glm-5.2,\n"
                    "tiny-v3.2, tiny-glm-5.1, tiny-glm-5.2) or a\n"
                    ".textproto (default: ",
                    kCpuDefaultModel, " on the CPU,\n", kGpuDefaultModel,
                    " on a GPU)"),
       SetText<&Flags::model>},
      {"platform", "P",
       "auto, cpu, rocm, cuda or emulated-rocm (default\n"
       "auto: a GPU platform with a device, else\n"
       "emulated-rocm = ROCm's capabilities executing the\n"
       "CPU kernels)",
       SetPlatform},
      {"arch", "ARCH",
       absl::StrCat("e.g. gfx942, gfx950, sm_90 (default ",
                    kEmulatedDefaultArch,
                    " for\nemulated-rocm, else the device's)"),
       SetArch},
      {"workloads", "W[,W...]",
       "1k_c1, 1900_c1, 1k_c32, 8k_c1 (default all); the\n"
       "lengths are the seed's at index_topk 2048, scaled\n"
       "to the preset's (tiny presets: 32, 59, 32, 256)",
       SetWorkloads},
      {"arms", "A[,A...]", "main, skip, no_indexer (default all three)",
       SetArms},
      {"runs", "N", "measured runs per arm, ABBA order (default 2)",
       SetInt<&Flags::runs, 1, 1000>},
      {"spec_tokens", "N",
       "MTP speculative tokens of the engine (default 0;\n"
       "the seed ran GLM-5.2 with 3)",
       SetInt<&Flags::spec_tokens, 0, kMaxSpeculativeTokens>},
      {"prompts", "N",
       "prompts per workload (default the seed's 40, 40,\n"
       "32, 16 on a GPU; 16, 16, 32, 3 on the CPU)",
       SetInt<&Flags::prompts, 1, 100000>},
      {"max_num_batched_tokens", "N",
       "tokens per step (default 8192 scaled like the\n"
       "lengths: 256 on the tiny presets)",
       SetInt<&Flags::max_num_batched_tokens, 1, 1 << 24>},
      {"block_size", "N", "cache block size in tokens (default 64)",
       SetInt<&Flags::block_size, 1, 4096>},
      {"num_blocks", "N",
       "cache blocks per layer (default: what the\n"
       "largest workload needs at its peak)",
       SetInt<&Flags::num_blocks, 1, 1 << 24>},
      {"kv_cache_dtype", "D",
       "MLA latent cache: bfloat16 (default) or fp8,\n"
       "the fp8_ds_mla layout (vLLM's --kv-cache-dtype\n"
       "fp8, as the seed served)",
       SetKvCacheDtype},
      {"tp", "N",
       "tensor-parallel ranks, each num_attention_heads\n"
       "/ N heads (default 1); with N GPUs a thread per\n"
       "GPU and the all-reduce through NCCL / RCCL, with\n"
       "fewer rank 0's share alone (no all-reduce)",
       SetInt<&Flags::tp, 1, 64>},
      {"indexer_tp", "MODE",
       "the indexer under --tp: replicated (default,\n"
       "vLLM's: every rank scores every row) or rows\n"
       "(each rank its rows, the top-k all-gathered)",
       SetIndexerTp},
      {"weights", "W",
       "the projections' weights: bfloat16 or fp8 (W8A8\n"
       "with 128x128 weight block scales and per-token\n"
       "1x128 activation scales, as the seed's FP8\n"
       "checkpoint; a bf16 model is quantised at load).\n"
       "Default: fp8 for a checkpoint stored in fp8,\n"
       "else bfloat16",
       SetWeights},
      {"threads", "N", "host threads (default 0: all cores)",
       SetInt<&Flags::threads, 0, 1024>},
      {"seed", "N", "weights and inputs (default 1)",
       SetInt<&Flags::seed, 0, kMaxInt64>},
      {"json", "PATH", "write every figure as one JSON object",
       SetText<&Flags::json>},
      {"plot", "PATH",
       "draw the medians and run-to-run spread (PNG,\n"
       "SVG, PDF; needs Debian's python3-matplotlib)",
       SetText<&Flags::plot>},
      {"commit", "REV", "recorded in the JSON (default: git describe)",
       SetText<&Flags::commit>},
      {"op_times", "BOOL",
       "after each workload, one more step per arm with\n"
       "every op timed between synchronisations: the\n"
       "indexer's scoring's share of a step, per op\n"
       "(default false)",
       SetBool<&Flags::op_times>},
      {"op_clock", "device|host",
       "how --op_times times an op: device (between\n"
       "synchronisations, default) or host (the op's\n"
       "call alone, nothing synchronised: the host's\n"
       "share of each op, with the calls per op)",
       SetOpClock},
      {"step_graphs", "BOOL",
       "each layer's ops up to the indexer's scoring and\n"
       "the attention launched as one graph from their\n"
       "third step of a shape on, where the platform has\n"
       "graphs (CUDA; default true)",
       SetBool<&Flags::step_graphs>},
  };
}

// "  --name=VALUE", padded to kHelpColumn, then the help, each of its lines
// indented to that column.
std::string UsageLine(absl::string_view flag, absl::string_view help) {
  std::string line = absl::StrCat("  --", flag);
  line.append(line.size() < kHelpColumn ? kHelpColumn - line.size() : 1, ' ');
  const std::string indent = absl::StrCat("\n", std::string(kHelpColumn, ' '));
  return absl::StrCat(line, absl::StrReplaceAll(help, {{"\n", indent}}), "\n");
}

}  // namespace

absl::Span<const FlagSpec> FlagTable() {
  static const std::vector<FlagSpec>* const kTable =
      new std::vector<FlagSpec>(MakeFlagTable());
  return *kTable;
}

std::string Usage() {
  std::string out = R"(usage: prefill_bench [flags]

Replays the seed's serving measurements of the short-prefill indexer skip on a
whole attention stack: each workload's prompts are prefilled (one output
token, so TTFT is the prefill) by three arms -- main (the indexer always
scores), skip (the decision as registered) and no_indexer (no indexer work:
a bound, not a valid model) -- taking turns step by step in ABBA order after
a warm-up. TTFT is reported on the wall clock and on the process's CPU-time
clock, which other load on a shared machine does not stretch.

)";
  for (const FlagSpec& spec : FlagTable()) {
    absl::StrAppend(
        &out, UsageLine(absl::StrCat(spec.name, "=", spec.value), spec.help));
  }
  absl::StrAppend(&out, UsageLine("help", "this text"), R"(
Exit status: 0 on success; 2 for bad flags, an unknown preset or platform, a
GPU platform without a device or kernels, a workload that does not fit in the
caches, in host or in device memory, or that no arm runs, a --json or --plot
that is not a regular file (one line on stderr, nothing written at --json); 1
when a run fails or its results cannot be written (stdout included).
)");
  return out;
}

absl::StatusOr<Flags> ParseFlags(absl::Span<const std::string> args) {
  const absl::Span<const FlagSpec> table = FlagTable();
  // Values by flag, read in the table's order once every argument is known
  // to be well formed.
  std::map<const FlagSpec*, std::string> values;
  Flags flags;
  for (const std::string& arg : args) {
    if (arg == "-h" || arg == "--help") {
      flags.help = true;
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      return UsageError(
          absl::StrCat("unexpected argument \"", Echo(arg),
                       "\"; flags are --name=value (see --help)"));
    }
    const size_t eq = arg.find('=');
    const std::string name =
        arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const auto spec =
        std::find_if(table.begin(), table.end(),
                     [&name](const FlagSpec& s) { return name == s.name; });
    if (spec == table.end()) {
      return UsageError(
          absl::StrCat("unknown flag --", Echo(name), " (see --help)"));
    }
    if (eq == std::string::npos || eq + 1 == arg.size()) {
      return UsageError(
          absl::StrCat("--", name, " needs a value: --", name, "=..."));
    }
    if (!values.emplace(&*spec, arg.substr(eq + 1)).second) {
      return UsageError(absl::StrCat("--", name, " given twice"));
    }
  }
  if (flags.help) return flags;
  bool op_clock_given = false;
  for (const FlagSpec& spec : table) {
    const auto it = values.find(&spec);
    if (it == values.end()) continue;
    DSA_RETURN_IF_ERROR(spec.set(spec.name, it->second, flags));
    op_clock_given |= absl::string_view(spec.name) == "op_clock";
  }
  if (op_clock_given && !flags.op_times) {
    return UsageError(
        "--op_clock says how --op_times times the ops: give --op_times=true "
        "too");
  }
  return flags;
}

}  // namespace dsa::prefill_bench
