// Times the GPU gemm op (op_kernels.h) at a GLM-5.1 layer's projection
// shapes, on the backend the op takes (cuBLASLt / rocBLAS) or, with
// --backend=own, on the project's tiled kernel; the same products as W8A8
// (fp8_block_gemm, with its activation quantiser, on its backend and on the
// own kernel, and the quantiser alone); and the memory-bound dense ops at the
// same widths. One line per shape: median ms over event-timed calls, TFLOP/s
// (2 * rows * in * out per gemm) or GB/s. The torch equivalents run in the
// same device call (torch_baseline.py).
//
// Usage: dense_bench [--backend=auto|own] [rows ...]   (default 1024 8192 32)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention/dense_ops.h"
#include "attention/dtypes/fp8.h"
#include "attention/gpu/dense_ops/op_kernels.h"
#include "attention/gpu/device/runtime.h"

namespace dsa::attention::gpu {
namespace {

struct GemmCall {
  Gemm::Args args;
  GemmBackend backend = GemmBackend::kAuto;
};

LaunchResult RunGemm(void* arg) {
  const GemmCall* call = static_cast<GemmCall*>(arg);
  const Status s = GemmGpuOn(ExecutionContext(), call->args, call->backend);
  LaunchResult r;
  if (!s.ok()) {
    r.code = LaunchCode::kRuntimeError;
    std::snprintf(r.message, sizeof(r.message), "%s", s.message().c_str());
  }
  return r;
}

struct Fp8Call {
  Fp8BlockGemm::Args args;
  GemmBackend backend = GemmBackend::kAuto;
};
LaunchResult RunFp8(void* arg) {
  const Fp8Call* call = static_cast<Fp8Call*>(arg);
  const Status s =
      Fp8BlockGemmGpuOn(ExecutionContext(), call->args, call->backend);
  LaunchResult r;
  if (!s.ok()) {
    r.code = LaunchCode::kRuntimeError;
    std::snprintf(r.message, sizeof(r.message), "%s", s.message().c_str());
  }
  return r;
}

struct QuantCall {
  Fp8BlockQuant::Args args;
};
LaunchResult RunQuant(void* arg) {
  const Status s =
      Fp8BlockQuantGpu(ExecutionContext(), static_cast<QuantCall*>(arg)->args);
  LaunchResult r;
  if (!s.ok()) {
    r.code = LaunchCode::kRuntimeError;
    std::snprintf(r.message, sizeof(r.message), "%s", s.message().c_str());
  }
  return r;
}

struct NormCall {
  RmsNorm::Args args;
};
LaunchResult RunNorm(void* arg) {
  const Status s =
      RmsNormGpu(ExecutionContext(), static_cast<NormCall*>(arg)->args);
  LaunchResult r;
  if (!s.ok()) {
    r.code = LaunchCode::kRuntimeError;
    std::snprintf(r.message, sizeof(r.message), "%s", s.message().c_str());
  }
  return r;
}

void* Alloc(size_t bytes) {
  void* p = nullptr;
  LaunchResult r = DeviceMalloc(&p, bytes);
  if (!r.ok()) {
    std::fprintf(stderr, "DeviceMalloc: %s\n", r.message);
    std::exit(1);
  }
  DeviceMemset(p, 0x3c, bytes);  // small finite bf16/f32 values
  return p;
}

int Main(int argc, char** argv) {
  std::vector<int64_t> rows_list;
  GemmBackend backend = GemmBackend::kAuto;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--backend=own") {
      backend = GemmBackend::kOwnKernel;
    } else if (arg == "--backend=auto") {
      backend = GemmBackend::kAuto;
    } else {
      char* end = nullptr;
      const long long rows = std::strtoll(arg.c_str(), &end, 10);
      if (end == arg.c_str() || *end != '\0' || rows <= 0) {
        std::fprintf(stderr,
                     "dense_bench: '%s' is neither --backend=auto|own nor a "
                     "positive row count\n",
                     argv[i]);
        return 2;
      }
      rows_list.push_back(rows);
    }
  }
  if (rows_list.empty()) rows_list = {1024, 8192, 32};
  std::printf("gemm backend: %s\n", backend == GemmBackend::kOwnKernel
                                        ? "tiled (--backend=own)"
                                        : GpuGemmBackend().c_str());
  struct Shape {
    const char* name;
    int64_t in, out;
  };
  // GLM-5.1: hidden 6144, q_lora 2048, kv_lora 512 + rope 64, 64 heads of
  // qk 256 and v 256, indexer 32 x 128.
  const Shape shapes[] = {
      {"q_a_proj", 6144, 2048},          {"q_b_proj", 2048, 64 * 256},
      {"kv_a_proj_with_mqa", 6144, 576}, {"indexer_wq_b", 2048, 32 * 128},
      {"indexer_wk", 6144, 128},         {"indexer_weights_proj", 6144, 32},
      {"o_proj", 64 * 256, 6144},
  };
  for (int64_t rows : rows_list) {
    double total_ms = 0.0, fp8_total_ms = 0.0;
    for (const Shape& s : shapes) {
      GemmCall call;
      call.backend = backend;
      call.args.x = MakeTensorView(Alloc(rows * s.in * 2), DType::kBFloat16,
                                   {1, rows, s.in});
      call.args.w = MakeTensorView(Alloc(s.out * s.in * 2), DType::kBFloat16,
                                   {1, s.out, s.in});
      call.args.y = MakeTensorView(Alloc(rows * s.out * 2), DType::kBFloat16,
                                   {1, rows, s.out});
      float ms = 0.0f;
      LaunchResult r = TimeMedianMs(&RunGemm, &call, 5, 30, &ms);
      if (!r.ok()) {
        std::printf("%s: %s\n", s.name, r.message);
        return 1;
      }
      total_ms += ms;
      const double flops = 2.0 * rows * s.in * s.out;
      std::printf(
          "gemm T=%-5lld %-22s [%lld x %lld] x [%lld]^T  %8.4f ms  %7.1f "
          "TFLOP/s\n",
          static_cast<long long>(rows), s.name, static_cast<long long>(rows),
          static_cast<long long>(s.in), static_cast<long long>(s.out), ms,
          flops / ms * 1e-9);
      // The same product as W8A8 (fp8_block_gemm: the activations' quantiser
      // and the block-scaled product), on the op's backend and on the own
      // kernel, and the quantiser alone.
      Fp8Call fp8;
      fp8.args.x =
          MakeTensorView(call.args.x.data, DType::kBFloat16, {rows, s.in});
      fp8.args.w = MakeTensorView(Alloc(s.out * s.in), DType::kFloat8E4m3fn,
                                  {s.out, s.in});
      const int64_t out_blocks = Fp8Blocks(s.out), groups = Fp8Blocks(s.in);
      fp8.args.w_scale_inv =
          MakeTensorView(Alloc(out_blocks * groups * 4), DType::kFloat32,
                         {out_blocks, groups});
      fp8.args.y =
          MakeTensorView(call.args.y.data, DType::kBFloat16, {rows, s.out});
      float fp8_ms = 0.0f, own_ms = 0.0f, quant_ms = 0.0f;
      r = TimeMedianMs(&RunFp8, &fp8, 5, 30, &fp8_ms);
      if (r.ok()) {
        fp8.backend = GemmBackend::kOwnKernel;
        r = TimeMedianMs(&RunFp8, &fp8, 3, 10, &own_ms);
      }
      QuantCall quant;
      quant.args.x = fp8.args.x;
      quant.args.q = MakeTensorView(Alloc(rows * s.in), DType::kFloat8E4m3fn,
                                    {rows, s.in});
      quant.args.scale_inv = MakeTensorView(Alloc(rows * groups * 4),
                                            DType::kFloat32, {rows, groups});
      if (r.ok()) r = TimeMedianMs(&RunQuant, &quant, 5, 30, &quant_ms);
      if (!r.ok()) {
        std::printf("fp8 %s: %s\n", s.name, r.message);
        return 1;
      }
      fp8_total_ms += fp8_ms;
      std::printf(
          "fp8  T=%-5lld %-22s W8A8 %8.4f ms  %7.1f TFLOP/s  (%.2fx bf16)  "
          "own kernel %8.4f ms  %7.1f TFLOP/s  activation quantiser %7.4f "
          "ms\n",
          static_cast<long long>(rows), s.name, fp8_ms, flops / fp8_ms * 1e-9,
          ms / fp8_ms, own_ms, flops / own_ms * 1e-9, quant_ms);
      DeviceFree(fp8.args.w.data);
      DeviceFree(fp8.args.w_scale_inv.data);
      DeviceFree(quant.args.q.data);
      DeviceFree(quant.args.scale_inv.data);
      DeviceFree(call.args.x.data);
      DeviceFree(call.args.w.data);
      DeviceFree(call.args.y.data);
    }
    std::printf("gemm T=%-5lld sum of the layer's projections: %.4f ms\n",
                static_cast<long long>(rows), total_ms);
    std::printf(
        "fp8  T=%-5lld sum of the layer's projections: %.4f ms (%.2fx bf16)\n",
        static_cast<long long>(rows), fp8_total_ms, total_ms / fp8_total_ms);
    std::printf("fp8 backend: %s\n", GpuFp8GemmBackend().c_str());
    // The stack's norms: the input norm with the residual add (the f32
    // stream and o_proj's f32 output in, bf16 out) at GLM-5.x's and
    // DeepSeek-V3.2's hidden sizes, and GLM-5.1's narrow q_a and kv_a norms
    // over their slices of the fused q_a / kv_a output (bf16, rows of 2048 +
    // 576).
    struct NormCase {
      const char* name;
      int64_t dim, row_stride, first_col;
      DType x_type;
      bool residual;
    };
    for (const NormCase& c : {NormCase{"hidden 6144 + residual, f32 -> bf16",
                                       6144, 6144, 0, DType::kFloat32, true},
                              NormCase{"hidden 7168 + residual, f32 -> bf16",
                                       7168, 7168, 0, DType::kFloat32, true},
                              NormCase{"q_a 2048 of 2624, bf16", 2048, 2624, 0,
                                       DType::kBFloat16, false},
                              NormCase{"kv_a 512 of 2624, bf16", 512, 2624,
                                       2048, DType::kBFloat16, false}}) {
      const int64_t x_size = DTypeSize(c.x_type);
      NormCall norm;
      char* x = static_cast<char*>(Alloc(rows * c.row_stride * x_size));
      norm.args.x =
          MakeTensorView(x + c.first_col * x_size, c.x_type, {rows, c.dim});
      norm.args.x.strides[0] = c.row_stride;
      norm.args.weight =
          MakeTensorView(Alloc(c.dim * 2), DType::kBFloat16, {c.dim});
      norm.args.y = MakeTensorView(Alloc(rows * c.dim * 2), DType::kBFloat16,
                                   {rows, c.dim});
      if (c.residual) {
        norm.args.residual = MakeTensorView(Alloc(rows * c.dim * 4),
                                            DType::kFloat32, {rows, c.dim});
      }
      // x read, y written, the stream read and written.
      const double bytes = static_cast<double>(rows) * c.dim *
                           (x_size + 2 + (c.residual ? 8 : 0));
      float ms = 0.0f;
      if (TimeMedianMs(&RunNorm, &norm, 5, 30, &ms).ok()) {
        std::printf("rms_norm T=%-5lld %-36s %8.4f ms  %7.1f GB/s\n",
                    static_cast<long long>(rows), c.name, ms,
                    bytes / ms * 1e-6);
      }
      DeviceFree(x);
      DeviceFree(norm.args.weight.data);
      DeviceFree(norm.args.y.data);
      if (c.residual) DeviceFree(norm.args.residual.data);
    }
  }
  return 0;
}

}  // namespace
}  // namespace dsa::attention::gpu

int main(int argc, char** argv) {
  return dsa::attention::gpu::Main(argc, argv);
}
