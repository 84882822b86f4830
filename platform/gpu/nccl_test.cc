#include "platform/gpu/nccl.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "attention/dtypes/bf16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dsa::platform::gpu {
namespace {

using ::testing::HasSubstr;

const char* g_fake_nccl = nullptr;

// The stand-in serves as NCCL; RCCL is pointed at a file that is not there.
const NcclApi* Fake() {
  setenv("DSA_NCCL_LIBRARY", g_fake_nccl, 1);
  return LoadedNccl(CollectiveLibrary::kNccl);
}

TEST(NcclTest, LoadsThroughTheOverride) {
  ASSERT_NE(Fake(), nullptr) << NcclLoadResult(CollectiveLibrary::kNccl).detail;
  EXPECT_EQ(NcclLoadResult(CollectiveLibrary::kNccl).library, g_fake_nccl);
  EXPECT_STREQ(CollectiveLibraryName(CollectiveLibrary::kNccl), "NCCL");
  EXPECT_STREQ(CollectiveLibraryName(CollectiveLibrary::kRccl), "RCCL");
}

TEST(NcclTest, EveryRankGetsTheSumAndTheGatheredBlocks) {
  const NcclApi* api = Fake();
  ASSERT_NE(api, nullptr);
  for (int n : {1, 2, 4}) {
    std::vector<int> devices;
    for (int r = 0; r < n; ++r) devices.push_back(r);
    std::unique_ptr<NcclGroup> group;
    ASSERT_EQ(
        NcclGroup::Create(*api, CollectiveLibrary::kNccl, devices, &group), "");
    ASSERT_EQ(group->size(), n);
    std::vector<std::vector<float>> f(n, std::vector<float>(9));
    std::vector<std::vector<uint16_t>> b(n, std::vector<uint16_t>(5));
    std::vector<std::vector<int32_t>> gathered(n, std::vector<int32_t>(3 * n));
    std::vector<std::string> errors(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < f[r].size(); ++i) f[r][i] = r + 0.25f * i;
      for (size_t i = 0; i < b[r].size(); ++i) {
        b[r][i] = attention::FloatToBf16(1.5f * r - i);
      }
      for (int i = 0; i < 3; ++i) gathered[r][r * 3 + i] = 100 * r + i;
    }
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        std::string e = group->AllReduceSum(
            r, f[r].data(), f[r].size(), CollectiveElement::kFloat32, nullptr);
        if (e.empty()) {
          e = group->AllReduceSum(r, b[r].data(), b[r].size(),
                                  CollectiveElement::kBFloat16, nullptr);
        }
        if (e.empty()) {
          e = group->AllGather(r, gathered[r].data() + 3 * r,
                               gathered[r].data(), 3 * sizeof(int32_t),
                               nullptr);
        }
        errors[r] = e;
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      for (size_t i = 0; i < f[r].size(); ++i) {
        float want = 0.0f;
        for (int q = 0; q < n; ++q) want += q + 0.25f * i;
        EXPECT_EQ(f[r][i], want);
      }
      for (size_t i = 0; i < b[r].size(); ++i) {
        float want = 0.0f;
        for (int q = 0; q < n; ++q) {
          want += attention::RoundToBf16(1.5f * q - static_cast<float>(i));
        }
        EXPECT_EQ(b[r][i], attention::FloatToBf16(want));
      }
      for (int q = 0; q < n; ++q) {
        for (int i = 0; i < 3; ++i)
          EXPECT_EQ(gathered[r][q * 3 + i], 100 * q + i);
      }
    }
  }
}

TEST(NcclTest, AFailingCallNamesItselfAndTheLibrarysText) {
  const NcclApi* api = Fake();
  ASSERT_NE(api, nullptr);
  std::unique_ptr<NcclGroup> group;
  setenv("FAKE_NCCL_FAIL", "ncclCommInitAll", 1);
  EXPECT_EQ(NcclGroup::Create(*api, CollectiveLibrary::kNccl, {0, 1}, &group),
            "NCCL ncclCommInitAll failed: error 3 (internal error)");
  EXPECT_EQ(group, nullptr);
  setenv("FAKE_NCCL_FAIL", "ncclAllReduce", 1);
  ASSERT_EQ(NcclGroup::Create(*api, CollectiveLibrary::kNccl, {0}, &group), "");
  float x = 1.0f;
  EXPECT_EQ(group->AllReduceSum(0, &x, 1, CollectiveElement::kFloat32, nullptr),
            "NCCL ncclAllReduce failed: error 3 (internal error): fake: "
            "all-reduce refused");
  unsetenv("FAKE_NCCL_FAIL");
  EXPECT_EQ(group->AllReduceSum(1, &x, 1, CollectiveElement::kFloat32, nullptr),
            "rank 1 of a group of 1");
  EXPECT_EQ(NcclGroup::Create(*api, CollectiveLibrary::kNccl, {}, &group),
            "a collective group needs at least one rank");
}

TEST(NcclTest, AbortWakesARankWaitingForAPeer) {
  const NcclApi* api = Fake();
  ASSERT_NE(api, nullptr);
  std::unique_ptr<NcclGroup> group;
  ASSERT_EQ(NcclGroup::Create(*api, CollectiveLibrary::kNccl, {0, 1}, &group),
            "");
  std::string error;
  std::thread waiting([&] {
    float x = 1.0f;
    error = group->AllReduceSum(0, &x, 1, CollectiveElement::kFloat32, nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  group->Abort();
  waiting.join();
  EXPECT_THAT(error, HasSubstr("communicator aborted"));
  float y = 0.0f;
  EXPECT_EQ(group->AllReduceSum(1, &y, 1, CollectiveElement::kFloat32, nullptr),
            "NCCL group was aborted");
  group.reset();  // the aborted communicators are not destroyed twice
}

TEST(NcclTest, RcclThatIsNotThereIsReportedNotCrashed) {
  setenv("DSA_RCCL_LIBRARY", "/nonexistent/librccl.so.1", 1);
  const RuntimeLoadResult& r = NcclLoadResult(CollectiveLibrary::kRccl);
  if (r.loaded()) GTEST_SKIP() << "this machine has " << r.library;
  EXPECT_EQ(LoadedNccl(CollectiveLibrary::kRccl), nullptr);
  EXPECT_FALSE(r.detail.empty());
}

}  // namespace
}  // namespace dsa::platform::gpu

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--fake_nccl=", 12) == 0) {
      dsa::platform::gpu::g_fake_nccl = argv[i] + 12;
    }
  }
  if (dsa::platform::gpu::g_fake_nccl == nullptr) {
    std::fprintf(stderr, "usage: nccl_test --fake_nccl=PATH\n");
    return 2;
  }
  return RUN_ALL_TESTS();
}
