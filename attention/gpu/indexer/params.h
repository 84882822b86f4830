// Parameters of the lightning indexer's GPU kernels (indexer/launch.h):
// logits over the paged fp8 indexer K cache and the per-row top-k. Raw
// device pointers and sizes, plain C++ (no HIP or CUDA types).
#ifndef DSA_ATTENTION_GPU_INDEXER_PARAMS_H_
#define DSA_ATTENTION_GPU_INDEXER_PARAMS_H_

#include <cstdint>

#include "attention/gpu/device/formats.h"

namespace dsa::attention::gpu {

struct IndexerLogitsParams {
  const uint8_t* q_fp8 = nullptr;       // [rows, heads, head_dim], contiguous
  const float* head_weights = nullptr;  // [rows, heads], contiguous
  // [num_blocks, block_size, head_dim + 4] bytes: per block, block_size *
  // head_dim fp8 values (token-major), then block_size fp32 scales.
  const uint8_t* k_cache = nullptr;
  const int32_t* block_table = nullptr;    // [num_requests, block_table_stride]
  const int32_t* row_request = nullptr;    // [rows]
  const int32_t* row_key_start = nullptr;  // [rows]
  const int32_t* row_key_end = nullptr;    // [rows]
  float* logits = nullptr;                 // [rows, logits_stride], output
  int64_t rows = 0;
  int32_t heads = 0;
  int32_t head_dim = 0;
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_requests = 0;
  int32_t max_blocks_per_request = 0;  // block-table columns in use
  int64_t block_table_stride = 0;      // int32 elements between requests
  int64_t width = 0;                   // logits columns written per row
  int64_t logits_stride = 0;           // floats between rows (>= width)
  Fp8Encoding encoding = Fp8Encoding::kE4m3fn;
};

// The logits kernels' bodies (indexer/heuristics.h picks one), with the
// names IndexerLogitsPath reports:
//   fma            any shape: FMAs over decoded fp8, one block a row;
//   warp_mma       the matrix kernel on warp-level products (mma.sync, MFMA);
//   warpgroup_mma  the matrix kernel on wgmma (sm_90a code, e4m3fn data);
//   persistent     the persistent warp-specialised wgmma kernel (sm_90a
//                  code, e4m3fn data, at most 128 heads).
// The matrix kernel's body is the device code's: warpgroup_mma where that
// is sm_90a's and the data e4m3fn, warp_mma everywhere else.
#define DSA_INDEXER_LOGITS_BODIES(X) \
  X(kFma, "fma")                     \
  X(kWarpMma, "warp_mma")            \
  X(kWarpgroupMma, "warpgroup_mma")  \
  X(kPersistent, "persistent")
// The persistent kernel's blocks: 128 (row, head) columns, the two math
// groups on alternate key tiles (decode), or 256, both on every tile.
#define DSA_INDEXER_LOGITS_BLOCKS(X) \
  X(kNarrow, "narrow")               \
  X(kWide, "wide")
// How the persistent kernel's key tiles arrive: TMA (block_size a multiple
// of 64) or cp.async (any block size).
#define DSA_INDEXER_LOGITS_KEYS(X) \
  X(kTma, "tma")                   \
  X(kCpAsync, "cp_async")
// The persistent kernel's math warpgroups: two (ping-pong on wide blocks,
// one-row decode tiles on m64n32 on narrow ones) or four (wide blocks, each
// pair of groups on its own tiles).
#define DSA_INDEXER_LOGITS_GROUPS(X) \
  X(kTwo, "2")                       \
  X(kFour, "4")

#define DSA_INDEXER_ENUMERATOR(name, text) name,
enum class IndexerLogitsBody : int32_t {
  kAuto = 0,
  DSA_INDEXER_LOGITS_BODIES(DSA_INDEXER_ENUMERATOR)
};
enum class IndexerLogitsBlocks : int32_t {
  kAuto = 0,
  DSA_INDEXER_LOGITS_BLOCKS(DSA_INDEXER_ENUMERATOR)
};
enum class IndexerLogitsKeys : int32_t {
  kAuto = 0,
  DSA_INDEXER_LOGITS_KEYS(DSA_INDEXER_ENUMERATOR)
};
enum class IndexerLogitsGroups : int32_t {
  kAuto = 0,
  DSA_INDEXER_LOGITS_GROUPS(DSA_INDEXER_ENUMERATOR)
};
#undef DSA_INDEXER_ENUMERATOR

// What IndexerLogitsLaunch runs. Every field kAuto (the default, and what
// the op layer passes) lets the heuristics choose; tests and benchmarks set
// a field to run that variant instead, and the launch answers
// kInvalidArgument, saying why, where it cannot run. A blocks, keys or
// groups choice other than kAuto asks for the persistent body.
struct IndexerLogitsOptions {
  IndexerLogitsBody body = IndexerLogitsBody::kAuto;
  IndexerLogitsBlocks blocks = IndexerLogitsBlocks::kAuto;
  IndexerLogitsKeys keys = IndexerLogitsKeys::kAuto;
  IndexerLogitsGroups groups = IndexerLogitsGroups::kAuto;
};

// The top-k kernel's instances (indexer/heuristics.h picks one per launch;
// topk.hip.cc says what they do): one block a row.
//   staged_512     512 threads, 4 blocks a multiprocessor; launches of width
//                  <= kTopKStageKeys (config.h), each window staged in shared
//                  memory (prefill rows);
//   streamed_1024  1024 threads, any width, each row read from global memory
//                  at every walk, its threshold first guessed from a sample
//                  of the row (a few long decode rows: more loads in flight
//                  a row);
//   streamed_512   512 threads of half the loads each, 4 blocks a
//                  multiprocessor, sampled too (many long rows).
#define DSA_INDEXER_TOPK_PATHS(X)   \
  X(kStaged512, "staged_512")       \
  X(kStreamed1024, "streamed_1024") \
  X(kStreamed512, "streamed_512")

#define DSA_INDEXER_ENUMERATOR(name, text) name,
enum class IndexerTopKPath : int32_t {
  kAuto = 0,
  DSA_INDEXER_TOPK_PATHS(DSA_INDEXER_ENUMERATOR)
};
#undef DSA_INDEXER_ENUMERATOR

// What IndexerTopKLaunch runs: kAuto (the default, and what the op layer
// passes) lets the heuristics choose; tests and benchmarks name a path to run
// it instead. Every path gives the same result.
struct IndexerTopKOptions {
  IndexerTopKPath path = IndexerTopKPath::kAuto;
};

struct IndexerTopKParams {
  const float* logits = nullptr;           // [rows, logits_stride]
  const int32_t* row_key_start = nullptr;  // [rows]
  const int32_t* row_key_end = nullptr;    // [rows], <= width
  int32_t* topk_indices = nullptr;         // [rows, topk_stride], output
  int64_t rows = 0;
  int64_t width = 0;
  int64_t logits_stride = 0;  // floats between rows (>= width)
  int32_t topk = 0;
  int64_t topk_stride = 0;  // int32 elements between rows (>= topk)
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_INDEXER_PARAMS_H_
