#include "platform/registry.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/cpu/cpu_platform.h"
#include "platform/status_macros.h"

namespace dsa::platform {

absl::Status StatusFromC(DsaStatusCode code, absl::string_view message) {
  if (code == DSA_STATUS_OK) return absl::OkStatus();
  const int raw = static_cast<int>(code);
  // Only codes inside absl's range keep their meaning; anything else is a
  // plugin bug reported as internal.
  if (raw < 1 || raw > 16) {
    return absl::InternalError(
        absl::StrCat("unknown status code ", raw, ": ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(raw), message);
}

DsaStatusCode StatusToC(const absl::Status& status, char* error,
                        size_t error_size) {
  if (status.ok()) return DSA_STATUS_OK;
  if (error != nullptr && error_size > 0) {
    const size_t n = std::min(error_size - 1, status.message().size());
    std::memcpy(error, status.message().data(), n);
    error[n] = '\0';
  }
  return static_cast<DsaStatusCode>(static_cast<int>(status.code()));
}

namespace {

constexpr size_t kErrorSize = 512;

// Status from a plugin callback: its code plus the message it wrote.
absl::Status CallbackStatus(DsaStatusCode code, const char* error,
                            absl::string_view what) {
  if (code == DSA_STATUS_OK) return absl::OkStatus();
  absl::Status s = StatusFromC(code, error[0] != '\0' ? error : "no message");
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

bool ValidId(absl::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

// Bytes of DsaPlatformDescriptor up to and including capabilities_for_arch:
// the least a plugin must provide.
constexpr size_t kMinPlatformDescriptorSize =
    offsetof(DsaPlatformDescriptor, capabilities_for_arch) +
    sizeof(DsaPlatformDescriptor::capabilities_for_arch);
constexpr size_t kMinCapabilitiesSize =
    offsetof(DsaCapabilities, sparse_mla_decode_context_parallel) +
    sizeof(int32_t);
constexpr size_t kMinDeviceInfoSize =
    offsetof(DsaDeviceInfo, runtime_version) + sizeof(int32_t);


absl::Status ValidatePlatformDescriptor(const DsaPlatformDescriptor& d) {
  if (d.platform_id == nullptr || !ValidId(d.platform_id)) {
    return absl::InvalidArgumentError(
        "platform descriptor: platform_id must be 1-64 characters of "
        "[a-z0-9_-]");
  }
  const std::string id = d.platform_id;
  if (d.kind < DSA_PLATFORM_KIND_CPU || d.kind > DSA_PLATFORM_KIND_CUDA) {
    return absl::InvalidArgumentError(
        absl::StrCat("platform '", id, "': unknown kind ", d.kind));
  }
  if ((d.kind == DSA_PLATFORM_KIND_CPU) == (d.is_accelerator != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "platform '", id,
        "': is_accelerator must be 0 for the CPU kind and 1 otherwise"));
  }
  if (d.capabilities_for_arch == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("platform '", id, "': capabilities_for_arch is NULL"));
  }
  if (d.known_archs == nullptr || d.num_known_archs == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("platform '", id, "': no known_archs"));
  }
  bool default_known = false;
  for (size_t i = 0; i < d.num_known_archs; ++i) {
    if (d.known_archs[i] == nullptr || d.known_archs[i][0] == '\0') {
      return absl::InvalidArgumentError(
          absl::StrCat("platform '", id, "': known_archs[", i, "] is empty"));
    }
    if (d.default_arch != nullptr &&
        std::strcmp(d.default_arch, d.known_archs[i]) == 0) {
      default_known = true;
    }
  }
  if (!default_known) {
    return absl::InvalidArgumentError(absl::StrCat(
        "platform '", id, "': default_arch is not one of known_archs"));
  }
  return absl::OkStatus();
}

// Copies a descriptor of the plugin's struct_size into one of ours (fields an
// older plugin lacks stay zero, i.e. absent) and validates it.
absl::StatusOr<DsaPlatformDescriptor> NormalizePlatformDescriptor(
    const DsaPlatformDescriptor& in) {
  if (in.struct_size < kMinPlatformDescriptorSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "platform descriptor struct_size ", in.struct_size,
        " is smaller than the minimum ", kMinPlatformDescriptorSize));
  }
  DsaPlatformDescriptor out;
  std::memset(&out, 0, sizeof(out));
  std::memcpy(&out, &in, std::min(in.struct_size, sizeof(out)));
  out.struct_size = sizeof(out);
  DSA_RETURN_IF_ERROR(ValidatePlatformDescriptor(out));
  return out;
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

absl::Status ValidateKernelDescriptor(const DsaKernelDescriptor& k) {
  if (k.struct_size < sizeof(DsaKernelDescriptor)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel descriptor struct_size ", k.struct_size, " is smaller than ",
        sizeof(DsaKernelDescriptor)));
  }
  if (k.op_name == nullptr || !ValidId(k.op_name)) {
    return absl::InvalidArgumentError(
        "kernel descriptor: op_name must be 1-64 characters of [a-z0-9_-]");
  }
  if (k.platform_id == nullptr || !ValidId(k.platform_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel '", k.op_name, "': platform_id must be 1-64 characters of "
        "[a-z0-9_-]"));
  }
  if (k.fn == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel '", k.op_name, "' for platform '", k.platform_id,
        "': fn is NULL"));
  }
  return absl::OkStatus();
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
    return absl::InvalidArgumentError(
        absl::StrCat("platform '", entry_->id, "': ", parsed.status().message()));
  }
  const std::string name = DeviceArchName(*parsed);
  DsaCapabilities c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  char error[kErrorSize] = {0};
  DSA_RETURN_IF_ERROR(CallbackStatus(
      entry_->descriptor.capabilities_for_arch(name.c_str(), &c, error,
                                               sizeof(error)),
      error,
      absl::StrCat("platform '", entry_->id, "' capabilities for '", name,
                   "' (known: ", absl::StrJoin(entry_->known_archs, ", "),
                   ")")));
  if (c.struct_size < kMinCapabilitiesSize) {
    return absl::InternalError(absl::StrCat(
        "platform '", entry_->id, "' wrote a capability record of ",
        c.struct_size, " bytes, fewer than the ", kMinCapabilitiesSize,
        " required"));
  }
  PlatformCapabilities caps;
  caps.platform_id = entry_->id;
  caps.kind = entry_->kind;
  caps.is_accelerator = entry_->is_accelerator;
  c.arch[sizeof(c.arch) - 1] = '\0';
  absl::StatusOr<DeviceArch> reported = ParseDeviceArch(entry_->kind, c.arch);
  if (!reported.ok()) {
    return absl::InternalError(absl::StrCat(
        "platform '", entry_->id, "' reported an unparsable arch: ",
        reported.status().message()));
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
      return absl::InternalError(absl::StrCat(
          "platform '", entry_->id, "' reported unknown fp8 format ",
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
  if (entry_->descriptor.probe_devices == nullptr) {
    entry_->probe_result = DeviceInfo{};
    return entry_->probe_result;
  }
  DsaDeviceInfo raw;
  std::memset(&raw, 0, sizeof(raw));
  raw.struct_size = sizeof(raw);
  char error[kErrorSize] = {0};
  absl::Status s = CallbackStatus(
      entry_->descriptor.probe_devices(&raw, error, sizeof(error)), error,
      absl::StrCat("platform '", entry_->id, "' device probe"));
  if (!s.ok()) {
    entry_->probe_result = s;
  } else if (raw.struct_size < kMinDeviceInfoSize || raw.device_count < 0) {
    entry_->probe_result = absl::InternalError(absl::StrCat(
        "platform '", entry_->id, "' wrote a malformed device record"));
  } else {
    raw.arch[sizeof(raw.arch) - 1] = '\0';
    raw.name[sizeof(raw.name) - 1] = '\0';
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
  DSA_RETURN_IF_ERROR(CallbackStatus(
      d_->device_malloc(bytes, &ptr, error, sizeof(error)), error,
      absl::StrCat("platform '", platform_id_, "': allocating ", bytes,
                   " bytes")));
  if (ptr == nullptr && bytes > 0) {
    return absl::InternalError(absl::StrCat(
        "platform '", platform_id_, "' allocator returned NULL for ", bytes,
        " bytes"));
  }
  return ptr;
}

absl::Status DeviceRuntime::Free(void* ptr) const {
  if (d_->device_free == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("platform '", platform_id_, "' has no device allocator"));
  }
  char error[kErrorSize] = {0};
  return CallbackStatus(d_->device_free(ptr, error, sizeof(error)), error,
                        absl::StrCat("platform '", platform_id_, "': free"));
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
  return CallbackStatus(
      d_->device_memcpy(dst, src, bytes, kind, error, sizeof(error)), error,
      absl::StrCat("platform '", platform_id_, "': memcpy of ", bytes,
                   " bytes"));
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
  return CallbackStatus(d_->device_synchronize(error, sizeof(error)), error,
                        absl::StrCat("platform '", platform_id_,
                                     "': synchronize"));
}

// ---------------------------------------------------------------------------
// Registry

Registry::Registry() = default;
Registry::~Registry() = default;

Registry& Registry::Global() {
  static Registry* const registry = [] {
    auto* r = new Registry();
    // The CPU platform is built in. Registering it into an empty registry
    // cannot collide; should it ever fail, lookups of "cpu" say NotFound.
    r->RegisterPlugin(CpuPlatformPluginApi()).IgnoreError();
    return r;
  }();
  return *registry;
}

absl::Status Registry::Register(const RegistrationBatch& batch) {
  // Validate and normalise outside the lock.
  std::vector<DsaPlatformDescriptor> platforms;
  for (const DsaPlatformDescriptor& raw : batch.platforms) {
    DSA_ASSIGN_OR_RETURN(DsaPlatformDescriptor d,
                         NormalizePlatformDescriptor(raw));
    platforms.push_back(d);
  }
  for (const DsaKernelDescriptor& k : batch.kernels) {
    DSA_RETURN_IF_ERROR(ValidateKernelDescriptor(k));
  }

  absl::MutexLock lock(&mu_);
  std::set<std::string> new_platforms;
  for (const DsaPlatformDescriptor& d : platforms) {
    const std::string id = d.platform_id;
    if (platforms_.count(id) > 0) {
      return absl::AlreadyExistsError(absl::StrCat(
          "platform '", id, "' is already registered (by '",
          platforms_.find(id)->second->plugin_name, "')"));
    }
    if (!new_platforms.insert(id).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("platform '", id, "' is registered twice in one batch"));
    }
  }
  std::set<std::pair<std::string, std::string>> new_kernels;
  for (const DsaKernelDescriptor& k : batch.kernels) {
    std::pair<std::string, std::string> key(k.op_name, k.platform_id);
    if (kernels_.count(key) > 0) {
      return absl::AlreadyExistsError(absl::StrCat(
          "kernel '", key.first, "' for platform '", key.second,
          "' is already registered (by '",
          kernels_.find(key)->second.plugin_name, "')"));
    }
    if (!new_kernels.insert(key).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("kernel '", key.first, "' for platform '", key.second,
                       "' is registered twice in one batch"));
    }
    if (platforms_.count(key.second) == 0 &&
        new_platforms.count(key.second) == 0) {
      return absl::NotFoundError(absl::StrCat(
          "kernel '", key.first, "' names platform '", key.second,
          "', which is not registered"));
    }
  }

  // Commit.
  for (const DsaPlatformDescriptor& d : platforms) {
    auto entry = std::make_unique<Platform::Entry>();
    entry->id = d.platform_id;
    entry->kind = KindFromC(d.kind);
    entry->is_accelerator = d.is_accelerator != 0;
    entry->default_arch = d.default_arch;
    for (size_t i = 0; i < d.num_known_archs; ++i) {
      entry->known_archs.emplace_back(d.known_archs[i]);
    }
    entry->plugin_name = batch.plugin_name;
    entry->descriptor = d;
    // The registry owns copies of the strings; the callbacks stay the
    // plugin's (it is never unloaded once registered).
    entry->descriptor.platform_id = entry->id.c_str();
    entry->descriptor.default_arch = entry->default_arch.c_str();
    entry->descriptor.known_archs = nullptr;
    entry->descriptor.num_known_archs = 0;
    platforms_.emplace(entry->id, std::move(entry));
  }
  for (const DsaKernelDescriptor& k : batch.kernels) {
    kernels_.emplace(std::make_pair(std::string(k.op_name),
                                    std::string(k.platform_id)),
                     KernelEntry{k.op_abi_version, k.fn, batch.plugin_name});
  }
  return absl::OkStatus();
}

namespace {

// Collects what a plugin registers during initialize.
struct StagingContext {
  RegistrationBatch batch;
};

DsaStatusCode StageRegisterPlatform(void* context,
                                    const DsaPlatformDescriptor* platform,
                                    char* error, size_t error_size) {
  if (context == nullptr || platform == nullptr) {
    return StatusToC(
        absl::InvalidArgumentError("register_platform: NULL argument"), error,
        error_size);
  }
  absl::StatusOr<DsaPlatformDescriptor> d =
      NormalizePlatformDescriptor(*platform);
  if (!d.ok()) return StatusToC(d.status(), error, error_size);
  static_cast<StagingContext*>(context)->batch.platforms.push_back(*platform);
  return DSA_STATUS_OK;
}

DsaStatusCode StageRegisterKernel(void* context,
                                  const DsaKernelDescriptor* kernel,
                                  char* error, size_t error_size) {
  if (context == nullptr || kernel == nullptr) {
    return StatusToC(
        absl::InvalidArgumentError("register_kernel: NULL argument"), error,
        error_size);
  }
  absl::Status s = ValidateKernelDescriptor(*kernel);
  if (!s.ok()) return StatusToC(s, error, error_size);
  static_cast<StagingContext*>(context)->batch.kernels.push_back(*kernel);
  return DSA_STATUS_OK;
}

}  // namespace

absl::Status Registry::RegisterPlugin(const DsaPluginApi* api) {
  if (api == nullptr) {
    return absl::InvalidArgumentError("plugin API table is NULL");
  }
  constexpr size_t kMinApiSize =
      offsetof(DsaPluginApi, initialize) + sizeof(DsaPluginApi::initialize);
  if (api->struct_size < kMinApiSize) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin API table has struct_size ", api->struct_size,
        ", smaller than the ", kMinApiSize, " bytes of API 1.0"));
  }
  const std::string name =
      api->plugin_name != nullptr ? api->plugin_name : "(unnamed)";
  if (api->major_version != DSA_PLUGIN_API_MAJOR) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin '", name, "' was built for plugin API ", api->major_version,
        ".", api->minor_version, "; this host speaks ", DSA_PLUGIN_API_MAJOR,
        ".", DSA_PLUGIN_API_MINOR));
  }
  if (api->initialize == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("plugin '", name, "' has no initialize function"));
  }
  StagingContext staging;
  staging.batch.plugin_name = name;
  DsaHostApi host;
  std::memset(&host, 0, sizeof(host));
  host.struct_size = sizeof(host);
  host.major_version = DSA_PLUGIN_API_MAJOR;
  host.minor_version = DSA_PLUGIN_API_MINOR;
  host.context = &staging;
  host.register_platform = &StageRegisterPlatform;
  host.register_kernel = &StageRegisterKernel;
  char error[kErrorSize] = {0};
  const DsaStatusCode code = api->initialize(&host, error, sizeof(error));
  if (code != DSA_STATUS_OK) {
    absl::Status s = StatusFromC(code, error[0] != '\0' ? error : "no message");
    return absl::Status(s.code(), absl::StrCat("plugin '", name,
                                               "' failed to initialize: ",
                                               s.message()));
  }
  absl::Status s = Register(staging.batch);
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("plugin '", name, "': ", s.message()));
  }
  return absl::OkStatus();
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
  auto it = kernels_.find(
      std::make_pair(std::string(op), std::string(platform)));
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
      with_devices.push_back(absl::StrCat(entry->id, " (", info->device_count,
                                          info->device_count == 1 ? " device"
                                                                  : " devices",
                                          ")"));
      chosen = entry;
    }
  }
  if (with_devices.size() > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "several accelerator platforms report devices: ",
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
