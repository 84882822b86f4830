// Runs of a layer step's ops recorded once as a graph of the platform's and
// launched after as one unit (plugin API 1.4), so that the host issues the
// ops of a layer whose arguments do not change between steps of one shape
// (norms, projections, ropes, cache writes: everything but the indexer's
// scoring and the attention, whose launches follow each step's lengths) for
// the cost of one launch.
//
// A run is named by a Key: the layer, the step's tokens, the plan's choices
// that change which ops run, and the one buffer its ops write that may move
// between steps. Its first time it runs directly; its second time it is
// recorded (the ops queue nothing while the stream records) and the graph
// launched; from then on only the graph is launched, the ops between Begin
// and End counted but not called (the caller asks replaying()). The
// arguments a recorded op read are the ones it is replayed with: the caller
// keys every host-side value its ops take from the step besides the tokens.
//
// Not thread-safe: one per model, used by the thread that steps it.
#ifndef DSA_MODEL_DEEPSEEK_V32_STEP_GRAPHS_H_
#define DSA_MODEL_DEEPSEEK_V32_STEP_GRAPHS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>

#include "absl/status/status.h"
#include "platform/registry.h"

namespace dsa::model::deepseek_v32 {

class StepGraphs {
 public:
  struct Key {
    int layer = 0;
    int64_t tokens = 0;
    uint32_t variant = 0;          // the plan's choices, as bits
    const void* buffer = nullptr;  // a buffer that may move between steps
    bool operator<(const Key& o) const {
      return std::tie(layer, tokens, variant, buffer) <
             std::tie(o.layer, o.tokens, o.variant, o.buffer);
    }
  };

  // Graphs on `stream` of `runtime` when `enabled` and the platform has
  // them; at most `max_graphs` kept (later runs stay direct).
  StepGraphs(const platform::DeviceRuntime& runtime, void* stream, bool enabled,
             size_t max_graphs = 4096);
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  bool enabled() const { return enabled_; }
  // Between Begin and End of a run whose graph exists: its ops are counted
  // and not called.
  bool replaying() const { return state_ == State::kReplay; }
  // Whether a run is open (Begin without End or Abort).
  bool open() const { return state_ != State::kClosed; }

  // Opens the run `key`: replayed when its graph exists, recorded on its
  // second time, else direct. An error when the recording cannot begin.
  absl::Status Begin(const Key& key);
  // Closes the open run (OK when none is): launches its graph when it was
  // replayed or recorded. A failed recording is an error: its ops did not
  // run. After any failure of the platform's graphs, every later run is
  // direct.
  absl::Status End();
  // Closes an open run after one of its ops failed: a recording is ended
  // and discarded, and the run is never recorded again.
  void Abort();

  size_t graphs() const { return graphs_.size(); }
  int64_t launches() const { return launches_; }  // graph launches so far

 private:
  enum class State { kClosed, kDirect, kRecord, kReplay };
  void DisableAfterFailure();

  platform::DeviceRuntime runtime_;
  void* stream_ = nullptr;
  bool enabled_ = false;
  size_t max_graphs_ = 0;
  State state_ = State::kClosed;
  Key key_;
  void* graph_ = nullptr;  // the open run's, when replayed
  std::map<Key, void*> graphs_;
  std::set<Key> seen_;   // run once, directly
  std::set<Key> never_;  // a recording failed
  int64_t launches_ = 0;
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_STEP_GRAPHS_H_
