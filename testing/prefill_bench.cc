#include "testing/prefill_bench.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "attention/dtypes/dtype.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/forward_context.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/model_config.h"
#include "model/deepseek_v32/model_loader.h"
#include "model/deepseek_v32/model_runner.h"
#include "platform/status_macros.h"

namespace dsa::prefill_bench {
namespace {

using model::deepseek_v32::AttentionKernels;
using model::deepseek_v32::DeepseekV32Model;
using model::deepseek_v32::LayerPlan;
using model::deepseek_v32::LayerPlanner;
using model::deepseek_v32::ModelConfig;
using model::deepseek_v32::OpTimes;
using model::deepseek_v32::PrefillBranch;
using model::deepseek_v32::RuntimeOptions;
using model::deepseek_v32::StepOptions;
using model::deepseek_v32::StepOutput;
using model::deepseek_v32::StepRequest;

constexpr char kMain[] = "main";
constexpr char kSkip[] = "skip";
constexpr char kNoIndexer[] = "no_indexer";
constexpr char kEmulatedRocm[] = "emulated-rocm";
constexpr char kEmulatedDefaultArch[] = "gfx950";  // the seed's MI355X

absl::Status UsageError(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<int64_t> ParseInt(absl::string_view flag,
                                 absl::string_view value, int64_t lo,
                                 int64_t hi) {
  int64_t n = 0;
  const bool digits = !value.empty() &&
                      std::all_of(value.begin(), value.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || !absl::SimpleAtoi(value, &n) || n < lo || n > hi) {
    return UsageError(absl::StrCat("--", flag, "=", value,
                                   ": expected an integer in [", lo, ", ", hi,
                                   "]"));
  }
  return n;
}

std::vector<std::string> SplitList(absl::string_view value) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    if (!part.empty()) out.emplace_back(part);
  }
  return out;
}

// --- The seed's workloads.

struct SeedWorkload {
  const char* name;
  int64_t prompt_len;
  int prompts;  // the seed's --num-prompts, except 1k_c32 (see the issue)
  // On the CPU: fewer sequential prompts, so that the whole default run
  // takes well under a minute on 2 cores; a run's median is still over
  // several prompts.
  int cpu_prompts;
  int concurrency;
};
constexpr SeedWorkload kSeedWorkloads[] = {
    {"1k_c1", 1024, 40, 16, 1},
    {"1900_c1", 1900, 40, 16, 1},
    {"1k_c32", 1024, 32, 32, 32},
    {"8k_c1", 8192, 16, 3, 1},
};

int64_t ScaleToTopk(int64_t seed_len, int64_t index_topk) {
  return std::max<int64_t>(1, std::llround(static_cast<double>(seed_len) *
                                           index_topk / kSeedIndexTopk));
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

// Four lanes of 64-bit words, each an FNV-style xor-multiply with a
// xorshift (so a bit also reaches the lower bits), folded at the end; the
// bytes past the last 32 go in one at a time. The lanes' multiplies overlap,
// so it runs at about the memory's speed (50 MB in ~11 ms on this project's
// 2-core machine, against ~69 ms for byte-wise FNV-1a): a GLM-5.1 run
// hashes some 70 GB of hidden states.
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

namespace {

// --- Memory: checked before anything is allocated, so that a preset too
// large for the machine is one clear line, not the kernel's OOM killer.

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

std::string Gib(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1 << 30));
}

// --- Platforms.

struct ResolvedPlatform {
  PlatformInfo info;
  platform::PlatformCapabilities caps;     // what the decision reads
  std::optional<platform::Platform> exec;  // kernels and memory
};

bool HasDevice(const platform::Registry& registry, const std::string& id) {
  if (!registry.HasPlatform(id)) return false;
  absl::StatusOr<platform::Platform> p = registry.GetPlatform(id);
  if (!p.ok()) return false;
  absl::StatusOr<platform::DeviceInfo> devices = p->ProbeDevices();
  return devices.ok() && devices->device_count > 0;
}

absl::StatusOr<ResolvedPlatform> Emulated(const platform::Registry& registry,
                                          const std::string& arch,
                                          std::string note) {
  ResolvedPlatform r;
  absl::StatusOr<platform::Platform> rocm = registry.GetPlatform("rocm");
  if (!rocm.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--platform=emulated-rocm: the ROCm platform is not registered in "
        "this binary: ",
        rocm.status().message()));
  }
  absl::StatusOr<platform::PlatformCapabilities> caps =
      rocm->CapabilitiesForArch(arch.empty() ? kEmulatedDefaultArch : arch);
  if (!caps.ok()) {
    return UsageError(absl::StrCat("--arch: ", caps.status().message()));
  }
  DSA_ASSIGN_OR_RETURN(platform::Platform cpu, registry.GetPlatform("cpu"));
  r.caps = *caps;
  r.exec = cpu;
  r.info.name = kEmulatedRocm;
  r.info.arch = platform::DeviceArchName(caps->arch);
  r.info.emulated = true;
  r.info.executes_on = "cpu";
  r.info.is_cuda_alike = caps->is_cuda_alike;
  r.info.note = std::move(note);
  return r;
}

absl::StatusOr<ResolvedPlatform> RealPlatform(
    const platform::Registry& registry, const std::string& id,
    const std::string& arch) {
  absl::StatusOr<platform::Platform> p = registry.GetPlatform(id);
  if (!p.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--platform=", id, ": ", p.status().message()));
  }
  if (p->is_accelerator() && !HasDevice(registry, id)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--platform=", id, ": no ", id,
        " device on this machine; use --platform=emulated-rocm (ROCm's "
        "decision on the CPU kernels) or --platform=auto"));
  }
  absl::StatusOr<AttentionKernels> kernels =
      AttentionKernels::Load(registry, id);
  if (!kernels.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--platform=", id, ": this binary has no attention kernels for ", id,
        " (", kernels.status().message(),
        "); the GPU path is not built yet, use --platform=emulated-rocm"));
  }
  absl::StatusOr<platform::PlatformCapabilities> caps =
      arch.empty() ? p->Capabilities() : p->CapabilitiesForArch(arch);
  if (!caps.ok()) {
    return UsageError(absl::StrCat("--arch: ", caps.status().message()));
  }
  ResolvedPlatform r;
  r.caps = *caps;
  r.exec = *p;
  r.info.name = id;
  r.info.arch = platform::DeviceArchName(caps->arch);
  r.info.emulated = false;
  r.info.executes_on = id;
  r.info.is_cuda_alike = caps->is_cuda_alike;
  return r;
}

absl::StatusOr<ResolvedPlatform> ResolvePlatform(
    const platform::Registry& registry, const Flags& flags) {
  if (flags.platform == kEmulatedRocm) {
    return Emulated(registry, flags.arch, "");
  }
  if (flags.platform != "auto") {
    DSA_ASSIGN_OR_RETURN(ResolvedPlatform r,
                         RealPlatform(registry, flags.platform, flags.arch));
    if (!r.caps.is_cuda_alike) {
      r.info.note =
          absl::StrCat(r.info.name,
                       " is not CUDA-alike: the skip never applies there, so "
                       "the skip arm does main's work (an A/A comparison)");
    }
    return r;
  }
  // auto: a real GPU platform when a device is present and this binary has
  // its kernels; else ROCm's decision on the CPU kernels.
  std::vector<std::string> without_kernels;
  for (const std::string id : {"rocm", "cuda"}) {
    if (!HasDevice(registry, id)) continue;
    if (!AttentionKernels::Load(registry, id).ok()) {
      without_kernels.push_back(id);
      continue;
    }
    return RealPlatform(registry, id, flags.arch);
  }
  std::string note = "auto: no GPU device";
  if (!without_kernels.empty()) {
    note = absl::StrCat("auto: a ", absl::StrJoin(without_kernels, "/"),
                        " device is present but this binary has no attention "
                        "kernels for it yet");
  }
  return Emulated(registry, flags.arch, std::move(note));
}

// --- One arm's model and one run of a workload on it.

struct Arm {
  std::string name;
  std::unique_ptr<DeepseekV32Model> model;
};

struct RunFigures {
  double median_ttft_ms = 0;
  double median_ttft_cpu_ms = 0;
  int64_t scored = 0;
  int64_t launches = 0;      // attention ops
  int64_t all_launches = 0;  // every op
  uint64_t output_hash = kHashSeed;
  // Per step (StepOutput): the host's issue time and the device's tail.
  std::vector<double> host_issue_ms, device_tail_ms, prepare_ms, read_back_ms;
};

// CPU time of every thread of this process: the host work a step costs,
// whatever share of the cores the machine's other load leaves it.
double ProcessCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// One arm's run of a workload's schedule, a step at a time, so that the
// arms' steps can be interleaved. TTFTs are measured on a clock of this run
// alone, which advances only while its own steps and releases run (hashing
// the outputs is not timed): interleaving the arms then exposes them to the
// same machine load without one arm's time counting in another's TTFT. The
// step's read-back of every hidden state is not timed either: it is there
// for the to-the-bit comparison of the arms, where an engine reads back only
// the sampled tokens (StepOutput::read_back_ms, reported on its own).
class ScheduleRun {
 public:
  ScheduleRun(DeepseekV32Model& model, const Schedule& schedule,
              const std::vector<float>& input, int64_t request_id_base)
      : model_(model),
        schedule_(schedule),
        input_(input),
        id_base_(request_id_base),
        hidden_(model.planner().config().proto().hidden_size()),
        boundary_ms_(schedule.steps.size() + 1, 0.0),
        boundary_cpu_ms_(schedule.steps.size() + 1, 0.0) {}
  // A failed or partial (warm-up) run leaves no prompt in the cache.
  ~ScheduleRun() { (void)ReleaseStarted(); }
  ScheduleRun(const ScheduleRun&) = delete;
  ScheduleRun& operator=(const ScheduleRun&) = delete;

  // Runs step k; steps run in order.
  absl::Status Step(int k) {
    using Clock = std::chrono::steady_clock;
    if (k != steps_done_) {
      return absl::InternalError(absl::StrCat("step ", k, " out of order"));
    }
    const ScheduledStep& step = schedule_.steps[k];
    std::vector<StepRequest> requests;
    for (const ScheduledPrompt& p : step.prompts) {
      requests.push_back({id_base_ + p.prompt, p.context, p.new_tokens});
    }
    const absl::Span<const float> x(input_.data(), step.tokens * hidden_);
    const double cpu0 = ProcessCpuMs();
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<StepOutput> out = model_.Step({}, requests, x);
    absl::Status released;
    if (out.ok()) {
      for (const ScheduledPrompt& p : step.prompts) started_.insert(p.prompt);
      for (const ScheduledPrompt& p : step.prompts) {
        if (!p.finishes) continue;
        absl::Status r = model_.Release(id_base_ + p.prompt);
        started_.erase(p.prompt);
        if (!r.ok() && released.ok()) released = r;
      }
    }
    const Clock::time_point t1 = Clock::now();
    const double cpu1 = ProcessCpuMs();
    DSA_RETURN_IF_ERROR(out.status());
    DSA_RETURN_IF_ERROR(released);
    const double read_back_ms = out->read_back_ms;
    clock_ms_ += std::chrono::duration<double, std::milli>(t1 - t0).count() -
                 read_back_ms;
    boundary_ms_[k + 1] = clock_ms_;
    cpu_clock_ms_ += std::max(0.0, cpu1 - cpu0 - read_back_ms);
    boundary_cpu_ms_[k + 1] = cpu_clock_ms_;
    ++steps_done_;
    figures_.scored += out->op_calls.indexer_topk;
    figures_.launches += out->op_calls.attention_ops();
    figures_.all_launches += out->op_calls.total();
    figures_.host_issue_ms.push_back(out->host_issue_ms);
    figures_.device_tail_ms.push_back(out->device_tail_ms);
    figures_.prepare_ms.push_back(out->prepare_ms);
    figures_.read_back_ms.push_back(out->read_back_ms);
    figures_.output_hash =
        HashBytes(out->hidden.data(), out->hidden.size() * sizeof(float),
                  figures_.output_hash);
    figures_.output_hash =
        HashBytes(out->mtp_hidden.data(),
                  out->mtp_hidden.size() * sizeof(float), figures_.output_hash);
    return absl::OkStatus();
  }

  // Releases what is left and returns the figures of the steps run: the
  // median TTFT over the prompts they finished.
  absl::StatusOr<RunFigures> Finish() {
    DSA_RETURN_IF_ERROR(ReleaseStarted());
    std::vector<double> ttft, ttft_cpu;
    for (size_t i = 0; i < schedule_.finish_step.size(); ++i) {
      const int end = schedule_.finish_step[i] + 1;
      const int begin = schedule_.arrival_boundary[i];
      if (end > steps_done_) continue;
      ttft.push_back(boundary_ms_[end] - boundary_ms_[begin]);
      ttft_cpu.push_back(boundary_cpu_ms_[end] - boundary_cpu_ms_[begin]);
    }
    RunFigures figures = figures_;
    figures.median_ttft_ms = Median(ttft);
    figures.median_ttft_cpu_ms = Median(ttft_cpu);
    return figures;
  }

 private:
  absl::Status ReleaseStarted() {
    absl::Status status;
    for (int prompt : started_) {
      absl::Status r = model_.Release(id_base_ + prompt);
      if (!r.ok() && status.ok()) status = r;
    }
    started_.clear();
    return status;
  }

  DeepseekV32Model& model_;
  const Schedule& schedule_;
  const std::vector<float>& input_;
  const int64_t id_base_;
  const int64_t hidden_;
  std::vector<double> boundary_ms_;
  std::vector<double> boundary_cpu_ms_;
  std::set<int> started_;
  int steps_done_ = 0;
  double clock_ms_ = 0.0;
  double cpu_clock_ms_ = 0.0;
  RunFigures figures_;
};

// The schedule's first step on `model` with every op timed
// (StepOptions::time_ops); its requests are released after it.
absl::StatusOr<OpTimes> ProfileFirstStep(DeepseekV32Model& model,
                                         const Schedule& schedule,
                                         const std::vector<float>& input,
                                         int64_t request_id_base) {
  const ScheduledStep& step = schedule.steps.front();
  std::vector<StepRequest> requests;
  for (const ScheduledPrompt& p : step.prompts) {
    requests.push_back({request_id_base + p.prompt, p.context, p.new_tokens});
  }
  const int64_t hidden = model.planner().config().proto().hidden_size();
  StepOptions options;
  options.time_ops = true;
  options.read_hidden = false;
  absl::StatusOr<StepOutput> out = model.Step(
      {}, requests, absl::MakeConstSpan(input.data(), step.tokens * hidden),
      options);
  absl::Status released;
  for (const ScheduledPrompt& p : step.prompts) {
    absl::Status r = model.Release(request_id_base + p.prompt);
    if (!r.ok() && released.ok() && out.ok()) released = r;
  }
  DSA_RETURN_IF_ERROR(out.status());
  DSA_RETURN_IF_ERROR(released);
  return out->op_ms;
}

absl::StatusOr<uint64_t> CacheHash(const DeepseekV32Model& model) {
  uint64_t h = kHashSeed;
  for (int l = 0; l < model.planner().config().num_layers(); ++l) {
    DSA_ASSIGN_OR_RETURN(std::vector<uint8_t> latent, model.ReadLatentCache(l));
    DSA_ASSIGN_OR_RETURN(std::vector<uint8_t> k, model.ReadIndexerKCache(l));
    h = HashBytes(latent.data(), latent.size(), h);
    h = HashBytes(k.data(), k.size(), h);
  }
  return h;
}

// Why no_indexer cannot run `workload`, or empty when it can: without an
// indexer only prefills on the dense branch have what their attention reads.
std::string NoIndexerReason(const LayerPlanner& planner,
                            const Workload& workload) {
  absl::StatusOr<model::deepseek_v32::ForwardPlan> plan =
      planner.PlanForward({}, {{0, workload.prompt_len}});
  if (!plan.ok()) return std::string(plan.status().message());
  for (const LayerPlan& layer : plan->layers) {
    if (layer.prefill_branch != PrefillBranch::kDenseMha) {
      return absl::StrCat("prompts of ", workload.prompt_len,
                          " tokens > index_topk ",
                          planner.config().index_topk(),
                          " take the sparse path, which reads the indexer's "
                          "top-k");
    }
  }
  return "";
}

std::string FormatMs(double ms) {
  if (ms >= 100) return absl::StrFormat("%.1f", ms);
  if (ms >= 10) return absl::StrFormat("%.2f", ms);
  return absl::StrFormat("%.3f", ms);
}

std::string SignedPct(double pct) { return absl::StrFormat("%+.1f%%", pct); }

std::string ChangeText(const Change& c) {
  if (!c.pct) return "";
  std::string text = SignedPct(*c.pct);
  if (c.min_pct) {
    absl::StrAppend(&text, " [", absl::StrFormat("%+.1f", *c.min_pct), ", ",
                    absl::StrFormat("%+.1f", *c.max_pct), "] ", c.verdict);
  }
  return text;
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}
std::string JsonNumber(const std::optional<double>& v) {
  return v ? JsonNumber(*v) : "null";
}
std::string JsonBool(const std::optional<bool>& v) {
  if (!v) return "null";
  return *v ? "true" : "false";
}

std::string JsonChange(const Change& c) {
  return absl::StrCat(
      "{\"pct\": ", JsonNumber(c.pct), ", \"range_pct\": ",
      c.min_pct ? absl::StrCat("[", JsonNumber(*c.min_pct), ", ",
                               JsonNumber(*c.max_pct), "]")
                : "null",
      ", \"verdict\": ", c.verdict.empty() ? "null" : JsonString(c.verdict),
      "}");
}

std::string PadRight(absl::string_view s, size_t width) {
  std::string out(s);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

}  // namespace

std::string Usage() {
  return absl::StrCat(R"(usage: prefill_bench [flags]

Replays the seed's serving measurements of the short-prefill indexer skip on a
whole attention stack: each workload's prompts are prefilled (one output
token, so TTFT is the prefill) by three arms -- main (the indexer always
scores), skip (the decision as registered) and no_indexer (no indexer work:
a bound, not a valid model) -- taking turns step by step in ABBA order after
a warm-up. TTFT is reported on the wall clock and on the process's CPU-time
clock, which other load on a shared machine does not stretch.

  --model=NAME|PATH          preset (deepseek-v3.2, glm-5.1, glm-5.2,
                             tiny-v3.2, tiny-glm-5.1, tiny-glm-5.2) or a
                             .textproto (default: )",
                      kCpuDefaultModel, R"( on the CPU,
                             )",
                      kGpuDefaultModel, R"( on a GPU)
  --platform=P               auto, cpu, rocm, cuda or emulated-rocm (default
                             auto: a GPU platform with a device, else
                             emulated-rocm = ROCm's capabilities executing the
                             CPU kernels)
  --arch=ARCH                e.g. gfx942, gfx950, sm_90 (default gfx950 for
                             emulated-rocm, else the device's)
  --workloads=W[,W...]       1k_c1, 1900_c1, 1k_c32, 8k_c1 (default all); the
                             lengths are the seed's at index_topk 2048, scaled
                             to the preset's (tiny presets: 32, 59, 32, 256)
  --arms=A[,A...]            main, skip, no_indexer (default all three)
  --runs=N                   measured runs per arm, ABBA order (default 2)
  --spec_tokens=N            MTP speculative tokens of the engine (default 0;
                             the seed ran GLM-5.2 with 3)
  --prompts=N                prompts per workload (default the seed's 40, 40,
                             32, 16 on a GPU; 16, 16, 32, 3 on the CPU)
  --max_num_batched_tokens=N tokens per step (default 8192 scaled like the
                             lengths: 256 on the tiny presets)
  --block_size=N             cache block size in tokens (default 64)
  --num_blocks=N             cache blocks per layer (default: what the
                             largest workload needs at its peak)
  --threads=N                host threads (default 0: all cores)
  --seed=N                   weights and inputs (default 1)
  --json=PATH                write every figure as one JSON object
  --plot=PATH                draw the medians and run-to-run spread (PNG,
                             SVG, PDF; needs Debian's python3-matplotlib)
  --commit=REV               recorded in the JSON (default: git describe)
  --op_times=BOOL            after each workload, one more step per arm with
                             every op timed between synchronisations: the
                             indexer's scoring's share of a step, per op
                             (default false)
  --help                     this text

Exit status: 0 on success; 2 for bad flags, an unknown preset or platform, a
GPU platform without a device or kernels, or a workload that does not fit in
the caches, in host or in device memory (one line on stderr, nothing written
at --json); 1 when a run fails.
)");
}

absl::StatusOr<Flags> ParseFlags(absl::Span<const std::string> args) {
  static const std::set<std::string>* const kValueFlags =
      new std::set<std::string>{
          "model",       "platform",   "arch",       "workloads",
          "arms",        "runs",       "prompts",    "max_num_batched_tokens",
          "spec_tokens", "block_size", "num_blocks", "threads",
          "seed",        "json",       "plot",       "commit",
          "op_times"};
  std::map<std::string, std::string> values;
  Flags flags;
  for (const std::string& arg : args) {
    if (arg == "-h" || arg == "--help") {
      flags.help = true;
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      return UsageError(
          absl::StrCat("unexpected argument \"", arg,
                       "\"; flags are --name=value (see --help)"));
    }
    const size_t eq = arg.find('=');
    const std::string name =
        arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (kValueFlags->count(name) == 0) {
      return UsageError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (eq == std::string::npos || eq + 1 == arg.size()) {
      return UsageError(
          absl::StrCat("--", name, " needs a value: --", name, "=..."));
    }
    if (!values.emplace(name, arg.substr(eq + 1)).second) {
      return UsageError(absl::StrCat("--", name, " given twice"));
    }
  }
  if (flags.help) return flags;
  auto get = [&values](const char* name) -> const std::string* {
    auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  };
  if (const std::string* v = get("model")) flags.model = *v;
  if (const std::string* v = get("platform")) {
    static const std::set<std::string>* const kPlatforms =
        new std::set<std::string>{"auto", "cpu", "rocm", "cuda", kEmulatedRocm};
    if (kPlatforms->count(*v) == 0) {
      return UsageError(
          absl::StrCat("--platform=", *v,
                       ": expected auto, cpu, rocm, cuda or emulated-rocm"));
    }
    flags.platform = *v;
  }
  if (const std::string* v = get("arch")) flags.arch = *v;
  if (const std::string* v = get("workloads")) {
    flags.workloads = SplitList(*v);
    const std::vector<std::string> known = WorkloadNames();
    for (const std::string& w : flags.workloads) {
      if (std::find(known.begin(), known.end(), w) == known.end()) {
        return UsageError(absl::StrCat("--workloads: unknown workload \"", w,
                                       "\"; expected ",
                                       absl::StrJoin(known, ", ")));
      }
    }
    if (std::set<std::string>(flags.workloads.begin(), flags.workloads.end())
            .size() != flags.workloads.size()) {
      return UsageError("--workloads: a workload is named twice");
    }
  }
  if (const std::string* v = get("arms")) {
    flags.arms = SplitList(*v);
    for (const std::string& a : flags.arms) {
      if (a != kMain && a != kSkip && a != kNoIndexer) {
        return UsageError(absl::StrCat("--arms: unknown arm \"", a,
                                       "\"; expected main, skip, no_indexer"));
      }
    }
    if (std::set<std::string>(flags.arms.begin(), flags.arms.end()).size() !=
        flags.arms.size()) {
      return UsageError("--arms: an arm is named twice");
    }
    if (flags.arms.empty()) return UsageError("--arms: name at least one arm");
  }
  if (const std::string* v = get("runs")) {
    DSA_ASSIGN_OR_RETURN(flags.runs, ParseInt("runs", *v, 1, 1000));
  }
  if (const std::string* v = get("spec_tokens")) {
    DSA_ASSIGN_OR_RETURN(flags.spec_tokens,
                         ParseInt("spec_tokens", *v, 0,
                                  model::deepseek_v32::kMaxSpeculativeTokens));
  }
  if (const std::string* v = get("prompts")) {
    DSA_ASSIGN_OR_RETURN(flags.prompts, ParseInt("prompts", *v, 1, 100000));
  }
  if (const std::string* v = get("max_num_batched_tokens")) {
    DSA_ASSIGN_OR_RETURN(flags.max_num_batched_tokens,
                         ParseInt("max_num_batched_tokens", *v, 1, 1 << 24));
  }
  if (const std::string* v = get("block_size")) {
    DSA_ASSIGN_OR_RETURN(flags.block_size, ParseInt("block_size", *v, 1, 4096));
  }
  if (const std::string* v = get("num_blocks")) {
    DSA_ASSIGN_OR_RETURN(flags.num_blocks,
                         ParseInt("num_blocks", *v, 1, 1 << 24));
  }
  if (const std::string* v = get("threads")) {
    DSA_ASSIGN_OR_RETURN(flags.threads, ParseInt("threads", *v, 0, 1024));
  }
  if (const std::string* v = get("seed")) {
    DSA_ASSIGN_OR_RETURN(
        int64_t seed,
        ParseInt("seed", *v, 0, std::numeric_limits<int64_t>::max()));
    flags.seed = static_cast<uint64_t>(seed);
  }
  if (const std::string* v = get("json")) flags.json = *v;
  if (const std::string* v = get("plot")) flags.plot = *v;
  if (const std::string* v = get("commit")) flags.commit = *v;
  if (const std::string* v = get("op_times")) {
    if (*v != "true" && *v != "false") {
      return UsageError(
          absl::StrCat("--op_times=", *v, ": expected true or false"));
    }
    flags.op_times = *v == "true";
  }
  return flags;
}

std::vector<std::string> WorkloadNames() {
  std::vector<std::string> names;
  for (const SeedWorkload& w : kSeedWorkloads) names.push_back(w.name);
  return names;
}

absl::StatusOr<std::vector<Workload>> MakeWorkloads(
    const std::vector<std::string>& names, int64_t index_topk, int prompts,
    bool on_cpu) {
  std::vector<std::string> wanted = names.empty() ? WorkloadNames() : names;
  std::vector<Workload> out;
  for (const std::string& name : wanted) {
    const SeedWorkload* seed = nullptr;
    for (const SeedWorkload& w : kSeedWorkloads) {
      if (name == w.name) seed = &w;
    }
    if (seed == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("unknown workload \"", name, "\"; expected ",
                       absl::StrJoin(WorkloadNames(), ", ")));
    }
    Workload w;
    w.name = seed->name;
    w.seed_prompt_len = seed->prompt_len;
    w.prompt_len = ScaleToTopk(seed->prompt_len, index_topk);
    w.prompts = prompts > 0 ? prompts
                : on_cpu    ? seed->cpu_prompts
                            : seed->prompts;
    w.concurrency = std::min(seed->concurrency, w.prompts);
    out.push_back(w);
  }
  return out;
}

absl::StatusOr<Schedule> MakeSchedule(const Workload& workload,
                                      int64_t max_num_batched_tokens,
                                      int block_size) {
  if (workload.prompts < 1 || workload.prompt_len < 1 ||
      workload.concurrency < 1 || max_num_batched_tokens < 1 ||
      block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("workload ", workload.name,
                     ": prompts, length, concurrency, step "
                     "size and block size must be positive"));
  }
  Schedule s;
  const int n = workload.prompts;
  s.arrival_boundary.assign(n, 0);
  s.finish_step.assign(n, -1);
  std::vector<int64_t> done(n, 0);
  int arrived = std::min(workload.concurrency, n);
  int finished = 0;
  int next_unstarted = 0;      // prompts [0, next_unstarted) have started
  std::vector<int> in_flight;  // started, unfinished, in start order
  while (finished < n) {
    ScheduledStep step;
    int64_t budget = max_num_batched_tokens;
    // Unfinished prompts first, then new arrivals, first come first served.
    std::vector<int> order = in_flight;
    while (next_unstarted < arrived) order.push_back(next_unstarted++);
    std::vector<int> still_in_flight;
    for (int p : order) {
      const int64_t take = std::min(budget, workload.prompt_len - done[p]);
      if (take > 0) {
        ScheduledPrompt sp;
        sp.prompt = p;
        sp.context = done[p];
        sp.new_tokens = take;
        sp.finishes = done[p] + take == workload.prompt_len;
        step.prompts.push_back(sp);
        step.tokens += take;
        budget -= take;
        done[p] += take;
      }
      if (done[p] < workload.prompt_len) still_in_flight.push_back(p);
    }
    for (int p : order) step.resident_blocks += CeilDiv(done[p], block_size);
    s.peak_blocks = std::max(s.peak_blocks, step.resident_blocks);
    const int k = static_cast<int>(s.steps.size());
    for (const ScheduledPrompt& sp : step.prompts) {
      if (!sp.finishes) continue;
      s.finish_step[sp.prompt] = k;
      ++finished;
      // The client sends its next prompt when one finishes.
      if (arrived < n) s.arrival_boundary[arrived++] = k + 1;
    }
    in_flight = std::move(still_in_flight);
    s.steps.push_back(std::move(step));
  }
  return s;
}

Change CompareRuns(const std::vector<double>& arm,
                   const std::vector<double>& main) {
  Change c;
  const double main_median = Median(main);
  if (arm.empty() || main.empty() || main_median <= 0) return c;
  c.pct = 100.0 * (Median(arm) / main_median - 1);
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < std::min(arm.size(), main.size()); ++i) {
    if (main[i] <= 0) continue;
    const double change = 100.0 * (arm[i] / main[i] - 1);
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
  if (std::min(arm.size(), main.size()) < 2) c.verdict = "one run";
  return c;
}

absl::StatusOr<BenchResult> RunBench(const Flags& flags,
                                     const platform::Registry& registry,
                                     std::ostream& progress,
                                     bool progress_tty) {
  // --- Everything is checked before a model is built.
  DSA_ASSIGN_OR_RETURN(ResolvedPlatform platform,
                       ResolvePlatform(registry, flags));
  const std::string model_name = !flags.model.empty() ? flags.model
                                 : platform.info.executes_on == "cpu"
                                     ? kCpuDefaultModel
                                     : kGpuDefaultModel;
  absl::StatusOr<model::deepseek_v32::LoadedModel> loaded =
      model::deepseek_v32::LoadModel(model_name);
  if (!loaded.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model: ", loaded.status().message()));
  }
  const ModelConfig* config = &loaded->config();
  const int64_t topk = config->index_topk();
  DSA_ASSIGN_OR_RETURN(std::vector<Workload> workloads,
                       MakeWorkloads(flags.workloads, topk, flags.prompts,
                                     platform.info.executes_on == "cpu"));
  const std::vector<std::string> arm_names =
      flags.arms.empty() ? std::vector<std::string>{kMain, kSkip, kNoIndexer}
                         : flags.arms;
  const int64_t step_tokens = flags.max_num_batched_tokens > 0
                                  ? flags.max_num_batched_tokens
                                  : ScaleToTopk(kSeedMaxNumBatchedTokens, topk);
  std::vector<Schedule> schedules;
  int64_t needed_blocks = 0;
  int64_t max_len = 0;
  for (const Workload& w : workloads) {
    if (w.prompt_len > config->max_position_embeddings()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workload ", w.name, ": prompts of ", w.prompt_len, " tokens exceed ",
          config->name(), "'s max_position_embeddings ",
          config->max_position_embeddings()));
    }
    DSA_ASSIGN_OR_RETURN(Schedule s,
                         MakeSchedule(w, step_tokens, flags.block_size));
    needed_blocks = std::max(needed_blocks, s.peak_blocks);
    max_len = std::max(max_len, w.prompt_len);
    schedules.push_back(std::move(s));
  }
  const int64_t num_blocks =
      flags.num_blocks > 0 ? flags.num_blocks : needed_blocks;
  for (size_t i = 0; i < workloads.size(); ++i) {
    if (schedules[i].peak_blocks > num_blocks) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "workload ", workloads[i].name,
          " does not fit in the caches: it "
          "needs ",
          schedules[i].peak_blocks, " blocks of ", flags.block_size,
          " tokens at its peak, --num_blocks is ", num_blocks));
    }
  }
  if (num_blocks > std::numeric_limits<int>::max()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the workloads need ", num_blocks, " cache blocks"));
  }
  RuntimeOptions options;
  options.block_size = flags.block_size;
  options.num_blocks = static_cast<int>(num_blocks);
  options.max_model_len = max_len;
  options.max_num_batched_tokens = step_tokens;
  options.num_threads = flags.threads;
  // On a GPU the projections read bf16 activations, so that they run on the
  // vendor GEMM (cuBLASLt takes bf16 x); both arms alike, so their outputs
  // still compare to the bit. The CPU keeps float32, its reference.
  if (platform.info.executes_on != "cpu") {
    options.activation_dtype = attention::DType::kBFloat16;
  }
  {
    // One arm's model: all of it is platform memory, the host's on the CPU
    // and the device's on a GPU (the runner draws its weights there and
    // keeps no host copy).
    const int64_t one = DeepseekV32Model::DeviceBytes(*config, options);
    const int64_t arms_count = static_cast<int64_t>(arm_names.size());
    const bool on_host = platform.info.executes_on == "cpu";
    const int64_t host = on_host ? arms_count * one : 0;
    const int64_t available = AvailableHostBytes();
    if (available > 0 && host > available * 9 / 10) {
      return absl::ResourceExhaustedError(absl::StrCat(
          config->name(), " with ", arms_count,
          arms_count == 1 ? " arm" : " arms", " needs about ", Gib(host),
          " of host memory (",
          on_host ? "weights, caches and workspace" : "host side", "), ",
          Gib(available), " are available",
          on_host
              ? absl::StrCat("; on the CPU use a small preset (the default ",
                             kCpuDefaultModel, ") or fewer --arms")
              : ""));
    }
    if (!on_host) {
      absl::StatusOr<platform::DeviceInfo> device =
          platform.exec->ProbeDevices();
      const int64_t device_total =
          device.ok() ? static_cast<int64_t>(device->total_memory_bytes) : 0;
      const int64_t need = arms_count * one;
      if (device_total > 0 && need > device_total * 9 / 10) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the workloads need about ", Gib(need), " of ", platform.info.name,
            " device memory for ", arms_count,
            " arms' weights, caches and workspace; "
            "the device has ",
            Gib(device_total),
            ": use fewer --arms, --num_blocks or --max_num_batched_tokens"));
      }
    }
  }

  BenchResult result;
  result.platform = platform.info;
  result.model = config->name();
  result.model_source = loaded->description();
  result.main_layers = config->num_main_layers();
  result.mtp_layers = config->num_mtp_layers();
  result.indexer_layers = config->num_indexer_layers();
  result.index_topk = topk;
  result.spec_tokens = flags.spec_tokens;
  result.runs = flags.runs;
  result.max_num_batched_tokens = step_tokens;
  result.block_size = flags.block_size;
  result.num_blocks = static_cast<int>(num_blocks);
  const bool on_gpu = platform.info.executes_on != "cpu";
  if (!on_gpu) {
    result.gpu_timing_note =
        "n/a: the step executes on the CPU, where every op runs synchronously "
        "on the host; there is no separate host issue time or device tail";
  } else {
    result.gpu_timing_note =
        "per step, the median over every step of every run: host issue is the "
        "wall time from a step's first launch to the return of its last one, "
        "device tail the time the device still needed after that (the "
        "uploads before and the read-backs after are in the JSON's "
        "prepare_ms and read_back_ms)";
  }

  // --- One model per arm, the same weights, on the platform's kernels.
  DSA_ASSIGN_OR_RETURN(AttentionKernels kernels,
                       AttentionKernels::Load(registry, platform.exec->id()));
  std::vector<Arm> arms;
  for (const std::string& name : arm_names) {
    platform::PlatformCapabilities caps = platform.caps;
    // main: what every platform but CUDA did before the optimisation; the
    // skip's static half then fails, so every indexer layer scores.
    if (name == kMain) caps.is_cuda_alike = false;
    model::deepseek_v32::EngineConfig engine;
    engine.num_speculative_tokens = flags.spec_tokens;
    DSA_ASSIGN_OR_RETURN(LayerPlanner planner,
                         LayerPlanner::Create(*config, caps, engine));
    RuntimeOptions arm_options = options;
    arm_options.no_indexer = name == kNoIndexer;
    // A large preset takes a while to build (every layer's weights drawn,
    // caches cleared): say so, as the rounds below do.
    const std::string building = absl::StrCat(
        "[setup] building the ", name, " arm: ", config->name(), ", ",
        config->num_layers(), " layers on ", platform.info.name);
    if (progress_tty) {
      progress << "\r\033[K" << building << std::flush;
    } else {
      progress << building << "\n" << std::flush;
    }
    absl::StatusOr<std::unique_ptr<DeepseekV32Model>> model =
        DeepseekV32Model::Create(
            std::move(planner), *platform.exec, kernels, arm_options,
            loaded->weight_source(), flags.seed,
            model::deepseek_v32::TerminalLoadProgress(stderr));
    if (!model.ok()) {
      return absl::Status(
          model.status().code(),
          absl::StrCat("building ", config->name(), " for the ", name,
                       " arm on ", platform.info.name, " (", num_blocks,
                       " cache blocks of ", flags.block_size,
                       " tokens per layer): ", model.status().message()));
    }
    arms.push_back({name, std::move(*model)});
  }

  // Inputs: one fixed random matrix; a step reads its first rows.
  const int64_t hidden = config->proto().hidden_size();
  std::vector<float> input(static_cast<size_t>(step_tokens * hidden));
  {
    std::mt19937_64 rng(flags.seed ^ 0x9e3779b97f4a7c15ull);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float& v : input) v = dist(rng);
  }

  // Progress counts rounds: one run of every arm of a workload.
  const int total_rounds = static_cast<int>(workloads.size()) * flags.runs;
  int done_rounds = 0;
  int64_t request_id = 0;
  for (size_t wi = 0; wi < workloads.size(); ++wi) {
    const Workload& w = workloads[wi];
    const Schedule& schedule = schedules[wi];
    WorkloadResult wr;
    wr.workload = w;
    wr.steps = static_cast<int>(schedule.steps.size());
    std::vector<bool> runnable(arms.size(), true);
    std::map<std::string, std::vector<RunFigures>> runs;
    for (size_t a = 0; a < arms.size(); ++a) {
      ArmResult ar;
      ar.arm = arms[a].name;
      if (arms[a].name == kNoIndexer) {
        ar.not_run_reason = NoIndexerReason(arms[a].model->planner(), w);
        runnable[a] = ar.not_run_reason.empty();
      }
      wr.arms.push_back(std::move(ar));
    }
    // Warm-up: each arm runs the workload's first step once, unmeasured.
    for (size_t a = 0; a < arms.size(); ++a) {
      if (!runnable[a]) continue;
      ScheduleRun warm_up(*arms[a].model, schedule, input, request_id);
      DSA_RETURN_IF_ERROR(warm_up.Step(0));
      DSA_RETURN_IF_ERROR(warm_up.Finish().status());
    }
    request_id += w.prompts;
    // ABBA, step by step: the arms take turns at every step, in reverse
    // order every other step and every other round, so that a change in the
    // machine's load falls on every arm alike.
    const int num_steps = static_cast<int>(schedule.steps.size());
    for (int round = 0; round < flags.runs; ++round) {
      std::vector<std::unique_ptr<ScheduleRun>> active(arms.size());
      for (size_t a = 0; a < arms.size(); ++a) {
        if (runnable[a]) {
          active[a] = std::make_unique<ScheduleRun>(*arms[a].model, schedule,
                                                    input, request_id);
        }
      }
      request_id += w.prompts;
      for (int k = 0; k < num_steps; ++k) {
        const bool forward = (round + k) % 2 == 0;
        for (size_t i = 0; i < arms.size(); ++i) {
          const size_t a = forward ? i : arms.size() - 1 - i;
          if (active[a] == nullptr) continue;
          absl::Status stepped = active[a]->Step(k);
          if (!stepped.ok()) {
            return absl::Status(stepped.code(),
                                absl::StrCat(w.name, ", arm ", arms[a].name,
                                             ", run ", round + 1, ", step ",
                                             k + 1, ": ", stepped.message()));
          }
        }
        if (progress_tty) {
          progress << "\r\033[K"
                   << absl::StrFormat("[%d/%d] %s run %d/%d: step %d/%d",
                                      done_rounds + 1, total_rounds, w.name,
                                      round + 1, flags.runs, k + 1, num_steps)
                   << std::flush;
        }
      }
      std::vector<std::string> medians;
      for (size_t a = 0; a < arms.size(); ++a) {
        if (active[a] == nullptr) continue;
        DSA_ASSIGN_OR_RETURN(RunFigures figures, active[a]->Finish());
        runs[arms[a].name].push_back(figures);
        medians.push_back(
            absl::StrCat(arms[a].name, " ", FormatMs(figures.median_ttft_ms)));
      }
      const std::string line =
          absl::StrFormat("[%d/%d] %s run %d/%d: median TTFT %s ms",
                          ++done_rounds, total_rounds, w.name, round + 1,
                          flags.runs, absl::StrJoin(medians, ", "));
      if (progress_tty) {
        progress << "\r\033[K" << line << std::flush;
      } else {
        progress << line << "\n" << std::flush;
      }
    }
    // Caches after the last run, compared with main's.
    std::map<std::string, uint64_t> cache_hash;
    for (size_t a = 0; a < arms.size(); ++a) {
      if (!runnable[a]) continue;
      DSA_ASSIGN_OR_RETURN(cache_hash[arms[a].name], CacheHash(*arms[a].model));
    }
    // --op_times: the first step once more per arm, every op timed.
    if (flags.op_times) {
      for (size_t a = 0; a < arms.size(); ++a) {
        if (!runnable[a]) continue;
        DSA_ASSIGN_OR_RETURN(
            OpTimes times,
            ProfileFirstStep(*arms[a].model, schedule, input, request_id));
        ArmResult& ar = wr.arms[a];
#define DSA_OP_TIME(op) \
  if (times.op > 0) ar.op_ms.emplace_back(#op, times.op);
        DSA_STEP_ATTENTION_OPS(DSA_OP_TIME)
        DSA_STEP_DENSE_OPS(DSA_OP_TIME)
#undef DSA_OP_TIME
        ar.profiled_step_ms = times.total();
        ar.scoring_ms = times.indexer_scoring;
      }
      request_id += w.prompts;
    }
    const bool have_main = runs.count(kMain) > 0;
    for (ArmResult& ar : wr.arms) {
      const auto it = runs.find(ar.arm);
      if (it == runs.end()) continue;
      ar.ran = true;
      const std::vector<RunFigures>& rf = it->second;
      for (const RunFigures& f : rf) {
        ar.ttft_ms.push_back(f.median_ttft_ms);
        ar.ttft_cpu_ms.push_back(f.median_ttft_cpu_ms);
      }
      ar.median_ttft_ms = Median(ar.ttft_ms);
      ar.median_ttft_cpu_ms = Median(ar.ttft_cpu_ms);
      ar.indexer_scored = rf.front().scored;
      ar.indexer_total = int64_t{config->num_indexer_layers()} * wr.steps;
      ar.launches_per_step =
          static_cast<double>(rf.front().launches) / std::max(1, wr.steps);
      ar.all_launches_per_step =
          static_cast<double>(rf.front().all_launches) / std::max(1, wr.steps);
      ar.steps = wr.steps;
      if (on_gpu) {
        // Every step of every run.
        auto median_of = [&rf](std::vector<double> RunFigures::*steps) {
          std::vector<double> all;
          for (const RunFigures& f : rf) {
            all.insert(all.end(), (f.*steps).begin(), (f.*steps).end());
          }
          return Median(all);
        };
        ar.host_issue_ms = median_of(&RunFigures::host_issue_ms);
        ar.device_tail_ms = median_of(&RunFigures::device_tail_ms);
        ar.prepare_ms = median_of(&RunFigures::prepare_ms);
        ar.read_back_ms = median_of(&RunFigures::read_back_ms);
      }
      for (const RunFigures& f : rf) {
        ar.deterministic &= f.output_hash == rf.front().output_hash &&
                            f.scored == rf.front().scored;
      }
      if (have_main) {
        const std::vector<RunFigures>& main_runs = runs[kMain];
        bool equal = ar.deterministic;
        for (const RunFigures& f : main_runs) {
          equal &= f.output_hash == rf.front().output_hash;
        }
        ar.outputs_equal = equal;
        if (ar.arm != kNoIndexer) {
          ar.caches_equal = cache_hash[ar.arm] == cache_hash[kMain];
        }
      }
    }
    auto arm_result = [&wr](const char* name) -> const ArmResult* {
      for (const ArmResult& ar : wr.arms) {
        if (ar.arm == name && ar.ran) return &ar;
      }
      return nullptr;
    };
    const ArmResult* main = arm_result(kMain);
    const ArmResult* skip = arm_result(kSkip);
    const ArmResult* bound = arm_result(kNoIndexer);
    if (main != nullptr && skip != nullptr) {
      wr.change = CompareRuns(skip->ttft_ms, main->ttft_ms);
      wr.change_cpu = CompareRuns(skip->ttft_cpu_ms, main->ttft_cpu_ms);
      wr.outputs_equal = skip->outputs_equal.value_or(false) &&
                         skip->caches_equal.value_or(false);
    }
    if (main != nullptr && bound != nullptr) {
      wr.bound_change_pct = CompareRuns(bound->ttft_ms, main->ttft_ms).pct;
      wr.bound_change_cpu_pct =
          CompareRuns(bound->ttft_cpu_ms, main->ttft_cpu_ms).pct;
    }
    result.workloads.push_back(std::move(wr));
  }
  if (progress_tty && done_rounds > 0) progress << "\r\033[K" << std::flush;
  return result;
}

std::string FormatTable(const BenchResult& r) {
  std::string out;
  const PlatformInfo& p = r.platform;
  absl::StrAppend(
      &out, "prefill_bench: ", r.model, " (", r.main_layers, " layers + ",
      r.mtp_layers, " MTP, ", r.indexer_layers, " with an indexer, index_topk ",
      r.index_topk,
      r.spec_tokens > 0 ? absl::StrCat(", MTP=", r.spec_tokens) : "", ") on ",
      p.name, " ", p.arch,
      p.emulated ? absl::StrCat(" (EMULATED: ROCm's capabilities, executing "
                                "the ",
                                p.executes_on, " kernels)")
                 : "",
      ", commit ", r.commit, "\n");
  if (!p.note.empty()) absl::StrAppend(&out, p.note, "\n");
  absl::StrAppend(&out, "model: ", r.model_source, "\n");
  absl::StrAppend(
      &out, "steps of at most ", r.max_num_batched_tokens, " tokens; ", r.runs,
      r.runs == 1 ? " run" : " runs",
      " per arm after a warm-up, the arms' steps interleaved in "
      "ABBA order; a run's TTFT is the median over its prompts (the "
      "read-back of every hidden state for the arms' comparison left out)"
      "\n\n");
  const std::vector<size_t> widths = {9, 10, 12, 8, 18, 8, 9, 8, 15, 30, 30, 0};
  auto row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      line +=
          i + 1 < cells.size() ? PadRight(cells[i], widths[i]) + " " : cells[i];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  };
  row({"workload", "prompts", "arm", "median", "every run", "CPU", "scored",
       "launch/", "step: issue /", "TTFT vs main [spread]",
       "CPU TTFT vs main [spread]", "vs main, to the bit"});
  row({"", "x tokens", "", "TTFT ms", "TTFT ms", "TTFT ms", "of total", "step",
       "tail ms", "", "", ""});
  for (const WorkloadResult& w : r.workloads) {
    bool first = true;
    for (const ArmResult& a : w.arms) {
      std::vector<std::string> cells(12);
      if (first) {
        cells[0] = w.workload.name;
        cells[1] =
            absl::StrCat(w.workload.prompts, " x ", w.workload.prompt_len);
      }
      first = false;
      cells[2] = a.arm == kNoIndexer ? "no_indexer*" : a.arm;
      if (!a.ran) {
        cells[3] = "n/a";
        cells[11] = a.not_run_reason;
        row(cells);
        continue;
      }
      cells[3] = FormatMs(a.median_ttft_ms);
      std::vector<std::string> runs;
      for (double t : a.ttft_ms) runs.push_back(FormatMs(t));
      cells[4] = absl::StrJoin(runs, " / ");
      cells[5] = FormatMs(a.median_ttft_cpu_ms);
      cells[6] = absl::StrCat(a.indexer_scored, "/", a.indexer_total);
      cells[7] = absl::StrFormat("%.1f", a.launches_per_step);
      cells[8] = a.host_issue_ms && a.device_tail_ms
                     ? absl::StrCat(FormatMs(*a.host_issue_ms), " / ",
                                    FormatMs(*a.device_tail_ms))
                     : "n/a";
      if (a.arm == kSkip) {
        cells[9] = ChangeText(w.change);
        cells[10] = ChangeText(w.change_cpu);
      }
      if (a.arm == kNoIndexer && w.bound_change_pct) {
        cells[9] = absl::StrCat(SignedPct(*w.bound_change_pct), " (bound)");
      }
      if (a.arm == kNoIndexer && w.bound_change_cpu_pct) {
        cells[10] =
            absl::StrCat(SignedPct(*w.bound_change_cpu_pct), " (bound)");
      }
      if (a.arm == kMain) {
        cells[11] = a.deterministic ? "reference" : "runs DIFFER";
      } else if (a.outputs_equal.has_value()) {
        cells[11] = *a.outputs_equal ? "outputs equal" : "outputs DIFFER";
        if (a.caches_equal.has_value()) {
          absl::StrAppend(&cells[11], *a.caches_equal ? ", caches equal"
                                                      : ", caches DIFFER");
        } else if (a.arm == kNoIndexer) {
          absl::StrAppend(&cells[11], ", no indexer keys");
        }
      }
      row(cells);
    }
  }
  absl::StrAppend(
      &out,
      "\n* no_indexer is a bound, not a valid model: it writes no "
      "indexer keys, so a later long decode would read unwritten ones.\n",
      "CPU TTFT: the same on a clock of the process's CPU time (the host work, "
      "which other load on the machine does not stretch).\n",
      "[spread]: the change within each round (the arms' steps interleaved); "
      "faster/slower only when every round is beyond ",
      absl::StrFormat("%.0f", kNoiseFloorPct), "% the same way.\n",
      "scored of total: indexer-layer calls of one run that ran logits + "
      "top-k; launch/step: attention ops launched per step (every op, the "
      "dense ones too: launches_per_step_all_ops in the JSON).\n",
      "step: issue / tail: ", r.gpu_timing_note, ".\n");
  // --op_times: where a step's time goes.
  bool header = false;
  for (const WorkloadResult& w : r.workloads) {
    for (const ArmResult& a : w.arms) {
      if (!a.profiled_step_ms) continue;
      if (!header) {
        absl::StrAppend(&out,
                        "\nop times of each workload's first step, run once "
                        "more with every op timed between synchronisations "
                        "(--op_times):\n");
        header = true;
      }
      std::vector<std::pair<std::string, double>> ops = a.op_ms;
      std::sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) {
        return x.second > y.second;
      });
      std::vector<std::string> parts;
      for (const auto& [op, ms] : ops) {
        parts.push_back(absl::StrCat(op, " ", FormatMs(ms)));
      }
      const double step = *a.profiled_step_ms;
      absl::StrAppend(
          &out, "  ", PadRight(w.workload.name, 8), " ", PadRight(a.arm, 10),
          " step ", FormatMs(step), " ms, indexer scoring ",
          FormatMs(a.scoring_ms.value_or(0)), " ms (",
          absl::StrFormat("%.1f", step > 0 ? 100 * *a.scoring_ms / step : 0.0),
          "%): ", absl::StrJoin(parts, ", "), "\n");
    }
  }
  return out;
}

namespace {

// --op_times' figures of an arm, or null.
std::string OpTimesJson(const ArmResult& a) {
  if (!a.profiled_step_ms) return "null";
  std::vector<std::string> ops;
  for (const auto& [op, ms] : a.op_ms) {
    ops.push_back(absl::StrCat(JsonString(op), ": ", JsonNumber(ms)));
  }
  return absl::StrCat("{\"step_ms\": ", JsonNumber(a.profiled_step_ms),
                      ", \"indexer_scoring_ms\": ", JsonNumber(a.scoring_ms),
                      ", \"ms\": {", absl::StrJoin(ops, ", "), "}}");
}

}  // namespace

std::string ToJson(const BenchResult& r) {
  std::string o = "{\n";
  const PlatformInfo& p = r.platform;
  absl::StrAppend(&o, "  \"platform\": {\"name\": ", JsonString(p.name),
                  ", \"arch\": ", JsonString(p.arch),
                  ", \"emulated\": ", p.emulated ? "true" : "false",
                  ", \"executes_on\": ", JsonString(p.executes_on),
                  ", \"is_cuda_alike\": ", p.is_cuda_alike ? "true" : "false",
                  ", \"note\": ", JsonString(p.note), "},\n");
  absl::StrAppend(&o, "  \"model\": {\"name\": ", JsonString(r.model),
                  ", \"source\": ", JsonString(r.model_source),
                  ", \"main_layers\": ", r.main_layers,
                  ", \"mtp_layers\": ", r.mtp_layers,
                  ", \"indexer_layers\": ", r.indexer_layers,
                  ", \"index_topk\": ", r.index_topk,
                  ", \"spec_tokens\": ", r.spec_tokens, "},\n");
  absl::StrAppend(&o, "  \"commit\": ", JsonString(r.commit), ",\n");
  absl::StrAppend(&o, "  \"runs\": ", r.runs, ",\n");
  absl::StrAppend(
      &o, "  \"max_num_batched_tokens\": ", r.max_num_batched_tokens, ",\n");
  absl::StrAppend(&o, "  \"block_size\": ", r.block_size,
                  ",\n  \"num_blocks\": ", r.num_blocks, ",\n");
  absl::StrAppend(&o, "  \"gpu_timing_note\": ", JsonString(r.gpu_timing_note),
                  ",\n");
  absl::StrAppend(&o, "  \"workloads\": [");
  for (size_t wi = 0; wi < r.workloads.size(); ++wi) {
    const WorkloadResult& w = r.workloads[wi];
    absl::StrAppend(&o, wi == 0 ? "\n" : ",\n",
                    "    {\"name\": ", JsonString(w.workload.name),
                    ", \"prompts\": ", w.workload.prompts,
                    ", \"prompt_len\": ", w.workload.prompt_len,
                    ", \"seed_prompt_len\": ", w.workload.seed_prompt_len,
                    ", \"concurrency\": ", w.workload.concurrency,
                    ", \"steps\": ", w.steps, ",\n     \"arms\": {");
    for (size_t ai = 0; ai < w.arms.size(); ++ai) {
      const ArmResult& a = w.arms[ai];
      std::vector<std::string> ttft;
      for (double t : a.ttft_ms) ttft.push_back(JsonNumber(t));
      std::vector<std::string> ttft_cpu;
      for (double t : a.ttft_cpu_ms) ttft_cpu.push_back(JsonNumber(t));
      absl::StrAppend(
          &o, ai == 0 ? "\n" : ",\n", "       ", JsonString(a.arm),
          ": {\"ttft_ms\": [", absl::StrJoin(ttft, ", "),
          "], \"median_ttft_ms\": ",
          a.ran ? JsonNumber(a.median_ttft_ms) : "null", ", \"ttft_cpu_ms\": [",
          absl::StrJoin(ttft_cpu, ", "), "], \"median_ttft_cpu_ms\": ",
          a.ran ? JsonNumber(a.median_ttft_cpu_ms) : "null",
          ", \"indexer_calls\": ",
          a.ran ? absl::StrCat("{\"scored\": ", a.indexer_scored,
                               ", \"total\": ", a.indexer_total, "}")
                : "null",
          ", \"launches_per_step\": ",
          a.ran ? JsonNumber(a.launches_per_step) : "null",
          ", \"launches_per_step_all_ops\": ",
          a.ran ? JsonNumber(a.all_launches_per_step) : "null",
          ", \"host_issue_ms\": ", JsonNumber(a.host_issue_ms),
          ", \"device_tail_ms\": ", JsonNumber(a.device_tail_ms),
          ", \"prepare_ms\": ", JsonNumber(a.prepare_ms),
          ", \"read_back_ms\": ", JsonNumber(a.read_back_ms),
          ", \"op_times\": ", OpTimesJson(a),
          ", \"outputs_equal_to_main\": ", JsonBool(a.outputs_equal),
          ", \"caches_equal_to_main\": ", JsonBool(a.caches_equal),
          ", \"bound\": ", a.arm == kNoIndexer ? "true" : "false",
          ", \"ran\": ", a.ran ? "true" : "false", ", \"not_run_reason\": ",
          a.not_run_reason.empty() ? "null" : JsonString(a.not_run_reason),
          "}");
    }
    absl::StrAppend(
        &o, "},\n     \"change_pct\": ", JsonNumber(w.change.pct),
        ", \"change\": ", JsonChange(w.change),
        ", \"change_cpu\": ", JsonChange(w.change_cpu),
        ",\n     \"bound_change_pct\": ", JsonNumber(w.bound_change_pct),
        ", \"bound_change_cpu_pct\": ", JsonNumber(w.bound_change_cpu_pct),
        ", \"outputs_equal\": ", JsonBool(w.outputs_equal), "}");
  }
  absl::StrAppend(&o, "\n  ]\n}\n");
  return o;
}

absl::Status CheckWritableDestination(const std::string& flag,
                                      const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos
                              ? "."
                              : (slash == 0 ? "/" : path.substr(0, slash));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--", flag, "=", path, ": directory ", dir, " does not exist"));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--", flag, "=", path, ": directory ", dir, " is not writable"));
  }
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--", flag, "=", path, " is a directory"));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a temporary file next to ", path, ": ",
                     std::strerror(errno)));
  }
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n =
        write(fd, contents.data() + written, contents.size() - written);
    if (n <= 0) {
      const std::string error = std::strerror(errno);
      close(fd);
      unlink(tmp.c_str());
      return absl::DataLossError(absl::StrCat("writing ", tmp, ": ", error));
    }
    written += static_cast<size_t>(n);
  }
  // Readable like any file the user writes (mkstemp creates it 0600).
  const mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  if (fsync(fd) != 0 || close(fd) != 0) {
    const std::string error = std::strerror(errno);
    unlink(tmp.c_str());
    return absl::DataLossError(absl::StrCat("writing ", tmp, ": ", error));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = std::strerror(errno);
    unlink(tmp.c_str());
    return absl::DataLossError(
        absl::StrCat("renaming ", tmp, " to ", path, ": ", error));
  }
  return absl::OkStatus();
}

namespace {

// `bazel run` starts the binary in its runfiles; paths the user typed are
// relative to where they typed them.
std::string UserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  return dir != nullptr && dir[0] != '\0' ? absl::StrCat(dir, "/", path) : path;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Output of a shell command, trailing newline removed; empty on failure.
std::string CommandOutput(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  if (pclose(pipe) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) {
    out.pop_back();
  }
  return out;
}

std::string GitCommit() {
  const char* dir = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string where =
      dir != nullptr && dir[0] != '\0' ? ShellQuote(dir) : ".";
  const std::string rev = CommandOutput(absl::StrCat(
      "git -C ", where, " describe --always --dirty --abbrev=12 2>/dev/null"));
  return rev.empty() ? "unknown" : rev;
}

// The plotting script: in the runfiles under `bazel run`/`bazel test`, else
// next to the source tree.
std::string PlotScript() {
  std::vector<std::string> candidates;
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    const char* dir = std::getenv(env);
    if (dir != nullptr && dir[0] != '\0') {
      candidates.push_back(
          absl::StrCat(dir, "/dsa/testing/plot_prefill_bench.py"));
    }
  }
  candidates.push_back("testing/plot_prefill_bench.py");
  const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (ws != nullptr && ws[0] != '\0') {
    candidates.push_back(absl::StrCat(ws, "/testing/plot_prefill_bench.py"));
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return "";
}

// Debian's interpreter, which sees Debian's python3-matplotlib; a python3
// earlier on PATH (pyenv, a virtualenv) may not.
std::string Python() {
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

bool IsUsageError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

}  // namespace

int Main(absl::Span<const std::string> args, const platform::Registry& registry,
         std::ostream& out, std::ostream& err) {
  absl::StatusOr<Flags> flags = ParseFlags(args);
  if (!flags.ok()) {
    err << "prefill_bench: " << flags.status().message() << "\n";
    return kExitUsage;
  }
  if (flags->help) {
    out << Usage();
    return kExitOk;
  }
  const std::string json_path = UserPath(flags->json);
  const std::string plot_path = UserPath(flags->plot);
  std::string plot_script;
  for (const auto& [flag, path] :
       {std::pair<const char*, std::string>{"json", json_path},
        std::pair<const char*, std::string>{"plot", plot_path}}) {
    if (path.empty()) continue;
    absl::Status ok = CheckWritableDestination(flag, path);
    if (!ok.ok()) {
      err << "prefill_bench: " << ok.message() << "\n";
      return kExitUsage;
    }
  }
  if (!plot_path.empty()) {
    plot_script = PlotScript();
    if (plot_script.empty()) {
      err << "prefill_bench: --plot: testing/plot_prefill_bench.py not found "
             "(run through bazel run //testing:prefill_bench)\n";
      return kExitUsage;
    }
    if (std::system(
            absl::StrCat(Python(), " -c 'import matplotlib' >/dev/null 2>&1")
                .c_str()) != 0) {
      err << "prefill_bench: --plot needs Debian's python3-matplotlib; "
             "testing/setup_debian.sh --plot installs it (testing/run.sh "
             "does so on first use)\n";
      return kExitUsage;
    }
  }
  absl::StatusOr<BenchResult> result =
      RunBench(*flags, registry, err, isatty(STDERR_FILENO) != 0);
  if (!result.ok()) {
    err << "prefill_bench: " << result.status().message() << "\n";
    return IsUsageError(result.status()) ? kExitUsage : kExitFailure;
  }
  result->commit = flags->commit.empty() ? GitCommit() : flags->commit;
  out << FormatTable(*result) << std::flush;
  const std::string json = ToJson(*result);
  if (!json_path.empty()) {
    absl::Status written = WriteFileAtomically(json_path, json);
    if (!written.ok()) {
      err << "prefill_bench: --json: " << written.message() << "\n";
      return kExitFailure;
    }
    out << "wrote " << flags->json << "\n";
  }
  if (!plot_path.empty()) {
    // The script reads the JSON from a temporary file and writes the picture
    // atomically itself.
    char tmp[] = "/tmp/prefill_bench_XXXXXX.json";
    const int fd = mkstemps(tmp, 5);
    if (fd < 0) {
      err << "prefill_bench: --plot: cannot create a temporary file\n";
      return kExitFailure;
    }
    close(fd);
    absl::Status written = WriteFileAtomically(tmp, json);
    int rc = 1;
    if (written.ok()) {
      rc = std::system(absl::StrCat(Python(), " ", ShellQuote(plot_script), " ",
                                    ShellQuote(tmp), " ", ShellQuote(plot_path))
                           .c_str());
    }
    unlink(tmp);
    if (!written.ok() || rc != 0) {
      err << "prefill_bench: --plot: drawing " << flags->plot << " failed\n";
      return kExitFailure;
    }
    out << "wrote " << flags->plot << "\n";
  }
  return kExitOk;
}

}  // namespace dsa::prefill_bench
