// The device memory a DeepseekV32Model holds and reserves: DeviceBytes and
// the lists it sums (the activations, the step's inputs), their reservation
// for the largest step, the indexer's workspace and top-k, and the profile
// run, which reserves those and grows the kernels' scratch.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/dense_ops.h"
#include "attention/dtypes/dtype.h"
#include "attention/dtypes/fp8.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/model_runner_internal.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

// Whether the W8A8 products' inputs are quantised once, by the RMSNorm that
// writes them (input_layernorm's x for q_a, kv_a and the indexer's wk;
// q_a_layernorm's q_c for q_b and the indexer's wq_b), instead of by every
// product that reads them: with fp8 weights, where those are fp8 products.
bool QuantisesNormOutputs(const RuntimeOptions& options) {
  return options.weight_dtype == DType::kFloat8E4m3fn;
}

}  // namespace

// Every activation buffer and its bytes per token (0: not allocated), the
// one list that ReserveActivations allocates and DeviceBytes counts. `a` may
// be null (counting only).
template <typename F>
void DeepseekV32Model::ForEachActivation(const ModelConfig& config,
                                         const RuntimeOptions& options,
                                         Activations* a, F f) {
  const DeepseekV32Config& c = config.proto();
  const int64_t act = attention::DTypeSize(options.activation_dtype);
  const int64_t hidden = c.hidden_size(), H = c.num_attention_heads();
  const int64_t qk = c.qk_nope_head_dim() + c.qk_rope_head_dim();
  const int64_t kv_lora = c.kv_lora_rank(), rope = c.qk_rope_head_dim();
  const int64_t ih = c.indexer().index_n_heads();
  const int64_t id = c.indexer().index_head_dim();
  auto buffer = [a](DeviceBuffer Activations::*member) {
    return a == nullptr ? nullptr : &(a->*member);
  };
  using A = Activations;
  f(buffer(&A::residual), hidden * 4);
  f(buffer(&A::x), hidden * act);
  const bool quantised = QuantisesNormOutputs(options);
  const int64_t q_lora = c.q_lora_rank();
  f(buffer(&A::x_q), quantised ? hidden : 0);
  f(buffer(&A::x_scales), quantised ? attention::Fp8Blocks(hidden) * 4 : 0);
  f(buffer(&A::q_c_q), quantised ? q_lora : 0);
  f(buffer(&A::q_c_scales), quantised ? attention::Fp8Blocks(q_lora) * 4 : 0);
  f(buffer(&A::qkv_a), (c.q_lora_rank() + kv_lora + rope) * 4);
  f(buffer(&A::q_c), c.q_lora_rank() * act);
  f(buffer(&A::q), H * qk * act);
  f(buffer(&A::kv_c), kv_lora * act);
  f(buffer(&A::indexer_kw), (id + ih) * act);
  f(buffer(&A::indexer_q), ih * id * act);
  f(buffer(&A::q_fp8), ih * id);
  f(buffer(&A::head_weights), ih * 4);
  f(buffer(&A::q_absorbed), H * (kv_lora + rope) * act);
  f(buffer(&A::attn), H * c.v_head_dim() * act);
  f(buffer(&A::out), hidden * 4);
  const int64_t mtp = config.num_mtp_layers();
  f(buffer(&A::main_hidden), mtp > 0 ? hidden * 4 : 0);
  f(buffer(&A::mtp_embeddings), mtp * hidden * 4);
  f(buffer(&A::mtp_cat), mtp > 0 ? 2 * hidden * act : 0);
}

CheckedSize DeepseekV32Model::DeviceBytes(const ModelConfig& whole_config,
                                          const RuntimeOptions& options) {
  // A rank holds its share of the heads; options that do not split the model
  // are refused by Create and counted here as the whole model.
  const TensorParallel& tp = options.tensor_parallel;
  absl::StatusOr<ModelConfig> rank_config =
      tp.enabled() ? RankConfig(whole_config, tp)
                   : absl::StatusOr<ModelConfig>(whole_config);
  const ModelConfig& config = rank_config.ok() ? *rank_config : whole_config;
  const DeepseekV32Config& c = config.proto();
  attention::LatentCacheFormat format;
  format.dtype =
      options.fp8_latent_cache ? DType::kFloat8E4m3fn : DType::kBFloat16;
  format.kv_lora_rank = c.kv_lora_rank();
  format.rope_dim = c.qk_rope_head_dim();
  const CheckedSize slots =
      CheckedSize(options.num_blocks) * options.block_size;
  const int64_t tokens = options.max_num_batched_tokens;
  CheckedSize bytes = 0;
  int64_t largest_fp8 = 0;
  for (int l = 0; l < config.num_layers(); ++l) {
    bytes += slots * LatentCacheEntryBytes(format);
    if (config.owns_indexer(l)) {
      bytes += slots * IndexerEntryBytes(c);
    }
    for (const WeightSpec& spec : LayerWeightSpecs(config, l)) {
      bytes += CheckedSize(WeightBytes(spec, options));
      // kv_b_proj's split copies, W_UK and W_UV: as many bf16 elements again.
      if (spec.id == WeightId::kKvBProj) bytes += CheckedSize(spec.size()) * 2;
      if (options.weight_dtype == DType::kFloat8E4m3fn && spec.fp8_product) {
        largest_fp8 = std::max(largest_fp8, spec.size());
      }
    }
  }
  // With fp8 weights, the bf16 staging of the largest matrix quantised at
  // load.
  bytes += CheckedSize(largest_fp8) * 2;
  ForEachActivation(config, options, nullptr,
                    [&](DeviceBuffer*, int64_t bytes_per_token) {
                      bytes += CheckedSize(bytes_per_token) * tokens;
                    });
  bytes += StepInputBytes(options);
  // The rope table, and the MTP input's zero row.
  bytes += CheckedSize(options.max_model_len) * c.qk_rope_head_dim() * 4;
  if (config.num_mtp_layers() > 0) bytes += CheckedSize(c.hidden_size()) * 4;
  // The indexer's workspace and top-k as a profile run reserves them.
  bytes +=
      attention::IndexerLogits::WorkspaceBytes(ScoredRows(tp, tokens),
                                               options.max_model_len) +
      CheckedSize(TopKRows(tp, tokens)) * config.index_topk() * sizeof(int32_t);
  return bytes;
}

absl::Status DeepseekV32Model::ReserveActivations(int64_t tokens) {
  const DeviceRuntime& rt = shared_->runtime;
  auto a = std::make_unique<Activations>();
  a->capacity = tokens;
  absl::Status status;
  ForEachActivation(planner_.config(), options_, a.get(),
                    [&](DeviceBuffer* buffer, int64_t bytes_per_token) {
                      if (bytes_per_token == 0 || !status.ok()) return;
                      absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(
                          rt, static_cast<size_t>(bytes_per_token * tokens));
                      if (!b.ok()) {
                        status = b.status();
                        return;
                      }
                      *buffer = std::move(*b);
                    });
  DSA_RETURN_IF_ERROR(status);
  act_ = std::move(a);
  return absl::OkStatus();
}

int64_t DeepseekV32Model::MaxBlocksPerRequest(const RuntimeOptions& options) {
  const int64_t per_request =
      (options.max_model_len + options.block_size - 1) / options.block_size;
  return std::min<int64_t>(per_request, options.num_blocks);
}

template <typename F>
void DeepseekV32Model::ForEachStepInput(const RuntimeOptions& options,
                                        Shared* s, F f) {
  const int64_t tokens = options.max_num_batched_tokens;
  // A request has at least one new token: at most `tokens` requests.
  const int64_t requests = tokens;
  auto buffer = [s](DeviceBuffer Shared::*member) {
    return s == nullptr ? nullptr : &(s->*member);
  };
  f(buffer(&Shared::positions), "positions", CheckedSize(tokens) * 8);
  f(buffer(&Shared::slot_mapping), "slot_mapping", CheckedSize(tokens) * 8);
  f(buffer(&Shared::block_table), "block_table",
    CheckedSize(requests) * MaxBlocksPerRequest(options) * 4);
  f(buffer(&Shared::seq_lens), "seq_lens", CheckedSize(requests) * 4);
  f(buffer(&Shared::token_request), "token_request", CheckedSize(tokens) * 4);
  f(buffer(&Shared::prefill_query_start_loc), "prefill_query_start_loc",
    (CheckedSize(requests) + 1) * 4);
  f(buffer(&Shared::row_key_start), "row_key_start", CheckedSize(tokens) * 4);
  f(buffer(&Shared::row_key_end), "row_key_end", CheckedSize(tokens) * 4);
}

CheckedSize DeepseekV32Model::StepInputBytes(const RuntimeOptions& options) {
  CheckedSize bytes = 0;
  ForEachStepInput(
      options, nullptr,
      [&](DeviceBuffer*, const char*, CheckedSize b) { bytes += b; });
  return bytes;
}

absl::Status DeepseekV32Model::ReserveStepInputs() {
  Shared& s = *shared_;
  absl::Status status;
  ForEachStepInput(
      options_, &s,
      [&](DeviceBuffer* buffer, const char* name, CheckedSize bytes) {
        if (!status.ok()) return;
        // A term of DeviceBytes, which Create found representable.
        absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(
            s.runtime,
            static_cast<size_t>(std::max<int64_t>(bytes.value(), 1)));
        if (!b.ok()) {
          status = Annotate(b.status(), absl::StrCat("reserving the step "
                                                     "input ",
                                                     name));
          return;
        }
        *buffer = std::move(*b);
      });
  return status;
}

absl::Status DeepseekV32Model::ReserveIndexerWorkspace(int64_t rows,
                                                       int64_t max_seq_len,
                                                       bool scores) {
  Shared& s = *shared_;
  // Both sizes are terms of DeviceBytes, which Create found representable.
  const TensorParallel& tp = options_.tensor_parallel;
  const int64_t workspace_bytes =
      scores ? attention::IndexerLogits::WorkspaceBytes(ScoredRows(tp, rows),
                                                        max_seq_len)
                   .value()
             : 0;
  const int64_t topk_bytes = TopKRows(tp, rows) *
                             planner_.config().index_topk() *
                             int64_t{sizeof(int32_t)};
  const int64_t workspace_more = std::max<int64_t>(
      0, workspace_bytes - static_cast<int64_t>(s.workspace.capacity()));
  const int64_t topk_more = std::max<int64_t>(
      0, topk_bytes - static_cast<int64_t>(s.topk.buffer.capacity()));
  if (workspace_more == 0 && topk_more == 0) return absl::OkStatus();
  const std::string what =
      absl::StrCat("the indexer's workspace (", rows, " query rows over ",
                   max_seq_len, " keys: ", FormatBytes(workspace_bytes),
                   ") and top-k buffer (", FormatBytes(topk_bytes), ")");
  // Each grows by freeing its old buffer first: the new size minus the old
  // is what more the device must have free.
  DSA_RETURN_IF_ERROR(
      CheckFits(s.runtime, workspace_more + topk_more, what,
                "a profile run (ProfileRun) reserves it for the largest step"));
  if (workspace_more > 0) {
    DSA_RETURN_IF_ERROR(Annotate(
        s.workspace.Get(s.runtime, static_cast<size_t>(workspace_bytes))
            .status(),
        absl::StrCat("reserving ", what)));
  }
  if (topk_more > 0) {
    DSA_RETURN_IF_ERROR(Annotate(
        s.topk.buffer.Get(s.runtime, static_cast<size_t>(topk_bytes)).status(),
        absl::StrCat("reserving ", what)));
  }
  return absl::OkStatus();
}

int64_t DeepseekV32Model::reserved_workspace_bytes() const {
  return static_cast<int64_t>(shared_->workspace.capacity());
}

absl::StatusOr<ForwardPlan> DeepseekV32Model::ProfileRun(
    const ForwardContext& forward) {
  DSA_RETURN_IF_ERROR(shared_->runtime.BindDevice(options_.device));
  DSA_ASSIGN_OR_RETURN(ForwardPlan plan, planner_.PlanProfileRun(forward));
  // Without metadata the attention computes nothing; indexer layers still
  // call the indexer, which only reserves its workspace for the largest step
  // (the benchmark bound without an indexer reserves nothing).
  bool reserves = false;
  for (const LayerPlan& layer_plan : plan.layers) {
    reserves = reserves ||
               (layer_plan.indexer.action == IndexerAction::kWorkspaceOnly &&
                !options_.no_indexer);
  }
  if (reserves) {
    DSA_RETURN_IF_ERROR(Annotate(
        ReserveIndexerWorkspace(options_.max_num_batched_tokens,
                                options_.max_model_len, /*scores=*/true),
        "profile run"));
  }
  DSA_RETURN_IF_ERROR(Annotate(ProfileScratch(reserves), "profile run"));
  return plan;
}

absl::Status DeepseekV32Model::ProfileScratch(bool sparse) {
  Shared& s = *shared_;
  Activations& act = *act_;
  const Layer& layer = *layers_.front();
  const ModelConfig& config = planner_.config();
  const DeepseekV32Config& c = config.proto();
  const DType adt = options_.activation_dtype;
  const int64_t H = c.num_attention_heads();
  const int64_t nope = c.qk_nope_head_dim(), rope = c.qk_rope_head_dim();
  const int64_t vdim = c.v_head_dim(), kv_lora = c.kv_lora_rank();
  const int64_t tokens = std::min<int64_t>(options_.max_num_batched_tokens,
                                           options_.max_model_len);
  const int64_t topk = config.index_topk();
  const int64_t max_blocks = MaxBlocksPerRequest(options_);
  const TensorView latent_cache =
      MakeTensorView(layer.latent_cache.data(),
                     attention::IsFp8(s.latent_format.dtype) ? DType::kUint8
                                                             : DType::kBFloat16,
                     {options_.num_blocks, options_.block_size,
                      attention::LatentCacheEntryWidth(s.latent_format)});
  const TensorView kv_b_proj =
      MakeTensorView(layer.weights[static_cast<int>(WeightId::kKvBProj)],
                     DType::kBFloat16, {H * (nope + vdim), kv_lora});
  // Every request reads block 0 (its contents do not matter: the outputs
  // go to the activations, which every step writes before it reads them).
  std::vector<int32_t> zeros(static_cast<size_t>(tokens * max_blocks), 0);
  DSA_RETURN_IF_ERROR(
      UploadInto(s.stream, s.block_table, zeros, "block_table"));

  if (planner_.capabilities().sparse_mla_dense_mha_prefill) {
    // Dense prefill: a batch of max_num_batched_tokens new tokens in
    // prompts of the longest the dense branch takes (index_topk keys, or as
    // many as a request's blocks hold), the keys as many; with fewer tokens
    // than that, one request of them after a cached context up to that
    // length (a chunk of a prompt that is prefilled in steps).
    const int64_t longest = std::min(
        {topk, options_.max_model_len, max_blocks * options_.block_size});
    const int64_t length = std::max<int64_t>(1, std::min(tokens, longest));
    const int64_t requests = (tokens + length - 1) / length;
    std::vector<int32_t>& seq_lens = s.host_seq_lens;
    std::vector<int32_t>& qsl = s.host_prefill_query_start_loc;
    seq_lens.assign(static_cast<size_t>(requests), 0);
    qsl.assign(static_cast<size_t>(requests + 1), 0);
    for (int64_t r = 0; r < requests; ++r) {
      const int64_t n = std::min(length, tokens - r * length);
      qsl[r + 1] = qsl[r] + static_cast<int32_t>(n);
      seq_lens[r] = static_cast<int32_t>(requests == 1 ? longest : n);
    }
    DSA_RETURN_IF_ERROR(UploadInto(s.stream, s.seq_lens, seq_lens, "seq_lens"));
    DSA_RETURN_IF_ERROR(UploadInto(s.stream, s.prefill_query_start_loc, qsl,
                                   "prefill_query_start_loc"));
    attention::DenseMhaPrefill::Args a;
    a.q = MakeTensorView(act.q.data(), adt, {tokens, H, nope + rope});
    a.kv_cache = latent_cache;
    a.cache_format = s.latent_format;
    a.block_table = MakeTensorView(s.block_table.data(), DType::kInt32,
                                   {requests, max_blocks});
    a.seq_lens = MakeTensorView(s.seq_lens.data(), DType::kInt32, {requests});
    a.query_start_loc = MakeTensorView(s.prefill_query_start_loc.data(),
                                       DType::kInt32, {requests + 1});
    a.seq_lens_host =
        MakeTensorView(seq_lens.data(), DType::kInt32, {requests});
    a.query_start_loc_host =
        MakeTensorView(qsl.data(), DType::kInt32, {requests + 1});
    a.kv_b_proj = kv_b_proj;
    a.w_uk =
        MakeTensorView(layer.w_uk.data(), DType::kBFloat16, {H, nope, kv_lora});
    a.w_uv =
        MakeTensorView(layer.w_uv.data(), DType::kBFloat16, {H, vdim, kv_lora});
    a.softmax_scale = s.softmax_scale;
    a.output = MakeTensorView(act.attn.data(), adt, {tokens, H, vdim});
    DSA_RETURN_IF_ERROR(Annotate(DSA_LAUNCH(s, dense_mha_prefill, nullptr,
                                            s.kernels.dense_mha_prefill, a),
                                 "dense_mha_prefill at the largest step"));
  }
  if (sparse) {
    // Sparse MLA: the largest step's rows, then decode batches of 1 to 128
    // rows (fewer rows split each row's top-k into partial outputs, whose
    // scratch is largest somewhere there), over a top-k of -1 (no key).
    std::vector<int32_t> one{1};
    DSA_RETURN_IF_ERROR(UploadInto(s.stream, s.seq_lens, one, "seq_lens"));
    std::vector<int32_t> token_request(static_cast<size_t>(tokens), 0);
    DSA_RETURN_IF_ERROR(
        UploadInto(s.stream, s.token_request, token_request, "token_request"));
    const size_t topk_bytes = static_cast<size_t>(tokens * topk * 4);
    DSA_ASSIGN_OR_RETURN(void* topk_dev,
                         s.topk.buffer.Get(s.runtime, topk_bytes));
    DSA_RETURN_IF_ERROR(FillBytes(s.stream, topk_dev, topk_bytes, 0xff));
    s.topk.written_by_layer = -1;
    std::vector<int64_t> rows_list{tokens};
    for (int64_t rows = 1; rows <= 128 && rows < tokens; rows *= 2) {
      rows_list.push_back(rows);
    }
    for (int64_t rows : rows_list) {
      attention::SparseMla::Args a;
      a.q =
          MakeTensorView(act.q_absorbed.data(), adt, {rows, H, kv_lora + rope});
      a.kv_cache = latent_cache;
      a.cache_format = s.latent_format;
      a.block_table =
          MakeTensorView(s.block_table.data(), DType::kInt32, {1, max_blocks});
      a.seq_lens = MakeTensorView(s.seq_lens.data(), DType::kInt32, {1});
      a.token_request =
          MakeTensorView(s.token_request.data(), DType::kInt32, {rows});
      a.topk_indices = MakeTensorView(topk_dev, DType::kInt32, {rows, topk});
      a.kv_b_proj = kv_b_proj;
      a.qk_nope_head_dim = static_cast<int32_t>(nope);
      a.softmax_scale = s.softmax_scale;
      a.output = MakeTensorView(act.attn.data(), adt, {rows, H, vdim});
      DSA_RETURN_IF_ERROR(
          Annotate(DSA_LAUNCH(s, sparse_mla, nullptr, s.kernels.sparse_mla, a),
                   absl::StrCat("sparse_mla over ", rows, " rows")));
    }
  }
  // W8A8 projections quantise their activations into the same scratch: the
  // widest inputs at the largest step (x for q_a_proj, the attention output
  // for o_proj).
  if (attention::IsFp8(layer.dtype[static_cast<int>(WeightId::kQAProj)])) {
    const int64_t hidden = c.hidden_size(), q_lora = c.q_lora_rank();
    const int64_t qkv_width = q_lora + kv_lora + rope;
    DSA_RETURN_IF_ERROR(
        s.Project("q_a_proj at the largest step",
                  Batch1(View2(act.x.data(), adt, tokens, hidden, hidden)),
                  layer.Projection(WeightId::kQAProj),
                  Batch1(View2(act.qkv_a.data(), DType::kFloat32, tokens,
                               q_lora, qkv_width))));
  }
  if (attention::IsFp8(layer.dtype[static_cast<int>(WeightId::kOProj)])) {
    const int64_t hidden = c.hidden_size();
    DSA_RETURN_IF_ERROR(s.Project(
        "o_proj at the largest step",
        Batch1(View2(act.attn.data(), adt, tokens, H * vdim, H * vdim)),
        layer.Projection(WeightId::kOProj),
        Batch1(View2(act.out.data(), s.tp.enabled() ? adt : DType::kFloat32,
                     tokens, hidden, hidden))));
  }
  s.counts = OpCallCounts{};
  return s.stream.Synchronize();
}

}  // namespace dsa::model::deepseek_v32
