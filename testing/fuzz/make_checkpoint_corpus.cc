// Writes checkpoint_fuzzer's seed corpus (checkpoint_input.h) into a
// directory:
//
//   bazel run //testing/fuzz:make_checkpoint_corpus -- \
//       $PWD/testing/fuzz/corpus/checkpoint_fuzzer \
//       $PWD/model/deepseek_v32/testdata/*.config.json
//
// The seeds: real-shaped safetensors headers (layer 0, the MTP layer and the
// embeddings of each config.json given, with the dtypes and fp8 scales its
// published checkpoint has), the lying headers and broken files
// model/checkpoint/checkpoint_test.cc refuses, the real config.json files and
// the checkpoint tests' tiny ones, and tiny whole checkpoint directories
// (one file, sharded with an index, fp8 with scales of 2 x 2 and of
// 128 x 128 blocks, a config.json alone, one tensor missing) that load as
// models.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/checkpoint/safetensors_writer.h"
#include "model/deepseek_v32/hf_config.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/tiny_hf_configs.h"
#include "nlohmann/json.hpp"
#include "platform/plugin_file.h"
#include "testing/fuzz/checkpoint_input.h"

namespace dsa::fuzz::checkpoint {
namespace {

using Json = nlohmann::ordered_json;
using model::checkpoint::TensorToWrite;
namespace ds = model::deepseek_v32;

std::string g_dir;
int g_written = 0;

void Seed(const std::string& name, Mode mode, const std::string& bytes) {
  const std::string path = g_dir + "/" + name;
  const absl::Status s =
      model::checkpoint::WriteFileBytes(path, ModeChar(mode) + bytes);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(1);
  }
  ++g_written;
}

std::string HfName(int layer, const ds::WeightSpec& spec) {
  const std::string n = spec.hf_name;
  if (n.rfind("model.", 0) == 0) return n;
  return absl::StrCat("model.layers.", layer, ".", n);
}

// A tensor of a checkpoint: its name, dtype and shape.
struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  int64_t bytes() const {
    int64_t n = dtype == "F32" ? 4 : dtype == "F8_E4M3" ? 1 : 2;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// The tensors of `layers` of a model as its checkpoint stores them: the
// quantised projections (WeightSpec::quantized) as fp8 matrices with their
// block scales when the config says so, norms and the indexer's weights_proj
// in F32 (as transformers keeps them), the rest BF16 (eh_proj among them);
// then the embeddings and the final norm.
std::vector<Entry> CheckpointEntries(const ds::HfModelConfig& hf,
                                     const std::vector<int>& layers) {
  const ds::ModelConfig& config = hf.config;
  std::vector<Entry> out;
  for (int l : layers) {
    for (const ds::WeightSpec& spec : ds::LayerWeightSpecs(config, l)) {
      const std::string name = HfName(l, spec);
      const std::vector<int64_t> shape =
          spec.is_vector ? std::vector<int64_t>{spec.rows}
                         : std::vector<int64_t>{spec.rows, spec.cols};
      const bool f32 =
          spec.is_vector || spec.id == ds::WeightId::kIndexerWeightsProj;
      if (hf.quantization.fp8 && spec.quantized) {
        out.push_back({name, "F8_E4M3", shape});
        const int64_t br = hf.quantization.block_rows;
        const int64_t bc = hf.quantization.block_cols;
        out.push_back({name.substr(0, name.size() - 7) + ".weight_scale_inv",
                       "F32",
                       {(spec.rows + br - 1) / br, (spec.cols + bc - 1) / bc}});
      } else {
        out.push_back({name, f32 ? "F32" : "BF16", shape});
      }
    }
  }
  const int64_t vocab = config.proto().vocab_size();
  const int64_t hidden = config.proto().hidden_size();
  out.push_back({"model.embed_tokens.weight", "BF16", {vocab, hidden}});
  if (config.num_mtp_layers() > 0) {
    out.push_back({absl::StrCat("model.layers.", config.num_main_layers(),
                                ".embed_tokens.weight"),
                   "BF16",
                   {vocab, hidden}});
  }
  return out;
}

// A header for `entries` packed in order; *data_bytes gets their total.
std::string Header(const std::vector<Entry>& entries, int64_t* data_bytes) {
  Json header;
  header["__metadata__"] = {{"format", "pt"}};
  int64_t offset = 0;
  for (const Entry& e : entries) {
    header[e.name] = {{"dtype", e.dtype},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.bytes()}}};
    offset += e.bytes();
  }
  *data_bytes = offset;
  return header.dump();
}

// A whole file of `entries`, every byte `fill` (a valid bf16, f32 and fp8
// value alike for small fills).
std::string FileOf(const std::vector<Entry>& entries) {
  std::vector<TensorToWrite> tensors;
  for (const Entry& e : entries) {
    // 0x3c: fp8 e4m3fn 1.5, and bf16 0x3c3c / f32 0x3c3c3c3c ~ 0.0115.
    tensors.push_back({e.name, e.dtype, e.shape,
                       std::string(static_cast<size_t>(e.bytes()), '\x3c')});
  }
  return model::checkpoint::SafetensorsBytes(tensors);
}

// --- '0' and '1': headers and files.

void RealShapedHeaders(const std::vector<std::string>& config_paths) {
  for (const std::string& path : config_paths) {
    std::string text, error;
    if (!platform::ReadRegularFile(path, ds::kMaxConfigJsonBytes, &text,
                                   &error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      std::exit(1);
    }
    const auto hf = ds::ParseHfConfig(text, "real", path);
    if (!hf.ok()) {
      std::fprintf(stderr, "%s\n", hf.status().ToString().c_str());
      std::exit(1);
    }
    std::string base = path.substr(path.rfind('/') + 1);
    base = base.substr(0, base.find(".config.json"));
    // Layer 0, an indexer-sharing layer where the model has one, and the MTP
    // layer.
    std::vector<int> layers = {0};
    for (int l = 1; l < hf->config.num_main_layers(); ++l) {
      if (!hf->config.owns_indexer(l)) {
        layers.push_back(l);
        break;
      }
    }
    if (hf->config.num_mtp_layers() > 0) {
      layers.push_back(hf->config.num_main_layers());
    }
    int64_t data_bytes = 0;
    const std::string header =
        Header(CheckpointEntries(*hf, layers), &data_bytes);
    Seed("header_" + base, kHeader, absl::StrCat(data_bytes, "\n", header));
    // The same header over one byte too few of data: a truncated download.
    Seed("header_" + base + "_truncated", kHeader,
         absl::StrCat(data_bytes - 1, "\n", header));
    Seed("config_" + base, kConfig, text);
  }
}

// The headers model/checkpoint/checkpoint_test.cc refuses, over 64 bytes.
void LyingHeaders() {
  const std::map<std::string, std::string> cases = {
      {"not_json", "{\"a\": "},
      {"not_object", "[1, 2]"},
      {"twice",
       R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
          "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})"},
      {"dtype",
       R"({"w": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}})"},
      {"no_shape", R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})"},
      {"negative_dim",
       R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})"},
      {"count_overflow", R"({"w": {"dtype": "F32", "shape": [4294967296,
          4294967296], "data_offsets": [0, 4]}})"},
      {"bytes_overflow", R"({"w": {"dtype": "F64", "shape":
          [4611686018427387904], "data_offsets": [0, 4]}})"},
      {"length",
       R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})"},
      {"backwards",
       R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})"},
      {"past_end",
       R"({"w": {"dtype": "F32", "shape": [32], "data_offsets": [0, 128]}})"},
      {"offset_overflow", R"({"w": {"dtype": "U8", "shape": [1],
          "data_offsets": [18446744073709551615, 0]}})"},
      {"overlap",
       R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
          "b": {"dtype": "F32", "shape": [4], "data_offsets": [12, 28]}})"},
      {"metadata", R"({"__metadata__": 3})"},
      {"rank", R"({"w": {"dtype": "U8", "shape": [1,1,1,1,1,1,1,1,1],
          "data_offsets": [0, 1]}})"},
      {"every_dtype", R"({"a": {"dtype": "BOOL", "shape": [1], "data_offsets":
          [0, 1]}, "b": {"dtype": "F8_E5M2", "shape": [2], "data_offsets": [1,
          3]}, "c": {"dtype": "F8_E8M0", "shape": [], "data_offsets": [3, 4]},
          "d": {"dtype": "I16", "shape": [1], "data_offsets": [4, 6]}, "e":
          {"dtype": "U64", "shape": [1], "data_offsets": [8, 16]}, "f":
          {"dtype": "F64", "shape": [0, 5], "data_offsets": [16, 16]}})"},
  };
  const std::string data(64, '\x11');
  for (const auto& [name, header] : cases) {
    Seed("header_" + name, kHeader, "64\n" + header);
    Seed("file_" + name, kFile,
         model::checkpoint::SafetensorsBytesFromHeader(header, data));
  }
}

// checkpoint_test.cc's SomeTensors, whole and cut short.
void Files() {
  const std::vector<TensorToWrite> tensors = {
      {"model.layers.0.self_attn.q_a_proj.weight",
       "BF16",
       {2, 3},
       model::checkpoint::Bf16Bytes({1, 2, 3, 4, 5, 6})},
      {"model.layers.0.input_layernorm.weight",
       "F32",
       {3},
       model::checkpoint::F32Bytes({0.5f, -1.0f, 2.0f})},
      {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
       "F8_E4M3",
       {2, 2},
       model::checkpoint::U8Bytes({0x38, 0x40, 0xb8, 0x00})},
      {"empty", "F32", {0, 4}, ""},
  };
  const std::string whole = model::checkpoint::SafetensorsBytes(tensors);
  Seed("file_good", kFile, whole);
  Seed("file_cut_data", kFile, whole.substr(0, whole.size() - 3));
  Seed("file_cut_header", kFile, whole.substr(0, 20));
  Seed("file_tiny", kFile, "abc");
  std::string huge(16, '\0');
  huge[5] = 0x10;  // a header length of 2^44
  Seed("file_header_length_above_limit", kFile, huge);
}

// --- '2' and '3': configs and directories.

// A model small enough to ship whole in a seed: one main layer and the MTP
// layer (kv_lora_rank 128 is validation's least).
Json TinyConfig(bool fp8, bool shared_indexer, int block = 2) {
  Json c = {
      {"architectures", {"GlmMoeDsaForCausalLM"}},
      {"model_type", "glm_moe_dsa"},
      {"num_hidden_layers", shared_indexer ? 2 : 1},
      {"hidden_size", 4},
      {"num_attention_heads", 1},
      {"q_lora_rank", 4},
      {"kv_lora_rank", 128},
      {"qk_nope_head_dim", 2},
      {"qk_rope_head_dim", 2},
      {"v_head_dim", 2},
      {"max_position_embeddings", 64},
      {"vocab_size", 3},
      {"index_n_heads", 1},
      {"index_head_dim", 2},
      {"index_topk", 4},
      {"indexer_rope_interleave", true},
      {"num_nextn_predict_layers", 1},
      {"rms_norm_eps", 1e-5},
      {"rope_parameters", {{"rope_theta", 8000000}, {"rope_type", "default"}}},
  };
  if (shared_indexer) c["indexer_types"] = {"full", "shared"};
  if (fp8) {
    c["quantization_config"] = {{"quant_method", "fp8"},
                                {"fmt", "e4m3"},
                                {"weight_block_size", {block, block}}};
  }
  return c;
}

// checkpoint_model_test.cc's tiny DeepSeek-V3.2 with YaRN.
Json YarnConfig() { return ds::TinyDeepseekV32YarnHfConfig<Json>(); }

std::vector<Entry> AllEntries(const Json& config) {
  const auto hf = ds::ParseHfConfig(config.dump(), "tiny", "config.json");
  if (!hf.ok()) {
    std::fprintf(stderr, "%s\n", hf.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<int> layers;
  for (int l = 0; l < hf->config.num_layers(); ++l) layers.push_back(l);
  return CheckpointEntries(*hf, layers);
}

void Configs() {
  Seed("config_tiny", kConfig, TinyConfig(false, false).dump(2));
  Seed("config_tiny_fp8_shared", kConfig, TinyConfig(true, true).dump(2));
  Seed("config_yarn", kConfig, YarnConfig().dump(2));
  Json pattern = YarnConfig();
  pattern["index_topk_pattern"] = "FSF";
  pattern["rope_scaling"]["rope_type"] = "deepseek_yarn";
  Seed("config_topk_pattern", kConfig, pattern.dump());
  Json freq = YarnConfig();
  freq["index_topk_freq"] = 2;
  freq["index_skip_topk_offset"] = 1;
  freq.erase("architectures");
  Seed("config_topk_freq_model_type_only", kConfig, freq.dump());
  Json unsupported = YarnConfig();
  unsupported["quantization_config"] = {{"quant_method", "awq"}};
  Seed("config_unsupported_quantization", kConfig, unsupported.dump());
  Seed("config_not_json", kConfig, "{\"hidden_size\": ");
}

void Directories() {
  for (const bool fp8 : {false, true}) {
    const Json config = TinyConfig(fp8, fp8);
    const std::vector<Entry> entries = AllEntries(config);
    const std::string suffix = fp8 ? "_fp8_shared_indexer" : "";
    Seed("dir_one_file" + suffix, kDirectory,
         JoinFiles({config.dump(2), FileOf(entries)}));
    // Two shards and their index.
    std::vector<Entry> first(entries.begin(),
                             entries.begin() + entries.size() / 2);
    std::vector<Entry> second(entries.begin() + entries.size() / 2,
                              entries.end());
    std::map<std::string, std::string> map;
    for (const Entry& e : first) map[e.name] = ShardName(0);
    for (const Entry& e : second) map[e.name] = ShardName(1);
    Seed("dir_sharded" + suffix, kDirectory,
         JoinFiles({config.dump(2), model::checkpoint::IndexJson(map),
                    FileOf(first), FileOf(second)}));
  }
  // 128 x 128 blocks, which a model with fp8 weights keeps as stored
  // (CheckpointWeights::HoldsFp8Blocks): one block per matrix.
  const Json blocks = TinyConfig(true, false, 128);
  Seed("dir_one_file_fp8_128x128_blocks", kDirectory,
       JoinFiles({blocks.dump(2), FileOf(AllEntries(blocks))}));
  const Json config = TinyConfig(false, false);
  std::vector<Entry> entries = AllEntries(config);
  Seed("dir_config_alone", kDirectory, config.dump(2));
  entries.erase(entries.begin() + 2);
  Seed("dir_missing_tensor", kDirectory,
       JoinFiles({config.dump(2), FileOf(entries)}));
}

}  // namespace
}  // namespace dsa::fuzz::checkpoint

int main(int argc, char** argv) {
  using namespace dsa::fuzz::checkpoint;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: make_checkpoint_corpus DIR [CONFIG.json...]\n");
    return 2;
  }
  g_dir = argv[1];
  RealShapedHeaders(std::vector<std::string>(argv + 2, argv + argc));
  LyingHeaders();
  Files();
  Configs();
  Directories();
  std::printf("wrote %d seeds into %s\n", g_written, g_dir.c_str());
  return 0;
}
