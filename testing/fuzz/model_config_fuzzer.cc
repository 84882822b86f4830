// Fuzz target: model textprotos (model/deepseek_v32/model_config.h).
//
// The input is a textproto. ParseModelConfig must return an error or a
// config whose per-layer facts are consistent: every layer reads the top-k
// of itself or of an earlier layer that owns an indexer, the owners number
// num_indexer_layers(), MTP layers come after the main ones, and ids out of
// range are answered as such. A config that validated prints back to a
// textproto that parses to the same config. A violated invariant aborts
// with a message.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {
namespace {

void Check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "model_config_fuzzer: %s\n", what.c_str());
  std::abort();
}

void CheckLayers(const ModelConfig& c) {
  Check(c.num_layers() == c.num_main_layers() + c.num_mtp_layers(),
        "num_layers is not main + MTP");
  Check(c.num_main_layers() >= 1 && c.num_main_layers() <= kMaxLayers,
        "accepted num_hidden_layers out of range");
  int owners = 0;
  for (int layer = 0; layer < c.num_layers(); ++layer) {
    const int source = c.topk_source_layer(layer);
    Check(source >= 0 && source <= layer,
          absl::StrCat("layer ", layer, " reads the top-k of layer ", source));
    Check(c.owns_indexer(source),
          absl::StrCat("layer ", layer, " reads layer ", source,
                       ", which owns no indexer"));
    Check(c.owns_indexer(layer) == (source == layer),
          absl::StrCat("layer ", layer,
                       ": owns_indexer disagrees with its "
                       "top-k source"));
    Check(c.is_mtp_layer(layer) == (layer >= c.num_main_layers()),
          absl::StrCat("layer ", layer, ": is_mtp_layer is wrong"));
    owners += c.owns_indexer(layer) ? 1 : 0;
  }
  Check(owners == c.num_indexer_layers(),
        absl::StrCat(owners,
                     " layers own an indexer, num_indexer_layers() "
                     "says ",
                     c.num_indexer_layers()));
  Check(c.owns_indexer(0), "layer 0 owns no indexer");
  for (int bad : {-1, c.num_layers(), c.num_layers() + 1, -2147483647 - 1}) {
    Check(!c.is_valid_layer(bad) && !c.is_mtp_layer(bad) &&
              !c.owns_indexer(bad) && c.topk_source_layer(bad) == -1,
          absl::StrCat("layer id ", bad, " is taken as valid"));
  }
  Check(c.index_topk() >= 1 && c.index_topk() <= c.max_position_embeddings(),
        "index_topk out of range");
  Check(c.qk_head_dim() > 0 && c.latent_cache_dim() > 0,
        "non-positive head dims");
}

void Run(const std::string& text) {
  auto config = ParseModelConfig(text, "fuzz.textproto");
  if (!config.ok()) {
    Check(!config.status().message().empty(), "an error without a message");
    return;
  }
  CheckLayers(*config);
  std::string printed;
  Check(google::protobuf::TextFormat::PrintToString(config->proto(), &printed),
        "the config does not print");
  auto again = ParseModelConfig(printed, "printed");
  Check(again.ok(), absl::StrCat("the printed config does not load: ",
                                 again.status().ToString()));
  Check(google::protobuf::util::MessageDifferencer::Equals(config->proto(),
                                                           again->proto()),
        "the printed config loads differently");
  // The name is a valid preset name; looking it up must not fail in any
  // other way than not finding it.
  auto preset = LoadPreset(config->name());
  Check(preset.ok() || preset.status().code() == absl::StatusCode::kNotFound,
        absl::StrCat("LoadPreset: ", preset.status().ToString()));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsa::model::deepseek_v32::Run(
      std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
