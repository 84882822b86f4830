// Registration of the CPU attention kernels: the static registrar fills the
// global registry, explicit registration is all-or-nothing, and the typed
// lookup refuses a kernel of another ABI version.
#include "attention/cpu/registration.h"

#include <string>
#include <vector>

#include "attention/cpu/kernel_table.h"
#include "attention/kernel_descriptor.h"
#include "attention/kernel_lookup.h"
#include "attention/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/cpu/registration.h"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::attention::cpu {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The seven attention ops and the eight dense ops, sorted.
const std::vector<std::string> kAllOps = {"cast",           "dense_mha_prefill",
                                          "fp8_block_gemm", "fp8_block_quant",
                                          "gemm",           "indexer_k_write",
                                          "indexer_logits", "indexer_q",
                                          "indexer_topk",   "mla_cache_write",
                                          "random_fill",    "residual_add",
                                          "rms_norm",       "rope",
                                          "sparse_mla"};
constexpr size_t kNumAttentionOps = 7;

TEST(CpuAttentionRegistrationTest, StaticRegistrarFillsTheGlobalRegistry) {
  platform::Registry& global = platform::Registry::Global();
  EXPECT_EQ(global.KernelOps("cpu"), kAllOps);
  EXPECT_THAT(GetKernel<SparseMla>(global, "cpu"), IsOk());
  // A second registration is refused and changes nothing.
  EXPECT_THAT(RegisterCpuAttentionKernels(global),
              StatusIs(absl::StatusCode::kAlreadyExists, ::testing::_));
  EXPECT_EQ(global.KernelOps("cpu"), kAllOps);
}

TEST(CpuAttentionRegistrationTest, ExplicitRegistrationIntoOwnRegistry) {
  platform::Registry registry;
  // Without a "cpu" platform the batch is refused as a whole.
  EXPECT_THAT(RegisterCpuAttentionKernels(registry),
              StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  EXPECT_THAT(registry.KernelOps("cpu"), IsEmpty());
  ASSERT_THAT(platform::RegisterCpuPlatform(registry), IsOk());
  ASSERT_THAT(RegisterCpuAttentionKernels(registry), IsOk());
  EXPECT_EQ(registry.KernelOps("cpu"), kAllOps);
  ASSERT_OK_AND_ASSIGN(Kernel<IndexerQ> fn,
                       GetKernel<IndexerQ>(registry, "cpu"));
  EXPECT_TRUE(fn);
}

TEST(CpuAttentionRegistrationTest, DescriptorsPairNamesWithVersions) {
  const std::vector<DsaKernelDescriptor>& table =
      CpuAttentionKernelDescriptors();
  ASSERT_EQ(table.size(), kNumAttentionOps);
  ASSERT_EQ(table.size() + CpuDenseKernelDescriptors().size(), kAllOps.size());
  for (const DsaKernelDescriptor& d : table) {
    EXPECT_EQ(d.struct_size, sizeof(DsaKernelDescriptor));
    EXPECT_STREQ(d.platform_id, "cpu");
    EXPECT_EQ(d.op_abi_version, 2u) << d.op_name;
    EXPECT_NE(d.fn, nullptr) << d.op_name;
  }
}

TEST(CpuAttentionRegistrationTest, LookupRefusesAnotherAbiVersion) {
  platform::Registry registry;
  ASSERT_THAT(platform::RegisterCpuPlatform(registry), IsOk());
  platform::RegistrationBatch batch;
  batch.plugin_name = "future_kernels";
  DsaKernelDescriptor d = KernelDescriptorFor<IndexerQ>("cpu", nullptr);
  d.fn = reinterpret_cast<const void*>(&RegisterCpuAttentionKernels);
  d.op_abi_version = IndexerQ::kAbiVersion + 1;
  batch.kernels.push_back(d);
  ASSERT_THAT(registry.Register(batch), IsOk());
  EXPECT_THAT(
      GetKernel<IndexerQ>(registry, "cpu"),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("indexer_q")));
  EXPECT_THAT(
      GetKernel<IndexerLogits>(registry, "cpu"),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("indexer_logits")));
}

}  // namespace
}  // namespace dsa::attention::cpu
