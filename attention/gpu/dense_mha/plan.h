// The host side of one dense MHA prefill call, before anything is launched:
// the arguments checked, the requests with queries and their scratch rows,
// the attention's work items (longest first), the per-call metadata the
// kernels read, and the scratch each buffer needs. Plain C++ (host
// compiled; plan_test.cc runs it without a device).
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_PLAN_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attention/gpu/dense_mha/params.h"
#include "attention/gpu/device/launch_result.h"

namespace dsa::attention::gpu::dense_mha {

// One request with query tokens, in the order of the scratch rows.
struct RequestInfo {
  int32_t q_begin;    // first query token (row of q / output)
  int32_t n;          // query tokens
  int32_t seq_len;    // latent rows: context + n
  int32_t kv_row;     // first scratch row (a multiple of kKeyAlign)
  int32_t table_row;  // the request's block-table row
  int32_t pad[3];
};
// One block of attention work: query tile `q_tile` of request `request`
// (an index into the RequestInfo array).
struct WorkItem {
  int32_t request;
  int32_t q_tile;
};

// Per-call metadata, in the kernel parameters when it fits (no upload, so
// the launch does not wait for the host), else in device memory.
inline constexpr int kInlineRequests = 16;
inline constexpr int kInlineItems = 320;
struct Meta {
  const RequestInfo* requests;  // device arrays, when not inline
  const WorkItem* items;
  int32_t is_inline;
  RequestInfo req[kInlineRequests];
  WorkItem item[kInlineItems];
};

struct Plan {
  std::vector<RequestInfo> requests;
  std::vector<WorkItem> items;  // the attention grid's x, longest first
  int64_t entry_bytes = 0;      // of one latent cache entry
  int64_t kv_rows = 0;          // scratch rows of all requests
  int64_t max_rows = 0;         // of the longest request (the gather grid)
  // Row strides (elements) and shapes of the scratch: latent rows kv_c |
  // k_pe [kv_rows, lat_ld], K_nope [kv_rows, knope_ld], V^T [vt_rows,
  // kv_rows].
  int64_t lat_ld = 0;
  int64_t knope_ld = 0;
  int64_t vt_rows = 0;
  // kv_b_proj or q must become bf16 (fp32, or not 16-byte aligned) before
  // the own GEMM / the attention read them.
  bool convert_weights = false;
  bool convert_queries = false;
  // Metadata: inline in the kernel parameters, or `meta_upload` bytes
  // (requests then items) to copy to device memory.
  Meta meta{};
  std::vector<uint8_t> meta_upload;
  // Scratch bytes.
  size_t latent_bytes = 0;
  size_t knope_bytes = 0;
  size_t vt_bytes = 0;
  size_t wk_bytes = 0;      // W_UK split out of an fp32 / unaligned kv_b_proj
  size_t wv_bytes = 0;      // W_UV
  size_t weight_bytes = 0;  // kv_b_proj in bf16 (convert_weights)
  size_t query_bytes = 0;   // q in bf16 (convert_queries)
};

// Checks `params` (kInvalidArgument naming what is wrong) and plans the
// call for attention blocks of `block_m` query rows (BlockTiles). A call
// with no tokens plans nothing and touches no pointer.
LaunchResult PlanDenseMhaPrefill(const DenseMhaPrefillParams& params,
                                 int block_m, Plan* plan);

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_PLAN_H_
