// A checkpoint is a model: small Hugging Face checkpoints written here
// (config.json and safetensors shards, BF16, F32 and block-scaled FP8 with
// weight_scale_inv, the tensors an attention-only stack ignores included),
// loaded through LoadModel, run on the CPU kernels from token ids, and
// compared layer by layer with the float64 reference stack on the values the
// test itself dequantised; then every broken checkpoint refused before
// anything runs, naming the tensor and its file.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/reference/reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint/safetensors_writer.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/model_loader.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/reference_stack.h"
#include "model/deepseek_v32/tensor_parallel.h"
#include "model/deepseek_v32/tiny_hf_configs.h"
#include "nlohmann/json.hpp"
#include "platform/registry.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using checkpoint::TensorToWrite;
using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Json = nlohmann::json;
namespace ref = attention::reference;

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

// A tiny GLM-5.2: tiny-glm-5.2's dimensions, IndexShare as transformers
// saves it, one MTP layer, fp8 block-scaled projections.
Json TinyGlm52Config() {
  return Json{
      {"architectures", {"GlmMoeDsaForCausalLM"}},
      {"model_type", "glm_moe_dsa"},
      {"num_hidden_layers", 8},
      {"hidden_size", 256},
      {"num_attention_heads", 4},
      {"q_lora_rank", 128},
      {"kv_lora_rank", 128},
      {"qk_nope_head_dim", 32},
      {"qk_rope_head_dim", 32},
      {"v_head_dim", 64},
      {"max_position_embeddings", 4096},
      {"vocab_size", 300},
      {"index_n_heads", 4},
      {"index_head_dim", 64},
      {"index_topk", 64},
      {"indexer_rope_interleave", true},
      {"indexer_types",
       {"full", "full", "full", "shared", "shared", "shared", "full",
        "shared"}},
      {"num_nextn_predict_layers", 1},
      {"rms_norm_eps", 1e-5},
      {"rope_parameters", {{"rope_theta", 8000000}, {"rope_type", "default"}}},
      {"quantization_config",
       {{"quant_method", "fp8"},
        {"fmt", "e4m3"},
        {"weight_block_size", {128, 128}},
        {"activation_scheme", "dynamic"}}},
      {"intermediate_size", 512},
      {"first_k_dense_replace", 8},
  };
}

// A tiny DeepSeek-V3.2 with YaRN (softmax mscale^2), bf16 and f32 weights.
Json TinyDeepseekConfig() { return TinyDeepseekV32YarnHfConfig<Json>(); }

struct Written {
  std::vector<LayerWeights> weights;  // what the loader must hand the model
  // What a model with fp8 weights must hold: the fp8 products' codes times
  // their block scales (the checkpoint's, or the bf16 weights' quantised per
  // 128 x 128 block), the rest as `weights`.
  std::vector<LayerWeights> fp8_weights;
  bool fp8 = false;  // the checkpoint stores fp8 matrices
  std::vector<float> embed, mtp_embed;
  std::map<std::string, std::string> file_of;  // tensor -> shard
};

float Bf16(float v) {
  return static_cast<float>(ref::Bf16Value(ref::Bf16Nearest(v)));
}

// A matrix as F8_E4M3 codes and F32 block scales (amax / 448 per 128x128
// block, the way DeepSeek's checkpoints store them); `dequantised` receives
// what the loader must compute for bf16 weights, bf16(code * scale) in
// float32, and `exact` code * scale in float32 (what fp8 weights hold).
void QuantizeFp8(const std::vector<float>& w, int64_t rows, int64_t cols,
                 std::vector<uint8_t>* codes, std::vector<float>* scales,
                 std::vector<float>* dequantised, std::vector<float>* exact) {
  const int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
  scales->assign(br * bc, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float& s = (*scales)[(r / 128) * bc + c / 128];
      s = std::max(s, std::fabs(w[r * cols + c]));
    }
  }
  for (float& s : *scales) s = std::max(s, 1e-6f) / 448.0f;
  codes->resize(w.size());
  dequantised->resize(w.size());
  exact->resize(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float s = (*scales)[(r / 128) * bc + c / 128];
      const uint8_t code =
          ref::Fp8Nearest(w[r * cols + c] / s, ref::Fp8Kind::kE4m3fn);
      (*codes)[r * cols + c] = code;
      const float v =
          static_cast<float>(ref::Fp8Value(code, ref::Fp8Kind::kE4m3fn)) * s;
      (*dequantised)[r * cols + c] = Bf16(v);
      (*exact)[r * cols + c] = v;
    }
  }
}

std::string HfName(int layer, const WeightSpec& spec) {
  const std::string n = spec.hf_name;
  if (n.rfind("model.", 0) == 0) return n;
  return absl::StrCat("model.layers.", layer, ".", n);
}

// Writes config.json and the weights in `shards` files (with an index when
// more than one). fp8: the projections an FP8 checkpoint quantises
// (WeightSpec::quantized: not weights_proj, not eh_proj) as F8_E4M3; else
// projections BF16 and norms F32.
Written WriteCheckpoint(const std::string& dir, const Json& config_json,
                        bool fp8, int shards, uint64_t seed) {
  EXPECT_THAT(
      checkpoint::WriteFileBytes(dir + "/config.json", config_json.dump(2)),
      IsOk());
  auto hf = ParseHfConfig(config_json.dump(), "t", "config.json");
  EXPECT_TRUE(hf.ok()) << hf.status();
  const ModelConfig& config = hf->config;
  const int64_t hidden = config.proto().hidden_size();
  const int64_t vocab = config.proto().vocab_size();
  Written out;
  out.fp8 = fp8;
  std::vector<TensorToWrite> tensors;
  for (int l = 0; l < config.num_layers(); ++l) {
    LayerWeights w = LayerWeights::Random(config, l, seed);
    LayerWeights fp8_w = w;
    for (const WeightSpec& spec : LayerWeightSpecs(config, l)) {
      std::vector<float>& v = w.tensor(spec.id);
      const std::string name = HfName(l, spec);
      const std::vector<int64_t> shape =
          spec.is_vector ? std::vector<int64_t>{spec.rows}
                         : std::vector<int64_t>{spec.rows, spec.cols};
      std::vector<uint8_t> codes;
      std::vector<float> scales, dq, exact;
      if (fp8 && spec.quantized) {
        QuantizeFp8(v, spec.rows, spec.cols, &codes, &scales, &dq, &exact);
        tensors.push_back({name, "F8_E4M3", shape, checkpoint::U8Bytes(codes)});
        std::string scale_name = name.substr(0, name.size() - 7);
        tensors.push_back({scale_name + ".weight_scale_inv",
                           "F32",
                           {(spec.rows + 127) / 128, (spec.cols + 127) / 128},
                           checkpoint::F32Bytes(scales)});
        v = dq;
        fp8_w.tensor(spec.id) = spec.fp8_product ? exact : dq;
      } else if (spec.is_vector || spec.id == WeightId::kIndexerWeightsProj) {
        // Norms and weights_proj as F32 (transformers keeps weights_proj in
        // fp32); the model rounds them to bf16, which they already are.
        tensors.push_back({name, "F32", shape, checkpoint::F32Bytes(v)});
      } else {
        tensors.push_back({name, "BF16", shape, checkpoint::Bf16Bytes(v)});
        if (spec.fp8_product) {
          // A bf16 matrix that fp8 weights quantise at load.
          QuantizeFp8(v, spec.rows, spec.cols, &codes, &scales, &dq, &exact);
          fp8_w.tensor(spec.id) = exact;
        }
      }
    }
    out.weights.push_back(std::move(w));
    out.fp8_weights.push_back(std::move(fp8_w));
    // What an attention-only stack never reads: the MLP, and (GLM-5.2) the
    // indexer of a layer that shares another's top-k, shipped with a shape
    // that would be refused if it were read.
    tensors.push_back(
        {absl::StrCat("model.layers.", l, ".mlp.gate_proj.weight"),
         "BF16",
         {3, 5},
         std::string(30, '\0')});
    tensors.push_back(
        {absl::StrCat("model.layers.", l, ".post_attention_layernorm.weight"),
         "BF16",
         {hidden},
         checkpoint::Bf16Bytes(std::vector<float>(hidden, 1))});
    if (!config.owns_indexer(l)) {
      tensors.push_back(
          {absl::StrCat("model.layers.", l, ".self_attn.indexer.wk.weight"),
           "BF16",
           {7},
           std::string(14, '\0')});
    }
  }
  auto table = [&](uint64_t s) {
    std::vector<float> t(vocab * hidden);
    for (int64_t i = 0; i < vocab * hidden; ++i) {
      t[i] = Bf16(std::sin(0.001f * i * (s + 1)) * 1.5f);
    }
    return t;
  };
  out.embed = table(seed);
  tensors.push_back({"model.embed_tokens.weight",
                     "BF16",
                     {vocab, hidden},
                     checkpoint::Bf16Bytes(out.embed)});
  if (config.num_mtp_layers() > 0) {
    out.mtp_embed = table(seed + 7);
    tensors.push_back({absl::StrCat("model.layers.", config.num_main_layers(),
                                    ".embed_tokens.weight"),
                       "BF16",
                       {vocab, hidden},
                       checkpoint::Bf16Bytes(out.mtp_embed)});
  }
  tensors.push_back({"lm_head.weight",
                     "BF16",
                     {vocab, hidden},
                     checkpoint::Bf16Bytes(out.embed)});
  if (shards == 1) {
    EXPECT_THAT(
        checkpoint::WriteFileBytes(dir + "/model.safetensors",
                                   checkpoint::SafetensorsBytes(tensors)),
        IsOk());
    for (const auto& t : tensors) out.file_of[t.name] = "model.safetensors";
    return out;
  }
  std::vector<std::vector<TensorToWrite>> parts(shards);
  for (size_t i = 0; i < tensors.size(); ++i) {
    parts[i * shards / tensors.size()].push_back(tensors[i]);
  }
  for (int s = 0; s < shards; ++s) {
    const std::string file =
        absl::StrCat("model-", s + 1, "-of-", shards, ".safetensors");
    EXPECT_THAT(checkpoint::WriteFileBytes(
                    dir + "/" + file, checkpoint::SafetensorsBytes(parts[s])),
                IsOk());
    for (const auto& t : parts[s]) out.file_of[t.name] = file;
  }
  EXPECT_THAT(checkpoint::WriteFileBytes(dir + "/model.safetensors.index.json",
                                         checkpoint::IndexJson(out.file_of)),
              IsOk());
  return out;
}

TensorToWrite& FindTensor(std::vector<TensorToWrite>& tensors,
                          const std::string& name) {
  for (TensorToWrite& t : tensors) {
    if (t.name == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return tensors.front();
}

double RelativeError(const std::vector<float>& a,
                     const std::vector<double>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

class CheckpointModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    platform::Registry& registry = platform::Registry::Global();
    auto cpu = registry.GetPlatform("cpu");
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    platform_.emplace(*cpu);
    auto kernels = AttentionKernels::Load(registry, "cpu");
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    kernels_ = *kernels;
    auto caps = cpu->Capabilities();
    ASSERT_TRUE(caps.ok());
    caps_ = *caps;
  }

  // Loads `dir`, runs `ids` (one request) and compares every layer's hidden
  // states with the reference on `written`'s weights. With fp8 weights the
  // fp8 products hold the checkpoint's codes and scales (or the bf16
  // weights' quantised at load) and the step is within the activations' fp8
  // rounding of the reference (model_runner_test's kFp8WeightsTolerance).
  void RunAndCompare(
      const std::string& dir, const Written& written, int64_t tokens,
      attention::DType weight_dtype = attention::DType::kBFloat16) {
    const bool fp8_weights = weight_dtype == attention::DType::kFloat8E4m3fn;
    const std::vector<LayerWeights>& expected =
        fp8_weights ? written.fp8_weights : written.weights;
    ASSERT_OK_AND_ASSIGN(LoadedModel loaded, LoadModel(dir));
    EXPECT_EQ(loaded.kind(), ModelSourceKind::kCheckpoint);
    EXPECT_TRUE(loaded.has_checkpoint_weights());
    // What prefill_bench's --weights defaults to.
    EXPECT_EQ(loaded.holds_fp8_weights(), written.fp8);
    std::printf("[ loaded ] %s\n", loaded.description().c_str());
    const ModelConfig& config = loaded.config();
    const int64_t hidden = config.proto().hidden_size();
    const int64_t vocab = config.proto().vocab_size();
    std::vector<int64_t> ids(tokens), next(tokens);
    for (int64_t t = 0; t < tokens; ++t) ids[t] = (t * 37 + 11) % vocab;
    for (int64_t t = 0; t < tokens; ++t) {
      next[t] = t + 1 < tokens ? ids[t + 1] : 5;
    }
    std::vector<float> x(tokens * hidden), e(tokens * hidden);
    ASSERT_THAT(loaded.Embed(ids, false, 0, x.data()), IsOk());
    ASSERT_THAT(loaded.Embed(next, true, 0, e.data()), IsOk());
    // The embedding rows are the table's.
    for (int64_t d = 0; d < hidden; ++d) {
      ASSERT_EQ(x[3 * hidden + d], written.embed[ids[3] * hidden + d]);
      if (!written.mtp_embed.empty()) {
        ASSERT_EQ(e[3 * hidden + d], written.mtp_embed[next[3] * hidden + d]);
      }
    }
    auto planner = LayerPlanner::Create(config, caps_, {});
    ASSERT_TRUE(planner.ok()) << planner.status();
    RuntimeOptions options;
    options.block_size = 16;
    options.num_blocks = 32;
    options.max_model_len = 512;
    options.max_num_batched_tokens = 256;
    options.weight_dtype = weight_dtype;
    int64_t last_done = 0, total = 0;
    ASSERT_OK_AND_ASSIGN(
        auto model,
        DeepseekV32Model::Create(std::move(*planner), *platform_, kernels_,
                                 options, loaded.weight_source(), /*seed=*/0,
                                 [&](int64_t done, int64_t all) {
                                   EXPECT_GT(done, last_done);
                                   last_done = done;
                                   total = all;
                                 }));
    EXPECT_EQ(last_done, total);
    if (fp8_weights) {
      // A byte per element of the fp8 products and their block scales.
      EXPECT_LT(total, loaded.checkpoint_weights()->model_bytes());
    } else {
      EXPECT_EQ(total, loaded.checkpoint_weights()->model_bytes());
    }
    // The device holds exactly the values the test dequantised (or kept as
    // codes and scales).
    for (int l : {0, config.num_layers() - 1}) {
      for (const WeightSpec& spec : LayerWeightSpecs(config, l)) {
        ASSERT_OK_AND_ASSIGN(std::vector<float> got,
                             model->ReadWeight(l, spec.id));
        ASSERT_EQ(got, expected[l].tensor(spec.id))
            << "layer " << l << " " << spec.name;
      }
    }
    StepOptions capture;
    capture.capture_hidden_states = true;
    ASSERT_OK_AND_ASSIGN(StepOutput out,
                         model->Step({}, {{1, 0, tokens}}, x, e, capture));
    const ReferenceOutput reference = ReferenceForward(
        config, expected, x, tokens, attention::DType::kBFloat16, e);
    ASSERT_EQ(out.hidden_states.size(), reference.layer_hidden.size());
    for (size_t l = 0; l < reference.layer_hidden.size(); ++l) {
      const double err =
          RelativeError(out.hidden_states[l], reference.layer_hidden[l]);
      std::printf("[ reference ] %s layer %zu: relative error %.3g\n",
                  config.name().c_str(), l, err);
      EXPECT_LT(err, fp8_weights ? 0.1 : 2e-3) << "layer " << l;
      EXPECT_GT(err, fp8_weights ? 1e-3 : 0.0);
    }
    EXPECT_EQ(out.hidden, out.hidden_states[config.num_main_layers() - 1]);
    EXPECT_EQ(out.mtp_hidden, out.hidden_states.back());
  }

  std::optional<platform::Platform> platform_;
  AttentionKernels kernels_;
  platform::PlatformCapabilities caps_;
};

TEST_F(CheckpointModelTest, ShardedFp8Glm52MatchesTheReference) {
  const std::string dir = FreshDir("glm52_fp8");
  const Written w = WriteCheckpoint(dir, TinyGlm52Config(), /*fp8=*/true,
                                    /*shards=*/3, /*seed=*/5);
  RunAndCompare(dir, w, 48);
}

// The same FP8 checkpoint with fp8 weights: its codes and weight_scale_inv
// go to the device as stored and the projections run as W8A8 products.
TEST_F(CheckpointModelTest, Fp8CheckpointKeepsItsCodesAndScalesAsFp8Weights) {
  const std::string dir = FreshDir("glm52_fp8_weights");
  const Written w = WriteCheckpoint(dir, TinyGlm52Config(), /*fp8=*/true,
                                    /*shards=*/2, /*seed=*/9);
  RunAndCompare(dir, w, 48, attention::DType::kFloat8E4m3fn);
}

// A bf16 checkpoint with fp8 weights: its projections are quantised per
// 128 x 128 block at load, as an FP8 checkpoint would hold them.
TEST_F(CheckpointModelTest, Bf16CheckpointIsQuantisedAtLoadForFp8Weights) {
  const std::string dir = FreshDir("dsv32_bf16_fp8_weights");
  const Written w = WriteCheckpoint(dir, TinyDeepseekConfig(), /*fp8=*/false,
                                    /*shards=*/1, /*seed=*/4);
  RunAndCompare(dir, w, 40, attention::DType::kFloat8E4m3fn);
}

// An FP8 checkpoint read by tensor-parallel ranks with fp8 weights: where a
// rank's window of q_b_proj / o_proj is whole 128x128 blocks (2 ranks of
// the tiny model: 128 rows / columns each) the rank holds the checkpoint's
// codes and scales as stored, i.e. exactly the window of what one rank
// holds; where it is not (4 ranks: 64) the window is read as bf16 and
// quantised as the rank's own blocks, within e4m3's rounding of the
// dequantised checkpoint. The replicated projections are the whole model's.
// A weight source that forwards to another and notes which tensors were
// read as fp8 codes and which as bf16.
class ReadNotingSource : public WeightSource {
 public:
  explicit ReadNotingSource(const WeightSource& inner) : inner_(inner) {}
  absl::Status ReadBf16(int layer, const WeightSpec& spec, int64_t begin,
                        int64_t count, uint16_t* out) const override {
    bf16_.insert(spec.id);
    return inner_.ReadBf16(layer, spec, begin, count, out);
  }
  bool HoldsFp8Blocks(int layer, const WeightSpec& spec) const override {
    return inner_.HoldsFp8Blocks(layer, spec);
  }
  absl::Status ReadFp8(int layer, const WeightSpec& spec, int64_t begin,
                       int64_t count, uint8_t* out) const override {
    fp8_.insert(spec.id);
    return inner_.ReadFp8(layer, spec, begin, count, out);
  }
  absl::Status ReadFp8Scales(int layer, const WeightSpec& spec,
                             float* out) const override {
    return inner_.ReadFp8Scales(layer, spec, out);
  }
  bool ReadAsFp8(WeightId id) const { return fp8_.count(id) > 0; }
  bool ReadAsBf16(WeightId id) const { return bf16_.count(id) > 0; }

 private:
  const WeightSource& inner_;
  mutable std::set<WeightId> fp8_, bf16_;
};

TEST_F(CheckpointModelTest, Fp8CheckpointOnTensorParallelRanks) {
  const std::string dir = FreshDir("glm52_fp8_tp");
  const Written w = WriteCheckpoint(dir, TinyGlm52Config(), /*fp8=*/true,
                                    /*shards=*/2, /*seed=*/3);
  ASSERT_OK_AND_ASSIGN(LoadedModel loaded, LoadModel(dir));
  const ModelConfig& config = loaded.config();
  RuntimeOptions options;
  options.block_size = 16;
  options.num_blocks = 8;
  options.max_model_len = 128;
  options.max_num_batched_tokens = 64;
  options.weight_dtype = attention::DType::kFloat8E4m3fn;
  const int l = 0;
  for (int n : {2, 4}) {
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(absl::StrCat(n, " ranks, rank ", r));
      auto planner = LayerPlanner::Create(config, caps_, {});
      ASSERT_TRUE(planner.ok()) << planner.status();
      RuntimeOptions o = options;
      o.tensor_parallel = {n, r};
      const ReadNotingSource source(*loaded.weight_source());
      ASSERT_OK_AND_ASSIGN(auto model, DeepseekV32Model::Create(
                                           std::move(*planner), *platform_,
                                           kernels_, o, &source, /*seed=*/0));
      ASSERT_OK_AND_ASSIGN(ModelConfig rank_config,
                           RankConfig(config, o.tensor_parallel));
      for (const WeightSpec& spec : LayerWeightSpecs(rank_config, l)) {
        if (!spec.fp8_product) continue;
        SCOPED_TRACE(spec.name);
        ASSERT_OK_AND_ASSIGN(std::vector<float> got,
                             model->ReadWeight(l, spec.id));
        const std::vector<float>& whole = w.fp8_weights[l].tensor(spec.id);
        const RankWindow win = RankWindowOf(spec, o.tensor_parallel);
        const bool as_stored =
            ShardOf(spec.id) == WeightShard::kReplicated || n == 2;
        EXPECT_EQ(source.ReadAsFp8(spec.id), as_stored);
        EXPECT_EQ(source.ReadAsBf16(spec.id), !as_stored);
        double amax = 0;
        for (float v : whole) amax = std::max(amax, std::abs(double{v}));
        for (int64_t i = 0; i < win.rows; ++i) {
          for (int64_t j = 0; j < win.cols; ++j) {
            const float want = whole[win.first + i * win.row_stride + j];
            const float have = got[i * win.cols + j];
            if (as_stored) {
              ASSERT_EQ(have, want) << i << ", " << j;
            } else {
              ASSERT_LE(std::abs(have - want),
                        0x1p-3 * std::abs(want) + 0x1p-9 * amax / 448)
                  << i << ", " << j;
            }
          }
        }
      }
    }
  }
}

TEST_F(CheckpointModelTest, OneFileDeepseekWithYarnMatchesTheReference) {
  const std::string dir = FreshDir("dsv32_bf16");
  const Written w = WriteCheckpoint(dir, TinyDeepseekConfig(), /*fp8=*/false,
                                    /*shards=*/1, /*seed=*/9);
  RunAndCompare(dir, w, 40);
}

// A config.json alone is that model with random weights; the plan tool's
// view opens no weights.
TEST_F(CheckpointModelTest, AConfigAloneOrAConfigViewOpensNoWeights) {
  const std::string dir = FreshDir("config_only");
  ASSERT_THAT(checkpoint::WriteFileBytes(dir + "/config.json",
                                         TinyGlm52Config().dump()),
              IsOk());
  for (const std::string& spec : {dir, dir + "/config.json"}) {
    ASSERT_OK_AND_ASSIGN(LoadedModel m, LoadModel(spec));
    EXPECT_EQ(m.kind(), ModelSourceKind::kConfigJson);
    EXPECT_FALSE(m.has_checkpoint_weights());
    EXPECT_THAT(m.description(), HasSubstr("random weights"));
    EXPECT_EQ(m.config().num_indexer_layers(), 5);
    EXPECT_EQ(m.config().name(), "config_only");
  }
  const std::string full = FreshDir("config_view");
  WriteCheckpoint(full, TinyGlm52Config(), true, 1, 1);
  // Broken weights do not matter to a configuration-only load.
  ASSERT_THAT(checkpoint::WriteFileBytes(full + "/model.safetensors", "junk"),
              IsOk());
  LoadModelOptions config_only;
  config_only.open_weights = false;
  ASSERT_OK_AND_ASSIGN(LoadedModel v, LoadModel(full, config_only));
  EXPECT_EQ(v.kind(), ModelSourceKind::kCheckpoint);
  EXPECT_FALSE(v.has_checkpoint_weights());
  EXPECT_THAT(LoadModel(full), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("too short")));
}

TEST_F(CheckpointModelTest, PresetsTextprotosAndUnknownNames) {
  ASSERT_OK_AND_ASSIGN(LoadedModel p, LoadModel("tiny-v3.2"));
  EXPECT_EQ(p.kind(), ModelSourceKind::kPreset);
  EXPECT_EQ(p.description(), "preset tiny-v3.2 (random weights)");
  LoadModelOptions hadamard;
  hadamard.indexer_hadamard_rotation = true;
  ASSERT_OK_AND_ASSIGN(LoadedModel h, LoadModel("tiny-v3.2", hadamard));
  EXPECT_TRUE(h.config().proto().indexer().hadamard_rotation());
  ASSERT_OK_AND_ASSIGN(
      LoadedModel t, LoadModel("model/deepseek_v32/presets/glm-5.1.textproto"));
  EXPECT_EQ(t.kind(), ModelSourceKind::kTextproto);
  EXPECT_EQ(t.config().name(), "glm-5.1");
  EXPECT_THAT(LoadModel("glm-9"), StatusIs(absl::StatusCode::kNotFound,
                                           HasSubstr("known: deepseek-v3.2")));
  EXPECT_THAT(LoadModel("/nonexistent/ckpt"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no such file or directory")));
  EXPECT_THAT(LoadModel(FreshDir("empty_dir")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no config.json")));
  // Random embeddings without a checkpoint: deterministic, in range.
  std::vector<float> a(256), b(256);
  ASSERT_THAT(p.Embed({7}, false, 3, a.data()), IsOk());
  ASSERT_THAT(p.Embed({7}, false, 3, b.data()), IsOk());
  EXPECT_EQ(a, b);
  EXPECT_THAT(p.Embed({1024}, false, 3, a.data()),
              StatusIs(absl::StatusCode::kOutOfRange));
}

// Every broken checkpoint: refused by LoadModel, naming the tensor and the
// file, before any model exists.
TEST_F(CheckpointModelTest, BrokenCheckpointsAreRefusedNamingTensorAndFile) {
  struct Case {
    const char* what;
    // Changes the tensors before they are written.
    void (*mutate)(std::vector<TensorToWrite>&);
    const char* message;
    bool names_file;
  };
  const Case cases[] = {
      {"missing",
       [](std::vector<TensorToWrite>& ts) {
         ts.erase(std::remove_if(ts.begin(), ts.end(),
                                 [](const TensorToWrite& t) {
                                   return t.name ==
                                          "model.layers.2.self_attn.q_b_proj."
                                          "weight";
                                 }),
                  ts.end());
       },
       "no tensor model.layers.2.self_attn.q_b_proj.weight (layer 2's "
       "q_b_proj",
       false},
      {"shape",
       [](std::vector<TensorToWrite>& ts) {
         TensorToWrite& t =
             FindTensor(ts, "model.layers.1.self_attn.kv_a_layernorm.weight");
         t.shape = {64};
         t.bytes = t.bytes.substr(0, 64 * 4);
       },
       "tensor model.layers.1.self_attn.kv_a_layernorm.weight in ", true},
      {"dtype",
       [](std::vector<TensorToWrite>& ts) {
         FindTensor(ts, "model.layers.0.input_layernorm.weight").dtype = "I32";
       },
       "has dtype I32, expected BF16, F16, F32 or F8_E4M3", true},
      {"fp8 without scales",
       [](std::vector<TensorToWrite>& ts) {
         FindTensor(ts, "model.layers.3.self_attn.o_proj.weight_scale_inv")
             .name = "model.layers.3.self_attn.o_proj.weight_scales";
       },
       "is F8_E4M3 without its scales "
       "model.layers.3.self_attn.o_proj.weight_scale_inv",
       true},
      {"scales of the wrong shape",
       [](std::vector<TensorToWrite>& ts) {
         // q_b_proj [256, 128]: [2, 1] blocks, given as [1, 2].
         TensorToWrite& t = FindTensor(
             ts, "model.layers.8.self_attn.q_b_proj.weight_scale_inv");
         t.shape = {1, 2};
       },
       "model.layers.8.self_attn.q_b_proj.weight_scale_inv in ", true},
      {"embedding",
       [](std::vector<TensorToWrite>& ts) {
         FindTensor(ts, "model.embed_tokens.weight").name =
             "model.embed.weight";
       },
       "no tensor model.embed_tokens.weight", false},
      {"final norm for the MTP layer",
       [](std::vector<TensorToWrite>& ts) {
         FindTensor(ts, "model.norm.weight").name = "model.final_norm.weight";
       },
       "no tensor model.norm.weight (layer 8's final_norm", false},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string dir = FreshDir(absl::StrCat("broken_", n++));
    Json config = TinyGlm52Config();
    ASSERT_THAT(checkpoint::WriteFileBytes(dir + "/config.json", config.dump()),
                IsOk());
    // The tensors of a good checkpoint, changed, in one file.
    const std::string good = FreshDir(absl::StrCat("broken_src_", n));
    WriteCheckpoint(good, config, true, 1, 2);
    auto file = checkpoint::SafetensorsFile::Open(good + "/model.safetensors");
    ASSERT_TRUE(file.ok()) << file.status();
    std::vector<TensorToWrite> tensors;
    for (const auto& info : (*file)->tensors()) {
      tensors.push_back(
          {info.name, checkpoint::TensorDTypeName(info.dtype), info.shape,
           std::string(reinterpret_cast<const char*>((*file)->data(info)),
                       info.bytes())});
    }
    c.mutate(tensors);
    const std::string path = dir + "/model.safetensors";
    ASSERT_THAT(
        checkpoint::WriteFileBytes(path, checkpoint::SafetensorsBytes(tensors)),
        IsOk());
    EXPECT_THAT(LoadModel(dir),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(c.message),
                               HasSubstr(c.names_file ? path : dir))));
  }
  // Without an fp8 quantization_config, fp8 tensors are an error, not
  // bytes read as something else.
  {
    const std::string dir = FreshDir("fp8_undeclared");
    WriteCheckpoint(dir, TinyGlm52Config(), true, 1, 3);
    Json config = TinyGlm52Config();
    config.erase("quantization_config");
    ASSERT_THAT(checkpoint::WriteFileBytes(dir + "/config.json", config.dump()),
                IsOk());
    EXPECT_THAT(
        LoadModel(dir),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 HasSubstr("config.json has no fp8 quantization_config")));
  }
  // A truncated shard: its last tensor runs past the end.
  {
    const std::string dir = FreshDir("truncated_shard");
    WriteCheckpoint(dir, TinyGlm52Config(), true, 2, 4);
    const std::string shard = dir + "/model-2-of-2.safetensors";
    struct stat st;
    ASSERT_EQ(::stat(shard.c_str(), &st), 0);
    ASSERT_EQ(::truncate(shard.c_str(), st.st_size - 100), 0);
    EXPECT_THAT(LoadModel(dir),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(shard), HasSubstr("run past the end"),
                               HasSubstr("tensor "))));
  }
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
