// The input format of checkpoint_fuzzer, shared with the program that writes
// its seed corpus (make_checkpoint_corpus.cc): a mode character, then that
// mode's bytes.
//
//   '0' header     a decimal count of data bytes on the first line, then a
//                  safetensors header (the JSON text), parsed as if that many
//                  bytes of tensor data followed it
//   '1' file       a whole safetensors file (the 8-byte length, the header,
//                  the data), opened and mapped as a file
//   '2' config     a Hugging Face config.json, converted to a model config
//   '3' directory  files separated by kFileSeparator: config.json, then
//                  model.safetensors (or, when it starts with '{',
//                  model.safetensors.index.json), then shard files named
//                  ShardName(0), ShardName(1), ...; the directory is loaded
//                  as a model (LoadModel) and every weight read
//
// A mode byte is taken modulo 4, so every input is one of the four.
#ifndef DSA_TESTING_FUZZ_CHECKPOINT_INPUT_H_
#define DSA_TESTING_FUZZ_CHECKPOINT_INPUT_H_

#include <string>
#include <string_view>
#include <vector>

namespace dsa::fuzz::checkpoint {

enum Mode { kHeader = 0, kFile = 1, kConfig = 2, kDirectory = 3 };

// '0' + mode: the seeds' first byte.
inline char ModeChar(Mode mode) { return static_cast<char>('0' + mode); }

inline constexpr std::string_view kFileSeparator = "\n--next-file--\n";

// The name of the i-th shard file of a directory input.
inline std::string ShardName(size_t i) {
  return "s" + std::to_string(i) + ".safetensors";
}

inline std::vector<std::string> SplitFiles(std::string_view bytes) {
  std::vector<std::string> files;
  size_t begin = 0;
  while (true) {
    const size_t end = bytes.find(kFileSeparator, begin);
    if (end == std::string_view::npos) {
      files.emplace_back(bytes.substr(begin));
      return files;
    }
    files.emplace_back(bytes.substr(begin, end - begin));
    begin = end + kFileSeparator.size();
  }
}

inline std::string JoinFiles(const std::vector<std::string>& files) {
  std::string out;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0) out += kFileSeparator;
    out += files[i];
  }
  return out;
}

}  // namespace dsa::fuzz::checkpoint

#endif  // DSA_TESTING_FUZZ_CHECKPOINT_INPUT_H_
