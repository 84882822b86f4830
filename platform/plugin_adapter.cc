#include "platform/plugin_adapter.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dsa::platform {
namespace {

constexpr size_t kErrorSize = 512;
constexpr size_t kMaxIdLength = 64;
// More architectures than any platform has; a larger count is garbage.
constexpr size_t kMaxKnownArchs = 256;

// Plugin strings are read with a bound, so an unterminated one cannot make
// the host read far past it.
bool ValidId(const char* id) {
  if (id == nullptr) return false;
  const size_t n = strnlen(id, kMaxIdLength + 1);
  if (n == 0 || n > kMaxIdLength) return false;
  for (size_t i = 0; i < n; ++i) {
    const char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

bool ValidArchName(const char* arch) {
  if (arch == nullptr) return false;
  const size_t n = strnlen(arch, DSA_ARCH_NAME_SIZE);
  return n > 0 && n < DSA_ARCH_NAME_SIZE;
}

// Bytes of a struct up to and including `field`: the least a writer of API
// 1.0 provides.
#define DSA_SIZE_THROUGH(Struct, field) \
  (offsetof(Struct, field) + sizeof(Struct::field))

constexpr size_t kMinPlatformDescriptorSize =
    DSA_SIZE_THROUGH(DsaPlatformDescriptor, capabilities_for_arch);
constexpr size_t kMinKernelDescriptorSize =
    DSA_SIZE_THROUGH(DsaKernelDescriptor, fn);
constexpr size_t kMinCapabilitiesSize =
    DSA_SIZE_THROUGH(DsaCapabilities, sparse_mla_decode_context_parallel);
constexpr size_t kMinDeviceInfoSize =
    DSA_SIZE_THROUGH(DsaDeviceInfo, runtime_version);
constexpr size_t kMinPluginApiSize = DSA_SIZE_THROUGH(DsaPluginApi, initialize);

// The bytes of a T whose writer said `struct_size` that hold whole fields:
// an older writer's struct_size is its sizeof, a multiple of T's alignment,
// so rounding down to that alignment keeps every field it wrote and drops a
// field a bogus size would cut in two (half a function pointer, say).
template <class T>
size_t WholeFieldBytes(size_t struct_size) {
  return std::min(struct_size, sizeof(T)) / alignof(T) * alignof(T);
}

// Copies the whole fields within the writer's struct_size of `raw` into a
// zeroed T and sets its struct_size to sizeof(T). Reads nothing past the
// writer's struct_size.
template <class T>
T ReadBounded(const T* raw) {
  T out;
  std::memset(&out, 0, sizeof(out));
  std::memcpy(&out, raw, WholeFieldBytes<T>(raw->struct_size));
  out.struct_size = sizeof(T);
  return out;
}

Status ValidatePlatformDescriptor(const DsaPlatformDescriptor& d) {
  if (!ValidId(d.platform_id)) {
    return InvalidArgumentError(
        "platform descriptor: platform_id must be 1-64 characters of "
        "[a-z0-9_-]");
  }
  const std::string id = d.platform_id;
  if (d.kind < DSA_PLATFORM_KIND_CPU || d.kind > DSA_PLATFORM_KIND_CUDA) {
    return InvalidArgumentError(
        StrCat("platform '", id, "': unknown kind ", d.kind));
  }
  if ((d.kind == DSA_PLATFORM_KIND_CPU) == (d.is_accelerator != 0)) {
    return InvalidArgumentError(
        StrCat("platform '", id,
               "': is_accelerator must be 0 for the CPU kind and 1 otherwise"));
  }
  const int streams =
      (d.stream_create != nullptr) + (d.stream_destroy != nullptr) +
      (d.memcpy_async != nullptr) + (d.stream_synchronize != nullptr);
  if (streams != 0 && streams != 4) {
    return InvalidArgumentError(
        StrCat("platform '", id,
               "': stream_create, stream_destroy, memcpy_async and "
               "stream_synchronize must be all set or all NULL; ",
               streams, " of the 4 are set"));
  }
  const int collectives =
      (d.collective_create != nullptr) + (d.collective_abort != nullptr) +
      (d.collective_destroy != nullptr) + (d.all_reduce_sum != nullptr) +
      (d.all_gather != nullptr);
  if (collectives != 0 && collectives != 5) {
    return InvalidArgumentError(
        StrCat("platform '", id,
               "': collective_create, collective_abort, collective_destroy, "
               "all_reduce_sum and all_gather must be all set or all NULL; ",
               collectives, " of the 5 are set"));
  }
  const int graphs = (d.graph_capture_begin != nullptr) +
                     (d.graph_capture_end != nullptr) +
                     (d.graph_launch != nullptr) + (d.graph_destroy != nullptr);
  if (graphs != 0 && graphs != 4) {
    return InvalidArgumentError(
        StrCat("platform '", id,
               "': graph_capture_begin, graph_capture_end, graph_launch and "
               "graph_destroy must be all set or all NULL; ",
               graphs, " of the 4 are set"));
  }
  if ((d.host_register != nullptr) != (d.host_unregister != nullptr)) {
    return InvalidArgumentError(
        StrCat("platform '", id,
               "': host_register and host_unregister must be both set or "
               "both NULL"));
  }
  if (d.capabilities_for_arch == nullptr) {
    return InvalidArgumentError(
        StrCat("platform '", id, "': capabilities_for_arch is NULL"));
  }
  if (d.known_archs == nullptr || d.num_known_archs == 0 ||
      d.num_known_archs > kMaxKnownArchs) {
    return InvalidArgumentError(
        StrCat("platform '", id, "': num_known_archs ", d.num_known_archs,
               " with known_archs ", d.known_archs == nullptr ? "NULL" : "set",
               "; expected 1 to ", kMaxKnownArchs));
  }
  if (!ValidArchName(d.default_arch)) {
    return InvalidArgumentError(StrCat("platform '", id,
                                       "': default_arch must be 1-",
                                       DSA_ARCH_NAME_SIZE - 1, " characters"));
  }
  bool default_known = false;
  for (size_t i = 0; i < d.num_known_archs; ++i) {
    if (!ValidArchName(d.known_archs[i])) {
      return InvalidArgumentError(StrCat("platform '", id, "': known_archs[", i,
                                         "] is empty, NULL or longer than ",
                                         DSA_ARCH_NAME_SIZE - 1,
                                         " characters"));
    }
    default_known =
        default_known || std::strcmp(d.default_arch, d.known_archs[i]) == 0;
  }
  if (!default_known) {
    return InvalidArgumentError(
        StrCat("platform '", id, "': default_arch is not one of known_archs"));
  }
  return OkStatus();
}

// Collects what a plugin registers during initialize.
struct Staging {
  PluginRegistrations registrations;
};

DsaStatusCode StageRegisterPlatform(void* context,
                                    const DsaPlatformDescriptor* platform,
                                    char* error, size_t error_size) {
  if (context == nullptr || platform == nullptr) {
    return InvalidArgumentError("register_platform: NULL argument")
        .ToC(error, error_size);
  }
  DsaPlatformDescriptor d;
  const Status s = NormalizePlatformDescriptor(platform, &d);
  if (!s.ok()) return s.ToC(error, error_size);
  static_cast<Staging*>(context)->registrations.platforms.push_back(d);
  return DSA_STATUS_OK;
}

DsaStatusCode StageRegisterKernel(void* context,
                                  const DsaKernelDescriptor* kernel,
                                  char* error, size_t error_size) {
  if (context == nullptr || kernel == nullptr) {
    return InvalidArgumentError("register_kernel: NULL argument")
        .ToC(error, error_size);
  }
  DsaKernelDescriptor k;
  const Status s = NormalizeKernelDescriptor(kernel, &k);
  if (!s.ok()) return s.ToC(error, error_size);
  static_cast<Staging*>(context)->registrations.kernels.push_back(k);
  return DSA_STATUS_OK;
}

std::string PluginName(const DsaPluginApi& api) {
  if (api.plugin_name == nullptr) return "(unnamed)";
  const size_t n = strnlen(api.plugin_name, kMaxIdLength + 1);
  return EchoForMessage(std::string(api.plugin_name, n), kMaxIdLength);
}

}  // namespace

Status CallbackStatus(DsaStatusCode code, const char* error,
                      const std::string& what) {
  if (code == DSA_STATUS_OK) return OkStatus();
  const std::string message =
      error != nullptr && error[0] != '\0'
          ? std::string(error, strnlen(error, kErrorSize - 1))
          : std::string("no message");
  if (!IsKnownErrorCode(code)) {
    return InternalError(StrCat(what, ": unknown status code ",
                                static_cast<int>(code), ": ", message));
  }
  return Status(code, StrCat(what, ": ", message));
}

Status NormalizePlatformDescriptor(const DsaPlatformDescriptor* raw,
                                   DsaPlatformDescriptor* out) {
  if (raw == nullptr) {
    return InvalidArgumentError("platform descriptor is NULL");
  }
  if (raw->struct_size < kMinPlatformDescriptorSize) {
    return InvalidArgumentError(
        StrCat("platform descriptor struct_size ", raw->struct_size,
               " is smaller than the minimum ", kMinPlatformDescriptorSize));
  }
  const DsaPlatformDescriptor d = ReadBounded(raw);
  DSA_RETURN_IF_ERROR(ValidatePlatformDescriptor(d));
  *out = d;
  return OkStatus();
}

Status NormalizeKernelDescriptor(const DsaKernelDescriptor* raw,
                                 DsaKernelDescriptor* out) {
  if (raw == nullptr) return InvalidArgumentError("kernel descriptor is NULL");
  if (raw->struct_size < kMinKernelDescriptorSize) {
    return InvalidArgumentError(StrCat("kernel descriptor struct_size ",
                                       raw->struct_size, " is smaller than ",
                                       kMinKernelDescriptorSize));
  }
  const DsaKernelDescriptor k = ReadBounded(raw);
  if (!ValidId(k.op_name)) {
    return InvalidArgumentError(
        "kernel descriptor: op_name must be 1-64 characters of [a-z0-9_-]");
  }
  if (!ValidId(k.platform_id)) {
    return InvalidArgumentError(
        StrCat("kernel '", k.op_name,
               "': platform_id must be 1-64 characters of [a-z0-9_-]"));
  }
  if (k.fn == nullptr) {
    return InvalidArgumentError(StrCat("kernel '", k.op_name,
                                       "' for platform '", k.platform_id,
                                       "': fn is NULL"));
  }
  *out = k;
  return OkStatus();
}

Status InitializePlugin(const DsaPluginApi* api_ptr, PluginSink& sink,
                        const std::optional<PluginFileIdentity>& file,
                        std::string* plugin_name) {
  if (api_ptr == nullptr) {
    return InvalidArgumentError("plugin API table is NULL");
  }
  if (api_ptr->struct_size < kMinPluginApiSize) {
    return FailedPreconditionError(
        StrCat("plugin API table has struct_size ", api_ptr->struct_size,
               ", smaller than the ", kMinPluginApiSize, " bytes of API 1.0"));
  }
  const DsaPluginApi api = ReadBounded(api_ptr);
  const std::string name = PluginName(api);
  if (api.major_version != DSA_PLUGIN_API_MAJOR) {
    return FailedPreconditionError(
        StrCat("plugin '", name, "' was built for plugin API ",
               api.major_version, ".", api.minor_version, "; this host speaks ",
               DSA_PLUGIN_API_MAJOR, ".", DSA_PLUGIN_API_MINOR));
  }
  if (api.initialize == nullptr) {
    return InvalidArgumentError(
        StrCat("plugin '", name, "' has no initialize function"));
  }
  if (sink.HasPlugin(name)) {
    return Status(DSA_STATUS_ALREADY_EXISTS,
                  StrCat("plugin '", name, "' is already loaded"));
  }
  Staging staging;
  staging.registrations.plugin_name = name;
  staging.registrations.file = file;
  DsaHostApi host;
  std::memset(&host, 0, sizeof(host));
  host.struct_size = sizeof(host);
  host.major_version = DSA_PLUGIN_API_MAJOR;
  host.minor_version = DSA_PLUGIN_API_MINOR;
  host.context = &staging;
  host.register_platform = &StageRegisterPlatform;
  host.register_kernel = &StageRegisterKernel;
  char error[kErrorSize] = {0};
  const DsaStatusCode code = api.initialize(&host, error, sizeof(error));
  error[sizeof(error) - 1] = '\0';
  DSA_RETURN_IF_ERROR(CallbackStatus(
      code, error, StrCat("plugin '", name, "' failed to initialize")));
  const Status committed = sink.Commit(staging.registrations);
  if (!committed.ok()) {
    return Status(committed.code(),
                  StrCat("plugin '", name, "': ", committed.message()));
  }
  if (plugin_name != nullptr) *plugin_name = name;
  return OkStatus();
}

namespace {

// Whether the dynamic loader holds an object opened by the name `path`
// (a dlopen of that name would return it instead of opening the file).
bool NameIsLoaded(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  dlerror();
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

// The copies this process loaded and holds, by the identity of the file each
// was made from: a file loaded again (into another sink) gets the object
// already loaded, as dlopen of the file itself would give, rather than a
// second copy of its code and state. Each entry's copy and file stay open
// (CheckedPluginFile::KeepOpen), so neither its name nor its identity can
// come to mean another file.
class LoadedCopies {
 public:
  static LoadedCopies& Get() {
    static LoadedCopies* copies = new LoadedCopies();  // never destroyed
    return *copies;
  }
  std::string Find(const PluginFileIdentity& file) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = load_paths_.find({file.device, file.inode});
    return it == load_paths_.end() ? std::string() : it->second;
  }
  void Add(const PluginFileIdentity& file, const std::string& load_path) {
    std::lock_guard<std::mutex> lock(mu_);
    load_paths_.emplace(std::make_pair(file.device, file.inode), load_path);
  }

 private:
  std::mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, std::string> load_paths_;
};

// dlerror's text without the name of the memory file it was loaded from,
// which means nothing to the user (the message names the plugin's path).
std::string DlopenError(const std::string& load_path) {
  const char* e = dlerror();
  std::string text = e != nullptr ? e : "dlopen failed";
  const std::string prefix = load_path + ": ";
  if (text.compare(0, prefix.size(), prefix) == 0) {
    text = text.substr(prefix.size());
  }
  return EchoForMessage(text, 300);
}

}  // namespace

Status LoadPluginFile(const std::string& path, PluginSink& sink,
                      std::string* plugin_name) {
  const std::string shown = EchoForMessage(path, kMaxEchoedPathChars);
  struct stat st;
  if (path.find('/') != std::string::npos && ::stat(path.c_str(), &st) != 0 &&
      errno == ENOENT) {
    return Status(DSA_STATUS_NOT_FOUND,
                  StrCat("cannot load plugin ", shown, ": no such file"));
  }
  // Opened once and checked on a sealed copy of its loaded bytes, which is
  // what dlopen loads (plugin_file.h): whatever happens to the file at
  // `path` from here on, the object loaded is the one checked.
  CheckedPluginFile file;
  std::string why;
  if (!OpenCheckedPluginFile(path, &file, &why)) {
    return InvalidArgumentError(StrCat("cannot load plugin: ", why));
  }
  if (sink.HasPluginFile(file.identity())) {
    return Status(DSA_STATUS_ALREADY_EXISTS,
                  StrCat("plugin ", shown, " is already loaded"));
  }
  // The object already loaded from this file, when there is one (it was
  // checked then, and the file is checked again above).
  std::string load_path = LoadedCopies::Get().Find(file.identity());
  void* handle = nullptr;
  if (!load_path.empty()) {
    handle = dlopen(load_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    dlerror();
  }
  const bool new_copy = handle == nullptr;
  if (new_copy) {
    // The copies of earlier loads keep their descriptors, so their names
    // are not reused; this guards against one closed behind the loader's
    // back.
    for (int attempt = 0; NameIsLoaded(file.load_path()); ++attempt) {
      if (attempt == 16 || !file.Renumber(&why)) {
        return InternalError(StrCat("cannot load plugin ", shown,
                                    ": no free name for its memory file",
                                    why.empty() ? "" : ": ", why));
      }
    }
    // RTLD_LOCAL: a plugin's symbols never satisfy another's; it reaches
    // the host only through its API table.
    load_path = file.load_path();
    handle = dlopen(load_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      return InvalidArgumentError(
          StrCat("cannot load plugin ", shown, ": ", DlopenError(load_path)));
    }
  }
  // A new copy the loader holds from now on: kept open and found again.
  auto keep = [&] {
    if (!new_copy) return;
    file.KeepOpen();
    LoadedCopies::Get().Add(file.identity(), load_path);
  };
  // Whatever fails from here closes the handle again: nothing of the plugin
  // was registered, so nothing refers to its code. An object that stays
  // loaded (loaded before, or one the loader cannot unload: a C++ unique
  // symbol makes it so) keeps its copy.
  auto fail = [&](Status status) {
    dlclose(handle);
    if (NameIsLoaded(load_path)) keep();
    return status;
  };
  dlerror();
  auto get_api = reinterpret_cast<DsaGetPluginApiFn>(
      dlsym(handle, DSA_PLUGIN_GET_API_SYMBOL));
  if (get_api == nullptr) {
    return fail(Status(DSA_STATUS_NOT_FOUND,
                       StrCat("plugin ", shown, " does not export ",
                              DSA_PLUGIN_GET_API_SYMBOL)));
  }
  const DsaPluginApi* api = get_api();
  if (api == nullptr) {
    return fail(FailedPreconditionError(StrCat(
        "plugin ", shown, ": ", DSA_PLUGIN_GET_API_SYMBOL, " returned NULL")));
  }
  const Status status =
      InitializePlugin(api, sink, file.identity(), plugin_name);
  if (!status.ok()) {
    return fail(Status(status.code(), StrCat(shown, ": ", status.message())));
  }
  // Loaded for the life of the process: its name must keep naming its copy.
  keep();
  return OkStatus();
}

Status QueryCapabilities(const DsaPlatformDescriptor& platform,
                         const std::string& arch, DsaCapabilities* out) {
  const std::string id = platform.platform_id;
  DsaCapabilities c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  char error[kErrorSize] = {0};
  const DsaStatusCode code =
      platform.capabilities_for_arch(arch.c_str(), &c, error, sizeof(error));
  error[sizeof(error) - 1] = '\0';
  DSA_RETURN_IF_ERROR(CallbackStatus(
      code, error,
      StrCat("platform '", id, "' capabilities for '", arch, "'")));
  if (c.struct_size < kMinCapabilitiesSize || c.struct_size > sizeof(c)) {
    return InternalError(StrCat(
        "platform '", id, "' wrote a capability record of struct_size ",
        c.struct_size, "; expected ", kMinCapabilitiesSize, " to ", sizeof(c)));
  }
  // Fields past what the plugin wrote stay zero (absent).
  const size_t written = WholeFieldBytes<DsaCapabilities>(c.struct_size);
  std::memset(reinterpret_cast<char*>(&c) + written, 0, sizeof(c) - written);
  c.arch[sizeof(c.arch) - 1] = '\0';
  *out = c;
  return OkStatus();
}

Status QueryDevices(const DsaPlatformDescriptor& platform, DsaDeviceInfo* out) {
  const std::string id = platform.platform_id;
  DsaDeviceInfo info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (platform.probe_devices == nullptr) {
    *out = info;
    return OkStatus();
  }
  char error[kErrorSize] = {0};
  const DsaStatusCode code =
      platform.probe_devices(&info, error, sizeof(error));
  error[sizeof(error) - 1] = '\0';
  DSA_RETURN_IF_ERROR(
      CallbackStatus(code, error, StrCat("platform '", id, "' device probe")));
  if (info.struct_size < kMinDeviceInfoSize ||
      info.struct_size > sizeof(info) || info.device_count < 0) {
    return InternalError(
        StrCat("platform '", id, "' wrote a malformed device record"));
  }
  const size_t written = WholeFieldBytes<DsaDeviceInfo>(info.struct_size);
  std::memset(reinterpret_cast<char*>(&info) + written, 0,
              sizeof(info) - written);
  info.arch[sizeof(info.arch) - 1] = '\0';
  info.name[sizeof(info.name) - 1] = '\0';
  *out = info;
  return OkStatus();
}

}  // namespace dsa::platform
