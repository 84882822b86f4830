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

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
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
// strings, characters, integers, bools (1 or 0), floats with six
// significant digits (printf's %g, whatever the host's locale), pointers in
// hex ("0x..."; null is "0"); byte for byte what a classic-locale
// std::ostream writes for each. No stream, no locale: each value is
// formatted by std::to_chars into the one string (one allocation at most
// for the short messages of an error). Built only where an error is
// reported: checks compare first (attention/tensor.h's CheckDimWith).
namespace strcat_internal {

template <class T, class = void>
struct IsStringLike : std::false_type {};
template <class T>
struct IsStringLike<T, std::void_t<decltype(std::declval<const T&>().data()),
                                   decltype(std::declval<const T&>().size())>>
    : std::is_same<std::remove_cv_t<std::remove_pointer_t<
                       decltype(std::declval<const T&>().data())>>,
                   char> {};

// An upper bound of the characters Append writes for `value`, so that the
// string is reserved once.
template <class T>
size_t SizeBound(const T& value) {
  using U = std::decay_t<T>;
  if constexpr (std::is_array_v<T>) {
    return std::strlen(value);  // a literal
  } else if constexpr (std::is_same_v<U, const char*> ||
                       std::is_same_v<U, char*>) {
    return value == nullptr ? 0 : std::strlen(value);
  } else if constexpr (IsStringLike<U>::value) {
    return value.size();
  } else {
    return 32;  // any integer, %g float (e.g. -1.17549e-38), or pointer
  }
}

template <class Int>
void AppendInteger(std::string& out, Int value) {
  char buf[24];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, r.ptr);
}

template <class T>
void Append(std::string& out, const T& value) {
  using U = std::decay_t<T>;
  if constexpr (std::is_array_v<T>) {
    out.append(value);
  } else if constexpr (std::is_same_v<U, const char*> ||
                       std::is_same_v<U, char*>) {
    if (value != nullptr) out.append(value);
  } else if constexpr (IsStringLike<U>::value) {
    out.append(value.data(), value.size());
  } else if constexpr (std::is_same_v<U, bool>) {
    out.push_back(value ? '1' : '0');
  } else if constexpr (std::is_same_v<U, char> ||
                       std::is_same_v<U, signed char> ||
                       std::is_same_v<U, unsigned char>) {
    out.push_back(static_cast<char>(value));  // a character, as a stream
  } else if constexpr (std::is_integral_v<U>) {
    AppendInteger(out, value);
  } else if constexpr (std::is_enum_v<U>) {
    // An unscoped enum, as a stream prints it: its promoted integer.
    AppendInteger(out, +value);
  } else if constexpr (std::is_floating_point_v<U>) {
    char buf[64];
    const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value,
                                                 std::chars_format::general, 6);
    out.append(buf, r.ptr);
  } else if constexpr (std::is_pointer_v<U> || std::is_null_pointer_v<U>) {
    const uintptr_t bits =
        reinterpret_cast<uintptr_t>(static_cast<const volatile void*>(value));
    if (bits == 0) {
      out.push_back('0');
    } else {
      char buf[2 + 2 * sizeof(uintptr_t)] = {'0', 'x'};
      const std::to_chars_result r =
          std::to_chars(buf + 2, buf + sizeof(buf), bits, 16);
      out.append(buf, r.ptr);
    }
  } else {
    static_assert(sizeof(T) == 0, "StrCat: a type it does not print");
  }
}

}  // namespace strcat_internal

template <class... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  out.reserve((size_t{0} + ... + strcat_internal::SizeBound(args)));
  (strcat_internal::Append(out, args), ...);
  return out;
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
