#include "model/checkpoint/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "platform/checked_size.h"
#include "platform/plugin_file.h"

namespace dsa::model::checkpoint {
namespace {

using Json = nlohmann::json;

std::string Echo(absl::string_view s, size_t max_chars = 80) {
  return platform::EchoForMessage(std::string_view(s.data(), s.size()),
                                  max_chars);
}

absl::Status Invalid(absl::string_view file, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(Echo(file, platform::kMaxEchoedPathChars), ": ", what));
}

absl::Status TensorError(absl::string_view file, absl::string_view tensor,
                         absl::string_view what) {
  return Invalid(file, absl::StrCat("tensor ", Echo(tensor), ": ", what));
}

bool ParseDType(const std::string& name, TensorDType* dtype) {
#define DSA_DTYPE_PARSE(id, text, bytes) \
  if (name == text) {                    \
    *dtype = TensorDType::id;            \
    return true;                         \
  }
  DSA_SAFETENSORS_DTYPES(DSA_DTYPE_PARSE)
#undef DSA_DTYPE_PARSE
  return false;
}

// A JSON number that is a non-negative integer fitting int64 (safetensors
// writes sizes and offsets as unsigned integers).
bool NonNegativeInteger(const Json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = static_cast<uint64_t>(i);
  } else {
    return false;
  }
  return *out <= static_cast<uint64_t>(INT64_MAX);
}

absl::StatusOr<TensorInfo> ParseEntry(const std::string& name,
                                      const Json& entry, uint64_t data_bytes,
                                      absl::string_view file) {
  if (!entry.is_object()) {
    return TensorError(file, name, "its header entry is not a JSON object");
  }
  TensorInfo info;
  info.name = name;
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return TensorError(file, name, "has no \"dtype\" string");
  }
  if (!ParseDType(dtype->get<std::string>(), &info.dtype)) {
    return TensorError(file, name,
                       absl::StrCat("unknown dtype \"",
                                    Echo(dtype->get<std::string>()), "\""));
  }
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) {
    return TensorError(file, name, "has no \"shape\" array");
  }
  if (shape->size() > kMaxTensorRank) {
    return TensorError(file, name,
                       absl::StrCat("has rank ", shape->size(), ", more than ",
                                    kMaxTensorRank));
  }
  CheckedSize elements = 1;
  for (const Json& d : *shape) {
    uint64_t dim = 0;
    if (!NonNegativeInteger(d, &dim)) {
      return TensorError(file, name,
                         "shape holds something other than a non-negative "
                         "64-bit integer");
    }
    info.shape.push_back(static_cast<int64_t>(dim));
    elements *= dim;
    if (!elements.ok()) {
      return TensorError(file, name,
                         "the element count of its shape overflows 64 bits");
    }
  }
  info.num_elements = elements.value();
  const CheckedSize checked_bytes = elements * TensorDTypeBytes(info.dtype);
  if (!checked_bytes.ok()) {
    return TensorError(file, name, "its byte size overflows 64 bits");
  }
  const uint64_t bytes = static_cast<uint64_t>(checked_bytes.value());
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !NonNegativeInteger((*offsets)[0], &info.begin) ||
      !NonNegativeInteger((*offsets)[1], &info.end)) {
    return TensorError(file, name,
                       "has no \"data_offsets\" pair of non-negative 64-bit "
                       "integers");
  }
  if (info.end < info.begin) {
    return TensorError(file, name,
                       absl::StrCat("data_offsets [", info.begin, ", ",
                                    info.end, "] end before they begin"));
  }
  if (info.end - info.begin != bytes) {
    return TensorError(
        file, name,
        absl::StrCat("data_offsets [", info.begin, ", ", info.end, "] hold ",
                     info.end - info.begin, " bytes, but ",
                     TensorDTypeName(info.dtype), " of shape [",
                     absl::StrJoin(info.shape, ", "), "] is ", bytes,
                     " bytes"));
  }
  if (info.end > data_bytes) {
    return TensorError(
        file, name,
        absl::StrCat("data_offsets [", info.begin, ", ", info.end,
                     "] run past the end of the file's ", data_bytes,
                     " bytes of tensor data (a truncated file?)"));
  }
  return info;
}

// The file descriptor, closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

const char* TensorDTypeName(TensorDType dtype) {
  switch (dtype) {
#define DSA_DTYPE_NAME(id, text, bytes) \
  case TensorDType::id:                 \
    return text;
    DSA_SAFETENSORS_DTYPES(DSA_DTYPE_NAME)
#undef DSA_DTYPE_NAME
  }
  return "?";
}

int TensorDTypeBytes(TensorDType dtype) {
  switch (dtype) {
#define DSA_DTYPE_BYTES(id, text, bytes) \
  case TensorDType::id:                  \
    return bytes;
    DSA_SAFETENSORS_DTYPES(DSA_DTYPE_BYTES)
#undef DSA_DTYPE_BYTES
  }
  return 1;
}

absl::StatusOr<std::vector<TensorInfo>> ParseSafetensorsHeader(
    absl::string_view text, uint64_t data_bytes, absl::string_view file) {
  // Names at the top level, to refuse one given twice (JSON parsers keep the
  // last silently, and two entries of one name would be two tensors).
  std::set<std::string> names;
  std::string duplicate;
  Json header;
  try {
    header =
        Json::parse(text.begin(), text.end(),
                    [&](int depth, Json::parse_event_t event, Json& parsed) {
                      if (event == Json::parse_event_t::key && depth == 1 &&
                          parsed.is_string() &&
                          !names.insert(parsed.get<std::string>()).second &&
                          duplicate.empty()) {
                        duplicate = parsed.get<std::string>();
                      }
                      return true;
                    });
  } catch (const Json::exception& e) {
    // nlohmann's messages quote at most a short excerpt of the input.
    return Invalid(file, absl::StrCat("the header is not valid JSON: ",
                                      Echo(e.what(), 160)));
  }
  if (!duplicate.empty()) {
    return TensorError(file, duplicate, "is named twice in the header");
  }
  if (!header.is_object()) {
    return Invalid(file, "the header is not a JSON object");
  }
  std::vector<TensorInfo> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) {
        return Invalid(file, "__metadata__ is not a JSON object");
      }
      continue;
    }
    absl::StatusOr<TensorInfo> info =
        ParseEntry(it.key(), it.value(), data_bytes, file);
    if (!info.ok()) return info.status();
    tensors.push_back(std::move(*info));
  }
  // No two tensors share a byte (empty tensors occupy none).
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors) {
    if (t.bytes() > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) {
              return a->begin < b->begin;
            });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& cur = *by_offset[i];
    if (cur.begin < prev.end) {
      return TensorError(
          file, cur.name,
          absl::StrCat("data_offsets [", cur.begin, ", ", cur.end,
                       "] overlap those of tensor ", Echo(prev.name), " [",
                       prev.begin, ", ", prev.end, "]"));
    }
  }
  std::sort(
      tensors.begin(), tensors.end(),
      [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return tensors;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  struct stat st;
  if (path.empty() || path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("safetensors file: not a valid path");
  }
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    const std::string message =
        absl::StrCat(Echo(path, platform::kMaxEchoedPathChars),
                     ": cannot open: ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message)
                         : absl::InvalidArgumentError(message);
  }
  if (!S_ISREG(st.st_mode)) {
    return Invalid(path, "not a regular file");
  }
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    return Invalid(path, absl::StrCat("cannot open: ", std::strerror(err)));
  }
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Invalid(path, "not a regular file");
  }
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < 8) {
    return Invalid(path, absl::StrCat("is ", file_bytes,
                                      " bytes, too short for a safetensors "
                                      "header (a truncated file?)"));
  }
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (map == MAP_FAILED) {
    const int err = errno;
    return Invalid(path, absl::StrCat("cannot map: ", std::strerror(err)));
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->file_bytes_ = file_bytes;
  const uint8_t* bytes = static_cast<const uint8_t*>(map);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes[i];
  if (header_bytes > kMaxHeaderBytes) {
    return Invalid(path, absl::StrCat("header length ", header_bytes,
                                      " is above the format's limit of ",
                                      kMaxHeaderBytes, " bytes"));
  }
  if (header_bytes > file_bytes - 8) {
    return Invalid(path,
                   absl::StrCat("header length ", header_bytes,
                                " runs past the end of the file's ", file_bytes,
                                " bytes (a truncated file?)"));
  }
  file->data_ = bytes + 8 + header_bytes;
  absl::StatusOr<std::vector<TensorInfo>> tensors = ParseSafetensorsHeader(
      absl::string_view(reinterpret_cast<const char*>(bytes + 8), header_bytes),
      file_bytes - 8 - header_bytes, path);
  if (!tensors.ok()) return tensors.status();
  file->tensors_ = std::move(*tensors);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, file_bytes_);
}

const TensorInfo* SafetensorsFile::Find(absl::string_view name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const TensorInfo& t, absl::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

}  // namespace dsa::model::checkpoint
