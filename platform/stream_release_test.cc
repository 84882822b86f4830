#include "platform/stream_release.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dsa::platform {
namespace {

// (hook number, stream) of every hook call, in order.
std::vector<std::pair<int, void*>>& Calls() {
  static std::vector<std::pair<int, void*>> calls;
  return calls;
}

template <int N>
void Hook(void* stream) {
  Calls().emplace_back(N, stream);
}

template <int... N>
int AddHooks(std::integer_sequence<int, N...>) {
  int added = 0;
  ((added += AddStreamReleaseHook(&Hook<N>) ? 1 : 0), ...);
  return added;
}

// The table is the process's and never shrinks, so the whole story is one
// test.
TEST(StreamReleaseTest, HooksRunInOrderOncePerStreamUpToTheLimit) {
  int stream_a = 0, stream_b = 0;
  RunStreamReleaseHooks(&stream_a);  // no hooks yet
  EXPECT_TRUE(Calls().empty());

  EXPECT_FALSE(AddStreamReleaseHook(nullptr));
  EXPECT_TRUE(AddStreamReleaseHook(&Hook<1>));
  EXPECT_TRUE(AddStreamReleaseHook(&Hook<2>));
  EXPECT_TRUE(AddStreamReleaseHook(&Hook<1>));  // already there: once

  RunStreamReleaseHooks(&stream_a);
  RunStreamReleaseHooks(nullptr);  // not a stream: nothing runs
  RunStreamReleaseHooks(&stream_b);
  const std::vector<std::pair<int, void*>> want = {
      {1, &stream_a}, {2, &stream_a}, {1, &stream_b}, {2, &stream_b}};
  EXPECT_EQ(Calls(), want);

  // Two slots are taken; the rest fill, then a new hook is refused.
  EXPECT_EQ(
      AddHooks(std::integer_sequence<int, 10, 11, 12, 13, 14, 15, 16, 17>()),
      kMaxStreamReleaseHooks - 2);
  EXPECT_FALSE(AddStreamReleaseHook(&Hook<99>));
  EXPECT_TRUE(AddStreamReleaseHook(&Hook<2>));  // present: still true
  Calls().clear();
  RunStreamReleaseHooks(&stream_a);
  ASSERT_EQ(Calls().size(), static_cast<size_t>(kMaxStreamReleaseHooks));
  EXPECT_EQ(Calls().front().first, 1);
  EXPECT_EQ(Calls().back().first, 15);  // 10..15 fit beside 1 and 2
  for (const auto& [hook, stream] : Calls()) EXPECT_EQ(stream, &stream_a);
}

}  // namespace
}  // namespace dsa::platform
