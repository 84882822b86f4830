#include "model/deepseek_v32/model_config.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/deepseek_v32/model_config.pb.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(absl::string_view name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<int> OwnerLayers(const ModelConfig& c) {
  std::vector<int> owners;
  for (int layer = 0; layer < c.num_layers(); ++layer) {
    if (c.owns_indexer(layer)) owners.push_back(layer);
  }
  return owners;
}

TEST(PresetsTest, AllEmbeddedPresetsLoad) {
  EXPECT_THAT(PresetNames(),
              ElementsAre("deepseek-v3.2", "glm-5.1", "glm-5.2", "tiny-glm-5.1",
                          "tiny-glm-5.2", "tiny-v3.2"));
  for (const std::string& name : PresetNames()) {
    ASSERT_OK_AND_ASSIGN(ModelConfig config, LoadPreset(name));
    EXPECT_EQ(config.name(), name);
  }
}

// The embedded copy and the file under presets/ are the same preset.
TEST(PresetsTest, EmbeddedMatchesFile) {
  for (const std::string& name : PresetNames()) {
    ASSERT_OK_AND_ASSIGN(ModelConfig embedded, LoadPreset(name));
    ASSERT_OK_AND_ASSIGN(
        ModelConfig from_file,
        LoadModelConfigFile(
            absl::StrCat("model/deepseek_v32/presets/", name, ".textproto")));
    EXPECT_EQ(embedded.proto().SerializeAsString(),
              from_file.proto().SerializeAsString())
        << name;
  }
}

TEST(PresetsTest, DeepseekV32Dimensions) {
  ASSERT_OK_AND_ASSIGN(ModelConfig c, LoadPreset("deepseek-v3.2"));
  const DeepseekV32Config& p = c.proto();
  EXPECT_EQ(p.num_hidden_layers(), 61);
  EXPECT_EQ(p.hidden_size(), 7168);
  EXPECT_EQ(p.num_attention_heads(), 128);
  EXPECT_EQ(p.q_lora_rank(), 1536);
  EXPECT_EQ(p.kv_lora_rank(), 512);
  EXPECT_EQ(p.qk_nope_head_dim(), 128);
  EXPECT_EQ(p.qk_rope_head_dim(), 64);
  EXPECT_EQ(p.v_head_dim(), 128);
  EXPECT_EQ(p.indexer().index_n_heads(), 64);
  EXPECT_EQ(p.indexer().index_head_dim(), 128);
  EXPECT_EQ(c.index_topk(), 2048);
  EXPECT_EQ(p.indexer().rope_style(), INDEXER_ROPE_NEOX);
  EXPECT_EQ(c.max_position_embeddings(), 163840);
  EXPECT_EQ(c.num_mtp_layers(), 1);
  EXPECT_EQ(c.num_layers(), 62);
  EXPECT_EQ(c.num_indexer_layers(), 62);
  EXPECT_EQ(c.qk_head_dim(), 192);
  EXPECT_EQ(c.latent_cache_dim(), 576);
  EXPECT_FALSE(c.is_mtp_layer(60));
  EXPECT_TRUE(c.is_mtp_layer(61));
  EXPECT_TRUE(c.owns_indexer(61));
}

TEST(PresetsTest, Glm51Dimensions) {
  ASSERT_OK_AND_ASSIGN(ModelConfig c, LoadPreset("glm-5.1"));
  const DeepseekV32Config& p = c.proto();
  EXPECT_EQ(p.num_hidden_layers(), 78);
  EXPECT_EQ(p.hidden_size(), 6144);
  EXPECT_EQ(p.num_attention_heads(), 64);
  EXPECT_EQ(p.q_lora_rank(), 2048);
  EXPECT_EQ(p.kv_lora_rank(), 512);
  EXPECT_EQ(p.qk_nope_head_dim(), 192);
  EXPECT_EQ(p.qk_rope_head_dim(), 64);
  EXPECT_EQ(p.v_head_dim(), 256);
  EXPECT_EQ(p.indexer().index_n_heads(), 32);
  EXPECT_EQ(p.indexer().index_head_dim(), 128);
  EXPECT_EQ(c.index_topk(), 2048);
  EXPECT_EQ(p.indexer().rope_style(), INDEXER_ROPE_INTERLEAVED);
  EXPECT_EQ(c.max_position_embeddings(), 202752);
  EXPECT_EQ(c.num_layers(), 79);
  EXPECT_EQ(c.num_indexer_layers(), 79);
  EXPECT_EQ(c.qk_head_dim(), 256);
  EXPECT_EQ(c.latent_cache_dim(), 576);
  EXPECT_TRUE(c.is_mtp_layer(78));
}

TEST(PresetsTest, Glm52SharesTopkBetweenIndexerLayers) {
  ASSERT_OK_AND_ASSIGN(ModelConfig c, LoadPreset("glm-5.2"));
  EXPECT_EQ(c.num_main_layers(), 78);
  EXPECT_EQ(c.max_position_embeddings(), 1048576);
  std::vector<int> expected = {0, 1, 2};
  for (int layer = 6; layer <= 74; layer += 4) expected.push_back(layer);
  expected.push_back(78);  // the MTP layer owns one
  EXPECT_EQ(OwnerLayers(c), expected);
  EXPECT_EQ(c.num_indexer_layers(), 22);  // 21 main + MTP
  EXPECT_EQ(c.topk_source_layer(3), 2);
  EXPECT_EQ(c.topk_source_layer(5), 2);
  EXPECT_EQ(c.topk_source_layer(6), 6);
  EXPECT_EQ(c.topk_source_layer(9), 6);
  EXPECT_EQ(c.topk_source_layer(77), 74);
  EXPECT_EQ(c.topk_source_layer(78), 78);
}

// Small presets keep the real structure at CPU-friendly sizes.
TEST(PresetsTest, TinyPresetsAreSmallWithTheSameStructure) {
  for (const char* name : {"tiny-v3.2", "tiny-glm-5.1", "tiny-glm-5.2"}) {
    ASSERT_OK_AND_ASSIGN(ModelConfig c, LoadPreset(name));
    const DeepseekV32Config& p = c.proto();
    EXPECT_LE(p.num_hidden_layers(), 8) << name;
    EXPECT_GE(p.num_hidden_layers(), 4) << name;
    EXPECT_LE(p.hidden_size(), 256) << name;
    EXPECT_LE(p.num_attention_heads(), 4) << name;
    EXPECT_LE(p.indexer().index_n_heads(), 4) << name;
    EXPECT_LE(p.qk_rope_head_dim(), p.indexer().index_head_dim()) << name;
    EXPECT_LT(c.index_topk(), 2048) << name;
    EXPECT_EQ(c.num_mtp_layers(), 1) << name;
    EXPECT_TRUE(c.owns_indexer(c.num_layers() - 1)) << name;
  }
  ASSERT_OK_AND_ASSIGN(ModelConfig c, LoadPreset("tiny-glm-5.2"));
  EXPECT_EQ(OwnerLayers(c), std::vector<int>({0, 1, 2, 6, 8}));
  EXPECT_EQ(c.topk_source_layer(4), 2);
  EXPECT_EQ(c.topk_source_layer(7), 6);
}

// The numerics each model's config.json gives (vLLM reads the same fields):
// rope theta, YaRN with its softmax mscale^2 for DeepSeek-V3.2, RMSNorm eps.
TEST(PresetsTest, CarryEachModelsRopeEpsAndVocabulary) {
  ASSERT_OK_AND_ASSIGN(ModelConfig ds, LoadPreset("deepseek-v3.2"));
  EXPECT_EQ(ds.proto().rope_theta(), 10000);
  ASSERT_TRUE(ds.proto().has_rope_scaling());
  const RopeScaling& y = ds.proto().rope_scaling();
  EXPECT_EQ(y.type(), "yarn");
  EXPECT_EQ(y.factor(), 40);
  EXPECT_EQ(y.original_max_position_embeddings(), 4096);
  EXPECT_EQ(y.beta_fast(), 32);
  EXPECT_EQ(y.beta_slow(), 1);
  EXPECT_EQ(y.mscale(), 1.0);
  EXPECT_EQ(y.mscale_all_dim(), 1.0);
  EXPECT_EQ(ds.rms_norm_eps(), 1e-6);
  EXPECT_EQ(ds.proto().vocab_size(), 129280);
  // 192^-0.5 * (0.1 ln 40 + 1)^2 = 0.072169 * 1.87385.
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_DOUBLE_EQ(ds.mla_softmax_scale(), m * m / std::sqrt(192.0));
  EXPECT_NEAR(ds.mla_softmax_scale(), 0.135234, 1e-6);
  for (const char* name : {"glm-5.1", "glm-5.2"}) {
    ASSERT_OK_AND_ASSIGN(ModelConfig glm, LoadPreset(name));
    EXPECT_EQ(glm.proto().rope_theta(),
              std::string(name) == "glm-5.1" ? 1e6 : 8e6);
    EXPECT_FALSE(glm.proto().has_rope_scaling());
    EXPECT_EQ(glm.rms_norm_eps(), 1e-5);
    EXPECT_EQ(glm.proto().vocab_size(), 154880);
    EXPECT_DOUBLE_EQ(glm.mla_softmax_scale(), 1.0 / 16.0);  // 256^-0.5
  }
  for (const std::string& name : PresetNames()) {
    ASSERT_OK_AND_ASSIGN(ModelConfig c, LoadPreset(name));
    EXPECT_EQ(c.proto().mla_rope_style(), MLA_ROPE_INTERLEAVED) << name;
    EXPECT_FALSE(c.proto().indexer().hadamard_rotation()) << name;  // vLLM
  }
}

TEST(ModelConfigTest, OutOfRangeLayersAreNotLayers) {
  ASSERT_OK_AND_ASSIGN(ModelConfig c, LoadPreset("glm-5.1"));
  for (int layer : {-1, 79, 1 << 30}) {
    EXPECT_FALSE(c.is_valid_layer(layer));
    EXPECT_FALSE(c.is_mtp_layer(layer));
    EXPECT_FALSE(c.owns_indexer(layer));
    EXPECT_EQ(c.topk_source_layer(layer), -1);
  }
}

struct BadCase {
  const char* what;
  std::function<void(DeepseekV32Config&)> mutate;
  const char* field;  // expected in the message
};

class InvalidConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(InvalidConfigTest, IsRejectedNamingTheField) {
  ASSERT_OK_AND_ASSIGN(ModelConfig good, LoadPreset("glm-5.2"));
  DeepseekV32Config proto = good.proto();
  GetParam().mutate(proto);
  EXPECT_THAT(ModelConfig::FromProto(proto),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(GetParam().field)));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, InvalidConfigTest,
    ::testing::Values(
        BadCase{"empty_name", [](auto& p) { p.set_name(""); }, "name"},
        BadCase{"name_with_space", [](auto& p) { p.set_name("glm 5"); },
                "name"},
        BadCase{"zero_layers", [](auto& p) { p.set_num_hidden_layers(0); },
                "num_hidden_layers"},
        BadCase{"too_many_layers",
                [](auto& p) { p.set_num_hidden_layers(kMaxLayers + 1); },
                "num_hidden_layers"},
        BadCase{"negative_mtp",
                [](auto& p) { p.set_num_nextn_predict_layers(-1); },
                "num_nextn_predict_layers"},
        BadCase{"zero_hidden", [](auto& p) { p.set_hidden_size(0); },
                "hidden_size"},
        BadCase{"negative_heads",
                [](auto& p) { p.set_num_attention_heads(-4); },
                "num_attention_heads"},
        BadCase{"no_q_lora", [](auto& p) { p.set_q_lora_rank(0); },
                "q_lora_rank"},
        BadCase{"kv_lora_not_scale_group",
                [](auto& p) { p.set_kv_lora_rank(500); }, "kv_lora_rank"},
        BadCase{"zero_nope", [](auto& p) { p.set_qk_nope_head_dim(0); },
                "qk_nope_head_dim"},
        BadCase{"odd_rope", [](auto& p) { p.set_qk_rope_head_dim(63); },
                "qk_rope_head_dim"},
        BadCase{"rope_wider_than_indexer_head",
                [](auto& p) { p.set_qk_rope_head_dim(256); },
                "qk_rope_head_dim"},
        BadCase{"huge_dim", [](auto& p) { p.set_v_head_dim(kMaxDim + 1); },
                "v_head_dim"},
        BadCase{"zero_positions",
                [](auto& p) { p.set_max_position_embeddings(0); },
                "max_position_embeddings"},
        BadCase{
            "positions_over_int32",
            [](auto& p) { p.set_max_position_embeddings(kMaxPositions + 1); },
            "max_position_embeddings"},
        BadCase{"no_indexer", [](auto& p) { p.clear_indexer(); }, "indexer"},
        BadCase{"zero_index_heads",
                [](auto& p) { p.mutable_indexer()->set_index_n_heads(0); },
                "indexer.index_n_heads"},
        BadCase{"zero_index_head_dim",
                [](auto& p) { p.mutable_indexer()->set_index_head_dim(0); },
                "indexer.index_head_dim"},
        BadCase{"topk_zero",
                [](auto& p) { p.mutable_indexer()->set_index_topk(0); },
                "indexer.index_topk"},
        BadCase{"topk_over_positions",
                [](auto& p) { p.set_max_position_embeddings(1024); },
                "indexer.index_topk"},
        BadCase{"rope_style_unset",
                [](auto& p) {
                  p.mutable_indexer()->set_rope_style(
                      INDEXER_ROPE_STYLE_UNSPECIFIED);
                },
                "indexer.rope_style"},
        BadCase{"no_owner_layers",
                [](auto& p) { p.mutable_indexer()->clear_owner_layers(); },
                "indexer.all_layers or indexer.layer_list"},
        BadCase{"all_layers_false",
                [](auto& p) { p.mutable_indexer()->set_all_layers(false); },
                "indexer.all_layers"},
        BadCase{"empty_layer_list",
                [](auto& p) {
                  p.mutable_indexer()->mutable_layer_list()->clear_layers();
                },
                "indexer.layer_list.layers"},
        BadCase{"layer_list_not_from_zero",
                [](auto& p) {
                  p.mutable_indexer()->mutable_layer_list()->set_layers(0, 1);
                },
                "indexer.layer_list.layers[0]"},
        BadCase{"layer_out_of_range",
                [](auto& p) {
                  p.mutable_indexer()->mutable_layer_list()->add_layers(78);
                },
                "indexer.layer_list.layers[21] = 78 is out of range [0, 78)"},
        BadCase{"negative_layer",
                [](auto& p) {
                  p.mutable_indexer()->mutable_layer_list()->set_layers(3, -6);
                },
                "indexer.layer_list.layers[3]"},
        BadCase{"layer_list_not_ascending",
                [](auto& p) {
                  p.mutable_indexer()->mutable_layer_list()->set_layers(4, 6);
                },
                "indexer.layer_list.layers[4]"},
        BadCase{"no_rope_theta", [](auto& p) { p.clear_rope_theta(); },
                "rope_theta must be a finite number above 1"},
        BadCase{"nan_rope_theta", [](auto& p) { p.set_rope_theta(NAN); },
                "rope_theta"},
        BadCase{"no_eps", [](auto& p) { p.clear_rms_norm_eps(); },
                "rms_norm_eps must be a finite number in (0, 1]"},
        BadCase{"no_vocab", [](auto& p) { p.clear_vocab_size(); },
                "vocab_size"},
        BadCase{"mla_rope_unset", [](auto& p) { p.clear_mla_rope_style(); },
                "mla_rope_style"},
        BadCase{"linear_scaling",
                [](auto& p) {
                  p.mutable_rope_scaling()->set_type("linear");
                  p.mutable_rope_scaling()->set_factor(4);
                },
                "rope_scaling.type must be \"yarn\""},
        BadCase{"yarn_factor_below_one",
                [](auto& p) {
                  RopeScaling& y = *p.mutable_rope_scaling();
                  y.set_type("yarn");
                  y.set_factor(0.5);
                },
                "rope_scaling.factor"},
        BadCase{"yarn_without_original",
                [](auto& p) {
                  RopeScaling& y = *p.mutable_rope_scaling();
                  y.set_type("yarn");
                  y.set_factor(40);
                },
                "rope_scaling.original_max_position_embeddings"},
        BadCase{"yarn_without_betas",
                [](auto& p) {
                  RopeScaling& y = *p.mutable_rope_scaling();
                  y.set_type("yarn");
                  y.set_factor(40);
                  y.set_original_max_position_embeddings(4096);
                },
                "rope_scaling.beta_fast"},
        BadCase{"hadamard_not_power_of_two",
                [](auto& p) {
                  p.mutable_indexer()->set_hadamard_rotation(true);
                  p.mutable_indexer()->set_index_head_dim(96);
                },
                "indexer.hadamard_rotation needs index_head_dim a power of "
                "two"}),
    [](const auto& info) { return std::string(info.param.what); });

TEST(ModelConfigTest, ErrorsNameTheSource) {
  ASSERT_OK_AND_ASSIGN(ModelConfig good, LoadPreset("glm-5.1"));
  DeepseekV32Config proto = good.proto();
  proto.mutable_indexer()->set_index_topk(0);
  EXPECT_THAT(ModelConfig::FromProto(proto, "my.textproto"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("my.textproto: indexer.index_topk")));
  EXPECT_THAT(ModelConfig::FromProto(proto),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("glm-5.1: indexer.index_topk")));
}

TEST(ParseModelConfigTest, ReportsSyntaxErrorsWithTheirLine) {
  EXPECT_THAT(ParseModelConfig("name: \"x\"\nnum_hidden_layers: four\n", "f"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("f: not a valid DeepseekV32Config textproto: "
                                 "line 2")));
  EXPECT_THAT(
      ParseModelConfig("no_such_field: 1\n", "f"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no_such_field")));
}

TEST(ParseModelConfigTest, RejectsBothOwnerLayerForms) {
  ASSERT_OK_AND_ASSIGN(ModelConfig good, LoadPreset("glm-5.2"));
  std::string text = good.proto().DebugString();
  // Adding all_layers after layer_list sets two members of the oneof.
  const size_t pos = text.find("layer_list");
  ASSERT_NE(pos, std::string::npos);
  text.insert(pos, "all_layers: true\n");
  EXPECT_THAT(ParseModelConfig(text, "f"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("oneof")));
}

TEST(LoadPresetTest, UnknownNameListsTheKnownOnes) {
  EXPECT_THAT(LoadPreset("glm-9"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("known: deepseek-v3.2, glm-5.1, glm-5.2")));
}

TEST(LoadModelConfigTest, NameOrPath) {
  ASSERT_OK_AND_ASSIGN(ModelConfig by_name, LoadModelConfig("glm-5.2"));
  EXPECT_EQ(by_name.name(), "glm-5.2");

  // A custom preset from a file: GLM-5.1 with a smaller top-k.
  ASSERT_OK_AND_ASSIGN(ModelConfig glm, LoadPreset("glm-5.1"));
  DeepseekV32Config custom = glm.proto();
  custom.set_name("glm-5.1-topk1024");
  custom.mutable_indexer()->set_index_topk(1024);
  const std::string path = TempPath("custom.textproto");
  WriteFile(path, custom.DebugString());
  ASSERT_OK_AND_ASSIGN(ModelConfig by_path, LoadModelConfig(path));
  EXPECT_EQ(by_path.name(), "glm-5.1-topk1024");
  EXPECT_EQ(by_path.index_topk(), 1024);

  EXPECT_THAT(LoadModelConfig("glm-9"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("unknown model preset \"glm-9\"")));
  EXPECT_THAT(LoadModelConfig(TempPath("missing.textproto")),
              StatusIs(absl::StatusCode::kNotFound,
                       ::testing::AllOf(HasSubstr("model config file"),
                                        HasSubstr("cannot open"))));
}

TEST(LoadModelConfigFileTest, InvalidFileNamesThePathAndField) {
  ASSERT_OK_AND_ASSIGN(ModelConfig glm, LoadPreset("glm-5.1"));
  DeepseekV32Config bad = glm.proto();
  bad.set_qk_rope_head_dim(192);  // wider than the indexer head (128)
  const std::string path = TempPath("bad.textproto");
  WriteFile(path, bad.DebugString());
  EXPECT_THAT(LoadModelConfigFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat(path, ": qk_rope_head_dim"))));
}

TEST(LoadModelConfigFileTest, RejectsHugeFiles) {
  const std::string path = TempPath("huge.textproto");
  WriteFile(path, std::string(2 << 20, '#'));
  EXPECT_THAT(
      LoadModelConfigFile(path),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("larger than")));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
