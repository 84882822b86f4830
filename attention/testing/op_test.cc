#include "attention/testing/op_test.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "platform/registry.h"

namespace dsa::attention::testing {

std::vector<std::string> OpTestPlatforms() {
  // A GPU platform's kernels are linked into the suites (attention/BUILD,
  // _OP_TEST_DEPS); without its device, or without a kernel a suite needs,
  // the suite skips on it with a message.
  return {"cpu", "cuda", "rocm"};
}

std::vector<std::string> OpTest::RequiredOps() const {
#define DSA_OP_NAME(CxxName, LIST, PREFIX) CxxName::kName,
  return {DSA_ATTENTION_OPS(DSA_OP_NAME)};
#undef DSA_OP_NAME
}

std::string PlatformName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

void OpTest::SetUp() {
  absl::StatusOr<platform::Platform> platform =
      platform::Registry::Global().GetPlatform(GetParam());
  if (!platform.ok()) {
    GTEST_SKIP() << "platform " << GetParam()
                 << " is not registered: " << platform.status();
  }
  runtime_.emplace(platform->runtime());
  if (!runtime_->available()) {
    GTEST_SKIP() << "platform " << GetParam() << " has no device";
  }
  if (platform->is_accelerator()) {
    absl::StatusOr<platform::DeviceInfo> devices = platform->ProbeDevices();
    if (!devices.ok() || devices->device_count == 0) {
      GTEST_SKIP() << "platform " << GetParam() << " has no device";
    }
  }
  // What a platform does not implement (yet) is listed by what it registers.
  const std::vector<std::string> registered =
      platform::Registry::Global().KernelOps(GetParam());
  for (const std::string& op : RequiredOps()) {
    if (std::find(registered.begin(), registered.end(), op) ==
        registered.end()) {
      GTEST_SKIP() << "platform " << GetParam() << " has no " << op
                   << " kernel";
    }
  }
  seed_ = std::random_device()();
  seed_ = (seed_ << 32) ^ std::random_device()();
  if (const char* env = std::getenv("DSA_TEST_SEED")) {
    if (!absl::SimpleAtoi(env, &seed_)) {
      ADD_FAILURE() << "DSA_TEST_SEED is not a number: " << env;
    }
  }
  rng_.seed(seed_);
}

void OpTest::TearDown() {
  if (HasFailure()) {
    std::cerr << "Random inputs were drawn with DSA_TEST_SEED=" << seed_
              << "\n";
  }
  for (void* p : allocations_) {
    EXPECT_TRUE(runtime_->Free(p).ok());
  }
  allocations_.clear();
}

void* OpTest::Upload(const void* host, size_t bytes) {
  // Never allocate zero bytes: a null data pointer is what the ops reject.
  absl::StatusOr<void*> p = runtime_->Allocate(std::max<size_t>(bytes, 1));
  if (!p.ok()) {
    ADD_FAILURE() << "Allocate(" << bytes << ") on " << GetParam() << ": "
                  << p.status();
    return nullptr;
  }
  allocations_.push_back(*p);
  if (bytes > 0) {
    absl::Status s = runtime_->CopyHostToDevice(*p, host, bytes);
    EXPECT_TRUE(s.ok()) << s;
  }
  return *p;
}

void OpTest::Download(void* host, const void* device, size_t bytes) {
  if (bytes == 0) return;
  absl::Status s = runtime_->CopyDeviceToHost(host, device, bytes);
  EXPECT_TRUE(s.ok()) << s;
}

std::vector<float> OpTest::RandomFloats(int64_t n, double stddev) {
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<float> v(n);
  for (float& x : v) {
    do {
      x = static_cast<float>(normal(rng_));
    } while (x == 0.0f);
  }
  return v;
}

std::vector<uint16_t> OpTest::RandomBf16(int64_t n, double stddev) {
  std::vector<uint16_t> v(n);
  std::vector<float> f = RandomFloats(n, stddev);
  for (int64_t i = 0; i < n; ++i) v[i] = reference::Bf16Nearest(f[i]);
  return v;
}

TensorView OpTest::FloatsToDevice(std::vector<float>& values, DType dtype,
                                  std::initializer_list<int64_t> shape) {
  if (dtype == DType::kFloat32) return ToDevice(values, dtype, shape);
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bits[i] = reference::Bf16Nearest(values[i]);
    values[i] = static_cast<float>(reference::Bf16Value(bits[i]));
  }
  return ToDevice(bits, DType::kBFloat16, shape);
}

int64_t OpTest::RandomInt(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
}

reference::Fp8Kind KindOf(DType fp8_dtype) {
  return fp8_dtype == DType::kFloat8E4m3fnuz ? reference::Fp8Kind::kE4m3fnuz
                                             : reference::Fp8Kind::kE4m3fn;
}

std::vector<float> RopeCosSinCache(int64_t max_position, int64_t rope_dim) {
  const int64_t half = rope_dim / 2;
  std::vector<float> cache(max_position * rope_dim);
  for (int64_t p = 0; p < max_position; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(10000.0, -2.0 * i / rope_dim);
      cache[p * rope_dim + i] = static_cast<float>(std::cos(p * inv_freq));
      cache[p * rope_dim + half + i] =
          static_cast<float>(std::sin(p * inv_freq));
    }
  }
  return cache;
}

PagedLayout MakePagedLayout(const std::vector<int32_t>& seq_lens,
                            int64_t block_size, std::mt19937_64& rng) {
  PagedLayout layout;
  layout.block_size = block_size;
  layout.seq_lens = seq_lens;
  int64_t needed = 0;
  for (int32_t len : seq_lens) {
    const int64_t blocks = (len + block_size - 1) / block_size;
    layout.max_blocks = std::max(layout.max_blocks, blocks);
    needed += blocks;
  }
  layout.max_blocks = std::max<int64_t>(layout.max_blocks, 1);
  layout.num_blocks = needed + 3;  // spare blocks the requests do not own
  std::vector<int32_t> pool(layout.num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  layout.block_table.assign(seq_lens.size() * layout.max_blocks, -1);
  size_t next = 0;
  for (size_t r = 0; r < seq_lens.size(); ++r) {
    const int64_t blocks = (seq_lens[r] + block_size - 1) / block_size;
    for (int64_t b = 0; b < blocks; ++b) {
      layout.block_table[r * layout.max_blocks + b] = pool[next++];
    }
  }
  return layout;
}

}  // namespace dsa::attention::testing
