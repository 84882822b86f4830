// The one registry of platforms and kernels.
//
// Platform plugins register a capability record (a DsaPlatformDescriptor);
// kernel libraries register one entry point per (op, platform). The model
// asks the registry for the active platform's capabilities and for kernels,
// and knows nothing else about platforms.
//
// - Thread-safe. Registry::Global() is a function-local leaky singleton that
//   lives in this library; plugins loaded at run time reach it only through
//   the host functions handed to their initialize (plugin_api.h), so every
//   plugin in a process shares it.
// - The registry knows no plugin. The C ABI (loading, version and size
//   checks, normalising descriptors) is platform/plugin_adapter.h, which
//   hands a plugin's registrations to the registry as a PluginSink; the
//   built-in default (the CPU platform in Global()) is wired by
//   //platform:default_platforms.
// - Registering something twice is AlreadyExists, looking up something absent
//   is NotFound; nothing aborts and nothing is silently replaced.
// - Registrations are all-or-nothing: RegisterPlugin and Register(batch) take
//   effect entirely or not at all.
// - Exactly one accelerator platform is active. It is resolved lazily, at
//   ActivePlatform(), from the platforms registered by then: an explicit
//   SelectPlatform() wins; otherwise the one accelerator platform whose
//   runtime reports a device; otherwise CPU.
#ifndef DSA_PLATFORM_REGISTRY_H_
#define DSA_PLATFORM_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "platform/absl_status.h"
#include "platform/capabilities.h"
#include "platform/plugin_adapter.h"
#include "platform/plugin_api.h"
#include "platform/plugin_file.h"

namespace dsa::platform {

// Device 0's memory as the runtime reports it now.
struct DeviceMemory {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// Memory, streams and synchronisation on a platform's device 0. For the CPU
// platform "device" memory is host memory and a stream an opaque token on
// which every call is synchronous.
//
// Every call but Free and DestroyStream is a fault site
// (platform/fault_injection.h): a test's FaultInjector can make it fail as
// the platform's would.
class DeviceRuntime {
 public:
  explicit DeviceRuntime(const DsaPlatformDescriptor* descriptor,
                         std::string platform_id)
      : d_(descriptor), platform_id_(std::move(platform_id)) {}

  const std::string& platform_id() const { return platform_id_; }
  bool available() const;
  absl::StatusOr<void*> Allocate(size_t bytes) const;
  absl::Status Free(void* ptr) const;
  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) const;
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) const;
  absl::Status CopyDeviceToDevice(void* dst, const void* src,
                                  size_t bytes) const;
  absl::Status Synchronize() const;
  // Free and total bytes now. Unimplemented when the platform's plugin
  // predates device_memory_info (plugin API 1.0) or its runtime cannot say.
  absl::StatusOr<DeviceMemory> MemoryInfo() const;

  // Streams (plugin API 1.2; platform/device_stream.h owns one). Without
  // them (an older plugin) each is Unimplemented.
  bool has_streams() const;
  // A new non-blocking stream, the handle kernels take in
  // ExecutionContext::stream.
  absl::StatusOr<void*> CreateStream() const;
  absl::Status DestroyStream(void* stream) const;
  // `bytes` in stream order on `stream` (plugin_api.h says when the host
  // side of the copy is done with).
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes,
                         DsaMemcpyKind kind, void* stream) const;
  absl::Status SynchronizeStream(void* stream) const;

  // Devices and collectives (plugin API 1.3; plugin_api.h says what each
  // does). BindDevice(0) is OK on a platform without device_bind (its one
  // device); any other ordinal is then Unimplemented. Without collectives
  // each collective call is Unimplemented. AllReduceSum and AllGather are
  // fault sites ("collective call").
  absl::Status BindDevice(int ordinal) const;
  bool has_collectives() const;
  // A group of ordinals.size() ranks, rank r on device ordinals[r].
  absl::StatusOr<void*> CreateCollectiveGroup(
      absl::Span<const int32_t> ordinals) const;
  absl::Status AbortCollectiveGroup(void* group) const;
  absl::Status DestroyCollectiveGroup(void* group) const;
  absl::Status AllReduceSum(void* group, int rank, void* buffer, size_t count,
                            DsaCollectiveElement element, void* stream) const;
  absl::Status AllGather(void* group, int rank, const void* send, void* recv,
                         size_t bytes, void* stream) const;

  // Graphs (plugin API 1.4; plugin_api.h says what each does). Without them
  // each call is Unimplemented, as it may be at run time on a platform that
  // has them (a driver without graphs). LaunchGraph, the one call on a
  // step's path, builds no message unless it fails.
  bool has_graphs() const;
  absl::Status BeginGraphCapture(void* stream) const;
  // The executable graph of what was recorded on `stream` since
  // BeginGraphCapture; the recording is over either way.
  absl::StatusOr<void*> EndGraphCapture(void* stream) const;
  absl::Status LaunchGraph(void* graph, void* stream) const;
  absl::Status DestroyGraph(void* graph) const;

  // Page-locked host memory (plugin API 1.5; plugin_api.h says what each
  // does). Without it RegisterHostMemory is Unimplemented and a host copies
  // from pageable memory, as before.
  bool has_host_registration() const;
  absl::Status RegisterHostMemory(void* ptr, size_t bytes) const;
  absl::Status UnregisterHostMemory(void* ptr) const;

 private:
  absl::Status Copy(void* dst, const void* src, size_t bytes,
                    DsaMemcpyKind kind) const;
  const DsaPlatformDescriptor* d_;
  std::string platform_id_;
};

// Host memory page-locked for a runtime's copies while this lives (none when
// the platform cannot: a host's copies from it are then pageable ones). Move
// only; the runtime's platform must outlive it, and the buffer's copies must
// be done (a stream synchronised) before it goes.
class RegisteredHostMemory {
 public:
  RegisteredHostMemory() = default;
  // `bytes` at `ptr` page-locked, or an empty registration where the
  // platform has none; the platform's error otherwise.
  static absl::StatusOr<RegisteredHostMemory> Register(
      const DeviceRuntime& runtime, void* ptr, size_t bytes);
  RegisteredHostMemory(RegisteredHostMemory&& other) noexcept;
  RegisteredHostMemory& operator=(RegisteredHostMemory&& other) noexcept;
  RegisteredHostMemory(const RegisteredHostMemory&) = delete;
  RegisteredHostMemory& operator=(const RegisteredHostMemory&) = delete;
  ~RegisteredHostMemory();

  // Whether the memory is page-locked (false where the platform cannot).
  bool registered() const { return ptr_ != nullptr; }

 private:
  RegisteredHostMemory(const DeviceRuntime& runtime, void* ptr)
      : runtime_(runtime), ptr_(ptr) {}
  void Release();
  std::optional<DeviceRuntime> runtime_;
  void* ptr_ = nullptr;
};

// A registered platform. Cheap to copy; valid while its registry lives.
class Platform {
 public:
  const std::string& id() const;
  PlatformKind kind() const;
  bool is_accelerator() const;
  const std::string& plugin_name() const;
  const std::string& default_arch() const;
  const std::vector<std::string>& known_archs() const;

  // Static capabilities of a named architecture; no device needed.
  // InvalidArgument naming the known ones for an unknown arch.
  absl::StatusOr<PlatformCapabilities> CapabilitiesForArch(
      absl::string_view arch) const;

  // The runtime's view of the devices, probed once (the runtime is loaded
  // lazily at the first call) and cached.
  absl::StatusOr<DeviceInfo> ProbeDevices() const;

  // Capabilities of device 0's architecture when a device is present,
  // else of the default architecture.
  absl::StatusOr<PlatformCapabilities> Capabilities() const;

  DeviceRuntime runtime() const;

 private:
  friend class Registry;
  struct Entry;
  explicit Platform(const Entry* entry) : entry_(entry) {}
  const Entry* entry_;
};

// A set of registrations that take effect together.
struct RegistrationBatch {
  std::string plugin_name;
  std::vector<DsaPlatformDescriptor> platforms;
  std::vector<DsaKernelDescriptor> kernels;
};

class Registry : public PluginSink {
 public:
  Registry();  // empty: not even CPU (for tests and embedders)
  ~Registry() override;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The process-wide registry. It starts empty; linking
  // //platform:default_platforms registers the CPU platform into it.
  static Registry& Global();

  // Registers everything in `batch`, or nothing: AlreadyExists when a
  // platform id or an (op, platform) kernel is registered already (or twice
  // in the batch), InvalidArgument for a malformed descriptor, NotFound for
  // a kernel whose platform is neither registered nor in the batch.
  absl::Status Register(const RegistrationBatch& batch);

  // Checks the plugin's API version and struct size, calls its initialize
  // with this registry's host functions and commits what it registered.
  // FailedPrecondition on a major-version mismatch; the plugin's own error
  // when initialize fails; AlreadyExists for a plugin name registered
  // already. The registry is unchanged on any error.
  absl::Status RegisterPlugin(const DsaPluginApi* api);

  // Loads a plugin shared object (LoadPluginFile in plugin_adapter.h: a
  // regular file, a complete ELF object, not loaded already) and registers
  // it. LoadPlugins stops at the first failure; the ones before it stay.
  absl::Status LoadPlugin(const std::string& path);
  absl::Status LoadPlugins(const std::vector<std::string>& paths);

  // PluginSink.
  bool HasPlugin(const std::string& plugin_name) const override;
  bool HasPluginFile(const PluginFileIdentity& file) const override;
  Status Commit(const PluginRegistrations& registrations) override;

  absl::StatusOr<Platform> GetPlatform(absl::string_view id) const;
  std::vector<std::string> PlatformIds() const;  // sorted
  bool HasPlatform(absl::string_view id) const;

  // The entry point of `op` for `platform`. NotFound when absent;
  // FailedPrecondition when it was registered with another ABI version.
  absl::StatusOr<const void*> FindKernel(absl::string_view op,
                                         uint32_t op_abi_version,
                                         absl::string_view platform) const;
  // Ops registered for a platform, sorted.
  std::vector<std::string> KernelOps(absl::string_view platform) const;

  // Explicit choice of the active platform (e.g. from --platform=). It is
  // checked when the active platform is resolved, so it may name a platform
  // whose plugin is loaded later.
  void SelectPlatform(absl::string_view id);
  void ClearPlatformSelection();
  std::optional<std::string> selected_platform() const;

  // Resolves the active platform now (see the file comment). NotFound when
  // the explicit choice is not registered; FailedPrecondition when several
  // accelerator platforms report devices and none was chosen.
  absl::StatusOr<Platform> ActivePlatform() const;

 private:
  struct KernelEntry {
    uint32_t op_abi_version;
    const void* fn;
    std::string plugin_name;
  };
  mutable absl::Mutex mu_;
  std::set<std::string> plugins_;
  std::vector<PluginFileIdentity> plugin_files_;
  std::map<std::string, std::unique_ptr<Platform::Entry>, std::less<>>
      platforms_;
  std::map<std::pair<std::string, std::string>, KernelEntry> kernels_;
  std::optional<std::string> selected_;
};

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_REGISTRY_H_
