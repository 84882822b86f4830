// GPU kernels of the lightning indexer's scoring: logits over the paged fp8
// indexer K cache, and the per-row top-k. Same semantics as IndexerLogits and
// IndexerTopK in attention/ops.h (and the CPU kernels in
// attention/cpu/indexer_kernels.cc); see there.
//
// The launchers take raw device pointers and sizes, so this header is plain
// C++ (no HIP or CUDA types) and the op layer can call it from code built by
// the host compiler. They enqueue work on `stream` (a hipStream_t /
// cudaStream_t, nullptr for the default stream) and do not synchronise.
//
// The launchers check what they can see without reading device memory
// (pointers, sizes, alignment). The index tensors (requests, windows, block
// table) live on the device; the op layer validates them. The kernels clamp
// every index they read, so an invalid one can give wrong values but never
// reads or writes outside the buffers described here.
#ifndef DSA_ATTENTION_GPU_INDEXER_KERNELS_H_
#define DSA_ATTENTION_GPU_INDEXER_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace dsa::attention::gpu {

enum class LaunchCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,  // a size, pointer or alignment the kernel rejects
  kNoDevice = 2,         // the runtime reports no usable device
  kRuntimeError = 3,     // a runtime call or the launch failed
  kNotBuilt = 4,         // built without --config=cuda / --config=rocm
};

// What a launcher returns: a code and, unless kOk, a message naming what is
// wrong (NUL-terminated).
struct LaunchResult {
  LaunchCode code = LaunchCode::kOk;
  char message[256] = {0};
  bool ok() const { return code == LaunchCode::kOk; }
};

// kNotBuilt for `what`: the answer of every launcher in a build without a
// GPU backend (the *_unbuilt.cc files).
inline LaunchResult NotBuiltResult(const char* what) {
  LaunchResult r;
  r.code = LaunchCode::kNotBuilt;
  std::snprintf(r.message, sizeof(r.message),
                "%s: built without a GPU backend (use --config=cuda or "
                "--config=rocm)",
                what);
  return r;
}

// The fp8 encoding of the query and the cache (the engine's fp8 dtype).
enum class Fp8Encoding : int32_t { kE4m3fn = 0, kE4m3fnuz = 1 };

// Element type of a float tensor a launcher reads or writes (the ops take
// f32 or bf16 activations and weights).
enum class FloatFormat : int32_t { kFloat32 = 0, kBFloat16 = 1 };

// The MLA latent cache's layout (ops.h, LatentCacheFormat): kv_c | k_pe in
// bf16, or vLLM's "fp8_ds_mla" (fp8 kv_c in tiles with fp32 scales, bf16
// k_pe) in either fp8 encoding.
enum class LatentCacheType : int32_t {
  kBFloat16 = 0,
  kFp8E4m3fn = 1,
  kFp8E4m3fnuz = 2,
};

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

// logits[i, j] = sum_h relu(q[i,h] . k[j] * k_scale[j]) * head_weights[i,h]
// for j in [row_key_start[i], row_key_end[i]) of request row_request[i]
// (column j is the request's token j), -inf for every other j < width.
// Heads in {32, 64, 128, 256} with head_dim 128 and block_size a multiple of
// 4 run on the matrix cores; any other shape on a plain-FMA kernel. Built for
// sm_90a (the default CUDA target), e4m3fn data multiplies on wgmma, whose
// fp8 accumulation keeps about 14 bits of each partial sum: a logit is within
// 2^-12 of the sum over heads of |q[h] . k| (abs of each product) * k_scale *
// |head_weight|; every other path is within float32 rounding of it.
LaunchResult IndexerLogitsLaunch(const IndexerLogitsParams& params,
                                 void* stream);

// Which kernel IndexerLogitsLaunch picks for these parameters: "mma" or
// "fma" (for tests and reports).
const char* IndexerLogitsPath(const IndexerLogitsParams& params);

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

// The topk largest logits of each row's window [row_key_start, row_key_end)
// (ties to the lower index, NaN below -inf), written as ascending column
// positions, then -1 padding when the window holds fewer than topk keys.
LaunchResult IndexerTopKLaunch(const IndexerTopKParams& params, void* stream);

// Device memory and timing helpers for tests and benchmarks, so that code
// built by the host compiler needs no GPU runtime headers. Each returns a
// LaunchResult as above.
LaunchResult DeviceMalloc(void** ptr, size_t bytes);
LaunchResult DeviceFree(void* ptr);
LaunchResult CopyToDevice(void* dst, const void* src, size_t bytes);
LaunchResult CopyToHost(void* dst, const void* src, size_t bytes);
LaunchResult DeviceMemset(void* dst, int byte, size_t bytes);
LaunchResult DeviceSynchronize();
// Milliseconds per call of `fn(arg)` on the default stream: `warmup` untimed
// calls, then the median over `iters` calls each timed by device events.
LaunchResult TimeMedianMs(LaunchResult (*fn)(void*), void* arg, int warmup,
                          int iters, float* median_ms);
// "cuda", "rocm" or "none".
const char* GpuBackend();

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_INDEXER_KERNELS_H_
