// The table (table.h).
#include "bench/prefill/report/table.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dsa::prefill_bench {
namespace {

// The columns, each as wide as its widest cell; the last is not padded.
enum Column {
  kWorkload,
  kPrompts,
  kArm,
  kMedian,
  kEveryRun,
  kCpu,
  kScored,
  kLaunches,
  kIssueTail,
  kChange,
  kCpuChange,
  kToTheBit,
  kNumColumns
};
constexpr size_t kWidths[kNumColumns] = {9, 10, 12, 8,  18, 8,
                                         9, 8,  15, 30, 30, 0};
using Row = std::vector<std::string>;

std::string PadRight(absl::string_view s, size_t width) {
  std::string out(s);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

void AppendRow(const Row& cells, std::string& out) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    line +=
        i + 1 < cells.size() ? PadRight(cells[i], kWidths[i]) + " " : cells[i];
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  absl::StrAppend(&out, line, "\n");
}

std::string SignedPct(double pct) { return absl::StrFormat("%+.1f%%", pct); }

std::string ChangeText(const Change& c) {
  if (!c.pct) return "";
  std::string text = SignedPct(*c.pct);
  if (c.min_pct) {
    absl::StrAppend(&text, " [", absl::StrFormat("%+.1f", *c.min_pct), ", ",
                    absl::StrFormat("%+.1f", *c.max_pct), "] ", c.verdict);
  }
  return text;
}

// The last column: how the arm's outputs and caches compare with the
// reference's.
std::string ToTheBit(const ArmResult& a) {
  const std::string ranks =
      !a.ranks_agree.has_value()
          ? ""
          : (*a.ranks_agree ? ", ranks equal" : ", ranks DIFFER");
  if (a.spec->role == ArmRole::kReference) {
    return absl::StrCat(a.deterministic ? "reference" : "runs DIFFER", ranks);
  }
  if (!a.outputs_equal.has_value()) return ranks.empty() ? "" : ranks.substr(2);
  std::string text = *a.outputs_equal ? "outputs equal" : "outputs DIFFER";
  if (a.caches_equal.has_value()) {
    absl::StrAppend(&text,
                    *a.caches_equal ? ", caches equal" : ", caches DIFFER");
  } else if (a.spec->no_indexer) {
    absl::StrAppend(&text, ", no indexer keys");
  }
  return absl::StrCat(text, ranks);
}

Row ArmRow(const WorkloadResult& w, const ArmResult& a) {
  Row cells(kNumColumns);
  cells[kArm] = a.spec->table_label;
  if (!a.ran) {
    cells[kMedian] = "n/a";
    cells[kToTheBit] = a.not_run_reason;
    return cells;
  }
  cells[kMedian] = FormatMs(a.median_ttft_ms);
  std::vector<std::string> runs;
  for (double t : a.ttft_ms) runs.push_back(FormatMs(t));
  cells[kEveryRun] = absl::StrJoin(runs, " / ");
  cells[kCpu] = FormatMs(a.median_ttft_cpu_ms);
  cells[kScored] = absl::StrCat(a.indexer_scored, "/", a.indexer_total);
  cells[kLaunches] = absl::StrFormat("%.1f", a.launches_per_step);
  cells[kIssueTail] = a.host_issue_ms && a.device_tail_ms
                          ? absl::StrCat(FormatMs(*a.host_issue_ms), " / ",
                                         FormatMs(*a.device_tail_ms))
                          : "n/a";
  switch (a.spec->role) {
    case ArmRole::kCandidate:
      cells[kChange] = ChangeText(w.change);
      cells[kCpuChange] = ChangeText(w.change_cpu);
      break;
    case ArmRole::kBound:
      if (w.bound_change_pct) {
        cells[kChange] =
            absl::StrCat(SignedPct(*w.bound_change_pct), " (bound)");
      }
      if (w.bound_change_cpu_pct) {
        cells[kCpuChange] =
            absl::StrCat(SignedPct(*w.bound_change_cpu_pct), " (bound)");
      }
      break;
    case ArmRole::kReference:
      break;
  }
  cells[kToTheBit] = ToTheBit(a);
  return cells;
}

// --step_graphs, where graphs ran: the graph launches a step per workload and
// arm (none on a platform without graphs: no line).
void AppendGraphLaunches(const BenchResult& r, std::string& out) {
  std::vector<std::string> parts;
  for (const WorkloadResult& w : r.workloads) {
    for (const ArmResult& a : w.arms) {
      if (a.graph_launches_per_step <= 0) continue;
      parts.push_back(
          absl::StrCat(w.workload.name, " ", a.spec->name, " ",
                       absl::StrFormat("%.1f", a.graph_launches_per_step)));
    }
  }
  if (parts.empty()) return;
  absl::StrAppend(&out,
                  "graph launches a step (--step_graphs: each launched a "
                  "layer's run of the ops launch/step counts): ",
                  absl::StrJoin(parts, ", "), ".\n");
}

// --op_times: where each profiled step's time goes, the largest op first.
void AppendOpTimes(const BenchResult& r, std::string& out) {
  const bool host_clock = r.op_clock == "host";
  bool header = false;
  for (const WorkloadResult& w : r.workloads) {
    for (const ArmResult& a : w.arms) {
      if (!a.op_times) continue;
      if (!header) {
        absl::StrAppend(
            &out,
            "\nop times of each workload's first step, run once more "
            "with every op timed ",
            host_clock ? "on the host clock around its call alone, nothing "
                         "synchronised (--op_clock=host): the host's share "
                         "of each op, in ms, and per call in us"
                       : "between synchronisations",
            " (--op_times):\n");
        header = true;
      }
      const OpProfile& profile = *a.op_times;
      std::vector<std::pair<std::string, double>> ops = OpsThatRan(profile.ms);
      std::sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) {
        return x.second > y.second;
      });
      std::vector<std::string> parts;
      for (const auto& [op, ms] : ops) {
        std::string part = absl::StrCat(op, " ", FormatMs(ms));
        const int calls = CallsOf(profile.calls, op);
        if (host_clock && calls > 0) {
          absl::StrAppend(&part, " (", calls, " x ",
                          absl::StrFormat("%.1f", 1000 * ms / calls), " us)");
        }
        parts.push_back(std::move(part));
      }
      const double step = profile.ms.total();
      const double scoring = profile.ms.indexer_scoring;
      absl::StrAppend(
          &out, "  ", PadRight(w.workload.name, 8), " ",
          PadRight(a.spec->name, 10), " step ", FormatMs(step),
          " ms, indexer scoring ", FormatMs(scoring), " ms (",
          absl::StrFormat("%.1f", step > 0 ? 100 * scoring / step : 0.0), "%)");
      if (host_clock) {
        absl::StrAppend(&out, ", host issue ", FormatMs(profile.host_issue_ms),
                        " ms for ", profile.calls.total(), " calls");
      }
      absl::StrAppend(&out, ": ", absl::StrJoin(parts, ", "), "\n");
    }
  }
}

}  // namespace

std::string FormatTable(const BenchResult& r) {
  std::string out;
  const PlatformInfo& p = r.platform;
  absl::StrAppend(
      &out, "prefill_bench: ", r.model, " (", r.main_layers, " layers + ",
      r.mtp_layers, " MTP, ", r.indexer_layers, " with an indexer, index_topk ",
      r.index_topk,
      r.spec_tokens > 0 ? absl::StrCat(", MTP=", r.spec_tokens) : "", ") on ",
      p.name, " ", p.arch,
      p.emulated ? absl::StrCat(" (EMULATED: ROCm's capabilities, executing "
                                "the ",
                                p.executes_on, " kernels)")
                 : "",
      ", commit ", r.commit, "\n");
  if (!p.note.empty()) absl::StrAppend(&out, p.note, "\n");
  if (!r.model_source.empty()) {
    absl::StrAppend(&out, "model: ", r.model_source, "\n");
  }
  if (!r.tp_note.empty()) absl::StrAppend(&out, r.tp_note, "\n");
  absl::StrAppend(
      &out, "steps of at most ", r.max_num_batched_tokens, " tokens, ",
      r.kv_cache_dtype.empty() ? "bfloat16" : r.kv_cache_dtype,
      " latent cache, ", r.weights.empty() ? "bfloat16" : r.weights,
      " weights; ", r.runs, r.runs == 1 ? " run" : " runs",
      " per arm after a warm-up, the arms' steps interleaved in "
      "ABBA order; a run's TTFT is the median over its prompts (the "
      "read-back of every hidden state for the arms' comparison left out)"
      "\n\n");
  AppendRow({"workload", "prompts", "arm", "median", "every run", "CPU",
             "scored", "launch/", "step: issue /", "TTFT vs main [spread]",
             "CPU TTFT vs main [spread]", "vs main, to the bit"},
            out);
  AppendRow({"", "x tokens", "", "TTFT ms", "TTFT ms", "TTFT ms", "of total",
             "step", "tail ms", "", "", ""},
            out);
  for (const WorkloadResult& w : r.workloads) {
    bool first = true;
    for (const ArmResult& a : w.arms) {
      Row cells = ArmRow(w, a);
      if (first) {
        cells[kWorkload] = w.workload.name;
        cells[kPrompts] =
            absl::StrCat(w.workload.prompts, " x ", w.workload.prompt_len);
      }
      first = false;
      AppendRow(cells, out);
    }
  }
  out += "\n";
  for (const ArmSpec& arm : kArms) {
    if (arm.footnote != nullptr) absl::StrAppend(&out, arm.footnote, "\n");
  }
  absl::StrAppend(
      &out,
      "CPU TTFT: the same on a clock of the process's CPU time (the host work, "
      "which other load on the machine does not stretch).\n",
      "[spread]: the change within each round (the arms' steps interleaved); "
      "faster/slower only when every round is beyond ",
      absl::StrFormat("%.0f", kNoiseFloorPct), "% the same way.\n",
      "scored of total: indexer-layer calls of one run that ran logits + "
      "top-k; launch/step: attention ops launched per step (every op, the "
      "dense ones too: launches_per_step_all_ops in the JSON).\n",
      "step: issue / tail: ", r.gpu_timing_note, ".\n");
  AppendGraphLaunches(r, out);
  AppendOpTimes(r, out);
  return out;
}

}  // namespace dsa::prefill_bench
