// The op ABI seen from both sides: C++ arguments to C structs and back,
// arguments from an older host (shorter structs, in buffers of exactly their
// struct_size so that AddressSanitizer catches any read past them), malformed
// views, and what CKernel does with errors and exceptions.
#include "attention/kernel_abi.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "attention/cpu/kernels.h"
#include "attention/kernel_api.h"
#include "attention/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::attention {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

// A heap copy of the first `size` bytes of `c`, with struct_size = size.
template <class T>
std::unique_ptr<T, decltype(&std::free)> Truncated(const T& c, size_t size) {
  void* buffer = std::malloc(size);
  std::memcpy(buffer, &c, size);
  static_cast<T*>(buffer)->struct_size = size;
  return {static_cast<T*>(buffer), &std::free};
}

struct TopKData {
  std::vector<float> logits = {3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<int32_t> ks = {1}, ke = {8}, out = std::vector<int32_t>(3, -7);
  IndexerTopK::Args Args() {
    IndexerTopK::Args a;
    a.logits = MakeTensorView(logits.data(), DType::kFloat32, {1, 8});
    a.row_key_start = MakeTensorView(ks.data(), DType::kInt32, {1});
    a.row_key_end = MakeTensorView(ke.data(), DType::kInt32, {1});
    a.topk_indices = MakeTensorView(out.data(), DType::kInt32, {1, 3});
    return a;
  }
};

constexpr auto kTopK = &CKernel<IndexerTopK, &cpu::IndexerTopKCpu>;

dsa::Status CallC(const DsaExecutionContext* ctx, const DsaIndexerTopKArgs* a) {
  char error[256] = "untouched";
  const DsaStatusCode code = kTopK(ctx, a, error, sizeof(error));
  return dsa::Status(code, code == DSA_STATUS_OK ? "" : error);
}

TEST(KernelAbiTest, ArgumentsRoundTripThroughC) {
  std::vector<float> k(4 * 8);
  IndexerKWrite::Args a;
  a.k = MakeTensorView(k.data(), DType::kBFloat16, {4, 8});
  a.k.strides[0] = 9;
  a.ln_eps = 0.25f;
  a.rope_style = RopeStyle::kInterleaved;
  a.cache_dtype = DType::kFloat8E4m3fnuz;
  const DsaIndexerKWriteArgs c = ToCArgs(a);
  EXPECT_EQ(c.struct_size, sizeof(DsaIndexerKWriteArgs));
  EXPECT_EQ(c.k.struct_size, sizeof(DsaTensorView));
  EXPECT_EQ(c.rope_style, DSA_ROPE_INTERLEAVED);
  EXPECT_EQ(c.cache_dtype, DSA_DTYPE_FLOAT8_E4M3FNUZ);
  IndexerKWrite::Args back;
  ASSERT_THAT(FromCArgs(&c, &back), IsOk());
  EXPECT_EQ(back.k.data, k.data());
  EXPECT_EQ(back.k.dtype, DType::kBFloat16);
  EXPECT_EQ(back.k.stride(0), 9);
  EXPECT_EQ(back.ln_eps, 0.25f);
  EXPECT_EQ(back.rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(back.cache_dtype, DType::kFloat8E4m3fnuz);

  SparseMla::Args s;
  s.cache_format.dtype = DType::kFloat8E4m3fn;
  s.cache_format.kv_lora_rank = 256;
  s.qk_nope_head_dim = 192;
  s.softmax_scale = 0.125f;
  SparseMla::Args s_back;
  const DsaSparseMlaArgs sc = ToCArgs(s);
  ASSERT_THAT(FromCArgs(&sc, &s_back), IsOk());
  EXPECT_EQ(s_back.cache_format.dtype, DType::kFloat8E4m3fn);
  EXPECT_EQ(s_back.cache_format.kv_lora_rank, 256);
  EXPECT_EQ(s_back.qk_nope_head_dim, 192);
  EXPECT_EQ(s_back.softmax_scale, 0.125f);
}

TEST(KernelAbiTest, FieldsAnOlderHostLacksReadAsDefaults) {
  std::vector<float> k(4 * 8);
  IndexerKWrite::Args a;
  a.k = MakeTensorView(k.data(), DType::kFloat32, {4, 8});
  a.ln_eps = 0.5f;
  a.rope_style = RopeStyle::kInterleaved;
  // An "older" struct that ends just before ln_eps.
  auto older = Truncated(ToCArgs(a), offsetof(DsaIndexerKWriteArgs, ln_eps));
  IndexerKWrite::Args read;
  ASSERT_THAT(FromCArgs(older.get(), &read), IsOk());
  EXPECT_EQ(read.k.data, k.data());
  EXPECT_EQ(read.k.dim(1), 8);
  EXPECT_EQ(read.ln_eps, 1e-6f);                 // the default
  EXPECT_EQ(read.rope_style, RopeStyle::kNeox);  // the default
  EXPECT_EQ(read.topk_indices.rank, 0);          // absent

  // Through a kernel: what is missing is an error, never a read past it.
  TopKData data;
  auto short_topk = Truncated(ToCArgs(data.Args()),
                              offsetof(DsaIndexerTopKArgs, topk_indices));
  EXPECT_THAT(CallC(nullptr, short_topk.get()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("topk_indices has 0 dims")));
  // The whole struct in a buffer of exactly its size runs.
  auto exact = Truncated(ToCArgs(data.Args()), sizeof(DsaIndexerTopKArgs));
  // An execution context from before num_threads: one thread by default.
  DsaExecutionContext ctx = ExecutionContextToC(ExecutionContext());
  auto old_ctx = Truncated(ctx, offsetof(DsaExecutionContext, num_threads));
  ASSERT_THAT(CallC(old_ctx.get(), exact.get()), IsOk());
  EXPECT_EQ(data.out, (std::vector<int32_t>{4, 5, 7}));
}

TEST(KernelAbiTest, DenseMhaPrefillFromBeforeTheHostCopiesReadsThemAbsent) {
  std::vector<int32_t> seq_lens = {3, 5}, starts = {0, 2, 4};
  DenseMhaPrefill::Args a;
  a.seq_lens = MakeTensorView(seq_lens.data(), DType::kInt32, {2});
  a.softmax_scale = 0.25f;
  a.seq_lens_host = MakeTensorView(seq_lens.data(), DType::kInt32, {2});
  a.query_start_loc_host = MakeTensorView(starts.data(), DType::kInt32, {3});
  DenseMhaPrefill::Args read;
  ASSERT_THAT(
      FromCArgs(Truncated(ToCArgs(a), sizeof(DsaDenseMhaPrefillArgs)).get(),
                &read),
      IsOk());
  EXPECT_EQ(read.seq_lens_host.data, seq_lens.data());
  EXPECT_EQ(read.query_start_loc_host.dim(0), 3);
  // A host built before the two fields were appended.
  auto older =
      Truncated(ToCArgs(a), offsetof(DsaDenseMhaPrefillArgs, seq_lens_host));
  ASSERT_THAT(FromCArgs(older.get(), &read), IsOk());
  EXPECT_EQ(read.seq_lens.data, seq_lens.data());
  EXPECT_EQ(read.softmax_scale, 0.25f);
  EXPECT_EQ(read.seq_lens_host.data, nullptr);  // absent
  EXPECT_EQ(read.query_start_loc_host.data, nullptr);
}

// The indexer numerics appended to indexer_k_write and indexer_q: they
// round-trip, and a host built before them (a struct ending at the op's old
// last field) reads the old behaviour: no rounding, the format's max as the
// divisor, no rotation.
TEST(KernelAbiTest, IndexerNumericsFromBeforeTheyWereAppendedReadDefaults) {
  std::vector<uint16_t> k(2 * 8);
  IndexerKWrite::Args a;
  a.k = MakeTensorView(k.data(), DType::kBFloat16, {2, 8});
  a.ln_eps = 1e-5f;
  a.intermediate_dtype = DType::kBFloat16;
  a.fp8_scale_divisor = 224.0f;
  a.hadamard_rotation = 1;
  IndexerKWrite::Args back;
  const DsaIndexerKWriteArgs c = ToCArgs(a);
  EXPECT_EQ(c.intermediate_dtype, DSA_DTYPE_BFLOAT16);
  ASSERT_THAT(FromCArgs(&c, &back), IsOk());
  EXPECT_EQ(back.intermediate_dtype, DType::kBFloat16);
  EXPECT_EQ(back.fp8_scale_divisor, 224.0f);
  EXPECT_EQ(back.hadamard_rotation, 1);
  auto older = Truncated(c, offsetof(DsaIndexerKWriteArgs, intermediate_dtype));
  ASSERT_THAT(FromCArgs(older.get(), &back), IsOk());
  EXPECT_EQ(back.k.data, k.data());
  EXPECT_EQ(back.ln_eps, 1e-5f);
  EXPECT_EQ(back.intermediate_dtype, DType::kFloat32);
  EXPECT_EQ(back.fp8_scale_divisor, 0.0f);
  EXPECT_EQ(back.hadamard_rotation, 0);
  // Half of the appended fields: the rest keep their defaults.
  auto partial =
      Truncated(c, offsetof(DsaIndexerKWriteArgs, hadamard_rotation));
  ASSERT_THAT(FromCArgs(partial.get(), &back), IsOk());
  EXPECT_EQ(back.intermediate_dtype, DType::kBFloat16);
  EXPECT_EQ(back.fp8_scale_divisor, 224.0f);
  EXPECT_EQ(back.hadamard_rotation, 0);

  IndexerQ::Args q;
  q.rope_style = RopeStyle::kInterleaved;
  q.intermediate_dtype = DType::kBFloat16;
  q.fp8_scale_divisor = 224.0f;
  q.hadamard_rotation = 1;
  IndexerQ::Args q_back;
  const DsaIndexerQArgs qc = ToCArgs(q);
  ASSERT_THAT(FromCArgs(&qc, &q_back), IsOk());
  EXPECT_EQ(q_back.fp8_scale_divisor, 224.0f);
  auto q_older = Truncated(qc, offsetof(DsaIndexerQArgs, intermediate_dtype));
  ASSERT_THAT(FromCArgs(q_older.get(), &q_back), IsOk());
  EXPECT_EQ(q_back.rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(q_back.intermediate_dtype, DType::kFloat32);
  EXPECT_EQ(q_back.fp8_scale_divisor, 0.0f);
  EXPECT_EQ(q_back.hadamard_rotation, 0);
}

// Through a kernel: an older host's K write (its struct ends before the
// numerics, in a buffer of exactly that size) runs with the old behaviour,
// writing the same bytes as a current host passing the defaults.
TEST(KernelAbiTest, AnOlderHostsIndexerKWriteRunsWithTheOldNumerics) {
  constexpr int64_t kTokens = 3, kDim = 64, kRope = 32;
  std::vector<float> k(kTokens * kDim), w(kDim, 1.0f), b(kDim, 0.0f);
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::sin(0.37 * i) * 3.0f;
  std::vector<int64_t> positions = {0, 5, 9}, slots = {2, 0, 1};
  std::vector<float> cos_sin(16 * kRope);
  for (int p = 0; p < 16; ++p) {
    for (int i = 0; i < kRope / 2; ++i) {
      cos_sin[p * kRope + i] = std::cos(p * 0.1 * (i + 1));
      cos_sin[p * kRope + kRope / 2 + i] = std::sin(p * 0.1 * (i + 1));
    }
  }
  auto run = [&](bool older) {
    std::vector<uint8_t> cache(4 * (kDim + 4), 0x55);
    std::vector<int32_t> topk(kTokens * 4, 7);
    IndexerKWrite::Args a;
    a.k = MakeTensorView(k.data(), DType::kFloat32, {kTokens, kDim});
    a.ln_weight = MakeTensorView(w.data(), DType::kFloat32, {kDim});
    a.ln_bias = MakeTensorView(b.data(), DType::kFloat32, {kDim});
    a.positions = MakeTensorView(positions.data(), DType::kInt64, {kTokens});
    a.cos_sin_cache =
        MakeTensorView(cos_sin.data(), DType::kFloat32, {16, kRope});
    a.slot_mapping = MakeTensorView(slots.data(), DType::kInt64, {kTokens});
    a.k_cache = MakeTensorView(cache.data(), DType::kUint8, {1, 4, kDim + 4});
    a.cache_dtype = DType::kFloat8E4m3fnuz;
    a.topk_indices = MakeTensorView(topk.data(), DType::kInt32, {kTokens, 4});
    const DsaIndexerKWriteArgs c = ToCArgs(a);
    auto args =
        Truncated(c, older ? offsetof(DsaIndexerKWriteArgs, intermediate_dtype)
                           : sizeof(DsaIndexerKWriteArgs));
    char error[256] = "";
    const DsaStatusCode code = CKernel<IndexerKWrite, &cpu::IndexerKWriteCpu>(
        nullptr, args.get(), error, sizeof(error));
    EXPECT_EQ(code, DSA_STATUS_OK) << error;
    return cache;
  };
  EXPECT_EQ(run(/*older=*/true), run(/*older=*/false));
}

TEST(KernelAbiTest, DenseMhaPrefillFromBeforeTheSplitWeightsReadsThemAbsent) {
  std::vector<uint16_t> wk(2 * 3 * 8), wv(2 * 4 * 8);
  std::vector<int32_t> seq_lens = {3, 5}, starts = {0, 2, 4};
  DenseMhaPrefill::Args a;
  a.seq_lens_host = MakeTensorView(seq_lens.data(), DType::kInt32, {2});
  a.query_start_loc_host = MakeTensorView(starts.data(), DType::kInt32, {3});
  a.w_uk = MakeTensorView(wk.data(), DType::kBFloat16, {2, 3, 8});
  a.w_uv = MakeTensorView(wv.data(), DType::kBFloat16, {2, 4, 8});
  DenseMhaPrefill::Args read;
  ASSERT_THAT(
      FromCArgs(Truncated(ToCArgs(a), sizeof(DsaDenseMhaPrefillArgs)).get(),
                &read),
      IsOk());
  EXPECT_EQ(read.w_uk.data, wk.data());
  EXPECT_EQ(read.w_uv.dim(1), 4);
  // A host built before the split weights were appended: absent, and the
  // host copies before them still read.
  auto older = Truncated(ToCArgs(a), offsetof(DsaDenseMhaPrefillArgs, w_uk));
  ASSERT_THAT(FromCArgs(older.get(), &read), IsOk());
  EXPECT_EQ(read.seq_lens_host.data, seq_lens.data());
  EXPECT_TRUE(read.w_uk.absent());
  EXPECT_TRUE(read.w_uv.absent());
}

TEST(KernelAbiTest, NewerHostsLongerStructsAreReadUpToWhatTheKernelKnows) {
  TopKData data;
  struct Newer {
    DsaIndexerTopKArgs args;
    int64_t appended_field;
  };
  auto newer = std::make_unique<Newer>();
  newer->args = ToCArgs(data.Args());
  newer->args.struct_size = sizeof(Newer);
  newer->appended_field = 42;
  ASSERT_THAT(CallC(nullptr, &newer->args), IsOk());
  EXPECT_EQ(data.out, (std::vector<int32_t>{4, 5, 7}));
}

TEST(KernelAbiTest, MalformedArgumentsAreInvalidArgument) {
  TopKData data;
  EXPECT_THAT(CallC(nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NULL")));
  DsaIndexerTopKArgs c = ToCArgs(data.Args());
  c.struct_size = 0;
  EXPECT_THAT(CallC(nullptr, &c), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("struct_size 0")));
  c = ToCArgs(data.Args());
  c.logits.struct_size = sizeof(DsaTensorView) - 8;
  EXPECT_THAT(CallC(nullptr, &c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("indexer_topk: logits is a tensor view of "
                                 "struct_size")));
  c = ToCArgs(data.Args());
  c.row_key_end.rank = 5;
  EXPECT_THAT(CallC(nullptr, &c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("row_key_end has rank 5")));
  c = ToCArgs(data.Args());
  c.logits.dtype = 99;
  EXPECT_THAT(CallC(nullptr, &c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("logits has unknown dtype code 99")));
  DsaExecutionContext ctx = ExecutionContextToC(ExecutionContext());
  ctx.struct_size = 2;
  c = ToCArgs(data.Args());
  EXPECT_THAT(CallC(&ctx, &c), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("execution context")));
  // The output written over the input: refused before anything is written.
  IndexerTopK::Args aliased = data.Args();
  aliased.topk_indices.data = data.ks.data();
  aliased.topk_indices.shape[1] = 1;
  c = ToCArgs(aliased);
  EXPECT_THAT(CallC(nullptr, &c), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("overlap in memory")));
  EXPECT_EQ(data.ks, std::vector<int32_t>{1});
}

TEST(KernelAbiTest, AnAliasedCacheBlockIsRefused) {
  // Two blocks on the same memory: one token's write would be lost.
  std::vector<float> kv_c(2 * 128, 0.5f), k_pe(2 * 64, 0.25f);
  std::vector<uint16_t> cache(2 * 4 * (128 + 64));
  std::vector<int64_t> slots = {0, 4};
  MlaCacheWrite::Args a;
  a.cache_format.kv_lora_rank = 128;
  a.kv_c = MakeTensorView(kv_c.data(), DType::kFloat32, {2, 128});
  a.k_pe = MakeTensorView(k_pe.data(), DType::kFloat32, {2, 64});
  a.slot_mapping = MakeTensorView(slots.data(), DType::kInt64, {2});
  a.kv_cache = MakeTensorView(cache.data(), DType::kBFloat16, {2, 4, 192});
  EXPECT_THAT(MlaCacheWrite::Validate(a), IsOk());
  a.kv_cache.strides[0] = 0;
  EXPECT_THAT(
      MlaCacheWrite::Validate(a),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kv_cache")));
}

dsa::Status ThrowsBadAlloc(const ExecutionContext&, const IndexerTopK::Args&) {
  throw std::bad_alloc();
}
dsa::Status ThrowsOther(const ExecutionContext&, const IndexerTopK::Args&) {
  throw std::runtime_error("kernel bug");
}

TEST(KernelAbiTest, ExceptionsBecomeStatusesAtTheBoundary) {
  TopKData data;
  const DsaIndexerTopKArgs c = ToCArgs(data.Args());
  char error[128];
  EXPECT_EQ((CKernel<IndexerTopK, &ThrowsBadAlloc>(nullptr, &c, error,
                                                   sizeof(error))),
            DSA_STATUS_RESOURCE_EXHAUSTED);
  EXPECT_STREQ(error, "indexer_topk: out of host memory");
  EXPECT_EQ(
      (CKernel<IndexerTopK, &ThrowsOther>(nullptr, &c, error, sizeof(error))),
      DSA_STATUS_INTERNAL);
  EXPECT_STREQ(error, "indexer_topk: kernel bug");
  // A message longer than the buffer is cut, always NUL-terminated.
  char tiny[8];
  EXPECT_EQ(
      (CKernel<IndexerTopK, &ThrowsOther>(nullptr, &c, tiny, sizeof(tiny))),
      DSA_STATUS_INTERNAL);
  EXPECT_STREQ(tiny, "indexer");
}

}  // namespace
}  // namespace dsa::attention
