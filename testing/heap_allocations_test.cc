// The counter counts: tests that expect "allocates nothing" would pass
// vacuously if it did not.
#include "testing/heap_allocations.h"

#include <string>

#include "gtest/gtest.h"

namespace dsa::testing {
namespace {

std::string* volatile g_sink = nullptr;

TEST(HeapAllocationsTest, CountsEveryNewAndNothingElse) {
  if (!kCountsHeapAllocations)
    GTEST_SKIP() << "AddressSanitizer's operator new";
  EXPECT_EQ(AllocationsOf([] {}), 0);
  EXPECT_EQ(AllocationsOf([] {
              g_sink = new std::string(100, 'x');  // the object, its buffer
            }),
            2);
  delete g_sink;
}

}  // namespace
}  // namespace dsa::testing
