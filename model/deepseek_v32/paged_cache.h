// Block tables of the requests in flight and the layout of one step's batch.
//
// Every layer's caches (MLA latent, indexer K) are paged the same way, so one
// set of block tables serves all layers, as in vLLM. A step's tokens are
// reordered so that the MLA's decodes (one new token) come first and its
// prefills after: each part is then a contiguous range of rows, which the
// sparse and dense attention ops take as plain views.
#ifndef DSA_MODEL_DEEPSEEK_V32_PAGED_CACHE_H_
#define DSA_MODEL_DEEPSEEK_V32_PAGED_CACHE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/deepseek_v32/batch_metadata.h"

namespace dsa::model::deepseek_v32 {

// One request's share of a step, with the id that ties its steps together.
struct StepRequest {
  int64_t request_id = 0;
  int64_t num_context_tokens = 0;  // must equal what the cache holds for it
  int64_t num_new_tokens = 0;
};

// A step's batch in the order the layer runs it: MLA decodes, then prefills
// (as BatchMetadata's MLA view classified them).
struct StepLayout {
  int num_requests = 0;
  int64_t num_tokens = 0;
  // MLA decodes (query length 1) are requests [0, num_decode_requests) and
  // tokens [0, num_decode_tokens); prefills follow.
  int num_decode_requests = 0;
  int64_t num_decode_tokens = 0;
  // request_order[i]: index in the caller's list of internal request i.
  std::vector<int> request_order;
  // token_source[t]: the caller's row of internal token t (the caller's rows
  // are its requests' new tokens, request after request).
  std::vector<int64_t> token_source;

  // Per internal request.
  std::vector<int32_t> seq_lens;         // context + new
  std::vector<int32_t> query_start_loc;  // num_requests + 1 entries
  int max_blocks_per_request = 0;
  std::vector<int32_t> block_table;  // [num_requests, max_blocks_per_request]
  // Per internal token.
  std::vector<int32_t> token_request;
  std::vector<int64_t> positions;
  std::vector<int64_t> slot_mapping;
  int64_t max_seq_len = 0;
};

class BlockTables {
 public:
  // InvalidArgument unless both are positive.
  static absl::StatusOr<BlockTables> Create(int block_size, int num_blocks);
  // Create's checks alone: a caller that must size the caches before the
  // tables exist (their free list holds num_blocks entries) checks first.
  static absl::Status CheckSizes(int block_size, int num_blocks);

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  int num_free_blocks() const { return static_cast<int>(free_.size()); }

  // Checks every request (its context must equal the tokens cached for its
  // id: 0 for a new id), allocates blocks for the new tokens and returns the
  // step's layout, decodes first as `mla` (the MLA attention's metadata of
  // this batch, BuildBatchMetadata) classified them. All or nothing: on error
  // nothing is allocated. InvalidArgument for a duplicate id, a context that
  // differs from the cached length, fewer than one new token, or metadata of
  // another batch; ResourceExhausted when the blocks run out.
  absl::StatusOr<StepLayout> PrepareStep(absl::Span<const StepRequest> requests,
                                         const AttentionMetadata& mla);

  // Undoes the PrepareStep of `requests` that returned `layout`, the last
  // one: the requests' cached lengths, their blocks and the free list
  // (down to its order, so that a retry gets the same slots) are as before
  // it. For a step that failed.
  void UndoStep(absl::Span<const StepRequest> requests,
                const StepLayout& layout);

  // Frees a finished request's blocks. NotFound for an unknown id.
  absl::Status Release(int64_t request_id);

  // Tokens cached for a request (0 for an unknown id).
  int64_t cached_tokens(int64_t request_id) const;

 private:
  BlockTables(int block_size, int num_blocks);
  struct Sequence {
    int64_t num_tokens = 0;
    std::vector<int32_t> blocks;
  };
  int block_size_;
  int num_blocks_;
  std::vector<int32_t> free_;  // a stack; lowest ids handed out first
  std::map<int64_t, Sequence> sequences_;
};

// The requests of a step as the batch classifier sees them.
std::vector<Request> ToRequests(absl::Span<const StepRequest> requests);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_PAGED_CACHE_H_
