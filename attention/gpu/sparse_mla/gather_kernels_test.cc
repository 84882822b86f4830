// The sparse MLA decode's gather pass against the every-position pass, to
// the bit (see CheckGatherWorkspace). Skips cleanly when built without a GPU
// backend or run without a device.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "attention/dtypes/fp8.h"
#include "attention/gpu/device/runtime.h"
#include "attention/gpu/device/test_util.h"
#include "attention/gpu/sparse_mla/launch.h"
#include "attention/gpu/sparse_mla/test_inputs.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu {
namespace {

using sparse_mla_test::Bf16Bits;
using sparse_mla_test::kBuilt;
using sparse_mla_test::ShuffledBlockTable;

// The gather pass (gather_dequantise.hip.cc) against the every-position
// pass (dequantise.hip.cc, DequantiseEntry, the conversion the gather pass
// used before it was rewritten for its loads), to the bit: each valid (row,
// top-k entry) pair's workspace row equals that position's row of the
// every-position workspace, and both equal the host's fp8 value times its
// scale (all 256 codes, NaNs included; scales of any mantissa, +0,
// subnormal and large, each of row_access.h's conversions); every other row is
// not written, its table entry -1; the rows' ids and lengths. Inputs: -1
// padding, duplicates, indices past the request, below -1 and huge, a row with
// no valid key, an invalid request, block-table entries outside the cache, a
// pass starting at a later row, a top-k that cuts the pass's blocks mid-row and
// a last block not full.
void CheckGatherWorkspace(LatentCacheType cache_type) {
  if (!kBuilt) GTEST_SKIP() << "built without a GPU backend";
  std::mt19937 rng(std::random_device{}());
  const Fp8Traits traits = cache_type == LatentCacheType::kFp8E4m3fnuz
                               ? kE4m3fnuzTraits
                               : kE4m3fnTraits;
  constexpr int kLora = 512, kRope = 64, kDim = kLora + kRope, kBs = 16;
  constexpr int kTopk = 300;
  constexpr int64_t kEntry = kLora + 16 + 2 * kRope, kTokenStride = kEntry + 16;
  const std::vector<int32_t> seq_lens = {700, 301, 20, 1, 64};
  const int requests = static_cast<int>(seq_lens.size());
  const int32_t max_blocks = (700 + kBs - 1) / kBs;
  const int32_t table_stride = max_blocks + 3;
  const int64_t num_blocks = int64_t{requests} * max_blocks + 5;
  std::vector<int32_t> table =
      ShuffledBlockTable(requests, max_blocks, table_stride, num_blocks, rng);
  table[0 * table_stride + 3] = -3;       // outside the cache
  table[1 * table_stride + 2] = 1 << 30;  // outside the cache
  table[1 * table_stride + 5] = static_cast<int32_t>(num_blocks);
  std::vector<uint8_t> cache(num_blocks * kBs * kTokenStride);
  for (uint8_t& b : cache) b = static_cast<uint8_t>(rng());  // every code
  for (int64_t slot = 0; slot < num_blocks * kBs; ++slot) {
    for (int tile = 0; tile < 4; ++tile) {
      // Mostly the cache writer's powers of two; also scales of any
      // mantissa, +0, subnormal, from 2^7 up (which Fp8Fast leaves to the
      // general conversion), of bf16's 8 significant bits (Fp8Bf16Form's
      // too) and powers of two about 2^-100 (its lower bound).
      const int kind = static_cast<int>(rng() % 16);
      float scale = std::ldexp(1.0f, static_cast<int>(rng() % 9) - 6);
      if (kind == 7) {
        scale = std::ldexp(1.0f + static_cast<float>(rng() % 128) / 128.0f,
                           static_cast<int>(rng() % 27) - 20);
      } else if (kind == 8) {
        scale = std::ldexp(1.0f, -103 + static_cast<int>(rng() % 6));
      } else if (kind < 4) {
        scale =
            std::ldexp(1.0f + static_cast<float>(rng() % 8388608) / 8388608.0f,
                       static_cast<int>(rng() % 27) - 20);
      } else if (kind == 4) {
        scale = 0.0f;
      } else if (kind == 5) {
        scale = std::ldexp(static_cast<float>(1 + rng() % 1000), -140);
      } else if (kind == 6) {
        scale = std::ldexp(1.5f, 7 + static_cast<int>(rng() % 14));
      }
      std::memcpy(cache.data() + slot * kTokenStride + kLora + 4 * tile, &scale,
                  4);
    }
  }

  // Rows: request k % requests, its positions shuffled, padded with -1.
  std::vector<int32_t> token_request, indices;
  for (int k = 0; k < 11; ++k) {
    const int32_t r = k % requests;
    std::vector<int32_t> pos(seq_lens[r]);
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin(), pos.end(), rng);
    pos.resize(std::min<size_t>(pos.size(), kTopk - k));
    if (pos.size() >= 3) pos[pos.size() - 1] = pos[0];  // a duplicate
    pos.resize(kTopk, -1);
    std::shuffle(pos.begin(), pos.end(), rng);
    token_request.push_back(r);
    indices.insert(indices.end(), pos.begin(), pos.end());
  }
  // Indices past the request, below -1 and huge, in row 1 (request 1).
  indices[1 * kTopk + 0] = seq_lens[1];
  indices[1 * kTopk + 1] = -5;
  indices[1 * kTopk + 2] = 1 << 30;
  indices[1 * kTopk + 3] = max_blocks * kBs - 1;  // in the table, past the row
  token_request.push_back(requests + 2);          // an invalid request
  indices.insert(indices.end(), indices.begin(), indices.begin() + kTopk);
  token_request.push_back(2);  // no valid key
  indices.insert(indices.end(), kTopk, -1);
  const int64_t tokens = static_cast<int64_t>(token_request.size());
  const int64_t begin = 1, rows = tokens - begin;
  const int64_t pairs = rows * kTopk;

  alignas(16) static uint8_t fake[16];
  DeviceArray d_cache, d_table, d_seq, d_req, d_idx, d_all, d_all_table,
      d_gathered, d_gathered_table;
  ASSERT_LAUNCH(d_cache.Upload(cache));
  ASSERT_LAUNCH(d_table.Upload(table));
  ASSERT_LAUNCH(d_seq.Upload(seq_lens));
  ASSERT_LAUNCH(d_req.Upload(token_request));
  ASSERT_LAUNCH(d_idx.Upload(indices));
  SparseMlaParams p;
  p.q = fake;
  p.kv_b_proj = fake;
  p.output = fake;
  p.kv_cache = d_cache.get<uint8_t>();
  p.cache_type = cache_type;
  p.cache_block_stride = kTokenStride * kBs;
  p.cache_token_stride = kTokenStride;
  p.num_blocks = num_blocks;
  p.block_size = kBs;
  p.kv_lora_rank = kLora;
  p.rope_dim = kRope;
  p.block_table = d_table.get<int32_t>();
  p.num_requests = requests;
  p.max_blocks_per_request = max_blocks;
  p.block_table_stride = table_stride;
  p.seq_lens = d_seq.get<int32_t>();
  p.token_request = d_req.get<int32_t>();
  p.topk_indices = d_idx.get<int32_t>();
  p.topk = kTopk;
  p.topk_stride = kTopk;
  p.tokens = tokens;
  p.heads = 128;
  const int64_t capacity = int64_t{max_blocks} * kBs;
  const int64_t all_rows = requests * capacity;
  constexpr int64_t kRowBytes = 2 * kDim;
  ASSERT_LAUNCH(d_all.Allocate(all_rows * kRowBytes));
  ASSERT_LAUNCH(d_all_table.Allocate(requests * max_blocks * 4));
  ASSERT_LAUNCH(d_gathered.Allocate(pairs * kRowBytes));
  ASSERT_LAUNCH(d_gathered_table.Allocate((pairs + 2 * rows) * 4));
  ASSERT_LAUNCH(SparseMlaDequantiseCacheWorkspace(
      p, d_all.get<void>(), d_all_table.get<int32_t>(), nullptr));
  std::vector<uint16_t> all;
  ASSERT_LAUNCH(DeviceSynchronize());
  ASSERT_LAUNCH(d_all.Download(&all));
  // Each count of batches a group (config.h: gathered::kMaxBatches), so
  // that the blocks' pairs end mid-row, mid-batch and past the last pair.
  for (int batches = 1; batches <= 4; batches *= 2) {
    SCOPED_TRACE(batches);
    ASSERT_LAUNCH(
        DeviceMemset(d_gathered.get<void>(), 0xab, d_gathered.bytes()));
    ASSERT_LAUNCH(DeviceMemset(d_gathered_table.get<void>(), 0x55,
                               d_gathered_table.bytes()));
    ASSERT_LAUNCH(SparseMlaGatherWorkspace(
        p, begin, rows, batches, d_gathered.get<void>(),
        d_gathered_table.get<int32_t>(), nullptr));
    ASSERT_LAUNCH(DeviceSynchronize());
    std::vector<uint16_t> gathered;
    std::vector<int32_t> gathered_table;
    ASSERT_LAUNCH(d_gathered.Download(&gathered));
    ASSERT_LAUNCH(d_gathered_table.Download(&gathered_table));

    int64_t valid = 0, failures = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = begin + r;
      EXPECT_EQ(gathered_table[pairs + r], r);
      EXPECT_EQ(gathered_table[pairs + rows + r], kTopk);
      const int32_t req = token_request[t];
      for (int i = 0; i < kTopk; ++i) {
        const int64_t pair = r * kTopk + i;
        const uint16_t* got = gathered.data() + pair * kDim;
        const int32_t idx = indices[t * kTopk + i];
        int32_t block = -1;
        if (req >= 0 && req < requests && idx >= 0 && idx < seq_lens[req]) {
          block = table[req * table_stride + idx / kBs];
        }
        if (block < 0 || block >= num_blocks) {
          if (gathered_table[pair] != -1 && failures++ < 5) {
            ADD_FAILURE() << "row " << t << " entry " << i << " (index " << idx
                          << "): table " << gathered_table[pair] << ", not -1";
          }
          for (int d = 0; d < kDim; ++d) {
            if (got[d] != 0xabab && failures++ < 5) {
              ADD_FAILURE() << "row " << t << " entry " << i
                            << ": written, index " << idx << " names no entry";
              break;
            }
          }
          continue;
        }
        ++valid;
        if (gathered_table[pair] != i && failures++ < 5) {
          ADD_FAILURE() << "row " << t << " entry " << i << ": table "
                        << gathered_table[pair];
        }
        const uint16_t* ref = all.data() + (req * capacity + idx) * kDim;
        if (std::memcmp(got, ref, kRowBytes) != 0 && failures++ < 5) {
          ADD_FAILURE() << "row " << t << " entry " << i << " (index " << idx
                        << "): not the every-position pass's bits";
        }
        const uint8_t* e =
            cache.data() + (int64_t{block} * kBs + idx % kBs) * kTokenStride;
        for (int d = 0; d < kDim; ++d) {
          uint16_t want;
          bool nan = false;  // any NaN (the pass's bits are checked above)
          if (d < kLora) {
            float scale;
            std::memcpy(&scale, e + kLora + 4 * (d / 128), 4);
            const float x = Fp8ToFloat(e[d], traits) * scale;
            nan = std::isnan(x);
            // The f32 product rounded to bf16, as the kernels do.
            want = nan ? 0x7fc0 : Bf16Bits(x);
          } else {
            std::memcpy(&want, e + kLora + 16 + 2 * (d - kLora), 2);
          }
          const bool same = nan ? (got[d] & 0x7fffu) > 0x7f80u : got[d] == want;
          if (!same && failures++ < 5) {
            ADD_FAILURE() << "row " << t << " entry " << i << " dim " << d
                          << ": got 0x" << std::hex << got[d] << ", expected 0x"
                          << want << std::dec;
          }
        }
      }
    }
    EXPECT_EQ(failures, 0);
    EXPECT_GT(valid, rows * 50);
    std::printf(
        "  gather pass, %d batches a group: %lld of %lld pairs valid, %s\n",
        batches, static_cast<long long>(valid), static_cast<long long>(pairs),
        failures == 0 ? "equal to the bit" : "NOT equal");
  }
}

TEST(SparseMlaGatherTest, E4m3fnWorkspaceEqualsEveryPositionPassToTheBit) {
  CheckGatherWorkspace(LatentCacheType::kFp8E4m3fn);
}

TEST(SparseMlaGatherTest, E4m3fnuzWorkspaceEqualsEveryPositionPassToTheBit) {
  CheckGatherWorkspace(LatentCacheType::kFp8E4m3fnuz);
}

}  // namespace
}  // namespace dsa::attention::gpu
