// GoogleMock matchers for absl::Status, absl::StatusOr<T> and dsa::Status; the
// pinned GoogleTest (Debian's 1.12) and Abseil (20220623) ship none.
//
//   EXPECT_THAT(DoIt(), IsOk());
//   EXPECT_THAT(DoIt(), StatusIs(absl::StatusCode::kNotFound,
//                                HasSubstr("indexer_logits")));
//   ASSERT_OK_AND_ASSIGN(auto value, ComputeIt());
#ifndef DSA_TESTING_STATUS_MATCHERS_H_
#define DSA_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/absl_status.h"
#include "platform/core_status.h"

namespace dsa {
// How gMock prints a dsa::Status in a failure message.
inline void PrintTo(const Status& status, std::ostream* os) {
  *os << ::dsa::platform::ToAbsl(status);
}
}  // namespace dsa

namespace dsa::testing {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}
// Plugin-side code (kernels, the C-ABI adapter) returns dsa::Status.
inline absl::Status GetStatus(const ::dsa::Status& status) {
  return ::dsa::platform::ToAbsl(status);
}

MATCHER(IsOk, "is OK") {
  const absl::Status& status = ::dsa::testing::GetStatus(arg);
  if (!status.ok()) *result_listener << "status is " << status;
  return status.ok();
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + ::testing::PrintToString(code) +
               " and a message that " +
               ::testing::DescribeMatcher<std::string>(message_matcher)) {
  const absl::Status& status = ::dsa::testing::GetStatus(arg);
  *result_listener << "status is " << status;
  return status.code() == code &&
         ::testing::Matches(message_matcher)(std::string(status.message()));
}

// StatusIs(code): any message.
template <typename Code>
auto StatusIs(Code code) {
  return StatusIs(code, ::testing::_);
}

}  // namespace dsa::testing

#define DSA_TESTING_CONCAT_INNER(a, b) a##b
#define DSA_TESTING_CONCAT(a, b) DSA_TESTING_CONCAT_INNER(a, b)

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::dsa::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::dsa::testing::IsOk())

// ASSERT_OK_AND_ASSIGN(lhs, expr): asserts `expr` (a StatusOr) is OK and
// moves its value into `lhs`.
#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                       \
  ASSERT_OK_AND_ASSIGN_IMPL(DSA_TESTING_CONCAT(dsa_statusor_, __LINE__), lhs, \
                            expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  ASSERT_TRUE(statusor.ok()) << statusor.status();     \
  lhs = std::move(statusor).value()

#endif  // DSA_TESTING_STATUS_MATCHERS_H_
