// DeepseekV32Model's creation (Create, Build): the options checked, the
// model's size checked against the free device memory, the caches, the
// weights from a source through bounded staging or drawn on the device,
// quantised to fp8 at load when asked, kv_b_proj's split, the reservations
// for the largest step and the vendor GEMM's per-stream state.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/dense_ops.h"
#include "attention/dtypes/dtype.h"
#include "attention/dtypes/fp8.h"
#include "model/deepseek_v32/host_math.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/model_runner_internal.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

// Copies a host vector into a fresh device buffer, in order on `stream`.
template <class T>
absl::StatusOr<DeviceBuffer> Upload(const DeviceRuntime& runtime,
                                    const DeviceStream& stream,
                                    const std::vector<T>& host) {
  DSA_ASSIGN_OR_RETURN(
      DeviceBuffer buffer,
      DeviceBuffer::Allocate(runtime,
                             std::max<size_t>(host.size() * sizeof(T), 1)));
  DSA_RETURN_IF_ERROR(stream.CopyHostToDevice(buffer.data(), host.data(),
                                              host.size() * sizeof(T)));
  return buffer;
}

// Whether the projections that read the same input run as one gemm
// (kFusedProjections): asked for, and bf16 weights (an fp8 pair's block
// scales are not concatenated; the indexer's weights_proj stays bf16).
bool FusesProjections(const RuntimeOptions& options) {
  return options.fuse_projections && options.weight_dtype == DType::kBFloat16;
}

DType Fp8DType(platform::Fp8Format format) {
  return format == platform::Fp8Format::kE4m3fnuz ? DType::kFloat8E4m3fnuz
                                                  : DType::kFloat8E4m3fn;
}

// The fused projection `id` is the second weight of, if any.
const FusedProjection* FusedSecond(WeightId id) {
  for (const FusedProjection& f : kFusedProjections) {
    if (f.second == id) return &f;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeepseekV32Model>> DeepseekV32Model::Create(
    LayerPlanner planner, platform::Platform platform, AttentionKernels kernels,
    RuntimeOptions options, uint64_t seed) {
  return Build(std::move(planner), std::move(platform), kernels, options,
               nullptr, {}, seed);
}

absl::StatusOr<std::unique_ptr<DeepseekV32Model>> DeepseekV32Model::Create(
    LayerPlanner planner, platform::Platform platform, AttentionKernels kernels,
    RuntimeOptions options, std::vector<LayerWeights> weights) {
  const ModelConfig& config = planner.config();
  if (static_cast<int>(weights.size()) != config.num_layers()) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights for ", weights.size(), " layers, the model has ",
                     config.num_layers()));
  }
  for (int l = 0; l < config.num_layers(); ++l) {
    DSA_RETURN_IF_ERROR(weights[l].Validate(config, l));
  }
  const HostWeightSource source(weights);
  return Build(std::move(planner), std::move(platform), kernels, options,
               &source, {}, 0);
}

absl::StatusOr<std::unique_ptr<DeepseekV32Model>> DeepseekV32Model::Create(
    LayerPlanner planner, platform::Platform platform, AttentionKernels kernels,
    RuntimeOptions options, const WeightSource& source,
    const LoadProgress& progress) {
  return Build(std::move(planner), std::move(platform), kernels, options,
               &source, progress, 0);
}

absl::StatusOr<std::unique_ptr<DeepseekV32Model>> DeepseekV32Model::Create(
    LayerPlanner planner, platform::Platform platform, AttentionKernels kernels,
    RuntimeOptions options, const WeightSource* weights, uint64_t seed,
    const LoadProgress& progress) {
  return Build(std::move(planner), std::move(platform), kernels, options,
               weights, progress, seed);
}

absl::StatusOr<std::unique_ptr<DeepseekV32Model>> DeepseekV32Model::Build(
    LayerPlanner planner, platform::Platform platform, AttentionKernels kernels,
    RuntimeOptions options, const WeightSource* source,
    const LoadProgress& progress, uint64_t seed) {
  // The whole model's configuration; with tensor parallelism the model runs
  // the rank's (RankConfig: its share of the heads), planned the same way.
  const ModelConfig whole_config = planner.config();
  const TensorParallel& tp = options.tensor_parallel;
  if (tp.enabled()) {
    DSA_ASSIGN_OR_RETURN(ModelConfig rank_config, RankConfig(whole_config, tp));
    DSA_ASSIGN_OR_RETURN(planner, LayerPlanner::Create(std::move(rank_config),
                                                       planner.capabilities(),
                                                       planner.engine()));
  } else {
    DSA_RETURN_IF_ERROR(ValidateTensorParallel(whole_config, tp));
  }
  if (tp.group != nullptr && !platform.runtime().has_collectives()) {
    return absl::FailedPreconditionError(
        absl::StrCat("platform '", platform.id(),
                     "' has no collectives for the tensor-parallel group"));
  }
  DSA_RETURN_IF_ERROR(platform.runtime().BindDevice(options.device));
  // Checked on the planner's configuration before it moves into the model.
  const ModelConfig& config = planner.config();
  if (options.max_model_len < 1 ||
      options.max_model_len > config.max_position_embeddings()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "runtime options: max_model_len is ", options.max_model_len,
        ", expected 1..", config.max_position_embeddings(),
        " (the model's max_position_embeddings)"));
  }
  // A step's token indices are int32 in the kernels' index tensors.
  if (options.max_num_batched_tokens < 1 ||
      options.max_num_batched_tokens > kMaxPositions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "runtime options: max_num_batched_tokens is ",
        options.max_num_batched_tokens, ", expected 1..", kMaxPositions));
  }
  if (options.activation_dtype != DType::kFloat32 &&
      options.activation_dtype != DType::kBFloat16) {
    return absl::InvalidArgumentError(
        absl::StrCat("runtime options: activation_dtype is ",
                     attention::DTypeName(options.activation_dtype),
                     ", expected float32 or bfloat16"));
  }
  if (options.weight_dtype != DType::kBFloat16 &&
      options.weight_dtype != DType::kFloat8E4m3fn) {
    return absl::InvalidArgumentError(
        absl::StrCat("runtime options: weight_dtype is ",
                     attention::DTypeName(options.weight_dtype),
                     ", expected bfloat16 or float8_e4m3fn"));
  }
  // Every kernel the step calls, so that a platform without one fails here,
  // naming the op, and not in the middle of a step.
#define DSA_CHECK_KERNEL(field, name)                                         \
  if (!kernels.field) {                                                       \
    return absl::NotFoundError(absl::StrCat("platform '", platform.id(),      \
                                            "' has no kernel of op ", name)); \
  }
  DSA_CHECK_KERNEL(dense.gemm, attention::Gemm::kName)
  DSA_CHECK_KERNEL(dense.rms_norm, attention::RmsNorm::kName)
  DSA_CHECK_KERNEL(dense.rope, attention::Rope::kName)
  DSA_CHECK_KERNEL(dense.residual_add, attention::ResidualAdd::kName)
  DSA_CHECK_KERNEL(dense.cast, attention::Cast::kName)
  DSA_CHECK_KERNEL(dense.random_fill, attention::RandomFill::kName)
  if (options.weight_dtype == DType::kFloat8E4m3fn) {
    DSA_CHECK_KERNEL(dense.fp8_block_quant, attention::Fp8BlockQuant::kName)
    DSA_CHECK_KERNEL(dense.fp8_block_gemm, attention::Fp8BlockGemm::kName)
  }
#undef DSA_CHECK_KERNEL
  DSA_RETURN_IF_ERROR(
      BlockTables::CheckSizes(options.block_size, options.num_blocks));
  // Every buffer the model allocates, here and in its steps, is a term of
  // DeviceBytes: when the sum is representable, so is each buffer's size.
  // A model past int64, or larger than the device has free, is refused with
  // its size before any allocation (the block tables' free list of
  // num_blocks entries included), rather than failing half built.
  const CheckedSize device_bytes = DeviceBytes(whole_config, options);
  const std::string sizes = absl::StrCat(
      config.name(), " with ", options.num_blocks, " cache blocks of ",
      options.block_size, " tokens per layer, steps of ",
      options.max_num_batched_tokens, " tokens and max_model_len ",
      options.max_model_len);
  if (!device_bytes.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("runtime options: ", sizes,
                     " needs more than 2^63 bytes of device memory (more "
                     "than 64 bits count)"));
  }
  if (!platform.runtime().available()) {
    return absl::FailedPreconditionError(
        absl::StrCat("platform '", platform.id(), "' has no device runtime"));
  }
  DSA_RETURN_IF_ERROR(CheckFits(
      platform.runtime(), device_bytes.value(),
      absl::StrCat("model ", config.proto().name(),
                   " (weights, caches, activations, the step's inputs and "
                   "the indexer's workspace for steps of ",
                   options.max_num_batched_tokens, " tokens up to ",
                   options.max_model_len, ")"),
      "fewer cache blocks (num_blocks), a smaller max_num_batched_tokens or "
      "max_model_len, or a smaller model"));
  DSA_ASSIGN_OR_RETURN(
      BlockTables blocks,
      BlockTables::Create(options.block_size, options.num_blocks));

  std::unique_ptr<DeepseekV32Model> model(
      new DeepseekV32Model(std::move(planner), options, std::move(blocks)));
  // `planner` has moved into the model: read the configuration from there.
  const ModelConfig& model_config = model->planner_.config();
  const DeepseekV32Config& mc = model_config.proto();
  auto shared = std::make_unique<Shared>(std::move(platform), kernels);
  DSA_ASSIGN_OR_RETURN(shared->stream, DeviceStream::Create(shared->runtime));
  shared->exec.stream = shared->stream.handle();
  shared->exec.num_threads = options.num_threads;
  shared->tp = tp;
  shared->graphs = std::make_unique<StepGraphs>(
      shared->runtime, shared->stream.handle(),
      options.step_graphs &&
          !(tp.enabled() && tp.indexer == IndexerParallel::kRows));
  shared->fuse_projections = FusesProjections(options);
  shared->product_fp8 = options.weight_dtype;
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
  shared->mla_rope = mc.mla_rope_style() == MLA_ROPE_NEOX
                         ? attention::RopeStyle::kNeox
                         : attention::RopeStyle::kInterleaved;
  shared->rms_norm_eps = static_cast<float>(model_config.rms_norm_eps());
  shared->softmax_scale = static_cast<float>(model_config.mla_softmax_scale());
  shared->indexer_fp8_divisor =
      attention::VllmFp8ScaleDivisor(shared->indexer_cache_dtype);
  shared->indexer_hadamard = mc.indexer().hadamard_rotation();
  DSA_ASSIGN_OR_RETURN(shared->rope,
                       Upload(shared->runtime, shared->stream,
                              RopeCosSinTable(mc, options.max_model_len)));
  if (model_config.num_mtp_layers() > 0) {
    DSA_ASSIGN_OR_RETURN(
        shared->zero_row,
        Upload(
            shared->runtime, shared->stream,
            std::vector<float>(static_cast<size_t>(mc.hidden_size()), 0.0f)));
  }

  // A rank reads its windows of the whole model's tensors.
  std::optional<ShardedWeightSource> sharded;
  if (source != nullptr && tp.enabled()) {
    sharded.emplace(*source, whole_config, tp);
    source = &*sharded;
  }
  // Weights from a source move through one bounded host staging buffer;
  // with fp8 weights a bf16 matrix is quantised from one device staging
  // buffer (the largest such matrix).
  const bool fp8_weights = options.weight_dtype == DType::kFloat8E4m3fn;
  auto runs_fp8 = [&](const WeightSpec& spec) {
    return fp8_weights && spec.fp8_product;
  };
  const bool fuse = shared->fuse_projections;
  int64_t weight_bytes = 0, weight_bytes_done = 0;
  std::vector<uint16_t> staging;
  // Drawn weights of a rank: a split tensor is drawn whole here (the values
  // of the whole model's, LayerWeights::Random) and its window cut out.
  DeviceBuffer whole_tensor;
  if (source != nullptr) {
    int64_t largest = 0;
    for (int l = 0; l < model_config.num_layers(); ++l) {
      for (const WeightSpec& spec : LayerWeightSpecs(model_config, l)) {
        weight_bytes += WeightBytes(spec, options);
        largest = std::max(largest, spec.size());
      }
    }
    staging.resize(static_cast<size_t>(
        std::max<int64_t>(1, std::min(largest, kWeightStagingBytes / 2))));
  }
  // bf16 of a matrix to quantise, sized once for the largest (so that no
  // quantisation still in flight reads a buffer that was regrown).
  Scratch quant_staging;
  if (fp8_weights) {
    int64_t largest = 0;
    for (int l = 0; l < model_config.num_layers(); ++l) {
      for (const WeightSpec& spec : LayerWeightSpecs(model_config, l)) {
        if (runs_fp8(spec)) largest = std::max(largest, spec.size());
      }
    }
    if (largest > 0) {
      DSA_RETURN_IF_ERROR(
          quant_staging.Get(shared->runtime, static_cast<size_t>(largest) * 2)
              .status());
    }
  }
  const int64_t latent_entry_bytes =
      LatentCacheEntryBytes(shared->latent_format);
  const int64_t slots = int64_t{options.num_blocks} * options.block_size;
  const int64_t indexer_entry_bytes = IndexerEntryBytes(mc);
  for (int l = 0; l < model_config.num_layers(); ++l) {
    auto layer = std::make_unique<Layer>();
    layer->id = l;
    layer->has_indexer = model_config.owns_indexer(l);
    DSA_ASSIGN_OR_RETURN(
        layer->latent_cache,
        DeviceBuffer::Allocate(shared->runtime, slots * latent_entry_bytes));
    DSA_RETURN_IF_ERROR(ZeroFill(shared->stream, layer->latent_cache));
    if (layer->has_indexer) {
      DSA_ASSIGN_OR_RETURN(
          layer->indexer_k_cache,
          DeviceBuffer::Allocate(shared->runtime, slots * indexer_entry_bytes));
      DSA_RETURN_IF_ERROR(ZeroFill(shared->stream, layer->indexer_k_cache));
    }
    const std::vector<WeightSpec> specs = LayerWeightSpecs(model_config, l);
    for (const WeightSpec& spec : specs) {
      const int i = static_cast<int>(spec.id);
      layer->rows[i] = spec.rows;
      layer->cols[i] = spec.cols;
      layer->dtype[i] =
          runs_fp8(spec) ? DType::kFloat8E4m3fn : DType::kBFloat16;
    }
    // The weights' memory: fp8 codes, or bf16 with a fused projection's two
    // tensors in one buffer (the first's rows, then the second's).
    for (const WeightSpec& spec : specs) {
      const int i = static_cast<int>(spec.id);
      if (attention::IsFp8(layer->dtype[i])) {
        DSA_ASSIGN_OR_RETURN(
            layer->storage[i],
            DeviceBuffer::Allocate(shared->runtime,
                                   static_cast<size_t>(spec.size())));
        layer->weights[i] = layer->storage[i].data();
        continue;
      }
      if (const FusedProjection* f = FusedSecond(spec.id);
          fuse && f != nullptr && layer->rows[static_cast<int>(f->first)] > 0) {
        continue;  // in the first's buffer
      }
      int64_t elements = spec.size();
      for (const FusedProjection& f : kFusedProjections) {
        const int second = static_cast<int>(f.second);
        if (fuse && f.first == spec.id && layer->rows[second] > 0) {
          elements += layer->rows[second] * layer->cols[second];
        }
      }
      DSA_ASSIGN_OR_RETURN(
          layer->storage[i],
          DeviceBuffer::Allocate(shared->runtime,
                                 static_cast<size_t>(elements) * 2));
      layer->weights[i] = layer->storage[i].data();
      for (const FusedProjection& f : kFusedProjections) {
        const int second = static_cast<int>(f.second);
        if (fuse && f.first == spec.id && layer->rows[second] > 0) {
          layer->weights[second] =
              static_cast<uint16_t*>(layer->weights[i]) + spec.size();
        }
      }
    }
    for (const WeightSpec& spec : specs) {
      const int i = static_cast<int>(spec.id);
      const bool fp8 = attention::IsFp8(layer->dtype[i]);
      const std::string what =
          absl::StrCat("loading layer ", l, "'s ", spec.name);
      if (fp8 && source != nullptr && source->HoldsFp8Blocks(l, spec)) {
        // An FP8 checkpoint's codes and scales, as stored, a staging buffer
        // at a time in order on the stream.
        uint8_t* bytes = reinterpret_cast<uint8_t*>(staging.data());
        const int64_t chunk = static_cast<int64_t>(staging.size()) * 2;
        for (int64_t begin = 0; begin < spec.size(); begin += chunk) {
          const int64_t count = std::min(chunk, spec.size() - begin);
          DSA_RETURN_IF_ERROR(
              Annotate(source->ReadFp8(l, spec, begin, count, bytes), what));
          DSA_RETURN_IF_ERROR(shared->stream.CopyHostToDevice(
              static_cast<uint8_t*>(layer->weights[i]) + begin, bytes,
              static_cast<size_t>(count)));
          weight_bytes_done += count;
          if (progress) progress(weight_bytes_done, weight_bytes);
        }
        std::vector<float> scales(static_cast<size_t>(
            attention::Fp8Blocks(spec.rows) * attention::Fp8Blocks(spec.cols)));
        DSA_RETURN_IF_ERROR(
            Annotate(source->ReadFp8Scales(l, spec, scales.data()), what));
        DSA_ASSIGN_OR_RETURN(layer->scales[i],
                             Upload(shared->runtime, shared->stream, scales));
        weight_bytes_done += static_cast<int64_t>(scales.size()) * 4;
        if (progress) progress(weight_bytes_done, weight_bytes);
        continue;
      }
      // bf16 bits: into the layer's buffer, or the staging buffer of a
      // matrix to quantise.
      uint16_t* bf16 = nullptr;
      if (fp8) {
        DSA_ASSIGN_OR_RETURN(
            void* p, quant_staging.Get(shared->runtime,
                                       static_cast<size_t>(spec.size()) * 2));
        bf16 = static_cast<uint16_t*>(p);
      } else {
        bf16 = static_cast<uint16_t*>(layer->weights[i]);
      }
      if (source != nullptr) {
        // The source's bf16, a staging buffer at a time, in order on the
        // stream (each chunk is staged before the copy returns, so the
        // staging buffer is free for the next).
        const int64_t chunk = static_cast<int64_t>(staging.size());
        for (int64_t begin = 0; begin < spec.size(); begin += chunk) {
          const int64_t count = std::min(chunk, spec.size() - begin);
          DSA_RETURN_IF_ERROR(
              source->ReadBf16(l, spec, begin, count, staging.data()));
          DSA_RETURN_IF_ERROR(shared->stream.CopyHostToDevice(
              bf16 + begin, staging.data(), static_cast<size_t>(count) * 2));
          weight_bytes_done += fp8 ? count : count * 2;
          if (progress) progress(weight_bytes_done, weight_bytes);
        }
      } else {
        // Drawn on the device: RandomFill gives LayerWeights::Random's bits.
        const bool split =
            tp.enabled() && ShardOf(spec.id) != WeightShard::kReplicated;
        DSA_ASSIGN_OR_RETURN(const WeightSpec drawn,
                             split ? WholeSpec(whole_config, l, spec.id)
                                   : absl::StatusOr<WeightSpec>(spec));
        if (split &&
            whole_tensor.bytes() < static_cast<size_t>(drawn.size()) * 2) {
          // The draws and cuts queued on the smaller buffer finish first.
          DSA_RETURN_IF_ERROR(shared->stream.Synchronize());
          whole_tensor = DeviceBuffer();
          DSA_ASSIGN_OR_RETURN(
              whole_tensor,
              DeviceBuffer::Allocate(shared->runtime,
                                     static_cast<size_t>(drawn.size()) * 2));
        }
        attention::RandomFill::Args a;
        a.y = MakeTensorView(split ? whole_tensor.data() : bf16,
                             DType::kBFloat16, {drawn.size()});
        a.seed = seed;
        a.stream = WeightStream(l, spec.id);
        a.scale = drawn.scale;
        a.offset = drawn.offset;
        DSA_RETURN_IF_ERROR(shared->kernels.dense.random_fill(shared->exec, a));
        if (split) {
          const RankWindow w = RankWindowOf(spec, tp);
          attention::Cast::Args cut;
          cut.x = View2(whole_tensor.data(), DType::kBFloat16, w.rows, w.cols,
                        w.row_stride, w.first);
          cut.y = View2(bf16, DType::kBFloat16, w.rows, w.cols, w.cols);
          DSA_RETURN_IF_ERROR(shared->kernels.dense.cast(shared->exec, cut));
        }
      }
      if (fp8) {
        // Quantised per 128 x 128 block, as an FP8 checkpoint holds it.
        const int64_t row_blocks = attention::Fp8Blocks(spec.rows);
        const int64_t col_blocks = attention::Fp8Blocks(spec.cols);
        DSA_ASSIGN_OR_RETURN(
            layer->scales[i],
            DeviceBuffer::Allocate(
                shared->runtime,
                static_cast<size_t>(row_blocks * col_blocks) * sizeof(float)));
        attention::Fp8BlockQuant::Args q;
        q.x = MakeTensorView(bf16, DType::kBFloat16, {spec.rows, spec.cols});
        q.block_rows = attention::kFp8BlockSize;
        q.q = MakeTensorView(layer->weights[i], DType::kFloat8E4m3fn,
                             {spec.rows, spec.cols});
        q.scale_inv = MakeTensorView(layer->scales[i].data(), DType::kFloat32,
                                     {row_blocks, col_blocks});
        DSA_RETURN_IF_ERROR(Annotate(
            shared->kernels.dense.fp8_block_quant(shared->exec, q), what));
        if (source != nullptr) {
          weight_bytes_done += row_blocks * col_blocks * 4;
          if (progress) progress(weight_bytes_done, weight_bytes);
        }
        // The next matrix reuses the staging buffer in stream order.
      }
    }
    DSA_RETURN_IF_ERROR(layer->SplitKvBProj(*shared, mc));
    model->layers_.push_back(std::move(layer));
  }
  model->shared_ = std::move(shared);
  DSA_RETURN_IF_ERROR(
      model->ReserveActivations(options.max_num_batched_tokens));
  DSA_RETURN_IF_ERROR(model->ReserveStepInputs());
  // One bf16 product of one row on the model's stream, so that the vendor
  // GEMM's per-stream state (cuBLASLt's workspace, which the dense prefill's
  // decompression takes whatever the activations' type) is made here and
  // not in the first step, which then allocates nothing of its own. It
  // multiplies by a corner of layer 0's kv_b_proj, which is bf16 whatever
  // the projections' weights are.
  {
    Shared& s = *model->shared_;
    const Layer& first = *model->layers_.front();
    const int kv_b = static_cast<int>(WeightId::kKvBProj);
    const int64_t hidden = mc.hidden_size(), q_lora = mc.q_lora_rank();
    const int64_t qkv_width =
        q_lora + mc.kv_lora_rank() + mc.qk_rope_head_dim();
    const int64_t in = std::min(first.cols[kv_b], hidden);
    const int64_t out = std::min(first.rows[kv_b], q_lora);
    TensorView w =
        MakeTensorView(first.weights[kv_b], DType::kBFloat16, {1, out, in});
    w.strides[0] = out * first.cols[kv_b];
    w.strides[1] = first.cols[kv_b];
    DSA_RETURN_IF_ERROR(ZeroFill(s.stream, model->act_->x));
    DSA_RETURN_IF_ERROR(s.Gemm(
        "kv_b_proj (creation)",
        Batch1(View2(model->act_->x.data(), DType::kBFloat16, 1, in, hidden)),
        w,
        Batch1(View2(model->act_->qkv_a.data(), DType::kFloat32, 1, out,
                     qkv_width))));
    s.counts = OpCallCounts{};
  }
  DSA_RETURN_IF_ERROR(model->shared_->stream.Synchronize());
  return model;
}

}  // namespace dsa::model::deepseek_v32
