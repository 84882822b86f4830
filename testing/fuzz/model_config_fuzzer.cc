// Fuzz target: model textprotos (model/deepseek_v32/model_config.h).
//
// The input is a textproto. ParseModelConfig must return an error or a
// config whose per-layer facts are consistent: every layer reads the top-k
// of itself or of an earlier layer that owns an indexer, the owners number
// num_indexer_layers(), MTP layers come after the main ones, and ids out of
// range are answered as such. A config that validated prints back to a
// textproto that parses to the same config. The memory a model of a valid
// config needs (DeepseekV32Model::DeviceBytes, which Create and
// prefill_bench check before allocating) is counted or overflowed for
// runtime options from the smallest to the largest, never wrapped (UBSan
// stops the fuzz build at any signed overflow on the way), and follows the
// options as it must. A violated invariant aborts with a message.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "attention/dtypes/dtype.h"
#include "attention/ops.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/model_config.h"
#include "model/deepseek_v32/model_runner.h"
#include "platform/checked_size.h"

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

// DeviceBytes over runtime options from the smallest a runner accepts to
// past what any machine holds:
//  - the smallest options are counted (every size of a valid config is
//    representable) and hold at least the bf16 weights;
//  - any options give a count of at least that, or overflowed;
//  - one more cache block per layer adds exactly what it adds to the
//    smallest options of its block size and cache dtype (and a block table
//    entry per possible request while max_model_len could take more blocks
//    than there are), and an overflowed size stays overflowed with more
//    blocks.
void CheckDeviceBytes(const ModelConfig& c) {
  using Options = RuntimeOptions;
  auto bytes = [&](const Options& o) {
    return DeepseekV32Model::DeviceBytes(c, o);
  };
  CheckedSize weights = 0;
  for (int l = 0; l < c.num_layers(); ++l) {
    for (const WeightSpec& spec : LayerWeightSpecs(c, l)) {
      weights += CheckedSize(spec.size()) * 2;
    }
  }
  Check(weights.ok(), "a valid config's weights are past int64");
  const int64_t positions = c.max_position_embeddings();
  for (const int block_size : {1, 64}) {
    for (const bool fp8 : {false, true}) {
      Options smallest;
      smallest.block_size = block_size;
      smallest.num_blocks = 1;
      smallest.max_model_len = 1;
      smallest.max_num_batched_tokens = 1;
      smallest.fp8_latent_cache = fp8;
      smallest.activation_dtype =
          fp8 ? attention::DType::kBFloat16 : attention::DType::kFloat32;
      const CheckedSize base = bytes(smallest);
      Check(base.ok(), absl::StrCat("the smallest options overflow: block ",
                                    block_size, ", fp8 ", fp8));
      Check(base.value() >= weights.value(),
            absl::StrCat("DeviceBytes ", base.value(),
                         " is less than the weights' ", weights.value()));
      Options two = smallest;
      two.num_blocks = 2;
      const CheckedSize two_blocks = bytes(two);
      Check(two_blocks.ok() && two_blocks.value() > base.value(),
            "one more block of the smallest options overflows or adds "
            "nothing");
      const int64_t block_bytes = two_blocks.value() - base.value();
      struct Sizes {
        int num_blocks;
        int64_t max_model_len, tokens;
      };
      for (const Sizes& z : {
               Sizes{256, std::min<int64_t>(4096, positions), 4096},
               Sizes{1, positions, kMaxPositions},
               Sizes{1 << 24, positions, 1 << 24},
               Sizes{std::numeric_limits<int>::max() - 1, positions,
                     kMaxPositions},
           }) {
        Options o = smallest;
        o.num_blocks = z.num_blocks;
        o.max_model_len = z.max_model_len;
        o.max_num_batched_tokens = z.tokens;
        Options more = o;
        more.num_blocks = z.num_blocks + 1;
        const CheckedSize b = bytes(o), m = bytes(more);
        const std::string what = absl::StrCat(
            "block ", block_size, " x ", z.num_blocks, ", max_model_len ",
            z.max_model_len, ", tokens ", z.tokens, ", fp8 ", fp8);
        if (!b.ok()) {
          Check(!m.ok(), "more blocks than an overflowed size count: " + what);
          continue;
        }
        Check(b.value() >= base.value(),
              "less than the smallest options: " + what);
        const CheckedSize workspace =
            attention::IndexerLogits::WorkspaceBytes(z.tokens, z.max_model_len);
        Check(workspace.AtMost(b.value()),
              "less than the indexer's workspace: " + what);
        if (m.ok()) {
          // A block's cache entries, and while a request of max_model_len
          // could hold more blocks than there are, a block table entry for
          // each of the step's possible requests (one per token).
          const int64_t table_row_grows =
              z.num_blocks < (z.max_model_len + block_size - 1) / block_size
                  ? z.tokens * 4
                  : 0;
          Check(m.value() - b.value() == block_bytes + table_row_grows,
                absl::StrCat("one more block adds ", m.value() - b.value(),
                             ", not ", block_bytes, " + ", table_row_grows,
                             ": ", what));
        }
      }
    }
  }
}

void Run(const std::string& text) {
  auto config = ParseModelConfig(text, "fuzz.textproto");
  if (!config.ok()) {
    Check(!config.status().message().empty(), "an error without a message");
    return;
  }
  CheckLayers(*config);
  CheckDeviceBytes(*config);
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
