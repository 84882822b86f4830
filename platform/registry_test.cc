#include "platform/registry.h"

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/cpu/cpu_platform.h"
#include "platform/plugin_util.h"
#include "testing/status_matchers.h"

namespace dsa::platform {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fake accelerator whose device count a test sets. Each of the two fakes
// has its own callbacks, so they can be registered side by side.
template <int kIndex>
struct FakeAccelerator {
  static inline int device_count = 0;
  static inline std::atomic<int> probes{0};
  static constexpr const char* kArchs[] = {"sm_90", "sm_100"};
  static constexpr ArchCapabilities kCaps[] = {
      ArchCapabilities::For("sm_90")
          .set_is_cuda_alike(true)
          .set_kv_cache_fp8_format(DSA_FP8_E4M3FN)
          .set_warp_size(32)
          .set_sparse_mla_dense_mha_prefill(true)
          .set_sparse_mla_decode_context_parallel(true),
      ArchCapabilities::For("sm_100")
          .set_is_cuda_alike(true)
          .set_kv_cache_fp8_format(DSA_FP8_E4M3FN)
          .set_warp_size(32)
          .set_sparse_mla_dense_mha_prefill(true)
          .set_sparse_mla_decode_context_parallel(true),
  };
  static_assert(AllRowsComplete(kCaps));

  static DsaStatusCode Caps(const char* arch, DsaCapabilities* out, char* error,
                            size_t error_size) {
    return FillCapabilities(kCaps, Id(), arch, out, error, error_size);
  }
  static DsaStatusCode Probe(DsaDeviceInfo* out, char*, size_t) {
    ++probes;
    out->device_count = device_count;
    CopyFixedString(out->arch, device_count > 0 ? "sm_100" : "");
    return DSA_STATUS_OK;
  }
  static const char* Id() { return kIndex == 0 ? "fake_a" : "fake_b"; }
  static DsaPlatformDescriptor Descriptor() {
    DsaPlatformDescriptor d;
    std::memset(&d, 0, sizeof(d));
    d.struct_size = sizeof(d);
    d.platform_id = Id();
    d.kind = DSA_PLATFORM_KIND_CUDA;
    d.is_accelerator = 1;
    d.default_arch = "sm_90";
    d.known_archs = kArchs;
    d.num_known_archs = 2;
    d.capabilities_for_arch = &Caps;
    d.probe_devices = &Probe;
    return d;
  }
};
using FakeA = FakeAccelerator<0>;
using FakeB = FakeAccelerator<1>;

int dummy_kernel_target = 0;
const void* const kKernelFn = &dummy_kernel_target;

DsaKernelDescriptor Kernel(const char* op, const char* platform,
                           uint32_t version = 1) {
  DsaKernelDescriptor k;
  std::memset(&k, 0, sizeof(k));
  k.struct_size = sizeof(k);
  k.op_name = op;
  k.op_abi_version = version;
  k.platform_id = platform;
  k.fn = kKernelFn;
  return k;
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeA::device_count = 0;
    FakeB::device_count = 0;
    FakeA::probes = 0;
    FakeB::probes = 0;
  }
};

TEST_F(RegistryTest, EmptyRegistryFindsNothing) {
  Registry registry;
  EXPECT_THAT(
      registry.GetPlatform("cpu"),
      StatusIs(absl::StatusCode::kNotFound,
               HasSubstr("'cpu' is not registered (registered: none)")));
  EXPECT_THAT(registry.FindKernel("indexer_logits", 1, "cpu"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no kernel 'indexer_logits'")));
  EXPECT_THAT(registry.ActivePlatform(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no CPU platform is registered")));
  EXPECT_TRUE(registry.PlatformIds().empty());
}

// Linked through //platform:default_platforms, as a host does.
TEST_F(RegistryTest, DefaultPlatformsPutCpuIntoGlobal) {
  Registry& global = Registry::Global();
  EXPECT_EQ(&global, &Registry::Global());
  ASSERT_OK_AND_ASSIGN(Platform cpu, global.GetPlatform("cpu"));
  EXPECT_EQ(cpu.kind(), PlatformKind::kCpu);
  EXPECT_FALSE(cpu.is_accelerator());
  ASSERT_OK_AND_ASSIGN(PlatformCapabilities caps, cpu.Capabilities());
  EXPECT_FALSE(caps.is_cuda_alike);
  EXPECT_TRUE(caps.sparse_mla_dense_mha_prefill);
  ASSERT_OK_AND_ASSIGN(Platform active, global.ActivePlatform());
  EXPECT_EQ(active.id(), "cpu");
}

TEST_F(RegistryTest, RegisteringAPluginTwiceIsAlreadyExistsAndChangesNothing) {
  Registry registry;
  ASSERT_OK(registry.RegisterPlugin(CpuPlatformPluginApi()));
  // Refused by name before its initialize runs again.
  EXPECT_THAT(registry.RegisterPlugin(CpuPlatformPluginApi()),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("plugin 'dsa_cpu_platform' is already "
                                 "loaded")));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu"));
}

TEST_F(RegistryTest, BatchIsAllOrNothing) {
  Registry registry;
  RegistrationBatch batch;
  batch.plugin_name = "test";
  batch.platforms = {FakeA::Descriptor(), FakeB::Descriptor()};
  batch.kernels = {Kernel("indexer_logits", "fake_a"),
                   Kernel("indexer_logits", "fake_a")};
  EXPECT_THAT(registry.Register(batch),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("registered twice in one batch")));
  EXPECT_TRUE(registry.PlatformIds().empty());

  batch.kernels = {Kernel("indexer_logits", "fake_a"),
                   Kernel("indexer_logits", "nowhere")};
  EXPECT_THAT(registry.Register(batch),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("names platform 'nowhere'")));
  EXPECT_TRUE(registry.PlatformIds().empty());

  batch.kernels = {Kernel("indexer_logits", "fake_a"),
                   Kernel("indexer_logits", "fake_b")};
  ASSERT_OK(registry.Register(batch));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("fake_a", "fake_b"));
  EXPECT_THAT(registry.KernelOps("fake_a"), ElementsAre("indexer_logits"));

  // A second batch that collides on one kernel leaves everything as it was.
  RegistrationBatch more;
  more.plugin_name = "more";
  more.kernels = {Kernel("top_k", "fake_a"),
                  Kernel("indexer_logits", "fake_b")};
  EXPECT_THAT(
      registry.Register(more),
      StatusIs(absl::StatusCode::kAlreadyExists,
               HasSubstr("kernel 'indexer_logits' for platform "
                         "'fake_b' is already registered (by 'test')")));
  EXPECT_THAT(registry.FindKernel("top_k", 1, "fake_a"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("top_k")));
}

TEST_F(RegistryTest, KernelLookupChecksTheOpAbiVersion) {
  Registry registry;
  RegistrationBatch batch;
  batch.plugin_name = "kernels";
  batch.platforms = {FakeA::Descriptor()};
  batch.kernels = {Kernel("top_k", "fake_a", 2)};
  ASSERT_OK(registry.Register(batch));
  ASSERT_OK_AND_ASSIGN(const void* fn,
                       registry.FindKernel("top_k", 2, "fake_a"));
  EXPECT_EQ(fn, kKernelFn);
  EXPECT_THAT(registry.FindKernel("top_k", 1, "fake_a"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("op ABI version 2")));
  EXPECT_THAT(registry.FindKernel("top_k", 2, "cpu"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("'cpu'")));
}

TEST_F(RegistryTest, RejectsMalformedDescriptors) {
  Registry registry;
  RegistrationBatch batch;
  DsaPlatformDescriptor d = FakeA::Descriptor();
  d.capabilities_for_arch = nullptr;
  batch.platforms = {d};
  EXPECT_THAT(registry.Register(batch),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("capabilities_for_arch is NULL")));
  d = FakeA::Descriptor();
  d.default_arch = "sm_80";
  batch.platforms = {d};
  EXPECT_THAT(registry.Register(batch),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("default_arch is not one of known_archs")));
  d = FakeA::Descriptor();
  d.platform_id = "Has Spaces";
  batch.platforms = {d};
  EXPECT_THAT(
      registry.Register(batch),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("platform_id")));
  d = FakeA::Descriptor();
  d.struct_size = 8;
  batch.platforms = {d};
  EXPECT_THAT(
      registry.Register(batch),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("struct_size 8")));
  d = FakeA::Descriptor();
  d.is_accelerator = 0;
  batch.platforms = {d};
  EXPECT_THAT(registry.Register(batch),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is_accelerator")));
  batch.platforms = {FakeA::Descriptor()};
  DsaKernelDescriptor k = Kernel("top_k", "fake_a");
  k.fn = nullptr;
  batch.kernels = {k};
  EXPECT_THAT(
      registry.Register(batch),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fn is NULL")));
  EXPECT_TRUE(registry.PlatformIds().empty());
}

TEST_F(RegistryTest, OlderDescriptorWithoutRuntimeHasNoDeviceMemory) {
  // A minor-version-0-sized descriptor that ends before the runtime fields.
  Registry registry;
  DsaPlatformDescriptor d = FakeA::Descriptor();
  d.struct_size = offsetof(DsaPlatformDescriptor, device_malloc);
  RegistrationBatch batch;
  batch.platforms = {d};
  ASSERT_OK(registry.Register(batch));
  ASSERT_OK_AND_ASSIGN(Platform p, registry.GetPlatform("fake_a"));
  EXPECT_FALSE(p.runtime().available());
  EXPECT_THAT(p.runtime().Allocate(16),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("no device allocator")));
}

DsaStatusCode FakeMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes, char*,
                             size_t) {
  *free_bytes = 3 << 20;
  *total_bytes = 8 << 20;
  return DSA_STATUS_OK;
}

// device_memory_info came with plugin API 1.1: a 1.0-sized descriptor has
// none (its pointer past struct_size is never read), and the runtime says
// it cannot tell; a 1.1 one reports what its plugin says.
TEST_F(RegistryTest, MemoryInfoIsUnimplementedForAPlugin10Descriptor) {
  DsaPlatformDescriptor d = FakeA::Descriptor();
  d.device_memory_info = &FakeMemoryInfo;
  d.struct_size = offsetof(DsaPlatformDescriptor, device_memory_info);
  {
    Registry registry;
    RegistrationBatch batch;
    batch.platforms = {d};
    ASSERT_OK(registry.Register(batch));
    ASSERT_OK_AND_ASSIGN(Platform p, registry.GetPlatform("fake_a"));
    EXPECT_THAT(p.runtime().MemoryInfo(),
                StatusIs(absl::StatusCode::kUnimplemented,
                         HasSubstr("does not report its free memory")));
  }
  d.struct_size = sizeof(d);
  Registry registry;
  RegistrationBatch batch;
  batch.platforms = {d};
  ASSERT_OK(registry.Register(batch));
  ASSERT_OK_AND_ASSIGN(Platform p, registry.GetPlatform("fake_a"));
  ASSERT_OK_AND_ASSIGN(DeviceMemory memory, p.runtime().MemoryInfo());
  EXPECT_EQ(memory.free_bytes, uint64_t{3} << 20);
  EXPECT_EQ(memory.total_bytes, uint64_t{8} << 20);
}

TEST_F(RegistryTest, CapabilitiesForArchNormalisesAndNamesKnownArchs) {
  Registry registry;
  RegistrationBatch batch;
  batch.platforms = {FakeA::Descriptor()};
  ASSERT_OK(registry.Register(batch));
  ASSERT_OK_AND_ASSIGN(Platform p, registry.GetPlatform("fake_a"));
  ASSERT_OK_AND_ASSIGN(PlatformCapabilities caps,
                       p.CapabilitiesForArch("sm90"));
  EXPECT_EQ(DeviceArchName(caps.arch), "sm_90");
  EXPECT_EQ(caps.warp_size, 32);
  EXPECT_TRUE(caps.is_cuda_alike);
  EXPECT_THAT(p.CapabilitiesForArch("sm_80"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("known: sm_90, sm_100")));
  EXPECT_THAT(
      p.CapabilitiesForArch("gfx942"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fake_a")));
}

TEST_F(RegistryTest, ActivePlatformIsResolvedLazily) {
  Registry registry;
  ASSERT_OK(registry.RegisterPlugin(CpuPlatformPluginApi()));
  RegistrationBatch batch;
  batch.platforms = {FakeA::Descriptor(), FakeB::Descriptor()};
  ASSERT_OK(registry.Register(batch));

  // No device anywhere: CPU.
  ASSERT_OK_AND_ASSIGN(Platform active, registry.ActivePlatform());
  EXPECT_EQ(active.id(), "cpu");
  EXPECT_EQ(FakeA::probes, 1);
  ASSERT_OK_AND_ASSIGN(active, registry.ActivePlatform());
  EXPECT_EQ(FakeA::probes, 1) << "the probe is cached";
}

TEST_F(RegistryTest, OneAcceleratorWithADeviceIsActive) {
  FakeB::device_count = 2;
  Registry registry;
  ASSERT_OK(registry.RegisterPlugin(CpuPlatformPluginApi()));
  RegistrationBatch batch;
  batch.platforms = {FakeA::Descriptor(), FakeB::Descriptor()};
  ASSERT_OK(registry.Register(batch));
  ASSERT_OK_AND_ASSIGN(Platform active, registry.ActivePlatform());
  EXPECT_EQ(active.id(), "fake_b");
  // Device-dependent facts come from the runtime: the device is sm_100.
  ASSERT_OK_AND_ASSIGN(PlatformCapabilities caps, active.Capabilities());
  EXPECT_EQ(DeviceArchName(caps.arch), "sm_100");
}

TEST_F(RegistryTest, TwoActiveAcceleratorsNeedAnExplicitChoice) {
  FakeA::device_count = 1;
  FakeB::device_count = 8;
  Registry registry;
  ASSERT_OK(registry.RegisterPlugin(CpuPlatformPluginApi()));
  RegistrationBatch batch;
  batch.platforms = {FakeA::Descriptor(), FakeB::Descriptor()};
  ASSERT_OK(registry.Register(batch));
  EXPECT_THAT(registry.ActivePlatform(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("fake_a (1 device), fake_b (8 devices)")));
  EXPECT_THAT(registry.PlatformIds(), ElementsAre("cpu", "fake_a", "fake_b"));

  registry.SelectPlatform("fake_a");
  ASSERT_OK_AND_ASSIGN(Platform active, registry.ActivePlatform());
  EXPECT_EQ(active.id(), "fake_a");
  registry.SelectPlatform("cpu");
  ASSERT_OK_AND_ASSIGN(active, registry.ActivePlatform());
  EXPECT_EQ(active.id(), "cpu");
}

TEST_F(RegistryTest, ExplicitChoiceIsCheckedWhenResolved) {
  Registry registry;
  ASSERT_OK(registry.RegisterPlugin(CpuPlatformPluginApi()));
  registry.SelectPlatform("fake_a");  // not loaded yet: fine until resolved
  EXPECT_THAT(
      registry.ActivePlatform(),
      StatusIs(absl::StatusCode::kNotFound,
               HasSubstr("'fake_a' is not registered (registered: cpu)")));
  RegistrationBatch batch;
  batch.platforms = {FakeA::Descriptor()};
  ASSERT_OK(registry.Register(batch));
  ASSERT_OK_AND_ASSIGN(Platform active, registry.ActivePlatform());
  EXPECT_EQ(active.id(), "fake_a");
  registry.ClearPlatformSelection();
  EXPECT_FALSE(registry.selected_platform().has_value());
}

// Plugins that misbehave through the C API.
DsaStatusCode InitRegistersThenFails(const DsaHostApi* host, char* error,
                                     size_t error_size) {
  static const DsaPlatformDescriptor d = FakeA::Descriptor();
  if (host->register_platform(host->context, &d, error, error_size) !=
      DSA_STATUS_OK) {
    return DSA_STATUS_INTERNAL;
  }
  return PluginError(DSA_STATUS_UNAVAILABLE, error, error_size,
                     "device firmware too old");
}

DsaStatusCode InitRegistersPlatformAndKernel(const DsaHostApi* host,
                                             char* error, size_t error_size) {
  static const DsaPlatformDescriptor d = FakeA::Descriptor();
  static const DsaKernelDescriptor k = Kernel("top_k", "fake_a");
  DsaStatusCode c =
      host->register_platform(host->context, &d, error, error_size);
  if (c != DSA_STATUS_OK) return c;
  return host->register_kernel(host->context, &k, error, error_size);
}

TEST_F(RegistryTest, FailingInitializeLeavesTheRegistryUnchanged) {
  Registry registry;
  const DsaPluginApi api = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR,
                            DSA_PLUGIN_API_MINOR, "flaky",
                            &InitRegistersThenFails};
  EXPECT_THAT(registry.RegisterPlugin(&api),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("plugin 'flaky' failed to initialize: device "
                                 "firmware too old")));
  EXPECT_TRUE(registry.PlatformIds().empty());
}

TEST_F(RegistryTest, WrongMajorVersionIsRefused) {
  Registry registry;
  const DsaPluginApi api = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR + 1, 0,
                            "future", &InitRegistersPlatformAndKernel};
  EXPECT_THAT(
      registry.RegisterPlugin(&api),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr(absl::StrCat("built for plugin API ",
                                      DSA_PLUGIN_API_MAJOR + 1, ".0"))));
  EXPECT_TRUE(registry.PlatformIds().empty());
  const DsaPluginApi tiny = {4, DSA_PLUGIN_API_MAJOR, 0, "tiny", nullptr};
  EXPECT_THAT(registry.RegisterPlugin(&tiny),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("struct_size 4")));
  EXPECT_THAT(registry.RegisterPlugin(nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NULL")));
}

TEST_F(RegistryTest, PluginRegistersPlatformAndKernelTogether) {
  Registry registry;
  const DsaPluginApi api = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR,
                            DSA_PLUGIN_API_MINOR, "good",
                            &InitRegistersPlatformAndKernel};
  ASSERT_OK(registry.RegisterPlugin(&api));
  ASSERT_OK_AND_ASSIGN(Platform p, registry.GetPlatform("fake_a"));
  EXPECT_EQ(p.plugin_name(), "good");
  EXPECT_THAT(registry.FindKernel("top_k", 1, "fake_a"), IsOk());
  EXPECT_THAT(registry.RegisterPlugin(&api),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("plugin 'good' is already loaded")));
  // Another plugin registering the same platform collides on the platform.
  const DsaPluginApi twin = {sizeof(DsaPluginApi), DSA_PLUGIN_API_MAJOR,
                             DSA_PLUGIN_API_MINOR, "twin",
                             &InitRegistersPlatformAndKernel};
  EXPECT_THAT(registry.RegisterPlugin(&twin),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("plugin 'twin': platform 'fake_a' is already "
                                 "registered (by 'good')")));
}

TEST_F(RegistryTest, ConcurrentRegistrationAndLookup) {
  Registry registry;
  ASSERT_OK(registry.RegisterPlugin(CpuPlatformPluginApi()));
  constexpr int kThreads = 8;
  constexpr int kOpsPerThread = 50;
  std::vector<std::string> names(kThreads * kOpsPerThread);
  for (int i = 0; i < kThreads * kOpsPerThread; ++i) {
    names[i] = absl::StrCat("op_", i);
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOpsPerThread; ++i) {
        const std::string& op = names[t * kOpsPerThread + i];
        RegistrationBatch batch;
        batch.plugin_name = "thread_batch_" + op;
        batch.kernels = {Kernel(op.c_str(), "cpu")};
        if (!registry.Register(batch).ok()) ++failures;
        if (!registry.FindKernel(op, 1, "cpu").ok()) ++failures;
        if (!registry.GetPlatform("cpu").ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(registry.KernelOps("cpu").size(), names.size());
}

TEST_F(RegistryTest, CpuRuntimeRoundTrip) {
  ASSERT_OK_AND_ASSIGN(Platform cpu, Registry::Global().GetPlatform("cpu"));
  DeviceRuntime rt = cpu.runtime();
  ASSERT_TRUE(rt.available());
  std::vector<float> host = {1.5f, -2.25f, 3.0f, 1e-3f};
  ASSERT_OK_AND_ASSIGN(void* device, rt.Allocate(host.size() * sizeof(float)));
  ASSERT_OK(
      rt.CopyHostToDevice(device, host.data(), host.size() * sizeof(float)));
  std::vector<float> back(host.size(), -1.0f);
  ASSERT_OK(
      rt.CopyDeviceToHost(back.data(), device, back.size() * sizeof(float)));
  ASSERT_OK(rt.Synchronize());
  EXPECT_EQ(back, host);
  EXPECT_THAT(rt.CopyHostToDevice(nullptr, host.data(), 4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NULL")));
  ASSERT_OK(rt.Free(device));
}

TEST(StatusConversionTest, RoundTripsCodesAndMessages) {
  char buf[8];
  EXPECT_EQ(StatusToC(absl::NotFoundError("a long message"), buf, sizeof(buf)),
            DSA_STATUS_NOT_FOUND);
  EXPECT_STREQ(buf, "a long ");  // truncated, NUL-terminated
  EXPECT_THAT(StatusFromC(DSA_STATUS_ALREADY_EXISTS, "dup"),
              StatusIs(absl::StatusCode::kAlreadyExists, "dup"));
  EXPECT_THAT(StatusFromC(static_cast<DsaStatusCode>(99), "odd"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("99")));
  EXPECT_THAT(StatusFromC(DSA_STATUS_OK, ""), IsOk());
}

}  // namespace
}  // namespace dsa::platform
