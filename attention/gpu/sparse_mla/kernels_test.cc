// The GPU sparse MLA (SparseMlaLaunch) against a float64 host reference, on
// fresh random inputs with poisoned outputs: bf16 and fp8 caches, 1 to 128
// heads, top-k rows with topk - 1 / topk valid indices out of requests of
// topk - 1 / topk / topk + 1 tokens, -1 padding, duplicates, rows without
// any valid index, invalid indices (which the kernels skip), index chunks
// and key tiles cut at every boundary, the FMA kernel for other dims, fp8
// caches dequantised into the seesaw body's bf16 workspace (every position,
// or each row's top-k entries in passes of rows: decode), top-k splits that
// leave a block no valid key, and the path the heuristics pick on sm_90a
// where a case names one (and the warp-level kernel on the same inputs
// where a case asks for it too).
// Skips cleanly when built without a GPU backend or run without a device.
//
// Tolerance. The matrix path rounds q to bf16 once, by design (the
// launcher's contract); the reference takes q as that path reads it, since
// the rounding's effect grows with the score magnitude (peaked softmaxes)
// and would otherwise set the bound. The path then rounds three more things
// to bf16 (8 significant bits, relative error <= 2^-9 each): the softmax
// probabilities, the normalised latent output o and W_UV (when f32); a bf16
// output adds one more rounding. Everything else is exact (bf16 and
// fp8 * power-of-two cache values are bf16; the few fp8 tiles of another
// scale add one more rounding of their values) or accumulated in fp32. The
// roundings are independent across the topk / 512 terms they enter, so
// their effect on an output is a few 2^-9 of the output's scale (the
// largest |output| of its token and head); a bound of 2^-6 of that scale
// leaves a wide margin (the worst seen on the H200 is printed per case),
// while a wrong or missed key, a missed duplicate or -1, a wrong W_UV row or
// a broken softmax moves outputs by 5% of the scale or more at the top-k
// sizes used here (the topk-2048 case uses peaked scores so that every tile
// matters). The FMA path keeps q in fp32 and rounds nothing: it is checked
// against the unrounded q.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "attention/dtypes/fp8.h"
#include "attention/gpu/device/features.h"
#include "attention/gpu/device/runtime.h"
#include "attention/gpu/device/test_util.h"
#include "attention/gpu/sparse_mla/heuristics.h"
#include "attention/gpu/sparse_mla/launch.h"
#include "attention/gpu/sparse_mla/test_inputs.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

using sparse_mla_test::Bf16Bits;
using sparse_mla_test::Bf16Float;
using sparse_mla_test::Encode;
using sparse_mla_test::kBuilt;

constexpr double kRelTol = 1.0 / 64;

struct Case {
  std::string name;
  LatentCacheType cache = LatentCacheType::kBFloat16;
  int heads = 1;
  int lora = 512, rope = 64, nope = 128, v = 128;
  int topk = 64;
  int block_size = 16;
  std::vector<int32_t> seq_lens;
  FloatFormat q_format = FloatFormat::kFloat32;
  FloatFormat w_format = FloatFormat::kFloat32;
  FloatFormat out_format = FloatFormat::kFloat32;
  double q_scale = 1.0;      // larger: more peaked softmax
  bool bad_indices = false;  // add rows whose indices must be skipped
  const char* path = "mma";
  // The path the heuristics must pick where the device runs sm_90a code.
  const char* sm90a_path = nullptr;
  // Also run on these kernels (SparseMlaLaunchOnPath: "mma", the
  // warp-level one; "gather+seesaw"), the same inputs and checks. Every fp8
  // case of 64 heads or more runs on "seesaw-fp8" too, in a test of its own
  // (SeesawFp8EqualsGatheredToTheBit).
  std::vector<const char*> also_paths;
  // Block-table columns past what the requests need (-7, never read), so
  // that the requests name more positions than the workspace holds.
  int spare_table_columns = 0;
  // Rows added after the usual ones: topk - (k % 5) valid indices each,
  // request k % requests (enough rows for several passes).
  int extra_rows = 0;
  // Where a row's -1 padding goes: shuffled among its indices, after them
  // (the valid ones ascending, as the indexer's top-k writes them), or
  // before them.
  enum class Padding {
    kShuffled,
    kTrailing,
    kLeading
  } padding = Padding::kShuffled;
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << c.name;
}

class SparseMlaKernelTest : public ::testing::TestWithParam<Case> {};

// The case on each of `paths` (nullptr: the picked kernel), fresh inputs,
// one float64 reference.
void CheckCase(const Case& c, const std::vector<const char*>& paths) {
  if (!kBuilt) GTEST_SKIP() << "built without a GPU backend";
  // Fresh inputs every run; a failure names the draw's seed.
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << c.name << ", inputs of seed " << seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const bool fp8 = c.cache != LatentCacheType::kBFloat16;
  const Fp8Traits traits = c.cache == LatentCacheType::kFp8E4m3fnuz
                               ? kE4m3fnuzTraits
                               : kE4m3fnTraits;
  const int dim = c.lora + c.rope, bs = c.block_size;
  const int requests = static_cast<int>(c.seq_lens.size());

  // Paged layout: shuffled pages, block-table rows wider than used.
  int32_t max_blocks = 1;
  for (int32_t s : c.seq_lens)
    max_blocks = std::max(max_blocks, (s + bs - 1) / bs);
  const int32_t table_stride = max_blocks + c.spare_table_columns + 2;
  const int64_t num_blocks = int64_t{requests} * max_blocks + 3;
  std::vector<int32_t> table = sparse_mla_test::ShuffledBlockTable(
      requests, max_blocks, table_stride, num_blocks, rng);

  // Cache: entries padded by 16 bytes (a token stride wider than the entry).
  const int64_t entry =
      fp8 ? c.lora + 4 * (c.lora / 128) + 2 * c.rope : 2 * int64_t{dim};
  const int64_t token_stride = entry + 16;
  const int64_t block_stride = token_stride * bs;
  std::vector<uint8_t> cache(num_blocks * block_stride);
  for (uint8_t& b : cache) b = static_cast<uint8_t>(rng());
  std::vector<double> decoded(num_blocks * bs * dim);
  for (int64_t slot = 0; slot < num_blocks * bs; ++slot) {
    uint8_t* e =
        cache.data() + (slot / bs) * block_stride + (slot % bs) * token_stride;
    double* out = decoded.data() + slot * dim;
    if (!fp8) {
      for (int d = 0; d < dim; ++d) {
        const uint16_t b = Bf16Bits(normal(rng));
        std::memcpy(e + 2 * d, &b, 2);
        out[d] = Bf16Float(b);
      }
      continue;
    }
    for (int tile = 0; tile < c.lora / 128; ++tile) {
      // Powers of two as the cache writer's, some of any mantissa, and some
      // from 2^7 up, which the producers' fast conversion leaves to the
      // general one (row_access.h: Fp8Fast).
      const int kind = static_cast<int>(rng() % 16);
      const float scale =
          kind == 0 ? std::ldexp(1.0f, 7 + static_cast<int>(rng() % 3))
          : kind <= 2
              ? std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f,
                           static_cast<int>(rng() % 5) - 5)
              : std::ldexp(1.0f, static_cast<int>(rng() % 5) - 5);
      std::memcpy(e + c.lora + 4 * tile, &scale, 4);
      for (int d = tile * 128; d < (tile + 1) * 128; ++d) {
        const uint8_t code = FloatToFp8(normal(rng) / scale, traits);
        e[d] = code;
        out[d] = static_cast<double>(Fp8ToFloat(code, traits)) * scale;
      }
    }
    for (int d = 0; d < c.rope; ++d) {
      const uint16_t b = Bf16Bits(normal(rng));
      std::memcpy(e + c.lora + 4 * (c.lora / 128) + 2 * d, &b, 2);
      out[c.lora + d] = Bf16Float(b);
    }
  }

  // Rows: per request, topk - 1 and topk valid indices (or all the
  // request has), -1 holes, duplicates; a row of only -1.
  std::vector<int32_t> token_request, indices;
  auto add_row = [&](int32_t r, int count, bool duplicate) {
    const int32_t len = c.seq_lens[r];
    std::vector<int32_t> pos(len);
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin(), pos.end(), rng);
    pos.resize(std::min(count, len));
    if (duplicate && pos.size() >= 2) pos[pos.size() - 1] = pos[0];
    const size_t valid = pos.size();
    pos.resize(c.topk, -1);
    switch (c.padding) {
      case Case::Padding::kShuffled:
        std::shuffle(pos.begin(), pos.end(), rng);
        break;
      case Case::Padding::kTrailing:
        std::sort(pos.begin(), pos.begin() + valid);
        break;
      case Case::Padding::kLeading:
        std::rotate(pos.begin(), pos.begin() + valid, pos.end());
        break;
    }
    token_request.push_back(r);
    indices.insert(indices.end(), pos.begin(), pos.end());
  };
  for (int r = 0; r < requests; ++r) {
    add_row(r, c.topk - 1, r % 2 == 0);
    add_row(r, c.topk, true);
    // (A third row per request only where the float64 reference is cheap.)
    if (c.topk < 1024) add_row(r, c.topk, false);
  }
  for (int k = 0; k < c.extra_rows; ++k) {
    add_row(k % requests, c.topk - k % 5, k % 3 == 0);
  }
  add_row(0, 0, false);  // only -1
  add_row(requests - 1, 1, false);
  if (c.bad_indices) {
    // Out of the request, below -1, an invalid request, a broken block
    // table entry: skipped, the rest of the row still counts.
    add_row(0, c.topk, false);
    indices[indices.size() - 1] = c.seq_lens[0];
    indices[indices.size() - 2] = -5;
    indices[indices.size() - 3] = 1 << 30;
    add_row(0, c.topk, false);
    token_request.back() = requests + 3;
    table[0 * table_stride + 0] = -3;
    if (max_blocks > 1) table[0 * table_stride + 1] = 1 << 30;
  }
  const int64_t tokens = static_cast<int64_t>(token_request.size());

  std::vector<float> q(tokens * c.heads * dim);
  for (float& x : q) x = normal(rng) * static_cast<float>(c.q_scale);
  std::vector<float> w(int64_t{c.heads} * (c.nope + c.v) * c.lora);
  for (float& x : w) x = normal(rng) / std::sqrt(static_cast<float>(c.lora));
  const std::vector<uint8_t> q_bytes = Encode(q, c.q_format);
  std::vector<float> q_ref = q;
  if (std::string(c.path) == "mma") {
    for (float& x : q_ref) x = Bf16Float(Bf16Bits(x));
  }
  const std::vector<uint8_t> w_bytes = Encode(w, c.w_format);
  const double softmax_scale =
      1.0 / std::sqrt(static_cast<double>(c.nope + c.rope));

  // Reference, skipping exactly what the kernel must skip; the tokens
  // spread over the host's cores.
  std::vector<double> expected(tokens * c.heads * c.v, 0.0);
  auto reference_token = [&](int64_t t) {
    const int32_t r = token_request[t];
    if (r < 0 || r >= requests) return;
    std::vector<const double*> keys;
    for (int j = 0; j < c.topk; ++j) {
      const int32_t idx = indices[t * c.topk + j];
      if (idx < 0 || idx >= c.seq_lens[r]) continue;
      const int32_t block = table[r * table_stride + idx / bs];
      if (block < 0 || block >= num_blocks) continue;
      keys.push_back(decoded.data() + (int64_t{block} * bs + idx % bs) * dim);
    }
    if (keys.empty()) return;
    for (int h = 0; h < c.heads; ++h) {
      const float* qh = q_ref.data() + (t * c.heads + h) * dim;
      std::vector<double> s(keys.size());
      double mx = -1e300;
      for (size_t j = 0; j < keys.size(); ++j) {
        double dot = 0;
        for (int d = 0; d < dim; ++d) dot += double{qh[d]} * keys[j][d];
        s[j] = dot * softmax_scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      std::vector<double> o(c.lora, 0.0);
      for (size_t j = 0; j < keys.size(); ++j) {
        for (int d = 0; d < c.lora; ++d) o[d] += s[j] / sum * keys[j][d];
      }
      for (int oo = 0; oo < c.v; ++oo) {
        const float* wr =
            w.data() + (int64_t{h} * (c.nope + c.v) + c.nope + oo) * c.lora;
        double acc = 0;
        for (int d = 0; d < c.lora; ++d) acc += double{wr[d]} * o[d];
        expected[(t * c.heads + h) * c.v + oo] = acc;
      }
    }
  };
  {
    const int64_t workers = std::max<int64_t>(
        1, std::min<int64_t>(tokens, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (int64_t k = 0; k < workers; ++k) {
      pool.emplace_back([&, k] {
        for (int64_t t = k; t < tokens; t += workers) reference_token(t);
      });
    }
    for (std::thread& th : pool) th.join();
  }

  DeviceArray d_q, d_cache, d_table, d_seq, d_req, d_idx, d_w, d_out;
  ASSERT_LAUNCH(d_q.Upload(q_bytes));
  ASSERT_LAUNCH(d_cache.Upload(cache));
  ASSERT_LAUNCH(d_table.Upload(table));
  ASSERT_LAUNCH(d_seq.Upload(c.seq_lens));
  ASSERT_LAUNCH(d_req.Upload(token_request));
  ASSERT_LAUNCH(d_idx.Upload(indices));
  ASSERT_LAUNCH(d_w.Upload(w_bytes));
  const size_t out_elem = c.out_format == FloatFormat::kFloat32 ? 4 : 2;
  // Output rows padded: head stride v + 8, token stride heads * (v + 8).
  const int64_t out_head_stride = c.v + 8;
  const int64_t out_bytes = tokens * c.heads * out_head_stride * out_elem;
  ASSERT_LAUNCH(d_out.Allocate(out_bytes));

  SparseMlaParams p;
  p.q = d_q.get<void>();
  p.q_format = c.q_format;
  p.q_token_stride = int64_t{c.heads} * dim;
  p.q_head_stride = dim;
  p.kv_cache = d_cache.get<uint8_t>();
  p.cache_type = c.cache;
  p.cache_block_stride = block_stride;
  p.cache_token_stride = token_stride;
  p.num_blocks = num_blocks;
  p.block_size = bs;
  p.kv_lora_rank = c.lora;
  p.rope_dim = c.rope;
  p.block_table = d_table.get<int32_t>();
  p.num_requests = requests;
  p.max_blocks_per_request = max_blocks + c.spare_table_columns;
  p.block_table_stride = table_stride;
  p.seq_lens = d_seq.get<int32_t>();
  p.token_request = d_req.get<int32_t>();
  p.topk_indices = d_idx.get<int32_t>();
  p.topk = c.topk;
  p.topk_stride = c.topk;
  p.kv_b_proj = d_w.get<void>();
  p.kv_b_proj_format = c.w_format;
  p.kv_b_proj_row_stride = c.lora;
  p.qk_nope_head_dim = c.nope;
  p.v_head_dim = c.v;
  p.softmax_scale = static_cast<float>(softmax_scale);
  p.output = d_out.get<void>();
  p.output_format = c.out_format;
  p.output_token_stride = int64_t{c.heads} * out_head_stride;
  p.output_head_stride = out_head_stride;
  p.tokens = tokens;
  p.heads = c.heads;
  // "mma" names any matrix kernel: the seesaw one ("seesaw", sm_90a builds
  // on Hopper, bf16 cache, 64 heads or more; "dequant+seesaw" over an fp8
  // cache) or the warp-level one.
  const std::string path = SparseMlaPath(p);
  if (std::string(c.path) == "mma") {
    EXPECT_TRUE(path == "mma" || path == "seesaw" || path == "dequant+seesaw" ||
                path == "gather+seesaw" || path == "seesaw-fp8" ||
                path == "seesaw-fp8x2")
        << path;
  } else {
    EXPECT_EQ(path, c.path);
  }
  DeviceFeatures features;
  if (c.sm90a_path != nullptr && CurrentDeviceFeatures(&features).ok() &&
      features.sm90a) {
    EXPECT_EQ(path, c.sm90a_path);
  }
  // Each path's raw output, by name: the gathered workspace and the
  // producers that dequantise give the same bf16 keys and run the same
  // products, so their outputs must agree to the bit.
  std::vector<std::pair<std::string, std::vector<uint8_t>>> outputs;
  // Runs on `run_path` (nullptr: the picked one) into the poisoned output
  // and checks every element.
  auto run_and_check = [&](const char* run_path) {
    ASSERT_LAUNCH(DeviceMemset(d_out.get<void>(), 0xff, out_bytes));  // NaN
    const LaunchResult launched = SparseMlaLaunchOnPath(p, run_path, nullptr);
    if (run_path != nullptr && launched.code == LaunchCode::kInvalidArgument) {
      std::printf("  %s: path %s cannot run here (%s)\n", c.name.c_str(),
                  run_path, launched.message);
      return;
    }
    ASSERT_LAUNCH(launched);
    ASSERT_LAUNCH(DeviceSynchronize());
    std::vector<uint8_t> raw;
    ASSERT_LAUNCH(d_out.Download(&raw));
    double worst = 0;
    int64_t failures = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      for (int h = 0; h < c.heads; ++h) {
        const double* e = expected.data() + (t * c.heads + h) * c.v;
        double scale = 0;
        for (int o = 0; o < c.v; ++o) scale = std::max(scale, std::fabs(e[o]));
        for (int o = 0; o < out_head_stride; ++o) {
          const int64_t at = (t * c.heads + h) * out_head_stride + o;
          float g;
          if (c.out_format == FloatFormat::kFloat32) {
            std::memcpy(&g, raw.data() + 4 * at, 4);
          } else {
            uint16_t b;
            std::memcpy(&b, raw.data() + 2 * at, 2);
            g = Bf16Float(b);
          }
          if (o >= c.v) {  // padding between heads: untouched
            if (!std::isnan(g) && failures++ < 5) {
              ADD_FAILURE()
                  << "padding written at token " << t << " head " << h;
            }
            continue;
          }
          if (scale == 0) {  // no valid key: exact zeros
            if (g != 0.0f && failures++ < 5) {
              ADD_FAILURE() << "token " << t << " head " << h << " dim " << o
                            << ": got " << g << ", expected 0 (no valid key)";
            }
            continue;
          }
          const double err = std::fabs(g - e[o]) / scale;
          if (!(err <= kRelTol) && failures++ < 5) {
            ADD_FAILURE() << "token " << t << " head " << h << " dim " << o
                          << ": got " << g << ", expected " << e[o]
                          << " (scale " << scale << ")";
          }
          if (err > worst) worst = err;
        }
      }
    }
    EXPECT_EQ(failures, 0) << (run_path != nullptr ? run_path : path);
    std::printf(
        "  %s: path %s, %lld rows, worst error %.3g of the output scale\n",
        c.name.c_str(), run_path != nullptr ? run_path : path.c_str(),
        static_cast<long long>(tokens), worst);
    outputs.emplace_back(run_path != nullptr ? run_path : path, raw);
  };
  for (const char* run_path : paths) run_and_check(run_path);
  // The bodies that dequantise in their producers against the gathered
  // workspace (the general conversion, gather_dequantise.hip.cc) to the
  // bit: the same consumers over the same bf16 keys, where the two split
  // the top-k lists alike (the gathered workspace's passes of fewer rows
  // may leave them whole where the other splits them).
  const std::vector<uint8_t>* gathered = nullptr;
  for (const auto& [name, raw] : outputs) {
    if (name == "gather+seesaw") gathered = &raw;
  }
  const auto splits = [&](const std::string& name) {
    sparse_mla::Body body;
    DeviceFeatures f;
    if (!sparse_mla::ParseBody(name.c_str(), &body) ||
        !CurrentDeviceFeatures(&f).ok()) {
      return -1;
    }
    return sparse_mla::PlanFor(body, p, f).splits;
  };
  for (const auto& [name, raw] : outputs) {
    if (gathered == nullptr ||
        (name != "seesaw-fp8" && name != "seesaw-fp8x2")) {
      continue;
    }
    if (splits(name) != splits("gather+seesaw")) {
      std::printf(
          "  %s: %s splits each row's top-k list in %d, "
          "gather+seesaw in %d: not compared to the bit\n",
          c.name.c_str(), name.c_str(), splits(name), splits("gather+seesaw"));
      continue;
    }
    ASSERT_EQ(gathered->size(), raw.size());
    int64_t differ = 0;
    for (size_t i = 0; i < raw.size(); ++i) {
      differ += (*gathered)[i] != raw[i] ? 1 : 0;
    }
    EXPECT_EQ(differ, 0) << "bytes of " << name
                         << "'s output that differ from the gathered "
                            "workspace's";
    std::printf("  %s: %s and gather+seesaw, %lld of %zu bytes differ\n",
                c.name.c_str(), name.c_str(), static_cast<long long>(differ),
                raw.size());
  }
}

TEST_P(SparseMlaKernelTest, MatchesFloat64Reference) {
  const Case& c = GetParam();
  std::vector<const char*> paths = {nullptr};
  paths.insert(paths.end(), c.also_paths.begin(), c.also_paths.end());
  CheckCase(c, paths);
}

// The seesaw body reading the fp8 cache itself, on every fp8 case it can
// run (sm_90a code, the matrix shape, 64 heads or more), beside the
// gathered workspace where that runs too: both against the float64
// reference and against each other to the bit.
TEST_P(SparseMlaKernelTest, SeesawFp8EqualsGatheredToTheBit) {
  const Case& c = GetParam();
  if (c.cache == LatentCacheType::kBFloat16 || c.heads < 64 || c.lora != 512 ||
      c.rope != 64) {
    GTEST_SKIP() << "not a case of the fp8 seesaw body";
  }
  DeviceFeatures features;
  if (!CurrentDeviceFeatures(&features).ok() || !features.sm90a) {
    GTEST_SKIP() << "no sm_90a device";
  }
  CheckCase(c, {"gather+seesaw", "seesaw-fp8"});
}

// The crossover (clusters of two blocks, each dequantising half of every
// tile for both) on every fp8 case of an even number of head groups (128
// heads), beside the gathered workspace: both against the float64
// reference and against each other to the bit.
TEST_P(SparseMlaKernelTest, SeesawFp8CrossoverEqualsGatheredToTheBit) {
  const Case& c = GetParam();
  if (c.cache == LatentCacheType::kBFloat16 || c.heads <= 64 ||
      (c.heads + 63) / 64 % 2 != 0 || c.lora != 512 || c.rope != 64) {
    GTEST_SKIP() << "not a case of the fp8 crossover";
  }
  DeviceFeatures features;
  if (!CurrentDeviceFeatures(&features).ok() || !features.sm90a) {
    GTEST_SKIP() << "no sm_90a device";
  }
  CheckCase(c, {"gather+seesaw", "seesaw-fp8x2"});
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  {
    Case c;
    c.name = "Bf16Cache64HeadsTopk2048";
    c.heads = 64;
    c.nope = 192;
    c.v = 256;
    c.topk = 2048;
    c.block_size = 64;
    c.seq_lens = {2047, 2048, 2049};
    c.q_scale = 3.0;
    cases.push_back(c);
  }
  {
    // More positions (4 requests of 304) than its 16 rows of 64 pairs: each
    // row's top-k entries gathered on sm_90a; the warp-level kernel too.
    Case c;
    c.name = "Fp8Cache128HeadsBf16Io";
    c.cache = LatentCacheType::kFp8E4m3fn;
    c.heads = 128;
    c.topk = 64;
    c.block_size = 16;
    c.seq_lens = {63, 64, 65, 300};
    c.q_format = c.w_format = c.out_format = FloatFormat::kBFloat16;
    c.bad_indices = true;
    c.sm90a_path = "gather+seesaw";
    c.also_paths = {"mma"};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "Bf16Cache1HeadOddBlocks";
    c.heads = 1;
    c.topk = 33;
    c.block_size = 3;
    c.seq_lens = {32, 33, 34};
    c.q_format = FloatFormat::kBFloat16;
    c.bad_indices = true;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "Fp8FnuzCache20HeadsTwoChunks";
    c.cache = LatentCacheType::kFp8E4m3fnuz;
    c.heads = 20;
    c.topk = 1100;
    c.block_size = 32;
    c.seq_lens = {1099, 1100, 1101};
    c.w_format = FloatFormat::kBFloat16;
    c.out_format = FloatFormat::kBFloat16;
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "Bf16Cache100Heads";
    c.heads = 100;
    c.topk = 96;
    c.block_size = 64;
    c.seq_lens = {95, 200};
    cases.push_back(c);
  }
  {
    // The seesaw kernel's edges: two head groups, 64-key tiles cut at
    // topk 130 (64 + 64 + 2), requests of topk - 1 .. topk + 1 tokens and a
    // short one, bad indices, bf16 in and out.
    Case c;
    c.name = "Bf16Cache128HeadsTileEdges";
    c.heads = 128;
    c.topk = 130;
    c.block_size = 16;
    c.seq_lens = {129, 130, 131, 7};
    c.q_format = c.w_format = c.out_format = FloatFormat::kBFloat16;
    c.q_scale = 2.0;
    c.bad_indices = true;
    cases.push_back(c);
  }
  {
    // A second head group of 8 heads (zero-padded to 64 inside the block),
    // fp32 in and out, topk one short of two tiles.
    Case c;
    c.name = "Bf16Cache72HeadsF32Io";
    c.heads = 72;
    c.nope = 192;
    c.v = 256;
    c.topk = 127;
    c.block_size = 32;
    c.seq_lens = {126, 127, 128};
    cases.push_back(c);
  }
  {
    // The seesaw body's tile count: rows in the indexer's order (valid
    // indices ascending, -1 after them), requests shorter than, equal to and
    // longer than topk, so that rows end after 1, 15, 16 and 32 tiles of 64
    // and tile pairs end half empty; 128 heads, bf16 in and out, few rows
    // (the top-k list split over blocks).
    Case c;
    c.name = "Bf16Cache128HeadsTrailingPadding";
    c.heads = 128;
    c.topk = 2048;
    c.block_size = 64;
    c.seq_lens = {60, 1000, 2047, 4096};
    c.q_format = c.w_format = c.out_format = FloatFormat::kBFloat16;
    c.q_scale = 2.0;
    c.padding = Case::Padding::kTrailing;
    cases.push_back(c);
  }
  {
    // -1 first: whole leading tiles masked before any valid key (the
    // running maximum still at its initial value), 64 heads, fp32 q,
    // enough rows that the list is not split.
    Case c;
    c.name = "Bf16Cache64HeadsLeadingPadding";
    c.heads = 64;
    c.nope = 192;
    c.v = 256;
    c.topk = 700;
    c.block_size = 32;
    c.seq_lens = {40,  699, 700, 701,  1500, 100, 63,  64,  65,  128, 129, 300,
                  699, 700, 701, 2000, 5,    640, 641, 700, 350, 450, 999};
    c.q_scale = 3.0;
    c.padding = Case::Padding::kLeading;
    c.bad_indices = true;
    cases.push_back(c);
  }
  {
    // An fp8 cache dequantised into the seesaw body's bf16 workspace
    // (sm_90a): 64 heads, top-k 2048 over requests of topk - 1 .. topk + 1
    // tokens in the indexer's order (valid indices ascending, -1 after),
    // peaked scores, bf16 q, bad indices and block-table entries outside
    // the cache (masked in the workspace's table).
    Case c;
    c.name = "Fp8Cache64HeadsTopk2048Dequantised";
    c.cache = LatentCacheType::kFp8E4m3fn;
    c.heads = 64;
    c.nope = 192;
    c.v = 256;
    c.topk = 2048;
    c.block_size = 64;
    c.seq_lens = {2047, 2048, 2049};
    c.q_format = FloatFormat::kBFloat16;
    c.q_scale = 3.0;
    c.padding = Case::Padding::kTrailing;
    c.bad_indices = true;
    c.sm90a_path = "dequant+seesaw";
    cases.push_back(c);
  }
  {
    // The same over e4m3fnuz at 128 heads (two head groups), -1 first
    // (whole masked tiles before any valid key), a short request, blocks of
    // 16, bf16 in and out, few rows (the top-k list split over blocks).
    Case c;
    c.name = "Fp8FnuzCache128HeadsDequantisedLeadingPadding";
    c.cache = LatentCacheType::kFp8E4m3fnuz;
    c.heads = 128;
    c.topk = 512;
    c.block_size = 16;
    c.seq_lens = {511, 512, 513, 40};
    c.q_format = c.w_format = c.out_format = FloatFormat::kBFloat16;
    c.q_scale = 2.0;
    c.padding = Case::Padding::kLeading;
    c.bad_indices = true;
    c.sm90a_path = "dequant+seesaw";
    cases.push_back(c);
  }
  {
    // fnuz fp8 at 64 heads: the dequantised workspace on sm_90a (3
    // requests of 256 positions for 13 rows of 200), the warp-level kernel
    // elsewhere.
    Case c;
    c.name = "Fp8FnuzCache64Heads";
    c.cache = LatentCacheType::kFp8E4m3fnuz;
    c.heads = 64;
    c.nope = 192;
    c.v = 256;
    c.topk = 200;
    c.block_size = 64;
    c.seq_lens = {199, 200, 201};
    c.q_format = FloatFormat::kBFloat16;
    c.bad_indices = true;
    c.sm90a_path = "dequant+seesaw";
    cases.push_back(c);
  }
  {
    // The dequantised workspace's edges: two head groups, tiles cut at
    // topk 130 (64 + 64 + 2), a short request, bad indices, bf16 in and
    // out.
    Case c;
    c.name = "Fp8Cache128HeadsDequantisedTileEdges";
    c.cache = LatentCacheType::kFp8E4m3fn;
    c.heads = 128;
    c.topk = 130;
    c.block_size = 16;
    c.seq_lens = {129, 130, 131, 7};
    c.q_format = c.w_format = c.out_format = FloatFormat::kBFloat16;
    c.q_scale = 2.0;
    c.bad_indices = true;
    c.sm90a_path = "dequant+seesaw";
    cases.push_back(c);
  }
  {
    // The same over e4m3fnuz, 72 heads (a zero-padded second head group),
    // fp32 in and out, a top-k of several tiles.
    Case c;
    c.name = "Fp8FnuzCache72HeadsDequantised";
    c.cache = LatentCacheType::kFp8E4m3fnuz;
    c.heads = 72;
    c.nope = 192;
    c.v = 256;
    c.topk = 300;
    c.block_size = 64;
    c.seq_lens = {299, 300, 301};
    c.sm90a_path = "dequant+seesaw";
    cases.push_back(c);
  }
  {
    // Decode over an fp8 cache (sm_90a: each row's top-k entries gathered):
    // 128 heads, top-k 2048 over requests of 8192, 3000, 2047 and 60
    // positions in the indexer's order (-1 after the valid ones), so that
    // the top-k list's splits over blocks leave the short request's last
    // ones no valid key; peaked scores, bad indices and block-table
    // entries, bf16 in and out; the warp-level kernel on the same inputs.
    Case c;
    c.name = "Fp8Cache128HeadsDecodeGathered";
    c.cache = LatentCacheType::kFp8E4m3fn;
    c.heads = 128;
    c.topk = 2048;
    c.block_size = 64;
    c.seq_lens = {8192, 3000, 2047, 60};
    c.q_format = c.w_format = c.out_format = FloatFormat::kBFloat16;
    c.q_scale = 2.0;
    c.padding = Case::Padding::kTrailing;
    c.bad_indices = true;
    c.sm90a_path = "gather+seesaw";
    c.also_paths = {"mma"};
    cases.push_back(c);
  }
  {
    // The same over e4m3fnuz at 64 heads, -1 first (whole masked tiles
    // before any valid key), blocks of 16, fp32 in and out, rows split in
    // two over blocks.
    Case c;
    c.name = "Fp8FnuzCache64HeadsGatheredLeadingPadding";
    c.cache = LatentCacheType::kFp8E4m3fnuz;
    c.heads = 64;
    c.nope = 192;
    c.v = 256;
    c.topk = 512;
    c.block_size = 16;
    c.seq_lens = {4000, 511, 513, 40};
    c.q_scale = 3.0;
    c.padding = Case::Padding::kLeading;
    c.bad_indices = true;
    c.sm90a_path = "gather+seesaw";
    cases.push_back(c);
  }
  {
    // Rows in passes: top-k 4096 fills the workspace (233016 rows) with 56
    // rows, so 62 rows run gathered as two passes of 31; requests naming a
    // million positions (spare block-table columns), bf16 q.
    Case c;
    c.name = "Fp8Cache64HeadsGatheredInPasses";
    c.cache = LatentCacheType::kFp8E4m3fn;
    c.heads = 64;
    c.nope = 192;
    c.v = 256;
    c.topk = 4096;
    c.block_size = 64;
    c.seq_lens = {4095, 4096, 4097, 300};
    c.spare_table_columns = 4000;
    c.extra_rows = 50;
    c.q_format = FloatFormat::kBFloat16;
    c.q_scale = 2.0;
    c.padding = Case::Padding::kTrailing;
    c.bad_indices = true;
    // 62 rows of one head group: the dequantising producer is picked
    // (heuristics.h: kSeesawFp8MinRows); the gathered workspace in its two
    // passes on the same inputs.
    c.sm90a_path = "seesaw-fp8";
    c.also_paths = {"gather+seesaw"};
    cases.push_back(c);
  }
  {
    // Decode at 64 heads with more rows than a split takes (76 rows: 2 x 76
    // blocks > 132), requests naming more positions than the workspace:
    // the seesaw body reading the fp8 cache itself on sm_90a; the gathered
    // workspace and the warp-level kernel on the same inputs. Shuffled -1,
    // duplicates, bad indices, bf16 in and out.
    Case c;
    c.name = "Fp8Cache64HeadsDecodeManyRows";
    c.cache = LatentCacheType::kFp8E4m3fn;
    c.heads = 64;
    c.nope = 192;
    c.v = 256;
    c.topk = 256;
    c.block_size = 16;
    c.seq_lens = {300, 1000, 255, 256, 257, 5000, 60, 2000};
    c.extra_rows = 48;
    c.q_format = c.w_format = c.out_format = FloatFormat::kBFloat16;
    c.q_scale = 2.0;
    c.bad_indices = true;
    c.sm90a_path = "seesaw-fp8";
    c.also_paths = {"gather+seesaw", "mma"};
    cases.push_back(c);
  }
  {
    // Decode at 128 heads over e4m3fnuz with more rows than a split takes
    // (66 rows), -1 first (whole masked tiles before any valid key), top-k
    // 320 (five tiles: the last pair's second tile past the list), short
    // requests (rows of fewer keys than a tile), duplicates, bad indices,
    // fp32 in and out; the crossover, the gathered workspace and the
    // warp-level kernel on the same inputs.
    Case c;
    c.name = "Fp8FnuzCache128HeadsDecodeManyRowsLeadingPadding";
    c.cache = LatentCacheType::kFp8E4m3fnuz;
    c.heads = 128;
    c.topk = 320;
    c.block_size = 16;
    c.seq_lens = {4000, 319, 321, 40, 1000, 64, 2, 700};
    c.extra_rows = 40;
    c.q_scale = 2.0;
    c.padding = Case::Padding::kLeading;
    c.bad_indices = true;
    c.sm90a_path = "seesaw-fp8x2";  // kSeesawFp8MinRows rows or more
    c.also_paths = {"gather+seesaw", "mma"};
    cases.push_back(c);
  }
  {
    // A bf16 cache at decode's shape (the seesaw body over the cache, the
    // top-k list split): 64 heads, top-k 2048 over requests of 8192 and 100
    // positions, duplicates, shuffled -1.
    Case c;
    c.name = "Bf16Cache64HeadsDecode";
    c.heads = 64;
    c.nope = 192;
    c.v = 256;
    c.topk = 2048;
    c.block_size = 64;
    c.seq_lens = {8192, 100};
    c.q_format = c.w_format = c.out_format = FloatFormat::kBFloat16;
    c.q_scale = 2.0;
    c.sm90a_path = "seesaw";
    c.also_paths = {"mma"};
    cases.push_back(c);
  }
  for (LatentCacheType t :
       {LatentCacheType::kBFloat16, LatentCacheType::kFp8E4m3fn}) {
    Case c;
    c.name =
        t == LatentCacheType::kBFloat16 ? "FmaTinyDimsBf16" : "FmaTinyDimsFp8";
    c.cache = t;
    c.heads = 4;
    c.lora = 128;
    c.rope = 32;
    c.nope = 64;
    c.v = 64;
    c.topk = 40;
    c.block_size = 16;
    c.seq_lens = {39, 40, 41};
    c.bad_indices = true;
    c.path = "fma";
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, SparseMlaKernelTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(SparseMlaLaunchTest, RejectsBadArgumentsWithAMessage) {
  SparseMlaParams p;
  p.tokens = 1;
  p.heads = 0;
  LaunchResult r = SparseMlaLaunch(p, nullptr);
  if (r.code == LaunchCode::kNotBuilt) GTEST_SKIP() << r.message;
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("sparse_mla: sizes"), std::string::npos)
      << r.message;
  p.heads = 1;
  p.num_blocks = 1;
  p.block_size = 1;
  p.num_requests = 1;
  p.max_blocks_per_request = 1;
  p.block_table_stride = 1;
  p.topk = 1;
  p.topk_stride = 1;
  p.cache_token_stride = 1152;
  p.cache_block_stride = 1152;
  r = SparseMlaLaunch(p, nullptr);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("null"), std::string::npos)
      << r.message;
  // A latent too wide for the FMA kernels' shared memory.
  // (Pointers the launcher checks but does not read before refusing.)
  alignas(16) static uint8_t fake[16];
  const int32_t* fake_ints = reinterpret_cast<const int32_t*>(fake);
  p.q = fake;
  p.kv_cache = fake;
  p.kv_b_proj = fake;
  p.output = fake;
  p.block_table = p.seq_lens = p.token_request = p.topk_indices = fake_ints;
  p.kv_lora_rank = 8192;
  p.cache_token_stride = p.cache_block_stride = 2 * (8192 + 64);
  r = SparseMlaLaunch(p, nullptr);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("shared memory"), std::string::npos)
      << r.message;
  // Nothing to do: no launch, no error.
  p.tokens = 0;
  EXPECT_EQ(SparseMlaLaunch(p, nullptr).code, LaunchCode::kOk);
}

}  // namespace
}  // namespace dsa::attention::gpu
