// The GPU indexer logits kernels against a float64 host reference, on fresh
// random inputs with poisoned outputs. Each case runs the body the
// heuristics pick and then the bodies its variants force
// (IndexerLogitsOptions), so that every body is checked on the devices that
// can run it. Skips cleanly when built without a GPU backend or run without
// a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/dtypes/fp8.h"
#include "attention/gpu/device/features.h"
#include "attention/gpu/device/runtime.h"
#include "attention/gpu/device/test_util.h"
#include "attention/gpu/indexer/heuristics.h"
#include "attention/gpu/indexer/launch.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

#if defined(DSA_GPU_ROCM) || defined(DSA_GPU_CUDA)
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

struct Request {
  int32_t seq_len;
};

struct Row {
  int32_t request;
  int32_t start;
  int32_t end;
};

struct LogitsCase {
  std::string name;
  int heads;
  int head_dim;
  int block_size;
  Fp8Encoding encoding;
  std::vector<Request> requests;
  std::vector<Row> rows;
  int64_t width;
  // Some key scales zero or negative (a real cache's are positive ue8m0
  // powers of two; the kernels must still follow the op's definition).
  bool mixed_sign_scales = false;
  // Block-table entries overwritten with an invalid page id (negative or
  // past the cache): those keys read as zeros, so their logits are 0.
  struct BadBlock {
    int32_t request;
    int32_t block;
    int32_t page;  // < 0 or >= num_blocks; kPastEnd: num_blocks + 2
  };
  std::vector<BadBlock> bad_blocks = {};
  // The bodies run over the same inputs: the heuristics' choice first, then
  // each forced one (IndexerLogitsOptions).
  std::vector<IndexerLogitsOptions> variants = {{}};
};
constexpr int32_t kPastEnd = 1 << 30;

// Options forcing a body, its blocks and its key path.
IndexerLogitsOptions Force(
    IndexerLogitsBody body,
    IndexerLogitsBlocks blocks = IndexerLogitsBlocks::kAuto,
    IndexerLogitsKeys keys = IndexerLogitsKeys::kAuto) {
  return {body, blocks, keys};
}
std::string VariantName(const IndexerLogitsOptions& o) {
  return std::string(indexer::BodyName(o.body)) + "/" +
         indexer::BlocksName(o.blocks) + "/" + indexer::KeysName(o.keys) + "/" +
         indexer::GroupsName(o.groups);
}
// Whether a device with sm_90a code must run the variant on `c`: every body
// but the warp-level one for e4m3fn data (there the matrix kernel is
// wgmma's), the persistent one only for at most 128 heads and TMA keys only
// for block sizes that are multiples of 64.
bool RunsOnSm90a(const IndexerLogitsOptions& o, int heads, int block_size,
                 Fp8Encoding encoding) {
  const bool e4m3fn = encoding == Fp8Encoding::kE4m3fn;
  const bool persistent = o.body == IndexerLogitsBody::kPersistent ||
                          o.blocks != IndexerLogitsBlocks::kAuto ||
                          o.keys != IndexerLogitsKeys::kAuto ||
                          o.groups != IndexerLogitsGroups::kAuto;
  if (o.body == IndexerLogitsBody::kWarpMma) return !e4m3fn;
  if (o.body == IndexerLogitsBody::kWarpgroupMma) return e4m3fn;
  if (persistent) {
    return e4m3fn && heads <= 128 &&
           (o.keys != IndexerLogitsKeys::kTma || block_size % 64 == 0);
  }
  return true;
}

// Causal prefill rows of a request whose first `context` tokens are cached:
// new token t sees keys [start(t), context + t + 1).
void AddPrefillRows(int32_t request, int32_t context, int32_t new_tokens,
                    int32_t window_start, std::vector<Row>* rows) {
  for (int32_t t = 0; t < new_tokens; ++t) {
    const int32_t end = context + t + 1;
    rows->push_back({request, std::min(window_start, end), end});
  }
}

class IndexerLogitsTest : public ::testing::TestWithParam<LogitsCase> {};

TEST_P(IndexerLogitsTest, MatchesFloat64Reference) {
  if (!kBuilt) {
    GTEST_SKIP() << "built without a GPU backend: use --config=cuda or "
                    "--config=rocm";
  }
  const LogitsCase& c = GetParam();
  const int64_t rows = static_cast<int64_t>(c.rows.size());
  const int heads = c.heads, dim = c.head_dim, bs = c.block_size;
  const Fp8Traits traits =
      c.encoding == Fp8Encoding::kE4m3fnuz ? kE4m3fnuzTraits : kE4m3fnTraits;
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.1f, 1.0f);

  // Pages handed out in a shuffled order, so a request's blocks are not
  // contiguous in the cache.
  int32_t max_blocks = 1;
  for (const Request& r : c.requests) {
    max_blocks = std::max(max_blocks, (r.seq_len + bs - 1) / bs);
  }
  const int32_t stride = max_blocks + 3;  // block-table rows wider than used
  const int64_t num_blocks =
      static_cast<int64_t>(c.requests.size()) * max_blocks + 5;
  std::vector<int32_t> pages(num_blocks);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  std::vector<int32_t> block_table(c.requests.size() * stride, -7);
  for (size_t r = 0; r < c.requests.size(); ++r) {
    for (int32_t b = 0; b < max_blocks; ++b) {
      block_table[r * stride + b] = pages[r * max_blocks + b];
    }
  }
  for (const LogitsCase::BadBlock& bad : c.bad_blocks) {
    block_table[bad.request * stride + bad.block] =
        bad.page == kPastEnd ? static_cast<int32_t>(num_blocks) + 2 : bad.page;
  }
  auto page_ok = [&](int32_t page) { return page >= 0 && page < num_blocks; };

  const int64_t block_bytes = int64_t{bs} * (dim + 4);
  std::vector<uint8_t> cache(num_blocks * block_bytes);
  for (uint8_t& byte : cache) byte = static_cast<uint8_t>(rng());
  // Every slot gets finite fp8 values and a positive scale (a real cache
  // holds ue8m0 scales; any positive float exercises more of the path).
  std::vector<float> key_values(num_blocks * bs * dim);
  std::vector<float> key_scale(num_blocks * bs);
  for (int64_t slot = 0; slot < num_blocks * bs; ++slot) {
    uint8_t* page = cache.data() + (slot / bs) * block_bytes;
    for (int d = 0; d < dim; ++d) {
      const uint8_t code = FloatToFp8(normal(rng) * 4.0f, traits);
      page[(slot % bs) * dim + d] = code;
      key_values[slot * dim + d] = Fp8ToFloat(code, traits);
    }
    float scale = uniform(rng) * 0.05f;
    if (c.mixed_sign_scales && slot % 3 != 0) {
      scale = slot % 3 == 1 ? -scale : 0.0f;
    }
    std::memcpy(page + int64_t{bs} * dim + (slot % bs) * 4, &scale, 4);
    key_scale[slot] = scale;
  }

  std::vector<uint8_t> q(rows * heads * dim);
  std::vector<float> q_values(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = FloatToFp8(normal(rng) * 8.0f, traits);
    q_values[i] = Fp8ToFloat(q[i], traits);
  }
  std::vector<float> weights(rows * heads);
  for (float& w : weights) w = normal(rng);
  std::vector<int32_t> row_request(rows), row_start(rows), row_end(rows);
  for (int64_t i = 0; i < rows; ++i) {
    row_request[i] = c.rows[i].request;
    row_start[i] = c.rows[i].start;
    row_end[i] = c.rows[i].end;
  }
  const int64_t logits_stride = c.width + 3;

  DeviceArray d_q, d_w, d_cache, d_table, d_req, d_start, d_end, d_logits;
  ASSERT_LAUNCH(d_q.Upload(q));
  ASSERT_LAUNCH(d_w.Upload(weights));
  ASSERT_LAUNCH(d_cache.Upload(cache));
  ASSERT_LAUNCH(d_table.Upload(block_table));
  ASSERT_LAUNCH(d_req.Upload(row_request));
  ASSERT_LAUNCH(d_start.Upload(row_start));
  ASSERT_LAUNCH(d_end.Upload(row_end));
  ASSERT_LAUNCH(d_logits.Allocate(rows * logits_stride * sizeof(float)));

  IndexerLogitsParams p;
  p.q_fp8 = d_q.get<uint8_t>();
  p.head_weights = d_w.get<float>();
  p.k_cache = d_cache.get<uint8_t>();
  p.block_table = d_table.get<int32_t>();
  p.row_request = d_req.get<int32_t>();
  p.row_key_start = d_start.get<int32_t>();
  p.row_key_end = d_end.get<int32_t>();
  p.logits = d_logits.get<float>();
  p.rows = rows;
  p.heads = heads;
  p.head_dim = dim;
  p.num_blocks = num_blocks;
  p.block_size = bs;
  p.num_requests = static_cast<int32_t>(c.requests.size());
  p.max_blocks_per_request = max_blocks;
  p.block_table_stride = stride;
  p.width = c.width;
  p.logits_stride = logits_stride;
  p.encoding = c.encoding;

  DeviceFeatures features;
  ASSERT_LAUNCH(CurrentDeviceFeatures(&features));

  // The float64 reference of every logit inside the windows, and the sum of
  // |products| that bounds its error.
  std::vector<double> ref(rows * c.width, 0.0), magnitude(rows * c.width, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const Row& row = c.rows[i];
    for (int64_t j = row.start; j < row.end && j < c.width; ++j) {
      const int32_t page = block_table[row.request * stride + j / bs];
      const int64_t slot = int64_t{page} * bs + j % bs;
      for (int h = 0; h < heads && page_ok(page); ++h) {
        double dot = 0.0, abs_dot = 0.0;
        for (int d = 0; d < dim; ++d) {
          const double product = double{q_values[(i * heads + h) * dim + d]} *
                                 key_values[slot * dim + d];
          dot += product;
          abs_dot += std::abs(product);
        }
        const double s = dot * key_scale[slot];
        const double w = weights[i * heads + h];
        ref[i * c.width + j] += s > 0 ? s * w : 0.0;
        magnitude[i * c.width + j] +=
            abs_dot * std::abs(key_scale[slot]) * std::abs(w);
      }
    }
  }

  // Each variant that plans the persistent body runs with each count of
  // math groups too (four where its blocks are wide).
  std::vector<IndexerLogitsOptions> variants;
  for (const IndexerLogitsOptions& v : c.variants) {
    variants.push_back(v);
    indexer::LogitsPlan plan;
    if (v.groups == IndexerLogitsGroups::kAuto &&
        indexer::PlanIndexerLogits(p, v, features, &plan).ok() &&
        plan.body == IndexerLogitsBody::kPersistent) {
      for (const IndexerLogitsGroups groups :
           {IndexerLogitsGroups::kTwo, IndexerLogitsGroups::kFour}) {
        IndexerLogitsOptions o = v;
        o.groups = groups;
        if (groups == IndexerLogitsGroups::kFour && !plan.wide) continue;
        variants.push_back(o);
      }
    }
  }
  std::string summary;
  for (const IndexerLogitsOptions& options : variants) {
    const std::string variant = VariantName(options);
    SCOPED_TRACE(variant);
    indexer::LogitsPlan plan;
    const LaunchResult planned =
        indexer::PlanIndexerLogits(p, options, features, &plan);
    if (!planned.ok()) {
      // Only where this device's code cannot run the body (the heuristics'
      // own test pins down when that is).
      ASSERT_FALSE(features.sm90a &&
                   RunsOnSm90a(options, heads, bs, c.encoding))
          << planned.message;
      summary += "; " + variant + " not here";
      continue;
    }
    const std::string path = indexer::LogitsPathName(plan);
    ASSERT_EQ(path, IndexerLogitsPath(p, options));
    if (options.body != IndexerLogitsBody::kAuto) {
      ASSERT_EQ(plan.body, options.body) << path;
    }
    // Poison: 0xff bytes are NaN floats, so an unwritten element shows.
    ASSERT_LAUNCH(
        DeviceMemset(d_logits.get<void>(), 0xff, rows * logits_stride * 4));
    ASSERT_LAUNCH(IndexerLogitsLaunch(p, nullptr, options));
    ASSERT_LAUNCH(DeviceSynchronize());
    std::vector<float> logits;
    ASSERT_LAUNCH(d_logits.Download(&logits));

    int64_t checked = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      const Row& row = c.rows[i];
      for (int64_t j = 0; j < c.width; ++j) {
        const float got = logits[i * logits_stride + j];
        if (j < row.start || j >= row.end) {
          ASSERT_TRUE(std::isinf(got) && got < 0)
              << path << ": row " << i << " col " << j << " outside ["
              << row.start << ", " << row.end << ") is " << got;
          continue;
        }
        // The products of fp8 values are exact; the error is the
        // accumulation's. Hopper's fp8 matrix cores (wgmma) keep about 14
        // bits of each partial sum (DeepSeek-V3 report, 3.3.2), so the bound
        // is 2^-12 of the sum of |products| (the fp16 HMMA, MFMA and FMA
        // paths land near 1e-7 of it).
        const double want = ref[i * c.width + j];
        const double mag = magnitude[i * c.width + j];
        const double err = std::abs(got - want);
        ASSERT_FALSE(std::isnan(got)) << path << ": row " << i << " col " << j;
        ASSERT_LE(err, 0x1p-12 * mag + 1e-30)
            << path << ": row " << i << " col " << j << ": got " << got
            << ", want " << want << " (sum of |products| " << mag << ")";
        worst = std::max(worst, err / (mag + 1e-30));
        ++checked;
      }
      for (int64_t j = c.width; j < logits_stride; ++j) {
        uint32_t bits;
        std::memcpy(&bits, &logits[i * logits_stride + j], 4);
        ASSERT_EQ(bits, 0xffffffffu)
            << path << ": row " << i << " wrote past width";
      }
    }
    char line[200];
    std::snprintf(line, sizeof(line), "; %s path %s, worst %.2g",
                  variant.c_str(), path.c_str(), worst);
    summary += line;
    ASSERT_GT(checked, 0);
  }
  // One line a case: each variant's body and worst error (of the sum of
  // |products|).
  std::printf("%s (%lld rows)%s\n", c.name.c_str(),
              static_cast<long long>(rows), summary.c_str());
}

std::vector<LogitsCase> LogitsCases() {
  std::vector<LogitsCase> cases;
  {
    // GLM-5.1's indexer (32 x 128): two requests, one a chunked prefill
    // after 300 cached tokens, the other with windows starting mid-sequence.
    LogitsCase c{"glm_32x128", 32, 128, 64, Fp8Encoding::kE4m3fn, {}, {}, 0};
    c.requests = {{300 + 77}, {250}};
    AddPrefillRows(0, 300, 77, 0, &c.rows);
    AddPrefillRows(1, 200, 50, 131, &c.rows);
    c.width = 400;
    // Every body over the same rows: FMA, the matrix kernel's (warp-level
    // off sm_90a, wgmma on it), the persistent kernel on narrow and wide
    // blocks with both key paths.
    c.variants = {
        {},
        Force(IndexerLogitsBody::kFma),
        Force(IndexerLogitsBody::kWarpMma),
        Force(IndexerLogitsBody::kWarpgroupMma),
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kNarrow,
              IndexerLogitsKeys::kTma),
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kNarrow,
              IndexerLogitsKeys::kCpAsync),
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kWide,
              IndexerLogitsKeys::kTma),
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kWide,
              IndexerLogitsKeys::kCpAsync)};
    cases.push_back(c);
  }
  {
    // DeepSeek-V3.2's indexer (64 x 128): three requests whose rows straddle
    // block boundaries (4 rows per block), a decode row, an empty window.
    LogitsCase c{"dsv32_64x128", 64, 128, 64, Fp8Encoding::kE4m3fn, {}, {}, 0};
    c.requests = {{129}, {70}, {1000}};
    AddPrefillRows(0, 100, 29, 5, &c.rows);
    c.rows.push_back({1, 0, 70});
    c.rows.push_back({1, 30, 30});
    AddPrefillRows(2, 930, 70, 17, &c.rows);
    c.width = 1000;
    c.variants = {
        {},
        Force(IndexerLogitsBody::kWarpgroupMma),
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kNarrow,
              IndexerLogitsKeys::kCpAsync),
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kWide,
              IndexerLogitsKeys::kCpAsync)};
    cases.push_back(c);
  }
  {
    // fnuz data (AMD's encoding) through the same matrix kernel.
    LogitsCase c{"fnuz_32x128", 32, 128, 16, Fp8Encoding::kE4m3fnuz, {}, {}, 0};
    c.requests = {{203}};
    AddPrefillRows(0, 150, 53, 0, &c.rows);
    c.width = 210;
    c.variants = {{}, Force(IndexerLogitsBody::kFma)};
    cases.push_back(c);
  }
  {
    // A long causal prefill: more row blocks than an H200 has
    // multiprocessors, so the persistent sm_90a kernel walks several items
    // per CTA (zigzag order) and its stage ring wraps many times.
    LogitsCase c{"long_32x128", 32, 128, 64, Fp8Encoding::kE4m3fn, {}, {}, 0};
    c.requests = {{100 + 600}};
    AddPrefillRows(0, 100, 600, 0, &c.rows);
    c.width = 701;
    c.variants = {
        {},
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kNarrow,
              IndexerLogitsKeys::kCpAsync)};
    cases.push_back(c);
  }
  {
    // Paged decode: one row per request, contexts of different lengths
    // (some not a multiple of the 64-key tile), few rows, so the sm_90a
    // kernel splits each block's keys over several CTAs.
    LogitsCase c{"decode_32x128", 32, 128, 64, Fp8Encoding::kE4m3fn, {}, {}, 0};
    const int32_t contexts[] = {2900, 1,    64,  65,   2047, 2048, 2049,
                                777,  3000, 130, 1500, 2600, 5,    999};
    for (int32_t n : contexts) {
      c.rows.push_back({static_cast<int32_t>(c.requests.size()), 0, n});
      c.requests.push_back({n});
    }
    c.width = 3001;
    // Decode rows on wide blocks, and one-row tiles with cp.async keys.
    c.variants = {
        {},
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kWide),
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kNarrow,
              IndexerLogitsKeys::kCpAsync),
        Force(IndexerLogitsBody::kWarpgroupMma)};
    cases.push_back(c);
  }
  {
    // 128 heads (one row per block), a block size that is not a power of
    // two, and scales of every sign.
    LogitsCase c{
        "mixed_128x128", 128, 128, 20, Fp8Encoding::kE4m3fn, {}, {}, 0, true};
    c.requests = {{90}, {41}};
    AddPrefillRows(0, 60, 30, 7, &c.rows);
    c.rows.push_back({1, 0, 41});
    c.rows.push_back({-1, 0, 0});
    c.width = 95;
    c.variants = {
        {},
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kNarrow),
        Force(IndexerLogitsBody::kWarpgroupMma)};
    cases.push_back(c);
  }
  {
    // 64 heads, mixed-sign scales, rows of three requests within a block.
    LogitsCase c{
        "mixed_64x128", 64, 128, 64, Fp8Encoding::kE4m3fn, {}, {}, 0, true};
    c.requests = {{300}, {3}, {260}};
    AddPrefillRows(0, 250, 50, 0, &c.rows);
    c.rows.push_back({1, 0, 3});
    AddPrefillRows(2, 200, 60, 100, &c.rows);
    c.width = 301;
    c.variants = {
        {},
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kNarrow),
        Force(IndexerLogitsBody::kWarpgroupMma)};
    cases.push_back(c);
  }
  {
    // Block size 128 (the TMA path's tiles start mid-page), invalid page ids
    // in the block table (negative, past the cache), windows starting
    // mid-tile, 64 heads.
    LogitsCase c{"pages_64x128", 64, 128, 128, Fp8Encoding::kE4m3fn, {}, {}, 0};
    c.requests = {{700}, {300}};
    AddPrefillRows(0, 600, 100, 70, &c.rows);
    AddPrefillRows(1, 290, 10, 0, &c.rows);
    c.width = 705;
    c.bad_blocks = {{0, 2, -3}, {0, 4, kPastEnd}, {1, 0, kPastEnd}};
    c.variants = {
        {},
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kNarrow,
              IndexerLogitsKeys::kCpAsync),
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kWide,
              IndexerLogitsKeys::kCpAsync)};
    cases.push_back(c);
  }
  {
    // Paged decode of 32 heads (the sm_90a kernel's one-row m64n32 tiles)
    // with block size 128, scales of every sign and invalid pages.
    LogitsCase c{"decode_pages_32x128",
                 32,
                 128,
                 128,
                 Fp8Encoding::kE4m3fn,
                 {},
                 {},
                 0,
                 true};
    const int32_t contexts[] = {1, 127, 128, 129, 700, 1030, 64, 2000, 333};
    for (int32_t n : contexts) {
      c.rows.push_back({static_cast<int32_t>(c.requests.size()), 0, n});
      c.requests.push_back({n});
    }
    c.rows.push_back({4, 100, 650});  // a second row of request 4, windowed
    c.width = 2001;
    c.bad_blocks = {{4, 1, -1}, {7, 3, kPastEnd}};
    c.variants = {
        {},
        Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kAuto,
              IndexerLogitsKeys::kCpAsync)};
    cases.push_back(c);
  }
  {
    // 256 heads: one row fills a matrix block, too many for the persistent
    // kernel (the wgmma matrix body on sm_90a), with windows starting
    // mid-sequence and a row of a second request.
    LogitsCase c{"heads256_256x128",   256, 128, 64,
                 Fp8Encoding::kE4m3fn, {},  {},  0};
    c.requests = {{90}, {33}};
    AddPrefillRows(0, 60, 30, 11, &c.rows);
    c.rows.push_back({1, 0, 33});
    c.width = 95;
    c.variants = {{}, Force(IndexerLogitsBody::kFma)};
    cases.push_back(c);
  }
  {
    // A shape the matrix kernel does not take: the FMA kernel.
    LogitsCase c{"small_6x40", 6, 40, 5, Fp8Encoding::kE4m3fn, {}, {}, 0};
    c.requests = {{37}, {12}};
    AddPrefillRows(0, 20, 17, 3, &c.rows);
    AddPrefillRows(1, 0, 12, 0, &c.rows);
    c.width = 41;
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, IndexerLogitsTest,
                         ::testing::ValuesIn(LogitsCases()),
                         [](const ::testing::TestParamInfo<LogitsCase>& info) {
                           return info.param.name;
                         });

TEST(IndexerLogitsLaunchTest, RejectsBadSizesWithAMessage) {
  if (!kBuilt) GTEST_SKIP() << "built without a GPU backend";
  IndexerLogitsParams q;
  q.rows = 2;
  q.heads = 32;
  q.head_dim = 128;
  const LaunchResult r = IndexerLogitsLaunch(q, nullptr);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument) << r.message;
}

TEST(IndexerLogitsLaunchTest, RefusesABodyThatCannotRunTheShape) {
  if (!kBuilt) GTEST_SKIP() << "built without a GPU backend";
  DeviceFeatures features;
  if (!CurrentDeviceFeatures(&features).ok()) GTEST_SKIP() << "no device";
  // 16 heads: only the FMA kernel takes them. Nothing is read or launched
  // (the plan refuses first), so the pointers only need to be set.
  DeviceArray scratch;
  ASSERT_LAUNCH(scratch.Allocate(4096));
  IndexerLogitsParams p;
  p.q_fp8 = p.k_cache = scratch.get<uint8_t>();
  p.head_weights = p.logits = scratch.get<float>();
  p.block_table = p.row_request = p.row_key_start = p.row_key_end =
      scratch.get<int32_t>();
  p.rows = 1;
  p.heads = 16;
  p.head_dim = 128;
  p.num_blocks = 1;
  p.block_size = 64;
  p.num_requests = 1;
  p.max_blocks_per_request = 1;
  p.block_table_stride = 1;
  p.width = 1;
  p.logits_stride = 1;
  for (IndexerLogitsBody body :
       {IndexerLogitsBody::kWarpMma, IndexerLogitsBody::kWarpgroupMma,
        IndexerLogitsBody::kPersistent}) {
    const LaunchResult r = IndexerLogitsLaunch(p, nullptr, Force(body));
    EXPECT_EQ(r.code, LaunchCode::kInvalidArgument)
        << indexer::BodyName(body) << ": " << r.message;
    EXPECT_NE(std::string(r.message).find("indexer_logits: "),
              std::string::npos)
        << r.message;
    EXPECT_STREQ(IndexerLogitsPath(p, Force(body)), "none");
  }
}

// A step reads one indexer K cache per layer: the persistent body's tensor
// maps over each are encoded once (on the layer's first call) and found again
// on every later call, for as many layers as the largest model has (79 with
// the MTP layer), each layer's maps over its own cache: every key of layer l
// is 1.0 with scale 2^-(l % 16), so its logits (32 heads x 128 dims of
// 1.0 * 1.0, weights 1) are 4096 * 2^-(l % 16), and a map over another
// layer's cache shows.
TEST(IndexerLogitsLaunchTest, EveryLayersKeyCacheKeepsItsTensorMaps) {
  if (!kBuilt) GTEST_SKIP() << "built without a GPU backend";
  DeviceFeatures features;
  if (!CurrentDeviceFeatures(&features).ok()) GTEST_SKIP() << "no device";
  constexpr int kLayers = 79, kHeads = 32, kDim = 128, kBlockSize = 64;
  constexpr int64_t kBlocks = 2, kPage = kBlockSize * (kDim + 4);
  const IndexerLogitsOptions tma =
      Force(IndexerLogitsBody::kPersistent, IndexerLogitsBlocks::kAuto,
            IndexerLogitsKeys::kTma);
  std::vector<uint8_t> caches(kLayers * kBlocks * kPage);
  for (int l = 0; l < kLayers; ++l) {
    for (int64_t b = 0; b < kBlocks; ++b) {
      uint8_t* page = caches.data() + (l * kBlocks + b) * kPage;
      std::memset(page, FloatToFp8(1.0f, kE4m3fnTraits), kBlockSize * kDim);
      const float scale = std::ldexp(1.0f, -(l % 16));
      for (int k = 0; k < kBlockSize; ++k) {
        std::memcpy(page + kBlockSize * kDim + 4 * k, &scale, 4);
      }
    }
  }
  DeviceArray d_caches, d_q, d_w, d_table, d_req, d_start, d_end, d_logits;
  ASSERT_LAUNCH(d_caches.Upload(caches));
  ASSERT_LAUNCH(d_q.Upload(
      std::vector<uint8_t>(kHeads * kDim, FloatToFp8(1.0f, kE4m3fnTraits))));
  ASSERT_LAUNCH(d_w.Upload(std::vector<float>(kHeads, 1.0f)));
  ASSERT_LAUNCH(d_table.Upload(std::vector<int32_t>{1, 0}));
  ASSERT_LAUNCH(d_req.Upload(std::vector<int32_t>{0}));
  ASSERT_LAUNCH(d_start.Upload(std::vector<int32_t>{0}));
  ASSERT_LAUNCH(d_end.Upload(std::vector<int32_t>{kBlockSize}));
  ASSERT_LAUNCH(d_logits.Allocate(kBlockSize * sizeof(float)));
  IndexerLogitsParams p;
  p.q_fp8 = d_q.get<uint8_t>();
  p.head_weights = d_w.get<float>();
  p.block_table = d_table.get<int32_t>();
  p.row_request = d_req.get<int32_t>();
  p.row_key_start = d_start.get<int32_t>();
  p.row_key_end = d_end.get<int32_t>();
  p.logits = d_logits.get<float>();
  p.rows = 1;
  p.heads = kHeads;
  p.head_dim = kDim;
  p.num_blocks = kBlocks;
  p.block_size = kBlockSize;
  p.num_requests = 1;
  p.max_blocks_per_request = 2;
  p.block_table_stride = 2;
  p.width = kBlockSize;
  p.logits_stride = kBlockSize;
  p.encoding = Fp8Encoding::kE4m3fn;
  p.k_cache = d_caches.get<uint8_t>();
  indexer::LogitsPlan plan;
  if (!indexer::PlanIndexerLogits(p, tma, features, &plan).ok()) {
    GTEST_SKIP() << "no persistent TMA body on this device";
  }
  const SmallCacheStats before = IndexerLogitsKeyMapStats();
  for (int step = 0; step < 2; ++step) {
    for (int l = 0; l < kLayers; ++l) {
      p.k_cache = d_caches.get<uint8_t>() + l * kBlocks * kPage;
      ASSERT_LAUNCH(
          DeviceMemset(d_logits.get<void>(), 0xff, kBlockSize * sizeof(float)));
      ASSERT_LAUNCH(IndexerLogitsLaunch(p, nullptr, tma));
      std::vector<float> logits;
      ASSERT_LAUNCH(DeviceSynchronize());
      ASSERT_LAUNCH(d_logits.Download(&logits));
      const float want = 4096.0f * std::ldexp(1.0f, -(l % 16));
      for (int j = 0; j < kBlockSize; ++j) {
        ASSERT_EQ(logits[j], want)
            << "step " << step << " layer " << l << " key " << j;
      }
    }
    const SmallCacheStats after = IndexerLogitsKeyMapStats();
    EXPECT_EQ(after.misses - before.misses, kLayers) << "step " << step;
    EXPECT_EQ(after.hits - before.hits, step * kLayers) << "step " << step;
  }
}

}  // namespace
}  // namespace dsa::attention::gpu
