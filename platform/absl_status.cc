#include "platform/absl_status.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace dsa::platform {

absl::Status StatusFromC(DsaStatusCode code, absl::string_view message) {
  if (code == DSA_STATUS_OK) return absl::OkStatus();
  const int raw = static_cast<int>(code);
  if (!IsKnownErrorCode(code)) {
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

}  // namespace dsa::platform
