#include "testing/plugin_loader.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "platform/plugin_api.h"

namespace dsa::testing {

absl::Status LoadPlugin(platform::Registry& registry, const std::string& path) {
  // RTLD_LOCAL: a plugin's symbols never satisfy another's; it reaches the
  // host only through the API table.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    return absl::NotFoundError(absl::StrCat("cannot load plugin ", path, ": ",
                                            e != nullptr ? e : "dlopen failed"));
  }
  dlerror();
  auto get_api = reinterpret_cast<DsaGetPluginApiFn>(
      dlsym(handle, DSA_PLUGIN_GET_API_SYMBOL));
  if (get_api == nullptr) {
    dlclose(handle);
    return absl::NotFoundError(absl::StrCat("plugin ", path,
                                            " does not export ",
                                            DSA_PLUGIN_GET_API_SYMBOL));
  }
  const DsaPluginApi* api = get_api();
  if (api == nullptr) {
    dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin ", path, ": ", DSA_PLUGIN_GET_API_SYMBOL, " returned NULL"));
  }
  absl::Status status = registry.RegisterPlugin(api);
  if (!status.ok()) {
    // Nothing of the plugin was registered, so nothing refers to its code.
    // (When the same file is already loaded, this only drops a reference.)
    dlclose(handle);
    return absl::Status(status.code(),
                        absl::StrCat(path, ": ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status LoadPlugins(platform::Registry& registry,
                         absl::Span<const std::string> paths) {
  for (const std::string& path : paths) {
    absl::Status status = LoadPlugin(registry, path);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace dsa::testing
