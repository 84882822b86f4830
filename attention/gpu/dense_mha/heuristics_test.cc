// The dense MHA prefill's body choice (heuristics.h) over its decision
// table, without a device: every body reachable by default and on request,
// head dims at the TMA body's boundaries, sm_90a code and tensor maps on and
// off, the TMA tile width of each instantiated width pair, and requests the
// device cannot run.
#include "attention/gpu/dense_mha/heuristics.h"

#include <string>

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
  EXPECT_EQ(Path(Dims(192, 64, 256), Hopper()), "sm90-tma-64");
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
  EXPECT_EQ(Path(Dims(128, 128, 256), Hopper()), "sm90-tma-64");
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
  // 128-key tiles where v <= 128 and two stages of them fit beside Q.
  struct Row {
    int qk, v, keys;
  };
  for (const Row& r :
       {Row{64, 64, 128}, Row{128, 64, 128}, Row{192, 64, 128},
        Row{256, 64, 128}, Row{64, 128, 128}, Row{128, 128, 128},
        Row{192, 128, 128}, Row{256, 128, 64}, Row{64, 256, 64},
        Row{128, 256, 64}, Row{192, 256, 64}, Row{256, 256, 64}}) {
    EXPECT_EQ(TmaTileKeys(r.qk, r.v), r.keys) << r.qk << " / " << r.v;
    const AttentionChoice c =
        Choose(Dims(r.qk - 64, 64, r.v, DenseMhaBody::kSm90Tma), Hopper());
    EXPECT_EQ(c.tma_tile_keys, r.keys) << r.qk << " / " << r.v;
  }
  EXPECT_EQ(Choose(Dims(64, 32, 64), Hopper()).tma_tile_keys, 0);
}

TEST(DenseMhaHeuristicsTest, RequestedBodies) {
  const auto glm = [](DenseMhaBody b) { return Dims(192, 64, 256, b); };
  EXPECT_EQ(Path(glm(DenseMhaBody::kWarp), Hopper()), "warp");
  EXPECT_EQ(Path(glm(DenseMhaBody::kWarp), NoSm90a()), "warp");
  EXPECT_EQ(Path(glm(DenseMhaBody::kSm90Pipelined), Hopper()),
            "sm90-pipelined");
  EXPECT_EQ(Path(glm(DenseMhaBody::kSm90Tma), Hopper()), "sm90-tma-64");
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
