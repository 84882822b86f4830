// The safetensors reader and the checkpoint directory on files written by
// safetensors_writer: tensors found with their dtypes, shapes and bytes, one
// file or sharded, and every kind of lying header and broken directory
// refused with an error naming the file and the tensor.
#include "model/checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/safetensors_writer.h"
#include "testing/status_matchers.h"

namespace dsa::model::checkpoint {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A fresh directory under the test's temporary directory.
std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string WriteFile(const std::string& dir, const std::string& name,
                      const std::string& bytes) {
  const std::string path = dir + "/" + name;
  EXPECT_THAT(WriteFileBytes(path, bytes), IsOk());
  return path;
}

std::vector<TensorToWrite> SomeTensors() {
  return {
      {"model.layers.0.self_attn.q_a_proj.weight",
       "BF16",
       {2, 3},
       Bf16Bytes({1, 2, 3, 4, 5, 6})},
      {"model.layers.0.input_layernorm.weight",
       "F32",
       {3},
       F32Bytes({0.5f, -1.0f, 2.0f})},
      {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
       "F8_E4M3",
       {2, 2},
       U8Bytes({0x38, 0x40, 0xb8, 0x00})},
      {"empty", "F32", {0, 4}, ""},
  };
}

TEST(SafetensorsTest, ReadsTensorsWithTheirDtypesShapesAndBytes) {
  const std::string dir = FreshDir("good");
  const std::string path =
      WriteFile(dir, "model.safetensors", SafetensorsBytes(SomeTensors()));
  ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
  ASSERT_EQ(file->tensors().size(), 4u);
  const TensorInfo* q = file->Find("model.layers.0.self_attn.q_a_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, TensorDType::kBF16);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(q->num_elements, 6);
  EXPECT_EQ(q->bytes(), 12u);
  uint16_t bits;
  std::memcpy(&bits, file->data(*q) + 2, 2);
  EXPECT_EQ(bits, 0x4000);  // bf16 2.0
  const TensorInfo* n = file->Find("model.layers.0.input_layernorm.weight");
  ASSERT_NE(n, nullptr);
  float v;
  std::memcpy(&v, file->data(*n) + 4, 4);
  EXPECT_EQ(v, -1.0f);
  const TensorInfo* f8 =
      file->Find("model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
  ASSERT_NE(f8, nullptr);
  EXPECT_EQ(f8->dtype, TensorDType::kF8E4M3);
  EXPECT_EQ(file->data(*f8)[2], 0xb8);
  EXPECT_EQ(file->Find("empty")->num_elements, 0);
  EXPECT_EQ(file->Find("model.layers.1.input_layernorm.weight"), nullptr);
}

// Header and data as given; `what` must appear in the error with the file.
void ExpectRefused(const std::string& name, const std::string& header,
                   const std::string& data, const std::string& what) {
  SCOPED_TRACE(name);
  const std::string dir = FreshDir("bad");
  const std::string path =
      WriteFile(dir, name, SafetensorsBytesFromHeader(header, data));
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(path), HasSubstr(what))));
}

TEST(SafetensorsTest, HeadersThatLieAreRefusedNamingTheFileAndTensor) {
  const std::string data(64, '\x11');
  ExpectRefused("not_json", "{\"a\": ", data, "not valid JSON");
  ExpectRefused("not_object", "[1, 2]", data, "not a JSON object");
  ExpectRefused("twice",
                R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
          "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                data, "tensor w: is named twice");
  ExpectRefused(
      "dtype",
      R"({"w": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}})", data,
      "tensor w: unknown dtype \"F4\"");
  ExpectRefused("no_shape",
                R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", data,
                "tensor w: has no \"shape\" array");
  ExpectRefused(
      "negative_dim",
      R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", data,
      "tensor w: shape holds something other than a non-negative");
  ExpectRefused("count_overflow",
                R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296],
                "data_offsets": [0, 4]}})",
                data,
                "tensor w: the element count of its shape overflows 64 bits");
  ExpectRefused("bytes_overflow",
                R"({"w": {"dtype": "F64", "shape": [4611686018427387904],
                "data_offsets": [0, 4]}})",
                data, "tensor w: its byte size overflows 64 bits");
  ExpectRefused(
      "length",
      R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})",
      data,
      "tensor w: data_offsets [0, 8] hold 8 bytes, but BF16 of shape "
      "[2, 3] is 12 bytes");
  ExpectRefused(
      "backwards",
      R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", data,
      "tensor w: data_offsets [8, 4] end before they begin");
  ExpectRefused(
      "past_end",
      R"({"w": {"dtype": "F32", "shape": [32], "data_offsets": [0, 128]}})",
      data,
      "tensor w: data_offsets [0, 128] run past the end of the file's "
      "64 bytes of tensor data");
  ExpectRefused("offset_overflow",
                R"({"w": {"dtype": "U8", "shape": [1],
                "data_offsets": [18446744073709551615, 0]}})",
                data, "tensor w: has no \"data_offsets\" pair");
  ExpectRefused(
      "overlap",
      R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
          "b": {"dtype": "F32", "shape": [4], "data_offsets": [12, 28]}})",
      data,
      "tensor b: data_offsets [12, 28] overlap those of tensor a [0, 16]");
  ExpectRefused("metadata", R"({"__metadata__": 3})", data,
                "__metadata__ is not a JSON object");
}

TEST(SafetensorsTest, TruncatedFilesAndLyingHeaderLengthsAreRefused) {
  const std::string dir = FreshDir("truncated");
  const std::string whole = SafetensorsBytes(SomeTensors());
  // Cut inside the data: the last tensor's offsets run past the end.
  const std::string cut =
      WriteFile(dir, "cut.safetensors", whole.substr(0, whole.size() - 3));
  EXPECT_THAT(SafetensorsFile::Open(cut),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(cut), HasSubstr("run past the end"),
                             HasSubstr("a truncated file?"))));
  // Cut inside the header.
  const std::string head =
      WriteFile(dir, "head.safetensors", whole.substr(0, 20));
  EXPECT_THAT(SafetensorsFile::Open(head),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("runs past the end of the file's 20 bytes")));
  const std::string tiny = WriteFile(dir, "tiny.safetensors", "abc");
  EXPECT_THAT(SafetensorsFile::Open(tiny),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("too short for a safetensors header")));
  // A header length above the format's limit.
  std::string huge(16, '\0');
  huge[5] = 0x10;  // 2^44
  const std::string big = WriteFile(dir, "big.safetensors", huge);
  EXPECT_THAT(SafetensorsFile::Open(big),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("above the format's limit")));
  EXPECT_THAT(SafetensorsFile::Open(dir + "/missing.safetensors"),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(SafetensorsFile::Open(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a regular file")));
  const std::string fifo = dir + "/fifo.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_THAT(SafetensorsFile::Open(fifo),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a regular file")));
}

TEST(CheckpointTest, OneFileOrShardsWithAnIndex) {
  const std::string one = FreshDir("one");
  WriteFile(one, kSingleFileName, SafetensorsBytes(SomeTensors()));
  ASSERT_OK_AND_ASSIGN(auto a, Checkpoint::Open(one));
  EXPECT_EQ(a->num_tensors(), 4);
  EXPECT_EQ(a->files().size(), 1u);
  ASSERT_OK_AND_ASSIGN(TensorRef q,
                       a->Find("model.layers.0.self_attn.q_a_proj.weight"));
  EXPECT_EQ(q.info->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_THAT(
      a->Find("lm_head.weight"),
      StatusIs(absl::StatusCode::kNotFound,
               AllOf(HasSubstr("no tensor lm_head.weight"), HasSubstr(one))));

  const std::string sharded = FreshDir("sharded");
  std::vector<TensorToWrite> all = SomeTensors();
  WriteFile(sharded, "model-00001-of-00002.safetensors",
            SafetensorsBytes({all[0], all[1]}));
  WriteFile(sharded, "model-00002-of-00002.safetensors",
            SafetensorsBytes({all[2], all[3]}));
  std::map<std::string, std::string> map;
  for (int i = 0; i < 4; ++i) {
    map[all[i].name] = i < 2 ? "model-00001-of-00002.safetensors"
                             : "model-00002-of-00002.safetensors";
  }
  WriteFile(sharded, kIndexFileName, IndexJson(map));
  ASSERT_OK_AND_ASSIGN(auto b, Checkpoint::Open(sharded));
  EXPECT_EQ(b->num_tensors(), 4);
  EXPECT_EQ(b->files().size(), 2u);
  ASSERT_OK_AND_ASSIGN(
      TensorRef kv,
      b->Find("model.layers.0.self_attn.kv_a_proj_with_mqa.weight"));
  EXPECT_THAT(kv.file->path(), HasSubstr("model-00002-of-00002"));
  EXPECT_EQ(kv.data()[1], 0x40);
  EXPECT_EQ(b->data_bytes(), 12u + 12u + 4u);
}

TEST(CheckpointTest, BrokenDirectoriesAreClearErrors) {
  EXPECT_THAT(Checkpoint::Open(FreshDir("nothing")),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("no model.safetensors or "
                                 "model.safetensors.index.json")));
  const std::vector<TensorToWrite> all = SomeTensors();
  {
    const std::string dir = FreshDir("missing_shard");
    WriteFile(dir, kIndexFileName,
              IndexJson({{all[0].name, "gone.safetensors"}}));
    EXPECT_THAT(Checkpoint::Open(dir),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("names shard gone.safetensors"),
                               HasSubstr(all[0].name))));
  }
  {
    const std::string dir = FreshDir("wrong_shard");
    WriteFile(dir, "a.safetensors", SafetensorsBytes({all[1]}));
    WriteFile(dir, kIndexFileName, IndexJson({{all[0].name, "a.safetensors"}}));
    EXPECT_THAT(Checkpoint::Open(dir),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("puts tensor " + all[0].name),
                               HasSubstr("which does not hold it"))));
  }
  {
    const std::string dir = FreshDir("escaping_shard");
    WriteFile(dir, kIndexFileName,
              IndexJson({{all[0].name, "../x.safetensors"}}));
    EXPECT_THAT(Checkpoint::Open(dir),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("something other than a file name")));
  }
  {
    const std::string dir = FreshDir("bad_index");
    WriteFile(dir, kIndexFileName, "{\"weight_map\": 7}");
    EXPECT_THAT(Checkpoint::Open(dir),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("has no \"weight_map\" object")));
    WriteFile(dir, kIndexFileName, "{\"weight_map\": {");
    EXPECT_THAT(Checkpoint::Open(dir),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("not valid JSON")));
  }
  {
    // A lying shard: the error names that shard and the tensor.
    const std::string dir = FreshDir("lying_shard");
    const std::string path = WriteFile(
        dir, kSingleFileName,
        SafetensorsBytesFromHeader(
            R"({"model.embed_tokens.weight": {"dtype": "BF16", "shape": [8, 8],
                "data_offsets": [0, 128]}})",
            std::string(100, '\0')));
    EXPECT_THAT(Checkpoint::Open(dir),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(path),
                               HasSubstr("tensor model.embed_tokens.weight"),
                               HasSubstr("run past the end"))));
  }
}

}  // namespace
}  // namespace dsa::model::checkpoint
