#include "model/deepseek_v32/model_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/fp8.h"
#include "model/deepseek_v32/model_runner_internal.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

// A run of internal tokens whose caller rows are consecutive too.
struct RowRun {
  int64_t internal = 0;  // first internal token
  int64_t caller = 0;    // its caller row
  int64_t count = 0;
};
std::vector<RowRun> RowRuns(const std::vector<int64_t>& token_source) {
  std::vector<RowRun> runs;
  for (int64_t t = 0; t < static_cast<int64_t>(token_source.size()); ++t) {
    if (!runs.empty() &&
        token_source[t] == runs.back().caller + runs.back().count) {
      ++runs.back().count;
    } else {
      runs.push_back({t, token_source[t], 1});
    }
  }
  return runs;
}

}  // namespace

DeepseekV32Model::DeepseekV32Model(LayerPlanner planner, RuntimeOptions options,
                                   BlockTables blocks)
    : planner_(std::move(planner)),
      options_(options),
      blocks_(std::move(blocks)) {}

DeepseekV32Model::~DeepseekV32Model() {
  // The buffers are freed on the model's device; a failure to bind leaves
  // the calling thread's device, on which the frees then fail harmlessly.
  if (shared_ != nullptr)
    shared_->runtime.BindDevice(options_.device).IgnoreError();
}

absl::StatusOr<std::vector<float>> DeepseekV32Model::ReadWeight(
    int layer, WeightId id) const {
  if (layer < 0 || layer >= static_cast<int>(layers_.size()) ||
      static_cast<int>(id) < 0 || static_cast<int>(id) >= kNumWeightIds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no layer ", layer, " or no weight ", static_cast<int>(id)));
  }
  const Layer& l = *layers_[layer];
  const int i = static_cast<int>(id);
  if (l.weights[i] == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("layer ", layer, " has no weight ", static_cast<int>(id)));
  }
  DSA_RETURN_IF_ERROR(shared_->stream.Synchronize());
  const int64_t elements = l.rows[i] * l.cols[i];
  if (attention::IsFp8(l.dtype[i])) {
    // Codes times their blocks' scales.
    std::vector<uint8_t> codes(static_cast<size_t>(elements));
    DSA_RETURN_IF_ERROR(shared_->runtime.CopyDeviceToHost(
        codes.data(), l.weights[i], codes.size()));
    const int64_t col_blocks = attention::Fp8Blocks(l.cols[i]);
    std::vector<float> scales(l.scales[i].bytes() / sizeof(float));
    DSA_RETURN_IF_ERROR(
        l.scales[i].CopyToHost(scales.data(), l.scales[i].bytes()));
    const attention::Fp8Traits traits = attention::Fp8TraitsOf(l.dtype[i]);
    std::vector<float> out(codes.size());
    for (int64_t r = 0; r < l.rows[i]; ++r) {
      for (int64_t c = 0; c < l.cols[i]; ++c) {
        const int64_t e = r * l.cols[i] + c;
        out[e] = attention::Fp8ToFloat(codes[e], traits) *
                 scales[(r / attention::kFp8BlockSize) * col_blocks +
                        c / attention::kFp8BlockSize];
      }
    }
    return out;
  }
  std::vector<uint16_t> bits(static_cast<size_t>(elements));
  DSA_RETURN_IF_ERROR(shared_->runtime.CopyDeviceToHost(
      bits.data(), l.weights[i], bits.size() * 2));
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    out[i] = attention::Bf16ToFloat(bits[i]);
  }
  return out;
}

absl::StatusOr<std::vector<uint8_t>> DeepseekV32Model::ReadLatentCache(
    int layer) const {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no layer ", layer));
  }
  const DeviceBuffer& b = layers_[layer]->latent_cache;
  std::vector<uint8_t> host(b.bytes());
  DSA_RETURN_IF_ERROR(shared_->stream.Synchronize());
  DSA_RETURN_IF_ERROR(b.CopyToHost(host.data(), host.size()));
  return host;
}

absl::StatusOr<std::vector<uint8_t>> DeepseekV32Model::ReadIndexerKCache(
    int layer) const {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no layer ", layer));
  }
  const DeviceBuffer& b = layers_[layer]->indexer_k_cache;
  std::vector<uint8_t> host(b.bytes());
  if (!host.empty()) {
    DSA_RETURN_IF_ERROR(shared_->stream.Synchronize());
    DSA_RETURN_IF_ERROR(b.CopyToHost(host.data(), host.size()));
  }
  return host;
}

absl::StatusOr<StepOutput> DeepseekV32Model::Step(
    const ForwardContext& forward, absl::Span<const StepRequest> requests,
    absl::Span<const float> hidden, const StepOptions& step_options) {
  return Step(forward, requests, hidden, {}, step_options);
}

absl::StatusOr<StepOutput> DeepseekV32Model::Step(
    const ForwardContext& forward, absl::Span<const StepRequest> requests,
    absl::Span<const float> hidden, absl::Span<const float> mtp_embeddings,
    const StepOptions& step_options) {
  absl::StatusOr<StepOutput> result =
      StepOnce(forward, requests, hidden, mtp_embeddings, step_options);
  void* group = options_.tensor_parallel.group;
  if (result.ok() || group == nullptr) return result;
  // The other ranks would wait for this one in their next collective
  // forever: the group is aborted, so that their steps fail too. The ranks
  // go on only in a new group (new models).
  const absl::Status aborted = shared_->runtime.AbortCollectiveGroup(group);
  return absl::Status(
      result.status().code(),
      absl::StrCat(result.status().message(), "; rank ",
                   options_.tensor_parallel.rank,
                   aborted.ok() ? " aborted its tensor-parallel group"
                                : " could not abort its tensor-parallel "
                                  "group: ",
                   aborted.ok() ? "" : aborted.message()));
}

absl::StatusOr<StepOutput> DeepseekV32Model::StepOnce(
    const ForwardContext& forward, absl::Span<const StepRequest> requests,
    absl::Span<const float> hidden, absl::Span<const float> mtp_embeddings,
    const StepOptions& step_options) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point step_begin = Clock::now();
  DSA_RETURN_IF_ERROR(shared_->runtime.BindDevice(options_.device));
  const ModelConfig& config = planner_.config();
  const DeepseekV32Config& c = config.proto();
  const int64_t hidden_size = c.hidden_size();

  // Everything the batch is checked for happens before any cache block is
  // allocated: the planner's classification, then this runtime's limits.
  const std::vector<Request> classified = ToRequests(requests);
  DSA_ASSIGN_OR_RETURN(ForwardPlan plan,
                       planner_.PlanForward(forward, classified));
  const int64_t tokens = plan.metadata->num_tokens;
  if (tokens > options_.max_num_batched_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("step: ", tokens, " tokens exceed max_num_batched_tokens ",
                     options_.max_num_batched_tokens));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].num_context_tokens + requests[i].num_new_tokens >
        options_.max_model_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step: request ", i, " reaches ",
          requests[i].num_context_tokens + requests[i].num_new_tokens,
          " tokens, above max_model_len ", options_.max_model_len));
    }
  }
  if (options_.no_indexer) {
    // Checked here, before any block is allocated: without an indexer only
    // prefills on the dense branch have what their attention reads.
    for (const LayerPlan& layer_plan : plan.layers) {
      if (plan.metadata->mla.num_decode_tokens > 0 ||
          layer_plan.prefill_branch != PrefillBranch::kDenseMha) {
        return absl::FailedPreconditionError(absl::StrCat(
            "step: no_indexer (a benchmark bound) runs only prefills on the "
            "dense MHA branch; layer ",
            layer_plan.layer, " takes the ",
            PrefillBranchName(layer_plan.prefill_branch), " branch with ",
            plan.metadata->mla.num_decode_tokens,
            " decode tokens and needs the indexer's top-k"));
      }
    }
  }
  if (static_cast<int64_t>(hidden.size()) != tokens * hidden_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("step: hidden has ", hidden.size(), " values, expected ",
                     tokens, " tokens x ", hidden_size));
  }
  const int64_t num_mtp = config.num_mtp_layers();
  const int64_t mtp_values = static_cast<int64_t>(mtp_embeddings.size());
  if (mtp_values != 0 && mtp_values != tokens * hidden_size &&
      mtp_values != num_mtp * tokens * hidden_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("step: mtp_embeddings has ", mtp_values,
                     " values, expected 0, ", tokens, " tokens x ", hidden_size,
                     " or ", num_mtp, " MTP layers x that"));
  }
  // The device memory the step needs beyond what is reserved (the
  // indexer's workspace and top-k grow to a step larger than any before
  // without a profile run), checked against what the platform reports free
  // and allocated now: a step that does not fit is refused before anything
  // is written.
  bool scores = false, indexes = false;
  for (const LayerPlan& layer_plan : plan.layers) {
    scores = scores || layer_plan.indexer.action == IndexerAction::kScore;
    indexes = indexes || layer_plan.k_cache_write ||
              layer_plan.indexer.action == IndexerAction::kScore;
  }
  if (indexes && !options_.no_indexer) {
    int64_t max_seq_len = 0;
    for (const StepRequest& r : requests) {
      max_seq_len =
          std::max(max_seq_len, r.num_context_tokens + r.num_new_tokens);
    }
    DSA_RETURN_IF_ERROR(
        Annotate(ReserveIndexerWorkspace(tokens, max_seq_len, scores), "step"));
  }
  DSA_ASSIGN_OR_RETURN(StepLayout layout,
                       blocks_.PrepareStep(requests, plan.metadata->mla));
  absl::StatusOr<StepOutput> result =
      RunStep(std::move(plan), layout, hidden, mtp_embeddings, step_options,
              step_begin);
  if (result.ok()) return result;
  // A failed step leaves nothing a later one reads: none of its device work
  // is still running, and its requests' cached lengths and blocks are what
  // they were before it (the slots of its new tokens, which it may have
  // written in part, belong to no cached token again).
  absl::Status status = result.status();
  if (absl::Status drained = shared_->stream.Synchronize(); !drained.ok()) {
    status = absl::Status(
        status.code(),
        absl::StrCat(status.message(), " (then, waiting for the device: ",
                     drained.message(), ")"));
  }
  blocks_.UndoStep(requests, layout);
  return status;
}

absl::StatusOr<StepOutput> DeepseekV32Model::RunStep(
    ForwardPlan plan, const StepLayout& layout, absl::Span<const float> hidden,
    absl::Span<const float> mtp_embeddings, const StepOptions& step_options,
    std::chrono::steady_clock::time_point step_begin) {
  using Clock = std::chrono::steady_clock;
  const ModelConfig& config = planner_.config();
  const int64_t hidden_size = config.proto().hidden_size();
  const int64_t tokens = layout.num_tokens;
  const int64_t num_mtp = config.num_mtp_layers();
  const int64_t mtp_values = static_cast<int64_t>(mtp_embeddings.size());

  // The step's inputs, uploaded once: index tensors shared by every layer
  // and the hidden states in internal order.
  Shared& s = *shared_;
  const DeviceRuntime& rt = s.runtime;
  const DeviceStream& stream = s.stream;
  std::vector<int32_t> key_start(tokens, 0), key_end(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    key_end[t] = static_cast<int32_t>(layout.positions[t] + 1);
  }
  std::vector<int32_t>& prefill_qsl = s.host_prefill_query_start_loc;
  prefill_qsl.clear();
  for (int r = layout.num_decode_requests; r <= layout.num_requests; ++r) {
    prefill_qsl.push_back(layout.query_start_loc[r] -
                          layout.query_start_loc[layout.num_decode_requests]);
  }
  s.host_seq_lens = layout.seq_lens;
  DSA_RETURN_IF_ERROR(
      UploadInto(stream, s.positions, layout.positions, "positions"));
  DSA_RETURN_IF_ERROR(
      UploadInto(stream, s.slot_mapping, layout.slot_mapping, "slot_mapping"));
  DSA_RETURN_IF_ERROR(
      UploadInto(stream, s.block_table, layout.block_table, "block_table"));
  DSA_RETURN_IF_ERROR(
      UploadInto(stream, s.seq_lens, s.host_seq_lens, "seq_lens"));
  DSA_RETURN_IF_ERROR(UploadInto(stream, s.token_request, layout.token_request,
                                 "token_request"));
  DSA_RETURN_IF_ERROR(UploadInto(stream, s.prefill_query_start_loc, prefill_qsl,
                                 "prefill_query_start_loc"));
  DSA_RETURN_IF_ERROR(
      UploadInto(stream, s.row_key_start, key_start, "row_key_start"));
  DSA_RETURN_IF_ERROR(
      UploadInto(stream, s.row_key_end, key_end, "row_key_end"));
  // Internal token t is the caller's row token_source[t]; requests keep
  // their rows together, so a run of consecutive rows moves in one copy (one
  // run for a batch already in internal order) and no host staging is needed.
  const std::vector<RowRun> runs = RowRuns(layout.token_source);
  for (const RowRun& run : runs) {
    DSA_RETURN_IF_ERROR(Annotate(
        stream.CopyHostToDevice(
            Offset<float>(act_->residual.data(), run.internal * hidden_size),
            hidden.data() + run.caller * hidden_size,
            static_cast<size_t>(run.count * hidden_size) * sizeof(float)),
        "step: uploading the hidden states"));
  }
  // The MTP layers' token input in internal order, zero at position 0: the
  // caller's rows moved as the hidden states are (a copy per run, no host
  // staging), or without MTP embeddings the hidden states just uploaded,
  // copied on the device; then the rows at position 0 are copied from a
  // zero row kept on the device.
  if (num_mtp > 0) {
    const size_t row_bytes = static_cast<size_t>(hidden_size) * sizeof(float);
    for (int64_t k = 0; k < num_mtp; ++k) {
      float* slice =
          Offset<float>(act_->mtp_embeddings.data(), k * tokens * hidden_size);
      if (mtp_values == 0) {
        DSA_RETURN_IF_ERROR(Annotate(
            stream.CopyDeviceToDevice(slice, act_->residual.data(),
                                      static_cast<size_t>(tokens) * row_bytes),
            "step: copying the MTP layers' embeddings"));
      } else {
        absl::Span<const float> from = mtp_embeddings;
        if (mtp_values == num_mtp * tokens * hidden_size) {
          from = mtp_embeddings.subspan(k * tokens * hidden_size,
                                        tokens * hidden_size);
        }
        for (const RowRun& run : runs) {
          DSA_RETURN_IF_ERROR(
              Annotate(stream.CopyHostToDevice(
                           slice + run.internal * hidden_size,
                           from.data() + run.caller * hidden_size,
                           static_cast<size_t>(run.count) * row_bytes),
                       "step: uploading the MTP layers' embeddings"));
        }
      }
      for (int64_t t = 0; t < tokens; ++t) {
        if (layout.positions[t] != 0) continue;
        DSA_RETURN_IF_ERROR(
            Annotate(stream.CopyDeviceToDevice(slice + t * hidden_size,
                                               s.zero_row.data(), row_bytes),
                     "step: copying the MTP layers' embeddings"));
      }
    }
  }
  // The dense prefill's scratch for this step's shapes, made ready before a
  // layer writes anything (the kernels' arenas grow here if the step needs
  // more than the profile run made ready): a step that does not fit in
  // memory fails here, with nothing written.
  if (layout.num_tokens > layout.num_decode_tokens &&
      std::any_of(plan.layers.begin(), plan.layers.end(),
                  [](const LayerPlan& l) {
                    return l.prefill_branch == PrefillBranch::kDenseMha;
                  })) {
    attention::DenseMhaPrefill::Args a = DenseArgs(*layers_.front(), layout);
    a.reserve_only = 1;
    DSA_RETURN_IF_ERROR(
        Annotate(s.kernels.dense_mha_prefill(s.exec, a),
                 "step: reserving the dense prefill's scratch"));
  }
  // Device rows of `width` floats, read back in the caller's row order,
  // once the stream is done with them (after a wait for it).
  auto read_back = [&](const DeviceBuffer& buffer,
                       int64_t width) -> absl::StatusOr<std::vector<float>> {
    std::vector<float> out(static_cast<size_t>(tokens * width));
    for (const RowRun& run : runs) {
      DSA_RETURN_IF_ERROR(rt.CopyDeviceToHost(
          out.data() + run.caller * width,
          Offset<float>(buffer.data(), run.internal * width),
          static_cast<size_t>(run.count * width) * sizeof(float)));
    }
    return out;
  };

  StepOutput result;
  s.counts = OpCallCounts{};
  s.times = OpTimes{};
  s.time_ops = step_options.time_ops;
  s.op_clock = step_options.op_clock;
  s.pending_residual = attention::TensorView();
  s.pending_o_proj = {};
  const int64_t graph_launches_before = s.graphs->launches();
  s.scoring = false;
  s.topk.written_by_layer = -1;
  const size_t hidden_bytes = static_cast<size_t>(tokens * hidden_size) * 4;
  // The residual stream, as the layers see it.
  const attention::TensorView residual =
      View2(act_->residual.data(), attention::DType::kFloat32, tokens,
            hidden_size, hidden_size);
  const Clock::time_point issue_begin = Clock::now();
  for (int l = 0; l < config.num_layers(); ++l) {
    // Every error of the layer names it (and the op, OpError).
    // (Built only when it is needed: an error, or a capture option.)
    auto where = [&] {
      return absl::StrCat("step: layer ", l,
                          config.is_mtp_layer(l) ? " (MTP)" : "");
    };
    if (config.is_mtp_layer(l)) {
      const absl::Status prepared =
          PrepareMtpInput(*layers_[l], l - config.num_main_layers(), layout);
      if (!prepared.ok()) return Annotate(prepared, where());
    }
    if (absl::Status ran = RunLayer(*layers_[l], plan.layers[l], layout);
        !ran.ok()) {
      return Annotate(ran, where());
    }
    // The layer's o_proj and residual add wait for the next layer's norm
    // unless their outputs are read before it.
    const bool keeps_main_hidden = l + 1 == config.num_main_layers() &&
                                   config.num_mtp_layers() > 0 &&
                                   step_options.read_hidden;
    if (step_options.capture_hidden_states ||
        step_options.capture_layer_outputs || keeps_main_hidden) {
      DSA_RETURN_IF_ERROR(Annotate(s.FlushResidual(residual), where()));
    }
    // The capture options wait for the stream after every layer (a debugging
    // aid, as time_ops is a profile).
    if (step_options.capture_hidden_states) {
      DSA_RETURN_IF_ERROR(Annotate(stream.Synchronize(), where()));
      absl::StatusOr<std::vector<float>> h =
          read_back(act_->residual, hidden_size);
      if (!h.ok()) {
        return Annotate(
            h.status(),
            absl::StrCat(where(), ": reading back its hidden states"));
      }
      result.hidden_states.push_back(std::move(*h));
    }
    if (step_options.capture_layer_outputs) {
      DSA_RETURN_IF_ERROR(Annotate(stream.Synchronize(), where()));
      absl::StatusOr<std::vector<float>> out =
          read_back(act_->out, hidden_size);
      if (!out.ok()) {
        return Annotate(out.status(),
                        absl::StrCat(where(), ": reading back its output"));
      }
      result.layer_outputs.push_back(std::move(*out));
    }
    if (step_options.capture_topk) {
      const int64_t topk = config.index_topk();
      // A topk buffer of exactly this step's rows: read through a view of
      // the owned buffer.
      std::vector<int32_t> internal(static_cast<size_t>(tokens * topk));
      DSA_RETURN_IF_ERROR(Annotate(stream.Synchronize(), where()));
      DSA_ASSIGN_OR_RETURN(void* topk_buffer,
                           s.topk.buffer.Get(rt, internal.size() * 4));
      DSA_RETURN_IF_ERROR(
          Annotate(rt.CopyDeviceToHost(internal.data(), topk_buffer,
                                       internal.size() * sizeof(int32_t)),
                   absl::StrCat(where(), ": reading back its top-k")));
      std::vector<int32_t> out(internal.size());
      for (int64_t t = 0; t < tokens; ++t) {
        std::copy_n(internal.begin() + t * topk, topk,
                    out.begin() + layout.token_source[t] * topk);
      }
      result.topk.push_back(std::move(out));
    }
    if (keeps_main_hidden) {
      // Kept on the device (a copy on the stream, after the layer's work),
      // read back with the MTP layers' output at the end.
      const absl::Status kept = stream.CopyDeviceToDevice(
          act_->main_hidden.data(), act_->residual.data(), hidden_bytes);
      if (!kept.ok()) {
        return Annotate(
            kept, absl::StrCat(where(), ": keeping the main layers' output"));
      }
    }
  }
  if (config.num_layers() > 0) {
    const int last = config.num_layers() - 1;
    DSA_RETURN_IF_ERROR(
        Annotate(s.FlushResidual(residual),
                 absl::StrCat("step: layer ", last,
                              config.is_mtp_layer(last) ? " (MTP)" : "")));
  }
  // The step's device work is done before it returns (its buffers are
  // reused by the next step, and a kernel's error surfaces here).
  const Clock::time_point issued = Clock::now();
  DSA_RETURN_IF_ERROR(Annotate(stream.Synchronize(),
                               "step: waiting for the step's device work"));
  const Clock::time_point done = Clock::now();
  result.host_issue_ms =
      std::chrono::duration<double, std::milli>(issued - issue_begin).count();
  result.device_tail_ms =
      std::chrono::duration<double, std::milli>(done - issued).count();
  result.prepare_ms =
      std::chrono::duration<double, std::milli>(issue_begin - step_begin)
          .count();
  if (step_options.read_hidden) {
    const bool mtp = config.num_mtp_layers() > 0;
    absl::StatusOr<std::vector<float>> main =
        read_back(mtp ? act_->main_hidden : act_->residual, hidden_size);
    if (!main.ok()) {
      return Annotate(main.status(), "step: reading back the hidden states");
    }
    result.hidden = std::move(*main);
    if (mtp) {
      absl::StatusOr<std::vector<float>> after_mtp =
          read_back(act_->residual, hidden_size);
      if (!after_mtp.ok()) {
        return Annotate(after_mtp.status(),
                        "step: reading back the MTP layers' hidden states");
      }
      result.mtp_hidden = std::move(*after_mtp);
    }
  }
  result.read_back_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - done).count();
  s.time_ops = false;
  result.op_ms = s.times;
  result.plan = std::move(plan);
  result.op_calls = s.counts;
  result.graph_launches =
      static_cast<int>(s.graphs->launches() - graph_launches_before);
  return result;
}

}  // namespace dsa::model::deepseek_v32
