// BenchResult to BenchResultJson, and its JSON (json.h).
#include "bench/prefill/report/json.h"

#include <cmath>
#include <cstdlib>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"

namespace dsa::prefill_bench {
namespace {

// A figure as the JSON keeps it: six significant digits, far finer than a
// timing's run-to-run spread (and what the JSON held before its schema was
// a proto); none for a value that is not finite, which JSON cannot hold.
std::optional<double> Figure(double v) {
  if (!std::isfinite(v)) return std::nullopt;
  return std::strtod(absl::StrFormat("%.6g", v).c_str(), nullptr);
}
std::optional<double> Figure(const std::optional<double>& v) {
  return v ? Figure(*v) : std::nullopt;
}

// Sets `field` of `message` to `value`'s figure, if it has one.
#define DSA_SET_FIGURE(message, field, value) \
  if (const std::optional<double> f = Figure(value)) (message)->set_##field(*f)

void FillChange(const Change& c, BenchResultJson::Change* out) {
  DSA_SET_FIGURE(out, pct, c.pct);
  if (c.min_pct && c.max_pct) {
    for (const std::optional<double>& v : {c.min_pct, c.max_pct}) {
      if (const std::optional<double> f = Figure(v)) out->add_range_pct(*f);
    }
  }
  if (!c.verdict.empty()) out->set_verdict(c.verdict);
}

// `op_clock`: the run's --op_clock (BenchResult::op_clock).
void FillArm(const ArmResult& a, const std::string& op_clock,
             BenchResultJson::Arm* out) {
  for (double t : a.ttft_ms) out->add_ttft_ms(Figure(t).value_or(NAN));
  for (double t : a.ttft_cpu_ms) out->add_ttft_cpu_ms(Figure(t).value_or(NAN));
  if (a.ran) {
    DSA_SET_FIGURE(out, median_ttft_ms, a.median_ttft_ms);
    DSA_SET_FIGURE(out, median_ttft_cpu_ms, a.median_ttft_cpu_ms);
    out->mutable_indexer_calls()->set_scored(
        static_cast<int32_t>(a.indexer_scored));
    out->mutable_indexer_calls()->set_total(
        static_cast<int32_t>(a.indexer_total));
    DSA_SET_FIGURE(out, launches_per_step, a.launches_per_step);
    DSA_SET_FIGURE(out, launches_per_step_all_ops, a.all_launches_per_step);
    if (a.graph_launches_per_step > 0) {  // absent: none (no graphs here)
      DSA_SET_FIGURE(out, graph_launches_per_step, a.graph_launches_per_step);
    }
  }
  DSA_SET_FIGURE(out, host_issue_ms, a.host_issue_ms);
  DSA_SET_FIGURE(out, device_tail_ms, a.device_tail_ms);
  DSA_SET_FIGURE(out, prepare_ms, a.prepare_ms);
  DSA_SET_FIGURE(out, read_back_ms, a.read_back_ms);
  if (a.op_times) {
    const model::deepseek_v32::OpTimes& t = a.op_times->ms;
    const model::deepseek_v32::OpCallCounts& c = a.op_times->calls;
    BenchResultJson::OpTimes* times = out->mutable_op_times();
    times->set_step_ms(Figure(t.total()).value_or(NAN));
    times->set_indexer_scoring_ms(Figure(t.indexer_scoring).value_or(NAN));
    times->set_clock(op_clock);
    times->set_step_host_issue_ms(
        Figure(a.op_times->host_issue_ms).value_or(NAN));
    BenchResultJson::OpMs* ms = times->mutable_ms();
    BenchResultJson::OpCalls* calls = times->mutable_calls();
#define DSA_SET_OP_MS(op)                     \
  if (t.op > 0) DSA_SET_FIGURE(ms, op, t.op); \
  if (c.op > 0) calls->set_##op(c.op);
    DSA_STEP_OPS(DSA_SET_OP_MS)
#undef DSA_SET_OP_MS
  }
  if (a.outputs_equal) out->set_outputs_equal_to_main(*a.outputs_equal);
  if (a.caches_equal) out->set_caches_equal_to_main(*a.caches_equal);
  if (a.ranks_agree) out->set_ranks_equal(*a.ranks_agree);
  out->set_bound(a.spec->role == ArmRole::kBound);
  out->set_ran(a.ran);
  if (!a.not_run_reason.empty()) out->set_not_run_reason(a.not_run_reason);
}

// The field of BenchResultJson.Arms named as `arm`.
absl::StatusOr<BenchResultJson::Arm*> ArmField(const ArmSpec& arm,
                                               BenchResultJson::Arms* arms) {
  const google::protobuf::FieldDescriptor* field =
      BenchResultJson::Arms::descriptor()->FindFieldByName(arm.name);
  if (field == nullptr ||
      field->message_type() != BenchResultJson::Arm::descriptor()) {
    return absl::InternalError(
        absl::StrCat("arm ", arm.name, " has no field in result.proto's Arms"));
  }
  return static_cast<BenchResultJson::Arm*>(
      arms->GetReflection()->MutableMessage(arms, field));
}

}  // namespace

absl::StatusOr<BenchResultJson> ToProto(const BenchResult& r) {
  BenchResultJson out;
  BenchResultJson::Platform* p = out.mutable_platform();
  p->set_name(r.platform.name);
  p->set_arch(r.platform.arch);
  p->set_emulated(r.platform.emulated);
  p->set_executes_on(r.platform.executes_on);
  p->set_is_cuda_alike(r.platform.is_cuda_alike);
  p->set_note(r.platform.note);
  BenchResultJson::Model* m = out.mutable_model();
  m->set_name(r.model);
  m->set_source(r.model_source);
  m->set_main_layers(r.main_layers);
  m->set_mtp_layers(r.mtp_layers);
  m->set_indexer_layers(r.indexer_layers);
  m->set_index_topk(static_cast<int32_t>(r.index_topk));
  m->set_spec_tokens(r.spec_tokens);
  out.set_commit(r.commit);
  out.set_runs(r.runs);
  out.set_max_num_batched_tokens(
      static_cast<int32_t>(r.max_num_batched_tokens));
  out.set_block_size(r.block_size);
  out.set_num_blocks(r.num_blocks);
  out.set_kv_cache_dtype(r.kv_cache_dtype);
  BenchResultJson::TensorParallel* tp = out.mutable_tensor_parallel();
  tp->set_ranks(r.tp);
  tp->set_indexer(r.indexer_tp.empty() ? "replicated" : r.indexer_tp);
  tp->set_ranks_run(r.ranks_run);
  tp->set_note(r.tp_note);
  out.set_weights(r.weights.empty() ? "bfloat16" : r.weights);
  out.set_step_graphs(r.step_graphs);
  out.set_gpu_timing_note(r.gpu_timing_note);
  for (const WorkloadResult& w : r.workloads) {
    BenchResultJson::Workload* wj = out.add_workloads();
    wj->set_name(w.workload.name);
    wj->set_prompts(w.workload.prompts);
    wj->set_prompt_len(static_cast<int32_t>(w.workload.prompt_len));
    wj->set_seed_prompt_len(static_cast<int32_t>(w.workload.seed_prompt_len));
    wj->set_concurrency(w.workload.concurrency);
    wj->set_steps(w.steps);
    for (const ArmResult& a : w.arms) {
      absl::StatusOr<BenchResultJson::Arm*> arm =
          ArmField(*a.spec, wj->mutable_arms());
      if (!arm.ok()) return arm.status();
      FillArm(a, r.op_clock, *arm);
    }
    DSA_SET_FIGURE(wj, change_pct, w.change.pct);
    FillChange(w.change, wj->mutable_change());
    FillChange(w.change_cpu, wj->mutable_change_cpu());
    DSA_SET_FIGURE(wj, bound_change_pct, w.bound_change_pct);
    DSA_SET_FIGURE(wj, bound_change_cpu_pct, w.bound_change_cpu_pct);
    if (w.outputs_equal) wj->set_outputs_equal(*w.outputs_equal);
  }
  return out;
}

absl::StatusOr<std::string> ToJson(const BenchResult& result) {
  absl::StatusOr<BenchResultJson> message = ToProto(result);
  if (!message.ok()) return message.status();
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  // false, 0 and an empty list are figures, not absent ones.
  options.always_print_primitive_fields = true;
  std::string out;
  const auto status =
      google::protobuf::util::MessageToJsonString(*message, &out, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print the result as JSON: ",
                                            std::string(status.message())));
  }
  if (out.empty() || out.back() != '\n') out += "\n";
  return out;
}

#undef DSA_SET_FIGURE

}  // namespace dsa::prefill_bench
