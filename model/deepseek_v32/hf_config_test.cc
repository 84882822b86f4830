// config.json -> DeepseekV32Config: the three models' configs give their
// presets' values (so a preset and the checkpoint it names compute the same
// model), transformers' forms of the same fields, and every value the
// converter cannot honour refused with the field's name.
#include "model/deepseek_v32/hf_config.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;
using Json = nlohmann::json;

std::string ReadTestFile(const std::string& name) {
  std::ifstream in("model/deepseek_v32/testdata/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The preset's proto without the fields a checkpoint names differently.
DeepseekV32Config Comparable(DeepseekV32Config p) {
  p.clear_name();
  p.clear_hf_model();
  return p;
}

TEST(HfConfigTest, TheModelsConfigsGiveTheirPresets) {
  for (const char* name : {"deepseek-v3.2", "glm-5.1", "glm-5.2"}) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(
        HfModelConfig hf,
        ParseHfConfig(ReadTestFile(std::string(name) + ".config.json"), name,
                      "config.json"));
    ASSERT_OK_AND_ASSIGN(ModelConfig preset, LoadPreset(name));
    std::string diff;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differ.Compare(Comparable(hf.config.proto()),
                               Comparable(preset.proto())))
        << diff;
    EXPECT_EQ(hf.config.name(), name);
    EXPECT_EQ(hf.config.num_indexer_layers(), preset.num_indexer_layers());
    EXPECT_DOUBLE_EQ(hf.config.mla_softmax_scale(), preset.mla_softmax_scale());
    EXPECT_EQ(hf.quantization.fp8, std::string(name) != "glm-5.2");
    EXPECT_EQ(hf.quantization.block_rows, 128);
    EXPECT_EQ(hf.quantization.block_cols, 128);
  }
}

Json Glm51() { return Json::parse(ReadTestFile("glm-5.1.config.json")); }

absl::StatusOr<HfModelConfig> Parse(const Json& j) {
  return ParseHfConfig(j.dump(), "test", "config.json");
}

// What transformers' save_pretrained writes for the same models.
TEST(HfConfigTest, ReadsTransformersForms) {
  Json j = Glm51();
  // The resolved IndexShare list of GlmMoeDsaConfig.
  j["num_hidden_layers"] = 8;
  j["indexer_types"] = {"full",   "full",   "full", "shared",
                        "shared", "shared", "full", "shared"};
  ASSERT_OK_AND_ASSIGN(HfModelConfig a, Parse(j));
  EXPECT_THAT(a.config.proto().indexer().layer_list().layers(),
              ::testing::ElementsAre(0, 1, 2, 6));
  // The same as a pattern, and as freq / offset.
  j.erase("indexer_types");
  j["index_topk_pattern"] = "FFFSSSFS";
  ASSERT_OK_AND_ASSIGN(HfModelConfig b, Parse(j));
  EXPECT_EQ(b.config.proto().indexer().layer_list().layers_size(), 4);
  j.erase("index_topk_pattern");
  j["index_topk_freq"] = 4;
  j["index_skip_topk_offset"] = 3;
  ASSERT_OK_AND_ASSIGN(HfModelConfig c, Parse(j));
  EXPECT_THAT(c.config.proto().indexer().layer_list().layers(),
              ::testing::ElementsAre(0, 1, 2, 6));
  // DeepSeek-V3.2 with transformers v5's rope_parameters, no MTP key.
  Json d = Json::parse(ReadTestFile("deepseek-v3.2.config.json"));
  Json rope = d["rope_scaling"];
  rope.erase("type");
  rope["rope_type"] = "yarn";
  rope["rope_theta"] = 10000;
  d["rope_parameters"] = rope;
  d.erase("rope_scaling");
  d.erase("rope_theta");
  d.erase("num_nextn_predict_layers");
  ASSERT_OK_AND_ASSIGN(HfModelConfig e, Parse(d));
  EXPECT_EQ(e.config.proto().rope_scaling().factor(), 40);
  EXPECT_EQ(e.config.proto().rope_scaling().mscale_all_dim(), 1.0);
  EXPECT_EQ(e.config.num_mtp_layers(), 0);
  EXPECT_EQ(e.config.proto().indexer().rope_style(), INDEXER_ROPE_NEOX);
  // rope_interleave false (transformers' key) gives the MLA NeoX rope.
  j = Glm51();
  j["rope_interleave"] = false;
  j["indexer_rope_interleave"] = false;
  ASSERT_OK_AND_ASSIGN(HfModelConfig f, Parse(j));
  EXPECT_EQ(f.config.proto().mla_rope_style(), MLA_ROPE_NEOX);
  EXPECT_EQ(f.config.proto().indexer().rope_style(), INDEXER_ROPE_NEOX);
}

TEST(HfConfigTest, WhatCannotBeHonouredIsRefusedNamingTheField) {
  struct Case {
    const char* what;
    void (*mutate)(Json&);
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"architecture",
       [](Json& j) { j["architectures"] = {"LlamaForCausalLM"}; },
       absl::StatusCode::kInvalidArgument,
       "architectures is [\"LlamaForCausalLM\"]; supported"},
      {"missing", [](Json& j) { j.erase("q_lora_rank"); },
       absl::StatusCode::kInvalidArgument, "q_lora_rank is missing"},
      {"string", [](Json& j) { j["hidden_size"] = "6144"; },
       absl::StatusCode::kInvalidArgument,
       "hidden_size must be an integer, got \"6144\""},
      {"fraction", [](Json& j) { j["index_topk"] = 20.5; },
       absl::StatusCode::kInvalidArgument, "index_topk must be an integer"},
      {"linear rope",
       [](Json& j) {
         j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}};
       },
       absl::StatusCode::kUnimplemented,
       "rope_type \"linear\" is not supported"},
      {"yarn without original",
       [](Json& j) {
         j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
       },
       absl::StatusCode::kInvalidArgument,
       "rope_parameters.original_max_position_embeddings is missing"},
      {"mxfp4",
       [](Json& j) { j["quantization_config"]["quant_method"] = "mxfp4"; },
       absl::StatusCode::kUnimplemented,
       "quant_method \"mxfp4\" is not supported"},
      {"per-tensor fp8",
       [](Json& j) { j["quantization_config"].erase("weight_block_size"); },
       absl::StatusCode::kInvalidArgument, "weight_block_size must be"},
      {"indexer_types length",
       [](Json& j) {
         j["indexer_types"] = {"full", "shared"};
       },
       absl::StatusCode::kInvalidArgument,
       "indexer_types must be a list of 78"},
      {"shared first layer",
       [](Json& j) {
         std::string p(78, 'F');
         p[0] = 'S';
         j["index_topk_pattern"] = p;
       },
       absl::StatusCode::kInvalidArgument, "indexer.layer_list.layers[0]"},
      {"eps", [](Json& j) { j["rms_norm_eps"] = 0; },
       absl::StatusCode::kInvalidArgument, "rms_norm_eps"},
      {"interleave", [](Json& j) { j["indexer_rope_interleave"] = 1; },
       absl::StatusCode::kInvalidArgument,
       "indexer_rope_interleave must be true or false"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Json j = Glm51();
    c.mutate(j);
    EXPECT_THAT(Parse(j), StatusIs(c.code, HasSubstr(c.message)));
  }
  EXPECT_THAT(ParseHfConfig("{\"a\": ", "x", "config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config.json: not valid JSON")));
  EXPECT_THAT(ParseHfConfig("[1]", "x", "config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a JSON object")));
}

TEST(HfConfigTest, NamesAreMadePresetStyle) {
  ASSERT_OK_AND_ASSIGN(HfModelConfig a,
                       ParseHfConfig(Glm51().dump(), "GLM-5.1-FP8 (copy)",
                                     "/m/GLM-5.1-FP8/config.json"));
  EXPECT_EQ(a.config.name(), "glm-5.1-fp8--copy-");
  EXPECT_EQ(a.config.proto().hf_model(), "/m/GLM-5.1-FP8/config.json");
  EXPECT_THAT(LoadHfConfigFile("/nonexistent/config.json"),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
