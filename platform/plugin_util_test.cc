// Tests of the capability-row builder and FillCapabilities (plugin_util.h).
#include "platform/plugin_util.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dsa::platform {
namespace {

using ::testing::HasSubstr;

constexpr ArchCapabilities Gfx942() {
  return ArchCapabilities::For("gfx942")
      .set_is_cuda_alike(true)
      .set_kv_cache_fp8_format(DSA_FP8_E4M3FNUZ)
      .set_warp_size(64)
      .set_sparse_mla_dense_mha_prefill(true)
      .set_sparse_mla_decode_context_parallel(false);
}

// The checks are constexpr, so a plugin's table is checked when it builds.
constexpr ArchCapabilities kComplete[] = {
    Gfx942(),
    ArchCapabilities::For("sm_90")
        .set_sparse_mla_decode_context_parallel(true)  // any order
        .set_warp_size(32)
        .set_kv_cache_fp8_format(DSA_FP8_E4M3FN)
        .set_sparse_mla_dense_mha_prefill(true)
        .set_is_cuda_alike(true),
};
static_assert(AllRowsComplete(kComplete));

constexpr ArchCapabilities kMissingWarpSize[] = {
    ArchCapabilities::For("gfx942")
        .set_is_cuda_alike(true)
        .set_kv_cache_fp8_format(DSA_FP8_E4M3FNUZ)
        .set_sparse_mla_dense_mha_prefill(true)
        .set_sparse_mla_decode_context_parallel(false),
};
static_assert(!AllRowsComplete(kMissingWarpSize));

constexpr ArchCapabilities kZeroWarpSize[] = {Gfx942().set_warp_size(0)};
static_assert(!AllRowsComplete(kZeroWarpSize));

constexpr ArchCapabilities kDuplicateArch[] = {Gfx942(), Gfx942()};
static_assert(!AllRowsComplete(kDuplicateArch));

constexpr ArchCapabilities kNoArch[] = {Gfx942().set_warp_size(64),
                                        ArchCapabilities::For("")};
static_assert(!AllRowsComplete(kNoArch));

// A positional row says nothing about which value is which field.
constexpr ArchCapabilities kPositional[] = {
    {"gfx942", 1, DSA_FP8_E4M3FNUZ, 64, 1, 0},
};
static_assert(!AllRowsComplete(kPositional));

DsaCapabilities Fill(const char* arch, DsaStatusCode* code,
                     std::string* error_text) {
  DsaCapabilities caps;
  std::memset(&caps, 0, sizeof(caps));
  caps.struct_size = sizeof(caps);
  char error[128] = "";
  *code =
      FillCapabilities(kComplete, "test", arch, &caps, error, sizeof(error));
  *error_text = error;
  return caps;
}

TEST(ArchCapabilitiesTest, SettersWriteTheirOwnField) {
  constexpr ArchCapabilities row = Gfx942();
  EXPECT_STREQ(row.arch, "gfx942");
  EXPECT_EQ(row.is_cuda_alike, 1);
  EXPECT_EQ(row.kv_cache_fp8_format, DSA_FP8_E4M3FNUZ);
  EXPECT_EQ(row.warp_size, 64);
  EXPECT_EQ(row.sparse_mla_dense_mha_prefill, 1);
  EXPECT_EQ(row.sparse_mla_decode_context_parallel, 0);
  EXPECT_TRUE(row.complete());
}

TEST(ArchCapabilitiesTest, FillCapabilitiesCopiesTheRow) {
  DsaStatusCode code;
  std::string error;
  const DsaCapabilities caps = Fill("sm_90", &code, &error);
  ASSERT_EQ(code, DSA_STATUS_OK) << error;
  EXPECT_STREQ(caps.arch, "sm_90");
  EXPECT_EQ(caps.is_cuda_alike, 1);
  EXPECT_EQ(caps.kv_cache_fp8_format, DSA_FP8_E4M3FN);
  EXPECT_EQ(caps.warp_size, 32);
  EXPECT_EQ(caps.sparse_mla_dense_mha_prefill, 1);
  EXPECT_EQ(caps.sparse_mla_decode_context_parallel, 1);
}

TEST(ArchCapabilitiesTest, FillCapabilitiesRefusesAnUnknownArch) {
  DsaStatusCode code;
  std::string error;
  Fill("gfx1100", &code, &error);
  EXPECT_EQ(code, DSA_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error, HasSubstr("test does not support architecture 'gfx1100'"));
  Fill(nullptr, &code, &error);
  EXPECT_EQ(code, DSA_STATUS_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace dsa::platform
