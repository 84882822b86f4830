// The one place the model asks the platform registry for capabilities.
//
// The model never includes a platform plugin's headers: whichever plugins a
// binary links (static registrars) or loads (shared objects) have registered
// into the registry, and the model reads their typed capabilities from it.
#ifndef DSA_MODEL_DEEPSEEK_V32_PLATFORM_QUERY_H_
#define DSA_MODEL_DEEPSEEK_V32_PLATFORM_QUERY_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "platform/capabilities.h"
#include "platform/registry.h"

namespace dsa::model::deepseek_v32 {

// Capabilities of `platform_id` on `arch`.
//  - platform_id empty: the registry's active platform (explicit selection,
//    else the accelerator with a device, else CPU).
//  - arch empty: device 0's architecture when a device is present, else the
//    platform's default (gfx942 for ROCm, sm_90 for CUDA).
// NotFound naming the registered platforms for an unknown id;
// InvalidArgument naming the known architectures for an unknown arch.
absl::StatusOr<platform::PlatformCapabilities> QueryCapabilities(
    const platform::Registry& registry, absl::string_view platform_id,
    absl::string_view arch);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_PLATFORM_QUERY_H_
