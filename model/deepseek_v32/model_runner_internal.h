// DeepseekV32Model's internals, shared by the files that implement it and
// included by them only: the device helpers (scratch, uploads, views, error
// annotation, the memory check), the sizes DeviceBytes and creation both
// use, the fused projections, and the model's private types: Shared (the
// platform, its kernels, the step's inputs and every op's launch), Layer
// (a layer's caches and weights) and Activations. model_runner.cc holds the
// public entry points and the step; model_runner_create.cc creation and the
// weights' load; model_runner_reserve.cc the device memory a model reserves
// and the profile run; model_runner_layer.cc a layer's forward.
#ifndef DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_INTERNAL_H_
#define DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_INTERNAL_H_

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "attention/dense_ops.h"
#include "attention/dtypes/dtype.h"
#include "attention/dtypes/fp8.h"
#include "attention/ops.h"
#include "attention/tensor.h"
#include "model/deepseek_v32/model_runner.h"
#include "model/deepseek_v32/projection_weight.h"
#include "model/deepseek_v32/step_graphs.h"
#include "platform/device_buffer.h"
#include "platform/device_stream.h"
#include "platform/registry.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {

using attention::DType;
using attention::MakeTensorView;
using attention::TensorView;
using platform::DeviceBuffer;
using platform::DeviceRuntime;
using platform::DeviceStream;

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

// `status` with `where` in front of its message: what the step was doing.
inline absl::Status Annotate(const absl::Status& status,
                             absl::string_view where) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(where, ": ", status.message()));
}

// "1.50 GiB (1610612736 bytes)".
inline std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  const char* unit = "KiB";
  double v = b / 1024;
  if (b >= double{1 << 30}) {
    unit = "GiB";
    v = b / double{1 << 30};
  } else if (b >= double{1 << 20}) {
    unit = "MiB";
    v = b / double{1 << 20};
  }
  return absl::StrCat(absl::StrFormat("%.2f ", v), unit, " (", bytes,
                      " bytes)");
}

// OK when `bytes` more device memory fit in what the platform reports free
// now; ResourceExhausted naming `what`, the sizes and `hint` otherwise. A
// platform that cannot tell (Unimplemented) is not checked: the allocation
// itself then says.
inline absl::Status CheckFits(const DeviceRuntime& runtime, int64_t bytes,
                              absl::string_view what, absl::string_view hint) {
  if (bytes <= 0) return absl::OkStatus();
  absl::StatusOr<platform::DeviceMemory> memory = runtime.MemoryInfo();
  if (!memory.ok()) {
    if (memory.status().code() == absl::StatusCode::kUnimplemented) {
      return absl::OkStatus();
    }
    return Annotate(memory.status(),
                    absl::StrCat(what, ": asking for the free memory"));
  }
  if (static_cast<uint64_t>(bytes) <= memory->free_bytes) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " needs ", FormatBytes(bytes), " more of device memory; platform '",
      runtime.platform_id(), "' reports ",
      FormatBytes(static_cast<int64_t>(memory->free_bytes)), " free of ",
      FormatBytes(static_cast<int64_t>(memory->total_bytes)),
      hint.empty() ? "" : "; ", hint));
}

// Copies a host vector into `buffer`, reserved at creation for the largest
// step (ReserveStepInputs), so that a step allocates nothing for its inputs;
// in order on the step's stream.
template <class T>
absl::Status UploadInto(const DeviceStream& stream, DeviceBuffer& buffer,
                        const std::vector<T>& host, absl::string_view name) {
  const size_t bytes = host.size() * sizeof(T);
  if (buffer.bytes() < bytes) {
    return absl::InternalError(
        absl::StrCat("step: ", name, " of ", bytes,
                     " bytes exceeds the buffer reserved for it (",
                     buffer.bytes(), " bytes)"));
  }
  const absl::Status copied =
      stream.CopyHostToDevice(buffer.data(), host.data(), bytes);
  if (copied.ok()) return copied;
  return Annotate(copied, absl::StrCat("step: uploading ", name));
}

// An op's error, with the op (and what it computed) in front unless the
// kernel's message names the op already.
inline absl::Status OpError(const absl::Status& status, const char* op,
                            const char* what) {
  absl::string_view message = status.message();
  const std::string named = absl::StrCat(op, ": ");
  if (absl::StartsWith(message, named)) message.remove_prefix(named.size());
  return absl::Status(status.code(),
                      what == nullptr
                          ? absl::StrCat(op, ": ", message)
                          : absl::StrCat(op, " (", what, "): ", message));
}

// Zero-fills device memory, so that a fresh cache holds defined bytes (a
// cache dump, or two instances of one model, compare equal slot for slot).
// `bytes` bytes of `value` at `dst`, in order on `stream`, a chunk of a
// host buffer at a time.
inline absl::Status FillBytes(const DeviceStream& stream, void* dst,
                              size_t bytes, uint8_t value) {
  constexpr size_t kChunk = size_t{1} << 20;
  const std::vector<uint8_t> chunk(std::min(kChunk, bytes), value);
  for (size_t offset = 0; offset < bytes; offset += kChunk) {
    DSA_RETURN_IF_ERROR(stream.CopyHostToDevice(
        static_cast<uint8_t*>(dst) + offset, chunk.data(),
        std::min(kChunk, bytes - offset)));
  }
  return absl::OkStatus();
}

inline absl::Status ZeroFill(const DeviceStream& stream,
                             const DeviceBuffer& buffer) {
  return FillBytes(stream, buffer.data(), buffer.bytes(), 0);
}

template <class T>
T* Offset(void* base, int64_t elements) {
  return static_cast<T*>(base) + elements;
}

// A [rows, cols] view at element `offset` of `base` whose rows are
// `row_stride` elements apart.
inline TensorView View2(void* base, DType dtype, int64_t rows, int64_t cols,
                        int64_t row_stride, int64_t offset = 0) {
  TensorView v = MakeTensorView(nullptr, dtype, {rows, cols});
  v.data = static_cast<char*>(base) + offset * attention::DTypeSize(dtype);
  v.strides[0] = row_stride;
  return v;
}

// A [rows, cols] view as the gemm op's [1, rows, cols].
inline TensorView Batch1(const TensorView& v) {
  TensorView b = MakeTensorView(v.data, v.dtype, {1, v.dim(0), v.dim(1)});
  b.strides[0] = v.dim(0) * v.stride(0);
  b.strides[1] = v.stride(0);
  b.strides[2] = 1;
  return b;
}

// Activations quantised per token and 128 columns for the W8A8 products
// that read them (fp8_block_gemm's x_q and x_scale_inv, written by
// rms_norm's y_q): codes [rows, cols] and scales [rows, groups] laid out
// group-major, strides (1, rows), as cuBLASLt's VEC128 scales are. Absent
// views when not given.
struct QuantisedRows {
  TensorView codes, scale_inv;
  bool given() const { return !codes.absent(); }
};

// `rows` rows of `cols` columns in a codes buffer and a scales buffer of at
// least rows * ceil(cols / 128) floats.
inline QuantisedRows QuantisedView(void* codes, void* scales, DType fp8,
                                   int64_t rows, int64_t cols) {
  QuantisedRows q;
  q.codes = View2(codes, fp8, rows, cols, cols);
  q.scale_inv = MakeTensorView(scales, DType::kFloat32,
                               {rows, attention::Fp8Blocks(cols)});
  q.scale_inv.strides[0] = 1;
  q.scale_inv.strides[1] = rows;
  return q;
}

// Device bytes of a layer's weight: bf16, or fp8 codes and their float32
// block scales when the step multiplies it in fp8.
inline int64_t WeightBytes(const WeightSpec& spec,
                           const RuntimeOptions& options) {
  if (options.weight_dtype == DType::kFloat8E4m3fn && spec.fp8_product) {
    return spec.size() + attention::Fp8Blocks(spec.rows) *
                             attention::Fp8Blocks(spec.cols) * 4;
  }
  return spec.size() * 2;
}

// Bytes of one token's entry in the MLA latent cache.
inline int64_t LatentCacheEntryBytes(
    const attention::LatentCacheFormat& format) {
  return attention::LatentCacheEntryWidth(format) *
         (attention::IsFp8(format.dtype) ? 1 : 2);
}

// Bytes of one token's entry in the indexer K cache: the fp8 key and its
// float32 scale.
inline int64_t IndexerEntryBytes(const DeepseekV32Config& c) {
  return c.indexer().index_head_dim() + 4;
}

// The query rows one rank's indexer scores in a step of `rows`, and the rows
// of its top-k buffer: all of them, or with the row-sharded indexer its
// block and the all-gathered blocks of every rank (RowsOf).
inline int64_t ScoredRows(const TensorParallel& tp, int64_t rows) {
  return tp.enabled() && tp.indexer == IndexerParallel::kRows
             ? RowsPerRank(rows, tp.size)
             : rows;
}
inline int64_t TopKRows(const TensorParallel& tp, int64_t rows) {
  return ScoredRows(tp, rows) *
         (tp.enabled() && tp.indexer == IndexerParallel::kRows ? tp.size : 1);
}

// Projections that read the same input, fused as vLLM fuses them: the two
// weights are concatenated at load ([first's rows + second's rows, cols],
// the first's rows first), so that one gemm computes both outputs side by
// side and their consumers take row-strided views of it. q_a_proj |
// kv_a_proj_with_mqa is vLLM's fused_qkv_a_proj; the indexer's wk |
// weights_proj its wk_weights_proj.
struct FusedProjection {
  const char* name;  // vLLM's
  WeightId first, second;
};
inline constexpr FusedProjection kFusedQkvA = {
    "fused_qkv_a_proj", WeightId::kQAProj, WeightId::kKvAProjWithMqa};
inline constexpr FusedProjection kFusedIndexerKw = {
    "wk_weights_proj", WeightId::kIndexerWk, WeightId::kIndexerWeightsProj};
inline constexpr FusedProjection kFusedProjections[] = {kFusedQkvA,
                                                        kFusedIndexerKw};

// The top-k buffer, [tokens, index_topk] int32: one per model, and its one
// owner. A layer that owns an indexer writes it (indexer_k_write clears it to
// -1, indexer_topk fills it); that layer and the layers sharing its top-k
// (GLM-5.2's, LayerPlan::topk_source_layer) read it, until the next indexer
// layer writes it again. `written_by_layer` records which layer's top-k it
// holds, so a layer can never read another layer's by mistake.
struct TopKBuffer {
  Scratch buffer;
  int written_by_layer = -1;
};

// Resources every layer uses: the platform, its kernels, the rope table, the
// step's index tensors, the top-k buffer and the indexer's workspace.
struct DeepseekV32Model::Shared {
  platform::Platform platform;
  DeviceRuntime runtime;
  AttentionKernels kernels;
  // The model's own stream (non-blocking where the platform has streams):
  // every op, upload and device copy of a load and a step is ordered on it,
  // and exec passes it to every kernel.
  DeviceStream stream;
  attention::ExecutionContext exec;
  attention::LatentCacheFormat latent_format;
  DType indexer_cache_dtype = DType::kFloat8E4m3fn;
  attention::RopeStyle indexer_rope = attention::RopeStyle::kNeox;
  // The model's numerics, from its config, computed once.
  attention::RopeStyle mla_rope = attention::RopeStyle::kInterleaved;
  float rms_norm_eps = 1e-6f;
  float softmax_scale = 0.0f;
  float indexer_fp8_divisor = 0.0f;  // vLLM's (224 on e4m3fnuz)
  bool indexer_hadamard = false;

  DeviceBuffer rope;  // [max_model_len, rope_dim] f32
  // [hidden] f32 zeros: the MTP input's rows at position 0 (MTP layers only).
  DeviceBuffer zero_row;

  // This step's index tensors (internal order, see StepLayout).
  DeviceBuffer positions, slot_mapping, block_table, seq_lens, token_request,
      prefill_query_start_loc, row_key_start, row_key_end;
  // The host's copies of two of them, uploaded from here: the dense
  // prefill plans its launch from them instead of reading the device's back.
  std::vector<int32_t> host_seq_lens, host_prefill_query_start_loc;

  TopKBuffer topk;
  Scratch workspace;  // the indexer's logits
  OpCallCounts counts;
  TensorParallel tp;  // RuntimeOptions::tensor_parallel
  // FusesProjections(options): kFusedProjections run as one gemm each.
  bool fuse_projections = false;
  // The fp8 encoding of the W8A8 products' operands (the weights', and x's
  // and q_c's where their RMSNorms quantise them, QuantisesNormOutputs).
  DType product_fp8 = DType::kFloat8E4m3fn;
  // StepOptions::time_ops: each op timed on op_clock.
  bool time_ops = false;
  OpClock op_clock = OpClock::kDevice;
  bool scoring = false;  // inside the indexer's scoring (OpTimes)
  // A layer's output (o_proj's) not yet added into the residual stream: the
  // next layer's input_layernorm adds it in its launch (NormOfResidual);
  // any other reader of the stream first calls FlushResidual. Absent when
  // none.
  TensorView pending_residual;
  // The layer's o_proj when nothing comes between it and the residual add
  // (a rank without collectives) and it takes no stream scratch (bf16):
  // launched by the same readers first, so that it runs in the next layer's
  // graph run (StepGraphs).
  struct PendingProjection {
    bool given = false;
    ProjectionWeight weight;
    TensorView x, y;
  };
  PendingProjection pending_o_proj;
  // RuntimeOptions::step_graphs (set at creation; disabled where the
  // platform has no graphs). After the runtime and the stream, so that its
  // graphs are destroyed before them.
  std::unique_ptr<StepGraphs> graphs;
  OpTimes times;

  Shared(platform::Platform p, AttentionKernels k)
      : platform(std::move(p)), runtime(platform.runtime()), kernels(k) {}

  // Every op of a step goes through here: counted, timed when asked, and
  // its error named after the op (`op`) and what it computed (`what`, a
  // weight's name, or null).
  template <typename Kernel, typename Args>
  absl::Status Launch(const char* op, const char* what,
                      int OpCallCounts::*count, double OpTimes::*ms,
                      const Kernel& kernel, const Args& args) {
    return Counted(op, what, count, ms, [&] { return kernel(exec, args); });
  }
  // `call` counted as one op of its kind and, with time_ops, timed; inside
  // a replayed graph run only counted.
  template <typename Call>
  absl::Status Counted(const char* op, const char* what,
                       int OpCallCounts::*count, double OpTimes::*ms,
                       const Call& call) {
    ++(counts.*count);
    // Inside a replayed graph run: the graph launches the op.
    if (graphs != nullptr && graphs->replaying()) return absl::OkStatus();
    if (!time_ops) {
      absl::Status status = call();
      return status.ok() ? status : OpError(status, op, what);
    }
    // The device clock waits for the work before the op and for the op.
    const bool device_clock = op_clock == OpClock::kDevice;
    absl::Status status =
        device_clock ? stream.Synchronize() : absl::OkStatus();
    const auto begin = std::chrono::steady_clock::now();
    if (status.ok()) status = call();
    if (status.ok() && device_clock) status = stream.Synchronize();
    const double elapsed = std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - begin)
                               .count();
    times.*ms += elapsed;
    if (scoring) times.indexer_scoring += elapsed;
    if (status.ok()) return status;
    return OpError(status, op, what);
  }
#define DSA_LAUNCH(shared, op, what, kernel, args)                        \
  (shared).Launch(#op, (what), &OpCallCounts::op, &OpTimes::op, (kernel), \
                  (args))

  // The rank's collectives (RuntimeOptions::tensor_parallel), on the
  // step's stream; none without a group (a rank running alone).
  absl::Status AllReduce(const char* what, const TensorView& x) {
    if (tp.group == nullptr) return absl::OkStatus();
    return Counted("all_reduce", what, &OpCallCounts::all_reduce,
                   &OpTimes::all_reduce, [&] {
                     return runtime.AllReduceSum(
                         tp.group, tp.rank, x.data,
                         static_cast<size_t>(x.num_elements()),
                         x.dtype == DType::kFloat32 ? DSA_COLLECTIVE_FLOAT32
                                                    : DSA_COLLECTIVE_BFLOAT16,
                         exec.stream);
                   });
  }
  absl::Status AllGather(const char* what, void* send, void* recv,
                         size_t bytes) {
    if (tp.group == nullptr) return absl::OkStatus();
    return Counted("all_gather", what, &OpCallCounts::all_gather,
                   &OpTimes::all_gather, [&] {
                     return runtime.AllGather(tp.group, tp.rank, send, recv,
                                              bytes, exec.stream);
                   });
  }

  // The dense ops; `what` names the weight or the product.
  absl::Status Gemm(const char* what, const TensorView& x, const TensorView& w,
                    const TensorView& y) {
    attention::Gemm::Args a;
    a.x = x;
    a.w = w;
    a.y = y;
    return DSA_LAUNCH(*this, gemm, what, kernels.dense.gemm, a);
  }
  // A projection y = x W^T on its weight's precision: the gemm op for bf16,
  // fp8_block_gemm for fp8 (counted and timed as gemm), which reads x's
  // quantisation when one is given (`x_q`, of the same rows) instead of
  // quantising x itself. x and y as the gemm op's [1, rows, cols] views.
  absl::Status Project(const char* what, const TensorView& x,
                       const ProjectionWeight& w, const TensorView& y,
                       const QuantisedRows& x_q = {}) {
    if (!w.fp8()) return Gemm(what, x, Batch1(w.weight), y);
    attention::Fp8BlockGemm::Args a;
    if (x_q.given()) {
      a.x_q = x_q.codes;
      a.x_scale_inv = x_q.scale_inv;
    } else {
      a.x = View2(x.data, x.dtype, x.dim(1), x.dim(2), x.stride(1));
    }
    a.w = w.weight;
    a.w_scale_inv = w.scale_inv;
    a.y = View2(y.data, y.dtype, y.dim(1), y.dim(2), y.stride(1));
    return Launch("fp8_block_gemm", what, &OpCallCounts::gemm, &OpTimes::gemm,
                  kernels.dense.fp8_block_gemm, a);
  }
  // The pending o_proj (PendingProjection), if any.
  absl::Status LaunchPendingProjection() {
    if (!pending_o_proj.given) return absl::OkStatus();
    pending_o_proj.given = false;
    return Project("o_proj", pending_o_proj.x, pending_o_proj.weight,
                   pending_o_proj.y);
  }
  // The residual stream's norm (a layer's input_layernorm): y =
  // RMSNorm(residual), after adding the pending layer output into the stream
  // in the same launch (RmsNorm's residual) when there is one.
  absl::Status NormOfResidual(const char* what, const TensorView& residual,
                              const TensorView& weight, const TensorView& y,
                              const QuantisedRows& y_q = {}) {
    DSA_RETURN_IF_ERROR(LaunchPendingProjection());
    if (pending_residual.absent()) {
      return RmsNorm(what, residual, weight, y, y_q);
    }
    const TensorView x = std::exchange(pending_residual, TensorView());
    return RmsNorm(what, x, weight, y, y_q, residual);
  }
  // The pending layer output added into the residual stream (residual_add),
  // for a reader of the stream other than the next layer's norm.
  absl::Status FlushResidual(const TensorView& residual) {
    DSA_RETURN_IF_ERROR(LaunchPendingProjection());
    if (pending_residual.absent()) return absl::OkStatus();
    attention::ResidualAdd::Args a;
    a.residual = residual;
    a.x = pending_residual;
    pending_residual = TensorView();
    return DSA_LAUNCH(*this, residual_add, nullptr, kernels.dense.residual_add,
                      a);
  }
  // y = RMSNorm(x), and y's quantisation into `y_q` when one is given; with
  // `residual`, x is first added into it and y = RMSNorm(the sum).
  absl::Status RmsNorm(const char* what, const TensorView& x,
                       const TensorView& weight, const TensorView& y,
                       const QuantisedRows& y_q = {},
                       const TensorView& residual = {}) {
    attention::RmsNorm::Args a;
    a.x = x;
    a.residual = residual;
    a.weight = weight;
    a.eps = rms_norm_eps;
    a.y = y;
    a.y_q = y_q.codes;
    a.y_scale_inv = y_q.scale_inv;
    return DSA_LAUNCH(*this, rms_norm, what, kernels.dense.rms_norm, a);
  }
  absl::Status Rope(const char* what, const TensorView& x, int64_t tokens,
                    int64_t max_position) {
    attention::Rope::Args a;
    a.x = x;
    a.positions = MakeTensorView(positions.data(), DType::kInt64, {tokens});
    a.cos_sin_cache =
        MakeTensorView(rope.data(), DType::kFloat32, {max_position, x.dim(2)});
    a.rope_style = mla_rope;
    return DSA_LAUNCH(*this, rope, what, kernels.dense.rope, a);
  }
  absl::Status Cast(const char* what, const TensorView& x,
                    const TensorView& y) {
    attention::Cast::Args a;
    a.x = x;
    a.y = y;
    return DSA_LAUNCH(*this, cast, what, kernels.dense.cast, a);
  }
};

// Aborts a graph run still open when a layer returns early (an op failed),
// discarding what it recorded.
class GraphRunGuard {
 public:
  explicit GraphRunGuard(StepGraphs* graphs) : graphs_(graphs) {}
  ~GraphRunGuard() {
    if (graphs_ != nullptr && graphs_->open()) graphs_->Abort();
  }
  GraphRunGuard(const GraphRunGuard&) = delete;
  GraphRunGuard& operator=(const GraphRunGuard&) = delete;

 private:
  StepGraphs* graphs_;
};

// One layer: its caches and its weights, on the device.
struct DeepseekV32Model::Layer {
  int id = 0;
  bool has_indexer = false;
  DeviceBuffer latent_cache;
  DeviceBuffer indexer_k_cache;  // empty without an indexer
  // The weights' memory: a buffer per tensor, one for both of a fused
  // projection's (kFusedProjections, held by its first; bf16 weights only).
  DeviceBuffer storage[kNumWeightIds];
  // By WeightId; null for tensors the layer does not have: bf16, or for
  // fp8 products with fp8 weights e4m3fn codes with their block scales.
  void* weights[kNumWeightIds] = {};
  DeviceBuffer scales[kNumWeightIds];
  DType dtype[kNumWeightIds] = {};
  int64_t rows[kNumWeightIds] = {};
  int64_t cols[kNumWeightIds] = {};
  // kv_b_proj's per-head blocks, split once at load: W_UK [heads, nope,
  // kv_lora] and W_UV [heads, v, kv_lora] bf16, which dense_mha_prefill
  // reads instead of splitting kv_b_proj on every call.
  DeviceBuffer w_uk, w_uv;

  bool has(WeightId id) const {
    return weights[static_cast<int>(id)] != nullptr;
  }
  // [rows, cols] bf16 as the gemm op's [1, rows, cols] weight.
  TensorView Matrix(WeightId id) const {
    const int i = static_cast<int>(id);
    return MakeTensorView(weights[i], DType::kBFloat16, {1, rows[i], cols[i]});
  }
  // A fused projection's two bf16 weights as one [rows + rows, cols].
  ProjectionWeight Projection(const FusedProjection& f) const {
    const int a = static_cast<int>(f.first), b = static_cast<int>(f.second);
    ProjectionWeight w;
    w.weight = MakeTensorView(weights[a], DType::kBFloat16,
                              {rows[a] + rows[b], cols[a]});
    return w;
  }
  // A projection's weight in its precision.
  ProjectionWeight Projection(WeightId id) const {
    const int i = static_cast<int>(id);
    ProjectionWeight w;
    w.weight = MakeTensorView(weights[i], dtype[i], {rows[i], cols[i]});
    if (attention::IsFp8(dtype[i])) {
      w.scale_inv = MakeTensorView(
          scales[i].data(), DType::kFloat32,
          {attention::Fp8Blocks(rows[i]), attention::Fp8Blocks(cols[i])});
    }
    return w;
  }
  TensorView Vector(WeightId id) const {
    const int i = static_cast<int>(id);
    return MakeTensorView(weights[i], DType::kBFloat16, {rows[i]});
  }

  // w_uk and w_uv from kv_b_proj [heads * (nope + v), kv_lora], once, after
  // it was written: head h's rows are nope + v contiguous rows, so each
  // block is a [heads, rows * kv_lora] strided view of it, copied by one
  // cast (bf16 to bf16) in order on the model's stream.
  absl::Status SplitKvBProj(Shared& s, const DeepseekV32Config& c) {
    if (!has(WeightId::kKvBProj)) return absl::OkStatus();
    const int64_t heads = c.num_attention_heads(), nope = c.qk_nope_head_dim();
    const int64_t v = c.v_head_dim(), lora = c.kv_lora_rank();
    void* kv_b_proj = weights[static_cast<int>(WeightId::kKvBProj)];
    const struct {
      DeviceBuffer* out;
      int64_t rows, first_row;
    } blocks[] = {{&w_uk, nope, 0}, {&w_uv, v, nope}};
    for (const auto& b : blocks) {
      const int64_t elements = b.rows * lora;
      DSA_ASSIGN_OR_RETURN(
          *b.out,
          DeviceBuffer::Allocate(
              s.runtime,
              static_cast<size_t>(std::max<int64_t>(heads * elements, 1)) * 2));
      if (elements == 0) continue;
      attention::Cast::Args a;
      a.x = View2(kv_b_proj, DType::kBFloat16, heads, elements,
                  (nope + v) * lora, b.first_row * lora);
      a.y = View2(b.out->data(), DType::kBFloat16, heads, elements, elements);
      const absl::Status cast = s.kernels.dense.cast(s.exec, a);
      if (!cast.ok()) {
        return Annotate(cast,
                        absl::StrCat("layer ", id, ": splitting kv_b_proj"));
      }
    }
    return absl::OkStatus();
  }
};

// The step's activations, in device buffers reserved once for the largest
// step (internal token order).
struct DeepseekV32Model::Activations {
  int64_t capacity = 0;   // tokens
  DeviceBuffer residual;  // [T, hidden] f32: the residual stream
  DeviceBuffer x;         // [T, hidden]: input_layernorm(residual)
  // With QuantisesNormOutputs: x and q_c quantised (QuantisedRows), their
  // codes [T, cols] and scales [ceil(cols / 128), T] f32.
  DeviceBuffer x_q, x_scales, q_c_q, q_c_scales;
  // [T, q_lora + kv_lora + rope] f32: fused_qkv_a_proj's output, q_c before
  // its norm, then kv_c before its norm and k_pe (kFusedQkvA).
  DeviceBuffer qkv_a;
  DeviceBuffer q_c;   // [T, q_lora]
  DeviceBuffer q;     // [T, heads, qk_nope + rope]
  DeviceBuffer kv_c;  // [T, kv_lora]
  // [T, index_dim + index_heads]: wk_weights_proj's output, the indexer's
  // key, then its head weights (kFusedIndexerKw).
  DeviceBuffer indexer_kw;
  DeviceBuffer indexer_q;     // [T, index_heads, index_dim]
  DeviceBuffer q_fp8;         // [T, index_heads, index_dim] fp8
  DeviceBuffer head_weights;  // [T, index_heads] f32
  DeviceBuffer q_absorbed;    // [T, heads, kv_lora + rope]
  DeviceBuffer attn;          // [T, heads, v_head_dim]
  DeviceBuffer out;           // [T, hidden] f32: the layer's output
  // [T, hidden] f32: the residual stream after the main layers, kept on the
  // device while the MTP layers run (presets with MTP layers only).
  DeviceBuffer main_hidden;
  // MTP layers only: [num_mtp_layers, T, hidden] f32, their token input
  // (rows at position 0 zeroed), and [T, 2 * hidden], [enorm | hnorm].
  DeviceBuffer mtp_embeddings;
  DeviceBuffer mtp_cat;

  // x's and q_c's quantisation in a step of T tokens, or absent views
  // without QuantisesNormOutputs (no buffers).
  QuantisedRows XQuantised(DType fp8, int64_t T, int64_t hidden) const {
    if (x_q.data() == nullptr) return {};
    return QuantisedView(x_q.data(), x_scales.data(), fp8, T, hidden);
  }
  QuantisedRows QcQuantised(DType fp8, int64_t T, int64_t q_lora) const {
    if (q_c_q.data() == nullptr) return {};
    return QuantisedView(q_c_q.data(), q_c_scales.data(), fp8, T, q_lora);
  }
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_INTERNAL_H_
