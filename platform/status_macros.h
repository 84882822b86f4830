// Early-return helpers for absl::Status and absl::StatusOr (the pinned
// Abseil, Debian's 20220623, provides none). DSA_RETURN_IF_ERROR itself lives
// in platform/core_status.h and serves dsa::Status and absl::Status alike.
#ifndef DSA_PLATFORM_STATUS_MACROS_H_
#define DSA_PLATFORM_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "platform/core_status.h"

// DSA_ASSIGN_OR_RETURN(lhs, expr): evaluates the StatusOr `expr`; on error
// returns its status, else moves the value into `lhs` (which may declare a
// variable, e.g. `auto x`).
#define DSA_ASSIGN_OR_RETURN(lhs, expr) \
  DSA_ASSIGN_OR_RETURN_IMPL(            \
      DSA_STATUS_MACROS_CONCAT(dsa_status_or_value_, __LINE__), lhs, expr)

#define DSA_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) {                                \
    return std::move(statusor).status();               \
  }                                                    \
  lhs = std::move(statusor).value()

#endif  // DSA_PLATFORM_STATUS_MACROS_H_
