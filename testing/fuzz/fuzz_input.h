// Decoding fuzz input bytes into the small values the fuzz targets build
// their calls from: bounded integers, choices from a list, flags and
// strings.
//
// libFuzzer mutates bytes, so every decision a target makes reads the next
// byte(s) here; once the input is exhausted every read returns 0 (the first
// choice, the low end of a range), which keeps short inputs meaningful and
// the decoding total: any byte string is a valid input. The same reader is
// used by the gcc-built corpus replay, so it depends on nothing but the
// standard library.
#ifndef DSA_TESTING_FUZZ_FUZZ_INPUT_H_
#define DSA_TESTING_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

namespace dsa::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - pos_; }
  bool empty() const { return pos_ >= size_; }

  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }

  // Little-endian, `bytes` of them (at most 8).
  uint64_t Bits(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes && i < 8; ++i) {
      v |= static_cast<uint64_t>(Byte()) << (8 * i);
    }
    return v;
  }

  bool Bool() { return (Byte() & 1) != 0; }

  // True with probability about 1/n (n >= 1).
  bool OneIn(int n) { return n <= 1 || Byte() % n == 0; }

  // Uniform-ish in [lo, hi] (lo <= hi, span below 2^32).
  int64_t Range(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    const uint64_t v = span <= 256 ? Byte() : Bits(4);
    return lo + static_cast<int64_t>(v % span);
  }

  template <class T>
  T Pick(std::initializer_list<T> choices) {
    const size_t i = static_cast<size_t>(Range(0, choices.size() - 1));
    return *(choices.begin() + i);
  }

  // Up to `max_len` bytes, any values (NUL included).
  std::string Bytes(size_t max_len) {
    const size_t n = static_cast<size_t>(Range(0, max_len));
    std::string s;
    for (size_t i = 0; i < n && !empty(); ++i) {
      s.push_back(static_cast<char>(Byte()));
    }
    return s;
  }

  // The rest of the input.
  std::string Rest() {
    std::string s(reinterpret_cast<const char*>(data_ + pos_), remaining());
    pos_ = size_;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// A small deterministic generator for bulk contents (tensor elements), so
// large buffers do not drain the input that drives the interesting choices.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

}  // namespace dsa::fuzz

#endif  // DSA_TESTING_FUZZ_FUZZ_INPUT_H_
