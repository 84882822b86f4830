#include "model/deepseek_v32/paged_cache.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {

absl::Status BlockTables::CheckSizes(int block_size, int num_blocks) {
  if (block_size <= 0 || num_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("block tables: block_size (", block_size,
                     ") and num_blocks (", num_blocks, ") must be positive"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BlockTables> BlockTables::Create(int block_size,
                                                int num_blocks) {
  DSA_RETURN_IF_ERROR(CheckSizes(block_size, num_blocks));
  return BlockTables(block_size, num_blocks);
}

BlockTables::BlockTables(int block_size, int num_blocks)
    : block_size_(block_size), num_blocks_(num_blocks) {
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int64_t BlockTables::cached_tokens(int64_t request_id) const {
  auto it = sequences_.find(request_id);
  return it == sequences_.end() ? 0 : it->second.num_tokens;
}

absl::Status BlockTables::Release(int64_t request_id) {
  auto it = sequences_.find(request_id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(
        absl::StrCat("block tables: unknown request id ", request_id));
  }
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend();
       ++b) {
    free_.push_back(*b);
  }
  sequences_.erase(it);
  return absl::OkStatus();
}

void BlockTables::UndoStep(absl::Span<const StepRequest> requests,
                           const StepLayout& layout) {
  // PrepareStep took blocks off the free stack request after request in
  // internal order; they go back in the reverse order.
  for (auto k = layout.request_order.rbegin(); k != layout.request_order.rend();
       ++k) {
    const StepRequest& r = requests[*k];
    auto it = sequences_.find(r.request_id);
    if (it == sequences_.end()) continue;
    Sequence& seq = it->second;
    seq.num_tokens = std::max<int64_t>(0, seq.num_tokens - r.num_new_tokens);
    const size_t keep =
        static_cast<size_t>((seq.num_tokens + block_size_ - 1) / block_size_);
    while (seq.blocks.size() > keep) {
      free_.push_back(seq.blocks.back());
      seq.blocks.pop_back();
    }
    if (seq.num_tokens == 0) sequences_.erase(it);
  }
}

absl::StatusOr<StepLayout> BlockTables::PrepareStep(
    absl::Span<const StepRequest> requests, const AttentionMetadata& mla) {
  if (requests.empty()) {
    return absl::InvalidArgumentError("step: no requests");
  }
  if (mla.request_is_decode.size() != requests.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step: the batch metadata classifies ", mla.request_is_decode.size(),
        " requests, the step has ", requests.size()));
  }
  // Validate everything and count the blocks first: all or nothing.
  std::set<int64_t> ids;
  int64_t blocks_needed = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const StepRequest& r = requests[i];
    if (!ids.insert(r.request_id).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step: request ", i, " repeats request id ", r.request_id));
    }
    if (r.num_new_tokens < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("step: request ", i, " (id ", r.request_id, ") has ",
                       r.num_new_tokens, " new tokens; expected at least 1"));
    }
    const int64_t cached = cached_tokens(r.request_id);
    if (r.num_context_tokens != cached) {
      return absl::InvalidArgumentError(
          absl::StrCat("step: request ", i, " (id ", r.request_id, ") claims ",
                       r.num_context_tokens,
                       " context tokens but the cache holds ", cached));
    }
    if (r.num_new_tokens > (int64_t{1} << 30) ||
        cached + r.num_new_tokens > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step: request ", i, " (id ", r.request_id, ") is too long"));
    }
    const int64_t have = (cached + block_size_ - 1) / block_size_;
    const int64_t need =
        (cached + r.num_new_tokens + block_size_ - 1) / block_size_;
    blocks_needed += need - have;
  }
  if (blocks_needed > static_cast<int64_t>(free_.size())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "step: needs ", blocks_needed, " more cache blocks of ", block_size_,
        " tokens, ", free_.size(), " free of ", num_blocks_));
  }

  StepLayout layout;
  layout.num_requests = static_cast<int>(requests.size());
  // Caller's first row of each request.
  std::vector<int64_t> first_row(requests.size() + 1, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    first_row[i + 1] = first_row[i] + requests[i].num_new_tokens;
  }
  layout.num_tokens = first_row.back();
  for (size_t i = 0; i < requests.size(); ++i) {
    if (mla.request_is_decode[i]) layout.request_order.push_back(i);
  }
  layout.num_decode_requests = static_cast<int>(layout.request_order.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!mla.request_is_decode[i]) layout.request_order.push_back(i);
  }

  layout.query_start_loc.push_back(0);
  for (int i : layout.request_order) {
    const StepRequest& r = requests[i];
    Sequence& seq = sequences_[r.request_id];
    const int64_t total = seq.num_tokens + r.num_new_tokens;
    while (static_cast<int64_t>(seq.blocks.size()) * block_size_ < total) {
      seq.blocks.push_back(free_.back());
      free_.pop_back();
    }
    const int internal = static_cast<int>(layout.seq_lens.size());
    for (int64_t k = 0; k < r.num_new_tokens; ++k) {
      const int64_t position = seq.num_tokens + k;
      layout.token_source.push_back(first_row[i] + k);
      layout.token_request.push_back(internal);
      layout.positions.push_back(position);
      layout.slot_mapping.push_back(
          int64_t{seq.blocks[position / block_size_]} * block_size_ +
          position % block_size_);
    }
    seq.num_tokens = total;
    layout.seq_lens.push_back(static_cast<int32_t>(total));
    layout.query_start_loc.push_back(layout.query_start_loc.back() +
                                     static_cast<int32_t>(r.num_new_tokens));
    layout.max_blocks_per_request = std::max(
        layout.max_blocks_per_request, static_cast<int>(seq.blocks.size()));
    layout.max_seq_len = std::max(layout.max_seq_len, total);
  }
  layout.num_decode_tokens =
      layout.num_decode_requests == 0
          ? 0
          : layout.query_start_loc[layout.num_decode_requests];
  layout.block_table.assign(
      static_cast<size_t>(layout.num_requests) * layout.max_blocks_per_request,
      0);
  for (int k = 0; k < layout.num_requests; ++k) {
    const Sequence& seq =
        sequences_[requests[layout.request_order[k]].request_id];
    std::copy(seq.blocks.begin(), seq.blocks.end(),
              layout.block_table.begin() +
                  static_cast<int64_t>(k) * layout.max_blocks_per_request);
  }
  return layout;
}

std::vector<Request> ToRequests(absl::Span<const StepRequest> requests) {
  std::vector<Request> out;
  out.reserve(requests.size());
  for (const StepRequest& r : requests) {
    out.push_back(Request{r.num_context_tokens, r.num_new_tokens});
  }
  return out;
}

}  // namespace dsa::model::deepseek_v32
