// The host side of run-time plugin loading: dlopen a plugin shared object,
// find its one exported symbol (DsaGetPluginApi), check its API version and
// let it register into a registry.
//
// Each plugin takes effect entirely or not at all: a load that fails (file
// missing, symbol missing, wrong major version, initialize failing, or a
// registration that collides with one already there) returns a Status naming
// the file and the cause, and leaves the registry unchanged. A plugin that
// registered is never unloaded, since the registry keeps its callbacks.
#ifndef DSA_TESTING_PLUGIN_LOADER_H_
#define DSA_TESTING_PLUGIN_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "platform/registry.h"

namespace dsa::testing {

absl::Status LoadPlugin(platform::Registry& registry, const std::string& path);

// Loads the plugins in order and stops at the first failure, whose Status
// names the plugin; the ones before it stay loaded.
absl::Status LoadPlugins(platform::Registry& registry,
                         absl::Span<const std::string> paths);

}  // namespace dsa::testing

#endif  // DSA_TESTING_PLUGIN_LOADER_H_
