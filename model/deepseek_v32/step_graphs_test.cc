// StepGraphs over a fake platform's graph calls: a run direct the first
// time, recorded the second, replayed after; a run per key; an aborted
// recording discarded and never tried again; a failed recording an error
// and every later run direct; a platform without graphs always direct; the
// bound on kept graphs; every graph destroyed with the cache.
#include "model/deepseek_v32/step_graphs.h"

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/plugin_api.h"
#include "testing/status_matchers.h"

namespace dsa::model::deepseek_v32 {
namespace {

using ::dsa::testing::IsOk;
using ::dsa::testing::StatusIs;
using ::testing::HasSubstr;

// What the fake platform was asked, and how it answers.
struct Calls {
  int begins = 0, ends = 0, launches = 0, destroys = 0, live = 0;
  bool recording = false;
  DsaStatusCode begin_answer = DSA_STATUS_OK;
  DsaStatusCode end_answer = DSA_STATUS_OK;
};
Calls calls;
int graph_tokens[64];

DsaStatusCode CaptureBegin(void*, char* error, size_t error_size) {
  ++calls.begins;
  if (calls.begin_answer != DSA_STATUS_OK) {
    std::snprintf(error, error_size, "no graphs here");
    return calls.begin_answer;
  }
  calls.recording = true;
  return DSA_STATUS_OK;
}
DsaStatusCode CaptureEnd(void*, void** graph, char* error, size_t error_size) {
  ++calls.ends;
  calls.recording = false;
  *graph = nullptr;
  if (calls.end_answer != DSA_STATUS_OK) {
    std::snprintf(error, error_size, "a call during the capture");
    return calls.end_answer;
  }
  *graph = &graph_tokens[calls.live++];
  return DSA_STATUS_OK;
}
DsaStatusCode GraphLaunch(void* graph, void*, char*, size_t) {
  EXPECT_NE(graph, nullptr);
  ++calls.launches;
  return DSA_STATUS_OK;
}
DsaStatusCode GraphDestroy(void*, char*, size_t) {
  ++calls.destroys;
  return DSA_STATUS_OK;
}

DsaPlatformDescriptor Descriptor(bool graphs) {
  DsaPlatformDescriptor d;
  std::memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.platform_id = "fake";
  if (graphs) {
    d.graph_capture_begin = &CaptureBegin;
    d.graph_capture_end = &CaptureEnd;
    d.graph_launch = &GraphLaunch;
    d.graph_destroy = &GraphDestroy;
  }
  return d;
}

int stream_token;
void* const kStream = &stream_token;

class StepGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override { calls = Calls(); }
  // One run of `key` with `ops` ops: how many of them were called.
  int Run(StepGraphs& g, const StepGraphs::Key& key, int ops = 3) {
    EXPECT_THAT(g.Begin(key), IsOk());
    int called = 0;
    for (int i = 0; i < ops; ++i) called += g.replaying() ? 0 : 1;
    EXPECT_THAT(g.End(), IsOk());
    EXPECT_FALSE(g.open());
    return called;
  }
  DsaPlatformDescriptor with_ = Descriptor(true);
  DsaPlatformDescriptor without_ = Descriptor(false);
};

TEST_F(StepGraphsTest, DirectThenRecordedThenReplayedPerKey) {
  {
    StepGraphs g(platform::DeviceRuntime(&with_, "fake"), kStream, true);
    ASSERT_TRUE(g.enabled());
    const StepGraphs::Key a{3, 64, 1, nullptr}, b{3, 128, 1, nullptr};
    EXPECT_EQ(Run(g, a), 3);  // direct
    EXPECT_EQ(calls.begins, 0);
    EXPECT_EQ(Run(g, a), 3);  // recorded: the ops are called, not run
    EXPECT_EQ(calls.begins, 1);
    EXPECT_EQ(calls.ends, 1);
    EXPECT_EQ(calls.launches, 1);  // and the graph launched once
    EXPECT_EQ(Run(g, a), 0);       // replayed
    EXPECT_EQ(Run(g, a), 0);
    EXPECT_EQ(calls.launches, 3);
    EXPECT_EQ(calls.begins, 1);
    EXPECT_EQ(Run(g, b), 3);  // another key: its own first time
    EXPECT_EQ(g.graphs(), 1u);
    EXPECT_EQ(g.launches(), 3);
    // End without a run open is nothing; a run inside another is refused.
    EXPECT_THAT(g.End(), IsOk());
    const StepGraphs::Key c{9, 64, 1, nullptr};
    ASSERT_THAT(g.Begin(c), IsOk());
    EXPECT_THAT(g.Begin(a), StatusIs(absl::StatusCode::kInternal,
                                     HasSubstr("begun inside")));
    EXPECT_THAT(g.End(), IsOk());
  }
  EXPECT_EQ(calls.destroys, 1);  // with the cache
}

TEST_F(StepGraphsTest, WithoutGraphsOrDisabledEveryRunIsDirect) {
  StepGraphs none(platform::DeviceRuntime(&without_, "fake"), kStream, true);
  StepGraphs off(platform::DeviceRuntime(&with_, "fake"), kStream, false);
  StepGraphs no_stream(platform::DeviceRuntime(&with_, "fake"), nullptr, true);
  for (StepGraphs* g : {&none, &off, &no_stream}) {
    EXPECT_FALSE(g->enabled());
    for (int i = 0; i < 4; ++i) EXPECT_EQ(Run(*g, {0, 64, 0, nullptr}), 3);
  }
  EXPECT_EQ(calls.begins, 0);
  EXPECT_EQ(calls.launches, 0);
}

TEST_F(StepGraphsTest, AnAbortedRecordingIsDiscardedAndNotTriedAgain) {
  StepGraphs g(platform::DeviceRuntime(&with_, "fake"), kStream, true);
  const StepGraphs::Key a{1, 64, 0, nullptr};
  EXPECT_EQ(Run(g, a), 3);
  ASSERT_THAT(g.Begin(a), IsOk());  // recording, then an op fails
  EXPECT_TRUE(calls.recording);
  g.Abort();
  EXPECT_FALSE(g.open());
  EXPECT_FALSE(calls.recording);
  EXPECT_EQ(calls.destroys, 1);
  EXPECT_EQ(calls.launches, 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Run(g, a), 3);
  EXPECT_EQ(calls.begins, 1);
  EXPECT_TRUE(g.enabled());  // other runs are still recorded
  const StepGraphs::Key b{2, 64, 0, nullptr};
  Run(g, b);
  Run(g, b);
  EXPECT_EQ(Run(g, b), 0);
}

TEST_F(StepGraphsTest, AFailedRecordingIsAnErrorAndLaterRunsAreDirect) {
  StepGraphs g(platform::DeviceRuntime(&with_, "fake"), kStream, true);
  const StepGraphs::Key a{1, 64, 0, nullptr};
  Run(g, a);
  calls.end_answer = DSA_STATUS_INVALID_ARGUMENT;
  ASSERT_THAT(g.Begin(a), IsOk());
  EXPECT_THAT(g.End(), StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("did not run")));
  EXPECT_FALSE(g.enabled());
  calls.end_answer = DSA_STATUS_OK;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Run(g, a), 3);
  EXPECT_EQ(calls.begins, 1);
}

TEST_F(StepGraphsTest, ADriverWithoutGraphsTurnsThemOff) {
  StepGraphs g(platform::DeviceRuntime(&with_, "fake"), kStream, true);
  calls.begin_answer = DSA_STATUS_UNIMPLEMENTED;
  const StepGraphs::Key a{1, 64, 0, nullptr};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Run(g, a), 3);
  EXPECT_EQ(calls.begins, 1);
  EXPECT_FALSE(g.enabled());
  // Another failure to begin is this run's error.
  StepGraphs h(platform::DeviceRuntime(&with_, "fake"), kStream, true);
  calls.begin_answer = DSA_STATUS_INTERNAL;
  Run(h, a);
  EXPECT_THAT(h.Begin(a), StatusIs(absl::StatusCode::kInternal,
                                   HasSubstr("no graphs here")));
}

TEST_F(StepGraphsTest, AtMostMaxGraphsAreKept) {
  StepGraphs g(platform::DeviceRuntime(&with_, "fake"), kStream, true, 2);
  for (int layer = 0; layer < 4; ++layer) {
    const StepGraphs::Key k{layer, 64, 0, nullptr};
    Run(g, k);
    Run(g, k);
  }
  EXPECT_EQ(g.graphs(), 2u);
  EXPECT_EQ(Run(g, {0, 64, 0, nullptr}), 0);
  EXPECT_EQ(Run(g, {3, 64, 0, nullptr}), 3);
}

}  // namespace
}  // namespace dsa::model::deepseek_v32
