// Fuzz target: the checkpoint reader -- safetensors headers and files
// (model/checkpoint/safetensors.h), checkpoint directories with their index
// (checkpoint.h), config.json (model/deepseek_v32/hf_config.h) and a whole
// checkpoint loaded as a model (model_loader.h, checkpoint_weights.h). The
// input format is in checkpoint_input.h.
//
// What must hold, else the target aborts with a message:
//  - an error is one line (no control characters) of bounded length that
//    names the file it is about;
//  - a header or file that is accepted has tensors sorted and named once,
//    each of at most kMaxTensorRank dims, whose element count is the
//    product of its shape, whose byte range holds exactly that many elements
//    of its dtype, lies inside the data and overlaps no other tensor's; a
//    mapped file hands out exactly the file's bytes for each tensor;
//  - an accepted config.json is a valid model config (it converts again to
//    the same one) of a supported architecture;
//  - a directory that loads as a checkpoint serves every weight of every
//    layer and the embedding rows, and refuses a token outside the
//    vocabulary.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "google/protobuf/util/message_differencer.h"
#include "model/checkpoint/checkpoint.h"
#include "model/checkpoint/safetensors.h"
#include "model/deepseek_v32/hf_config.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/model_config.h"
#include "model/deepseek_v32/model_loader.h"
#include "testing/fuzz/checkpoint_input.h"

namespace dsa::fuzz::checkpoint {
namespace {

using model::checkpoint::SafetensorsFile;
using model::checkpoint::TensorDTypeBytes;
using model::checkpoint::TensorInfo;
namespace ds = model::deepseek_v32;

// The longest error message any input may produce: every value a message
// echoes is capped (at most ~350 characters each), and a message echoes a
// few of them.
constexpr size_t kMaxMessageChars = 2000;

void Check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "checkpoint_fuzzer: %s\n", what.c_str());
  std::abort();
}

// One line of bounded length, starting with `prefix`.
void CheckMessage(const absl::Status& status, const std::string& prefix) {
  const std::string m(status.message());
  Check(!m.empty(), "an error without a message: " + status.ToString());
  Check(m.size() <= kMaxMessageChars,
        absl::StrCat("a message of ", m.size(),
                     " characters: ", std::string(m.substr(0, 300))));
  for (const char c : m) {
    Check(static_cast<unsigned char>(c) >= 0x20,
          absl::StrCat("a control character in the message: ",
                       std::string(m.substr(0, 300))));
  }
  Check(m.substr(0, prefix.size()) == prefix,
        absl::StrCat("the message does not start with ", prefix, ": ",
                     std::string(m.substr(0, 300))));
}

// The invariants of an accepted header over `data_bytes` bytes of data.
void CheckTensors(const std::vector<TensorInfo>& tensors, uint64_t data_bytes) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    Check(i == 0 || tensors[i - 1].name < t.name,
          "tensors not sorted or named twice: " + t.name);
    Check(t.shape.size() <= model::checkpoint::kMaxTensorRank,
          "rank above the limit: " + t.name);
    unsigned __int128 elements = 1;
    for (const int64_t d : t.shape) {
      Check(d >= 0, "a negative dim: " + t.name);
      elements *= static_cast<uint64_t>(d);
      Check(elements <= static_cast<uint64_t>(INT64_MAX),
            "an element count past int64: " + t.name);
    }
    Check(static_cast<int64_t>(elements) == t.num_elements,
          "num_elements is not the shape's product: " + t.name);
    Check(t.begin <= t.end && t.end <= data_bytes,
          absl::StrCat(t.name, ": [", t.begin, ", ", t.end,
                       ") outside the data's ", data_bytes, " bytes"));
    Check(static_cast<unsigned __int128>(t.bytes()) ==
              elements * static_cast<uint64_t>(TensorDTypeBytes(t.dtype)),
          "the byte range does not hold the shape: " + t.name);
  }
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors) {
    if (t.bytes() > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) {
              return a->begin < b->begin;
            });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    Check(by_offset[i]->begin >= by_offset[i - 1]->end,
          "overlapping tensors: " + by_offset[i]->name + ", " +
              by_offset[i - 1]->name);
  }
}

// --- '0': a header, as if `data_bytes` of data followed it.

void RunHeader(const std::string& rest) {
  const size_t newline = rest.find('\n');
  const std::string count =
      rest.substr(0, newline == std::string::npos ? 0 : newline);
  uint64_t data_bytes = 0;
  if (!count.empty() && count.size() <= 19 &&
      std::all_of(count.begin(), count.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    data_bytes = std::stoull(count);
  }
  const std::string json =
      newline == std::string::npos ? rest : rest.substr(newline + 1);
  const auto tensors = model::checkpoint::ParseSafetensorsHeader(
      json, data_bytes, "fuzz.safetensors");
  if (!tensors.ok()) {
    CheckMessage(tensors.status(), "fuzz.safetensors: ");
    return;
  }
  CheckTensors(*tensors, data_bytes);
}

// --- '1': a whole file, in a memory file of this process.

int MemoryFile() {
  static const int fd = [] {
    const int f = memfd_create("checkpoint_fuzzer", MFD_CLOEXEC);
    Check(f >= 0, "memfd_create failed");
    return f;
  }();
  return fd;
}

void RunFile(const std::string& bytes) {
  const int fd = MemoryFile();
  Check(ftruncate(fd, 0) == 0, "ftruncate failed");
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = pwrite(fd, bytes.data() + written, bytes.size() - written,
                             static_cast<off_t>(written));
    Check(n > 0, "writing the memory file failed");
    written += static_cast<size_t>(n);
  }
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  const auto file = SafetensorsFile::Open(path);
  if (!file.ok()) {
    CheckMessage(file.status(), path + ": ");
    return;
  }
  const SafetensorsFile& f = **file;
  Check(f.file_bytes() == bytes.size(), "file_bytes is not the file's size");
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) {
    header = (header << 8) | static_cast<uint8_t>(bytes[i]);
  }
  Check(header <= bytes.size() - 8, "a header past the end was accepted");
  const uint64_t data_begin = 8 + header;
  CheckTensors(f.tensors(), bytes.size() - data_begin);
  for (const TensorInfo& t : f.tensors()) {
    Check(f.Find(t.name) == &t, "Find does not find " + t.name);
    Check(std::memcmp(f.data(t), bytes.data() + data_begin + t.begin,
                      t.bytes()) == 0,
          "the mapped bytes of " + t.name + " are not the file's");
  }
  Check(f.Find(std::string(1, '\0')) == nullptr, "Find found a NUL name");
}

// --- '2': a config.json.

void RunConfig(const std::string& text) {
  const auto hf = ds::ParseHfConfig(text, "fuzz", "fuzz/config.json");
  if (!hf.ok()) {
    CheckMessage(hf.status(), "fuzz/config.json: ");
    return;
  }
  Check(hf->architecture == "DeepseekV32ForCausalLM" ||
            hf->architecture == "GlmMoeDsaForCausalLM",
        "an unsupported architecture accepted: " + hf->architecture);
  const auto again = ds::ModelConfig::FromProto(hf->config.proto());
  Check(again.ok(),
        "the converted config does not validate: " + again.status().ToString());
  Check(google::protobuf::util::MessageDifferencer::Equals(again->proto(),
                                                           hf->config.proto()),
        "the converted config validates differently");
  if (hf->quantization.fp8) {
    for (const int64_t b :
         {hf->quantization.block_rows, hf->quantization.block_cols}) {
      Check(b >= 1 && b <= ds::kMaxDim, absl::StrCat("a block size of ", b));
    }
  }
}

// --- '3': a directory, loaded as a model.

const std::string& Directory() {
  static const std::string* const dir = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    if (tmp == nullptr) tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp",
                                       "/checkpoint_fuzzer.XXXXXX");
    Check(mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
    return new std::string(pattern);
  }();
  return *dir;
}

// The files a directory input wrote, removed before the next one and at exit.
std::vector<std::string>& Written() {
  static auto* const written = [] {
    auto* w = new std::vector<std::string>();
    std::atexit([] {
      for (const std::string& path : Written()) unlink(path.c_str());
      rmdir(Directory().c_str());
    });
    return w;
  }();
  return *written;
}

void WriteFile(const std::string& name, const std::string& bytes) {
  const std::string path = Directory() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  Check(f != nullptr, "cannot create " + path);
  Check(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() &&
            std::fclose(f) == 0,
        "cannot write " + path);
  Written().push_back(path);
}

void RunDirectory(const std::string& rest) {
  for (const std::string& path : Written()) unlink(path.c_str());
  Written().clear();
  const std::vector<std::string> files = SplitFiles(rest);
  WriteFile("config.json", files[0]);
  if (files.size() > 1) {
    WriteFile(!files[1].empty() && files[1][0] == '{'
                  ? model::checkpoint::kIndexFileName
                  : model::checkpoint::kSingleFileName,
              files[1]);
  }
  for (size_t i = 2; i < files.size(); ++i) {
    WriteFile(ShardName(i - 2), files[i]);
  }
  const std::string& dir = Directory();
  const auto loaded = ds::LoadModel(dir);
  if (!loaded.ok()) {
    CheckMessage(loaded.status(), "");
    Check(absl::StrContains(loaded.status().message(), dir),
          "the error does not name the directory or its file: " +
              std::string(loaded.status().message()));
    return;
  }
  const ds::ModelConfig& config = loaded->config();
  const ds::CheckpointWeights* weights = loaded->checkpoint_weights();
  if (weights == nullptr) {
    Check(files.size() == 1 || files[1].empty() ||
              loaded->kind() != ds::ModelSourceKind::kCheckpoint,
          "a checkpoint without weights");
    return;
  }
  int64_t bytes = 0;
  std::vector<uint16_t> out;
  for (int l = 0; l < config.num_layers(); ++l) {
    for (const ds::WeightSpec& spec : ds::LayerWeightSpecs(config, l)) {
      out.resize(static_cast<size_t>(spec.size()));
      const absl::Status read =
          weights->ReadBf16(l, spec, 0, spec.size(), out.data());
      Check(read.ok(),
            absl::StrCat("layer ", l, " ", spec.name, ": ", read.ToString()));
      bytes += spec.size() * 2;
      // Past the tensor's end is an error, not a read.
      Check(!weights->ReadBf16(l, spec, spec.size(), 1, out.data()).ok(),
            absl::StrCat("layer ", l, " ", spec.name, ": read past its end"));
      // An fp8 matrix of 128 x 128 blocks also as stored: its codes, and
      // scales that dequantise to what ReadBf16 gave.
      if (weights->HoldsFp8Blocks(l, spec)) {
        std::vector<uint8_t> codes(static_cast<size_t>(spec.size()));
        const int64_t col_blocks = (spec.cols + 127) / 128;
        std::vector<float> scales(
            static_cast<size_t>((spec.rows + 127) / 128 * col_blocks));
        const absl::Status c =
            weights->ReadFp8(l, spec, 0, spec.size(), codes.data());
        const absl::Status sc = weights->ReadFp8Scales(l, spec, scales.data());
        Check(c.ok() && sc.ok(),
              absl::StrCat("layer ", l, " ", spec.name,
                           ": fp8 read: ", c.ToString(), " ", sc.ToString()));
        Check(!weights->ReadFp8(l, spec, spec.size(), 1, codes.data()).ok(),
              absl::StrCat("layer ", l, " ", spec.name,
                           ": fp8 read past its end"));
        for (int64_t i = 0; i < spec.size(); ++i) {
          const float v =
              attention::Fp8ToFloat(codes[i], attention::kE4m3fnTraits) *
              scales[(i / spec.cols / 128) * col_blocks + i % spec.cols / 128];
          // The same float32 product, rounded the same way; a NaN product
          // as a NaN (which operand's payload a product of two NaNs keeps
          // is the compiler's choice of operand order: a NaN code times a
          // NaN scale gave 0x7fc0 in ReadBf16 and 0xffff here).
          const bool same = std::isnan(v)
                                ? std::isnan(attention::Bf16ToFloat(out[i]))
                                : attention::FloatToBf16(v) == out[i];
          Check(same, absl::StrCat("layer ", l, " ", spec.name,
                                   ": fp8 codes and scales disagree with the "
                                   "dequantised weight at ",
                                   i));
        }
      } else {
        Check(!weights->ReadFp8(l, spec, 0, 1, nullptr).ok(),
              absl::StrCat("layer ", l, " ", spec.name,
                           ": fp8 codes of a matrix that holds none"));
      }
    }
  }
  Check(bytes == weights->model_bytes(), "model_bytes disagrees");
  const int64_t vocab = config.proto().vocab_size();
  std::vector<float> row(static_cast<size_t>(config.proto().hidden_size()));
  for (const bool mtp : {false, true}) {
    for (const int64_t token : {int64_t{0}, vocab - 1}) {
      const absl::Status s = weights->EmbeddingRow(mtp, token, row.data());
      Check(s.ok(), "embedding row: " + s.ToString());
    }
    Check(absl::IsOutOfRange(weights->EmbeddingRow(mtp, vocab, row.data())),
          "a token outside the vocabulary was served");
  }
}

void Run(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (static_cast<Mode>(data[0] % 4)) {
    case kHeader:
      return RunHeader(rest);
    case kFile:
      return RunFile(rest);
    case kConfig:
      return RunConfig(rest);
    case kDirectory:
      return RunDirectory(rest);
  }
}

}  // namespace
}  // namespace dsa::fuzz::checkpoint

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsa::fuzz::checkpoint::Run(data, size);
  return 0;
}
