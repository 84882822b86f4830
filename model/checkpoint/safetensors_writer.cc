#include "model/checkpoint/safetensors_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dsa::model::checkpoint {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Round to nearest even bf16 by hand (not attention/dtypes).
uint16_t ToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t lsb = (bits >> 16) & 1;
  bits += 0x7fff + lsb;
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace

std::string SafetensorsBytesFromHeader(const std::string& header_json,
                                       const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header_json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header_json + data;
}

std::string SafetensorsBytes(const std::vector<TensorToWrite>& tensors) {
  std::vector<std::string> entries = {R"("__metadata__": {"format": "pt"})"};
  std::string data;
  for (const TensorToWrite& t : tensors) {
    const uint64_t begin = data.size();
    data += t.bytes;
    entries.push_back(
        absl::StrCat(JsonString(t.name), ": {\"dtype\": \"", t.dtype,
                     "\", \"shape\": [", absl::StrJoin(t.shape, ", "),
                     "], \"data_offsets\": [", begin, ", ", data.size(), "]}"));
  }
  std::string header = "{" + absl::StrJoin(entries, ", ") + "}";
  while (header.size() % 8 != 0) header += ' ';
  return SafetensorsBytesFromHeader(header, data);
}

std::string Bf16Bytes(const std::vector<float>& values) {
  std::string out;
  for (float v : values) {
    const uint16_t b = ToBf16(v);
    out += static_cast<char>(b & 0xff);
    out += static_cast<char>(b >> 8);
  }
  return out;
}

std::string F32Bytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string U8Bytes(const std::vector<uint8_t>& codes) {
  return std::string(codes.begin(), codes.end());
}

absl::Status WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool ok = std::fclose(f) == 0 && n == bytes.size();
  return ok ? absl::OkStatus()
            : absl::InternalError(absl::StrCat("cannot write ", path));
}

std::string IndexJson(const std::map<std::string, std::string>& weight_map) {
  std::vector<std::string> entries;
  for (const auto& [tensor, file] : weight_map) {
    entries.push_back(JsonString(tensor) + ": " + JsonString(file));
  }
  return "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {" +
         absl::StrJoin(entries, ", ") + "}}";
}

}  // namespace dsa::model::checkpoint
