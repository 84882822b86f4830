// Heap allocations counted in a test binary: linking //testing:heap_allocations
// replaces the global operator new and delete (the counting ones below), so
// that a test can say "this call allocates nothing".
#ifndef DSA_TESTING_HEAP_ALLOCATIONS_H_
#define DSA_TESTING_HEAP_ALLOCATIONS_H_

#include <cstdint>

namespace dsa::testing {

// Whether this build counts: not under AddressSanitizer, whose own operator
// new takes the place of the counting one (every count is then 0); the plain
// build's run of a test is the one that checks "allocates nothing".
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kCountsHeapAllocations = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kCountsHeapAllocations = false;
#else
inline constexpr bool kCountsHeapAllocations = true;
#endif
#else
inline constexpr bool kCountsHeapAllocations = true;
#endif

// Every operator new of the process so far.
int64_t HeapAllocations();

// The allocations `f()` makes.
template <class F>
int64_t AllocationsOf(F&& f) {
  const int64_t before = HeapAllocations();
  f();
  return HeapAllocations() - before;
}

}  // namespace dsa::testing

#endif  // DSA_TESTING_HEAP_ALLOCATIONS_H_
