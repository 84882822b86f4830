// The status type of code that runs inside a plugin shared object.
//
// A plugin must not link Abseil (a host built against another Abseil, or
// none, as PyTorch is, has to be able to load it), so kernels, their argument
// checks and the C-ABI adapter report errors with this small value type: a C
// status code (plugin_api.h, absl::StatusCode's numbering) and a message. It
// crosses the boundary as that code plus a NUL-terminated message
// (ToC); host code turns it into an absl::Status (platform/absl_status.h).
// The names mirror Abseil's so that code reads the same on both sides.
#ifndef DSA_PLATFORM_CORE_STATUS_H_
#define DSA_PLATFORM_CORE_STATUS_H_

#include <cstddef>
#include <cstring>
#include <locale>
#include <sstream>
#include <string>
#include <utility>

#include "platform/plugin_api.h"

namespace dsa {

// Whether `code` is one of the error codes of plugin_api.h (1 to 16, absl's
// range). A plugin returning anything else has a bug; hosts report it as
// Internal, naming the code.
inline bool IsKnownErrorCode(DsaStatusCode code) {
  const int raw = static_cast<int>(code);
  return raw >= DSA_STATUS_CANCELLED && raw <= DSA_STATUS_UNAUTHENTICATED;
}

class Status {
 public:
  Status() = default;  // OK
  Status(DsaStatusCode code, std::string message)
      : code_(code),
        message_(code == DSA_STATUS_OK ? std::string() : std::move(message)) {}

  bool ok() const { return code_ == DSA_STATUS_OK; }
  DsaStatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Writes the message (truncated, always NUL-terminated) into a C error
  // buffer and returns the code. Nothing is written for OK.
  DsaStatusCode ToC(char* error, size_t error_size) const {
    if (!ok() && error != nullptr && error_size > 0) {
      const size_t n =
          message_.size() < error_size - 1 ? message_.size() : error_size - 1;
      std::memcpy(error, message_.data(), n);
      error[n] = '\0';
    }
    return code_;
  }

 private:
  DsaStatusCode code_ = DSA_STATUS_OK;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) {
  return Status(DSA_STATUS_INVALID_ARGUMENT, std::move(m));
}
inline Status OutOfRangeError(std::string m) {
  return Status(DSA_STATUS_OUT_OF_RANGE, std::move(m));
}
inline Status FailedPreconditionError(std::string m) {
  return Status(DSA_STATUS_FAILED_PRECONDITION, std::move(m));
}
inline Status ResourceExhaustedError(std::string m) {
  return Status(DSA_STATUS_RESOURCE_EXHAUSTED, std::move(m));
}
inline Status UnimplementedError(std::string m) {
  return Status(DSA_STATUS_UNIMPLEMENTED, std::move(m));
}
inline Status InternalError(std::string m) {
  return Status(DSA_STATUS_INTERNAL, std::move(m));
}

// Concatenates values the way absl::StrCat does for the types kernels print:
// strings, integers, and floats with six significant digits.
template <class... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  out.imbue(std::locale::classic());  // "0.5" whatever the host's locale
  (out << ... << args);
  return out.str();
}

}  // namespace dsa

#define DSA_STATUS_MACROS_CONCAT_INNER(a, b) a##b
#define DSA_STATUS_MACROS_CONCAT(a, b) DSA_STATUS_MACROS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` (a dsa::Status
// or an absl::Status, whichever the function returns) is not OK.
#define DSA_RETURN_IF_ERROR(expr)           \
  do {                                      \
    auto dsa_status_macro_status_ = (expr); \
    if (!dsa_status_macro_status_.ok()) {   \
      return dsa_status_macro_status_;      \
    }                                       \
  } while (false)

#endif  // DSA_PLATFORM_CORE_STATUS_H_
