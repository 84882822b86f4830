#include "model/deepseek_v32/forward_context.h"

#include "absl/strings/str_cat.h"

namespace dsa::model::deepseek_v32 {

absl::string_view CudagraphModeName(CudagraphMode mode) {
  switch (mode) {
    case CudagraphMode::kNone:
      return "none";
    case CudagraphMode::kPiecewise:
      return "piecewise";
    case CudagraphMode::kFull:
      return "full";
  }
  return "unknown";
}

absl::StatusOr<CudagraphMode> ParseCudagraphMode(absl::string_view name) {
  for (CudagraphMode mode : {CudagraphMode::kNone, CudagraphMode::kPiecewise,
                             CudagraphMode::kFull}) {
    if (name == CudagraphModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown cudagraph mode \"", name,
                   "\"; expected none, piecewise or full"));
}

absl::Status ValidateEngineConfig(const EngineConfig& engine) {
  if (engine.num_speculative_tokens < 0 ||
      engine.num_speculative_tokens > kMaxSpeculativeTokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_speculative_tokens must be in [0, ", kMaxSpeculativeTokens,
        "], got ", engine.num_speculative_tokens));
  }
  if (engine.decode_context_parallel_size < 1 ||
      engine.decode_context_parallel_size > kMaxContextParallel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decode_context_parallel_size must be in [1, ", kMaxContextParallel,
        "], got ", engine.decode_context_parallel_size));
  }
  return absl::OkStatus();
}

absl::Status ValidateForwardContext(const ForwardContext& forward) {
  if (forward.capturing &&
      forward.cudagraph_runtime_mode == CudagraphMode::kNone) {
    return absl::InvalidArgumentError(
        "capturing a cudagraph needs cudagraph runtime mode piecewise or "
        "full, not none");
  }
  return absl::OkStatus();
}

}  // namespace dsa::model::deepseek_v32
