// One layer's forward on the device (the op sequence of model_runner.h's
// header comment): an MTP layer's input, the MLA projections and cache
// write, the indexer, the attention on either prefill branch and o_proj.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "attention/dense_ops.h"
#include "attention/dtypes/dtype.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/model_runner_internal.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

// The indexer's k_norm LayerNorm: 1e-6 in every engine and in DeepSeek's
// reference (the RMSNorms take the config's rms_norm_eps).
constexpr float kIndexerLayerNormEps = 1e-6f;

}  // namespace

absl::Status DeepseekV32Model::PrepareMtpInput(Layer& layer, int mtp_index,
                                               const StepLayout& layout) {
  Shared& s = *shared_;
  Activations& act = *act_;
  const DType adt = options_.activation_dtype;
  const int64_t T = layout.num_tokens;
  const int64_t hidden = planner_.config().proto().hidden_size();
  const TensorView residual =
      View2(act.residual.data(), DType::kFloat32, T, hidden, hidden);
  // The stream is read here, and its pending add's buffer (act.out) is
  // overwritten by final_norm below.
  DSA_RETURN_IF_ERROR(s.FlushResidual(residual));
  const TensorView embeddings =
      View2(act.mtp_embeddings.data(), DType::kFloat32, T, hidden, hidden,
            int64_t{mtp_index} * T * hidden);
  const TensorView cat =
      View2(act.mtp_cat.data(), adt, T, 2 * hidden, 2 * hidden);
  DSA_RETURN_IF_ERROR(s.RmsNorm("enorm", embeddings,
                                layer.Vector(WeightId::kEnorm),
                                View2(cat.data, adt, T, hidden, 2 * hidden)));
  TensorView h = residual;
  if (mtp_index == 0) {
    // The main model's output as vLLM hands it over: after model.norm.
    h = View2(act.out.data(), DType::kFloat32, T, hidden, hidden);
    DSA_RETURN_IF_ERROR(s.RmsNorm("final_norm", residual,
                                  layer.Vector(WeightId::kFinalNorm), h));
  }
  DSA_RETURN_IF_ERROR(
      s.RmsNorm("hnorm", h, layer.Vector(WeightId::kHnorm),
                View2(cat.data, adt, T, hidden, 2 * hidden, hidden)));
  return s.Project("eh_proj", Batch1(cat), layer.Projection(WeightId::kEhProj),
                   Batch1(residual));
}

absl::Status DeepseekV32Model::RunIndexer(Layer& layer, const LayerPlan& plan,
                                          const StepLayout& layout) {
  if (options_.no_indexer) return absl::OkStatus();  // the bound: no work
  if (plan.indexer.action == IndexerAction::kWorkspaceOnly) {
    return absl::InternalError(absl::StrCat(
        "layer ", layer.id,
        ": a step with metadata planned a workspace-only indexer"));
  }
  Shared& s = *shared_;
  Activations& act = *act_;
  const DeviceRuntime& rt = s.runtime;
  const ModelConfig& config = planner_.config();
  const DeepseekV32Config& c = config.proto();
  const DType adt = options_.activation_dtype;
  const int64_t topk = config.index_topk();
  const int64_t T = layout.num_tokens;
  const int64_t hidden = c.hidden_size();
  const int64_t q_lora = c.q_lora_rank();
  const int64_t rope = c.qk_rope_head_dim();
  const int64_t num_blocks = options_.num_blocks;
  const int64_t block_size = options_.block_size;
  const int64_t ih = c.indexer().index_n_heads();
  const int64_t id = c.indexer().index_head_dim();
  if (!plan.k_cache_write && plan.indexer.action != IndexerAction::kScore) {
    return absl::OkStatus();
  }
  if (!layer.has_indexer) {
    return absl::InternalError(absl::StrCat(
        "layer ", layer.id, " runs an indexer but does not own one"));
  }

  DSA_ASSIGN_OR_RETURN(
      void* topk_dev,
      s.topk.buffer.Get(rt, TopKRows(s.tp, T) * topk * sizeof(int32_t)));
  const TensorView topk_view =
      MakeTensorView(topk_dev, DType::kInt32, {T, topk});
  const TensorView indexer_cache =
      MakeTensorView(layer.indexer_k_cache.data(), DType::kUint8,
                     {num_blocks, block_size, IndexerEntryBytes(c)});
  const TensorView rope_table = MakeTensorView(s.rope.data(), DType::kFloat32,
                                               {options_.max_model_len, rope});
  const TensorView x = View2(act.x.data(), adt, T, hidden, hidden);
  const QuantisedRows x_q = act.XQuantised(s.product_fp8, T, hidden);
  const bool scores = plan.indexer.action == IndexerAction::kScore;
  // wk and weights_proj read x: one gemm (kFusedIndexerKw) into [k | head
  // weights] per token, or without fusion each into its columns, the head
  // weights only when the plan scores.
  const int64_t kw_width = id + ih;
  const TensorView k = View2(act.indexer_kw.data(), adt, T, id, kw_width);
  if (s.fuse_projections) {
    DSA_RETURN_IF_ERROR(s.Project(
        kFusedIndexerKw.name, Batch1(x), layer.Projection(kFusedIndexerKw),
        Batch1(View2(act.indexer_kw.data(), adt, T, kw_width, kw_width))));
  }
  if (plan.k_cache_write) {
    if (!s.fuse_projections) {
      DSA_RETURN_IF_ERROR(s.Project("indexer_wk", Batch1(x),
                                    layer.Projection(WeightId::kIndexerWk),
                                    Batch1(k), x_q));
    }
    attention::IndexerKWrite::Args a;
    a.k = k;
    a.ln_weight = layer.Vector(WeightId::kIndexerKNormWeight);
    a.ln_bias = layer.Vector(WeightId::kIndexerKNormBias);
    a.ln_eps = kIndexerLayerNormEps;
    a.positions = MakeTensorView(s.positions.data(), DType::kInt64, {T});
    a.cos_sin_cache = rope_table;
    a.rope_style = s.indexer_rope;
    a.slot_mapping = MakeTensorView(s.slot_mapping.data(), DType::kInt64, {T});
    a.k_cache = indexer_cache;
    a.cache_dtype = s.indexer_cache_dtype;
    a.topk_indices = topk_view;
    // vLLM's: the LayerNorm's and rope's output in bf16 tensors, fp8 scales
    // divided by its divisor.
    a.intermediate_dtype = DType::kBFloat16;
    a.fp8_scale_divisor = s.indexer_fp8_divisor;
    a.hadamard_rotation = s.indexer_hadamard ? 1 : 0;
    DSA_RETURN_IF_ERROR(
        DSA_LAUNCH(s, indexer_k_write, nullptr, s.kernels.indexer_k_write, a));
    s.topk.written_by_layer = layer.id;  // cleared to -1
  }
  if (scores) {
    s.scoring = true;  // until the top-k is written (OpTimes)
    // The query rows this rank scores: all of them, or with the row-sharded
    // indexer its block [b, b + R) of every per-row tensor, whose top-k
    // rows the all-gather then hands to every rank.
    const bool by_rows =
        s.tp.enabled() && s.tp.indexer == IndexerParallel::kRows;
    const RowRange mine = by_rows ? RowsOf(T, s.tp) : RowRange{0, T};
    const int64_t b = mine.begin, R = mine.size();
    if (R > 0) {
      const TensorView iq =
          View2(act.indexer_q.data(), adt, R, ih * id, ih * id, b * ih * id);
      // q_c's quantisation when this rank scores every row; a block of the
      // rows (the row-sharded indexer) quantises its own, so that its
      // scales are packed as cuBLASLt's block-scaled product takes them.
      const QuantisedRows q_c_q =
          R == T ? act.QcQuantised(s.product_fp8, T, q_lora) : QuantisedRows{};
      DSA_RETURN_IF_ERROR(s.Project(
          "indexer_wq_b",
          Batch1(View2(act.q_c.data(), adt, R, q_lora, q_lora, b * q_lora)),
          layer.Projection(WeightId::kIndexerWqB), Batch1(iq), q_c_q));
      // The head weights of rows [b, b + R): computed with the keys when
      // fused, else here.
      const TensorView iw_rows =
          View2(act.indexer_kw.data(), adt, R, ih, kw_width, b * kw_width + id);
      if (!s.fuse_projections) {
        DSA_RETURN_IF_ERROR(s.Project(
            "indexer_weights_proj",
            Batch1(View2(act.x.data(), adt, R, hidden, hidden, b * hidden)),
            layer.Projection(WeightId::kIndexerWeightsProj), Batch1(iw_rows)));
      }
      const TensorView q_fp8 =
          MakeTensorView(Offset<uint8_t>(act.q_fp8.data(), b * ih * id),
                         s.indexer_cache_dtype, {R, ih, id});
      const TensorView head_weights =
          MakeTensorView(Offset<float>(act.head_weights.data(), b * ih),
                         DType::kFloat32, {R, ih});
      {
        attention::IndexerQ::Args a;
        a.q = MakeTensorView(iq.data, adt, {R, ih, id});
        a.weights = iw_rows;
        a.positions = MakeTensorView(Offset<int64_t>(s.positions.data(), b),
                                     DType::kInt64, {R});
        a.cos_sin_cache = rope_table;
        a.rope_style = s.indexer_rope;
        a.q_fp8 = q_fp8;
        a.head_weights = head_weights;
        a.intermediate_dtype = DType::kBFloat16;
        a.fp8_scale_divisor = s.indexer_fp8_divisor;
        a.hadamard_rotation = s.indexer_hadamard ? 1 : 0;
        DSA_RETURN_IF_ERROR(
            DSA_LAUNCH(s, indexer_q, nullptr, s.kernels.indexer_q, a));
      }
      // The graph run (RunLayer) ends here: the logits follow the lengths.
      DSA_RETURN_IF_ERROR(s.graphs->End());
      const int64_t width = layout.max_seq_len;
      DSA_ASSIGN_OR_RETURN(
          void* logits_dev,
          s.workspace.Get(
              rt, attention::IndexerLogits::WorkspaceBytes(R, width).value()));
      const TensorView logits =
          MakeTensorView(logits_dev, DType::kFloat32, {R, width});
      const TensorView key_start = MakeTensorView(
          Offset<int32_t>(s.row_key_start.data(), b), DType::kInt32, {R});
      const TensorView key_end = MakeTensorView(
          Offset<int32_t>(s.row_key_end.data(), b), DType::kInt32, {R});
      {
        attention::IndexerLogits::Args a;
        a.q_fp8 = q_fp8;
        a.head_weights = head_weights;
        a.k_cache = indexer_cache;
        a.block_table = MakeTensorView(
            s.block_table.data(), DType::kInt32,
            {layout.num_requests, layout.max_blocks_per_request});
        a.seq_lens = MakeTensorView(s.seq_lens.data(), DType::kInt32,
                                    {layout.num_requests});
        a.row_request = MakeTensorView(
            Offset<int32_t>(s.token_request.data(), b), DType::kInt32, {R});
        a.row_key_start = key_start;
        a.row_key_end = key_end;
        a.logits = logits;
        DSA_RETURN_IF_ERROR(DSA_LAUNCH(s, indexer_logits, nullptr,
                                       s.kernels.indexer_logits, a));
      }
      {
        attention::IndexerTopK::Args a;
        a.logits = logits;
        a.row_key_start = key_start;
        a.row_key_end = key_end;
        a.topk_indices = MakeTensorView(Offset<int32_t>(topk_dev, b * topk),
                                        DType::kInt32, {R, topk});
        DSA_RETURN_IF_ERROR(
            DSA_LAUNCH(s, indexer_topk, nullptr, s.kernels.indexer_topk, a));
      }
    }
    if (by_rows) {
      // Every rank's block of RowsPerRank rows, in rank order: the rows of
      // the whole step's top-k (a short last block's tail is never read).
      const int64_t per = RowsPerRank(T, s.tp.size);
      DSA_RETURN_IF_ERROR(s.AllGather(
          "indexer_topk", Offset<int32_t>(topk_dev, s.tp.rank * per * topk),
          topk_dev, static_cast<size_t>(per * topk) * sizeof(int32_t)));
    }
    s.scoring = false;
    s.topk.written_by_layer = layer.id;
  }
  return absl::OkStatus();
}

attention::DenseMhaPrefill::Args DeepseekV32Model::DenseArgs(
    const Layer& layer, const StepLayout& layout) const {
  const Shared& s = *shared_;
  const Activations& act = *act_;
  const DeepseekV32Config& c = planner_.config().proto();
  const DType adt = options_.activation_dtype;
  const int64_t H = c.num_attention_heads();
  const int64_t nope = c.qk_nope_head_dim(), rope = c.qk_rope_head_dim();
  const int64_t qk = nope + rope, vdim = c.v_head_dim();
  const int64_t kv_lora = c.kv_lora_rank();
  const int64_t D = layout.num_decode_tokens;
  const int64_t P = layout.num_tokens - D;
  const int64_t R = layout.num_requests - layout.num_decode_requests;
  const size_t esize = attention::DTypeSize(adt);
  attention::DenseMhaPrefill::Args a;
  a.q = MakeTensorView(static_cast<char*>(act.q.data()) + D * H * qk * esize,
                       adt, {P, H, qk});
  a.kv_cache =
      MakeTensorView(layer.latent_cache.data(),
                     attention::IsFp8(s.latent_format.dtype) ? DType::kUint8
                                                             : DType::kBFloat16,
                     {options_.num_blocks, options_.block_size,
                      attention::LatentCacheEntryWidth(s.latent_format)});
  a.cache_format = s.latent_format;
  a.block_table =
      MakeTensorView(Offset<int32_t>(s.block_table.data(),
                                     int64_t{layout.num_decode_requests} *
                                         layout.max_blocks_per_request),
                     DType::kInt32, {R, layout.max_blocks_per_request});
  a.seq_lens = MakeTensorView(
      Offset<int32_t>(s.seq_lens.data(), layout.num_decode_requests),
      DType::kInt32, {R});
  a.query_start_loc =
      MakeTensorView(s.prefill_query_start_loc.data(), DType::kInt32, {R + 1});
  a.seq_lens_host = MakeTensorView(
      s.host_seq_lens.data() + layout.num_decode_requests, DType::kInt32, {R});
  a.query_start_loc_host = MakeTensorView(s.host_prefill_query_start_loc.data(),
                                          DType::kInt32, {R + 1});
  a.kv_b_proj =
      MakeTensorView(layer.weights[static_cast<int>(WeightId::kKvBProj)],
                     DType::kBFloat16, {H * (nope + vdim), kv_lora});
  // Split once at load: no split on every call.
  a.w_uk =
      MakeTensorView(layer.w_uk.data(), DType::kBFloat16, {H, nope, kv_lora});
  a.w_uv =
      MakeTensorView(layer.w_uv.data(), DType::kBFloat16, {H, vdim, kv_lora});
  a.softmax_scale = s.softmax_scale;
  a.output =
      MakeTensorView(static_cast<char*>(act.attn.data()) + D * H * vdim * esize,
                     adt, {P, H, vdim});
  return a;
}

absl::Status DeepseekV32Model::RunLayer(Layer& layer, const LayerPlan& plan,
                                        const StepLayout& layout) {
  Shared& s = *shared_;
  Activations& act = *act_;
  const DeviceRuntime& rt = s.runtime;
  const ModelConfig& config = planner_.config();
  const DeepseekV32Config& c = config.proto();
  const DType adt = options_.activation_dtype;
  const int64_t T = layout.num_tokens;
  const int64_t D = layout.num_decode_tokens;
  const int64_t hidden = c.hidden_size();
  const int64_t H = c.num_attention_heads();
  const int64_t nope = c.qk_nope_head_dim(), rope = c.qk_rope_head_dim();
  const int64_t vdim = c.v_head_dim();
  const int64_t kv_lora = c.kv_lora_rank();
  const int64_t q_lora = c.q_lora_rank();
  const int64_t topk = config.index_topk();
  const int64_t qk = nope + rope;
  const int64_t max_position = options_.max_model_len;
  if (T > act.capacity) {
    return absl::InternalError(absl::StrCat(
        "step of ", T, " tokens above the reserved ", act.capacity));
  }

  // --- The ops up to the indexer's scoring and the attention take nothing
  // from the step but its tokens, the plan's choices and the top-k buffer:
  // one graph launch once this run has been seen (StepGraphs). The run ends
  // before the first op whose launch follows the step's lengths (the
  // indexer's logits, or the attention).
  if (!s.time_ops) {
    const bool writes_keys = !options_.no_indexer && plan.k_cache_write;
    const bool scores =
        !options_.no_indexer && plan.indexer.action == IndexerAction::kScore;
    void* topk_buffer = nullptr;
    if (writes_keys || scores) {
      DSA_ASSIGN_OR_RETURN(
          topk_buffer,
          s.topk.buffer.Get(rt, TopKRows(s.tp, T) * topk * sizeof(int32_t)));
    }
    const uint32_t variant = (s.pending_residual.absent() ? 0u : 1u) |
                             (writes_keys ? 2u : 0u) | (scores ? 4u : 0u) |
                             (s.pending_o_proj.given ? 8u : 0u);
    DSA_RETURN_IF_ERROR(s.graphs->Begin({layer.id, T, variant, topk_buffer}));
  }
  const GraphRunGuard graph_run(s.graphs.get());

  // --- The layer's input: input_layernorm of the residual stream, in the
  // activation type.
  const TensorView residual =
      View2(act.residual.data(), DType::kFloat32, T, hidden, hidden);
  const TensorView x = View2(act.x.data(), adt, T, hidden, hidden);
  // With fp8 products, x is quantised here once for every product that
  // reads it (QuantisesNormOutputs), as is q_c below.
  const QuantisedRows x_q = act.XQuantised(s.product_fp8, T, hidden);
  DSA_RETURN_IF_ERROR(s.NormOfResidual("input_layernorm", residual,
                                       layer.Vector(WeightId::kInputLayerNorm),
                                       x, x_q));

  // --- MLA projections, norms and rope. q_a_proj and kv_a_proj_with_mqa
  // read x: one gemm (kFusedQkvA) into [q_c | kv_c | k_pe] per token, or
  // without fusion each into its columns.
  const int64_t kv_width = kv_lora + rope;
  const int64_t qkv_width = q_lora + kv_width;
  const TensorView q_c_raw =
      View2(act.qkv_a.data(), DType::kFloat32, T, q_lora, qkv_width);
  const TensorView kv =
      View2(act.qkv_a.data(), DType::kFloat32, T, kv_width, qkv_width, q_lora);
  const TensorView q_c = View2(act.q_c.data(), adt, T, q_lora, q_lora);
  const TensorView q = View2(act.q.data(), adt, T, H * qk, H * qk);
  if (s.fuse_projections) {
    DSA_RETURN_IF_ERROR(
        s.Project(kFusedQkvA.name, Batch1(x), layer.Projection(kFusedQkvA),
                  Batch1(View2(act.qkv_a.data(), DType::kFloat32, T, qkv_width,
                               qkv_width))));
  } else {
    DSA_RETURN_IF_ERROR(s.Project("q_a_proj", Batch1(x),
                                  layer.Projection(WeightId::kQAProj),
                                  Batch1(q_c_raw), x_q));
  }
  const QuantisedRows q_c_q = act.QcQuantised(s.product_fp8, T, q_lora);
  DSA_RETURN_IF_ERROR(s.RmsNorm("q_a_layernorm", q_c_raw,
                                layer.Vector(WeightId::kQALayerNorm), q_c,
                                q_c_q));
  DSA_RETURN_IF_ERROR(s.Project("q_b_proj", Batch1(q_c),
                                layer.Projection(WeightId::kQBProj), Batch1(q),
                                q_c_q));
  {
    // q_pe: [T, H, rope] at offset nope of every head.
    TensorView q_pe = MakeTensorView(nullptr, adt, {T, H, rope});
    q_pe.data =
        static_cast<char*>(act.q.data()) + nope * attention::DTypeSize(adt);
    q_pe.strides[0] = H * qk;
    q_pe.strides[1] = qk;
    DSA_RETURN_IF_ERROR(s.Rope("q_pe", q_pe, T, max_position));
  }
  const TensorView kv_c = View2(act.kv_c.data(), adt, T, kv_lora, kv_lora);
  if (!s.fuse_projections) {
    DSA_RETURN_IF_ERROR(s.Project("kv_a_proj_with_mqa", Batch1(x),
                                  layer.Projection(WeightId::kKvAProjWithMqa),
                                  Batch1(kv), x_q));
  }
  DSA_RETURN_IF_ERROR(s.RmsNorm(
      "kv_a_layernorm",
      View2(act.qkv_a.data(), DType::kFloat32, T, kv_lora, qkv_width, q_lora),
      layer.Vector(WeightId::kKvALayerNorm), kv_c));
  const TensorView k_pe = View2(act.qkv_a.data(), DType::kFloat32, T, rope,
                                qkv_width, q_lora + kv_lora);
  {
    TensorView k_pe3 = MakeTensorView(k_pe.data, DType::kFloat32, {T, 1, rope});
    k_pe3.strides[0] = qkv_width;
    DSA_RETURN_IF_ERROR(s.Rope("k_pe", k_pe3, T, max_position));
  }

  // --- MLA latent cache write.
  const int64_t num_blocks = options_.num_blocks;
  const int64_t block_size = options_.block_size;
  const TensorView latent_cache =
      MakeTensorView(layer.latent_cache.data(),
                     attention::IsFp8(s.latent_format.dtype) ? DType::kUint8
                                                             : DType::kBFloat16,
                     {num_blocks, block_size,
                      attention::LatentCacheEntryWidth(s.latent_format)});
  {
    attention::MlaCacheWrite::Args a;
    a.kv_c = kv_c;
    a.k_pe = k_pe;
    a.slot_mapping = MakeTensorView(s.slot_mapping.data(), DType::kInt64, {T});
    a.kv_cache = latent_cache;
    a.cache_format = s.latent_format;
    DSA_RETURN_IF_ERROR(
        DSA_LAUNCH(s, mla_cache_write, nullptr, s.kernels.mla_cache_write, a));
  }

  // --- Indexer: keys always written; scoring only when the plan says so.
  DSA_RETURN_IF_ERROR(RunIndexer(layer, plan, layout));

  DSA_RETURN_IF_ERROR(s.graphs->End());

  // --- Attention: decodes (and prefills on the sparse branch) over top-k,
  // prefills on the dense branch by dense causal MHA.
  const bool dense_prefill = plan.prefill_branch == PrefillBranch::kDenseMha;
  const int64_t sparse_rows = dense_prefill ? D : T;
  const float softmax_scale = s.softmax_scale;
  const TensorView block_table =
      MakeTensorView(s.block_table.data(), DType::kInt32,
                     {layout.num_requests, layout.max_blocks_per_request});
  const TensorView kv_b_proj =
      MakeTensorView(layer.weights[static_cast<int>(WeightId::kKvBProj)],
                     DType::kBFloat16, {H * (nope + vdim), kv_lora});
  if (sparse_rows > 0) {
    if (plan.indexer.action != IndexerAction::kScore &&
        plan.indexer.action != IndexerAction::kShared) {
      return absl::InternalError(absl::StrCat(
          "layer ", layer.id, ": ", sparse_rows,
          " tokens need a top-k that this forward did not compute"));
    }
    if (s.topk.written_by_layer != plan.topk_source_layer) {
      return absl::InternalError(absl::StrCat(
          "layer ", layer.id, " reads layer ", plan.topk_source_layer,
          "'s top-k, but the top-k buffer holds layer ",
          s.topk.written_by_layer, "'s"));
    }
    DSA_ASSIGN_OR_RETURN(void* topk_dev,
                         s.topk.buffer.Get(rt, T * topk * sizeof(int32_t)));
    // Absorb W_UK into the query: q_abs[t, h] = [q_nope[t, h] W_UK[h] |
    // q_pe[t, h]], one batched gemm over heads (W_UK[h]^T is a transposed
    // view of kv_b_proj) and a strided copy of q_pe.
    const int64_t width = kv_lora + rope;
    const size_t esize = attention::DTypeSize(adt);
    {
      TensorView qn = MakeTensorView(act.q.data(), adt, {H, sparse_rows, nope});
      qn.strides[0] = qk;
      qn.strides[1] = H * qk;
      TensorView w_uk =
          MakeTensorView(kv_b_proj.data, DType::kBFloat16, {H, kv_lora, nope});
      w_uk.strides[0] = (nope + vdim) * kv_lora;
      w_uk.strides[1] = 1;
      w_uk.strides[2] = kv_lora;
      TensorView qa =
          MakeTensorView(act.q_absorbed.data(), adt, {H, sparse_rows, kv_lora});
      qa.strides[0] = width;
      qa.strides[1] = H * width;
      DSA_RETURN_IF_ERROR(s.Gemm("q_nope x W_UK", qn, w_uk, qa));
      DSA_RETURN_IF_ERROR(s.Cast(
          "q_pe into the absorbed query",
          View2(static_cast<char*>(act.q.data()) + nope * esize, adt,
                sparse_rows * H, rope, qk),
          View2(static_cast<char*>(act.q_absorbed.data()) + kv_lora * esize,
                adt, sparse_rows * H, rope, width)));
    }
    attention::SparseMla::Args a;
    a.q = MakeTensorView(act.q_absorbed.data(), adt, {sparse_rows, H, width});
    a.kv_cache = latent_cache;
    a.cache_format = s.latent_format;
    a.block_table = block_table;
    a.seq_lens =
        MakeTensorView(s.seq_lens.data(), DType::kInt32, {layout.num_requests});
    a.token_request =
        MakeTensorView(s.token_request.data(), DType::kInt32, {sparse_rows});
    a.topk_indices =
        MakeTensorView(topk_dev, DType::kInt32, {sparse_rows, topk});
    a.kv_b_proj = kv_b_proj;
    a.qk_nope_head_dim = static_cast<int32_t>(nope);
    a.softmax_scale = softmax_scale;
    a.output = MakeTensorView(act.attn.data(), adt, {sparse_rows, H, vdim});
    DSA_RETURN_IF_ERROR(
        DSA_LAUNCH(s, sparse_mla, nullptr, s.kernels.sparse_mla, a));
  }
  if (dense_prefill && T > D) {
    const attention::DenseMhaPrefill::Args a = DenseArgs(layer, layout);
    DSA_RETURN_IF_ERROR(DSA_LAUNCH(s, dense_mha_prefill, nullptr,
                                   s.kernels.dense_mha_prefill, a));
  }

  // --- Output projection and the residual. A tensor-parallel rank's o_proj
  // is its heads' partial sum, in the activations' type (vLLM's row-parallel
  // o_proj), all-reduced over the ranks.
  const TensorView out =
      View2(act.out.data(), s.tp.enabled() ? adt : DType::kFloat32, T, hidden,
            hidden);
  const TensorView attn_out =
      Batch1(View2(act.attn.data(), adt, T, H * vdim, H * vdim));
  const ProjectionWeight o_proj = layer.Projection(WeightId::kOProj);
  if (s.tp.group == nullptr && !o_proj.fp8()) {
    // Launched by the next reader of its output, in the next layer's graph
    // run (Shared::pending_o_proj). Not a W8A8 o_proj, which quantises its
    // input in stream scratch that a graph may not hold.
    s.pending_o_proj = {true, o_proj, attn_out, Batch1(out)};
  } else {
    DSA_RETURN_IF_ERROR(s.Project("o_proj", attn_out, o_proj, Batch1(out)));
    DSA_RETURN_IF_ERROR(s.AllReduce("o_proj", out));
  }
  // The residual add: in the next layer's input_layernorm, or flushed
  // before the stream's next other reader (Shared::pending_residual).
  s.pending_residual = out;
  return absl::OkStatus();
}

}  // namespace dsa::model::deepseek_v32
