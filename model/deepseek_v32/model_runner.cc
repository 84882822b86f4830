#include "model/deepseek_v32/model_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attention/dense_ops.h"
#include "attention/dtypes/bf16.h"
#include "attention/dtypes/dtype.h"
#include "attention/dtypes/fp8.h"
#include "attention/tensor.h"
#include "model/deepseek_v32/host_math.h"
#include "model/deepseek_v32/projection_weight.h"
#include "platform/device_stream.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

using attention::DType;
using attention::MakeTensorView;
using attention::TensorView;
using platform::DeviceBuffer;
using platform::DeviceRuntime;
using platform::DeviceStream;

// The indexer's k_norm LayerNorm: 1e-6 in every engine and in DeepSeek's
// reference (the RMSNorms take the config's rms_norm_eps).
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

// `status` with `where` in front of its message: what the step was doing.
absl::Status Annotate(const absl::Status& status, absl::string_view where) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(where, ": ", status.message()));
}

// "1.50 GiB (1610612736 bytes)".
std::string FormatBytes(int64_t bytes) {
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
absl::Status CheckFits(const DeviceRuntime& runtime, int64_t bytes,
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
absl::Status OpError(const absl::Status& status, const char* op,
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
absl::Status FillBytes(const DeviceStream& stream, void* dst, size_t bytes,
                       uint8_t value) {
  constexpr size_t kChunk = size_t{1} << 20;
  const std::vector<uint8_t> chunk(std::min(kChunk, bytes), value);
  for (size_t offset = 0; offset < bytes; offset += kChunk) {
    DSA_RETURN_IF_ERROR(stream.CopyHostToDevice(
        static_cast<uint8_t*>(dst) + offset, chunk.data(),
        std::min(kChunk, bytes - offset)));
  }
  return absl::OkStatus();
}

absl::Status ZeroFill(const DeviceStream& stream, const DeviceBuffer& buffer) {
  return FillBytes(stream, buffer.data(), buffer.bytes(), 0);
}

template <class T>
T* Offset(void* base, int64_t elements) {
  return static_cast<T*>(base) + elements;
}

// A [rows, cols] view at element `offset` of `base` whose rows are
// `row_stride` elements apart.
TensorView View2(void* base, DType dtype, int64_t rows, int64_t cols,
                 int64_t row_stride, int64_t offset = 0) {
  TensorView v = MakeTensorView(nullptr, dtype, {rows, cols});
  v.data = static_cast<char*>(base) + offset * attention::DTypeSize(dtype);
  v.strides[0] = row_stride;
  return v;
}

// A [rows, cols] view as the gemm op's [1, rows, cols].
TensorView Batch1(const TensorView& v) {
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
QuantisedRows QuantisedView(void* codes, void* scales, DType fp8, int64_t rows,
                            int64_t cols) {
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
int64_t WeightBytes(const WeightSpec& spec, const RuntimeOptions& options) {
  if (options.weight_dtype == DType::kFloat8E4m3fn && spec.fp8_product) {
    return spec.size() + attention::Fp8Blocks(spec.rows) *
                             attention::Fp8Blocks(spec.cols) * 4;
  }
  return spec.size() * 2;
}

// Whether the W8A8 products' inputs are quantised once, by the RMSNorm that
// writes them (input_layernorm's x for q_a, kv_a and the indexer's wk;
// q_a_layernorm's q_c for q_b and the indexer's wq_b), instead of by every
// product that reads them: with fp8 weights, where those are fp8 products.
bool QuantisesNormOutputs(const RuntimeOptions& options) {
  return options.weight_dtype == DType::kFloat8E4m3fn;
}

// Whether the projections that read the same input run as one gemm
// (kFusedProjections): asked for, and bf16 weights (an fp8 pair's block
// scales are not concatenated; the indexer's weights_proj stays bf16).
bool FusesProjections(const RuntimeOptions& options) {
  return options.fuse_projections && options.weight_dtype == DType::kBFloat16;
}

// Bytes of one token's entry in the MLA latent cache.
int64_t LatentCacheEntryBytes(const attention::LatentCacheFormat& format) {
  return attention::LatentCacheEntryWidth(format) *
         (attention::IsFp8(format.dtype) ? 1 : 2);
}

// Bytes of one token's entry in the indexer K cache: the fp8 key and its
// float32 scale.
int64_t IndexerEntryBytes(const DeepseekV32Config& c) {
  return c.indexer().index_head_dim() + 4;
}

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

// The query rows one rank's indexer scores in a step of `rows`, and the rows
// of its top-k buffer: all of them, or with the row-sharded indexer its
// block and the all-gathered blocks of every rank (RowsOf).
int64_t ScoredRows(const TensorParallel& tp, int64_t rows) {
  return tp.enabled() && tp.indexer == IndexerParallel::kRows
             ? RowsPerRank(rows, tp.size)
             : rows;
}
int64_t TopKRows(const TensorParallel& tp, int64_t rows) {
  return ScoredRows(tp, rows) *
         (tp.enabled() && tp.indexer == IndexerParallel::kRows ? tp.size : 1);
}

DType Fp8DType(platform::Fp8Format format) {
  return format == platform::Fp8Format::kE4m3fnuz ? DType::kFloat8E4m3fnuz
                                                  : DType::kFloat8E4m3fn;
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
constexpr FusedProjection kFusedQkvA = {"fused_qkv_a_proj", WeightId::kQAProj,
                                        WeightId::kKvAProjWithMqa};
constexpr FusedProjection kFusedIndexerKw = {
    "wk_weights_proj", WeightId::kIndexerWk, WeightId::kIndexerWeightsProj};
constexpr FusedProjection kFusedProjections[] = {kFusedQkvA, kFusedIndexerKw};

// The fused projection `id` is the second weight of, if any.
const FusedProjection* FusedSecond(WeightId id) {
  for (const FusedProjection& f : kFusedProjections) {
    if (f.second == id) return &f;
  }
  return nullptr;
}

}  // namespace

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
  // StepOptions::time_ops: each launch timed between two synchronisations.
  bool time_ops = false;
  bool scoring = false;  // inside the indexer's scoring (OpTimes)
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
  // `call` counted as one op of its kind and, with time_ops, timed.
  template <typename Call>
  absl::Status Counted(const char* op, const char* what,
                       int OpCallCounts::*count, double OpTimes::*ms,
                       const Call& call) {
    ++(counts.*count);
    absl::Status status;
    if (!time_ops) {
      status = call();
    } else {
      status = stream.Synchronize();
      const auto begin = std::chrono::steady_clock::now();
      if (status.ok()) status = call();
      if (status.ok()) status = stream.Synchronize();
      const double elapsed = std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - begin)
                                 .count();
      times.*ms += elapsed;
      if (scoring) times.indexer_scoring += elapsed;
    }
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
  // y = RMSNorm(x), and y's quantisation into `y_q` when one is given.
  absl::Status RmsNorm(const char* what, const TensorView& x,
                       const TensorView& weight, const TensorView& y,
                       const QuantisedRows& y_q = {}) {
    attention::RmsNorm::Args a;
    a.x = x;
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
  s.scoring = false;
  s.topk.written_by_layer = -1;
  const size_t hidden_bytes = static_cast<size_t>(tokens * hidden_size) * 4;
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
    if (l + 1 == config.num_main_layers() && config.num_mtp_layers() > 0 &&
        step_options.read_hidden) {
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
  return result;
}

absl::Status DeepseekV32Model::PrepareMtpInput(Layer& layer, int mtp_index,
                                               const StepLayout& layout) {
  Shared& s = *shared_;
  Activations& act = *act_;
  const DType adt = options_.activation_dtype;
  const int64_t T = layout.num_tokens;
  const int64_t hidden = planner_.config().proto().hidden_size();
  const TensorView residual =
      View2(act.residual.data(), DType::kFloat32, T, hidden, hidden);
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

  // --- The layer's input: input_layernorm of the residual stream, in the
  // activation type.
  const TensorView residual =
      View2(act.residual.data(), DType::kFloat32, T, hidden, hidden);
  const TensorView x = View2(act.x.data(), adt, T, hidden, hidden);
  // With fp8 products, x is quantised here once for every product that
  // reads it (QuantisesNormOutputs), as is q_c below.
  const QuantisedRows x_q = act.XQuantised(s.product_fp8, T, hidden);
  DSA_RETURN_IF_ERROR(s.RmsNorm("input_layernorm", residual,
                                layer.Vector(WeightId::kInputLayerNorm), x,
                                x_q));

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
  DSA_RETURN_IF_ERROR(s.Project(
      "o_proj", Batch1(View2(act.attn.data(), adt, T, H * vdim, H * vdim)),
      layer.Projection(WeightId::kOProj), Batch1(out)));
  DSA_RETURN_IF_ERROR(s.AllReduce("o_proj", out));
  attention::ResidualAdd::Args a;
  a.residual = residual;
  a.x = out;
  return DSA_LAUNCH(s, residual_add, nullptr, s.kernels.dense.residual_add, a);
}

}  // namespace dsa::model::deepseek_v32
