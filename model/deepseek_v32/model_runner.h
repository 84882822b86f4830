// The DeepseekV32 attention layer and a stack of them (every layer of a
// preset, MTP layers included) running one step of a batch on the ops of a
// platform, taking the prefill branch and the indexer skip the layer plan
// decides (layer_plan.h).
//
// Per layer and step, every op on the active platform (attention/ops.h and
// the dense ops of attention/dense_ops.h), in this order:
//   rms_norm x = input_layernorm(h)
//   gemm     [q_c | kv] = x [W_qa | W_kva] (vLLM's fused_qkv_a_proj)
//   rms_norm q_c; gemm q = q_c W_qb; rope on q_pe
//   rms_norm kv_c; rope on k_pe
//   op       mla_cache_write(kv_c, k_pe)
//   gemm+op  [k | w] = x [W_k | W_weights_proj] (vLLM's wk_weights_proj),
//            indexer_k_write(k)                     layers owning an indexer
//   gemm+op  indexer_q(q_c W_qb_indexer, w), indexer_logits, indexer_topk
//            only when the plan scores
//   op       sparse_mla over top-k for MLA decodes, and for prefills on the
//            sparse MQA branch (query absorbed by a batched gemm with W_UK);
//            dense_mha_prefill for prefills on the dense one
//   gemm     out = attn W_o; residual_add: h_{l+1} = h_l + out, launched
//            with the next layer's input_layernorm (rms_norm's residual)
//            unless the stream is read before it, and a bf16 o_proj of a
//            rank without collectives just before that norm (in the next
//            layer's graph run, RuntimeOptions::step_graphs)
// The stack is attention-only (no MLP or MoE after the attention). MTP layers
// run after the main layers, each on its own input, as vLLM's
// DeepSeekMultiTokenPredictorLayer builds it:
//   rms_norm e = enorm(embed(next tokens)), zero at position 0
//   rms_norm g = hnorm(h), h = model.norm(main output) for the first MTP
//            layer, the previous MTP layer's output after it
//   gemm     h_mtp = [e | g] W_eh, then the layer as above.
// With fp8 weights (RuntimeOptions::weight_dtype) each quantised projection
// is an fp8_block_gemm instead of a gemm; OpCallCounts and OpTimes count
// both under `gemm` (the projections).
//
// The numerics are the model's, from its config (vLLM's): rope theta and
// YaRN frequencies, the mscale^2 softmax scale, RMSNorm eps, the MLA's and
// the indexer's rope style; the indexer's key and query rounded to bf16
// after its LayerNorm and after rope, fp8 scales divided by vLLM's divisor
// (224 on e4m3fnuz), the optional Hadamard rotation.
//
// The two fused projections are one gemm over weights concatenated at load
// (RuntimeOptions::fuse_projections; each consumer takes a row-strided view
// of the output). The dense prefill reads kv_b_proj's W_UK and W_UV split
// once at load (a copy next to kv_b_proj), not split again on every call.
//
// The step stays on the device: its inputs (hidden states and index tensors)
// are uploaded once, weights live there as bf16 or fp8 (drawn there by
// random_fill for a model created from a seed, and quantised there for fp8
// weights), activations stay in device buffers
// reserved once for the largest step, and only what the caller asks for
// (StepOptions) is read back.
//
// A model orders all its device work on a stream of its own, created with
// it (non-blocking on CUDA and ROCm: it never waits on, nor holds up, the
// legacy default stream): every op gets it in its execution context, the
// uploads of a step's inputs and the copy of the main layers' output for
// the MTP layers are copies on it, and a step waits for it once, at its
// end. Only the opt-in StepOptions wait more: time_ops around every op, the
// capture options after every layer. A platform whose plugin has no
// streams (plugin API 1.1) gets the default stream and synchronous copies. The
// residual stream is fp32; the activations the projections read are
// RuntimeOptions::activation_dtype.
//
// A profile (dummy) run has no attention metadata: indexer layers reserve the
// indexer's workspace for the largest batch and nothing is written.
//
// Device memory: a model is refused at creation when DeviceBytes does not
// fit in what the platform reports free (ResourceExhausted with the sizes).
// It reserves its activations and the step's inputs for the largest step
// then; a profile run reserves the indexer's workspace and top-k, so that a
// later step within max_num_batched_tokens and max_model_len allocates
// nothing of the model's. A GPU platform's kernels take their per-call
// scratch from an arena per stream (attention/gpu/device/scratch_arena.h),
// which a profile run does not grow: it grows in the first step of each new
// largest size and then stays (a growth that does not fit fails that step
// with ResourceExhausted, rolled back like any failure); the vendor GEMM's
// workspace for the model's stream is made at creation. A step that needs more
// (no profile run) checks the growth against the free memory and allocates
// it before it starts.
//
// A step that fails (a device call or a kernel returns an error) returns
// that error with where it happened in front ("step: layer 3 (MTP):
// indexer_logits: ...", "step: uploading slot_mapping: ..."), after waiting
// for its device work to stop, and leaves nothing a later step reads: the
// block tables are as before it (its requests' cached lengths, its new
// blocks free again), and every cached token's entries in the caches are
// untouched; only the slots of its own new tokens may hold a partial
// write, which no step reads before writing them again. Retrying the same
// step gives, to the bit, what it gives when nothing failed (every call of
// the failed step is a fault site of platform/fault_injection.h, and
// step_faults_test makes each fail in turn).
#ifndef DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_H_
#define DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "attention/dtypes/dtype.h"
#include "attention/ops.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/layer_weights.h"
#include "model/deepseek_v32/paged_cache.h"
#include "model/deepseek_v32/tensor_parallel.h"
#include "platform/checked_size.h"
#include "platform/device_buffer.h"
#include "platform/registry.h"

namespace dsa::model::deepseek_v32 {

struct RuntimeOptions {
  int block_size = 64;
  int num_blocks = 256;  // per layer cache, shared by all requests
  // Longest request (context + new); sizes the rope table. At most the
  // preset's max_position_embeddings.
  int64_t max_model_len = 4096;
  // Largest step; a profile run reserves the indexer workspace for it.
  int64_t max_num_batched_tokens = 4096;
  // MLA latent cache: bfloat16, or fp8 in the platform's fp8 format.
  bool fp8_latent_cache = false;
  int num_threads = 0;  // host math and CPU kernels; 0 = all cores
  // A benchmark bound, not a valid model: no layer does any indexer work (no
  // key write, no scoring, no workspace). It tells how much of a step the
  // indexer costs at most. The indexer K caches stay as they are, so a later
  // long decode would read keys that were never written; a step that needs a
  // top-k (decodes, prefills on the sparse MQA branch) is FailedPrecondition.
  bool no_indexer = false;
  // The type of the activations the projections and the attention ops read
  // (q, kv_c, the indexer's inputs, the attention output). bf16 is what
  // engines run and what takes the vendor GEMM (cuBLASLt) on the device;
  // float32 keeps a step within ~1e-6 of fp32 arithmetic on bf16 weights,
  // which the tests' float64 references want. The residual stream, the
  // norms' inputs and the rope'd key part are float32 either way.
  attention::DType activation_dtype = attention::DType::kFloat32;
  // One gemm for each pair of projections that read the same input, where
  // vLLM fuses them: q_a_proj with kv_a_proj_with_mqa, and the indexer's wk
  // with weights_proj (whose head weights are then computed with the keys,
  // also in a step that does not score). false runs each projection alone
  // on the same weights: one more launch for each, for comparisons. The
  // CPU platform's results are equal to the bit either way. Only bf16
  // weights are fused: with fp8 weights each W8A8 product runs alone.
  bool fuse_projections = true;
  // Each layer's ops up to the indexer's scoring and the attention (norms,
  // projections, ropes, the cache and key writes, the indexer's queries)
  // launched as one graph of the platform's (plugin API 1.4) from a layer's
  // third step of one shape and plan on: recorded on the second, direct on
  // the first (model/deepseek_v32/step_graphs.h). The same kernels with the
  // same arguments: the outputs are the same bits either way. Ignored on a
  // platform without graphs (the CPU's), with StepOptions::time_ops, and
  // for the row-sharded indexer (whose products take stream scratch).
  bool step_graphs = true;
  // Tensor parallelism (tensor_parallel.h): the model is rank `rank` of
  // `size`, holding num_attention_heads / size heads and its windows of the
  // whole model's weights (from a checkpoint of the whole model, or drawn
  // from the seed as the whole model's and cut). With a collective group
  // (`group`), o_proj's partial sums are all-reduced and, with
  // IndexerParallel::kRows, the top-k rows are all-gathered; without one the
  // rank runs alone: its steps do the rank's share of the work without the
  // collectives (one rank's time on one device), and its outputs are not the
  // model's.
  TensorParallel tensor_parallel;
  // The device the model lives on (DeviceRuntime::BindDevice): every call
  // of the model binds it on the calling thread first.
  int device = 0;
  // The projections' weights: bfloat16 (the gemm op), or float8_e4m3fn: the
  // projections an FP8 checkpoint quantises (WeightSpec::fp8_product) as
  // W8A8 products with 128 x 128 weight block scales and per-token 1 x 128
  // activation scales (fp8_block_gemm). An FP8 checkpoint's matrices are
  // uploaded as stored; bf16 ones (a preset's random weights, a bf16
  // checkpoint) are quantised per 128 x 128 block at load (fp8_block_quant),
  // as an FP8 checkpoint would hold them. kv_b_proj, the norms and the
  // unquantised projections stay bf16 either way.
  attention::DType weight_dtype = attention::DType::kBFloat16;
};

// The ops a step launches, by the name of their OpCallCounts/OpTimes field:
// the attention ops of attention/ops.h, then the dense ops of
// attention/dense_ops.h.
#define DSA_STEP_ATTENTION_OPS(X) \
  X(indexer_k_write)              \
  X(indexer_q)                    \
  X(indexer_logits)               \
  X(indexer_topk)                 \
  X(mla_cache_write)              \
  X(sparse_mla)                   \
  X(dense_mha_prefill)
#define DSA_STEP_DENSE_OPS(X) \
  X(gemm)                     \
  X(rms_norm)                 \
  X(rope)                     \
  X(residual_add)             \
  X(cast)
// The collectives among tensor-parallel ranks (RuntimeOptions::
// tensor_parallel): o_proj's all-reduce, the row-sharded top-k's all-gather.
#define DSA_STEP_COLLECTIVES(X) \
  X(all_reduce)                 \
  X(all_gather)
// Every op kind of a step: the three lists above.
#define DSA_STEP_OPS(X)     \
  DSA_STEP_ATTENTION_OPS(X) \
  DSA_STEP_DENSE_OPS(X)     \
  DSA_STEP_COLLECTIVES(X)

// Counts of the ops one step launched, summed over layers.
struct OpCallCounts {
#define DSA_STEP_OP_FIELD(op) int op = 0;
  DSA_STEP_OPS(DSA_STEP_OP_FIELD)
#undef DSA_STEP_OP_FIELD
  int attention_ops() const {
    int n = 0;
#define DSA_STEP_OP_ADD(op) n += op;
    DSA_STEP_ATTENTION_OPS(DSA_STEP_OP_ADD)
#undef DSA_STEP_OP_ADD
    return n;
  }
  int total() const {
    int n = attention_ops();
#define DSA_STEP_OP_ADD(op) n += op;
    DSA_STEP_DENSE_OPS(DSA_STEP_OP_ADD)
    DSA_STEP_COLLECTIVES(DSA_STEP_OP_ADD)
#undef DSA_STEP_OP_ADD
    return n;
  }
};

// How StepOptions::time_ops times an op.
enum class OpClock {
  // On the host clock between a synchronisation before the op's launch and
  // one after it: the op's device time plus one launch's overhead (a few
  // microseconds); a collective's includes its wait for the other ranks.
  kDevice,
  // On the host clock around the op's call alone, nothing synchronised: the
  // host's share of the op (its checks, plans, and the launches it enqueues).
  // The host's own cost where the device keeps up (steps of a few dozen
  // tokens); where it does not, a launch that waits for room in the stream's
  // queue counts that wait.
  kHost,
};

// Milliseconds of one step per op kind, summed over layers, measured with
// StepOptions::time_ops on its op_clock.
struct OpTimes {
#define DSA_STEP_OP_FIELD(op) double op = 0;
  DSA_STEP_OPS(DSA_STEP_OP_FIELD)
#undef DSA_STEP_OP_FIELD
  // Everything the indexer's scoring launched (the projection of its
  // queries, of its head weights unless fused with the keys', indexer_q,
  // indexer_logits, indexer_topk): the work the short-prefill skip saves.
  // Also counted in the fields above.
  double indexer_scoring = 0;
  double total() const {
    double t = 0;
#define DSA_STEP_OP_ADD(op) t += op;
    DSA_STEP_OPS(DSA_STEP_OP_ADD)
#undef DSA_STEP_OP_ADD
    return t;
  }
};

struct StepOptions {
  bool capture_topk = false;           // copy each layer's top-k to the host
  bool capture_layer_outputs = false;  // keep each layer's attention output
  // Keep the hidden states after every layer (StepOutput::hidden_states).
  bool capture_hidden_states = false;
  // Read the hidden states back (StepOutput::hidden, mtp_hidden). A step
  // that reads nothing back still waits for its device work to finish.
  bool read_hidden = true;
  // Time every op (StepOutput::op_ms) on op_clock. A profile: on the device
  // clock the synchronisation around each launch takes away the overlap of
  // host and device, so the step is slower and its host_issue_ms /
  // device_tail_ms are not the unprofiled step's; on the host clock two
  // clock reads an op.
  bool time_ops = false;
  OpClock op_clock = OpClock::kDevice;
};

struct StepOutput {
  // [tokens, hidden] in the caller's row order: after the main layers, and
  // after the MTP layers (empty when the preset has none, or without
  // StepOptions::read_hidden).
  std::vector<float> hidden;
  std::vector<float> mtp_hidden;
  ForwardPlan plan;
  OpCallCounts op_calls;
  // With StepOptions::time_ops, per op kind on its op_clock; zeros
  // otherwise.
  OpTimes op_ms;
  // Wall time from the first launch of the layers to the return of the last
  // one (the host issuing the step), and from then until the device finished
  // (the device's tail after the host is done). The uploads before and the
  // read-backs after are in neither; the copies of capture_topk and
  // capture_layer_outputs, and any op whose launcher waits for the device,
  // count their waits in the issue time.
  double host_issue_ms = 0;
  double device_tail_ms = 0;
  // Graph launches of this step (RuntimeOptions::step_graphs): each stands
  // for the ops of a layer's run, which op_calls counts as ops.
  int graph_launches = 0;
  // Before the first launch: planning, the block tables and the uploads of
  // the index tensors and hidden states; after the device finished: the
  // read-backs. A step's wall time is these four together.
  double prepare_ms = 0;
  double read_back_ms = 0;
  // With StepOptions: per layer, [tokens, index_topk] (caller's row order) of
  // the top-k the layer read, and [tokens, hidden] of its attention output.
  std::vector<std::vector<int32_t>> topk;
  std::vector<std::vector<float>> layer_outputs;
  // With StepOptions::capture_hidden_states, per layer (main, then MTP),
  // [tokens, hidden] of the residual stream after it (caller's row order).
  std::vector<std::vector<float>> hidden_states;
};

class DeepseekV32Model {
 public:
  // Weights drawn on the device by the random_fill op: the values of
  // LayerWeights::Random(seed), bit for bit.
  static absl::StatusOr<std::unique_ptr<DeepseekV32Model>> Create(
      LayerPlanner planner, platform::Platform platform,
      AttentionKernels kernels, RuntimeOptions options, uint64_t seed);
  static absl::StatusOr<std::unique_ptr<DeepseekV32Model>> Create(
      LayerPlanner planner, platform::Platform platform,
      AttentionKernels kernels, RuntimeOptions options,
      std::vector<LayerWeights> weights);
  // Weights read from `source` (a checkpoint), each tensor moved to the
  // device through a staging buffer of at most kWeightStagingBytes; the
  // source is read only here. `progress` (may be empty) hears of every
  // chunk.
  static absl::StatusOr<std::unique_ptr<DeepseekV32Model>> Create(
      LayerPlanner planner, platform::Platform platform,
      AttentionKernels kernels, RuntimeOptions options,
      const WeightSource& source, const LoadProgress& progress = {});
  static constexpr int64_t kWeightStagingBytes = int64_t{32} << 20;
  // `weights` when not null (a checkpoint, LoadedModel::weight_source()),
  // else weights drawn from `seed`.
  static absl::StatusOr<std::unique_ptr<DeepseekV32Model>> Create(
      LayerPlanner planner, platform::Platform platform,
      AttentionKernels kernels, RuntimeOptions options,
      const WeightSource* weights, uint64_t seed,
      const LoadProgress& progress = {});
  ~DeepseekV32Model();

  const LayerPlanner& planner() const { return planner_; }
  const RuntimeOptions& options() const { return options_; }

  // One step: `hidden` holds [tokens, hidden] for the requests' new tokens,
  // request after request (the main layers' input: the tokens'
  // embeddings). Allocates cache blocks for the new tokens. On error nothing
  // a later step reads has changed (the class comment): retry it, or
  // Release its requests. A tensor-parallel rank with a collective group
  // aborts the group when its step fails, so that no other rank waits for it
  // forever; their steps then fail too, and the ranks need new models in a
  // new group to go on.
  //
  // `mtp_embeddings` are the MTP layers' token input, embed(next token) in
  // the same row order: [tokens, hidden] for every MTP layer, or
  // [num_mtp_layers, tokens, hidden], one per MTP layer. Rows at position 0
  // are taken as zero (vLLM's mask). Empty: `hidden` stands in for them (for
  // benchmarks and tests that have hidden states but no tokens).
  absl::StatusOr<StepOutput> Step(const ForwardContext& forward,
                                  absl::Span<const StepRequest> requests,
                                  absl::Span<const float> hidden,
                                  const StepOptions& step_options = {});
  absl::StatusOr<StepOutput> Step(const ForwardContext& forward,
                                  absl::Span<const StepRequest> requests,
                                  absl::Span<const float> hidden,
                                  absl::Span<const float> mtp_embeddings,
                                  const StepOptions& step_options = {});

  // A profile/dummy run: no metadata. Returns the plan it followed.
  absl::StatusOr<ForwardPlan> ProfileRun(const ForwardContext& forward);

  // Frees a finished request's cache blocks.
  absl::Status Release(int64_t request_id) {
    return blocks_.Release(request_id);
  }
  // The requests' cached lengths and the free blocks.
  const BlockTables& block_tables() const { return blocks_; }

  // Device memory a model of `config` (the whole model's) with `options`
  // holds once a profile run has reserved the indexer's workspace for its
  // largest step (with tensor parallelism, one rank's share): weights
  // (kv_b_proj twice: itself and its W_UK / W_UV split),
  // caches, activations, the step's inputs (StepInputBytes), the rope table,
  // the workspace and the top-k. The platform's own scratch (its GEMM
  // workspace, the kernels' per-stream arenas) is not counted. Overflowed
  // when the sum is past int64; Create refuses such options
  // (ResourceExhausted), so every buffer a model allocates has a
  // representable size.
  static CheckedSize DeviceBytes(const ModelConfig& config,
                                 const RuntimeOptions& options);
  // The step's index tensors (positions, slot mapping, block table, ...) as
  // reserved at creation for the largest step.
  static CheckedSize StepInputBytes(const RuntimeOptions& options);

  // Bytes of indexer workspace reserved so far (by profile runs and steps).
  int64_t reserved_workspace_bytes() const;

  // Host copy of a layer's weight as the device holds it (bf16 values, or
  // fp8 codes times their block scales, as floats); for tests. NotFound for
  // a tensor the layer does not have.
  absl::StatusOr<std::vector<float>> ReadWeight(int layer, WeightId id) const;

  // Host copies of a layer's caches, for tests and debugging. The indexer K
  // cache is empty for a layer without an indexer.
  absl::StatusOr<std::vector<uint8_t>> ReadLatentCache(int layer) const;
  absl::StatusOr<std::vector<uint8_t>> ReadIndexerKCache(int layer) const;

 private:
  struct Shared;
  struct Layer;
  struct Activations;
  DeepseekV32Model(LayerPlanner planner, RuntimeOptions options,
                   BlockTables blocks);
  // Create's body: weights from `source`, or drawn on the device from
  // `seed` (source == nullptr).
  static absl::StatusOr<std::unique_ptr<DeepseekV32Model>> Build(
      LayerPlanner planner, platform::Platform platform,
      AttentionKernels kernels, RuntimeOptions options,
      const WeightSource* source, const LoadProgress& progress, uint64_t seed);
  // Device buffers of every activation, for steps of up to `tokens` tokens.
  absl::Status ReserveActivations(int64_t tokens);
  // Calls f(buffer, bytes per token) for every activation buffer (buffer
  // null when `a` is): the one list ReserveActivations and DeviceBytes use.
  template <typename F>
  static void ForEachActivation(const ModelConfig& config,
                                const RuntimeOptions& options, Activations* a,
                                F f);
  // Device buffers of the step's index tensors for the largest step: the
  // one list ReserveStepInputs allocates and StepInputBytes counts.
  absl::Status ReserveStepInputs();
  template <typename F>
  static void ForEachStepInput(const RuntimeOptions& options, Shared* s, F f);
  // Blocks a request can have: of max_model_len tokens, at most num_blocks.
  static int64_t MaxBlocksPerRequest(const RuntimeOptions& options);
  // The indexer's logits workspace (when `scores`) and the top-k buffer for
  // `rows` query rows over keys up to `max_seq_len`: what a profile run
  // reserves for the largest step, and what a step grows them to before it
  // starts when it needs more. ResourceExhausted with the sizes when the
  // growth does not fit in the free memory the platform reports.
  // The profile run's calls of the ops that take scratch from the
  // platform's per-stream arena, at the largest step's shapes, which grow it
  // to what later steps take (with fp8 weights also one W8A8 product of the
  // widest activations, x and the attention output): dense_mha_prefill over
  // max_num_batched_tokens new tokens in prompts of index_topk (or, with fewer
  // tokens than index_topk, one chunk of them after a cached context of
  // index_topk keys in all) when the platform runs the dense branch and, with
  // `sparse`, sparse_mla over as many rows and over decode batches of 1 to 128
  // rows. A dense step past that (several prompts continued in one step)
  // grows the scratch in its reservation before the first layer (RunStep:
  // dense_mha_prefill with reserve_only), so it is refused there, with
  // nothing written, when the growth does not fit.
  absl::Status ProfileScratch(bool sparse);
  // A layer's dense_mha_prefill of the step's prefills (layout: the
  // prefill requests after the decodes), on the step's uploaded inputs.
  attention::DenseMhaPrefill::Args DenseArgs(const Layer& layer,
                                             const StepLayout& layout) const;
  absl::Status ReserveIndexerWorkspace(int64_t rows, int64_t max_seq_len,
                                       bool scores);
  // Step without the abort of the tensor-parallel group on failure.
  absl::StatusOr<StepOutput> StepOnce(const ForwardContext& forward,
                                      absl::Span<const StepRequest> requests,
                                      absl::Span<const float> hidden,
                                      absl::Span<const float> mtp_embeddings,
                                      const StepOptions& step_options);
  // Step's body after the block tables were prepared: uploads, the layers,
  // the read-backs. Step undoes the block tables when it fails.
  absl::StatusOr<StepOutput> RunStep(
      ForwardPlan plan, const StepLayout& layout,
      absl::Span<const float> hidden, absl::Span<const float> mtp_embeddings,
      const StepOptions& step_options,
      std::chrono::steady_clock::time_point step_begin);
  // One layer's forward over the step's tokens (internal order), on the
  // device: reads the residual stream (adding the previous layer's pending
  // output in its input_layernorm), leaves its attention output pending
  // (Shared::pending_residual).
  absl::Status RunLayer(Layer& layer, const LayerPlan& plan,
                        const StepLayout& layout);
  // An MTP layer's input into the residual stream: eh_proj over
  // [enorm(its embeddings) | hnorm(h)] (the class comment).
  absl::Status PrepareMtpInput(Layer& layer, int mtp_index,
                               const StepLayout& layout);
  // The layer's indexer: writes its keys and, when the plan scores, its
  // top-k, from the layer's input and normalised q latent (Activations).
  absl::Status RunIndexer(Layer& layer, const LayerPlan& plan,
                          const StepLayout& layout);

  LayerPlanner planner_;
  RuntimeOptions options_;
  BlockTables blocks_;
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<Activations> act_;
};

}  // namespace dsa::model::deepseek_v32

#endif  // DSA_MODEL_DEEPSEEK_V32_MODEL_RUNNER_H_
