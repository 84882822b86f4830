#include "model/deepseek_v32/batch_metadata.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "platform/plugin_file.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

AttentionMetadata Classify(const ModelConfig& config,
                           const EngineConfig& engine,
                           absl::Span<const Request> requests,
                           int decode_threshold) {
  AttentionMetadata m;
  m.decode_threshold = decode_threshold;
  m.request_is_decode.reserve(requests.size());
  for (const Request& r : requests) {
    m.request_is_decode.push_back(r.num_new_tokens <= decode_threshold ? 1 : 0);
    if (r.num_new_tokens <= decode_threshold) {
      ++m.num_decodes;
      m.num_decode_tokens += r.num_new_tokens;
    } else {
      ++m.num_prefills;
      m.num_prefill_tokens += r.num_new_tokens;
      m.prefill_max_seq_len = std::max(m.prefill_max_seq_len,
                                       r.num_context_tokens + r.num_new_tokens);
    }
  }
  m.use_dense_mha =
      m.prefill_max_seq_len <= config.index_topk() && !engine.force_mqa;
  return m;
}

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

absl::StatusOr<BatchMetadata> BuildBatchMetadata(
    const ModelConfig& config, const EngineConfig& engine,
    absl::Span<const Request> requests) {
  DSA_RETURN_IF_ERROR(ValidateEngineConfig(engine));
  if (requests.empty()) {
    return absl::InvalidArgumentError("a batch needs at least one request");
  }
  if (requests.size() > static_cast<size_t>(kMaxRequests)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", requests.size(),
                     " requests is over the limit of ", kMaxRequests));
  }
  const int64_t max_len = config.max_position_embeddings();
  BatchMetadata batch;
  batch.num_requests = static_cast<int>(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    if (r.num_context_tokens < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", i, ": negative context length ", r.num_context_tokens));
    }
    if (r.num_new_tokens < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", i, ": needs at least one new token, got ",
                       r.num_new_tokens));
    }
    // Compared without adding first, so huge values cannot overflow.
    if (r.num_new_tokens > max_len ||
        r.num_context_tokens > max_len - r.num_new_tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", i, ": ", r.num_context_tokens, "+",
                       r.num_new_tokens, " tokens exceed ", config.name(),
                       "'s max_position_embeddings ", max_len));
    }
    batch.num_tokens += r.num_new_tokens;  // <= kMaxRequests * 2^31
  }
  batch.mla = Classify(config, engine, requests, /*decode_threshold=*/1);
  batch.indexer =
      Classify(config, engine, requests, 1 + engine.num_speculative_tokens);
  return batch;
}

absl::StatusOr<Request> ParseRequest(absl::string_view spec) {
  const std::vector<absl::string_view> parts = absl::StrSplit(spec, '+');
  Request r;
  if (parts.size() != 2 || !AllDigits(parts[0]) || !AllDigits(parts[1]) ||
      !absl::SimpleAtoi(parts[0], &r.num_context_tokens) ||
      !absl::SimpleAtoi(parts[1], &r.num_new_tokens)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad request \"",
        platform::EchoForMessage(std::string_view(spec.data(), spec.size())),
        "\"; expected CONTEXT+NEW with non-negative integers, "
        "e.g. 0+1024"));
  }
  return r;
}

absl::StatusOr<std::vector<Request>> ParseRequests(absl::string_view spec) {
  std::vector<Request> requests;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    DSA_ASSIGN_OR_RETURN(Request r, ParseRequest(part));
    requests.push_back(r);
  }
  return requests;
}

}  // namespace dsa::model::deepseek_v32
