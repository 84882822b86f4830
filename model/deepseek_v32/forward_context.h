// How the engine runs a forward, besides the batch itself: settings fixed for
// the engine's lifetime (speculative tokens, context parallelism, force-MQA)
// and the per-forward cudagraph state. Together with the requests
// (batch_metadata.h) they are everything the indexer-skip decision reads
// about a forward.
//
// A profile or dummy run is a forward without attention metadata; it is
// expressed by the absence of a BatchMetadata, as engines pass no metadata.
#ifndef DSA_MODEL_DEEPSEEK_V32_FORWARD_CONTEXT_H_
#define DSA_MODEL_DEEPSEEK_V32_FORWARD_CONTEXT_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dsa::model::deepseek_v32 {

// The cudagraph runtime mode of one forward (vLLM's CUDAGraphMode as
// dispatched at run time).
enum class CudagraphMode {
  kNone,       // eager
  kPiecewise,  // attention runs eagerly between captured pieces, so the
               // decision is re-evaluated on every replay
  kFull,       // the whole forward, attention included, replays a graph
};
absl::string_view CudagraphModeName(CudagraphMode mode);  // "none", ...
// InvalidArgument for anything but "none", "piecewise", "full".
absl::StatusOr<CudagraphMode> ParseCudagraphMode(absl::string_view name);

inline constexpr int kMaxSpeculativeTokens = 64;
inline constexpr int kMaxContextParallel = 1024;

// Settings fixed for the engine's lifetime.
struct EngineConfig {
  // MTP draft tokens per step; the indexer's decode threshold is 1 + this.
  int num_speculative_tokens = 0;
  // Prefill context parallelism: the skip stays off, as on CUDA.
  bool prefill_context_parallel = false;
  // Decode context parallel size; > 1 needs a platform whose sparse MLA
  // backend accepts it (ROCm's does not).
  int decode_context_parallel_size = 1;
  // Run every prefill on the sparse MQA path, never dense MHA.
  bool force_mqa = false;
};

// InvalidArgument naming the field unless speculative tokens are in
// [0, kMaxSpeculativeTokens] and the DCP size in [1, kMaxContextParallel].
absl::Status ValidateEngineConfig(const EngineConfig& engine);

// The cudagraph state of one forward.
struct ForwardContext {
  CudagraphMode cudagraph_runtime_mode = CudagraphMode::kNone;
  // Recording a cudagraph: what is recorded must not depend on the batch.
  bool capturing = false;
};

// InvalidArgument when capturing with runtime mode none (a capture is always
// of a piecewise or full graph).
absl::Status ValidateForwardContext(const ForwardContext& forward);

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_FORWARD_CONTEXT_H_
