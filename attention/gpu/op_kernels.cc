#include "attention/gpu/op_kernels.h"

#include <cstring>
#include <string_view>
#include <vector>

#include "attention/gpu/cache/launch.h"
#include "attention/gpu/dense_mha/launch.h"
#include "attention/gpu/dense_ops/op_kernels.h"
#include "attention/gpu/device/launch_status.h"
#include "attention/gpu/device/runtime.h"
#include "attention/gpu/indexer/launch.h"
#include "attention/gpu/sparse_mla/launch.h"
#include "attention/kernel_abi.h"
#include "attention/kernel_descriptor.h"

namespace dsa::attention::gpu {
namespace {

// The launchers take index vectors as plain arrays.
Status CheckUnitStride(std::string_view op, std::string_view arg,
                       const TensorView& t, int dim) {
  if (t.dim(dim) > 1 && t.stride(dim) != 1) {
    return UnimplementedError(StrCat(op, ": ", arg, " has stride ",
                                     t.stride(dim), " in dim ", dim,
                                     "; the GPU kernel needs it contiguous"));
  }
  return OkStatus();
}

Fp8Encoding EncodingOf(DType fp8) {
  return fp8 == DType::kFloat8E4m3fnuz ? Fp8Encoding::kE4m3fnuz
                                       : Fp8Encoding::kE4m3fn;
}

}  // namespace

Status IndexerLogitsGpu(const ExecutionContext& ctx,
                        const IndexerLogits::Args& a) {
  constexpr std::string_view op = IndexerLogits::kName;
  DSA_RETURN_IF_ERROR(IndexerLogits::Validate(a));
  DSA_RETURN_IF_ERROR(CheckContiguous(op, "q_fp8", a.q_fp8));
  DSA_RETURN_IF_ERROR(CheckContiguous(op, "head_weights", a.head_weights));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "row_request", a.row_request, 0));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "row_key_start", a.row_key_start, 0));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "row_key_end", a.row_key_end, 0));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "block_table", a.block_table, 1));
  if (a.logits.empty()) return OkStatus();
  IndexerLogitsParams p;
  p.q_fp8 = a.q_fp8.data_as<const uint8_t>();
  p.head_weights = a.head_weights.data_as<const float>();
  p.k_cache = a.k_cache.data_as<const uint8_t>();
  p.block_table = a.block_table.data_as<const int32_t>();
  p.row_request = a.row_request.data_as<const int32_t>();
  p.row_key_start = a.row_key_start.data_as<const int32_t>();
  p.row_key_end = a.row_key_end.data_as<const int32_t>();
  p.logits = a.logits.data_as<float>();
  p.rows = a.q_fp8.dim(0);
  p.heads = static_cast<int32_t>(a.q_fp8.dim(1));
  p.head_dim = static_cast<int32_t>(a.q_fp8.dim(2));
  p.num_blocks = a.k_cache.dim(0);
  p.block_size = static_cast<int32_t>(a.k_cache.dim(1));
  p.num_requests = static_cast<int32_t>(a.block_table.dim(0));
  p.max_blocks_per_request = static_cast<int32_t>(a.block_table.dim(1));
  p.block_table_stride = a.block_table.stride(0);
  p.width = a.logits.dim(1);
  p.logits_stride = a.logits.stride(0);
  p.encoding = EncodingOf(a.q_fp8.dtype);
  return StatusFromLaunch(IndexerLogitsLaunch(p, ctx.stream));
}

Status IndexerTopKGpu(const ExecutionContext& ctx, const IndexerTopK::Args& a) {
  constexpr std::string_view op = IndexerTopK::kName;
  DSA_RETURN_IF_ERROR(IndexerTopK::Validate(a));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "row_key_start", a.row_key_start, 0));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "row_key_end", a.row_key_end, 0));
  if (a.topk_indices.empty()) return OkStatus();
  IndexerTopKParams p;
  p.logits = a.logits.data_as<const float>();
  p.row_key_start = a.row_key_start.data_as<const int32_t>();
  p.row_key_end = a.row_key_end.data_as<const int32_t>();
  p.topk_indices = a.topk_indices.data_as<int32_t>();
  p.rows = a.logits.dim(0);
  p.width = a.logits.dim(1);
  p.logits_stride = a.logits.stride(0);
  p.topk = static_cast<int32_t>(a.topk_indices.dim(1));
  p.topk_stride = a.topk_indices.stride(0);
  return StatusFromLaunch(IndexerTopKLaunch(p, ctx.stream));
}

Status DenseMhaPrefillGpu(const ExecutionContext& ctx,
                          const DenseMhaPrefill::Args& a) {
  constexpr std::string_view op = DenseMhaPrefill::kName;
  DSA_RETURN_IF_ERROR(DenseMhaPrefill::Validate(a));
  DSA_RETURN_IF_ERROR(CheckContiguous(op, "q", a.q));
  DSA_RETURN_IF_ERROR(CheckContiguous(op, "output", a.output));
  DSA_RETURN_IF_ERROR(CheckContiguous(op, "kv_b_proj", a.kv_b_proj));
  DSA_RETURN_IF_ERROR(CheckContiguous(op, "kv_cache", a.kv_cache));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "seq_lens", a.seq_lens, 0));
  DSA_RETURN_IF_ERROR(
      CheckUnitStride(op, "query_start_loc", a.query_start_loc, 0));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "block_table", a.block_table, 1));
  // The split weights as the vendor GEMM takes them: contiguous bf16 (a
  // float32 kv_b_proj is split, and converted, per call as before).
  const bool split = !a.w_uk.absent() && a.w_uk.dtype == DType::kBFloat16;
  if (split) {
    DSA_RETURN_IF_ERROR(CheckContiguous(op, "w_uk", a.w_uk));
    DSA_RETURN_IF_ERROR(CheckContiguous(op, "w_uv", a.w_uv));
  }
  const int64_t tokens = a.q.dim(0);
  if (a.output.empty()) return OkStatus();
  const int64_t requests = a.block_table.dim(0);
  // The lengths as plain arrays, in buffers each thread keeps (no
  // allocation once it has seen its largest batch).
  thread_local std::vector<int32_t> seq_lens, starts;
  seq_lens.resize(requests);
  starts.resize(requests + 1);
  if (!a.seq_lens_host.absent()) {
    // The caller's host copies (Validate: both, shaped as the originals):
    // nothing waits for the stream.
    for (int64_t r = 0; r < requests; ++r) {
      seq_lens[r] =
          a.seq_lens_host.data_as<const int32_t>()[a.seq_lens_host.offset(r)];
    }
    for (int64_t r = 0; r <= requests; ++r) {
      starts[r] =
          a.query_start_loc_host
              .data_as<const int32_t>()[a.query_start_loc_host.offset(r)];
    }
  } else {
    DSA_RETURN_IF_ERROR(StatusFromLaunch(
        CopyToHostOnStream(seq_lens.data(), a.seq_lens.data,
                           seq_lens.size() * sizeof(int32_t), ctx.stream)));
    DSA_RETURN_IF_ERROR(StatusFromLaunch(
        CopyToHostOnStream(starts.data(), a.query_start_loc.data,
                           starts.size() * sizeof(int32_t), ctx.stream)));
  }
  // The CPU kernel's checks, with its messages.
  if (starts[0] != 0 || starts[requests] != tokens) {
    return OutOfRangeError(StrCat(op, ": query_start_loc runs from ", starts[0],
                                  " to ", starts[requests], ", expected 0 to ",
                                  tokens, " (q's tokens)"));
  }
  const int64_t block_size = a.kv_cache.dim(1);
  for (int64_t r = 0; r < requests; ++r) {
    const int64_t n = int64_t{starts[r + 1]} - starts[r];
    if (n < 0 || n > seq_lens[r]) {
      return OutOfRangeError(
          StrCat(op, ": request ", r, " has ", n,
                 " query tokens (query_start_loc), expected 0 to its seq_len ",
                 seq_lens[r]));
    }
    if (seq_lens[r] > a.block_table.dim(1) * block_size) {
      return OutOfRangeError(StrCat(op, ": seq_lens[", r, "] is ", seq_lens[r],
                                    ", more than block_table's ",
                                    a.block_table.dim(1), " blocks of ",
                                    block_size, " hold"));
    }
  }
  const LatentCacheFormat& f = a.cache_format;
  DenseMhaPrefillParams p;
  p.q = a.q.data;
  p.q_format = FloatFormatOf(a.q.dtype);
  p.kv_cache = a.kv_cache.data;
  p.cache_encoding = LatentCacheTypeOf(f.dtype);
  p.num_blocks = a.kv_cache.dim(0);
  p.block_size = static_cast<int32_t>(block_size);
  p.kv_lora_rank = f.kv_lora_rank;
  p.rope_dim = f.rope_dim;
  p.block_table = a.block_table.data_as<const int32_t>();
  p.num_requests = static_cast<int32_t>(requests);
  p.max_blocks_per_request = static_cast<int32_t>(a.block_table.dim(1));
  p.block_table_stride = a.block_table.stride(0);
  p.host_seq_lens = seq_lens.data();
  p.host_query_start_loc = starts.data();
  p.reserve_only = a.reserve_only != 0;
  p.kv_b_proj = a.kv_b_proj.data;
  p.kv_b_proj_format = FloatFormatOf(a.kv_b_proj.dtype);
  if (split) {
    p.w_uk = a.w_uk.data_as<const uint16_t>();
    p.w_uv = a.w_uv.data_as<const uint16_t>();
  }
  p.output = a.output.data;
  p.output_format = FloatFormatOf(a.output.dtype);
  p.tokens = tokens;
  p.heads = static_cast<int32_t>(a.q.dim(1));
  p.qk_nope_head_dim = static_cast<int32_t>(a.q.dim(2) - f.rope_dim);
  p.v_head_dim = static_cast<int32_t>(a.output.dim(2));
  p.softmax_scale = a.softmax_scale;
  return StatusFromLaunch(DenseMhaPrefillLaunch(p, ctx.stream));
}

Status SparseMlaGpu(const ExecutionContext& ctx, const SparseMla::Args& a) {
  constexpr std::string_view op = SparseMla::kName;
  DSA_RETURN_IF_ERROR(SparseMla::Validate(a));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "seq_lens", a.seq_lens, 0));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "token_request", a.token_request, 0));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "block_table", a.block_table, 1));
  DSA_RETURN_IF_ERROR(CheckUnitStride(op, "topk_indices", a.topk_indices, 1));
  if (a.output.empty()) return OkStatus();
  const LatentCacheFormat& f = a.cache_format;
  const bool fp8 = IsFp8(f.dtype);
  const int64_t cache_elem = fp8 ? 1 : 2;  // uint8 or bfloat16 view
  SparseMlaParams p;
  p.q = a.q.data;
  p.q_format = FloatFormatOf(a.q.dtype);
  p.q_token_stride = a.q.stride(0);
  p.q_head_stride = a.q.stride(1);
  p.kv_cache = a.kv_cache.data_as<const uint8_t>();
  p.cache_type = LatentCacheTypeOf(f.dtype);
  p.cache_block_stride = a.kv_cache.stride(0) * cache_elem;
  p.cache_token_stride = a.kv_cache.stride(1) * cache_elem;
  p.num_blocks = a.kv_cache.dim(0);
  p.block_size = static_cast<int32_t>(a.kv_cache.dim(1));
  p.kv_lora_rank = f.kv_lora_rank;
  p.rope_dim = f.rope_dim;
  p.block_table = a.block_table.data_as<const int32_t>();
  p.num_requests = static_cast<int32_t>(a.block_table.dim(0));
  p.max_blocks_per_request = static_cast<int32_t>(a.block_table.dim(1));
  p.block_table_stride = a.block_table.stride(0);
  p.seq_lens = a.seq_lens.data_as<const int32_t>();
  p.token_request = a.token_request.data_as<const int32_t>();
  p.topk_indices = a.topk_indices.data_as<const int32_t>();
  p.topk = static_cast<int32_t>(a.topk_indices.dim(1));
  p.topk_stride = a.topk_indices.stride(0);
  p.kv_b_proj = a.kv_b_proj.data;
  p.kv_b_proj_format = FloatFormatOf(a.kv_b_proj.dtype);
  p.kv_b_proj_row_stride = a.kv_b_proj.stride(0);
  p.qk_nope_head_dim = a.qk_nope_head_dim;
  p.v_head_dim = static_cast<int32_t>(a.output.dim(2));
  p.softmax_scale = a.softmax_scale;
  p.output = a.output.data;
  p.output_format = FloatFormatOf(a.output.dtype);
  p.output_token_stride = a.output.stride(0);
  p.output_head_stride = a.output.stride(1);
  p.tokens = a.q.dim(0);
  p.heads = static_cast<int32_t>(a.q.dim(1));
  return StatusFromLaunch(SparseMlaLaunch(p, ctx.stream));
}

namespace {

RopeKind RopeKindOf(RopeStyle style) {
  return style == RopeStyle::kInterleaved ? RopeKind::kInterleaved
                                          : RopeKind::kNeox;
}

}  // namespace

IndexerKWriteParams IndexerKWriteParamsFor(const IndexerKWrite::Args& a) {
  IndexerKWriteParams p;
  p.k = a.k.data;
  p.k_type = FloatFormatOf(a.k.dtype);
  p.k_row_stride = a.k.stride(0);
  p.ln_weight = a.ln_weight.data;
  p.ln_weight_type = FloatFormatOf(a.ln_weight.dtype);
  p.ln_bias = a.ln_bias.data;
  p.ln_bias_type = FloatFormatOf(a.ln_bias.dtype);
  p.ln_eps = a.ln_eps;
  p.positions = a.positions.data_as<const int64_t>();
  p.positions_stride = a.positions.stride(0);
  p.cos_sin_cache = a.cos_sin_cache.data_as<const float>();
  p.max_position = a.cos_sin_cache.dim(0);
  p.cos_sin_stride = a.cos_sin_cache.stride(0);
  p.rope_dim = static_cast<int32_t>(a.cos_sin_cache.dim(1));
  p.rope = RopeKindOf(a.rope_style);
  p.slot_mapping = a.slot_mapping.data_as<const int64_t>();
  p.slot_mapping_stride = a.slot_mapping.stride(0);
  p.k_cache = a.k_cache.data_as<uint8_t>();
  p.num_blocks = a.k_cache.dim(0);
  p.block_size = static_cast<int32_t>(a.k_cache.dim(1));
  p.encoding = EncodingOf(a.cache_dtype);
  p.topk_indices = a.topk_indices.data_as<int32_t>();
  p.topk = static_cast<int32_t>(a.topk_indices.dim(1));
  p.topk_stride = a.topk_indices.stride(0);
  p.tokens = a.k.dim(0);
  p.head_dim = static_cast<int32_t>(a.k.dim(1));
  p.round_to_bf16 = a.intermediate_dtype == DType::kBFloat16;
  p.scale_divisor = a.fp8_scale_divisor;
  p.hadamard_rotation = a.hadamard_rotation != 0;
  return p;
}

Status IndexerKWriteGpu(const ExecutionContext& ctx,
                        const IndexerKWrite::Args& a) {
  DSA_RETURN_IF_ERROR(IndexerKWrite::Validate(a));
  return StatusFromLaunch(
      IndexerKWriteLaunch(IndexerKWriteParamsFor(a), ctx.stream));
}

IndexerQParams IndexerQParamsFor(const IndexerQ::Args& a) {
  IndexerQParams p;
  p.q = a.q.data;
  p.q_type = FloatFormatOf(a.q.dtype);
  p.q_token_stride = a.q.stride(0);
  p.q_head_stride = a.q.stride(1);
  p.weights = a.weights.data;
  p.weights_type = FloatFormatOf(a.weights.dtype);
  p.weights_token_stride = a.weights.stride(0);
  p.weights_head_stride = a.weights.stride(1);
  p.positions = a.positions.data_as<const int64_t>();
  p.positions_stride = a.positions.stride(0);
  p.cos_sin_cache = a.cos_sin_cache.data_as<const float>();
  p.max_position = a.cos_sin_cache.dim(0);
  p.cos_sin_stride = a.cos_sin_cache.stride(0);
  p.rope_dim = static_cast<int32_t>(a.cos_sin_cache.dim(1));
  p.rope = RopeKindOf(a.rope_style);
  p.q_fp8 = a.q_fp8.data_as<uint8_t>();
  p.q_fp8_token_stride = a.q_fp8.stride(0);
  p.q_fp8_head_stride = a.q_fp8.stride(1);
  p.encoding = EncodingOf(a.q_fp8.dtype);
  p.head_weights = a.head_weights.data_as<float>();
  p.head_weights_token_stride = a.head_weights.stride(0);
  p.head_weights_head_stride = a.head_weights.stride(1);
  p.tokens = a.q.dim(0);
  p.heads = static_cast<int32_t>(a.q.dim(1));
  p.head_dim = static_cast<int32_t>(a.q.dim(2));
  p.round_to_bf16 = a.intermediate_dtype == DType::kBFloat16;
  p.scale_divisor = a.fp8_scale_divisor;
  p.hadamard_rotation = a.hadamard_rotation != 0;
  return p;
}

Status IndexerQGpu(const ExecutionContext& ctx, const IndexerQ::Args& a) {
  DSA_RETURN_IF_ERROR(IndexerQ::Validate(a));
  return StatusFromLaunch(IndexerQLaunch(IndexerQParamsFor(a), ctx.stream));
}

Status MlaCacheWriteGpu(const ExecutionContext& ctx,
                        const MlaCacheWrite::Args& a) {
  DSA_RETURN_IF_ERROR(MlaCacheWrite::Validate(a));
  const size_t esize = DTypeSize(a.kv_cache.dtype);
  MlaCacheWriteParams p;
  p.kv_c = a.kv_c.data;
  p.kv_c_type = FloatFormatOf(a.kv_c.dtype);
  p.kv_c_stride = a.kv_c.stride(0);
  p.k_pe = a.k_pe.data;
  p.k_pe_type = FloatFormatOf(a.k_pe.dtype);
  p.k_pe_stride = a.k_pe.stride(0);
  p.slot_mapping = a.slot_mapping.data_as<const int64_t>();
  p.slot_mapping_stride = a.slot_mapping.stride(0);
  p.kv_cache = a.kv_cache.data_as<uint8_t>();
  p.num_blocks = a.kv_cache.dim(0);
  p.block_size = static_cast<int32_t>(a.kv_cache.dim(1));
  p.block_stride_bytes = a.kv_cache.stride(0) * static_cast<int64_t>(esize);
  p.slot_stride_bytes = a.kv_cache.stride(1) * static_cast<int64_t>(esize);
  p.layout = IsFp8(a.cache_format.dtype) ? LatentLayout::kFp8
                                         : LatentLayout::kBFloat16;
  p.encoding = EncodingOf(a.cache_format.dtype);
  p.kv_lora_rank = a.cache_format.kv_lora_rank;
  p.rope_dim = a.cache_format.rope_dim;
  p.tokens = a.kv_c.dim(0);
  return StatusFromLaunch(MlaCacheWriteLaunch(p, ctx.stream));
}

const char* GpuPlatformId() {
  const char* backend = GpuBackend();
  if (std::strcmp(backend, "cuda") == 0) return "cuda";
  if (std::strcmp(backend, "rocm") == 0) return "rocm";
  return nullptr;
}

const std::vector<DsaKernelDescriptor>& GpuAttentionKernelDescriptors() {
  static const auto* const descriptors = [] {
    auto* d = new std::vector<DsaKernelDescriptor>();
    if (const char* platform = GpuPlatformId(); platform != nullptr) {
      // Every attention op of kernel_api.h, by its <Op>Gpu kernel above.
#define DSA_GPU_KERNEL_DESCRIPTOR(Op, LIST, PREFIX) \
  d->push_back(KernelDescriptorFor<Op>(platform, &CKernel<Op, &Op##Gpu>));
      DSA_ATTENTION_OPS(DSA_GPU_KERNEL_DESCRIPTOR)
#undef DSA_GPU_KERNEL_DESCRIPTOR
      AppendGpuDenseKernelDescriptors(platform, d);  // dense_ops/op_kernels.h
    }
    return d;
  }();
  return *descriptors;
}

}  // namespace dsa::attention::gpu
