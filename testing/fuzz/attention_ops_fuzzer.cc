// Fuzz target: every attention op's validation and its CPU kernel
// (attention/ops.h), at small shapes.
//
// The first byte picks the op. The rest decodes its dimensions (tokens,
// heads, head dims, blocks, requests, top-k width, ...), scalars, dtypes and
// the index values the kernels depend on (slots, block ids, sequence
// lengths, positions, key windows, top-k indices, query start locations):
// mostly in range, so kernels run, sometimes just outside it or at a
// boundary. Then a few mutations break the consistent layout: a view's
// dtype, rank, one dim or stride set to a boundary value (2^31, 2^30 in two
// dims, zero strides, padded or swapped strides), or its data taken away.
//
// Every view whose bytes fit in kMaxViewBytes gets a heap buffer of exactly
// the bytes its shape and strides reach, so ASan reports any access outside
// it; larger views get no data. Then Op::Validate and the CPU kernel (looked
// up in the registry like any host does) run, and:
//  - the kernel returns an error or succeeds; it never crashes or touches
//    memory outside the views;
//  - what Validate rejects the kernel rejects too;
//  - Validate never accepts a view that has elements but no data (the sign
//    of an element count that overflowed), nor an output whose elements
//    overlap (a zero stride over a dim longer than 1, overlapping rows): a
//    write to it would be lost;
//  - on success, the outputs the op defines exactly (the top-k clear, the
//    top-k selection's shape) are checked.
//
// It relies only on the ops' Args field names, Validate() and the kernel
// lookup, and tests statuses through `.ok()`, so it does not depend on the
// status type the kernels return.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attention/cpu/registration.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/dtype.h"
#include "attention/kernel_lookup.h"
#include "attention/ops.h"
#include "attention/tensor.h"
#include "platform/registry.h"
#include "testing/fuzz/fuzz_input.h"

namespace dsa::attention {
namespace {

using fuzz::FuzzInput;
using fuzz::SplitMix64;

// Views reaching more bytes than this get no buffer (and must be rejected
// unless empty).
constexpr int64_t kMaxViewBytes = int64_t{1} << 20;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "attention_ops_fuzzer: %s\n", what.c_str());
  std::abort();
}

std::string ShapeText(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < t.rank && i < kMaxTensorRank; ++i) {
    s += (i ? ", " : "") + std::to_string(t.shape[i]);
  }
  s += "] strides [";
  for (int i = 0; i < t.rank && i < kMaxTensorRank; ++i) {
    s += (i ? ", " : "") + std::to_string(t.strides[i]);
  }
  return s + "] dtype " + std::to_string(static_cast<int>(t.dtype));
}

// Elements of the view, or -1 when the count does not fit in int64.
int64_t TrueElements(const TensorView& t) {
  if (t.rank < 0 || t.rank > kMaxTensorRank) return 0;
  int64_t n = 1;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] <= 0) return 0;
  }
  for (int i = 0; i < t.rank; ++i) {
    if (__builtin_mul_overflow(n, t.shape[i], &n)) return -1;
  }
  return n;
}

// Elements from element 0 to the furthest one, plus one; -1 on overflow or
// a negative stride.
int64_t SpanElements(const TensorView& t) {
  const int64_t n = TrueElements(t);
  if (n <= 0) return n;
  int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) {
    int64_t step;
    if (t.strides[i] < 0 ||
        __builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return -1;
    }
  }
  return last < std::numeric_limits<int64_t>::max() ? last + 1 : -1;
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min()
                              : std::numeric_limits<int64_t>::max();
  }
  return r;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    return b < 0 ? std::numeric_limits<int64_t>::min()
                 : std::numeric_limits<int64_t>::max();
  }
  return r;
}

size_t ElementSize(DType d) {
  const size_t s = DTypeSize(d);
  return s == 0 ? 1 : s;
}

bool IsIntType(DType d) { return d == DType::kInt32 || d == DType::kInt64; }

void StoreInt(const TensorView& t, int64_t offset, int64_t v) {
  if (t.dtype == DType::kInt32) {
    t.data_as<int32_t>()[offset] = static_cast<int32_t>(v);
  } else {
    t.data_as<int64_t>()[offset] = v;
  }
}

int64_t LoadInt(const TensorView& t, int64_t offset) {
  return t.dtype == DType::kInt32 ? t.data_as<int32_t>()[offset]
                                  : t.data_as<int64_t>()[offset];
}

// A value in [lo, hi] most of the time, else one just outside or a boundary.
int64_t IndexValue(FuzzInput& in, int64_t lo, int64_t hi) {
  const uint8_t b = in.Byte();
  if (b < 232 && hi >= lo) {
    return lo + static_cast<int64_t>(b % static_cast<uint64_t>(hi - lo + 1));
  }
  switch (b % 8) {
    case 0:
      return lo > std::numeric_limits<int64_t>::min() ? lo - 1 : lo;
    case 1:
      return hi < std::numeric_limits<int64_t>::max() ? hi + 1 : hi;
    case 2:
      return -1;
    case 3:
      return std::numeric_limits<int32_t>::max();
    case 4:
      return std::numeric_limits<int32_t>::min();
    case 5:
      return std::numeric_limits<int64_t>::max();
    case 6:
      return std::numeric_limits<int64_t>::min();
    default:
      return int64_t{1} << 32;
  }
}

// The views of one op call: their layouts, the buffers behind them and the
// index values to write into the integer ones.
class Tensors {
 public:
  struct Slot {
    std::string name;
    TensorView* view;
    std::vector<int64_t> values;  // flat (row-major) index values, if any
    bool output = false;
    bool force_null = false;
  };

  // Declares `view` with a contiguous layout.
  void Add(const char* name, TensorView* view, DType dtype,
           std::initializer_list<int64_t> shape,
           std::vector<int64_t> values = {}) {
    *view = TensorView();
    view->dtype = dtype;
    view->rank = static_cast<int32_t>(shape.size());
    int i = 0;
    for (int64_t d : shape) view->shape[i++] = d;
    SetContiguous(*view);
    slots_.push_back({name, view, std::move(values)});
  }

  // Declares an output view (written by the kernel).
  void AddOutput(const char* name, TensorView* view, DType dtype,
                 std::initializer_list<int64_t> shape) {
    Add(name, view, dtype, shape);
    slots_.back().output = true;
  }

  // Breaks the layout of a few views.
  void Mutate(FuzzInput& in) {
    if (slots_.empty() || !in.OneIn(3)) return;
    const int count = static_cast<int>(in.Range(1, 3));
    for (int m = 0; m < count; ++m) {
      Slot& s = slots_[in.Range(0, slots_.size() - 1)];
      TensorView& t = *s.view;
      // A rank set out of range by an earlier mutation indexes no further
      // than the arrays.
      const int rank = std::clamp<int>(t.rank, 0, kMaxTensorRank);
      const int dim = rank > 0 ? static_cast<int>(in.Range(0, rank - 1)) : 0;
      switch (in.Range(0, 8)) {
        case 0:
          t.dtype = static_cast<DType>(
              in.Pick<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, -1}));
          break;
        case 1: {
          const int32_t new_rank = in.Pick<int32_t>({0, 1, 2, 3, 4, -1, 5});
          for (int i = rank; i < kMaxTensorRank; ++i) {
            t.shape[i] = in.Range(0, 3);
          }
          t.rank = new_rank;
          SetContiguous(t);
          break;
        }
        case 2:
          if (rank > 0) {
            t.shape[dim] = in.Pick<int64_t>(
                {0, 1, 2, 3, -1, (int64_t{1} << 31) - 1, int64_t{1} << 31,
                 int64_t{1} << 30, int64_t{1} << 32,
                 std::numeric_limits<int64_t>::max(),
                 std::numeric_limits<int64_t>::min()});
            SetContiguous(t);
          }
          break;
        case 3:
          if (rank > 0) {
            // Strides saturate at int64 max (SetContiguous), so the
            // neighbours of the current one are taken without overflow.
            const int64_t s0 = t.strides[dim];
            const int64_t max = std::numeric_limits<int64_t>::max();
            t.strides[dim] = in.Pick<int64_t>(
                {0, 1, 2, s0 < max ? s0 + 1 : s0, s0 <= max / 2 ? s0 * 2 : max,
                 -1, (int64_t{1} << 31) - 1, int64_t{1} << 31, max});
          }
          break;
        case 4:
          s.force_null = true;
          break;
        case 5:
          // Two large dims whose product with the rest wraps int64 (the
          // [2^30, 2^30, 16] case): an element count must not overflow.
          if (rank >= 2) {
            const int64_t big = in.Pick<int64_t>(
                {int64_t{1} << 30, (int64_t{1} << 31) - 1, int64_t{1} << 31});
            t.shape[0] = big;
            t.shape[1] = big;
            SetContiguous(t);
            if (in.Bool()) {
              // Strides in range (as a broadcast or a strided cache has),
              // so only the element count can tell the view is huge.
              const int64_t stride = in.Pick<int64_t>({0, 1, t.strides[1]});
              t.strides[0] = stride;
              t.strides[1] = std::min(stride, t.strides[1]);
            }
          }
          break;
        case 6:
          // Padded rows: a legal strided layout.
          if (rank >= 2) {
            int64_t stride = 1;
            for (int i = rank - 1; i >= 0; --i) {
              t.strides[i] = stride;
              stride = SaturatingAdd(
                  SaturatingMul(stride, std::max<int64_t>(t.shape[i], 1)),
                  i == rank - 1 ? in.Range(1, 3) : 0);
            }
          }
          break;
        case 7:
          // Swapped strides of two dims (a transposed layout).
          if (rank >= 2) {
            const int other = (dim + 1) % rank;
            std::swap(t.strides[dim], t.strides[other]);
          }
          break;
        default:
          t.strides[dim] = 0;  // a broadcast (zero-stride) view
          break;
      }
    }
  }

  // Allocates and fills every view.
  void Allocate(FuzzInput& in) {
    SplitMix64 rng(in.Bits(8));
    const bool specials = in.OneIn(4);  // NaN, inf, huge in float inputs
    for (Slot& s : slots_) {
      TensorView& t = *s.view;
      t.data = nullptr;
      const int64_t span = SpanElements(t);
      if (s.force_null || span < 0) continue;
      const int64_t esize = static_cast<int64_t>(ElementSize(t.dtype));
      if (span > kMaxViewBytes / esize) continue;
      const size_t bytes = static_cast<size_t>(span * esize);
      if (bytes == 0 && in.Bool()) continue;  // empty views may have no data
      buffers_.emplace_back(new uint8_t[bytes]);
      uint8_t* p = buffers_.back().get();
      t.data = p;
      FillJunk(t, p, span, rng, specials);
      if (!s.values.empty() && IsIntType(t.dtype) && t.rank >= 1 &&
          t.rank <= 2) {
        const int64_t cols = t.rank == 2 ? t.shape[1] : 1;
        for (size_t i = 0;
             i < s.values.size() && static_cast<int64_t>(i) < TrueElements(t);
             ++i) {
          const int64_t r = static_cast<int64_t>(i) / cols;
          const int64_t c = static_cast<int64_t>(i) % cols;
          StoreInt(t, t.rank == 2 ? t.offset(r, c) : t.offset(r), s.values[i]);
        }
      }
    }
  }

  // With DSA_FUZZ_VERBOSE set, the views of each call on stderr (to read a
  // crashing input).
  void Print(const char* op) const {
    static const bool verbose = std::getenv("DSA_FUZZ_VERBOSE") != nullptr;
    if (!verbose) return;
    std::fprintf(stderr, "%s:\n", op);
    for (const Slot& s : slots_) {
      std::fprintf(stderr, "  %-16s %s data %s\n", s.name.c_str(),
                   ShapeText(*s.view).c_str(),
                   s.view->data == nullptr ? "null" : "set");
    }
  }

  // Validate accepted the call: no view with elements may lack data, and
  // no output may write one element twice (a zero stride over a dim longer
  // than 1, or rows that overlap): one of the writes would be lost.
  void CheckAccepted(const char* op) const {
    for (const Slot& s : slots_) {
      if (s.view->data == nullptr && TrueElements(*s.view) != 0) {
        Fail(std::string(op) + ": Validate accepted " + s.name + " " +
             ShapeText(*s.view) + " with no data");
      }
      if (s.output && !NonOverlapping(*s.view)) {
        Fail(std::string(op) + ": Validate accepted output " + s.name + " " +
             ShapeText(*s.view) + ", whose elements overlap");
      }
    }
  }

 private:
  // Whether distinct indices of the view reach distinct elements: ordered
  // by stride, each dim longer than 1 steps past everything the smaller
  // ones reach. (Sufficient, and exact for the layouts generated here.)
  static bool NonOverlapping(const TensorView& t) {
    std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, shape)
    for (int i = 0; i < t.rank && i < kMaxTensorRank; ++i) {
      if (t.shape[i] <= 0) return true;  // no elements
      if (t.shape[i] > 1) dims.emplace_back(t.strides[i], t.shape[i]);
    }
    std::sort(dims.begin(), dims.end());
    int64_t reach = 0;  // the largest offset the smaller dims reach
    for (const auto& [stride, shape] : dims) {
      if (stride <= reach) return false;
      int64_t extent;
      if (__builtin_mul_overflow(stride, shape - 1, &extent) ||
          __builtin_add_overflow(reach, extent, &reach)) {
        return true;  // too large to have been allocated; rejected elsewhere
      }
    }
    return true;
  }

  static void SetContiguous(TensorView& t) {
    if (t.rank < 0 || t.rank > kMaxTensorRank) return;
    int64_t stride = 1;
    for (int i = t.rank - 1; i >= 0; --i) {
      t.strides[i] = stride;
      if (t.shape[i] > 0 &&
          __builtin_mul_overflow(stride, t.shape[i], &stride)) {
        stride = std::numeric_limits<int64_t>::max();
      }
    }
  }

  static void FillJunk(const TensorView& t, uint8_t* p, int64_t span,
                       SplitMix64& rng, bool specials) {
    for (int64_t i = 0; i < span; ++i) {
      const uint64_t r = rng.Next();
      float f =
          static_cast<float>(static_cast<int64_t>(r % 2001) - 1000) / 250.0f;
      if (specials && (r >> 40) % 16 == 0) {
        const float kSpecial[] = {std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(),
                                  3e38f,
                                  -3e38f,
                                  1e-40f,
                                  0.0f,
                                  -0.0f};
        f = kSpecial[(r >> 48) % 8];
      }
      switch (t.dtype) {
        case DType::kFloat32:
          std::memcpy(p + 4 * i, &f, 4);
          break;
        case DType::kBFloat16: {
          const uint16_t h = FloatToBf16(f);
          std::memcpy(p + 2 * i, &h, 2);
          break;
        }
        case DType::kInt32: {
          const int32_t v = static_cast<int32_t>(r % 11) - 2;
          std::memcpy(p + 4 * i, &v, 4);
          break;
        }
        case DType::kInt64: {
          const int64_t v = static_cast<int64_t>(r % 11) - 2;
          std::memcpy(p + 8 * i, &v, 8);
          break;
        }
        default:
          p[i * ElementSize(t.dtype)] = static_cast<uint8_t>(r);
          break;
      }
    }
  }

  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<uint8_t[]>> buffers_;
};

// ---------------------------------------------------------------------------
// Decoding helpers for the values the ops share.

DType FloatType(FuzzInput& in) {
  return in.Bool() ? DType::kBFloat16 : DType::kFloat32;
}

DType Fp8Type(FuzzInput& in) {
  return in.Bool() ? DType::kFloat8E4m3fnuz : DType::kFloat8E4m3fn;
}

float Scalar(FuzzInput& in, float usual) {
  if (!in.OneIn(6)) return usual;
  return in.Pick<float>({0.0f, -1.0f, 1e-30f, 1e30f,
                         std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(), 1.0f});
}

RopeStyle Style(FuzzInput& in) {
  return static_cast<RopeStyle>(in.Pick<int32_t>({0, 1, 0, 1, 0, 1, 2, -1}));
}

// An even rope_dim <= head_dim (sometimes not).
int64_t RopeDim(FuzzInput& in, int64_t head_dim) {
  if (in.OneIn(8)) return in.Pick<int64_t>({0, 1, 3, head_dim + 2, -2});
  return 2 * in.Range(1, std::max<int64_t>(1, head_dim / 2));
}

// slot_mapping: mostly distinct slots of [0, num_slots) with some -1
// padding, else arbitrary values (repeats, out of range).
std::vector<int64_t> SlotMapping(FuzzInput& in, int64_t tokens,
                                 int64_t num_slots) {
  std::vector<int64_t> v(tokens);
  if (in.OneIn(4)) {
    for (int64_t& s : v) s = IndexValue(in, -1, num_slots - 1);
    return v;
  }
  const int64_t start = in.Range(0, 255);
  const int64_t step = in.Pick<int64_t>({1, 1, 3, 5});
  for (int64_t t = 0; t < tokens; ++t) {
    v[t] =
        (num_slots > 0 && !in.OneIn(6)) ? (start + t * step) % num_slots : -1;
  }
  if (tokens > 0 && in.OneIn(8))
    v[in.Range(0, tokens - 1)] = IndexValue(in, num_slots, num_slots);
  return v;
}

struct Paged {
  int64_t num_blocks, block_size, requests, max_blocks;
  std::vector<int64_t> block_table;  // [requests, max_blocks]
  std::vector<int64_t> seq_lens;     // [requests]
};

Paged DecodePaged(FuzzInput& in) {
  Paged p;
  p.num_blocks = in.Range(0, 4);
  p.block_size = in.Range(1, 4);
  p.requests = in.Range(0, 3);
  p.max_blocks = in.Range(0, 3);
  for (int64_t i = 0; i < p.requests * p.max_blocks; ++i) {
    p.block_table.push_back(IndexValue(in, 0, p.num_blocks - 1));
  }
  for (int64_t r = 0; r < p.requests; ++r) {
    p.seq_lens.push_back(IndexValue(in, 0, p.max_blocks * p.block_size));
  }
  return p;
}

int64_t SeqLen(const Paged& p, int64_t request) {
  if (request < 0 || request >= p.requests) return 0;
  // Out-of-range lengths are the kernel's to reject; windows and indices
  // derived from them stay near the valid range.
  return std::clamp<int64_t>(p.seq_lens[request], 0,
                             p.max_blocks * p.block_size + 1);
}

LatentCacheFormat DecodeFormat(FuzzInput& in) {
  LatentCacheFormat f;
  f.dtype = static_cast<DType>(in.Pick<int32_t>({1, 1, 2, 3, 1, 2, 0, 4, 9}));
  if (IsFp8(f.dtype)) {
    f.kv_lora_rank = in.Pick<int32_t>({128, 128, 256, 64, 0});
  } else {
    f.kv_lora_rank = in.OneIn(8) ? in.Pick<int32_t>({0, -4, 100000})
                                 : static_cast<int32_t>(in.Range(1, 16));
  }
  f.rope_dim = in.OneIn(8) ? in.Pick<int32_t>({0, 1, 3, -2})
                           : static_cast<int32_t>(2 * in.Range(1, 4));
  return f;
}

// The cache view's last dim for the format, as ops.h documents it.
int64_t EntryWidth(const LatentCacheFormat& f) {
  if (IsFp8(f.dtype)) {
    return int64_t{f.kv_lora_rank} + 4 * (int64_t{f.kv_lora_rank} / 128) +
           2 * int64_t{f.rope_dim};
  }
  return int64_t{f.kv_lora_rank} + f.rope_dim;
}

DType LatentCacheDtype(const LatentCacheFormat& f) {
  return IsFp8(f.dtype) ? DType::kUint8 : DType::kBFloat16;
}

// ---------------------------------------------------------------------------
// Running one op.

template <class Op>
auto& CpuKernel() {
  static auto kernel = [] {
    auto k = GetKernel<Op>(platform::Registry::Global(), "cpu");
    if (!k.ok()) Fail(std::string("no CPU kernel for ") + Op::kName);
    return *k;
  }();
  return kernel;
}

template <class Op>
bool Run(const typename Op::Args& args, const Tensors& tensors, FuzzInput& in) {
  ExecutionContext ctx;
  ctx.num_threads = in.Pick<int32_t>({1, 1, 1, 2, 3, 0, -1});
  tensors.Print(Op::kName);
  auto valid = Op::Validate(args);
  if (valid.ok()) tensors.CheckAccepted(Op::kName);
  auto status = CpuKernel<Op>()(ctx, args);
  if (status.ok() && !valid.ok()) {
    Fail(std::string(Op::kName) +
         ": the kernel accepted arguments Validate rejects");
  }
  return status.ok();
}

void IndexerKWriteCase(FuzzInput& in) {
  IndexerKWrite::Args a;
  Tensors t;
  const int64_t tokens = in.Range(0, 6);
  const int64_t head_dim = in.Range(1, 12);
  const int64_t rope_dim = RopeDim(in, head_dim);
  const int64_t max_position = in.Range(0, 8);
  const int64_t num_blocks = in.Range(0, 3);
  const int64_t block_size = in.Range(1, 4);
  const int64_t topk = in.Range(0, 4);
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < tokens; ++i) {
    positions.push_back(IndexValue(in, 0, max_position - 1));
  }
  a.ln_eps = Scalar(in, 1e-6f);
  a.rope_style = Style(in);
  a.cache_dtype =
      in.OneIn(8) ? static_cast<DType>(in.Range(-1, 7)) : Fp8Type(in);
  const DType ft = FloatType(in);
  t.Add("k", &a.k, ft, {tokens, head_dim});
  t.Add("ln_weight", &a.ln_weight, FloatType(in), {head_dim});
  t.Add("ln_bias", &a.ln_bias, FloatType(in), {head_dim});
  t.Add("positions", &a.positions, DType::kInt64, {tokens}, positions);
  t.Add("cos_sin_cache", &a.cos_sin_cache, DType::kFloat32,
        {max_position, rope_dim});
  t.Add("slot_mapping", &a.slot_mapping, DType::kInt64, {tokens},
        SlotMapping(in, tokens, num_blocks * block_size));
  t.AddOutput("k_cache", &a.k_cache, DType::kUint8,
              {num_blocks, block_size, head_dim + 4});
  t.AddOutput("topk_indices", &a.topk_indices, DType::kInt32, {tokens, topk});
  t.Mutate(in);
  t.Allocate(in);
  if (!Run<IndexerKWrite>(a, t, in)) return;
  // Every token's top-k row is cleared, padding tokens included.
  const TensorView& out = a.topk_indices;
  for (int64_t i = 0; i < out.shape[0]; ++i) {
    for (int64_t j = 0; j < out.shape[1]; ++j) {
      if (LoadInt(out, out.offset(i, j)) != -1) {
        Fail("indexer_k_write: topk_indices[" + std::to_string(i) + ", " +
             std::to_string(j) + "] is not cleared to -1");
      }
    }
  }
}

void IndexerQCase(FuzzInput& in) {
  IndexerQ::Args a;
  Tensors t;
  const int64_t tokens = in.Range(0, 5);
  const int64_t heads = in.Range(1, 4);
  const int64_t head_dim = in.Range(1, 12);
  const int64_t rope_dim = RopeDim(in, head_dim);
  const int64_t max_position = in.Range(0, 8);
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < tokens; ++i) {
    positions.push_back(IndexValue(in, 0, max_position - 1));
  }
  a.rope_style = Style(in);
  t.Add("q", &a.q, FloatType(in), {tokens, heads, head_dim});
  t.Add("weights", &a.weights, FloatType(in), {tokens, heads});
  t.Add("positions", &a.positions, DType::kInt64, {tokens}, positions);
  t.Add("cos_sin_cache", &a.cos_sin_cache, DType::kFloat32,
        {max_position, rope_dim});
  t.AddOutput("q_fp8", &a.q_fp8, Fp8Type(in), {tokens, heads, head_dim});
  t.AddOutput("head_weights", &a.head_weights, DType::kFloat32,
              {tokens, heads});
  t.Mutate(in);
  t.Allocate(in);
  Run<IndexerQ>(a, t, in);
}

// Key windows [start, end) within min(the row's seq_len, width).
void Windows(FuzzInput& in, const std::vector<int64_t>& limits,
             std::vector<int64_t>* start, std::vector<int64_t>* end) {
  for (int64_t limit : limits) {
    limit = std::max<int64_t>(limit, 0);
    if (in.OneIn(10)) {
      start->push_back(IndexValue(in, 0, limit));
      end->push_back(IndexValue(in, 0, limit));
      continue;
    }
    const int64_t s = in.Range(0, limit);
    start->push_back(s);
    end->push_back(s + in.Range(0, limit - s));
  }
}

void IndexerLogitsCase(FuzzInput& in) {
  IndexerLogits::Args a;
  Tensors t;
  const int64_t rows = in.Range(0, 5);
  const int64_t heads = in.Range(1, 5);
  const int64_t head_dim = in.Range(1, 12);
  const int64_t width = in.Range(0, 12);
  const Paged p = DecodePaged(in);
  std::vector<int64_t> row_request, limits, key_start, key_end;
  for (int64_t i = 0; i < rows; ++i) {
    row_request.push_back(IndexValue(in, 0, p.requests - 1));
    limits.push_back(std::min(width, SeqLen(p, row_request.back())));
  }
  Windows(in, limits, &key_start, &key_end);
  t.Add("q_fp8", &a.q_fp8, Fp8Type(in), {rows, heads, head_dim});
  t.Add("head_weights", &a.head_weights, DType::kFloat32, {rows, heads});
  t.Add("k_cache", &a.k_cache, DType::kUint8,
        {p.num_blocks, p.block_size, head_dim + 4});
  t.Add("block_table", &a.block_table, DType::kInt32,
        {p.requests, p.max_blocks}, p.block_table);
  t.Add("seq_lens", &a.seq_lens, DType::kInt32, {p.requests}, p.seq_lens);
  t.Add("row_request", &a.row_request, DType::kInt32, {rows}, row_request);
  t.Add("row_key_start", &a.row_key_start, DType::kInt32, {rows}, key_start);
  t.Add("row_key_end", &a.row_key_end, DType::kInt32, {rows}, key_end);
  t.AddOutput("logits", &a.logits, DType::kFloat32, {rows, width});
  t.Mutate(in);
  t.Allocate(in);
  Run<IndexerLogits>(a, t, in);
}

void IndexerTopKCase(FuzzInput& in) {
  IndexerTopK::Args a;
  Tensors t;
  const int64_t rows = in.Range(0, 5);
  const int64_t width = in.Range(0, 16);
  const int64_t topk = in.Range(0, 6);
  std::vector<int64_t> key_start, key_end;
  Windows(in, std::vector<int64_t>(rows, width), &key_start, &key_end);
  t.Add("logits", &a.logits, DType::kFloat32, {rows, width});
  t.Add("row_key_start", &a.row_key_start, DType::kInt32, {rows}, key_start);
  t.Add("row_key_end", &a.row_key_end, DType::kInt32, {rows}, key_end);
  t.AddOutput("topk_indices", &a.topk_indices, DType::kInt32, {rows, topk});
  t.Mutate(in);
  t.Allocate(in);
  if (!Run<IndexerTopK>(a, t, in)) return;
  // Ascending positions inside the row's window, then -1 padding, and as
  // many selected as the window and top-k allow.
  const TensorView& out = a.topk_indices;
  for (int64_t i = 0; i < out.shape[0]; ++i) {
    const int64_t ks = LoadInt(a.row_key_start, a.row_key_start.offset(i));
    const int64_t ke = LoadInt(a.row_key_end, a.row_key_end.offset(i));
    const int64_t expected = std::min(out.shape[1], ke - ks);
    int64_t previous = ks - 1;
    for (int64_t j = 0; j < out.shape[1]; ++j) {
      const int64_t v = LoadInt(out, out.offset(i, j));
      const bool ok = j < expected ? (v > previous && v < ke) : v == -1;
      if (!ok) {
        Fail("indexer_topk: row " + std::to_string(i) + " window [" +
             std::to_string(ks) + ", " + std::to_string(ke) + ") entry " +
             std::to_string(j) + " is " + std::to_string(v));
      }
      previous = v;
    }
  }
}

void MlaCacheWriteCase(FuzzInput& in) {
  MlaCacheWrite::Args a;
  Tensors t;
  a.cache_format = DecodeFormat(in);
  const LatentCacheFormat& f = a.cache_format;
  const int64_t tokens = in.Range(0, 5);
  const int64_t num_blocks = in.Range(0, 3);
  const int64_t block_size = in.Range(1, 4);
  t.Add("kv_c", &a.kv_c, FloatType(in), {tokens, f.kv_lora_rank});
  t.Add("k_pe", &a.k_pe, FloatType(in), {tokens, f.rope_dim});
  t.Add("slot_mapping", &a.slot_mapping, DType::kInt64, {tokens},
        SlotMapping(in, tokens, num_blocks * block_size));
  t.AddOutput("kv_cache", &a.kv_cache, LatentCacheDtype(f),
              {num_blocks, block_size, EntryWidth(f)});
  t.Mutate(in);
  t.Allocate(in);
  Run<MlaCacheWrite>(a, t, in);
}

void SparseMlaCase(FuzzInput& in) {
  SparseMla::Args a;
  Tensors t;
  a.cache_format = DecodeFormat(in);
  const LatentCacheFormat& f = a.cache_format;
  const int64_t tokens = in.Range(0, 4);
  const int64_t heads = in.Range(1, 3);
  const int64_t topk = in.Range(0, 5);
  const int64_t nope = in.Range(0, 4);
  const int64_t v_dim = in.Range(1, 4);
  const Paged p = DecodePaged(in);
  std::vector<int64_t> token_request, indices;
  for (int64_t i = 0; i < tokens; ++i) {
    token_request.push_back(IndexValue(in, 0, p.requests - 1));
    const int64_t seq_len = SeqLen(p, token_request.back());
    for (int64_t j = 0; j < topk; ++j) {
      indices.push_back(IndexValue(in, -1, seq_len - 1));
    }
  }
  a.qk_nope_head_dim = in.OneIn(10) ? -1 : static_cast<int32_t>(nope);
  a.softmax_scale = Scalar(in, 0.125f);
  t.Add("q", &a.q, FloatType(in),
        {tokens, heads, int64_t{f.kv_lora_rank} + f.rope_dim});
  t.Add("kv_cache", &a.kv_cache, LatentCacheDtype(f),
        {p.num_blocks, p.block_size, EntryWidth(f)});
  t.Add("block_table", &a.block_table, DType::kInt32,
        {p.requests, p.max_blocks}, p.block_table);
  t.Add("seq_lens", &a.seq_lens, DType::kInt32, {p.requests}, p.seq_lens);
  t.Add("token_request", &a.token_request, DType::kInt32, {tokens},
        token_request);
  t.Add("topk_indices", &a.topk_indices, DType::kInt32, {tokens, topk},
        indices);
  t.Add("kv_b_proj", &a.kv_b_proj, FloatType(in),
        {heads * (nope + v_dim), f.kv_lora_rank});
  t.AddOutput("output", &a.output, FloatType(in), {tokens, heads, v_dim});
  t.Mutate(in);
  t.Allocate(in);
  Run<SparseMla>(a, t, in);
}

void DenseMhaPrefillCase(FuzzInput& in) {
  DenseMhaPrefill::Args a;
  Tensors t;
  a.cache_format = DecodeFormat(in);
  const LatentCacheFormat& f = a.cache_format;
  const int64_t tokens = in.Range(0, 6);
  const int64_t heads = in.Range(1, 3);
  const int64_t nope = in.Range(0, 4);
  const int64_t v_dim = in.Range(1, 4);
  const Paged p = DecodePaged(in);
  // Each request's query tokens are its last ones: 0 <= n <= seq_len, and
  // they add up to the tokens.
  std::vector<int64_t> query_start_loc = {0};
  int64_t used = 0;
  for (int64_t r = 0; r < p.requests; ++r) {
    int64_t n = std::min(SeqLen(p, r), tokens - used);
    if (r + 1 < p.requests) n = in.Range(0, std::max<int64_t>(n, 0));
    if (in.OneIn(10)) n = IndexValue(in, 0, tokens);
    // Any value may come out (INT64_MIN and INT64_MAX included); the tensor
    // is int32, so larger values mean nothing more, and bounding them keeps
    // the running sum (over a handful of requests) far from overflow.
    n = std::clamp<int64_t>(n, std::numeric_limits<int32_t>::min(),
                            std::numeric_limits<int32_t>::max());
    used += n;
    query_start_loc.push_back(used);
  }
  a.softmax_scale = Scalar(in, 0.125f);
  t.Add("q", &a.q, FloatType(in), {tokens, heads, nope + f.rope_dim});
  t.Add("kv_cache", &a.kv_cache, LatentCacheDtype(f),
        {p.num_blocks, p.block_size, EntryWidth(f)});
  t.Add("block_table", &a.block_table, DType::kInt32,
        {p.requests, p.max_blocks}, p.block_table);
  t.Add("seq_lens", &a.seq_lens, DType::kInt32, {p.requests}, p.seq_lens);
  t.Add("query_start_loc", &a.query_start_loc, DType::kInt32, {p.requests + 1},
        query_start_loc);
  t.Add("kv_b_proj", &a.kv_b_proj, FloatType(in),
        {heads * (nope + v_dim), f.kv_lora_rank});
  t.AddOutput("output", &a.output, FloatType(in), {tokens, heads, v_dim});
  t.Mutate(in);
  t.Allocate(in);
  Run<DenseMhaPrefill>(a, t, in);
}

void RunOne(FuzzInput& in) {
  switch (in.Byte() % 7) {
    case 0:
      return IndexerKWriteCase(in);
    case 1:
      return IndexerQCase(in);
    case 2:
      return IndexerLogitsCase(in);
    case 3:
      return IndexerTopKCase(in);
    case 4:
      return MlaCacheWriteCase(in);
    case 5:
      return SparseMlaCase(in);
    default:
      return DenseMhaPrefillCase(in);
  }
}

}  // namespace
}  // namespace dsa::attention

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsa::fuzz::FuzzInput in(data, size);
  dsa::attention::RunOne(in);
  return 0;
}
