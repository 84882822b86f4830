// Fuzz target: batch metadata (model/deepseek_v32/batch_metadata.h).
//
// Input: a preset and its max_position_embeddings / index_topk, an engine
// configuration (boundary values included), then the batch either as the
// `--requests` text ParseRequests reads or as raw 64-bit request lengths
// (negative, zero and huge included). BuildBatchMetadata must return an
// error or metadata that adds up: both views classify every request once,
// their token counts sum to the batch's, and the dense-MHA flag follows
// from the largest prefill. A violated invariant aborts with a message.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/deepseek_v32/batch_metadata.h"
#include "model/deepseek_v32/forward_context.h"
#include "model/deepseek_v32/model_config.h"
#include "testing/fuzz/fuzz_input.h"

namespace dsa::model::deepseek_v32 {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "batch_metadata_fuzzer: %s\n", what.c_str());
  std::abort();
}

void Check(bool ok, const std::string& what) {
  if (!ok) Fail(what);
}

const std::vector<ModelConfig>& Presets() {
  static const auto* const presets = [] {
    auto* v = new std::vector<ModelConfig>;
    for (const std::string& name : PresetNames()) {
      auto config = LoadPreset(name);
      if (!config.ok())
        Fail(absl::StrCat("preset ", name, ": ", config.status().ToString()));
      v->push_back(*std::move(config));
    }
    return v;
  }();
  return *presets;
}

int64_t BoundaryOr(fuzz::FuzzInput& in, int64_t lo, int64_t hi) {
  if (!in.OneIn(4)) return in.Range(lo, hi);
  return in.Pick<int64_t>({0, 1, -1, 2, 64, 2048, 2049, 65536, 163840,
                           (int64_t{1} << 31) - 1, int64_t{1} << 31, INT64_MAX,
                           INT64_MIN, INT64_MAX - 1});
}

void CheckView(const AttentionMetadata& m, const ModelConfig& config,
               const EngineConfig& engine, const std::vector<Request>& reqs,
               int threshold, const char* name) {
  Check(m.decode_threshold == threshold,
        absl::StrCat(name, " decode_threshold ", m.decode_threshold));
  Check(m.num_decodes + m.num_prefills == static_cast<int>(reqs.size()),
        absl::StrCat(name, " classifies ", m.num_decodes + m.num_prefills,
                     " of ", reqs.size(), " requests"));
  int64_t decode_tokens = 0, prefill_tokens = 0, max_len = 0;
  for (const Request& r : reqs) {
    if (r.num_new_tokens <= threshold) {
      decode_tokens += r.num_new_tokens;
    } else {
      prefill_tokens += r.num_new_tokens;
      max_len = std::max(max_len, r.num_context_tokens + r.num_new_tokens);
    }
  }
  Check(m.num_decode_tokens == decode_tokens &&
            m.num_prefill_tokens == prefill_tokens,
        absl::StrCat(name, " token counts ", m.num_decode_tokens, "/",
                     m.num_prefill_tokens, ", expected ", decode_tokens, "/",
                     prefill_tokens));
  Check(m.prefill_max_seq_len == max_len,
        absl::StrCat(name, " prefill_max_seq_len ", m.prefill_max_seq_len,
                     ", expected ", max_len));
  Check(m.prefill_max_seq_len <= config.max_position_embeddings(),
        absl::StrCat(name, " prefill_max_seq_len beyond the model's length"));
  Check(
      m.use_dense_mha == (max_len <= config.index_topk() && !engine.force_mqa),
      absl::StrCat(name, " use_dense_mha is ", m.use_dense_mha));
}

void Run(fuzz::FuzzInput& in) {
  const std::vector<ModelConfig>& presets = Presets();
  ModelConfig config = presets[in.Range(0, presets.size() - 1)];
  if (in.OneIn(3)) {
    DeepseekV32Config proto = config.proto();
    proto.set_max_position_embeddings(BoundaryOr(in, 1, 1 << 16));
    proto.mutable_indexer()->set_index_topk(
        static_cast<int32_t>(BoundaryOr(in, 1, 1 << 16)));
    auto changed = ModelConfig::FromProto(proto, "fuzz");
    if (changed.ok()) config = *std::move(changed);
  }

  EngineConfig engine;
  engine.num_speculative_tokens =
      static_cast<int>(BoundaryOr(in, 0, kMaxSpeculativeTokens + 1));
  engine.prefill_context_parallel = in.Bool();
  engine.decode_context_parallel_size =
      static_cast<int>(BoundaryOr(in, 0, kMaxContextParallel + 1));
  engine.force_mqa = in.Bool();

  std::vector<Request> requests;
  if (in.Bool()) {
    const std::string spec = in.Rest();
    auto parsed = ParseRequests(spec);
    if (!parsed.ok()) {
      Check(parsed.status().code() == absl::StatusCode::kInvalidArgument,
            absl::StrCat("ParseRequests: ", parsed.status().ToString()));
      return;
    }
    requests = *std::move(parsed);
    // What parses prints back to the same requests.
    for (const Request& r : requests) {
      auto again = ParseRequest(
          absl::StrCat(r.num_context_tokens, "+", r.num_new_tokens));
      Check(again.ok() && again->num_context_tokens == r.num_context_tokens &&
                again->num_new_tokens == r.num_new_tokens,
            "ParseRequest does not read back what it parsed");
    }
  } else {
    const int64_t n = in.OneIn(16) ? in.Range(0, 4096) : in.Range(0, 8);
    for (int64_t i = 0; i < n; ++i) {
      Request r;
      r.num_context_tokens = BoundaryOr(in, 0, 5000);
      r.num_new_tokens = BoundaryOr(in, 0, 5000);
      requests.push_back(r);
    }
  }

  auto batch = BuildBatchMetadata(config, engine, requests);
  if (!batch.ok()) {
    Check(batch.status().code() == absl::StatusCode::kInvalidArgument,
          absl::StrCat("BuildBatchMetadata: ", batch.status().ToString()));
    return;
  }
  Check(ValidateEngineConfig(engine).ok(), "accepted an invalid engine");
  Check(batch->num_requests == static_cast<int>(requests.size()),
        "num_requests differs from the requests given");
  int64_t tokens = 0;
  for (const Request& r : requests) {
    Check(r.num_context_tokens >= 0 && r.num_new_tokens >= 1 &&
              r.num_context_tokens + r.num_new_tokens <=
                  config.max_position_embeddings(),
          absl::StrCat("accepted request ", r.num_context_tokens, "+",
                       r.num_new_tokens));
    tokens += r.num_new_tokens;
  }
  Check(batch->num_tokens == tokens, "num_tokens differs from the sum");
  CheckView(batch->mla, config, engine, requests, 1, "mla");
  CheckView(batch->indexer, config, engine, requests,
            1 + engine.num_speculative_tokens, "indexer");
  Check(batch->indexer.num_decodes >= batch->mla.num_decodes,
        "the indexer (higher threshold) sees fewer decodes than the MLA");
}

}  // namespace
}  // namespace dsa::model::deepseek_v32

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsa::fuzz::FuzzInput in(data, size);
  dsa::model::deepseek_v32::Run(in);
  return 0;
}
