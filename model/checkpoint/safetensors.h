// A reader of safetensors files (Hugging Face's weight format): the file is
// mapped read-only, its JSON header parsed with nlohmann/json, and every
// tensor's entry checked against the file before anything reads a byte of
// data. Layout: an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype": "BF16", "shape": [...], "data_offsets": [begin, end]},
// ..., "__metadata__": {...}}), then the tensor data; offsets are relative
// to the first byte after the header.
//
// A header that lies is an InvalidArgument naming the file and the tensor:
// a header length past the file, JSON that does not parse or is not of the
// documented shape, a name given twice, an unknown dtype, a shape whose
// element count or byte size overflows 64 bits, data_offsets whose length
// disagrees with the shape, that run past the end of the file (a truncated
// download) or that overlap another tensor's. All size arithmetic is checked
// for overflow.
#ifndef DSA_MODEL_CHECKPOINT_SAFETENSORS_H_
#define DSA_MODEL_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dsa::model::checkpoint {

// The element types of the safetensors format.
#define DSA_SAFETENSORS_DTYPES(X) \
  X(kBool, "BOOL", 1)             \
  X(kU8, "U8", 1)                 \
  X(kI8, "I8", 1)                 \
  X(kF8E5M2, "F8_E5M2", 1)        \
  X(kF8E4M3, "F8_E4M3", 1)        \
  X(kF8E8M0, "F8_E8M0", 1)        \
  X(kI16, "I16", 2)               \
  X(kU16, "U16", 2)               \
  X(kF16, "F16", 2)               \
  X(kBF16, "BF16", 2)             \
  X(kI32, "I32", 4)               \
  X(kU32, "U32", 4)               \
  X(kF32, "F32", 4)               \
  X(kF64, "F64", 8)               \
  X(kI64, "I64", 8)               \
  X(kU64, "U64", 8)

enum class TensorDType {
#define DSA_DTYPE_ENUM(id, name, bytes) id,
  DSA_SAFETENSORS_DTYPES(DSA_DTYPE_ENUM)
#undef DSA_DTYPE_ENUM
};

// "BF16", "F8_E4M3", ...
const char* TensorDTypeName(TensorDType dtype);
int TensorDTypeBytes(TensorDType dtype);

// The most header a file may have: the safetensors format's own limit.
inline constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
// Ranks above this are refused (the models' tensors have at most 3 dims).
inline constexpr int kMaxTensorRank = 8;

struct TensorInfo {
  std::string name;
  TensorDType dtype = TensorDType::kF32;
  std::vector<int64_t> shape;
  int64_t num_elements = 0;
  // Byte range within the data section (after the header).
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t bytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Maps and checks `path`: a regular file (a fifo, directory or device is
  // refused without blocking). NotFound when nothing is there.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_bytes() const { return file_bytes_; }
  // Every tensor, sorted by name.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The tensor of that name, or null.
  const TensorInfo* Find(absl::string_view name) const;
  // The first byte of a tensor's data (valid while the file is open).
  const uint8_t* data(const TensorInfo& tensor) const {
    return data_ + tensor.begin;
  }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  uint64_t file_bytes_ = 0;
  const uint8_t* data_ = nullptr;
  std::vector<TensorInfo> tensors_;
};

// Parses and checks a header (the JSON text) for a file with `data_bytes`
// bytes after it. `file` names the file in errors. Exposed for tests and
// fuzzing; Open calls it.
absl::StatusOr<std::vector<TensorInfo>> ParseSafetensorsHeader(
    absl::string_view json, uint64_t data_bytes, absl::string_view file);

}  // namespace dsa::model::checkpoint

#endif  // DSA_MODEL_CHECKPOINT_SAFETENSORS_H_
