// Writes safetensors files and checkpoint directories for tests: the format
// written independently of the reader (safetensors.h), so that a test of the
// reader does not test the reader against itself, and crafted headers for the
// cases a reader must refuse.
#ifndef DSA_MODEL_CHECKPOINT_SAFETENSORS_WRITER_H_
#define DSA_MODEL_CHECKPOINT_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dsa::model::checkpoint {

struct TensorToWrite {
  std::string name;
  std::string dtype;  // "BF16", "F32", "F8_E4M3", ...
  std::vector<int64_t> shape;
  std::string bytes;  // little-endian element data
};

// The whole file: header (tensors in the given order, data packed in that
// order, the header padded with spaces to a multiple of 8 as the reference
// writer does) and data.
std::string SafetensorsBytes(const std::vector<TensorToWrite>& tensors);

// A file from a header text and data written as given (no checks).
std::string SafetensorsBytesFromHeader(const std::string& header_json,
                                       const std::string& data);

// Element encodings.
std::string Bf16Bytes(const std::vector<float>& values);
std::string F32Bytes(const std::vector<float>& values);
// OCP e4m3fn codes, as given.
std::string U8Bytes(const std::vector<uint8_t>& codes);

absl::Status WriteFileBytes(const std::string& path, const std::string& bytes);

// A model.safetensors.index.json for `weight_map` (tensor -> file name).
std::string IndexJson(const std::map<std::string, std::string>& weight_map);

}  // namespace dsa::model::checkpoint

#endif  // DSA_MODEL_CHECKPOINT_SAFETENSORS_WRITER_H_
