// The CPU attention kernels as a plugin shared object: loaded with the host
// loader into a registry of its own, they register all seven ops (and the dense
// ops) for "cpu" through the host API, and the entry points found through the
// registry run (and report errors as absl::Status) across the shared-object
// boundary.
//
// Usage: plugin_test --plugin=<path to libdsa_attention_cpu.so>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "attention/kernel_lookup.h"
#include "attention/ops.h"
#include "attention/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/cpu/registration.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::attention {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string& PluginPath() {
  static std::string* path = new std::string;
  return *path;
}

TEST(CpuAttentionPluginTest, RegistersEveryOpThroughTheHostApi) {
  platform::Registry registry;
  ASSERT_THAT(platform::RegisterCpuPlatform(registry), IsOk());
  ASSERT_THAT(registry.LoadPlugin(PluginPath()), IsOk());
  EXPECT_THAT(registry.KernelOps("cpu"),
              ElementsAre("cast", "dense_mha_prefill", "fp8_block_gemm",
                          "fp8_block_quant", "gemm", "indexer_k_write",
                          "indexer_logits", "indexer_q", "indexer_topk",
                          "mla_cache_write", "random_fill", "residual_add",
                          "rms_norm", "rope", "sparse_mla"));
  EXPECT_THAT(GetKernel<IndexerKWrite>(registry, "cpu"), IsOk());
  EXPECT_THAT(GetKernel<IndexerQ>(registry, "cpu"), IsOk());
  EXPECT_THAT(GetKernel<IndexerLogits>(registry, "cpu"), IsOk());
  EXPECT_THAT(GetKernel<MlaCacheWrite>(registry, "cpu"), IsOk());
  EXPECT_THAT(GetKernel<SparseMla>(registry, "cpu"), IsOk());
  EXPECT_THAT(GetKernel<DenseMhaPrefill>(registry, "cpu"), IsOk());
  EXPECT_THAT(GetKernel<IndexerTopK>(registry, "rocm"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("indexer_topk")));

  // The plugin's top-k runs: logits 3 1 4 1 5 9 2 6, top-3 of [1, 8) is
  // {5, 9, 6} at positions 4, 5, 7.
  ASSERT_OK_AND_ASSIGN(Kernel<IndexerTopK> topk,
                       GetKernel<IndexerTopK>(registry, "cpu"));
  std::vector<float> logits = {3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<int32_t> ks = {1}, ke = {8}, out(3, -7);
  IndexerTopK::Args args;
  args.logits = MakeTensorView(logits.data(), DType::kFloat32, {1, 8});
  args.row_key_start = MakeTensorView(ks.data(), DType::kInt32, {1});
  args.row_key_end = MakeTensorView(ke.data(), DType::kInt32, {1});
  args.topk_indices = MakeTensorView(out.data(), DType::kInt32, {1, 3});
  ASSERT_THAT(topk(ExecutionContext(), args), IsOk());
  EXPECT_THAT(out, ElementsAre(4, 5, 7));
  // An error made inside the plugin arrives as a Status.
  ke[0] = 9;
  EXPECT_THAT(topk(ExecutionContext(), args),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr("indexer_topk: row 0 has key window [1, 9)")));
}

TEST(CpuAttentionPluginTest, SecondLoadIsAlreadyExistsAndChangesNothing) {
  platform::Registry registry;
  ASSERT_THAT(platform::RegisterCpuPlatform(registry), IsOk());
  ASSERT_THAT(registry.LoadPlugin(PluginPath()), IsOk());
  const std::vector<std::string> before = registry.KernelOps("cpu");
  EXPECT_THAT(registry.LoadPlugin(PluginPath()),
              StatusIs(absl::StatusCode::kAlreadyExists, ::testing::_));
  EXPECT_EQ(registry.KernelOps("cpu"), before);
}

TEST(CpuAttentionPluginTest, RegistryWithoutCpuPlatformStaysEmpty) {
  platform::Registry registry;  // no platform at all
  EXPECT_THAT(registry.LoadPlugin(PluginPath()),
              StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  EXPECT_THAT(registry.KernelOps("cpu"), IsEmpty());
}

}  // namespace
}  // namespace dsa::attention

int main(int argc, char** argv) {
  ::testing::InitGoogleMock(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--plugin=", 0) == 0) {
      dsa::attention::PluginPath() = arg.substr(9);
    }
  }
  if (dsa::attention::PluginPath().empty()) {
    std::fprintf(stderr, "usage: %s --plugin=<libdsa_attention_cpu.so>\n",
                 argv[0]);
    return 2;
  }
  return RUN_ALL_TESTS();
}
