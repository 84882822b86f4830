#include "model/deepseek_v32/platform_query.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/capabilities.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using platform::Registry;
using ::testing::Contains;
using ::testing::HasSubstr;

// The cpu, rocm and cuda plugins register themselves into Global() through
// the registration targets this test links.
TEST(PlatformQueryTest, RocmByArch) {
  for (const char* arch : {"gfx942", "gfx950"}) {
    ASSERT_OK_AND_ASSIGN(platform::PlatformCapabilities caps,
                         QueryCapabilities(Registry::Global(), "rocm", arch));
    EXPECT_EQ(caps.platform_id, "rocm");
    EXPECT_EQ(platform::DeviceArchName(caps.arch), arch);
    EXPECT_TRUE(caps.is_cuda_alike);
    EXPECT_TRUE(caps.sparse_mla_dense_mha_prefill);
    EXPECT_FALSE(caps.sparse_mla_decode_context_parallel);
  }
}

TEST(PlatformQueryTest, CudaAndCpu) {
  ASSERT_OK_AND_ASSIGN(platform::PlatformCapabilities cuda,
                       QueryCapabilities(Registry::Global(), "cuda", "sm_90"));
  EXPECT_TRUE(cuda.is_cuda_alike);
  EXPECT_TRUE(cuda.sparse_mla_decode_context_parallel);
  ASSERT_OK_AND_ASSIGN(platform::PlatformCapabilities cpu,
                       QueryCapabilities(Registry::Global(), "cpu", ""));
  EXPECT_FALSE(cpu.is_cuda_alike);
}

// Without --arch: device 0's arch, or the default on a machine without one.
TEST(PlatformQueryTest, DefaultArchIsAKnownOne) {
  ASSERT_OK_AND_ASSIGN(platform::Platform rocm,
                       Registry::Global().GetPlatform("rocm"));
  ASSERT_OK_AND_ASSIGN(platform::PlatformCapabilities caps,
                       QueryCapabilities(Registry::Global(), "rocm", ""));
  EXPECT_THAT(rocm.known_archs(),
              Contains(platform::DeviceArchName(caps.arch)));
}

TEST(PlatformQueryTest, ActivePlatformWhenNoneNamed) {
  ASSERT_OK_AND_ASSIGN(platform::PlatformCapabilities caps,
                       QueryCapabilities(Registry::Global(), "", ""));
  EXPECT_TRUE(Registry::Global().HasPlatform(caps.platform_id));
}

TEST(PlatformQueryTest, UnknownPlatformOrArch) {
  EXPECT_THAT(QueryCapabilities(Registry::Global(), "tpu", ""),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("registered: cpu, cuda, rocm")));
  EXPECT_THAT(QueryCapabilities(Registry::Global(), "rocm", "sm_90"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rocm")));
  EXPECT_THAT(
      QueryCapabilities(Registry::Global(), "rocm", "gfx1100"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gfx942")));
}

// An embedder's own registry, empty: nothing is found, nothing crashes.
TEST(PlatformQueryTest, EmptyRegistry) {
  Registry empty;
  EXPECT_THAT(QueryCapabilities(empty, "rocm", "gfx942"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("unknown platform \"rocm\"")));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
