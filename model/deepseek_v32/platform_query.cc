#include "model/deepseek_v32/platform_query.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dsa::model::deepseek_v32 {

absl::StatusOr<platform::PlatformCapabilities> QueryCapabilities(
    const platform::Registry& registry, absl::string_view platform_id,
    absl::string_view arch) {
  absl::StatusOr<platform::Platform> found =
      platform_id.empty() ? registry.ActivePlatform()
                          : registry.GetPlatform(platform_id);
  if (!found.ok()) {
    if (!platform_id.empty() && absl::IsNotFound(found.status())) {
      return absl::NotFoundError(absl::StrCat(
          "unknown platform \"", platform_id,
          "\"; registered: ", absl::StrJoin(registry.PlatformIds(), ", ")));
    }
    return found.status();
  }
  if (arch.empty()) return found->Capabilities();
  return found->CapabilitiesForArch(arch);
}

}  // namespace dsa::model::deepseek_v32
