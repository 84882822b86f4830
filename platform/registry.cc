#include "platform/registry.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/fault_injection.h"
#include "platform/status_macros.h"

namespace dsa::platform {

namespace {

constexpr size_t kErrorSize = 512;

// The status of a platform callback; `what` (the call, for the message) is
// a string, or a callable that formats it, called only when the callback
// failed (for the calls of every step).
template <typename What>
absl::Status AbslCallbackStatus(DsaStatusCode code, const char* error,
                                const What& what) {
  if (code == DSA_STATUS_OK) return absl::OkStatus();
  if constexpr (std::is_invocable_v<const What&>) {
    return ToAbsl(platform::CallbackStatus(code, error, what()));
  } else {
    return ToAbsl(platform::CallbackStatus(code, error, what));
  }
}

// The descriptor's `call`, unless a test's FaultInjector makes this call at
// `site` fail as the platform's would.
template <typename Call>
DsaStatusCode Fallible(FaultSite site, char* error, size_t error_size,
                       Call call) {
  if (FaultInjected(site)) return InjectedFaultError(site, error, error_size);
  return call();
}

PlatformKind KindFromC(int32_t kind) {
  switch (kind) {
    case DSA_PLATFORM_KIND_ROCM:
      return PlatformKind::kRocm;
    case DSA_PLATFORM_KIND_CUDA:
      return PlatformKind::kCuda;
    default:
      return PlatformKind::kCpu;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Platform

struct Platform::Entry {
  DsaPlatformDescriptor descriptor;
  std::string id;
  PlatformKind kind;
  bool is_accelerator;
  std::string default_arch;
  std::vector<std::string> known_archs;
  std::string plugin_name;

  mutable absl::Mutex probe_mu;
  mutable bool probed = false;
  mutable absl::StatusOr<DeviceInfo> probe_result = DeviceInfo{};
};

const std::string& Platform::id() const { return entry_->id; }
PlatformKind Platform::kind() const { return entry_->kind; }
bool Platform::is_accelerator() const { return entry_->is_accelerator; }
const std::string& Platform::plugin_name() const { return entry_->plugin_name; }
const std::string& Platform::default_arch() const {
  return entry_->default_arch;
}
const std::vector<std::string>& Platform::known_archs() const {
  return entry_->known_archs;
}

absl::StatusOr<PlatformCapabilities> Platform::CapabilitiesForArch(
    absl::string_view arch) const {
  // Normalise spellings ("sm90" -> "sm_90", "gfx942:xnack-" -> "gfx942").
  absl::StatusOr<DeviceArch> parsed = ParseDeviceArch(entry_->kind, arch);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "platform '", entry_->id, "': ", parsed.status().message()));
  }
  const std::string name = DeviceArchName(*parsed);
  DsaCapabilities c;
  const Status queried = QueryCapabilities(entry_->descriptor, name, &c);
  if (!queried.ok()) {
    return absl::Status(
        ToAbsl(queried).code(),
        absl::StrCat(queried.message(), " (known: ",
                     absl::StrJoin(entry_->known_archs, ", "), ")"));
  }
  PlatformCapabilities caps;
  caps.platform_id = entry_->id;
  caps.kind = entry_->kind;
  caps.is_accelerator = entry_->is_accelerator;
  absl::StatusOr<DeviceArch> reported = ParseDeviceArch(entry_->kind, c.arch);
  if (!reported.ok()) {
    return absl::InternalError(absl::StrCat(
        "platform '", entry_->id,
        "' reported an unparsable arch: ", reported.status().message()));
  }
  caps.arch = *reported;
  caps.is_cuda_alike = c.is_cuda_alike != 0;
  switch (c.kv_cache_fp8_format) {
    case DSA_FP8_E4M3FN:
      caps.kv_cache_fp8_format = Fp8Format::kE4m3fn;
      break;
    case DSA_FP8_E4M3FNUZ:
      caps.kv_cache_fp8_format = Fp8Format::kE4m3fnuz;
      break;
    default:
      return absl::InternalError(absl::StrCat("platform '", entry_->id,
                                              "' reported unknown fp8 format ",
                                              c.kv_cache_fp8_format));
  }
  if (c.warp_size <= 0 || c.warp_size > 1024) {
    return absl::InternalError(absl::StrCat(
        "platform '", entry_->id, "' reported warp size ", c.warp_size));
  }
  caps.warp_size = c.warp_size;
  caps.sparse_mla_dense_mha_prefill = c.sparse_mla_dense_mha_prefill != 0;
  caps.sparse_mla_decode_context_parallel =
      c.sparse_mla_decode_context_parallel != 0;
  return caps;
}

absl::StatusOr<DeviceInfo> Platform::ProbeDevices() const {
  absl::MutexLock lock(&entry_->probe_mu);
  if (entry_->probed) return entry_->probe_result;
  entry_->probed = true;
  DsaDeviceInfo raw;
  const Status s = QueryDevices(entry_->descriptor, &raw);
  if (!s.ok()) {
    entry_->probe_result = ToAbsl(s);
  } else {
    DeviceInfo info;
    info.device_count = raw.device_count;
    info.arch = raw.arch;
    info.name = raw.name;
    info.total_memory_bytes = raw.total_memory_bytes;
    info.runtime_version = raw.runtime_version;
    entry_->probe_result = info;
  }
  return entry_->probe_result;
}

absl::StatusOr<PlatformCapabilities> Platform::Capabilities() const {
  absl::StatusOr<DeviceInfo> devices = ProbeDevices();
  if (devices.ok() && devices->device_count > 0 && !devices->arch.empty()) {
    return CapabilitiesForArch(devices->arch);
  }
  return CapabilitiesForArch(entry_->default_arch);
}

DeviceRuntime Platform::runtime() const {
  return DeviceRuntime(&entry_->descriptor, entry_->id);
}

// ---------------------------------------------------------------------------
// DeviceRuntime

bool DeviceRuntime::available() const {
  return d_->device_malloc != nullptr && d_->device_free != nullptr &&
         d_->device_memcpy != nullptr && d_->device_synchronize != nullptr;
}

absl::StatusOr<void*> DeviceRuntime::Allocate(size_t bytes) const {
  if (d_->device_malloc == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has no device allocator"));
  }
  void* ptr = nullptr;
  char error[kErrorSize] = {0};
  DSA_RETURN_IF_ERROR(AbslCallbackStatus(
      Fallible(
          FaultSite::kDeviceMalloc, error, sizeof(error),
          [&] { return d_->device_malloc(bytes, &ptr, error, sizeof(error)); }),
      error, [&] {
        return absl::StrCat("platform '", platform_id_, "': allocating ", bytes,
                            " bytes");
      }));
  if (ptr == nullptr && bytes > 0) {
    return absl::InternalError(absl::StrCat("platform '", platform_id_,
                                            "' allocator returned NULL for ",
                                            bytes, " bytes"));
  }
  return ptr;
}

absl::Status DeviceRuntime::Free(void* ptr) const {
  if (d_->device_free == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has no device allocator"));
  }
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(
      d_->device_free(ptr, error, sizeof(error)), error,
      [&] { return absl::StrCat("platform '", platform_id_, "': free"); });
}

absl::Status DeviceRuntime::Copy(void* dst, const void* src, size_t bytes,
                                 DsaMemcpyKind kind) const {
  if (d_->device_memcpy == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has no device memcpy"));
  }
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("platform '", platform_id_, "': memcpy of ", bytes,
                     " bytes with a NULL pointer"));
  }
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(
      Fallible(FaultSite::kDeviceMemcpy, error, sizeof(error),
               [&] {
                 return d_->device_memcpy(dst, src, bytes, kind, error,
                                          sizeof(error));
               }),
      error, [&] {
        return absl::StrCat("platform '", platform_id_, "': memcpy of ", bytes,
                            " bytes");
      });
}

absl::Status DeviceRuntime::CopyHostToDevice(void* dst, const void* src,
                                             size_t bytes) const {
  return Copy(dst, src, bytes, DSA_MEMCPY_HOST_TO_DEVICE);
}
absl::Status DeviceRuntime::CopyDeviceToHost(void* dst, const void* src,
                                             size_t bytes) const {
  return Copy(dst, src, bytes, DSA_MEMCPY_DEVICE_TO_HOST);
}
absl::Status DeviceRuntime::CopyDeviceToDevice(void* dst, const void* src,
                                               size_t bytes) const {
  return Copy(dst, src, bytes, DSA_MEMCPY_DEVICE_TO_DEVICE);
}

absl::Status DeviceRuntime::Synchronize() const {
  if (d_->device_synchronize == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has no synchronize"));
  }
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(
      Fallible(FaultSite::kDeviceSynchronize, error, sizeof(error),
               [&] { return d_->device_synchronize(error, sizeof(error)); }),
      error, [&] {
        return absl::StrCat("platform '", platform_id_, "': synchronize");
      });
}

absl::StatusOr<DeviceMemory> DeviceRuntime::MemoryInfo() const {
  if (d_->device_memory_info == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "platform '", platform_id_, "' does not report its free memory"));
  }
  DeviceMemory memory;
  char error[kErrorSize] = {0};
  DSA_RETURN_IF_ERROR(AbslCallbackStatus(
      Fallible(FaultSite::kDeviceMemoryInfo, error, sizeof(error),
               [&] {
                 return d_->device_memory_info(&memory.free_bytes,
                                               &memory.total_bytes, error,
                                               sizeof(error));
               }),
      error, [&] {
        return absl::StrCat("platform '", platform_id_, "': memory info");
      }));
  return memory;
}

bool DeviceRuntime::has_streams() const {
  // The adapter admits all four or none.
  return d_->stream_create != nullptr;
}

absl::StatusOr<void*> DeviceRuntime::CreateStream() const {
  if (!has_streams()) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has no streams"));
  }
  void* stream = nullptr;
  char error[kErrorSize] = {0};
  DSA_RETURN_IF_ERROR(AbslCallbackStatus(
      Fallible(
          FaultSite::kStreamCreate, error, sizeof(error),
          [&] { return d_->stream_create(&stream, error, sizeof(error)); }),
      error, absl::StrCat("platform '", platform_id_, "': creating a stream")));
  if (stream == nullptr) {
    return absl::InternalError(
        absl::StrCat("platform '", platform_id_, "' created a NULL stream"));
  }
  return stream;
}

absl::Status DeviceRuntime::DestroyStream(void* stream) const {
  if (!has_streams()) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has no streams"));
  }
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(
      d_->stream_destroy(stream, error, sizeof(error)), error,
      absl::StrCat("platform '", platform_id_, "': destroying a stream"));
}

absl::Status DeviceRuntime::CopyAsync(void* dst, const void* src, size_t bytes,
                                      DsaMemcpyKind kind, void* stream) const {
  if (!has_streams()) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has no streams"));
  }
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("platform '", platform_id_, "': memcpy of ", bytes,
                     " bytes with a NULL pointer"));
  }
  // A copy and a synchronisation per step input: the message is built only
  // when the call failed.
  char error[kErrorSize] = {0};
  const DsaStatusCode code =
      Fallible(FaultSite::kStreamCopy, error, sizeof(error), [&] {
        return d_->memcpy_async(dst, src, bytes, kind, stream, error,
                                sizeof(error));
      });
  if (code == DSA_STATUS_OK) return absl::OkStatus();
  return AbslCallbackStatus(
      code, error,
      absl::StrCat("platform '", platform_id_, "': memcpy of ", bytes,
                   " bytes on a stream"));
}

absl::Status DeviceRuntime::SynchronizeStream(void* stream) const {
  if (!has_streams()) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has no streams"));
  }
  char error[kErrorSize] = {0};
  const DsaStatusCode code = Fallible(
      FaultSite::kStreamSynchronize, error, sizeof(error),
      [&] { return d_->stream_synchronize(stream, error, sizeof(error)); });
  if (code == DSA_STATUS_OK) return absl::OkStatus();
  return AbslCallbackStatus(
      code, error,
      absl::StrCat("platform '", platform_id_, "': stream synchronize"));
}

absl::Status DeviceRuntime::BindDevice(int ordinal) const {
  if (d_->device_bind == nullptr) {
    if (ordinal == 0) return absl::OkStatus();
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has one device (0); ",
                     "cannot bind device ", ordinal));
  }
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(
      d_->device_bind(ordinal, error, sizeof(error)), error,
      absl::StrCat("platform '", platform_id_, "': binding device ", ordinal));
}

bool DeviceRuntime::has_collectives() const {
  // The adapter admits all five or none.
  return d_->collective_create != nullptr;
}

namespace {
absl::Status NoCollectives(const std::string& platform_id) {
  return absl::UnimplementedError(absl::StrCat(
      "platform '", platform_id, "' has no collectives (plugin API 1.3)"));
}
}  // namespace

absl::StatusOr<void*> DeviceRuntime::CreateCollectiveGroup(
    absl::Span<const int32_t> ordinals) const {
  if (!has_collectives()) return NoCollectives(platform_id_);
  if (ordinals.empty() ||
      ordinals.size() >
          static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("platform '", platform_id_,
                                                   "': a collective group of ",
                                                   ordinals.size(), " ranks"));
  }
  void* group = nullptr;
  char error[kErrorSize] = {0};
  DSA_RETURN_IF_ERROR(AbslCallbackStatus(
      d_->collective_create(static_cast<int32_t>(ordinals.size()),
                            ordinals.data(), &group, error, sizeof(error)),
      error,
      absl::StrCat("platform '", platform_id_, "': creating a group of ",
                   ordinals.size(), " ranks")));
  if (group == nullptr) {
    return absl::InternalError(absl::StrCat(
        "platform '", platform_id_, "' created a NULL collective group"));
  }
  return group;
}

absl::Status DeviceRuntime::AbortCollectiveGroup(void* group) const {
  if (!has_collectives()) return NoCollectives(platform_id_);
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(d_->collective_abort(group, error, sizeof(error)),
                            error,
                            absl::StrCat("platform '", platform_id_,
                                         "': aborting a collective group"));
}

absl::Status DeviceRuntime::DestroyCollectiveGroup(void* group) const {
  if (!has_collectives()) return NoCollectives(platform_id_);
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(d_->collective_destroy(group, error, sizeof(error)),
                            error,
                            absl::StrCat("platform '", platform_id_,
                                         "': destroying a collective group"));
}

absl::Status DeviceRuntime::AllReduceSum(void* group, int rank, void* buffer,
                                         size_t count,
                                         DsaCollectiveElement element,
                                         void* stream) const {
  if (!has_collectives()) return NoCollectives(platform_id_);
  char error[kErrorSize] = {0};
  const DsaStatusCode code =
      Fallible(FaultSite::kCollective, error, sizeof(error), [&] {
        return d_->all_reduce_sum(group, rank, buffer, count, element, stream,
                                  error, sizeof(error));
      });
  if (code == DSA_STATUS_OK) return absl::OkStatus();
  return AbslCallbackStatus(
      code, error,
      absl::StrCat("platform '", platform_id_, "': all-reduce of ", count,
                   " elements on rank ", rank));
}

absl::Status DeviceRuntime::AllGather(void* group, int rank, const void* send,
                                      void* recv, size_t bytes,
                                      void* stream) const {
  if (!has_collectives()) return NoCollectives(platform_id_);
  char error[kErrorSize] = {0};
  const DsaStatusCode code =
      Fallible(FaultSite::kCollective, error, sizeof(error), [&] {
        return d_->all_gather(group, rank, send, recv, bytes, stream, error,
                              sizeof(error));
      });
  if (code == DSA_STATUS_OK) return absl::OkStatus();
  return AbslCallbackStatus(
      code, error,
      absl::StrCat("platform '", platform_id_, "': all-gather of ", bytes,
                   " bytes a rank on rank ", rank));
}

bool DeviceRuntime::has_graphs() const {
  // The adapter admits all four or none.
  return d_->graph_capture_begin != nullptr;
}

namespace {
absl::Status NoGraphs(const std::string& platform_id) {
  return absl::UnimplementedError(absl::StrCat(
      "platform '", platform_id, "' has no graphs (plugin API 1.4)"));
}
}  // namespace

absl::Status DeviceRuntime::BeginGraphCapture(void* stream) const {
  if (!has_graphs()) return NoGraphs(platform_id_);
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(
      d_->graph_capture_begin(stream, error, sizeof(error)), error,
      absl::StrCat("platform '", platform_id_, "': beginning a graph capture"));
}

absl::StatusOr<void*> DeviceRuntime::EndGraphCapture(void* stream) const {
  if (!has_graphs()) return NoGraphs(platform_id_);
  void* graph = nullptr;
  char error[kErrorSize] = {0};
  DSA_RETURN_IF_ERROR(AbslCallbackStatus(
      d_->graph_capture_end(stream, &graph, error, sizeof(error)), error,
      absl::StrCat("platform '", platform_id_, "': ending a graph capture")));
  if (graph == nullptr) {
    return absl::InternalError(
        absl::StrCat("platform '", platform_id_, "' captured a NULL graph"));
  }
  return graph;
}

absl::Status DeviceRuntime::LaunchGraph(void* graph, void* stream) const {
  if (!has_graphs()) return NoGraphs(platform_id_);
  char error[kErrorSize] = {0};
  const DsaStatusCode code =
      d_->graph_launch(graph, stream, error, sizeof(error));
  if (code == DSA_STATUS_OK) return absl::OkStatus();
  return AbslCallbackStatus(
      code, error,
      absl::StrCat("platform '", platform_id_, "': launching a graph"));
}

absl::Status DeviceRuntime::DestroyGraph(void* graph) const {
  if (!has_graphs()) return NoGraphs(platform_id_);
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(
      d_->graph_destroy(graph, error, sizeof(error)), error,
      absl::StrCat("platform '", platform_id_, "': destroying a graph"));
}

bool DeviceRuntime::has_host_registration() const {
  // The adapter admits both or none.
  return d_->host_register != nullptr;
}

absl::Status DeviceRuntime::RegisterHostMemory(void* ptr, size_t bytes) const {
  if (!has_host_registration()) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_,
                     "' cannot page-lock host memory (plugin API 1.5)"));
  }
  if (ptr == nullptr || bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("platform '", platform_id_, "': page-locking ", bytes,
                     " bytes at ", ptr == nullptr ? "NULL" : "a pointer",
                     "; a buffer of at least one byte is needed"));
  }
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(
      d_->host_register(ptr, bytes, error, sizeof(error)), error,
      absl::StrCat("platform '", platform_id_, "': page-locking ", bytes,
                   " bytes of host memory"));
}

absl::Status DeviceRuntime::UnregisterHostMemory(void* ptr) const {
  if (!has_host_registration()) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_,
                     "' cannot page-lock host memory (plugin API 1.5)"));
  }
  char error[kErrorSize] = {0};
  return AbslCallbackStatus(
      d_->host_unregister(ptr, error, sizeof(error)), error,
      absl::StrCat("platform '", platform_id_,
                   "': unlocking registered host memory"));
}

absl::StatusOr<RegisteredHostMemory> RegisteredHostMemory::Register(
    const DeviceRuntime& runtime, void* ptr, size_t bytes) {
  if (!runtime.has_host_registration()) return RegisteredHostMemory();
  const absl::Status registered = runtime.RegisterHostMemory(ptr, bytes);
  // A platform that has the calls may still answer that its runtime cannot
  // (an old driver): the memory stays pageable.
  if (absl::IsUnimplemented(registered)) return RegisteredHostMemory();
  DSA_RETURN_IF_ERROR(registered);
  return RegisteredHostMemory(runtime, ptr);
}

RegisteredHostMemory::RegisteredHostMemory(
    RegisteredHostMemory&& other) noexcept
    : runtime_(std::move(other.runtime_)),
      ptr_(std::exchange(other.ptr_, nullptr)) {}

RegisteredHostMemory& RegisteredHostMemory::operator=(
    RegisteredHostMemory&& other) noexcept {
  if (this != &other) {
    Release();
    runtime_ = std::move(other.runtime_);
    ptr_ = std::exchange(other.ptr_, nullptr);
  }
  return *this;
}

RegisteredHostMemory::~RegisteredHostMemory() { Release(); }

void RegisteredHostMemory::Release() {
  // A failure here leaves the pages locked until the process ends; there
  // is no caller to tell.
  if (ptr_ != nullptr) (void)runtime_->UnregisterHostMemory(ptr_);
  ptr_ = nullptr;
}

// ---------------------------------------------------------------------------
// Registry

Registry::Registry() = default;
Registry::~Registry() = default;

Registry& Registry::Global() {
  static Registry* const registry = new Registry();
  return *registry;
}

absl::Status Registry::Register(const RegistrationBatch& batch) {
  PluginRegistrations registrations;
  registrations.plugin_name = batch.plugin_name;
  for (const DsaPlatformDescriptor& raw : batch.platforms) {
    DsaPlatformDescriptor d;
    DSA_RETURN_IF_ERROR(ToAbsl(NormalizePlatformDescriptor(&raw, &d)));
    registrations.platforms.push_back(d);
  }
  for (const DsaKernelDescriptor& raw : batch.kernels) {
    DsaKernelDescriptor k;
    DSA_RETURN_IF_ERROR(ToAbsl(NormalizeKernelDescriptor(&raw, &k)));
    registrations.kernels.push_back(k);
  }
  return ToAbsl(Commit(registrations));
}

absl::Status Registry::RegisterPlugin(const DsaPluginApi* api) {
  return ToAbsl(InitializePlugin(api, *this));
}

absl::Status Registry::LoadPlugin(const std::string& path) {
  return ToAbsl(LoadPluginFile(path, *this));
}

absl::Status Registry::LoadPlugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) DSA_RETURN_IF_ERROR(LoadPlugin(path));
  return absl::OkStatus();
}

bool Registry::HasPlugin(const std::string& plugin_name) const {
  absl::MutexLock lock(&mu_);
  return plugins_.count(plugin_name) > 0;
}

bool Registry::HasPluginFile(const PluginFileIdentity& file) const {
  absl::MutexLock lock(&mu_);
  return std::find(plugin_files_.begin(), plugin_files_.end(), file) !=
         plugin_files_.end();
}

Status Registry::Commit(const PluginRegistrations& r) {
  absl::MutexLock lock(&mu_);
  // Everything is checked before anything changes.
  if (!r.plugin_name.empty() && plugins_.count(r.plugin_name) > 0) {
    return Status(DSA_STATUS_ALREADY_EXISTS,
                  StrCat("plugin '", r.plugin_name, "' is already loaded"));
  }
  if (r.file.has_value() &&
      std::find(plugin_files_.begin(), plugin_files_.end(), *r.file) !=
          plugin_files_.end()) {
    return Status(DSA_STATUS_ALREADY_EXISTS,
                  "the plugin's file is already loaded");
  }
  std::set<std::string> new_platforms;
  for (const DsaPlatformDescriptor& d : r.platforms) {
    const std::string id = d.platform_id;
    if (platforms_.count(id) > 0) {
      return Status(DSA_STATUS_ALREADY_EXISTS,
                    StrCat("platform '", id, "' is already registered (by '",
                           platforms_.find(id)->second->plugin_name, "')"));
    }
    if (!new_platforms.insert(id).second) {
      return Status(
          DSA_STATUS_ALREADY_EXISTS,
          StrCat("platform '", id, "' is registered twice in one batch"));
    }
  }
  std::set<std::pair<std::string, std::string>> new_kernels;
  for (const DsaKernelDescriptor& k : r.kernels) {
    std::pair<std::string, std::string> key(k.op_name, k.platform_id);
    if (kernels_.count(key) > 0) {
      return Status(DSA_STATUS_ALREADY_EXISTS,
                    StrCat("kernel '", key.first, "' for platform '",
                           key.second, "' is already registered (by '",
                           kernels_.find(key)->second.plugin_name, "')"));
    }
    if (!new_kernels.insert(key).second) {
      return Status(DSA_STATUS_ALREADY_EXISTS,
                    StrCat("kernel '", key.first, "' for platform '",
                           key.second, "' is registered twice in one batch"));
    }
    if (platforms_.count(key.second) == 0 &&
        new_platforms.count(key.second) == 0) {
      return Status(DSA_STATUS_NOT_FOUND,
                    StrCat("kernel '", key.first, "' names platform '",
                           key.second, "', which is not registered"));
    }
  }

  if (!r.plugin_name.empty()) plugins_.insert(r.plugin_name);
  if (r.file.has_value()) plugin_files_.push_back(*r.file);
  for (const DsaPlatformDescriptor& d : r.platforms) {
    auto entry = std::make_unique<Platform::Entry>();
    entry->id = d.platform_id;
    entry->kind = KindFromC(d.kind);
    entry->is_accelerator = d.is_accelerator != 0;
    entry->default_arch = d.default_arch;
    for (size_t i = 0; i < d.num_known_archs; ++i) {
      entry->known_archs.emplace_back(d.known_archs[i]);
    }
    entry->plugin_name = r.plugin_name;
    // The normalised copy (this host's struct size), never the plugin's raw
    // struct. The registry owns copies of the strings; the callbacks stay
    // the plugin's (it is never unloaded once registered).
    entry->descriptor = d;
    entry->descriptor.platform_id = entry->id.c_str();
    entry->descriptor.default_arch = entry->default_arch.c_str();
    entry->descriptor.known_archs = nullptr;
    entry->descriptor.num_known_archs = 0;
    platforms_.emplace(entry->id, std::move(entry));
  }
  for (const DsaKernelDescriptor& k : r.kernels) {
    kernels_.emplace(
        std::make_pair(std::string(k.op_name), std::string(k.platform_id)),
        KernelEntry{k.op_abi_version, k.fn, r.plugin_name});
  }
  return OkStatus();
}

absl::StatusOr<Platform> Registry::GetPlatform(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  auto it = platforms_.find(id);
  if (it == platforms_.end()) {
    std::vector<std::string> ids;
    for (const auto& [key, unused] : platforms_) ids.push_back(key);
    return absl::NotFoundError(
        absl::StrCat("platform '", id, "' is not registered (registered: ",
                     ids.empty() ? "none" : absl::StrJoin(ids, ", "), ")"));
  }
  return Platform(it->second.get());
}

std::vector<std::string> Registry::PlatformIds() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [id, unused] : platforms_) ids.push_back(id);
  return ids;
}

bool Registry::HasPlatform(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  return platforms_.find(id) != platforms_.end();
}

absl::StatusOr<const void*> Registry::FindKernel(
    absl::string_view op, uint32_t op_abi_version,
    absl::string_view platform) const {
  absl::MutexLock lock(&mu_);
  auto it =
      kernels_.find(std::make_pair(std::string(op), std::string(platform)));
  if (it == kernels_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "no kernel '", op, "' is registered for platform '", platform, "'"));
  }
  if (it->second.op_abi_version != op_abi_version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel '", op, "' for platform '", platform,
        "' was registered with op ABI version ", it->second.op_abi_version,
        " (by '", it->second.plugin_name, "'), but version ", op_abi_version,
        " was asked for"));
  }
  return it->second.fn;
}

std::vector<std::string> Registry::KernelOps(absl::string_view platform) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ops;
  for (const auto& [key, unused] : kernels_) {
    if (key.second == platform) ops.push_back(key.first);
  }
  return ops;
}

void Registry::SelectPlatform(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  selected_ = std::string(id);
}

void Registry::ClearPlatformSelection() {
  absl::MutexLock lock(&mu_);
  selected_.reset();
}

std::optional<std::string> Registry::selected_platform() const {
  absl::MutexLock lock(&mu_);
  return selected_;
}

absl::StatusOr<Platform> Registry::ActivePlatform() const {
  std::optional<std::string> selected;
  std::vector<const Platform::Entry*> accelerators;
  const Platform::Entry* cpu = nullptr;
  {
    absl::MutexLock lock(&mu_);
    selected = selected_;
    for (const auto& [id, entry] : platforms_) {
      if (entry->is_accelerator) {
        accelerators.push_back(entry.get());
      } else if (cpu == nullptr) {
        cpu = entry.get();
      }
    }
  }
  if (selected.has_value()) return GetPlatform(*selected);

  // Entries are never removed, so probing outside the lock is safe; it may
  // load a GPU runtime and should not hold up other lookups.
  std::vector<std::string> with_devices;
  const Platform::Entry* chosen = nullptr;
  for (const Platform::Entry* entry : accelerators) {
    absl::StatusOr<DeviceInfo> info = Platform(entry).ProbeDevices();
    if (info.ok() && info->device_count > 0) {
      with_devices.push_back(
          absl::StrCat(entry->id, " (", info->device_count,
                       info->device_count == 1 ? " device" : " devices", ")"));
      chosen = entry;
    }
  }
  if (with_devices.size() > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("several accelerator platforms report devices: ",
                     absl::StrJoin(with_devices, ", "),
                     "; choose one explicitly (--platform=)"));
  }
  if (chosen != nullptr) return Platform(chosen);
  if (cpu == nullptr) {
    return absl::NotFoundError(
        "no accelerator platform reports a device and no CPU platform is "
        "registered");
  }
  return Platform(cpu);
}

}  // namespace dsa::platform
