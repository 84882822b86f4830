#include "model/checkpoint/checkpoint.h"

#include <sys/stat.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "platform/plugin_file.h"

namespace dsa::model::checkpoint {
namespace {

using Json = nlohmann::json;

std::string Echo(absl::string_view s, size_t max_chars = 80) {
  return platform::EchoForMessage(std::string_view(s.data(), s.size()),
                                  max_chars);
}

std::string EchoPath(absl::string_view s) {
  return Echo(s, platform::kMaxEchoedPathChars);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// A shard's name as the index gives it: a plain file name in the directory.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(
    const std::string& dir) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  const std::string index_path = base + kIndexFileName;
  const std::string single_path = base + kSingleFileName;
  // file name -> the tensors the index puts there (empty: all of the file).
  std::map<std::string, std::vector<std::string>> shards;
  bool indexed = false;
  if (Exists(index_path)) {
    indexed = true;
    std::string text, error;
    if (!platform::ReadRegularFile(index_path, kMaxIndexBytes, &text, &error)) {
      return absl::InvalidArgumentError(error);
    }
    Json index;
    try {
      index = Json::parse(text);
    } catch (const Json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(
          EchoPath(index_path), ": not valid JSON: ", Echo(e.what(), 160)));
    }
    const auto map = index.is_object() ? index.find("weight_map") : index.end();
    if (map == index.end() || !map->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(EchoPath(index_path), ": has no \"weight_map\" object"));
    }
    for (auto it = map->begin(); it != map->end(); ++it) {
      if (!it.value().is_string() ||
          !IsPlainFileName(it.value().get<std::string>())) {
        return absl::InvalidArgumentError(
            absl::StrCat(EchoPath(index_path), ": tensor ", Echo(it.key()),
                         " is mapped to something other than a file name in "
                         "the checkpoint directory"));
      }
      shards[it.value().get<std::string>()].push_back(it.key());
    }
    if (shards.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(EchoPath(index_path), ": the weight_map is empty"));
    }
  } else if (Exists(single_path)) {
    shards[kSingleFileName] = {};
  } else {
    return absl::NotFoundError(absl::StrCat(
        EchoPath(dir), ": no ", kSingleFileName, " or ", kIndexFileName,
        " (not a Hugging Face checkpoint directory)"));
  }
  for (const auto& [name, tensors] : shards) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
        SafetensorsFile::Open(base + name);
    if (!file.ok()) {
      if (absl::IsNotFound(file.status()) && indexed) {
        return absl::InvalidArgumentError(absl::StrCat(
            EchoPath(index_path), ": names shard ", Echo(name), " (for tensor ",
            Echo(tensors.front()), "), which is not in the directory"));
      }
      return file.status();
    }
    const SafetensorsFile* f = file->get();
    if (indexed) {
      for (const std::string& tensor : tensors) {
        const TensorInfo* info = f->Find(tensor);
        if (info == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              EchoPath(index_path), ": puts tensor ", Echo(tensor), " in ",
              EchoPath(f->path()), ", which does not hold it"));
        }
        ckpt->where_[tensor] = TensorRef{f, info};
        ckpt->data_bytes_ += info->bytes();
      }
    } else {
      for (const TensorInfo& info : f->tensors()) {
        ckpt->where_[info.name] = TensorRef{f, &info};
        ckpt->data_bytes_ += info.bytes();
      }
    }
    ckpt->files_.push_back(std::move(*file));
  }
  return ckpt;
}

absl::StatusOr<TensorRef> Checkpoint::Find(absl::string_view name) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    return absl::NotFoundError(absl::StrCat("checkpoint ", EchoPath(dir_),
                                            ": no tensor ", Echo(name)));
  }
  return it->second;
}

bool Checkpoint::Has(absl::string_view name) const {
  return where_.find(name) != where_.end();
}

}  // namespace dsa::model::checkpoint
