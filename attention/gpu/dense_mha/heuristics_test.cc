// The dense MHA prefill's body choice (heuristics.h) over its decision
// table, without a device: every body reachable by default and on request,
// head dims at the TMA body's boundaries, sm_90a code and tensor maps on and
// off, the TMA tile width of each instantiated width pair, requests the
// device cannot run, and the TMA body's persistent schedule (its grid, its
// L2 sections, and that its tile order visits every tile once).
#include "attention/gpu/dense_mha/heuristics.h"

#include <string>
#include <tuple>
#include <vector>

#include "attention/gpu/dense_mha/config.h"
#include "gtest/gtest.h"

namespace dsa::attention::gpu::dense_mha {
namespace {

DeviceFeatures Hopper() {
  DeviceFeatures f;
  f.device = 0;
  f.multiprocessors = 132;
  f.max_shared_bytes_per_block = 232448;
  f.sm90a = true;
  f.tensor_maps = true;
  return f;
}
DeviceFeatures NoSm90a() {
  DeviceFeatures f = Hopper();
  f.sm90a = false;
  f.tensor_maps = false;
  return f;
}

DenseMhaPrefillParams Dims(int nope, int rope, int v,
                           DenseMhaBody body = DenseMhaBody::kAuto) {
  DenseMhaPrefillParams p;
  p.qk_nope_head_dim = nope;
  p.rope_dim = rope;
  p.v_head_dim = v;
  p.attention_body = body;
  return p;
}

AttentionChoice Choose(const DenseMhaPrefillParams& p,
                       const DeviceFeatures& f) {
  AttentionChoice c;
  const LaunchResult r = ChooseAttention(p, f, &c);
  EXPECT_TRUE(r.ok()) << r.message;
  return c;
}

std::string Path(const DenseMhaPrefillParams& p, const DeviceFeatures& f) {
  return AttentionPathName(Choose(p, f));
}

void ExpectRefused(const DenseMhaPrefillParams& p, const DeviceFeatures& f,
                   const std::string& why) {
  AttentionChoice c;
  const LaunchResult r = ChooseAttention(p, f, &c);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument) << r.message;
  EXPECT_NE(std::string(r.message).find(why), std::string::npos) << r.message;
}

TEST(DenseMhaHeuristicsTest, DefaultBodies) {
  // GLM-5.1 (192 + 64, v 256), DeepSeek-V3.2 (128 + 64, v 128).
  EXPECT_EQ(Path(Dims(192, 64, 256), Hopper()), "sm90-tma-80");
  EXPECT_EQ(Path(Dims(128, 64, 128), Hopper()), "sm90-tma-128");
  // The tiny presets: rope 32 is no whole swizzle block.
  EXPECT_EQ(Path(Dims(64, 32, 64), Hopper()), "sm90-pipelined");
  EXPECT_EQ(Path(Dims(32, 32, 64), Hopper()), "sm90-pipelined");
  // Without sm_90a code (AMD, sm_80/sm_90 builds): the warp body, always.
  for (const auto& p :
       {Dims(192, 64, 256), Dims(128, 64, 128), Dims(64, 32, 64)}) {
    EXPECT_EQ(Path(p, NoSm90a()), "warp");
  }
  // sm_90a without the driver's tensor-map encoder: the cp.async body.
  DeviceFeatures old_driver = Hopper();
  old_driver.tensor_maps = false;
  EXPECT_EQ(Path(Dims(192, 64, 256), old_driver), "sm90-pipelined");
}

TEST(DenseMhaHeuristicsTest, TmaBodyNeedsWholeSwizzleBlocks) {
  EXPECT_EQ(Path(Dims(0, 64, 64), Hopper()), "sm90-tma-128");  // no nope
  EXPECT_EQ(Path(Dims(192, 64, 64), Hopper()), "sm90-tma-128");
  EXPECT_EQ(Path(Dims(128, 128, 256), Hopper()), "sm90-tma-80");
  // One multiple of 8 off in each dim.
  EXPECT_EQ(Path(Dims(184, 64, 256), Hopper()), "sm90-pipelined");
  EXPECT_EQ(Path(Dims(128, 56, 128), Hopper()), "sm90-pipelined");
  EXPECT_EQ(Path(Dims(128, 64, 120), Hopper()), "sm90-pipelined");
  EXPECT_EQ(Path(Dims(128, 64, 136), Hopper()), "sm90-pipelined");
}

TEST(DenseMhaHeuristicsTest, WidthsRoundUpToInstantiations) {
  struct Row {
    int nope, rope, v, qk_width, v_width;
  };
  for (const Row& r :
       {Row{0, 8, 8, 64, 64}, Row{32, 32, 64, 64, 64}, Row{64, 8, 72, 128, 128},
        Row{128, 64, 128, 192, 128}, Row{128, 72, 136, 256, 256},
        Row{192, 64, 256, 256, 256}}) {
    const AttentionChoice c = Choose(Dims(r.nope, r.rope, r.v), Hopper());
    EXPECT_EQ(c.qk_width, r.qk_width) << r.nope << "+" << r.rope;
    EXPECT_EQ(c.v_width, r.v_width) << r.v;
  }
}

TEST(DenseMhaHeuristicsTest, TmaTileKeysPerWidthPair) {
  // 128-key tiles where v <= 128 and two stages of them fit beside Q, else
  // 80-key tiles where two stages of those fit.
  struct Row {
    int qk, v, keys;
  };
  for (const Row& r :
       {Row{64, 64, 128}, Row{128, 64, 128}, Row{192, 64, 128},
        Row{256, 64, 128}, Row{64, 128, 128}, Row{128, 128, 128},
        Row{192, 128, 128}, Row{256, 128, 80}, Row{64, 256, 80},
        Row{128, 256, 80}, Row{192, 256, 80}, Row{256, 256, 80}}) {
    EXPECT_EQ(TmaTileKeys(r.qk, r.v), r.keys) << r.qk << " / " << r.v;
    const AttentionChoice c =
        Choose(Dims(r.qk - 64, 64, r.v, DenseMhaBody::kSm90Tma), Hopper());
    EXPECT_EQ(c.tma_tile_keys, r.keys) << r.qk << " / " << r.v;
  }
  EXPECT_EQ(Choose(Dims(64, 32, 64), Hopper()).tma_tile_keys, 0);
}

TEST(DenseMhaHeuristicsTest, GatherChunksWhereTheCacheIsAligned) {
  alignas(16) static unsigned char cache[64];
  DenseMhaPrefillParams p = Dims(192, 64, 256);
  p.kv_lora_rank = 512;
  p.kv_cache = cache;
  p.cache_encoding = LatentCacheType::kBFloat16;
  EXPECT_EQ(GatherVectorElems(p, 2 * (512 + 64)), 8);  // 1152 bytes
  // fp8: 512 codes, 4 scales, then k_pe at 528: 656 bytes an entry.
  p.cache_encoding = LatentCacheType::kFp8E4m3fn;
  EXPECT_EQ(GatherVectorElems(p, 512 + 16 + 128), 8);
  // The tiny presets' fp8 entry: k_pe at 132, 196 bytes.
  p.kv_lora_rank = 128;
  p.rope_dim = 32;
  EXPECT_EQ(GatherVectorElems(p, 128 + 4 + 64), 2);
  p.cache_encoding = LatentCacheType::kBFloat16;
  EXPECT_EQ(GatherVectorElems(p, 2 * (128 + 32)), 8);      // 320 bytes
  EXPECT_EQ(GatherVectorElems(p, 2 * (128 + 32) + 8), 2);  // padded entries
  p.kv_cache = cache + 8;                                  // a view 8 bytes in
  EXPECT_EQ(GatherVectorElems(p, 2 * (128 + 32)), 2);
}

TEST(DenseMhaHeuristicsTest, RequestedBodies) {
  const auto glm = [](DenseMhaBody b) { return Dims(192, 64, 256, b); };
  EXPECT_EQ(Path(glm(DenseMhaBody::kWarp), Hopper()), "warp");
  EXPECT_EQ(Path(glm(DenseMhaBody::kWarp), NoSm90a()), "warp");
  EXPECT_EQ(Path(glm(DenseMhaBody::kSm90Pipelined), Hopper()),
            "sm90-pipelined");
  EXPECT_EQ(Path(glm(DenseMhaBody::kSm90Tma), Hopper()), "sm90-tma-80");
  EXPECT_EQ(Path(Dims(64, 32, 64, DenseMhaBody::kWarp), Hopper()), "warp");
}

TEST(DenseMhaHeuristicsTest, RefusesWhatTheDeviceCannotRun) {
  ExpectRefused(Dims(192, 64, 256, DenseMhaBody::kSm90Pipelined), NoSm90a(),
                "the sm90-pipelined body needs sm_90a device code");
  ExpectRefused(Dims(192, 64, 256, DenseMhaBody::kSm90Tma), NoSm90a(),
                "the sm90-tma body needs sm_90a device code");
  DeviceFeatures old_driver = Hopper();
  old_driver.tensor_maps = false;
  ExpectRefused(Dims(192, 64, 256, DenseMhaBody::kSm90Tma), old_driver,
                "tensor-map encoder");
  ExpectRefused(Dims(64, 32, 64, DenseMhaBody::kSm90Tma), Hopper(),
                "needs nope, rope and v multiples of 64 (got 64, 32, 64)");
  ExpectRefused(Dims(64, 64, 64, static_cast<DenseMhaBody>(7)), Hopper(),
                "unknown attention body 7");
  DenseMhaPrefillParams capped = Dims(192, 64, 256);
  capped.attention_ctas = -1;
  ExpectRefused(capped, Hopper(), "attention_ctas -1");
}

TmaSchedule Schedule(int64_t items, int heads, int64_t kv_rows, int max_ctas,
                     int qk = 256, int v = 256) {
  AttentionChoice c;
  c.body = DenseMhaBody::kSm90Tma;
  c.qk_width = qk;
  c.v_width = v;
  TmaSchedule s;
  const LaunchResult r =
      ScheduleTmaAttention(c, items, heads, kv_rows, max_ctas, 132, &s);
  EXPECT_TRUE(r.ok()) << r.message;
  return s;
}

TEST(DenseMhaScheduleTest, GridAndSections) {
  // GLM-5.1, T = 1024: 8 query tiles x 64 heads on 132 multiprocessors;
  // a head's K and V are 1 MiB, so 32 heads a section.
  TmaSchedule s = Schedule(8, 64, 1024, 0);
  EXPECT_EQ(s.tiles, 512);
  EXPECT_EQ(s.ctas, 132);
  EXPECT_EQ(s.heads_per_section, 32);
  // T = 8192: 8 MiB a head, 4 heads a section.
  s = Schedule(64, 64, 8192, 0);
  EXPECT_EQ(s.ctas, 132);
  EXPECT_EQ(s.heads_per_section, 4);
  // DeepSeek-V3.2 at 192 / 128, T = 1900 (1920 scratch rows).
  s = Schedule(15, 128, 1920, 0, 192, 128);
  EXPECT_EQ(s.tiles, 15 * 128);
  EXPECT_EQ(s.heads_per_section, (32 << 20) / (1920 * 320 * 2));
  // Fewer tiles than multiprocessors, a cap, more K/V than a section.
  EXPECT_EQ(Schedule(1, 2, 128, 0).ctas, 2);
  EXPECT_EQ(Schedule(8, 64, 1024, 3).ctas, 3);
  EXPECT_EQ(Schedule(2, 4, 1 << 20, 0).heads_per_section, 1);
  EXPECT_EQ(Schedule(2, 4, 128, 0).heads_per_section, 4);
  AttentionChoice c;
  c.qk_width = c.v_width = 256;
  EXPECT_EQ(
      ScheduleTmaAttention(c, int64_t{1} << 20, 1 << 12, 128, 0, 132, &s).code,
      LaunchCode::kInvalidArgument);
}

TEST(DenseMhaScheduleTest, TileOrderVisitsEveryTileOnce) {
  for (const auto& [items, heads, per_section] :
       std::vector<std::tuple<int, int, int>>{{8, 64, 32},
                                              {3, 5, 2},
                                              {7, 3, 3},
                                              {1, 1, 1},
                                              {5, 7, 1},
                                              {4, 6, 4}}) {
    std::vector<int> seen(items * heads, 0);
    int last_section = 0;
    for (int t = 0; t < items * heads; ++t) {
      const TmaTile tile = TmaTileOrder(t, items, heads, per_section);
      ASSERT_GE(tile.item, 0);
      ASSERT_LT(tile.item, items);
      ASSERT_GE(tile.head, 0);
      ASSERT_LT(tile.head, heads);
      ++seen[tile.item * heads + tile.head];
      // Sections in order; inside one, items in order (longest first).
      const int section = tile.head / per_section;
      EXPECT_GE(section, last_section);
      last_section = section;
      if (t > 0) {
        const TmaTile prev = TmaTileOrder(t - 1, items, heads, per_section);
        if (prev.head / per_section == section) {
          EXPECT_GE(tile.item, prev.item);
        }
      }
    }
    for (int n : seen) EXPECT_EQ(n, 1);
  }
}

TEST(Bf16GemmHeuristicsTest, Bodies) {
  Bf16GemmParams p;
  Bf16GemmBody body = Bf16GemmBody::kAuto;
  ASSERT_TRUE(ChooseBf16Gemm(p, Hopper(), &body).ok());
  EXPECT_EQ(body, Bf16GemmBody::kSm90);
  EXPECT_STREQ(Bf16GemmPathName(body), "sm90");
  ASSERT_TRUE(ChooseBf16Gemm(p, NoSm90a(), &body).ok());
  EXPECT_EQ(body, Bf16GemmBody::kWarp);
  EXPECT_STREQ(Bf16GemmPathName(body), "warp");
  p.body = Bf16GemmBody::kWarp;
  ASSERT_TRUE(ChooseBf16Gemm(p, Hopper(), &body).ok());
  EXPECT_EQ(body, Bf16GemmBody::kWarp);
  p.body = Bf16GemmBody::kSm90;
  ASSERT_TRUE(ChooseBf16Gemm(p, Hopper(), &body).ok());
  EXPECT_EQ(body, Bf16GemmBody::kSm90);
  const LaunchResult r = ChooseBf16Gemm(p, NoSm90a(), &body);
  EXPECT_EQ(r.code, LaunchCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message).find("needs sm_90a device code"),
            std::string::npos)
      << r.message;
}

}  // namespace
}  // namespace dsa::attention::gpu::dense_mha
