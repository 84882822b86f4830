// Sizes (element and byte counts) computed from dimensions that a user, a
// file or a caller gave: every sum and product checked, so that a size past
// int64 is a value that says so instead of a wrapped number. Signed overflow
// is undefined behaviour, and a wrapped size passes every "does it fit in
// memory" check; so the project's size arithmetic is done here, in one place.
// Needs only the C++ standard library (plugins and the PyTorch binding use
// it too).
//
//   const CheckedSize bytes = CheckedSize(rows) * width * sizeof(float);
//   if (!bytes.ok()) return Error("more than 64 bits can count");
//
// A CheckedSize holds a count in [0, INT64_MAX] or is overflowed: a sum or
// product past INT64_MAX, a negative operand (a size is never negative) and
// any operation on an overflowed size give an overflowed size, so a long
// expression is checked once, at its end.
#ifndef DSA_PLATFORM_CHECKED_SIZE_H_
#define DSA_PLATFORM_CHECKED_SIZE_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

namespace dsa {

class CheckedSize {
 public:
  // Zero.
  constexpr CheckedSize() = default;
  // Any integer: a negative one, or one above INT64_MAX, is overflowed.
  // Implicit, so that sizes read as the arithmetic they are.
  template <typename Int,
            typename = std::enable_if_t<std::is_integral_v<Int> &&
                                        !std::is_same_v<Int, bool>>>
  constexpr CheckedSize(Int value)  // NOLINT(google-explicit-constructor)
      : value_(0), ok_(false) {
    if constexpr (std::is_signed_v<Int>) {
      if (value < 0) return;
    } else {
      if (static_cast<uint64_t>(value) >
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return;
      }
    }
    value_ = static_cast<int64_t>(value);
    ok_ = true;
  }
  static constexpr CheckedSize Overflowed() {
    CheckedSize s;
    s.ok_ = false;
    return s;
  }

  constexpr bool ok() const { return ok_; }
  // The count; -1 when overflowed.
  constexpr int64_t value() const { return ok_ ? value_ : -1; }
  // The count, or `fallback` when overflowed.
  constexpr int64_t value_or(int64_t fallback) const {
    return ok_ ? value_ : fallback;
  }

  friend CheckedSize operator+(CheckedSize a, CheckedSize b) {
    int64_t sum = 0;
    if (!a.ok_ || !b.ok_ || __builtin_add_overflow(a.value_, b.value_, &sum)) {
      return Overflowed();
    }
    return CheckedSize(sum);
  }
  friend CheckedSize operator*(CheckedSize a, CheckedSize b) {
    int64_t product = 0;
    if (!a.ok_ || !b.ok_ ||
        __builtin_mul_overflow(a.value_, b.value_, &product)) {
      return Overflowed();
    }
    return CheckedSize(product);
  }
  CheckedSize& operator+=(CheckedSize other) { return *this = *this + other; }
  CheckedSize& operator*=(CheckedSize other) { return *this = *this * other; }

  // Whether the size is known and at most `limit`: false when overflowed.
  constexpr bool AtMost(int64_t limit) const { return ok_ && value_ <= limit; }

  friend constexpr bool operator==(CheckedSize a, CheckedSize b) {
    return a.ok_ == b.ok_ && (!a.ok_ || a.value_ == b.value_);
  }
  friend constexpr bool operator!=(CheckedSize a, CheckedSize b) {
    return !(a == b);
  }

 private:
  int64_t value_ = 0;
  bool ok_ = true;
};

// A byte count for a message, "12.3 GiB": in GiB, or in TiB, PiB or EiB when
// it is at least one of those; "more than 8.0 EiB" for an overflowed size.
inline std::string BytesForMessage(CheckedSize bytes) {
  if (!bytes.ok()) return "more than 8.0 EiB";
  static constexpr const char* kUnits[] = {"GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes.value()) / (int64_t{1} << 30);
  size_t unit = 0;
  while (unit + 1 < sizeof(kUnits) / sizeof(kUnits[0]) && value >= 1024.0) {
    value /= 1024.0;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  return text;
}

}  // namespace dsa

#endif  // DSA_PLATFORM_CHECKED_SIZE_H_
