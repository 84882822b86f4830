#include "model/deepseek_v32/forward_context.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

TEST(CudagraphModeTest, RoundTrips) {
  for (CudagraphMode mode : {CudagraphMode::kNone, CudagraphMode::kPiecewise,
                             CudagraphMode::kFull}) {
    ASSERT_OK_AND_ASSIGN(CudagraphMode parsed,
                         ParseCudagraphMode(CudagraphModeName(mode)));
    EXPECT_EQ(parsed, mode);
  }
  EXPECT_THAT(ParseCudagraphMode("FULL_DECODE_ONLY"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("none, piecewise or full")));
}

TEST(ForwardContextTest, CaptureNeedsACudagraphMode) {
  ForwardContext forward;
  forward.capturing = true;
  EXPECT_THAT(ValidateForwardContext(forward),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("piecewise or full")));
  forward.cudagraph_runtime_mode = CudagraphMode::kPiecewise;
  EXPECT_OK(ValidateForwardContext(forward));
}

TEST(EngineConfigTest, Ranges) {
  EXPECT_OK(ValidateEngineConfig({}));
  EngineConfig engine;
  engine.num_speculative_tokens = kMaxSpeculativeTokens;
  engine.decode_context_parallel_size = kMaxContextParallel;
  EXPECT_OK(ValidateEngineConfig(engine));
  engine.decode_context_parallel_size = kMaxContextParallel + 1;
  EXPECT_THAT(ValidateEngineConfig(engine),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("decode_context_parallel_size")));
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
