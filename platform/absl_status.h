// Host-side conversions between the plugin boundary's status (a C code plus
// a message, or a dsa::Status from plugin-side code) and absl::Status.
#ifndef DSA_PLATFORM_ABSL_STATUS_H_
#define DSA_PLATFORM_ABSL_STATUS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "platform/core_status.h"
#include "platform/plugin_api.h"

namespace dsa::platform {

// A C status code and its message. Codes outside absl's range are a plugin
// bug and become Internal, naming the code.
absl::Status StatusFromC(DsaStatusCode code, absl::string_view message);

// Writes `status`'s message into a C error buffer (truncated, always
// NUL-terminated) and returns its code.
DsaStatusCode StatusToC(const absl::Status& status, char* error,
                        size_t error_size);

inline absl::Status ToAbsl(const Status& status) {
  return StatusFromC(status.code(), status.message());
}

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_ABSL_STATUS_H_
