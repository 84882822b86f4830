// A Hugging Face checkpoint directory's weights: model.safetensors, or the
// shards that model.safetensors.index.json names ({"weight_map": {tensor:
// file}}), every file mapped and checked when the checkpoint opens
// (safetensors.h). Knows nothing of any model: tensors are found by their
// Hugging Face names.
#ifndef DSA_MODEL_CHECKPOINT_CHECKPOINT_H_
#define DSA_MODEL_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/checkpoint/safetensors.h"

namespace dsa::model::checkpoint {

inline constexpr char kSingleFileName[] = "model.safetensors";
inline constexpr char kIndexFileName[] = "model.safetensors.index.json";
// The index is a list of names; anything this large is not one.
inline constexpr size_t kMaxIndexBytes = size_t{64} << 20;

// A tensor and the file that holds it.
struct TensorRef {
  const SafetensorsFile* file = nullptr;
  const TensorInfo* info = nullptr;
  const uint8_t* data() const { return file->data(*info); }
};

class Checkpoint {
 public:
  // Opens the weights of checkpoint directory `dir`. NotFound when the
  // directory has neither weight file; InvalidArgument naming the file (and
  // the tensor) for an index that is not valid JSON of that shape, a shard
  // name that is not a plain file name, a shard that does not hold a tensor
  // the index puts there, and everything safetensors.h refuses.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(
      const std::string& dir);

  const std::string& dir() const { return dir_; }
  // The weight files, in the order of their names.
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const {
    return files_;
  }
  int64_t num_tensors() const { return static_cast<int64_t>(where_.size()); }
  // Total bytes of tensor data.
  uint64_t data_bytes() const { return data_bytes_; }
  // The tensor of that Hugging Face name; NotFound naming it and the
  // checkpoint otherwise.
  absl::StatusOr<TensorRef> Find(absl::string_view name) const;
  bool Has(absl::string_view name) const;

 private:
  Checkpoint() = default;
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorRef, std::less<>> where_;
  uint64_t data_bytes_ = 0;
};

}  // namespace dsa::model::checkpoint

#endif  // DSA_MODEL_CHECKPOINT_CHECKPOINT_H_
