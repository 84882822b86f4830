// The checks before a run (setup.h).
#include "bench/prefill/setup.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attention/dtypes/dtype.h"
#include "bench/prefill/arms.h"
#include "model/deepseek_v32/layer_plan.h"
#include "platform/status_macros.h"

namespace dsa::prefill_bench {
namespace {

using model::deepseek_v32::DeepseekV32Model;
using model::deepseek_v32::ModelConfig;
using model::deepseek_v32::RankSet;

std::string Gib(int64_t bytes) { return BytesForMessage(bytes); }

// MemAvailable from /proc/meminfo; 0 when unknown.
int64_t AvailableHostBytes() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  int64_t kb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %" SCNd64 " kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb * 1024;
}

// --tp and --indexer_tp: the ranks' options, and which ranks run here.
absl::Status SetUpTensorParallel(const Flags& flags, BenchSetup& s) {
  using model::deepseek_v32::IndexerParallel;
  model::deepseek_v32::TensorParallel& tp = s.options.tensor_parallel;
  tp.size = flags.tp;
  tp.indexer = flags.indexer_tp == "rows" ? IndexerParallel::kRows
                                          : IndexerParallel::kReplicated;
  DSA_RETURN_IF_ERROR(
      model::deepseek_v32::ValidateTensorParallel(s.config, tp));
  if (!tp.enabled()) return absl::OkStatus();
  const std::string split = absl::StrCat(
      "TP ", tp.size, ": ", s.config.proto().num_attention_heads() / tp.size,
      " heads per rank, the indexer ",
      model::deepseek_v32::IndexerParallelName(tp.indexer));
  const platform::Platform& exec = *s.platform.exec;
  if (!exec.runtime().has_collectives()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--tp=", tp.size, ": platform '", exec.id(),
                     "' has no collectives (its plugin predates API 1.3)"));
  }
  if (s.platform.info.executes_on_cpu()) {
    s.tp_note = absl::StrCat(split, "; every rank a thread on the host, the ",
                             "collectives over host memory");
    return absl::OkStatus();
  }
  DSA_ASSIGN_OR_RETURN(const platform::DeviceInfo devices, exec.ProbeDevices());
  if (devices.device_count >= tp.size) {
    s.tp_note = absl::StrCat(
        split, "; rank r on GPU r, a thread each, the ", "collectives through ",
        exec.kind() == platform::PlatformKind::kRocm ? "RCCL" : "NCCL");
    return absl::OkStatus();
  }
  s.ranks = RankSet::kRankZeroAlone;
  s.tp_note = absl::StrCat(
      split, "; rank 0's share alone on GPU 0 (", devices.device_count, " GPU",
      devices.device_count == 1 ? "" : "s", " here): the o_proj all-reduce",
      tp.indexer == IndexerParallel::kRows ? " and the top-k all-gather" : "",
      " are not in the figures, and the outputs are not the model's");
  return absl::OkStatus();
}

}  // namespace

MemoryBudget ProbeMemory(const ResolvedPlatform& platform) {
  MemoryBudget budget;
  budget.host_available_bytes = AvailableHostBytes();
  if (!platform.info.executes_on_cpu() && platform.exec.has_value()) {
    absl::StatusOr<platform::DeviceInfo> device = platform.exec->ProbeDevices();
    if (device.ok()) {
      budget.device_total_bytes =
          static_cast<int64_t>(device->total_memory_bytes);
    }
  }
  return budget;
}

absl::Status CheckMemory(absl::string_view model, const PlatformInfo& platform,
                         int arms, CheckedSize bytes_per_arm,
                         const MemoryBudget& budget) {
  const bool on_host = platform.executes_on_cpu();
  const CheckedSize need = bytes_per_arm * arms;
  const std::string arms_text =
      absl::StrCat(arms, arms == 1 ? " arm" : " arms");
  if (!need.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        model, " with ", arms_text,
        " needs more than 2^63 bytes (more than 64 bits count) of ",
        on_host ? "host" : absl::StrCat(platform.name, " device"),
        " memory for its weights, caches and workspace: use a smaller model, "
        "--num_blocks or --max_num_batched_tokens"));
  }
  const int64_t host = on_host ? need.value() : 0;
  const int64_t available = budget.host_available_bytes;
  if (available > 0 && host > available / 10 * 9) {
    return absl::ResourceExhaustedError(absl::StrCat(
        model, " with ", arms_text, " needs about ", Gib(host),
        " of host memory (",
        on_host ? "weights, caches and workspace" : "host side", "), ",
        Gib(available), " are available",
        on_host ? absl::StrCat("; on the CPU use a small preset (the default ",
                               kCpuDefaultModel, ") or fewer --arms")
                : ""));
  }
  const int64_t device_total = budget.device_total_bytes;
  if (!on_host && device_total > 0 && need.value() > device_total / 10 * 9) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the workloads need about ", Gib(need.value()), " of ", platform.name,
        " device memory for ", arms_text,
        "' weights, caches and workspace; the device has ", Gib(device_total),
        ": use fewer --arms, --num_blocks or --max_num_batched_tokens"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BenchSetup> MakeSetup(const Flags& flags,
                                     const platform::Registry& registry) {
  DSA_ASSIGN_OR_RETURN(ResolvedPlatform platform,
                       ResolvePlatform(registry, flags.platform, flags.arch));
  const bool on_cpu = platform.info.executes_on_cpu();
  const std::string model_name = !flags.model.empty() ? flags.model
                                 : on_cpu             ? kCpuDefaultModel
                                                      : kGpuDefaultModel;
  absl::StatusOr<model::deepseek_v32::LoadedModel> loaded =
      model::deepseek_v32::LoadModel(model_name);
  if (!loaded.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model: ", loaded.status().message()));
  }
  BenchSetup s{std::move(platform), loaded->config(),
               std::make_shared<const model::deepseek_v32::LoadedModel>(
                   *std::move(loaded))};
  const int64_t topk = s.config.index_topk();
  DSA_ASSIGN_OR_RETURN(
      s.workloads, MakeWorkloads(flags.workloads, topk, flags.prompts, on_cpu));
  // Which arms run which workload, from each arm's planner: a workload no
  // arm runs would be a row that measured nothing.
  for (const Workload& w : s.workloads) {
    std::vector<std::string>& reasons = s.not_run.emplace_back();
    for (const ArmSpec* arm : flags.arms) {
      model::deepseek_v32::EngineConfig engine;
      engine.num_speculative_tokens = flags.spec_tokens;
      DSA_ASSIGN_OR_RETURN(
          const model::deepseek_v32::LayerPlanner planner,
          model::deepseek_v32::LayerPlanner::Create(
              s.config, ArmCapabilities(*arm, s.platform.caps), engine));
      reasons.push_back(NotRunReason(*arm, planner, w));
    }
    if (std::none_of(reasons.begin(), reasons.end(),
                     [](const std::string& r) { return r.empty(); })) {
      std::vector<std::string> others;
      for (const ArmSpec& arm : kArms) {
        if (std::find(flags.arms.begin(), flags.arms.end(), &arm) ==
            flags.arms.end()) {
          others.push_back(arm.name);
        }
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "workload ", w.name, ": no arm of --arms=",
          absl::StrJoin(flags.arms, ",",
                        [](std::string* out, const ArmSpec* arm) {
                          out->append(arm->name);
                        }),
          " runs it, so it would measure nothing (", reasons.front(), "); add ",
          absl::StrJoin(others, " or "),
          " to --arms, or leave it out of --workloads"));
    }
  }
  s.step_tokens = flags.max_num_batched_tokens > 0
                      ? flags.max_num_batched_tokens
                      : ScaleToTopk(kSeedMaxNumBatchedTokens, topk);
  int64_t needed_blocks = 0;
  int64_t max_len = 0;
  for (const Workload& w : s.workloads) {
    if (w.prompt_len > s.config.max_position_embeddings()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workload ", w.name, ": prompts of ", w.prompt_len, " tokens exceed ",
          s.config.name(), "'s max_position_embeddings ",
          s.config.max_position_embeddings()));
    }
    DSA_ASSIGN_OR_RETURN(Schedule schedule,
                         MakeSchedule(w, s.step_tokens, flags.block_size));
    needed_blocks = std::max(needed_blocks, schedule.peak_blocks);
    max_len = std::max(max_len, w.prompt_len);
    s.schedules.push_back(std::move(schedule));
  }
  const int64_t num_blocks =
      flags.num_blocks > 0 ? flags.num_blocks : needed_blocks;
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    if (s.schedules[i].peak_blocks > num_blocks) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "workload ", s.workloads[i].name,
          " does not fit in the caches: it needs ", s.schedules[i].peak_blocks,
          " blocks of ", flags.block_size,
          " tokens at its peak, --num_blocks is ", num_blocks));
    }
  }
  if (num_blocks > std::numeric_limits<int>::max()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the workloads need ", num_blocks, " cache blocks"));
  }
  s.num_blocks = static_cast<int>(num_blocks);
  s.options.block_size = flags.block_size;
  s.options.num_blocks = s.num_blocks;
  s.options.max_model_len = max_len;
  s.options.max_num_batched_tokens = s.step_tokens;
  s.options.num_threads = flags.threads;
  s.options.fp8_latent_cache = flags.kv_cache_dtype == "fp8";
  s.options.step_graphs = flags.step_graphs;
  s.weights = !flags.weights.empty()          ? flags.weights
              : s.loaded->holds_fp8_weights() ? "fp8"
                                              : "bfloat16";
  s.options.weight_dtype = s.weights == "fp8" ? attention::DType::kFloat8E4m3fn
                                              : attention::DType::kBFloat16;
  // On a GPU the projections read bf16 activations, so that they run on the
  // vendor GEMM (cuBLASLt takes bf16 x); every arm alike, so their outputs
  // still compare to the bit.
  if (!on_cpu) s.options.activation_dtype = attention::DType::kBFloat16;
  DSA_RETURN_IF_ERROR(SetUpTensorParallel(flags, s));
  // Every GPU holds one rank of every arm; on the CPU every rank is in host
  // memory.
  const int ranks_in_memory =
      on_cpu && s.ranks == RankSet::kAllRanks ? flags.tp : 1;
  DSA_RETURN_IF_ERROR(
      CheckMemory(s.config.name(), s.platform.info,
                  static_cast<int>(flags.arms.size()) * ranks_in_memory,
                  DeepseekV32Model::DeviceBytes(s.config, s.options),
                  ProbeMemory(s.platform)));
  return s;
}

}  // namespace dsa::prefill_bench
