#include "attention/gpu/dense_ops/op_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include "attention/gpu/dense_ops/launch.h"
#include "attention/gpu/device/launch_status.h"
#include "attention/gpu/device/runtime.h"
#include "attention/kernel_abi.h"
#include "attention/kernel_descriptor.h"
#include "platform/cuda/cublaslt.h"
#include "platform/rocm/rocblas.h"

namespace dsa::attention::gpu {
namespace {

namespace lt = ::dsa::platform::cuda;

bool OnCuda() { return std::strcmp(GpuBackend(), "cuda") == 0; }
bool OnRocm() { return std::strcmp(GpuBackend(), "rocm") == 0; }

// ---------------------------------------------------------------------------
// cuBLASLt. Column-major: y^T [out, rows] = op(A) [out, in] * x^T [in, rows],
// with A = w read as [in, out] (transposed) when w's in dim is contiguous,
// else as [out, in]. Plans (descriptors + the heuristic's algorithm) are
// cached per shape, strides and alignment; a workspace is kept per stream.

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS's Hopper advice

// The largest power of two (up to 256) dividing the address.
int Alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

using PlanKey =
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
               int64_t, int64_t, int64_t, bool, int, int, int, int>;

struct Plan {
  bool ok = false;
  void* desc = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* d = nullptr;
  lt::CublasLtHeuristicResult heuristic{};
};

struct LtState {
  std::mutex mu;
  void* handle = nullptr;
  bool handle_failed = false;
  std::map<PlanKey, Plan> plans;
  std::map<void*, void*> workspaces;  // stream -> device buffer
};

LtState& State() {
  static LtState* const state = new LtState();
  return *state;
}

// Builds a plan; ok = false when cuBLASLt offers no algorithm.
Plan MakePlan(const lt::CublasLtApi& api, void* handle, const GemmParams& p,
              bool w_row_major, int align_x, int align_w, int align_y) {
  Plan plan;
  const int y_type =
      p.y_type == FloatFormat::kBFloat16 ? lt::kCudaR16BF : lt::kCudaR32F;
  auto fail = [&] {
    if (plan.desc) api.cublasLtMatmulDescDestroy(plan.desc);
    for (void* l : {plan.a, plan.b, plan.d}) {
      if (l) api.cublasLtMatrixLayoutDestroy(l);
    }
    return Plan();
  };
  if (api.cublasLtMatmulDescCreate(&plan.desc, lt::kCublasCompute32F,
                                   lt::kCudaR32F) != lt::kCublasStatusSuccess) {
    return fail();
  }
  const int trans_a = w_row_major ? lt::kCublasOpT : lt::kCublasOpN;
  const int trans_b = lt::kCublasOpN;
  api.cublasLtMatmulDescSetAttribute(plan.desc, lt::kMatmulDescTransA, &trans_a,
                                     sizeof(trans_a));
  api.cublasLtMatmulDescSetAttribute(plan.desc, lt::kMatmulDescTransB, &trans_b,
                                     sizeof(trans_b));
  const uint64_t a_rows = w_row_major ? p.in : p.out;
  const uint64_t a_cols = w_row_major ? p.out : p.in;
  const int64_t a_ld =
      std::max<int64_t>(w_row_major ? p.w_out_stride : p.w_in_stride,
                        static_cast<int64_t>(a_rows));
  const int64_t b_ld = std::max<int64_t>(p.x_row_stride, p.in);
  const int64_t d_ld = std::max<int64_t>(p.y_row_stride, p.out);
  if (api.cublasLtMatrixLayoutCreate(&plan.a, lt::kCudaR16BF, a_rows, a_cols,
                                     a_ld) != lt::kCublasStatusSuccess ||
      api.cublasLtMatrixLayoutCreate(&plan.b, lt::kCudaR16BF, p.in, p.rows,
                                     b_ld) != lt::kCublasStatusSuccess ||
      api.cublasLtMatrixLayoutCreate(&plan.d, y_type, p.out, p.rows, d_ld) !=
          lt::kCublasStatusSuccess) {
    return fail();
  }
  if (p.batch > 1) {
    const int32_t count = static_cast<int32_t>(p.batch);
    const struct {
      void* layout;
      int64_t stride;
    } batched[] = {{plan.a, p.w_batch_stride},
                   {plan.b, p.x_batch_stride},
                   {plan.d, p.y_batch_stride}};
    for (const auto& l : batched) {
      api.cublasLtMatrixLayoutSetAttribute(l.layout, lt::kLayoutBatchCount,
                                           &count, sizeof(count));
      api.cublasLtMatrixLayoutSetAttribute(
          l.layout, lt::kLayoutStridedBatchOffset, &l.stride, sizeof(l.stride));
    }
  }
  void* pref = nullptr;
  if (api.cublasLtMatmulPreferenceCreate(&pref) != lt::kCublasStatusSuccess) {
    return fail();
  }
  const uint64_t workspace = kWorkspaceBytes;
  api.cublasLtMatmulPreferenceSetAttribute(pref, lt::kPrefMaxWorkspaceBytes,
                                           &workspace, sizeof(workspace));
  const uint32_t aligns[4] = {
      static_cast<uint32_t>(align_w), static_cast<uint32_t>(align_x),
      static_cast<uint32_t>(align_y), static_cast<uint32_t>(align_y)};
  for (int i = 0; i < 4; ++i) {
    api.cublasLtMatmulPreferenceSetAttribute(
        pref, lt::kPrefMinAlignmentABytes + i, &aligns[i], sizeof(aligns[i]));
  }
  int returned = 0;
  const int status = api.cublasLtMatmulAlgoGetHeuristic(
      handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref, 1,
      &plan.heuristic, &returned);
  api.cublasLtMatmulPreferenceDestroy(pref);
  if (status != lt::kCublasStatusSuccess || returned < 1) return fail();
  plan.ok = true;
  return plan;
}

// Runs p on cuBLASLt; false when it cannot (the caller falls back).
bool TryCublasLt(const GemmParams& p, bool w_row_major, void* stream) {
  if (p.x_type != FloatFormat::kBFloat16 || !OnCuda()) return false;
  const lt::CublasLtApi* api = lt::LoadedCublasLt();
  if (api == nullptr) return false;
  if (p.batch > 0x7fffffff) return false;
  LtState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.handle == nullptr) {
    if (s.handle_failed) return false;
    if (api->cublasLtCreate(&s.handle) != lt::kCublasStatusSuccess) {
      s.handle_failed = true;
      s.handle = nullptr;
      return false;
    }
  }
  void*& workspace = s.workspaces[stream];
  if (workspace == nullptr && !DeviceMalloc(&workspace, kWorkspaceBytes).ok()) {
    workspace = nullptr;
    return false;
  }
  const int align_x = Alignment(p.x), align_w = Alignment(p.w),
            align_y = Alignment(p.y);
  const PlanKey key{p.batch,
                    p.rows,
                    p.in,
                    p.out,
                    p.x_row_stride,
                    p.x_batch_stride,
                    w_row_major ? p.w_out_stride : p.w_in_stride,
                    p.w_batch_stride,
                    p.y_row_stride,
                    p.y_batch_stride,
                    w_row_major,
                    static_cast<int>(p.y_type),
                    align_x,
                    align_w,
                    align_y};
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    it = s.plans
             .emplace(key, MakePlan(*api, s.handle, p, w_row_major, align_x,
                                    align_w, align_y))
             .first;
  }
  const Plan& plan = it->second;
  if (!plan.ok) return false;
  const float alpha = 1.0f, beta = 0.0f;
  return api->cublasLtMatmul(s.handle, plan.desc, &alpha, p.w, plan.a, p.x,
                             plan.b, &beta, p.y, plan.d, p.y, plan.d,
                             plan.heuristic.algo, workspace, kWorkspaceBytes,
                             stream) == lt::kCublasStatusSuccess;
}

// ---------------------------------------------------------------------------
// rocBLAS, the same column-major mapping: D [out, rows] = op(A) B with
// A = w ([in, out] transposed when its in dim is contiguous), B = x.
// One handle per process; its stream is set under the lock for each call.

namespace rb = ::dsa::platform::rocm;

struct RocblasState {
  std::mutex mu;
  void* handle = nullptr;
  bool handle_failed = false;
};

bool TryRocblas(const GemmParams& p, bool w_row_major, void* stream) {
  if (p.x_type != FloatFormat::kBFloat16 || !OnRocm()) return false;
  const rb::RocblasApi* api = rb::LoadedRocblas();
  if (api == nullptr) return false;
  constexpr int64_t kMaxInt = 0x7fffffff;
  const int64_t lda = std::max<int64_t>(
      w_row_major ? p.w_out_stride : p.w_in_stride, w_row_major ? p.in : p.out);
  const int64_t ldb = std::max<int64_t>(p.x_row_stride, p.in);
  const int64_t ldd = std::max<int64_t>(p.y_row_stride, p.out);
  for (int64_t v : {p.out, p.rows, p.in, p.batch, lda, ldb, ldd}) {
    if (v > kMaxInt) return false;  // rocblas_int is 32-bit
  }
  static RocblasState* const state = new RocblasState();
  std::lock_guard<std::mutex> lock(state->mu);
  if (state->handle == nullptr) {
    if (state->handle_failed) return false;
    if (api->rocblas_create_handle(&state->handle) !=
        rb::kRocblasStatusSuccess) {
      state->handle_failed = true;
      state->handle = nullptr;
      return false;
    }
  }
  if (api->rocblas_set_stream(state->handle, stream) !=
      rb::kRocblasStatusSuccess) {
    return false;
  }
  const int y_type = p.y_type == FloatFormat::kBFloat16
                         ? rb::kRocblasDatatypeBf16
                         : rb::kRocblasDatatypeF32;
  const float alpha = 1.0f, beta = 0.0f;
  return api->rocblas_gemm_strided_batched_ex(
             state->handle,
             w_row_major ? rb::kRocblasOperationTranspose
                         : rb::kRocblasOperationNone,
             rb::kRocblasOperationNone, static_cast<int32_t>(p.out),
             static_cast<int32_t>(p.rows), static_cast<int32_t>(p.in), &alpha,
             p.w, rb::kRocblasDatatypeBf16, static_cast<int32_t>(lda),
             p.w_batch_stride, p.x, rb::kRocblasDatatypeBf16,
             static_cast<int32_t>(ldb), p.x_batch_stride, &beta, p.y, y_type,
             static_cast<int32_t>(ldd), p.y_batch_stride, p.y, y_type,
             static_cast<int32_t>(ldd), p.y_batch_stride,
             static_cast<int32_t>(p.batch), rb::kRocblasDatatypeF32,
             rb::kRocblasGemmAlgoStandard, 0, 0) == rb::kRocblasStatusSuccess;
}

}  // namespace

Status GemmGpu(const ExecutionContext& ctx, const Gemm::Args& a) {
  return GemmGpuOn(ctx, a, GemmBackend::kAuto);
}

Status GemmGpuOn(const ExecutionContext& ctx, const Gemm::Args& a,
                 GemmBackend backend) {
  DSA_RETURN_IF_ERROR(Gemm::Validate(a));
  GemmParams p;
  p.x = a.x.data;
  p.x_type = FloatFormatOf(a.x.dtype);
  p.x_batch_stride = a.x.stride(0);
  p.x_row_stride = a.x.stride(1);
  p.w = a.w.data_as<const uint16_t>();
  p.w_batch_stride = a.w.stride(0);
  p.w_out_stride = a.w.stride(1);
  p.w_in_stride = a.w.stride(2);
  p.y = a.y.data;
  p.y_type = FloatFormatOf(a.y.dtype);
  p.y_batch_stride = a.y.stride(0);
  p.y_row_stride = a.y.stride(1);
  p.batch = a.x.dim(0);
  p.rows = a.x.dim(1);
  p.in = a.x.dim(2);
  p.out = a.w.dim(1);
  if (p.batch == 0 || p.rows == 0 || p.out == 0) return OkStatus();
  if (backend == GemmBackend::kAuto && p.in > 0 &&
      (TryCublasLt(p, Gemm::WeightRowMajor(a), ctx.stream) ||
       TryRocblas(p, Gemm::WeightRowMajor(a), ctx.stream))) {
    return OkStatus();
  }
  return StatusFromLaunch(GemmTiledLaunch(p, ctx.stream));
}

Status RmsNormGpu(const ExecutionContext& ctx, const RmsNorm::Args& a) {
  DSA_RETURN_IF_ERROR(RmsNorm::Validate(a));
  RmsNormParams p;
  p.x = a.x.data;
  p.x_type = FloatFormatOf(a.x.dtype);
  p.x_row_stride = a.x.stride(0);
  p.weight = a.weight.data;
  p.weight_type = FloatFormatOf(a.weight.dtype);
  p.weight_stride = a.weight.stride(0);
  p.y = a.y.data;
  p.y_type = FloatFormatOf(a.y.dtype);
  p.y_row_stride = a.y.stride(0);
  p.rows = a.x.dim(0);
  p.dim = a.x.dim(1);
  p.eps = a.eps;
  return StatusFromLaunch(RmsNormLaunch(p, ctx.stream));
}

Status RopeGpu(const ExecutionContext& ctx, const Rope::Args& a) {
  DSA_RETURN_IF_ERROR(Rope::Validate(a));
  RopeParams p;
  p.x = a.x.data;
  p.type = FloatFormatOf(a.x.dtype);
  p.token_stride = a.x.stride(0);
  p.head_stride = a.x.stride(1);
  p.tokens = a.x.dim(0);
  p.heads = a.x.dim(1);
  p.rope_dim = a.x.dim(2);
  p.positions = a.positions.data_as<const int64_t>();
  p.position_stride = a.positions.stride(0);
  p.cos_sin = a.cos_sin_cache.data_as<const float>();
  p.cos_sin_stride = a.cos_sin_cache.stride(0);
  p.max_position = a.cos_sin_cache.dim(0);
  p.neox = a.rope_style == RopeStyle::kNeox;
  return StatusFromLaunch(RopeLaunch(p, ctx.stream));
}

Status ResidualAddGpu(const ExecutionContext& ctx, const ResidualAdd::Args& a) {
  DSA_RETURN_IF_ERROR(ResidualAdd::Validate(a));
  ElementwiseParams p;
  p.x = a.x.data;
  p.x_type = FloatFormatOf(a.x.dtype);
  p.x_row_stride = a.x.stride(0);
  p.y = a.residual.data;
  p.y_type = FloatFormatOf(a.residual.dtype);
  p.y_row_stride = a.residual.stride(0);
  p.rows = a.x.dim(0);
  p.cols = a.x.dim(1);
  p.accumulate = true;
  return StatusFromLaunch(ElementwiseLaunch(p, ctx.stream));
}

Status CastGpu(const ExecutionContext& ctx, const Cast::Args& a) {
  DSA_RETURN_IF_ERROR(Cast::Validate(a));
  ElementwiseParams p;
  p.x = a.x.data;
  p.x_type = FloatFormatOf(a.x.dtype);
  p.x_row_stride = a.x.stride(0);
  p.y = a.y.data;
  p.y_type = FloatFormatOf(a.y.dtype);
  p.y_row_stride = a.y.stride(0);
  p.rows = a.x.dim(0);
  p.cols = a.x.dim(1);
  return StatusFromLaunch(ElementwiseLaunch(p, ctx.stream));
}

Status RandomFillGpu(const ExecutionContext& ctx, const RandomFill::Args& a) {
  DSA_RETURN_IF_ERROR(RandomFill::Validate(a));
  RandomFillParams p;
  p.y = a.y.data;
  p.type = FloatFormatOf(a.y.dtype);
  p.n = a.y.num_elements();
  p.seed = a.seed;
  p.stream = a.stream;
  p.scale = a.scale;
  p.offset = a.offset;
  return StatusFromLaunch(RandomFillLaunch(p, ctx.stream));
}

void AppendGpuDenseKernelDescriptors(const char* platform_id,
                                     std::vector<DsaKernelDescriptor>* out) {
#define DSA_GPU_DENSE_KERNEL_DESCRIPTOR(CxxName, LIST, PREFIX) \
  out->push_back(KernelDescriptorFor<CxxName>(                 \
      platform_id, &CKernel<CxxName, &CxxName##Gpu>));
  DSA_DENSE_OPS(DSA_GPU_DENSE_KERNEL_DESCRIPTOR)
#undef DSA_GPU_DENSE_KERNEL_DESCRIPTOR
}

std::string GpuGemmBackend() {
  if (OnRocm()) {
    const platform::RuntimeLoadResult& r = rb::RocblasLoadResult();
    if (!r.loaded()) return "tiled (rocBLAS: " + r.detail + ")";
    return "rocblas (" + r.library + "; fp32 x and fallbacks: tiled)";
  }
  if (!OnCuda()) return "tiled (built without a GPU backend)";
  const platform::RuntimeLoadResult& r = lt::CublasLtLoadResult();
  if (!r.loaded()) return "tiled (cuBLASLt: " + r.detail + ")";
  std::string s = "cublaslt (" + r.library;
  if (const lt::CublasLtApi* api = lt::LoadedCublasLt();
      api != nullptr && api->cublasLtGetVersion != nullptr) {
    s += ", version " + std::to_string(api->cublasLtGetVersion());
  }
  return s + "; fp32 x and fallbacks: tiled)";
}

}  // namespace dsa::attention::gpu
