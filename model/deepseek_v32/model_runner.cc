#include "model/deepseek_v32/model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "attention/dtypes/dtype.h"
#include "attention/tensor.h"
#include "model/deepseek_v32/host_math.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

using attention::DType;
using attention::MakeTensorView;
using attention::TensorView;
using platform::DeviceBuffer;
using platform::DeviceRuntime;

constexpr float kRmsNormEps = 1e-6f;
constexpr float kIndexerLayerNormEps = 1e-6f;

// Device memory that grows to the largest size asked of it and is reused
// across layers and steps.
class Scratch {
 public:
  absl::StatusOr<void*> Get(const DeviceRuntime& runtime, size_t bytes) {
    if (buffer_.data() == nullptr || buffer_.bytes() < bytes) {
      buffer_ = DeviceBuffer();  // free first: peak memory is the new size
      DSA_ASSIGN_OR_RETURN(
          buffer_, DeviceBuffer::Allocate(runtime, std::max<size_t>(bytes, 1)));
    }
    return buffer_.data();
  }
  size_t capacity() const { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_;
};

// Copies a host vector into a fresh device buffer.
template <class T>
absl::StatusOr<DeviceBuffer> Upload(const DeviceRuntime& runtime,
                                    const std::vector<T>& host) {
  DSA_ASSIGN_OR_RETURN(
      DeviceBuffer buffer,
      DeviceBuffer::Allocate(runtime,
                             std::max<size_t>(host.size() * sizeof(T), 1)));
  DSA_RETURN_IF_ERROR(
      buffer.CopyFromHost(host.data(), host.size() * sizeof(T)));
  return buffer;
}

// Zero-fills device memory, so that a fresh cache holds defined bytes (a
// cache dump, or two instances of one model, compare equal slot for slot).
absl::Status ZeroFill(const DeviceRuntime& runtime,
                      const DeviceBuffer& buffer) {
  constexpr size_t kChunk = size_t{1} << 20;
  const std::vector<uint8_t> zeros(std::min(kChunk, buffer.bytes()), 0);
  for (size_t offset = 0; offset < buffer.bytes(); offset += kChunk) {
    DSA_RETURN_IF_ERROR(runtime.CopyHostToDevice(
        static_cast<uint8_t*>(buffer.data()) + offset, zeros.data(),
        std::min(kChunk, buffer.bytes() - offset)));
  }
  return absl::OkStatus();
}

template <class T>
T* Offset(void* base, int64_t elements) {
  return static_cast<T*>(base) + elements;
}

DType Fp8DType(platform::Fp8Format format) {
  return format == platform::Fp8Format::kE4m3fnuz ? DType::kFloat8E4m3fnuz
                                                  : DType::kFloat8E4m3fn;
}

}  // namespace

// Resources every layer uses: the platform, its kernels, the rope table, the
// step's index tensors and scratch memory.
struct DeepseekV32Model::Shared {
  platform::Platform platform;
  DeviceRuntime runtime;
  AttentionKernels kernels;
  attention::ExecutionContext exec;
  attention::LatentCacheFormat latent_format;
  DType indexer_cache_dtype = DType::kFloat8E4m3fn;
  attention::RopeStyle indexer_rope = attention::RopeStyle::kNeox;

  std::vector<float> host_rope;  // [max_model_len, rope_dim]
  DeviceBuffer rope;

  // This step's index tensors (internal order, see StepLayout).
  DeviceBuffer positions, slot_mapping, block_table, seq_lens, token_request,
      prefill_query_start_loc, row_key_start, row_key_end;

  Scratch topk, workspace, kv, indexer_k, indexer_q, indexer_w, q_fp8,
      head_weights, q_dense, q_absorbed, attn_out;
  OpCallCounts counts;

  Shared(platform::Platform p, AttentionKernels k)
      : platform(std::move(p)), runtime(platform.runtime()), kernels(k) {}
};

struct DeepseekV32Model::Layer {
  int id = 0;
  LayerWeights weights;
  DeviceBuffer latent_cache;
  DeviceBuffer indexer_k_cache;  // empty without an indexer
  // Weights the attention ops read, on the device.
  DeviceBuffer kv_b_proj;
  DeviceBuffer indexer_k_norm;  // weight then bias; empty without an indexer
};

DeepseekV32Model::DeepseekV32Model(LayerPlanner planner, RuntimeOptions options,
                                   BlockTables blocks)
    : planner_(std::move(planner)),
      options_(options),
      blocks_(std::move(blocks)) {}

DeepseekV32Model::~DeepseekV32Model() = default;

absl::StatusOr<std::unique_ptr<DeepseekV32Model>> DeepseekV32Model::Create(
    LayerPlanner planner, platform::Platform platform, AttentionKernels kernels,
    RuntimeOptions options, uint64_t seed) {
  std::vector<LayerWeights> weights;
  for (int l = 0; l < planner.config().num_layers(); ++l) {
    weights.push_back(LayerWeights::Random(planner.config(), l, seed));
  }
  return Create(std::move(planner), std::move(platform), kernels, options,
                std::move(weights));
}

absl::StatusOr<std::unique_ptr<DeepseekV32Model>> DeepseekV32Model::Create(
    LayerPlanner planner, platform::Platform platform, AttentionKernels kernels,
    RuntimeOptions options, std::vector<LayerWeights> weights) {
  // Checked on the planner's configuration before it moves into the model.
  const ModelConfig& config = planner.config();
  if (options.max_model_len < 1 ||
      options.max_model_len > config.max_position_embeddings()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "runtime options: max_model_len is ", options.max_model_len,
        ", expected 1..", config.max_position_embeddings(),
        " (the model's max_position_embeddings)"));
  }
  if (options.max_num_batched_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("runtime options: max_num_batched_tokens is ",
                     options.max_num_batched_tokens, ", expected at least 1"));
  }
  if (options.rope_theta <= 1.0) {
    return absl::InvalidArgumentError(
        "runtime options: rope_theta must be > 1");
  }
  if (static_cast<int>(weights.size()) != config.num_layers()) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights for ", weights.size(), " layers, the model has ",
                     config.num_layers()));
  }
  for (int l = 0; l < config.num_layers(); ++l) {
    DSA_RETURN_IF_ERROR(weights[l].Validate(config, l));
  }
  DSA_ASSIGN_OR_RETURN(
      BlockTables blocks,
      BlockTables::Create(options.block_size, options.num_blocks));
  if (!platform.runtime().available()) {
    return absl::FailedPreconditionError(
        absl::StrCat("platform '", platform.id(), "' has no device runtime"));
  }

  std::unique_ptr<DeepseekV32Model> model(
      new DeepseekV32Model(std::move(planner), options, std::move(blocks)));
  // `planner` has moved into the model: read the configuration from there.
  const ModelConfig& model_config = model->planner_.config();
  const DeepseekV32Config& mc = model_config.proto();
  auto shared = std::make_unique<Shared>(std::move(platform), kernels);
  shared->exec.num_threads = options.num_threads;
  const platform::Fp8Format fp8 =
      model->planner_.capabilities().kv_cache_fp8_format;
  shared->latent_format.dtype =
      options.fp8_latent_cache ? Fp8DType(fp8) : DType::kBFloat16;
  shared->latent_format.kv_lora_rank = mc.kv_lora_rank();
  shared->latent_format.rope_dim = mc.qk_rope_head_dim();
  shared->indexer_cache_dtype = Fp8DType(fp8);
  shared->indexer_rope = mc.indexer().rope_style() == INDEXER_ROPE_INTERLEAVED
                             ? attention::RopeStyle::kInterleaved
                             : attention::RopeStyle::kNeox;
  shared->host_rope = RopeCosSinTable(
      options.max_model_len, mc.qk_rope_head_dim(), options.rope_theta);
  DSA_ASSIGN_OR_RETURN(shared->rope,
                       Upload(shared->runtime, shared->host_rope));

  const int64_t latent_entry_bytes =
      attention::LatentCacheEntryWidth(shared->latent_format) *
      (options.fp8_latent_cache ? 1 : 2);
  const int64_t slots = int64_t{options.num_blocks} * options.block_size;
  const int64_t indexer_entry_bytes = mc.indexer().index_head_dim() + 4;
  for (int l = 0; l < model_config.num_layers(); ++l) {
    auto layer = std::make_unique<Layer>();
    layer->id = l;
    layer->weights = std::move(weights[l]);
    DSA_ASSIGN_OR_RETURN(
        layer->latent_cache,
        DeviceBuffer::Allocate(shared->runtime, slots * latent_entry_bytes));
    DSA_RETURN_IF_ERROR(ZeroFill(shared->runtime, layer->latent_cache));
    DSA_ASSIGN_OR_RETURN(layer->kv_b_proj,
                         Upload(shared->runtime, layer->weights.kv_b_proj));
    if (model_config.owns_indexer(l)) {
      DSA_ASSIGN_OR_RETURN(
          layer->indexer_k_cache,
          DeviceBuffer::Allocate(shared->runtime, slots * indexer_entry_bytes));
      DSA_RETURN_IF_ERROR(ZeroFill(shared->runtime, layer->indexer_k_cache));
      std::vector<float> norm = layer->weights.indexer_k_norm_weight;
      norm.insert(norm.end(), layer->weights.indexer_k_norm_bias.begin(),
                  layer->weights.indexer_k_norm_bias.end());
      DSA_ASSIGN_OR_RETURN(layer->indexer_k_norm,
                           Upload(shared->runtime, norm));
    }
    model->layers_.push_back(std::move(layer));
  }
  model->shared_ = std::move(shared);
  return model;
}

int64_t DeepseekV32Model::reserved_workspace_bytes() const {
  return static_cast<int64_t>(shared_->workspace.capacity());
}

absl::StatusOr<std::vector<uint8_t>> DeepseekV32Model::ReadLatentCache(
    int layer) const {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no layer ", layer));
  }
  const DeviceBuffer& b = layers_[layer]->latent_cache;
  std::vector<uint8_t> host(b.bytes());
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
  if (!host.empty())
    DSA_RETURN_IF_ERROR(b.CopyToHost(host.data(), host.size()));
  return host;
}

absl::StatusOr<ForwardPlan> DeepseekV32Model::ProfileRun(
    const ForwardContext& forward) {
  DSA_ASSIGN_OR_RETURN(ForwardPlan plan, planner_.PlanProfileRun(forward));
  // Without metadata the attention computes nothing; indexer layers still
  // call the indexer, which only reserves its workspace.
  for (const LayerPlan& layer_plan : plan.layers) {
    if (layer_plan.indexer.action != IndexerAction::kWorkspaceOnly) continue;
    DSA_RETURN_IF_ERROR(RunIndexer(*layers_[layer_plan.layer], layer_plan,
                                   /*step=*/nullptr, nullptr, nullptr));
  }
  return plan;
}

absl::StatusOr<StepOutput> DeepseekV32Model::Step(
    const ForwardContext& forward, absl::Span<const StepRequest> requests,
    absl::Span<const float> hidden, const StepOptions& step_options) {
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
  DSA_ASSIGN_OR_RETURN(StepLayout layout, blocks_.PrepareStep(requests));

  // Index tensors shared by every layer.
  Shared& s = *shared_;
  const DeviceRuntime& rt = s.runtime;
  std::vector<int32_t> key_start(tokens, 0), key_end(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    key_end[t] = static_cast<int32_t>(layout.positions[t] + 1);
  }
  std::vector<int32_t> prefill_qsl;
  for (int r = layout.num_decode_requests; r <= layout.num_requests; ++r) {
    prefill_qsl.push_back(layout.query_start_loc[r] -
                          layout.query_start_loc[layout.num_decode_requests]);
  }
  DSA_ASSIGN_OR_RETURN(s.positions, Upload(rt, layout.positions));
  DSA_ASSIGN_OR_RETURN(s.slot_mapping, Upload(rt, layout.slot_mapping));
  DSA_ASSIGN_OR_RETURN(s.block_table, Upload(rt, layout.block_table));
  DSA_ASSIGN_OR_RETURN(s.seq_lens, Upload(rt, layout.seq_lens));
  DSA_ASSIGN_OR_RETURN(s.token_request, Upload(rt, layout.token_request));
  DSA_ASSIGN_OR_RETURN(s.prefill_query_start_loc, Upload(rt, prefill_qsl));
  DSA_ASSIGN_OR_RETURN(s.row_key_start, Upload(rt, key_start));
  DSA_ASSIGN_OR_RETURN(s.row_key_end, Upload(rt, key_end));

  // The caller's rows in internal order.
  std::vector<float> x(static_cast<size_t>(tokens * hidden_size));
  for (int64_t t = 0; t < tokens; ++t) {
    std::memcpy(x.data() + t * hidden_size,
                hidden.data() + layout.token_source[t] * hidden_size,
                hidden_size * sizeof(float));
  }
  // Rows of `width` values from the step's internal order to the caller's.
  auto to_caller_order = [&](const auto& internal, int64_t width) {
    std::remove_const_t<std::remove_reference_t<decltype(internal)>> out(
        internal.size());
    for (int64_t t = 0; t < tokens; ++t) {
      std::copy_n(internal.begin() + t * width, width,
                  out.begin() + layout.token_source[t] * width);
    }
    return out;
  };

  StepOutput result;
  s.counts = OpCallCounts{};
  std::vector<float> out;
  for (int l = 0; l < config.num_layers(); ++l) {
    DSA_RETURN_IF_ERROR(RunLayer(*layers_[l], plan.layers[l], layout, x, out));
    if (step_options.capture_layer_outputs) {
      result.layer_outputs.push_back(to_caller_order(out, hidden_size));
    }
    if (step_options.capture_topk) {
      const int64_t topk = config.index_topk();
      std::vector<int32_t> internal(static_cast<size_t>(tokens * topk));
      DSA_ASSIGN_OR_RETURN(void* topk_buffer,
                           s.topk.Get(rt, internal.size() * sizeof(int32_t)));
      DSA_RETURN_IF_ERROR(rt.CopyDeviceToHost(
          internal.data(), topk_buffer, internal.size() * sizeof(int32_t)));
      result.topk.push_back(to_caller_order(internal, topk));
    }
    for (size_t i = 0; i < x.size(); ++i) x[i] += out[i];
    if (l + 1 == config.num_main_layers()) {
      result.hidden = to_caller_order(x, hidden_size);
    }
  }
  if (config.num_mtp_layers() > 0) {
    result.mtp_hidden = to_caller_order(x, hidden_size);
  }
  result.plan = std::move(plan);
  result.op_calls = s.counts;
  return result;
}

absl::Status DeepseekV32Model::RunIndexer(Layer& layer, const LayerPlan& plan,
                                          const StepLayout* step,
                                          const std::vector<float>* x_in,
                                          const std::vector<float>* q_c_in) {
  Shared& s = *shared_;
  const DeviceRuntime& rt = s.runtime;
  const ModelConfig& config = planner_.config();
  const int64_t topk = config.index_topk();
  if (options_.no_indexer) return absl::OkStatus();  // the bound: no work
  if (plan.indexer.action == IndexerAction::kWorkspaceOnly || step == nullptr) {
    if (plan.indexer.action != IndexerAction::kWorkspaceOnly) {
      return absl::InternalError(
          absl::StrCat("layer ", layer.id,
                       ": an indexer run without metadata must only "
                       "reserve its workspace"));
    }
    // A profile or dummy run: reserve what the largest step needs (the
    // logits workspace and the top-k buffer) and compute or write nothing.
    const int64_t rows = options_.max_num_batched_tokens;
    DSA_RETURN_IF_ERROR(s.workspace
                            .Get(rt, attention::IndexerLogits::WorkspaceBytes(
                                         rows, options_.max_model_len))
                            .status());
    return s.topk.Get(rt, rows * topk * sizeof(int32_t)).status();
  }
  const StepLayout& layout = *step;
  const std::vector<float>& x = *x_in;
  const std::vector<float>& q_c = *q_c_in;
  const DeepseekV32Config& c = config.proto();
  const LayerWeights& w = layer.weights;
  const int threads = options_.num_threads;
  const int64_t T = layout.num_tokens;
  const int64_t hidden = c.hidden_size();
  const int64_t q_lora = c.q_lora_rank();
  const int64_t rope = c.qk_rope_head_dim();
  const int64_t num_blocks = options_.num_blocks;
  const int64_t block_size = options_.block_size;

  DSA_ASSIGN_OR_RETURN(void* topk_dev,
                       s.topk.Get(rt, T * topk * sizeof(int32_t)));
  const TensorView topk_view =
      MakeTensorView(topk_dev, DType::kInt32, {T, topk});
  const int64_t ih = c.indexer().index_n_heads();
  const int64_t id = c.indexer().index_head_dim();
  const TensorView indexer_cache =
      layer.indexer_k_cache.data() == nullptr
          ? TensorView{}
          : MakeTensorView(layer.indexer_k_cache.data(), DType::kUint8,
                           {num_blocks, block_size, id + 4});
  const TensorView rope_table = MakeTensorView(s.rope.data(), DType::kFloat32,
                                               {options_.max_model_len, rope});
  if (plan.k_cache_write) {
    if (!w.has_indexer()) {
      return absl::InternalError(absl::StrCat(
          "layer ", layer.id, " writes indexer keys but has no indexer"));
    }
    std::vector<float> k;
    Linear(x, T, hidden, w.indexer_wk, id, k, threads);
    DSA_ASSIGN_OR_RETURN(void* k_dev,
                         s.indexer_k.Get(rt, k.size() * sizeof(float)));
    DSA_RETURN_IF_ERROR(
        rt.CopyHostToDevice(k_dev, k.data(), k.size() * sizeof(float)));
    void* ln_dev = layer.indexer_k_norm.data();
    attention::IndexerKWrite::Args a;
    a.k = MakeTensorView(k_dev, DType::kFloat32, {T, id});
    a.ln_weight = MakeTensorView(ln_dev, DType::kFloat32, {id});
    a.ln_bias =
        MakeTensorView(Offset<float>(ln_dev, id), DType::kFloat32, {id});
    a.ln_eps = kIndexerLayerNormEps;
    a.positions = MakeTensorView(s.positions.data(), DType::kInt64, {T});
    a.cos_sin_cache = rope_table;
    a.rope_style = s.indexer_rope;
    a.slot_mapping = MakeTensorView(s.slot_mapping.data(), DType::kInt64, {T});
    a.k_cache = indexer_cache;
    a.cache_dtype = s.indexer_cache_dtype;
    a.topk_indices = topk_view;
    ++s.counts.indexer_k_write;
    DSA_RETURN_IF_ERROR(s.kernels.indexer_k_write(s.exec, a));
  }
  if (plan.indexer.action == IndexerAction::kScore) {
    std::vector<float> iq, iw;
    Linear(q_c, T, q_lora, w.indexer_wq_b, ih * id, iq, threads);
    Linear(x, T, hidden, w.indexer_weights_proj, ih, iw, threads);
    DSA_ASSIGN_OR_RETURN(void* iq_dev,
                         s.indexer_q.Get(rt, iq.size() * sizeof(float)));
    DSA_RETURN_IF_ERROR(
        rt.CopyHostToDevice(iq_dev, iq.data(), iq.size() * sizeof(float)));
    DSA_ASSIGN_OR_RETURN(void* iw_dev,
                         s.indexer_w.Get(rt, iw.size() * sizeof(float)));
    DSA_RETURN_IF_ERROR(
        rt.CopyHostToDevice(iw_dev, iw.data(), iw.size() * sizeof(float)));
    DSA_ASSIGN_OR_RETURN(void* q8_dev, s.q_fp8.Get(rt, T * ih * id));
    DSA_ASSIGN_OR_RETURN(void* hw_dev,
                         s.head_weights.Get(rt, T * ih * sizeof(float)));
    const TensorView q_fp8 =
        MakeTensorView(q8_dev, s.indexer_cache_dtype, {T, ih, id});
    const TensorView head_weights =
        MakeTensorView(hw_dev, DType::kFloat32, {T, ih});
    {
      attention::IndexerQ::Args a;
      a.q = MakeTensorView(iq_dev, DType::kFloat32, {T, ih, id});
      a.weights = MakeTensorView(iw_dev, DType::kFloat32, {T, ih});
      a.positions = MakeTensorView(s.positions.data(), DType::kInt64, {T});
      a.cos_sin_cache = rope_table;
      a.rope_style = s.indexer_rope;
      a.q_fp8 = q_fp8;
      a.head_weights = head_weights;
      ++s.counts.indexer_q;
      DSA_RETURN_IF_ERROR(s.kernels.indexer_q(s.exec, a));
    }
    const int64_t width = layout.max_seq_len;
    DSA_ASSIGN_OR_RETURN(
        void* logits_dev,
        s.workspace.Get(rt,
                        attention::IndexerLogits::WorkspaceBytes(T, width)));
    const TensorView logits =
        MakeTensorView(logits_dev, DType::kFloat32, {T, width});
    const TensorView key_start =
        MakeTensorView(s.row_key_start.data(), DType::kInt32, {T});
    const TensorView key_end =
        MakeTensorView(s.row_key_end.data(), DType::kInt32, {T});
    {
      attention::IndexerLogits::Args a;
      a.q_fp8 = q_fp8;
      a.head_weights = head_weights;
      a.k_cache = indexer_cache;
      a.block_table =
          MakeTensorView(s.block_table.data(), DType::kInt32,
                         {layout.num_requests, layout.max_blocks_per_request});
      a.seq_lens = MakeTensorView(s.seq_lens.data(), DType::kInt32,
                                  {layout.num_requests});
      a.row_request =
          MakeTensorView(s.token_request.data(), DType::kInt32, {T});
      a.row_key_start = key_start;
      a.row_key_end = key_end;
      a.logits = logits;
      ++s.counts.indexer_logits;
      DSA_RETURN_IF_ERROR(s.kernels.indexer_logits(s.exec, a));
    }
    {
      attention::IndexerTopK::Args a;
      a.logits = logits;
      a.row_key_start = key_start;
      a.row_key_end = key_end;
      a.topk_indices = topk_view;
      ++s.counts.indexer_topk;
      DSA_RETURN_IF_ERROR(s.kernels.indexer_topk(s.exec, a));
    }
  }

  return absl::OkStatus();
}

absl::Status DeepseekV32Model::RunLayer(Layer& layer, const LayerPlan& plan,
                                        const StepLayout& layout,
                                        const std::vector<float>& x,
                                        std::vector<float>& out) {
  Shared& s = *shared_;
  const DeviceRuntime& rt = s.runtime;
  const ModelConfig& config = planner_.config();
  const DeepseekV32Config& c = config.proto();
  const LayerWeights& w = layer.weights;
  const int threads = options_.num_threads;
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

  auto rope_row = [&](int64_t t) {
    return s.host_rope.data() + layout.positions[t] * rope;
  };

  // --- Host: MLA projections, norms and rope.
  std::vector<float> q_c, q, kv;
  Linear(x, T, hidden, w.q_a_proj, q_lora, q_c, threads);
  RmsNormRows(q_c.data(), T, q_lora, q_lora, w.q_a_layernorm, kRmsNormEps);
  Linear(q_c, T, q_lora, w.q_b_proj, H * qk, q, threads);
  Linear(x, T, hidden, w.kv_a_proj_with_mqa, kv_lora + rope, kv, threads);
  RmsNormRows(kv.data(), T, kv_lora, kv_lora + rope, w.kv_a_layernorm,
              kRmsNormEps);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      RopeInterleaved(q.data() + (t * H + h) * qk + nope, rope, rope_row(t));
    }
    RopeInterleaved(kv.data() + t * (kv_lora + rope) + kv_lora, rope,
                    rope_row(t));
  }

  // --- MLA latent cache write: kv_c and k_pe are strided views of kv.
  DSA_ASSIGN_OR_RETURN(void* kv_dev, s.kv.Get(rt, kv.size() * sizeof(float)));
  DSA_RETURN_IF_ERROR(
      rt.CopyHostToDevice(kv_dev, kv.data(), kv.size() * sizeof(float)));
  const int64_t num_blocks = options_.num_blocks;
  const int64_t block_size = options_.block_size;
  TensorView latent_cache;
  if (attention::IsFp8(s.latent_format.dtype)) {
    latent_cache =
        MakeTensorView(layer.latent_cache.data(), DType::kUint8,
                       {num_blocks, block_size,
                        attention::LatentCacheEntryWidth(s.latent_format)});
  } else {
    latent_cache =
        MakeTensorView(layer.latent_cache.data(), DType::kBFloat16,
                       {num_blocks, block_size,
                        attention::LatentCacheEntryWidth(s.latent_format)});
  }
  {
    attention::MlaCacheWrite::Args a;
    a.kv_c = MakeTensorView(kv_dev, DType::kFloat32, {T, kv_lora});
    a.kv_c.strides[0] = kv_lora + rope;
    a.k_pe = MakeTensorView(Offset<float>(kv_dev, kv_lora), DType::kFloat32,
                            {T, rope});
    a.k_pe.strides[0] = kv_lora + rope;
    a.slot_mapping = MakeTensorView(s.slot_mapping.data(), DType::kInt64, {T});
    a.kv_cache = latent_cache;
    a.cache_format = s.latent_format;
    ++s.counts.mla_cache_write;
    DSA_RETURN_IF_ERROR(s.kernels.mla_cache_write(s.exec, a));
  }

  // --- Indexer: keys always written; scoring only when the plan says so.
  DSA_RETURN_IF_ERROR(RunIndexer(layer, plan, &layout, &x, &q_c));
  DSA_ASSIGN_OR_RETURN(void* topk_dev,
                       s.topk.Get(rt, T * topk * sizeof(int32_t)));

  // --- Attention: decodes (and prefills on the sparse branch) over top-k,
  // prefills on the dense branch by dense causal MHA.
  const bool dense_prefill = plan.prefill_branch == PrefillBranch::kDenseMha;
  const int64_t sparse_rows = dense_prefill ? D : T;
  const float softmax_scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(qk)));
  DSA_ASSIGN_OR_RETURN(void* attn_dev,
                       s.attn_out.Get(rt, T * H * vdim * sizeof(float)));
  const TensorView block_table =
      MakeTensorView(s.block_table.data(), DType::kInt32,
                     {layout.num_requests, layout.max_blocks_per_request});
  if (sparse_rows > 0) {
    if (plan.indexer.action != IndexerAction::kScore &&
        plan.indexer.action != IndexerAction::kShared) {
      return absl::InternalError(absl::StrCat(
          "layer ", layer.id, ": ", sparse_rows,
          " tokens need a top-k that this forward did not compute"));
    }
    // Absorb W_UK into the query: q_abs[h] = [q_nope[h] W_UK[h] | q_pe[h]].
    const int64_t width = kv_lora + rope;
    std::vector<float> q_abs(static_cast<size_t>(sparse_rows * H * width),
                             0.0f);
    for (int64_t t = 0; t < sparse_rows; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const float* qn = q.data() + (t * H + h) * qk;
        float* dst = q_abs.data() + (t * H + h) * width;
        for (int64_t n = 0; n < nope; ++n) {
          const float* wuk =
              w.kv_b_proj.data() + (h * (nope + vdim) + n) * kv_lora;
          const float qv = qn[n];
          for (int64_t j = 0; j < kv_lora; ++j) dst[j] += qv * wuk[j];
        }
        std::copy_n(qn + nope, rope, dst + kv_lora);
      }
    }
    DSA_ASSIGN_OR_RETURN(void* qa_dev,
                         s.q_absorbed.Get(rt, q_abs.size() * sizeof(float)));
    DSA_RETURN_IF_ERROR(rt.CopyHostToDevice(qa_dev, q_abs.data(),
                                            q_abs.size() * sizeof(float)));
    attention::SparseMla::Args a;
    a.q = MakeTensorView(qa_dev, DType::kFloat32, {sparse_rows, H, width});
    a.kv_cache = latent_cache;
    a.cache_format = s.latent_format;
    a.block_table = block_table;
    a.seq_lens =
        MakeTensorView(s.seq_lens.data(), DType::kInt32, {layout.num_requests});
    a.token_request =
        MakeTensorView(s.token_request.data(), DType::kInt32, {sparse_rows});
    a.topk_indices =
        MakeTensorView(topk_dev, DType::kInt32, {sparse_rows, topk});
    a.kv_b_proj = MakeTensorView(layer.kv_b_proj.data(), DType::kFloat32,
                                 {H * (nope + vdim), kv_lora});
    a.qk_nope_head_dim = static_cast<int32_t>(nope);
    a.softmax_scale = softmax_scale;
    a.output =
        MakeTensorView(attn_dev, DType::kFloat32, {sparse_rows, H, vdim});
    ++s.counts.sparse_mla;
    DSA_RETURN_IF_ERROR(s.kernels.sparse_mla(s.exec, a));
  }
  if (dense_prefill && T > D) {
    const int64_t P = T - D;
    const int64_t R = layout.num_requests - layout.num_decode_requests;
    DSA_ASSIGN_OR_RETURN(void* q_dev,
                         s.q_dense.Get(rt, P * H * qk * sizeof(float)));
    DSA_RETURN_IF_ERROR(rt.CopyHostToDevice(q_dev, q.data() + D * H * qk,
                                            P * H * qk * sizeof(float)));
    attention::DenseMhaPrefill::Args a;
    a.q = MakeTensorView(q_dev, DType::kFloat32, {P, H, qk});
    a.kv_cache = latent_cache;
    a.cache_format = s.latent_format;
    a.block_table =
        MakeTensorView(Offset<int32_t>(s.block_table.data(),
                                       int64_t{layout.num_decode_requests} *
                                           layout.max_blocks_per_request),
                       DType::kInt32, {R, layout.max_blocks_per_request});
    a.seq_lens = MakeTensorView(
        Offset<int32_t>(s.seq_lens.data(), layout.num_decode_requests),
        DType::kInt32, {R});
    a.query_start_loc = MakeTensorView(s.prefill_query_start_loc.data(),
                                       DType::kInt32, {R + 1});
    a.kv_b_proj = MakeTensorView(layer.kv_b_proj.data(), DType::kFloat32,
                                 {H * (nope + vdim), kv_lora});
    a.softmax_scale = softmax_scale;
    a.output = MakeTensorView(Offset<float>(attn_dev, D * H * vdim),
                              DType::kFloat32, {P, H, vdim});
    ++s.counts.dense_mha_prefill;
    DSA_RETURN_IF_ERROR(s.kernels.dense_mha_prefill(s.exec, a));
  }
  DSA_RETURN_IF_ERROR(rt.Synchronize());
  std::vector<float> attn(static_cast<size_t>(T * H * vdim));
  DSA_RETURN_IF_ERROR(
      rt.CopyDeviceToHost(attn.data(), attn_dev, attn.size() * sizeof(float)));
  Linear(attn, T, H * vdim, w.o_proj, hidden, out, threads);
  return absl::OkStatus();
}

}  // namespace dsa::model::deepseek_v32
