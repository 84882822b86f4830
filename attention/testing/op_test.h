// The fixture of the attention op conformance suites: one suite per op
// family, written once and run on every platform in OpTestPlatforms().
//
// Tensors are allocated through the platform's DeviceRuntime and kernels are
// found through the registry (GetKernel<Op>), exactly as an engine does, so a
// GPU platform joins by being added to OpTestPlatforms() and linking its
// kernel registration; a platform that is not registered or has no device
// skips with a message. Every test draws fresh random inputs from a seed
// printed on failure (DSA_TEST_SEED=<seed> reproduces a run).
#ifndef DSA_ATTENTION_TESTING_OP_TEST_H_
#define DSA_ATTENTION_TESTING_OP_TEST_H_

#include <cstdint>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "attention/dtypes/dtype.h"
#include "attention/kernel_lookup.h"
#include "attention/ops.h"
#include "attention/reference/reference.h"
#include "attention/tensor.h"
#include "gtest/gtest.h"
#include "platform/registry.h"

namespace dsa::attention::testing {

// The platform ids the op suites are instantiated for.
std::vector<std::string> OpTestPlatforms();

class OpTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The ops a suite calls; SetUp skips on a platform that lacks a kernel
  // for any of them. All seven by default.
  virtual std::vector<std::string> RequiredOps() const;

  // Whether the platform's kernels check index values (slots, block ids,
  // windows) and report OutOfRange before writing: the CPU kernels do; GPU
  // kernels cannot without a synchronising copy, and clamp instead
  // (attention/ops.h).
  bool ChecksIndexValues() const { return GetParam() == "cpu"; }

  // A device copy of `host` viewed as row-major `shape` of `dtype`
  // (sizeof(T) must equal the dtype's size). The allocation lives until the
  // test ends.
  template <class T>
  TensorView ToDevice(const std::vector<T>& host, DType dtype,
                      std::initializer_list<int64_t> shape) {
    TensorView view = MakeTensorView(nullptr, dtype, shape);
    EXPECT_EQ(sizeof(T), DTypeSize(dtype));
    EXPECT_EQ(static_cast<int64_t>(host.size()), view.num_elements());
    view.data = Upload(host.data(), host.size() * sizeof(T));
    return view;
  }

  // A device copy of `host` under an arbitrary (strided) view: `view`'s
  // shape, strides and dtype are kept, its data points at element
  // `element_offset` of the copy.
  template <class T>
  TensorView ToDeviceStrided(const std::vector<T>& host, TensorView view,
                             int64_t element_offset = 0) {
    view.data = static_cast<T*>(Upload(host.data(), host.size() * sizeof(T))) +
                element_offset;
    return view;
  }

  // Float data as float32 or bfloat16. For bfloat16 the values are first
  // rounded in place (by the reference), so `values` holds exactly what the
  // kernel reads.
  TensorView FloatsToDevice(std::vector<float>& values, DType dtype,
                            std::initializer_list<int64_t> shape);

  // The `count` elements starting at the view's data.
  template <class T>
  std::vector<T> ToHost(const TensorView& view, int64_t count) {
    std::vector<T> host(count);
    Download(host.data(), view.data, count * sizeof(T));
    return host;
  }
  template <class T>
  std::vector<T> ToHost(const TensorView& view) {
    return ToHost<T>(view, view.num_elements());
  }

  // Runs an op's kernel for this platform and waits for it.
  template <class Op>
  absl::Status Run(const typename Op::Args& args) {
    absl::StatusOr<Kernel<Op>> fn =
        GetKernel<Op>(platform::Registry::Global(), GetParam());
    if (!fn.ok()) return fn.status();
    absl::Status status = (*fn)(ctx_, args);
    absl::Status sync = runtime_->Synchronize();
    return status.ok() ? sync : status;
  }

  std::mt19937_64& rng() { return rng_; }
  // Normal(0, stddev) floats, never exactly zero.
  std::vector<float> RandomFloats(int64_t n, double stddev = 1.0);
  // The same as bfloat16 bits (rounded by the reference).
  std::vector<uint16_t> RandomBf16(int64_t n, double stddev = 1.0);
  int64_t RandomInt(int64_t lo, int64_t hi);  // uniform in [lo, hi]

  ExecutionContext ctx_;

 private:
  void* Upload(const void* host, size_t bytes);
  void Download(void* host, const void* device, size_t bytes);

  std::optional<platform::DeviceRuntime> runtime_;
  std::vector<void*> allocations_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// Parameter names for INSTANTIATE_TEST_SUITE_P: the platform id.
std::string PlatformName(const ::testing::TestParamInfo<std::string>& info);

// ---------------------------------------------------------------------------
// Host-side test data.

reference::Fp8Kind KindOf(DType fp8_dtype);

// A rope table as engines build it (base 10000): cos_sin[pos] holds
// rope_dim/2 cosines then rope_dim/2 sines.
std::vector<float> RopeCosSinCache(int64_t max_position, int64_t rope_dim);

// A paged layout for requests of the given lengths: each request gets
// enough blocks, drawn at random from a pool with spare blocks, so block ids
// are neither contiguous nor ordered.
struct PagedLayout {
  int64_t block_size = 0;
  int64_t num_blocks = 0;
  int64_t max_blocks = 0;
  std::vector<int32_t> block_table;  // [requests, max_blocks], unused: -1
  std::vector<int32_t> seq_lens;
  int64_t Slot(int64_t request, int64_t position) const {
    return int64_t{block_table[request * max_blocks + position / block_size]} *
               block_size +
           position % block_size;
  }
};
PagedLayout MakePagedLayout(const std::vector<int32_t>& seq_lens,
                            int64_t block_size, std::mt19937_64& rng);

// Float value of a float32 / bfloat16 element for the references.
inline double AsDouble(float v) { return v; }
inline double AsDouble(uint16_t bf16) { return reference::Bf16Value(bf16); }

}  // namespace dsa::attention::testing

#endif  // DSA_ATTENTION_TESTING_OP_TEST_H_
