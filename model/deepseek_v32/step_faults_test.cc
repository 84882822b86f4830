// Every fault, in turn: for a GLM-5.1-shaped stack (tiny-glm-5.1), each
// fallible call of a step (platform/fault_injection.h: the device runtime's
// allocations, copies, synchronisations and memory queries, every op call,
// and on a GPU every kernel launch, stream-ordered allocation, stream copy
// and synchronisation and vendor BLAS call) is made to fail, one at a time,
// in both arms (main: the indexer always scores; skip: the decision as
// registered), for a dense step (short prefills), a sparse step (a prefill
// chunk whose request grows past index_topk), a profile run and a decode
// step. For every N the step with fault N
//   - returns an error that names the failed call and where it was (the
//     layer and the op, or the step's upload, read-back or reservation);
//   - leaves the block tables as before it, and every byte of the caches but
//     the slots of its own new tokens;
//   - retried without the fault, gives outputs and caches equal to the bit
//     to those of a model that never failed.
// No crash, no hang (the test's timeout), no leak (the ASan build's leak
// check). Creating a model is swept the same way (every call of Create
// failed in turn: an error naming it, nothing leaked). Every N starts from the
// step's starting state: a fresh model for the dense step and the profile run,
// the next step of a chain for the sparse and decode steps (their requests'
// earlier tokens prefilled once per chain).
//
// Graphs are off (RuntimeOptions::step_graphs): the sweep fails each call,
// which a replayed graph does not make.
//
// The platform the step executes on: "emulated-rocm" (ROCm's capabilities on
// the CPU kernels, as prefill_bench runs without a GPU; step_faults_test), or
// "cuda" with DSA_FAULT_TEST_ON_CUDA (step_faults_gpu_test, tagged gpu;
// skipped without a device).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/model_config.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/paged_cache.h"
#include "platform/fault_injection.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

#ifdef DSA_FAULT_TEST_ON_CUDA
#define DSA_FAULT_TEST_PLATFORM "cuda"
#else
#define DSA_FAULT_TEST_PLATFORM "emulated-rocm"
#endif

namespace dsa::model::deepseek_v32 {
namespace {

using platform::FaultInjector;
using platform::FaultPlan;
using platform::FaultSite;
using platform::FaultSiteName;

constexpr char kPlatform[] = DSA_FAULT_TEST_PLATFORM;
constexpr char kPreset[] = "tiny-glm-5.1";

enum class StepKind { kProfileRun, kDense, kSparse, kDecode };

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kProfileRun:
      return "ProfileRun";
    case StepKind::kDense:
      return "Dense";
    case StepKind::kSparse:
      return "Sparse";
    case StepKind::kDecode:
      return "Decode";
  }
  return "?";
}

// Dense: two short prefills (17 tokens, below index_topk 64: the skip arm's
// main layers skip scoring). Sparse: the k-th chunk of 8 tokens of a prompt
// whose first 60 are cached (68 + 8k > index_topk: the sparse MQA path,
// reading the cached tokens' latent and indexer keys). Decode: a decode each
// for a request past index_topk (65 tokens cached) and a short one (12), the
// k-th decode step of a chain of them.
constexpr int64_t kMaxModelLen = 256;
constexpr int64_t kSparseContext = 60;
constexpr int64_t kSparseChunk = 8;
constexpr int64_t kDecodeContext[2] = {65, 12};

std::vector<StepRequest> StepOf(StepKind kind, int64_t k) {
  switch (kind) {
    case StepKind::kDense:
      return {{1, 0, 12}, {2, 0, 5}};
    case StepKind::kSparse:
      return {{1, kSparseContext + kSparseChunk * k, kSparseChunk}};
    case StepKind::kDecode:
      return {{1, kDecodeContext[0] + k, 1}, {2, kDecodeContext[1] + k, 1}};
    case StepKind::kProfileRun:
      break;
  }
  return {};
}

// The sparse and decode steps run in chains: what a chain prefills first,
// and how many of its steps fit in max_model_len.
bool Chained(StepKind kind) {
  return kind == StepKind::kSparse || kind == StepKind::kDecode;
}
std::vector<StepRequest> History(StepKind kind) {
  if (kind == StepKind::kSparse) return {{1, 0, kSparseContext}};
  if (kind == StepKind::kDecode) {
    return {{1, 0, kDecodeContext[0]}, {2, 0, kDecodeContext[1]}};
  }
  return {};
}
int64_t ChainSteps(StepKind kind) {
  return kind == StepKind::kSparse
             ? (kMaxModelLen - kSparseContext) / kSparseChunk
             : 64;
}

int64_t Tokens(const std::vector<StepRequest>& requests) {
  int64_t n = 0;
  for (const StepRequest& r : requests) n += r.num_new_tokens;
  return n;
}

std::vector<float> RandomRows(int64_t rows, int64_t width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * width));
  for (float& v : x) v = dist(rng);
  return x;
}

// Every cache of every layer, as the model holds it.
struct Caches {
  std::vector<std::vector<uint8_t>> latent, indexer_k;
};

struct Case {
  StepKind kind;
  bool skip_arm;  // false: main, whose indexer always scores
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(StepKindName(info.param.kind)) +
         (info.param.skip_arm ? "Skip" : "Main");
}

class StepFaultsTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    platform::Registry& registry = platform::Registry::Global();
    const bool emulated = std::string(kPlatform) == "emulated-rocm";
    const std::string exec_id = emulated ? "cpu" : kPlatform;
    absl::StatusOr<platform::Platform> exec = registry.GetPlatform(exec_id);
    if (!exec.ok()) GTEST_SKIP() << exec.status();
    absl::StatusOr<platform::DeviceInfo> devices = exec->ProbeDevices();
    if (!devices.ok() || devices->device_count == 0) {
      GTEST_SKIP() << kPlatform << ": no device";
    }
    absl::StatusOr<AttentionKernels> kernels =
        AttentionKernels::Load(registry, exec_id);
    if (!kernels.ok()) GTEST_SKIP() << kernels.status();
    kernels_ = *kernels;
    exec_.emplace(*exec);
    absl::StatusOr<platform::PlatformCapabilities> caps;
    if (emulated) {
      absl::StatusOr<platform::Platform> rocm = registry.GetPlatform("rocm");
      ASSERT_OK(rocm.status());
      caps = rocm->CapabilitiesForArch("gfx950");
    } else {
      caps = exec->Capabilities();
    }
    ASSERT_OK(caps.status());
    caps_ = *caps;
    caps_.is_cuda_alike = GetParam().skip_arm && caps->is_cuda_alike;
    absl::StatusOr<ModelConfig> config = LoadModelConfig(kPreset);
    ASSERT_OK(config.status());
    config_.emplace(*config);
    options_.block_size = 16;
    options_.num_blocks = 32;  // a decode chain (kChainSteps) fits
    options_.max_model_len = kMaxModelLen;
    options_.max_num_batched_tokens = 96;
    options_.num_threads = 1;
    // A step of a model whose graphs replay makes fewer fallible calls than
    // its reference (the replayed ops are not called), so call N would not
    // be the same call: the sweep runs every op directly. StepGraphs' own
    // failures (a recording that fails or is aborted) are step_graphs_test's.
    options_.step_graphs = false;
    // bf16 on a GPU: what engines run, and what takes the vendor GEMM.
    options_.activation_dtype =
        emulated ? attention::DType::kFloat32 : attention::DType::kBFloat16;
  }

  std::unique_ptr<DeepseekV32Model> NewModel() {
    absl::StatusOr<LayerPlanner> planner =
        LayerPlanner::Create(*config_, caps_, {});
    EXPECT_OK(planner.status());
    if (!planner.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<DeepseekV32Model>> model =
        DeepseekV32Model::Create(std::move(*planner), *exec_, kernels_,
                                 options_, /*seed=*/7);
    EXPECT_OK(model.status());
    return model.ok() ? std::move(*model) : nullptr;
  }

  // A fresh model, after a chain's prefill for the chained steps.
  std::unique_ptr<DeepseekV32Model> ModelBeforeTheStep() {
    std::unique_ptr<DeepseekV32Model> model = NewModel();
    if (model == nullptr || !Chained(GetParam().kind)) return model;
    const std::vector<StepRequest> history = History(GetParam().kind);
    absl::StatusOr<StepOutput> out =
        model->Step({}, history, Hidden(history, 100));
    EXPECT_OK(out.status());
    if (!out.ok()) return nullptr;
    if (mirror_.has_value()) {
      EXPECT_OK(
          mirror_->PrepareStep(history, out->plan.metadata->mla).status());
    }
    return model;
  }

  // GPU platforms make some calls once per process (the vendor library's
  // handle, its plans per shape, kernel attributes): the step once on a
  // model of its own first, so that the calls counted next are those every
  // such step makes.
  void WarmUp() {
    if (std::string(kPlatform) == "emulated-rocm") return;
    std::optional<BlockTables> no_mirror;
    no_mirror.swap(mirror_);
    std::unique_ptr<DeepseekV32Model> model = ModelBeforeTheStep();
    no_mirror.swap(mirror_);
    ASSERT_NE(model, nullptr);
    ASSERT_OK(RunTheStep(*model, 0).status());
  }

  std::vector<float> Hidden(const std::vector<StepRequest>& step,
                            uint32_t seed) const {
    return RandomRows(Tokens(step), config_->proto().hidden_size(), seed);
  }

  // The k-th step under test (a profile run returns an empty output).
  absl::StatusOr<StepOutput> RunTheStep(DeepseekV32Model& model, int64_t k) {
    if (GetParam().kind == StepKind::kProfileRun) {
      absl::StatusOr<ForwardPlan> plan = model.ProfileRun({});
      if (!plan.ok()) return plan.status();
      return StepOutput();
    }
    const std::vector<StepRequest> step = StepOf(GetParam().kind, k);
    return model.Step({}, step, Hidden(step, static_cast<uint32_t>(1 + k)));
  }

  Caches ReadCaches(const DeepseekV32Model& model) {
    Caches c;
    for (int l = 0; l < config_->num_layers(); ++l) {
      absl::StatusOr<std::vector<uint8_t>> latent = model.ReadLatentCache(l);
      absl::StatusOr<std::vector<uint8_t>> keys = model.ReadIndexerKCache(l);
      EXPECT_OK(latent.status());
      EXPECT_OK(keys.status());
      c.latent.push_back(latent.ok() ? *latent : std::vector<uint8_t>());
      c.indexer_k.push_back(keys.ok() ? *keys : std::vector<uint8_t>());
    }
    return c;
  }

  // The cache slots the k-th step writes: its new tokens' slot mapping, as
  // the model's block tables map them (mirror_ follows the reference model's
  // steps, with their metadata).
  std::vector<int64_t> StepSlots(int64_t k, const StepOutput& out) {
    if (GetParam().kind == StepKind::kProfileRun) return {};
    absl::StatusOr<StepLayout> layout = mirror_->PrepareStep(
        StepOf(GetParam().kind, k), out.plan.metadata->mla);
    EXPECT_OK(layout.status());
    return layout.ok() ? layout->slot_mapping : std::vector<int64_t>();
  }

  // The byte ranges of a cache that `slots` own, as {offset, length}: a
  // latent cache entry is one run of `entry_bytes` per slot; the indexer K
  // cache holds, per block, block_size fp8 keys of `head_dim` bytes, then
  // block_size float scales.
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  static Ranges LatentRanges(const std::vector<int64_t>& slots,
                             int64_t entry_bytes) {
    Ranges r;
    for (int64_t slot : slots) {
      r.emplace_back(static_cast<size_t>(slot * entry_bytes),
                     static_cast<size_t>(entry_bytes));
    }
    return r;
  }
  Ranges IndexerKeyRanges(const std::vector<int64_t>& slots,
                          int64_t head_dim) const {
    Ranges r;
    const int64_t bs = options_.block_size;
    for (int64_t slot : slots) {
      const int64_t block = (slot / bs) * bs * (head_dim + 4);
      r.emplace_back(static_cast<size_t>(block + (slot % bs) * head_dim),
                     static_cast<size_t>(head_dim));
      r.emplace_back(
          static_cast<size_t>(block + bs * head_dim + (slot % bs) * 4),
          size_t{4});
    }
    return r;
  }

  // Every byte of `after` equals `before` outside `owned`.
  static ::testing::AssertionResult EqualOutside(
      const std::vector<uint8_t>& before, const std::vector<uint8_t>& after,
      const Ranges& owned) {
    if (before.size() != after.size()) {
      return ::testing::AssertionFailure() << "cache sizes differ";
    }
    std::vector<uint8_t> masked = after;
    for (const auto& [offset, length] : owned) {
      if (offset + length > masked.size()) {
        return ::testing::AssertionFailure() << "a slot past the cache";
      }
      std::memcpy(masked.data() + offset, before.data() + offset, length);
    }
    if (std::memcmp(masked.data(), before.data(), before.size()) == 0) {
      return ::testing::AssertionSuccess();
    }
    size_t i = 0;
    while (masked[i] == before[i]) ++i;
    return ::testing::AssertionFailure()
           << "byte " << i << " changed outside the step's slots";
  }

  std::optional<platform::Platform> exec_;
  AttentionKernels kernels_;
  platform::PlatformCapabilities caps_;
  std::optional<ModelConfig> config_;
  RuntimeOptions options_;
  std::optional<BlockTables> mirror_;
};

// Where a failed step says it failed: the layer and the op, or the part of
// the step around the layers, then the failed call.
const std::regex& WherePattern() {
  static const std::regex* const pattern = new std::regex(
      "^(step: (layer [0-9]+( \\(MTP\\))?: "
      "((indexer_k_write|indexer_q|indexer_logits|indexer_topk|"
      "mla_cache_write|sparse_mla|dense_mha_prefill|gemm|rms_norm|rope|"
      "residual_add|cast)( \\([^)]+\\))?|keeping [^:]+|reading back [^:]+): "
      "|uploading [a-z_' A-Z]+: |copying [a-z_' A-Z]+: |"
      "reserving the dense prefill's scratch: |"
      "waiting for the step's device work: |reading back [a-z_' A-Z]+: |"
      "(reserving )?the indexer's workspace )|profile run: )");
  return *pattern;
}

bool Equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// The dense step and the profile run start every N from a fresh model; the
// sparse and decode steps walk a chain (the N-th fault fails the chain's
// k-th step), the reference model one step ahead, so that the prefill
// before them runs once per chain rather than once per N. A new chain
// (fresh models, the prefill again) starts after ChainSteps of them, so
// that no request outgrows max_model_len.
TEST_P(StepFaultsTest, EveryFaultIsReportedRolledBackAndRetriedToTheBit) {
  const bool chain = Chained(GetParam().kind);
  const int64_t chain_steps = ChainSteps(GetParam().kind);
  std::unique_ptr<DeepseekV32Model> reference, chained;
  // A new chain (or, for the other steps, the reference model): the models
  // before the step, mirror_ following the reference's block tables.
  auto start = [&]() -> bool {
    absl::StatusOr<BlockTables> mirror =
        BlockTables::Create(options_.block_size, options_.num_blocks);
    EXPECT_OK(mirror.status());
    if (!mirror.ok()) return false;
    mirror_.emplace(std::move(*mirror));
    reference = ModelBeforeTheStep();
    if (chain) {
      std::optional<BlockTables> mirror_of_reference;
      mirror_of_reference.swap(mirror_);  // the chained model's prefill
      chained = ModelBeforeTheStep();
      mirror_of_reference.swap(mirror_);
    }
    return reference != nullptr && (!chain || chained != nullptr);
  };
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  ASSERT_TRUE(start());
  // The step as it runs when nothing fails, counting its fallible calls.
  int64_t calls = 0;
  StepOutput expected;
  {
    FaultInjector counting;
    ASSERT_OK_AND_ASSIGN(expected, RunTheStep(*reference, 0));
    calls = counting.calls();
  }
  Caches expected_caches = ReadCaches(*reference);
  const int64_t expected_workspace = reference->reserved_workspace_bytes();
  std::vector<int64_t> slots = StepSlots(0, expected);
  std::printf("[ faults    ] %s %s on %s: %lld fallible calls\n",
              StepKindName(GetParam().kind),
              GetParam().skip_arm ? "skip" : "main", kPlatform,
              static_cast<long long>(calls));
  ASSERT_GT(calls, 0);

  const DeepseekV32Config& c = config_->proto();
  const int64_t latent_entry = (c.kv_lora_rank() + c.qk_rope_head_dim()) * 2;
  int sites_seen[platform::kNumFaultSites] = {};
  int64_t k = 0;  // the chain's step that fails
  int restarts = 0;
  for (int64_t n = 1; n <= calls; ++n) {
    SCOPED_TRACE(::testing::Message() << "fault at call " << n);
    if (chain && n > 1) {
      // The reference's next step; a new chain when this one is done, or
      // when its next step makes another number of calls (a GPU kernel's
      // choice that follows the context length), so that call N is always
      // the N-th of a step of `calls`.
      bool fresh_chain = ++k == chain_steps;
      for (int attempt = 0;; ++attempt) {
        if (fresh_chain) {
          ASSERT_TRUE(start());
          k = 0;
          ++restarts;
        }
        FaultInjector counting;
        ASSERT_OK_AND_ASSIGN(expected, RunTheStep(*reference, k));
        if (counting.calls() == calls) break;
        ASSERT_EQ(attempt, 0) << "a new chain's first step makes "
                              << counting.calls() << " calls, not " << calls;
        fresh_chain = true;
      }
      expected_caches = ReadCaches(*reference);
      slots = StepSlots(k, expected);
    }
    std::unique_ptr<DeepseekV32Model> fresh;
    if (!chain) {
      fresh = ModelBeforeTheStep();
      ASSERT_NE(fresh, nullptr);
    }
    DeepseekV32Model& model = chain ? *chained : *fresh;
    const BlockTables& tables = model.block_tables();
    const int64_t cached_1 = tables.cached_tokens(1);
    const int64_t cached_2 = tables.cached_tokens(2);
    const int free_blocks = tables.num_free_blocks();
    const Caches before = ReadCaches(model);
    {
      FaultPlan plan;
      plan.fail_at = n;
      FaultInjector injector(plan);
      absl::StatusOr<StepOutput> failed = RunTheStep(model, k);
      ASSERT_FALSE(failed.ok()) << "the step ignored its fault";
      ASSERT_EQ(injector.faults(), 1);
      const FaultSite site = injector.first_fault_site();
      ++sites_seen[static_cast<int>(site)];
      const std::string message(failed.status().message());
      // The failed call: its kind marked as injected, or for the vendor
      // library the call and the library's status.
      if (site == FaultSite::kVendorBlas) {
        EXPECT_TRUE(std::regex_search(
            message, std::regex("(cublasLt|rocblas_)[A-Za-z_]+ failed: "
                                "(CUBLAS_STATUS|rocblas_status)_")))
            << message;
      } else {
        EXPECT_THAT(message, ::testing::HasSubstr(FaultSiteName(site)));
        EXPECT_THAT(message, ::testing::HasSubstr("injected"));
      }
      EXPECT_TRUE(std::regex_search(message, WherePattern()))
          << "says neither the layer and op nor the step's part: " << message;
      if (site == FaultSite::kDeviceMalloc || site == FaultSite::kStreamAlloc) {
        EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted)
            << message;
      }
    }
    // Rolled back: the block tables as before, the caches too outside the
    // step's own slots.
    EXPECT_EQ(tables.cached_tokens(1), cached_1);
    EXPECT_EQ(tables.cached_tokens(2), cached_2);
    EXPECT_EQ(tables.num_free_blocks(), free_blocks);
    const Ranges latent_owned = LatentRanges(slots, latent_entry);
    const Ranges keys_owned =
        IndexerKeyRanges(slots, c.indexer().index_head_dim());
    const Caches after = ReadCaches(model);
    for (int l = 0; l < config_->num_layers(); ++l) {
      EXPECT_TRUE(EqualOutside(before.latent[l], after.latent[l], latent_owned))
          << "layer " << l << "'s latent cache";
      EXPECT_TRUE(
          EqualOutside(before.indexer_k[l], after.indexer_k[l], keys_owned))
          << "layer " << l << "'s indexer K cache";
    }
    if (GetParam().kind == StepKind::kProfileRun) {
      EXPECT_LE(model.reserved_workspace_bytes(), expected_workspace);
    }
    // Retried without the fault: equal to the bit to the step that never
    // failed.
    ASSERT_OK_AND_ASSIGN(StepOutput retried, RunTheStep(model, k));
    EXPECT_TRUE(Equal(retried.hidden, expected.hidden));
    EXPECT_TRUE(Equal(retried.mtp_hidden, expected.mtp_hidden));
    const Caches final_caches = ReadCaches(model);
    EXPECT_EQ(final_caches.latent, expected_caches.latent);
    EXPECT_EQ(final_caches.indexer_k, expected_caches.indexer_k);
    EXPECT_EQ(model.reserved_workspace_bytes(),
              reference->reserved_workspace_bytes());
    if (HasFailure()) return;  // one N's report is enough
  }
  std::string seen;
  for (int i = 0; i < platform::kNumFaultSites; ++i) {
    if (sites_seen[i] == 0) continue;
    seen += std::string(seen.empty() ? "" : ", ") +
            FaultSiteName(static_cast<FaultSite>(i)) + " " +
            std::to_string(sites_seen[i]);
  }
  std::printf(
      "[ faults    ] every one reported and rolled back: %s%s\n", seen.c_str(),
      chain ? (", in " + std::to_string(restarts + 1) + " chains").c_str()
            : "");
}

// A device that stays broken (every call fails from N on, the drain after
// the fault too): the step still returns, reports the first failure, rolls
// back, and a retry once the device works again is equal to the bit.
TEST_P(StepFaultsTest, APersistentFaultStillRollsBack) {
  if (GetParam().kind == StepKind::kProfileRun) GTEST_SKIP() << "see above";
  ASSERT_NO_FATAL_FAILURE(WarmUp());
  std::unique_ptr<DeepseekV32Model> reference = ModelBeforeTheStep();
  ASSERT_NE(reference, nullptr);
  const int free_before = reference->block_tables().num_free_blocks();
  int64_t calls = 0;
  StepOutput expected;
  {
    FaultInjector counting;
    ASSERT_OK_AND_ASSIGN(expected, RunTheStep(*reference, 0));
    calls = counting.calls();
  }
  for (int64_t n : {int64_t{1}, calls / 2, calls}) {
    SCOPED_TRACE(::testing::Message() << "every call from " << n << " fails");
    std::unique_ptr<DeepseekV32Model> model = ModelBeforeTheStep();
    ASSERT_NE(model, nullptr);
    {
      FaultPlan plan;
      plan.fail_at = n;
      plan.persistent = true;
      FaultInjector injector(plan);
      absl::StatusOr<StepOutput> failed = RunTheStep(*model, 0);
      ASSERT_FALSE(failed.ok());
      const std::string message(failed.status().message());
      EXPECT_THAT(message, ::testing::HasSubstr(
                               FaultSiteName(injector.first_fault_site())));
      // Once the step has started, the drain after the fault failed too,
      // and says so (a step refused before it started has nothing to drain).
      if (message.find("the indexer's workspace") == std::string::npos) {
        EXPECT_THAT(message,
                    ::testing::HasSubstr("then, waiting for the device"));
      }
    }
    EXPECT_EQ(model->block_tables().num_free_blocks(), free_before);
    ASSERT_OK_AND_ASSIGN(StepOutput retried, RunTheStep(*model, 0));
    EXPECT_TRUE(Equal(retried.hidden, expected.hidden));
    EXPECT_TRUE(Equal(retried.mtp_hidden, expected.mtp_hidden));
  }
}

// Creating a model makes fallible calls too (its stream, every allocation,
// weight fill or upload, the caches' zero fill, the final wait): each is
// made to fail in turn, and Create returns an error naming it, with nothing
// left behind (the ASan build's leak check: the stream, every buffer).
TEST_P(StepFaultsTest, EveryFaultOfACreationIsReported) {
  if (GetParam().kind != StepKind::kProfileRun || GetParam().skip_arm) {
    GTEST_SKIP() << "one creation sweep is enough";
  }
  // A first creation makes what the process keeps for every later one
  // (cuBLASLt's plans for the creation's products, a bounded cache: a
  // failure there keeps nothing and is retried); the sweep is over a
  // creation that finds it, whose fallible calls are then the same every
  // time.
  ASSERT_NE(NewModel(), nullptr);
  int64_t calls = 0;
  {
    FaultInjector counting;
    ASSERT_NE(NewModel(), nullptr);
    calls = counting.calls();
    EXPECT_EQ(counting.calls(FaultSite::kStreamCreate), 1);
  }
  int sites_seen[platform::kNumFaultSites] = {};
  for (int64_t n = 1; n <= calls; ++n) {
    SCOPED_TRACE(::testing::Message() << "fault at call " << n);
    absl::StatusOr<LayerPlanner> planner =
        LayerPlanner::Create(*config_, caps_, {});
    ASSERT_OK(planner.status());
    FaultPlan plan;
    plan.fail_at = n;
    FaultInjector injector(plan);
    absl::StatusOr<std::unique_ptr<DeepseekV32Model>> model =
        DeepseekV32Model::Create(std::move(*planner), *exec_, kernels_,
                                 options_, /*seed=*/7);
    if (model.ok()) {
      // Either a fault that was swallowed, or a creation that made fewer
      // fallible calls than the counted one (state kept across creations).
      FAIL() << "the creation succeeded with its call " << n << " of " << calls
             << " failed: "
             << (injector.faults() == 0
                     ? ::testing::Message()
                           << "no fault was injected; this creation made "
                           << injector.calls() << " fallible calls"
                     : ::testing::Message()
                           << "the fault at "
                           << FaultSiteName(injector.first_fault_site())
                           << " was ignored");
    }
    ASSERT_EQ(injector.faults(), 1);
    const FaultSite site = injector.first_fault_site();
    ++sites_seen[static_cast<int>(site)];
    if (site != FaultSite::kVendorBlas) {  // that one says the library's
      EXPECT_THAT(std::string(model.status().message()),
                  ::testing::HasSubstr(FaultSiteName(site)));
    }
    if (HasFailure()) return;
  }
  std::string seen;
  for (int i = 0; i < platform::kNumFaultSites; ++i) {
    if (sites_seen[i] == 0) continue;
    seen += std::string(seen.empty() ? "" : ", ") +
            FaultSiteName(static_cast<FaultSite>(i)) + " " +
            std::to_string(sites_seen[i]);
  }
  EXPECT_EQ(sites_seen[static_cast<int>(FaultSite::kStreamCreate)], 1);
  std::printf(
      "[ faults    ] Create on %s: %lld fallible calls, every one "
      "reported: %s\n",
      kPlatform, static_cast<long long>(calls), seen.c_str());
}

INSTANTIATE_TEST_SUITE_P(Steps, StepFaultsTest,
                         ::testing::Values(Case{StepKind::kProfileRun, false},
                                           Case{StepKind::kProfileRun, true},
                                           Case{StepKind::kDense, false},
                                           Case{StepKind::kDense, true},
                                           Case{StepKind::kSparse, false},
                                           Case{StepKind::kSparse, true},
                                           Case{StepKind::kDecode, false},
                                           Case{StepKind::kDecode, true}),
                         CaseName);

}  // namespace
}  // namespace dsa::model::deepseek_v32
