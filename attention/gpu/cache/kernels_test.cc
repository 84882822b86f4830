// The GPU indexer K write, indexer Q and MLA latent cache write against the
// CPU kernels, byte for byte: the same fresh random inputs go to both, the
// outputs start from the same poison, and every byte of the caches, the
// top-k buffers, the fp8 queries and the head weights must be equal (the
// skip on/off equality on a GPU depends on it). Shapes: DeepSeek-V3.2 and
// GLM-5.x (indexer 128 dims, 32 and 64 heads, topk 2048, latent 512 + 64)
// and the tiny presets' (64 dims, rope 32), both fp8 encodings, f32 and
// bf16 inputs, padding slots, aligned (16-byte vector) and unaligned rows.
// The kernels are called through the op layer (op_kernels.h), which fills
// the launchers' parameters, and again with the staged body forced
// (force_staged_path), so that the K write and Q run both of their bodies
// (heuristics.h). Skips without a GPU backend or device.
#include "attention/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/dtypes/bf16.h"
#include "attention/dtypes/dtype.h"
#include "attention/dtypes/fp8.h"
#include "attention/gpu/cache/launch.h"
#include "attention/gpu/device/runtime.h"
#include "attention/gpu/op_kernels.h"
#include "attention/ops.h"
#include "attention/tensor.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

constexpr uint8_t kPoison = 0xA7;

// Device copies of host buffers, freed at the end of the test.
class Device {
 public:
  ~Device() {
    for (void* p : ptrs_) (void)DeviceFree(p);
  }
  // Returns nullptr (and records why) when there is no device.
  void* Upload(const void* host, size_t bytes) {
    void* p = nullptr;
    last_ = DeviceMalloc(&p, bytes == 0 ? 1 : bytes);
    if (!last_.ok()) return nullptr;
    ptrs_.push_back(p);
    if (bytes > 0) last_ = CopyToDevice(p, host, bytes);
    return last_.ok() ? p : nullptr;
  }
  template <class T>
  std::vector<T> Download(const void* device, size_t count) {
    std::vector<T> host(count);
    if (count > 0) last_ = CopyToHost(host.data(), device, count * sizeof(T));
    return host;
  }
  const LaunchResult& last() const { return last_; }

 private:
  std::vector<void*> ptrs_;
  LaunchResult last_;
};

// Skips without a backend or a device.
#define SKIP_WITHOUT_DEVICE()                      \
  do {                                             \
    void* p_ = nullptr;                            \
    const LaunchResult r_ = DeviceMalloc(&p_, 16); \
    if (r_.code == LaunchCode::kNotBuilt ||        \
        r_.code == LaunchCode::kNoDevice) {        \
      GTEST_SKIP() << r_.message;                  \
    }                                              \
    ASSERT_TRUE(r_.ok()) << r_.message;            \
    (void)DeviceFree(p_);                          \
  } while (0)

// Host float data as the bytes of `dtype` (float32 or bf16).
std::vector<uint8_t> AsBytes(const std::vector<float>& v, DType dtype) {
  std::vector<uint8_t> bytes(v.size() * DTypeSize(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kFloat32) {
      std::memcpy(bytes.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t b = FloatToBf16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    }
  }
  return bytes;
}

// Random values with the spread real activations have, plus rows whose
// dynamic range is wide enough that a float64 sum in another order would
// round differently (the LayerNorm statistics), and exact zeros.
std::vector<float> RandomActivations(std::mt19937_64& rng, int64_t rows,
                                     int64_t cols, float offset) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> v(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const int kind = static_cast<int>(rng() % 8);
    for (int64_t c = 0; c < cols; ++c) {
      float x = normal(rng) + offset;
      if (kind == 0) x *= std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
      if (kind == 1 && c % 17 == 0) x = 0.0f;
      v[r * cols + c] = x;
    }
  }
  return v;
}

std::vector<float> CosSin(int64_t positions, int64_t rope) {
  std::vector<float> cs(positions * rope);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < rope / 2; ++i) {
      const double f = std::pow(10000.0, -2.0 * i / rope);
      cs[p * rope + i] = static_cast<float>(std::cos(p * f));
      cs[p * rope + rope / 2 + i] = static_cast<float>(std::sin(p * f));
    }
  }
  return cs;
}

// Slots for `tokens` tokens in a cache of `num_slots`: distinct, shuffled,
// about one in six -1 (padding), except token 0, which is always written.
std::vector<int64_t> RandomSlots(std::mt19937_64& rng, int64_t tokens,
                                 int64_t num_slots) {
  std::vector<int64_t> free_slots(num_slots);
  std::iota(free_slots.begin(), free_slots.end(), 0);
  std::shuffle(free_slots.begin(), free_slots.end(), rng);
  std::vector<int64_t> slots(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    slots[t] = t > 0 && rng() % 6 == 0 ? -1 : free_slots[t];
  }
  return slots;
}

std::string Describe(DType fp8, RopeStyle style, DType in) {
  return std::string(DTypeName(fp8)) +
         (style == RopeStyle::kNeox ? " neox " : " interleaved ") +
         DTypeName(in);
}

// Index of the first differing byte, or -1.
int64_t FirstDifference(const std::vector<uint8_t>& a,
                        const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

class CacheKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uint64_t seed = std::random_device()();
    if (const char* env = std::getenv("DSA_TEST_SEED")) {
      seed = std::strtoull(env, nullptr, 10);
    }
    seed_ = seed;
    rng_.seed(seed);
  }
  void TearDown() override {
    if (HasFailure()) {
      std::fprintf(stderr, "Random inputs were drawn with DSA_TEST_SEED=%llu\n",
                   static_cast<unsigned long long>(seed_));
    }
  }
  std::mt19937_64 rng_;
  uint64_t seed_ = 0;
};

// ---------------------------------------------------------------------------
// Indexer K write.

struct KWriteShape {
  int64_t tokens, head_dim, rope_dim, block_size, num_blocks, topk;
  // Row stride of k in elements (head_dim: contiguous) and the element
  // offset of row 0 (1 makes every row unaligned: the scalar path).
  int64_t k_stride, k_offset;
};

// The indexer numerics appended to the K write and Q (ops.h): bf16
// roundings, vLLM's fp8 scale divisor, the Hadamard rotation. Off: the ops'
// defaults.
struct Numerics {
  bool round_to_bf16 = false;
  bool vllm_divisor = false;
  bool hadamard = false;
};
template <class Args>
void SetNumerics(const Numerics& n, DType fp8, Args& a) {
  a.intermediate_dtype = n.round_to_bf16 ? DType::kBFloat16 : DType::kFloat32;
  a.fp8_scale_divisor = n.vllm_divisor ? VllmFp8ScaleDivisor(fp8) : 0.0f;
  a.hadamard_rotation = n.hadamard ? 1 : 0;
}
std::string DescribeNumerics(const Numerics& n) {
  return std::string(n.round_to_bf16 ? " bf16-rounded" : "") +
         (n.vllm_divisor ? " vllm-divisor" : "") +
         (n.hadamard ? " hadamard" : "");
}

void RunKWrite(std::mt19937_64& rng, const KWriteShape& s, DType fp8,
               RopeStyle style, DType in, const Numerics& numerics = {}) {
  SCOPED_TRACE(Describe(fp8, style, in) + DescribeNumerics(numerics) +
               " tokens " + std::to_string(s.tokens) + " head_dim " +
               std::to_string(s.head_dim) + " topk " + std::to_string(s.topk) +
               " k_offset " + std::to_string(s.k_offset));
  const int64_t max_pos = 4096;
  const int64_t k_elems = s.k_offset + (s.tokens - 1) * s.k_stride + s.head_dim;
  const std::vector<float> k = RandomActivations(rng, k_elems, 1, 0.75f);
  std::vector<float> ln_w = RandomActivations(rng, 1, s.head_dim, 1.0f);
  std::vector<float> ln_b = RandomActivations(rng, 1, s.head_dim, 0.0f);
  const std::vector<float> cs = CosSin(max_pos, s.rope_dim);
  std::vector<int64_t> positions(s.tokens);
  for (auto& p : positions) p = static_cast<int64_t>(rng() % max_pos);
  const std::vector<int64_t> slots =
      RandomSlots(rng, s.tokens, s.num_blocks * s.block_size);
  const std::vector<uint8_t> k_bytes = AsBytes(k, in);
  const std::vector<uint8_t> w_bytes = AsBytes(ln_w, in);
  const std::vector<uint8_t> b_bytes = AsBytes(ln_b, DType::kFloat32);
  std::vector<uint8_t> cache(s.num_blocks * s.block_size * (s.head_dim + 4),
                             kPoison);
  std::vector<int32_t> topk(s.tokens * s.topk, 0x5a5a5a5a);

  auto make_args = [&](const void* kp, const void* wp, const void* bp,
                       const void* pp, const void* csp, const void* sp,
                       void* cp, void* tp) {
    IndexerKWrite::Args a;
    a.k = MakeTensorView(
        static_cast<const uint8_t*>(kp) + s.k_offset * DTypeSize(in), in,
        {s.tokens, s.head_dim});
    a.k.strides[0] = s.k_stride;
    a.ln_weight = MakeTensorView(wp, in, {s.head_dim});
    a.ln_bias = MakeTensorView(bp, DType::kFloat32, {s.head_dim});
    a.ln_eps = 1e-6f;
    a.positions = MakeTensorView(pp, DType::kInt64, {s.tokens});
    a.cos_sin_cache =
        MakeTensorView(csp, DType::kFloat32, {max_pos, s.rope_dim});
    a.rope_style = style;
    a.slot_mapping = MakeTensorView(sp, DType::kInt64, {s.tokens});
    a.k_cache = MakeTensorView(cp, DType::kUint8,
                               {s.num_blocks, s.block_size, s.head_dim + 4});
    a.cache_dtype = fp8;
    a.topk_indices = MakeTensorView(tp, DType::kInt32, {s.tokens, s.topk});
    SetNumerics(numerics, fp8, a);
    return a;
  };

  std::vector<uint8_t> cpu_cache = cache;
  std::vector<int32_t> cpu_topk = topk;
  ExecutionContext cpu_ctx;
  cpu_ctx.num_threads = 2;
  const Status cpu_status = cpu::IndexerKWriteCpu(
      cpu_ctx, make_args(k_bytes.data(), w_bytes.data(), b_bytes.data(),
                         positions.data(), cs.data(), slots.data(),
                         cpu_cache.data(), cpu_topk.data()));
  ASSERT_TRUE(cpu_status.ok()) << cpu_status.message();

  Device dev;
  void* dk = dev.Upload(k_bytes.data(), k_bytes.size());
  void* dw = dev.Upload(w_bytes.data(), w_bytes.size());
  void* db = dev.Upload(b_bytes.data(), b_bytes.size());
  void* dp = dev.Upload(positions.data(), positions.size() * 8);
  void* dcs = dev.Upload(cs.data(), cs.size() * 4);
  void* ds = dev.Upload(slots.data(), slots.size() * 8);
  // The body op_kernels runs (heuristics.h: registers at head_dim 128),
  // then the staged body forced, each from the poison.
  for (const bool staged : {false, true}) {
    void* dc = dev.Upload(cache.data(), cache.size());
    void* dt = dev.Upload(topk.data(), topk.size() * 4);
    ASSERT_TRUE(dev.last().ok()) << dev.last().message;
    const IndexerKWrite::Args args = make_args(dk, dw, db, dp, dcs, ds, dc, dt);
    IndexerKWriteParams params = IndexerKWriteParamsFor(args);
    params.force_staged_path = staged;
    SCOPED_TRACE(std::string(staged ? "forced " : "default ") +
                 IndexerKWritePath(params) + " path");
    if (!staged) {
      const Status gpu_status = IndexerKWriteGpu(ExecutionContext{}, args);
      ASSERT_TRUE(gpu_status.ok()) << gpu_status.message();
    } else {
      ASSERT_STREQ(IndexerKWritePath(params), "staged");
      const LaunchResult r = IndexerKWriteLaunch(params, nullptr);
      ASSERT_TRUE(r.ok()) << r.message;
    }
    ASSERT_TRUE(DeviceSynchronize().ok());
    const std::vector<uint8_t> gpu_cache =
        dev.Download<uint8_t>(dc, cache.size());
    const std::vector<int32_t> gpu_topk =
        dev.Download<int32_t>(dt, topk.size());
    ASSERT_TRUE(dev.last().ok()) << dev.last().message;
    const int64_t diff = FirstDifference(gpu_cache, cpu_cache);
    ASSERT_EQ(diff, -1) << "cache byte " << diff << " (block "
                        << diff / (s.block_size * (s.head_dim + 4)) << "): gpu "
                        << int{gpu_cache[diff]} << ", cpu "
                        << int{cpu_cache[diff]};
    for (size_t i = 0; i < gpu_topk.size(); ++i) {
      ASSERT_EQ(gpu_topk[i], -1) << "top-k element " << i;
    }
  }
  // The poison check the CPU side implies: written slots changed.
  int64_t written = 0;
  for (int64_t slot : slots) written += slot >= 0;
  EXPECT_GT(written, 0);
}

TEST_F(CacheKernelsTest, KWriteEqualsCpuAtRealShapes) {
  SKIP_WITHOUT_DEVICE();
  // By default these shapes run the register body; RunKWrite also forces
  // the staged one.
  IndexerKWriteParams shape;
  shape.head_dim = 128;
  shape.rope_dim = 64;
  ASSERT_STREQ(IndexerKWritePath(shape), "register");
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
      for (DType in : {DType::kFloat32, DType::kBFloat16}) {
        // 2049 tokens, topk 2048 (vector clear) in blocks of 64.
        RunKWrite(rng_, {2049, 128, 64, 64, 40, 2048, 128, 0}, fp8, style, in);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_F(CacheKernelsTest, KWriteEqualsCpuAtEdgeShapes) {
  SKIP_WITHOUT_DEVICE();
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
      // One token; topk 2047 (scalar clear); unaligned strided rows.
      RunKWrite(rng_, {1, 128, 64, 16, 1, 2047, 128, 0}, fp8, style,
                DType::kBFloat16);
      RunKWrite(rng_, {97, 128, 64, 16, 8, 2049, 257, 1}, fp8, style,
                DType::kFloat32);
      RunKWrite(rng_, {50, 128, 64, 16, 8, 7, 256, 128}, fp8, style,
                DType::kBFloat16);
      // The tiny presets: head_dim 64, rope 32; and an odd head_dim.
      RunKWrite(rng_, {40, 64, 32, 16, 3, 64, 64, 0}, fp8, style,
                DType::kBFloat16);
      RunKWrite(rng_, {33, 130, 32, 8, 5, 5, 130, 0}, fp8, style,
                DType::kFloat32);
      // head_dim 128 with a rope the register path does not take.
      RunKWrite(rng_, {20, 128, 48, 16, 2, 4, 128, 0}, fp8, style,
                DType::kBFloat16);
      if (HasFatalFailure()) return;
    }
  }
}

// Out-of-range slots and positions: skipped, never written outside the
// cache (compute-sanitizer memcheck runs this test), top-k still cleared.
TEST_F(CacheKernelsTest, KWriteSkipsOutOfRangeIndices) {
  SKIP_WITHOUT_DEVICE();
  const int64_t tokens = 6, hd = 128, rope = 64, bs = 4, blocks = 2;
  std::vector<float> k = RandomActivations(rng_, tokens, hd, 0.0f);
  std::vector<float> ln(hd, 1.0f);
  const std::vector<float> cs = CosSin(16, rope);
  const std::vector<int64_t> positions = {0, 16, -1, 3, 4, 5};
  const std::vector<int64_t> slots = {0, 1, 2, 8, -7, 1LL << 40};
  std::vector<uint8_t> cache(blocks * bs * (hd + 4), kPoison);
  std::vector<int32_t> topk(tokens * 8, 7);
  Device dev;
  IndexerKWriteParams p;
  p.k = dev.Upload(k.data(), k.size() * 4);
  p.k_row_stride = hd;
  p.ln_weight = dev.Upload(ln.data(), ln.size() * 4);
  p.ln_bias = p.ln_weight;
  p.positions = static_cast<const int64_t*>(
      dev.Upload(positions.data(), positions.size() * 8));
  p.cos_sin_cache =
      static_cast<const float*>(dev.Upload(cs.data(), cs.size() * 4));
  p.max_position = 16;
  p.cos_sin_stride = rope;
  p.rope_dim = rope;
  p.slot_mapping =
      static_cast<const int64_t*>(dev.Upload(slots.data(), slots.size() * 8));
  p.num_blocks = blocks;
  p.block_size = bs;
  p.topk = 8;
  p.topk_stride = 8;
  p.tokens = tokens;
  p.head_dim = hd;
  ASSERT_TRUE(dev.last().ok()) << dev.last().message;
  for (const bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "forced staged path" : "default (register) path");
    p.k_cache = static_cast<uint8_t*>(dev.Upload(cache.data(), cache.size()));
    p.topk_indices =
        static_cast<int32_t*>(dev.Upload(topk.data(), topk.size() * 4));
    p.force_staged_path = staged;
    const LaunchResult r = IndexerKWriteLaunch(p, nullptr);
    ASSERT_TRUE(r.ok()) << r.message;
    ASSERT_TRUE(DeviceSynchronize().ok());
    const std::vector<uint8_t> got =
        dev.Download<uint8_t>(p.k_cache, cache.size());
    // Only token 0 (slot 0) is valid: slot 1 has position 16, slot 2 position
    // -1, the rest are outside the 8 slots.
    for (int64_t slot = 1; slot < blocks * bs; ++slot) {
      const int64_t block = slot / bs, off = slot % bs;
      const uint8_t* v = got.data() + block * bs * (hd + 4) + off * hd;
      for (int64_t d = 0; d < hd; ++d)
        ASSERT_EQ(v[d], kPoison) << "slot " << slot;
    }
    EXPECT_FALSE(std::all_of(got.begin(), got.begin() + hd, [](uint8_t c) {
      return c == kPoison;
    })) << "slot 0 was not written";
    for (int32_t v : dev.Download<int32_t>(p.topk_indices, topk.size())) {
      ASSERT_EQ(v, -1);
    }
  }
}

// ---------------------------------------------------------------------------
// Indexer Q.

void RunQ(std::mt19937_64& rng, int64_t tokens, int64_t heads, int64_t head_dim,
          int64_t rope_dim, DType fp8, RopeStyle style, DType in,
          int64_t head_pad, const Numerics& numerics = {}) {
  SCOPED_TRACE(Describe(fp8, style, in) + DescribeNumerics(numerics) +
               " tokens " + std::to_string(tokens) + " heads " +
               std::to_string(heads) + " head_dim " + std::to_string(head_dim) +
               " head_pad " + std::to_string(head_pad));
  const int64_t max_pos = 8192;
  // q rows head_pad elements apart beyond head_dim (0: contiguous).
  const int64_t head_stride = head_dim + head_pad;
  const std::vector<float> q =
      RandomActivations(rng, tokens * heads, head_stride, 0.0f);
  const std::vector<float> w = RandomActivations(rng, tokens, heads, 0.0f);
  const std::vector<float> cs = CosSin(max_pos, rope_dim);
  std::vector<int64_t> positions(tokens);
  for (auto& p : positions) p = static_cast<int64_t>(rng() % max_pos);
  const std::vector<uint8_t> q_bytes = AsBytes(q, in);
  const std::vector<uint8_t> w_bytes = AsBytes(w, in);
  std::vector<uint8_t> q_fp8(tokens * heads * head_dim, kPoison);
  std::vector<float> hw(tokens * heads, std::nanf(""));

  auto make_args = [&](const void* qp, const void* wp, const void* pp,
                       const void* csp, void* qo, void* ho) {
    IndexerQ::Args a;
    a.q = MakeTensorView(qp, in, {tokens, heads, head_dim});
    a.q.strides[0] = heads * head_stride;
    a.q.strides[1] = head_stride;
    a.weights = MakeTensorView(wp, in, {tokens, heads});
    a.positions = MakeTensorView(pp, DType::kInt64, {tokens});
    a.cos_sin_cache = MakeTensorView(csp, DType::kFloat32, {max_pos, rope_dim});
    a.rope_style = style;
    a.q_fp8 = MakeTensorView(qo, fp8, {tokens, heads, head_dim});
    a.head_weights = MakeTensorView(ho, DType::kFloat32, {tokens, heads});
    SetNumerics(numerics, fp8, a);
    return a;
  };
  std::vector<uint8_t> cpu_q = q_fp8;
  std::vector<float> cpu_hw = hw;
  ExecutionContext cpu_ctx;
  cpu_ctx.num_threads = 2;
  const Status cpu_status = cpu::IndexerQCpu(
      cpu_ctx, make_args(q_bytes.data(), w_bytes.data(), positions.data(),
                         cs.data(), cpu_q.data(), cpu_hw.data()));
  ASSERT_TRUE(cpu_status.ok()) << cpu_status.message();

  Device dev;
  void* dq = dev.Upload(q_bytes.data(), q_bytes.size());
  void* dw = dev.Upload(w_bytes.data(), w_bytes.size());
  void* dp = dev.Upload(positions.data(), positions.size() * 8);
  void* dcs = dev.Upload(cs.data(), cs.size() * 4);
  for (const bool staged : {false, true}) {
    void* dqo = dev.Upload(q_fp8.data(), q_fp8.size());
    void* dho = dev.Upload(hw.data(), hw.size() * 4);
    ASSERT_TRUE(dev.last().ok()) << dev.last().message;
    const IndexerQ::Args args = make_args(dq, dw, dp, dcs, dqo, dho);
    IndexerQParams params = IndexerQParamsFor(args);
    params.force_staged_path = staged;
    SCOPED_TRACE(std::string(staged ? "forced " : "default ") +
                 IndexerQPath(params) + " path");
    if (!staged) {
      const Status gpu_status = IndexerQGpu(ExecutionContext{}, args);
      ASSERT_TRUE(gpu_status.ok()) << gpu_status.message();
    } else {
      ASSERT_STREQ(IndexerQPath(params), "staged");
      const LaunchResult r = IndexerQLaunch(params, nullptr);
      ASSERT_TRUE(r.ok()) << r.message;
    }
    ASSERT_TRUE(DeviceSynchronize().ok());
    const std::vector<uint8_t> gpu_q = dev.Download<uint8_t>(dqo, q_fp8.size());
    const std::vector<float> gpu_hw = dev.Download<float>(dho, hw.size());
    const int64_t diff = FirstDifference(gpu_q, cpu_q);
    ASSERT_EQ(diff, -1) << "q_fp8 byte " << diff << " ((token, head) "
                        << diff / head_dim << "): gpu " << int{gpu_q[diff]}
                        << ", cpu " << int{cpu_q[diff]};
    for (size_t i = 0; i < gpu_hw.size(); ++i) {
      uint32_t g, c;
      std::memcpy(&g, &gpu_hw[i], 4);
      std::memcpy(&c, &cpu_hw[i], 4);
      ASSERT_EQ(g, c) << "head_weights " << i << ": gpu " << gpu_hw[i]
                      << ", cpu " << cpu_hw[i];
    }
  }
}

TEST_F(CacheKernelsTest, QEqualsCpuAtRealShapes) {
  SKIP_WITHOUT_DEVICE();
  // By default these shapes run the register body; RunQ also forces the
  // staged one.
  IndexerQParams shape;
  shape.tokens = 300;
  shape.heads = 64;
  shape.head_dim = 128;
  shape.rope_dim = 64;
  ASSERT_STREQ(IndexerQPath(shape), "register");
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
      for (DType in : {DType::kFloat32, DType::kBFloat16}) {
        RunQ(rng_, 300, 64, 128, 64, fp8, style, in, 0);  // DeepSeek-V3.2
        RunQ(rng_, 129, 32, 128, 64, fp8, style, in, 0);  // GLM-5.x
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_F(CacheKernelsTest, QEqualsCpuAtEdgeShapes) {
  SKIP_WITHOUT_DEVICE();
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    RunQ(rng_, 1, 32, 128, 64, fp8, RopeStyle::kNeox, DType::kBFloat16, 0);
    RunQ(rng_, 17, 4, 128, 64, fp8, RopeStyle::kNeox, DType::kFloat32, 3);
    RunQ(rng_, 9, 4, 64, 32, fp8, RopeStyle::kInterleaved, DType::kBFloat16, 0);
    RunQ(rng_, 5, 3, 130, 128, fp8, RopeStyle::kNeox, DType::kFloat32, 0);
    RunQ(rng_, 6, 5, 128, 48, fp8, RopeStyle::kInterleaved, DType::kFloat32, 0);
    RunQ(rng_, 7, 3, 128, 128, fp8, RopeStyle::kNeox, DType::kBFloat16, 1);
    RunQ(rng_, 9, 6, 128, 32, fp8, RopeStyle::kNeox, DType::kFloat32, 0);
    RunQ(rng_, 9, 6, 128, 32, fp8, RopeStyle::kInterleaved, DType::kBFloat16,
         0);
    if (HasFatalFailure()) return;
  }
}

// The engines' numerics (vLLM: bf16 roundings and divisor 224 on e4m3fnuz;
// DeepSeek's reference: the Hadamard rotation too) give the CPU kernels'
// bytes on both paths, at the real shapes and the tiny presets'.
TEST_F(CacheKernelsTest, EngineNumericsEqualCpu) {
  SKIP_WITHOUT_DEVICE();
  const Numerics kCases[] = {
      {true, true, false}, {true, true, true}, {false, false, true}};
  for (const Numerics& n : kCases) {
    for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
      for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
        RunKWrite(rng_, {2049, 128, 64, 64, 40, 2048, 128, 0}, fp8, style,
                  DType::kBFloat16, n);
        RunKWrite(rng_, {77, 64, 32, 16, 6, 64, 64, 0}, fp8, style,
                  DType::kFloat32, n);
        RunQ(rng_, 129, 32, 128, 64, fp8, style, DType::kBFloat16, 0, n);
        RunQ(rng_, 9, 4, 64, 32, fp8, style, DType::kFloat32, 0, n);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// MLA latent cache write.

void RunMlaWrite(std::mt19937_64& rng, DType cache_dtype, DType in,
                 int64_t tokens, int64_t lora, int64_t rope, int64_t block_size,
                 int64_t num_blocks, int64_t slot_pad) {
  SCOPED_TRACE(std::string(DTypeName(cache_dtype)) + " in " + DTypeName(in) +
               " tokens " + std::to_string(tokens) + " slot_pad " +
               std::to_string(slot_pad));
  LatentCacheFormat f;
  f.dtype = cache_dtype;
  f.kv_lora_rank = static_cast<int32_t>(lora);
  f.rope_dim = static_cast<int32_t>(rope);
  const int64_t width = LatentCacheEntryWidth(f);
  const DType view_dtype =
      IsFp8(cache_dtype) ? DType::kUint8 : DType::kBFloat16;
  const int64_t esize = static_cast<int64_t>(DTypeSize(view_dtype));
  // Entries slot_pad elements apart beyond the entry width.
  const int64_t slot_stride = width + slot_pad;
  const int64_t cache_elems = num_blocks * block_size * slot_stride;
  const std::vector<float> kv_c = RandomActivations(rng, tokens, lora, 0.0f);
  const std::vector<float> k_pe = RandomActivations(rng, tokens, rope, 0.0f);
  const std::vector<int64_t> slots =
      RandomSlots(rng, tokens, num_blocks * block_size);
  const std::vector<uint8_t> kv_bytes = AsBytes(kv_c, in);
  const std::vector<uint8_t> pe_bytes = AsBytes(k_pe, in);
  std::vector<uint8_t> cache(cache_elems * esize, kPoison);
  auto make_args = [&](const void* kp, const void* pp, const void* sp,
                       void* cp) {
    MlaCacheWrite::Args a;
    a.kv_c = MakeTensorView(kp, in, {tokens, lora});
    a.k_pe = MakeTensorView(pp, in, {tokens, rope});
    a.slot_mapping = MakeTensorView(sp, DType::kInt64, {tokens});
    a.kv_cache =
        MakeTensorView(cp, view_dtype, {num_blocks, block_size, width});
    a.kv_cache.strides[1] = slot_stride;
    a.kv_cache.strides[0] = block_size * slot_stride;
    a.cache_format = f;
    return a;
  };
  std::vector<uint8_t> cpu_cache = cache;
  ExecutionContext cpu_ctx;
  cpu_ctx.num_threads = 2;
  const Status cpu_status =
      cpu::MlaCacheWriteCpu(cpu_ctx, make_args(kv_bytes.data(), pe_bytes.data(),
                                               slots.data(), cpu_cache.data()));
  ASSERT_TRUE(cpu_status.ok()) << cpu_status.message();
  Device dev;
  void* dk = dev.Upload(kv_bytes.data(), kv_bytes.size());
  void* dp = dev.Upload(pe_bytes.data(), pe_bytes.size());
  void* ds = dev.Upload(slots.data(), slots.size() * 8);
  void* dc = dev.Upload(cache.data(), cache.size());
  ASSERT_TRUE(dev.last().ok()) << dev.last().message;
  const Status gpu_status =
      MlaCacheWriteGpu(ExecutionContext{}, make_args(dk, dp, ds, dc));
  ASSERT_TRUE(gpu_status.ok()) << gpu_status.message();
  ASSERT_TRUE(DeviceSynchronize().ok());
  const std::vector<uint8_t> gpu_cache =
      dev.Download<uint8_t>(dc, cache.size());
  const int64_t diff = FirstDifference(gpu_cache, cpu_cache);
  ASSERT_EQ(diff, -1) << "cache byte " << diff << " (slot "
                      << diff / (slot_stride * esize) << "): gpu "
                      << int{gpu_cache[diff]} << ", cpu "
                      << int{cpu_cache[diff]};
}

TEST_F(CacheKernelsTest, MlaCacheWriteEqualsCpu) {
  SKIP_WITHOUT_DEVICE();
  for (DType cache :
       {DType::kBFloat16, DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    for (DType in : {DType::kFloat32, DType::kBFloat16}) {
      // Latent 512 + 64 (both presets), aligned entries (vector stores).
      RunMlaWrite(rng_, cache, in, 1000, 512, 64, 64, 17, 0);
      // One token; entries 1 element apart from alignment (scalar stores).
      RunMlaWrite(rng_, cache, in, 1, 512, 64, 16, 1, 0);
      RunMlaWrite(rng_, cache, in, 45, 512, 64, 16, 4, 1);
      // The tiny presets' latent (128 + 32).
      RunMlaWrite(rng_, cache, in, 30, 128, 32, 8, 5, 0);
      if (HasFatalFailure()) return;
    }
  }
}

// ---------------------------------------------------------------------------
// What the launchers reject, with a message naming it.

TEST_F(CacheKernelsTest, LaunchersRejectBadShapes) {
  SKIP_WITHOUT_DEVICE();
  IndexerKWriteParams k;
  k.tokens = 1;
  k.head_dim = 128;
  k.block_size = 16;
  k.rope_dim = 63;
  LaunchResult r = IndexerKWriteLaunch(k, nullptr);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("rope_dim 63"), std::string::npos)
      << r.message;
  k.rope_dim = 64;
  r = IndexerKWriteLaunch(k, nullptr);  // null pointers
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("null"), std::string::npos)
      << r.message;
  IndexerQParams q;
  q.tokens = 1;
  q.heads = 1;
  q.head_dim = 1 << 20;
  r = IndexerQLaunch(q, nullptr);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("head_dim 1048576"), std::string::npos)
      << r.message;
  MlaCacheWriteParams m;
  m.tokens = 1;
  m.kv_lora_rank = 500;
  m.rope_dim = 64;
  m.block_size = 16;
  m.layout = LatentLayout::kFp8;
  r = MlaCacheWriteLaunch(m, nullptr);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("kv_lora_rank 500"), std::string::npos)
      << r.message;
}

// ---------------------------------------------------------------------------
// The kernels' fp8 conversion (hardware on sm_89+ for e4m3fn) against
// FloatToFp8, over every 128th float32 bit pattern (2^25 values: every
// exponent, both signs, subnormals, the saturation range, infinities and
// NaNs) plus the values around each fp8 rounding boundary.

TEST_F(CacheKernelsTest, Fp8ConversionEqualsHost) {
  SKIP_WITHOUT_DEVICE();
  std::vector<float> in;
  in.reserve((size_t{1} << 25) + 4096);
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 128) {
    uint32_t b =
        static_cast<uint32_t>(bits) | static_cast<uint32_t>((bits >> 7) & 127);
    float f;
    std::memcpy(&f, &b, 4);
    in.push_back(f);
  }
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    const Fp8Traits traits = Fp8TraitsOf(fp8);
    // Midpoints between neighbouring codes and their float neighbours.
    for (int c = 0; c < 0x7f; ++c) {
      const float a = Fp8ToFloat(static_cast<uint8_t>(c), traits);
      const float b = Fp8ToFloat(static_cast<uint8_t>(c + 1), traits);
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const float mid = 0.5f * (a + b);
      for (float x :
           {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), a, b}) {
        in.push_back(x);
        in.push_back(-x);
      }
    }
  }
  const int64_t n = static_cast<int64_t>(in.size());
  Device dev;
  const float* din = static_cast<const float*>(dev.Upload(in.data(), n * 4));
  void* dout = dev.Upload(std::vector<uint8_t>(n, 0).data(), n);
  ASSERT_TRUE(dev.last().ok()) << dev.last().message;
  for (DType fp8 : {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz}) {
    SCOPED_TRACE(DTypeName(fp8));
    const LaunchResult r = Fp8EncodeForTesting(
        din, static_cast<uint8_t*>(dout), n,
        fp8 == DType::kFloat8E4m3fnuz ? Fp8Encoding::kE4m3fnuz
                                      : Fp8Encoding::kE4m3fn,
        nullptr);
    ASSERT_TRUE(r.ok()) << r.message;
    ASSERT_TRUE(DeviceSynchronize().ok());
    const std::vector<uint8_t> got = dev.Download<uint8_t>(dout, n);
    const Fp8Traits traits = Fp8TraitsOf(fp8);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t want = FloatToFp8(in[i], traits);
      if (got[i] != want && ++mismatches <= 5) {
        uint32_t b;
        std::memcpy(&b, &in[i], 4);
        ADD_FAILURE() << "float bits 0x" << std::hex << b << " (" << in[i]
                      << "): gpu 0x" << int{got[i]} << ", host 0x" << int{want};
      }
    }
    EXPECT_EQ(mismatches, 0) << "of " << n;
  }
}

}  // namespace
}  // namespace dsa::attention::gpu
