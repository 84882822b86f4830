// Early-return helpers for absl::Status and absl::StatusOr, which the pinned
// Abseil (Debian's 20220623) does not provide.
#ifndef DSA_PLATFORM_STATUS_MACROS_H_
#define DSA_PLATFORM_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DSA_STATUS_MACROS_CONCAT_INNER(a, b) a##b
#define DSA_STATUS_MACROS_CONCAT(a, b) DSA_STATUS_MACROS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define DSA_RETURN_IF_ERROR(expr)                        \
  do {                                                   \
    ::absl::Status dsa_status_macro_status_ = (expr);    \
    if (!dsa_status_macro_status_.ok()) {                \
      return dsa_status_macro_status_;                   \
    }                                                    \
  } while (false)

// DSA_ASSIGN_OR_RETURN(lhs, expr): evaluates the StatusOr `expr`; on error
// returns its status, else moves the value into `lhs` (which may declare a
// variable, e.g. `auto x`).
#define DSA_ASSIGN_OR_RETURN(lhs, expr)                                      \
  DSA_ASSIGN_OR_RETURN_IMPL(                                                 \
      DSA_STATUS_MACROS_CONCAT(dsa_status_or_value_, __LINE__), lhs, expr)

#define DSA_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) {                                \
    return std::move(statusor).status();               \
  }                                                    \
  lhs = std::move(statusor).value()

#endif  // DSA_PLATFORM_STATUS_MACROS_H_
