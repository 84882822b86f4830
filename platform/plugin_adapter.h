// The host side of the plugin C ABI (plugin_api.h), free of Abseil: loading
// a plugin shared object, checking its API version and struct sizes,
// normalising what it registers into this host's struct layout, and turning
// its status codes into dsa::Status. It needs nothing but the C++ standard
// library (and libdl), so any host can use it: the project's registry
// (platform/registry.h) and a host without Abseil such as a PyTorch
// extension, each through a PluginSink of its own.
//
// Normalisation: a plugin built against an older minor version hands over
// shorter structs. The adapter reads at most struct_size bytes of each, and
// keeps a copy of this host's size whose fields the plugin did not write are
// zero, i.e. absent; it never keeps the plugin's raw struct. A plugin of
// another major version is refused before its initialize runs.
#ifndef DSA_PLATFORM_PLUGIN_ADAPTER_H_
#define DSA_PLATFORM_PLUGIN_ADAPTER_H_

#include <optional>
#include <string>
#include <vector>

#include "platform/core_status.h"
#include "platform/plugin_api.h"
#include "platform/plugin_file.h"

namespace dsa::platform {

// What one plugin registered, normalised and validated.
struct PluginRegistrations {
  std::string plugin_name;
  // The file it was loaded from, when it was loaded from one.
  std::optional<PluginFileIdentity> file;
  // Copies of this host's struct size. Strings and callbacks still point
  // into the plugin, which is never unloaded once it registered.
  std::vector<DsaPlatformDescriptor> platforms;
  std::vector<DsaKernelDescriptor> kernels;
};

// Where a host keeps what plugins register.
class PluginSink {
 public:
  virtual ~PluginSink() = default;
  // Whether a plugin of this name, or loaded from this file, has registered.
  virtual bool HasPlugin(const std::string& plugin_name) const = 0;
  virtual bool HasPluginFile(const PluginFileIdentity& file) const = 0;
  // Takes all of `registrations` or nothing (AlreadyExists on a conflict,
  // which includes a plugin name or file already there).
  virtual Status Commit(const PluginRegistrations& registrations) = 0;
};

// Reads a descriptor of the writer's struct_size (at most that many bytes)
// into one of this host's size and validates it: InvalidArgument naming the
// field at fault.
Status NormalizePlatformDescriptor(const DsaPlatformDescriptor* raw,
                                   DsaPlatformDescriptor* out);
Status NormalizeKernelDescriptor(const DsaKernelDescriptor* raw,
                                 DsaKernelDescriptor* out);

// Checks the plugin's API table (struct size, major version, initialize),
// refuses a plugin whose name `sink` has, calls initialize with host
// functions that normalise and stage each registration, and commits them to
// `sink` when initialize returns OK. Nothing reaches `sink` on any error.
// On success, *plugin_name (when not null) is the name it registered under.
Status InitializePlugin(const DsaPluginApi* api, PluginSink& sink,
                        const std::optional<PluginFileIdentity>& file = {},
                        std::string* plugin_name = nullptr);

// Loads a plugin shared object and initializes it into `sink`. `path` must
// name a regular file holding a complete ELF shared object for this host
// whose headers and dynamic section the dynamic loader can follow
// (OpenCheckedPluginFile: never a fifo, a directory or a device; a bare name
// is refused rather than looked up on the library path); a file `sink` has
// loaded already, under any name, is refused before anything of it runs.
// The file is opened once and what is loaded is the sealed copy that was
// checked (plugin_file.h), so a file renamed, truncated or rewritten
// meanwhile is never half-loaded; the same file loaded again (into another
// sink) gets the object already loaded, as dlopen of the file would. A
// plugin that fails is closed again; one
// that registered stays loaded for the life of the process, and then
// *plugin_name (when not null) is the name it registered under.
Status LoadPluginFile(const std::string& path, PluginSink& sink,
                      std::string* plugin_name = nullptr);

// Status of a plugin callback: its code and the message it wrote, prefixed
// with `what`. A code outside absl's range is a plugin bug (Internal).
Status CallbackStatus(DsaStatusCode code, const char* error,
                      const std::string& what);

// The static capabilities of `arch` from a normalised descriptor. Fields
// past the struct_size the plugin wrote read as zero; a record shorter than
// API 1.0's is Internal.
Status QueryCapabilities(const DsaPlatformDescriptor& platform,
                         const std::string& arch, DsaCapabilities* out);

// The plugin's device probe (OK with device_count 0 when probe_devices is
// NULL). Strings come back NUL-terminated.
Status QueryDevices(const DsaPlatformDescriptor& platform, DsaDeviceInfo* out);

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_PLUGIN_ADAPTER_H_
