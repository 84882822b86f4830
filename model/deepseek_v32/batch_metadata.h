// Attention metadata of one forward of a DeepSeek-V3.2-family model, built
// from the batch's requests: how many decodes and prefills the MLA attention
// and the indexer each see, and whether the prefills fit the dense-MHA path.
//
// The two views differ only in their decode threshold: a request is a decode
// when its new tokens (its query length) are at most the threshold, else a
// prefill. The MLA attention's threshold is 1; the indexer's is
// 1 + speculative (MTP) tokens. So with MTP=3 a batch of 3-token requests is
// all decodes to the indexer but all prefills to the MLA -- which is why the
// indexer-skip decision reads the MLA's view (indexer_skip.h).
#ifndef DSA_MODEL_DEEPSEEK_V32_BATCH_METADATA_H_
#define DSA_MODEL_DEEPSEEK_V32_BATCH_METADATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/deepseek_v32/forward_context.h"
#include "model/deepseek_v32/model_config.h"

namespace dsa::model::deepseek_v32 {

// One request's share of this step.
struct Request {
  int64_t num_context_tokens = 0;  // already in the KV cache
  int64_t num_new_tokens = 0;      // the query length of this step
};

// One attention's view of the batch.
struct AttentionMetadata {
  int decode_threshold = 1;
  int num_decodes = 0;
  int num_prefills = 0;
  int64_t num_decode_tokens = 0;
  int64_t num_prefill_tokens = 0;
  // Largest total length (context + new) among prefills; 0 without prefills.
  int64_t prefill_max_seq_len = 0;
  // prefill_max_seq_len <= index_topk && !force_mqa: every prefill keeps all
  // its causal keys in top-k, so dense causal MHA computes the same thing.
  bool use_dense_mha = false;
  // Per request, in the batch's order: 1 when this attention counts it as a
  // decode. The one classification the step's layout follows
  // (BlockTables::PrepareStep), so it is never redone elsewhere.
  std::vector<uint8_t> request_is_decode;
};

struct BatchMetadata {
  int num_requests = 0;
  int64_t num_tokens = 0;     // new tokens of all requests
  AttentionMetadata mla;      // decode threshold 1
  AttentionMetadata indexer;  // decode threshold 1 + speculative tokens
};

// Bound on a batch's requests; a step's batch is far smaller.
inline constexpr int kMaxRequests = 1 << 20;

// Classifies `requests` for `config` and `engine`. InvalidArgument, naming
// the request by its index, for: no requests, more than kMaxRequests, a
// negative context, fewer than one new token, or a total length (context +
// new) above the model's max_position_embeddings; and for an invalid
// `engine`.
absl::StatusOr<BatchMetadata> BuildBatchMetadata(
    const ModelConfig& config, const EngineConfig& engine,
    absl::Span<const Request> requests);

// "CONTEXT+NEW": "0+1024", "100+1". InvalidArgument on anything else
// (missing '+', signs, non-digits, overflow).
absl::StatusOr<Request> ParseRequest(absl::string_view spec);
// A comma-separated list of CONTEXT+NEW: "100+1,0+1024".
absl::StatusOr<std::vector<Request>> ParseRequests(absl::string_view spec);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_BATCH_METADATA_H_
