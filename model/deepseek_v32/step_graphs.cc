#include "model/deepseek_v32/step_graphs.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dsa::model::deepseek_v32 {

StepGraphs::StepGraphs(const platform::DeviceRuntime& runtime, void* stream,
                       bool enabled, size_t max_graphs)
    : runtime_(runtime),
      stream_(stream),
      enabled_(enabled && stream != nullptr && runtime.has_graphs()),
      max_graphs_(max_graphs) {}

StepGraphs::~StepGraphs() {
  Abort();
  for (const auto& [key, graph] : graphs_) {
    // Nothing to report in a destructor; queued launches still run.
    runtime_.DestroyGraph(graph).IgnoreError();
  }
}

absl::Status StepGraphs::Begin(const Key& key) {
  if (state_ != State::kClosed) {
    return absl::InternalError(absl::StrCat("graph run of layer ", key.layer,
                                            " begun inside that of layer ",
                                            key_.layer));
  }
  key_ = key;
  state_ = State::kDirect;
  if (!enabled_) return absl::OkStatus();
  if (const auto it = graphs_.find(key); it != graphs_.end()) {
    graph_ = it->second;
    state_ = State::kReplay;
    return absl::OkStatus();
  }
  // The first time (or past the bounds) the run is direct; the second it is
  // recorded.
  if (never_.count(key) != 0 || graphs_.size() >= max_graphs_) {
    return absl::OkStatus();
  }
  if (seen_.count(key) == 0) {
    if (seen_.size() < 4 * max_graphs_) seen_.insert(key);
    return absl::OkStatus();
  }
  const absl::Status began = runtime_.BeginGraphCapture(stream_);
  if (absl::IsUnimplemented(began)) {
    DisableAfterFailure();  // a driver without graphs: direct from now on
    return absl::OkStatus();
  }
  if (!began.ok()) return began;
  state_ = State::kRecord;
  return absl::OkStatus();
}

absl::Status StepGraphs::End() {
  const State state = std::exchange(state_, State::kClosed);
  switch (state) {
    case State::kClosed:
    case State::kDirect:
      return absl::OkStatus();
    case State::kReplay:
      ++launches_;
      return runtime_.LaunchGraph(graph_, stream_);
    case State::kRecord:
      break;
  }
  absl::StatusOr<void*> graph = runtime_.EndGraphCapture(stream_);
  if (!graph.ok()) {
    never_.insert(key_);
    DisableAfterFailure();
    return absl::Status(
        graph.status().code(),
        absl::StrCat("layer ", key_.layer, ": recording its ops as a graph ",
                     "failed, so they did not run (later steps run them ",
                     "directly): ", graph.status().message()));
  }
  graphs_.emplace(key_, *graph);
  ++launches_;
  return runtime_.LaunchGraph(*graph, stream_);
}

void StepGraphs::Abort() {
  const State state = std::exchange(state_, State::kClosed);
  if (state != State::kRecord) return;
  never_.insert(key_);
  absl::StatusOr<void*> graph = runtime_.EndGraphCapture(stream_);
  if (graph.ok()) runtime_.DestroyGraph(*graph).IgnoreError();
}

void StepGraphs::DisableAfterFailure() {
  enabled_ = false;
  seen_.clear();
}

}  // namespace dsa::model::deepseek_v32
