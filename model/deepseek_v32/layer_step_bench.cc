// Times one GLM-5.1-shaped layer step on a platform's kernels (device
// runs): a prefill of T tokens through a model of one main layer (hidden
// 6144, 64 heads of qk 192+64 and v 256, q_lora 2048, kv_lora 512, indexer
// 32 x 128, bf16 activations and weights), with the indexer skip and with
// scoring, reading nothing back; median wall time of a synchronised step
// and the launches per step.
//
// Where the platform lacks an attention op (their GPU kernels land
// separately), it says which and times the layer's dense ops alone, in the
// runner's order and at the runner's shapes (cast, the five projections of
// q, kv and the indexer's keys, two RMSNorms, two ropes, the output
// projection, the residual): the part of a step this work moved onto the
// device.
//
// Usage: layer_step_bench [--platform=cuda] [--iters=20] [T ...]
//        (default T: 1024 8192)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "attention/dense_ops.h"
#include "attention/dtypes/dtype.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/host_math.h"
#include "model/deepseek_v32/model_runner.h"
#include "platform/device_buffer.h"
#include "platform/registry.h"

namespace dsa::model::deepseek_v32 {
namespace {

using attention::DType;
using attention::MakeTensorView;
using attention::TensorView;
using platform::DeviceBuffer;

ModelConfig OneLayerGlm51() {
  DeepseekV32Config proto = LoadModelConfig("glm-5.1")->proto();
  proto.set_name("glm-5.1-one-layer");
  proto.set_num_hidden_layers(1);
  proto.set_num_nextn_predict_layers(0);
  return *ModelConfig::FromProto(proto);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The full step through DeepseekV32Model.
absl::Status TimeModelStep(const platform::Platform& target,
                           const AttentionKernels& kernels, int64_t tokens,
                           int iters) {
  platform::Registry& registry = platform::Registry::Global();
  for (bool skip : {true, false}) {
    platform::PlatformCapabilities caps =
        *registry.GetPlatform("rocm")->CapabilitiesForArch("gfx942");
    caps.is_cuda_alike = skip;  // decisions only; the kernels are target's
    auto planner = LayerPlanner::Create(OneLayerGlm51(), caps, {});
    if (!planner.ok()) return planner.status();
    RuntimeOptions options;
    options.block_size = 64;
    options.num_blocks = static_cast<int>(tokens / 64 + 2);
    options.max_model_len = tokens;
    options.max_num_batched_tokens = tokens;
    options.activation_dtype = DType::kBFloat16;
    auto model = DeepseekV32Model::Create(std::move(*planner), target, kernels,
                                          options, /*seed=*/1);
    if (!model.ok()) return model.status();
    const int hidden = (*model)->planner().config().proto().hidden_size();
    std::mt19937 rng(3);
    std::normal_distribution<float> dist;
    std::vector<float> x(tokens * hidden);
    for (float& v : x) v = dist(rng);
    if (skip) {
      // What a step spends on its one upload of the hidden states (pageable
      // host memory, a synchronous copy), for the breakdown.
      auto buffer =
          DeviceBuffer::Allocate(target.runtime(), x.size() * sizeof(float));
      if (!buffer.ok()) return buffer.status();
      std::vector<double> upload_ms;
      for (int i = 0; i < 5; ++i) {
        const auto begin = std::chrono::steady_clock::now();
        if (absl::Status s =
                buffer->CopyFromHost(x.data(), x.size() * sizeof(float));
            !s.ok()) {
          return s;
        }
        upload_ms.push_back(std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - begin)
                                .count());
      }
      std::printf("upload of the hidden states T=%-5lld %9.3f ms (%.0f MB)\n",
                  static_cast<long long>(tokens), Median(upload_ms),
                  x.size() * 4e-6);
    }
    StepOptions step_options;
    step_options.read_hidden = false;
    std::vector<double> ms;
    int launches = 0;
    double prepare_ms = 0, issue_ms = 0, tail_ms = 0;  // of the last step
    for (int i = 0; i < iters + 2; ++i) {
      const auto begin = std::chrono::steady_clock::now();
      auto out = (*model)->Step({}, {{i, 0, tokens}}, x, step_options);
      const auto end = std::chrono::steady_clock::now();
      if (!out.ok()) return out.status();
      launches = out->op_calls.total();
      issue_ms = out->host_issue_ms;
      prepare_ms = out->prepare_ms;
      tail_ms = out->device_tail_ms;
      if (i >= 2) {
        ms.push_back(
            std::chrono::duration<double, std::milli>(end - begin).count());
      }
      if (absl::Status s = (*model)->Release(i); !s.ok()) return s;
    }
    std::printf(
        "layer step T=%-5lld %-5s %9.3f ms (median of %d, incl. upload of "
        "inputs)  %d op launches\n",
        static_cast<long long>(tokens), skip ? "skip" : "score", Median(ms),
        iters, launches);
    // Where the step's time goes: once more with every op timed.
    step_options.time_ops = true;
    auto profiled =
        (*model)->Step({}, {{iters + 2, 0, tokens}}, x, step_options);
    if (!profiled.ok()) return profiled.status();
    if (absl::Status s = (*model)->Release(iters + 2); !s.ok()) return s;
    const OpTimes& t = profiled->op_ms;
    std::printf("  ops timed one by one: %.3f ms, indexer scoring %.3f ms;",
                t.total(), t.indexer_scoring);
#define DSA_PRINT_OP(op) \
  if (t.op > 0) std::printf(" %s %.3f", #op, t.op);
    DSA_STEP_OPS(DSA_PRINT_OP)
#undef DSA_PRINT_OP
    std::printf(
        "\n  unprofiled step: prepare (plan, uploads) %.3f ms, host issue "
        "%.3f ms, device tail %.3f ms\n",
        prepare_ms, issue_ms, tail_ms);
  }
  return absl::OkStatus();
}

// The layer's dense ops alone, at the runner's shapes.
absl::Status TimeDenseOps(const platform::Platform& target,
                          const DenseKernels& k, int64_t T, int iters) {
  const platform::DeviceRuntime rt = target.runtime();
  const ModelConfig config = OneLayerGlm51();
  const DeepseekV32Config& c = config.proto();
  const int64_t hidden = c.hidden_size(), H = c.num_attention_heads();
  const int64_t nope = c.qk_nope_head_dim(), rope = c.qk_rope_head_dim();
  const int64_t qk = nope + rope, v = c.v_head_dim();
  const int64_t q_lora = c.q_lora_rank(), kv_lora = c.kv_lora_rank();
  const int64_t id = c.indexer().index_head_dim();
  const int64_t kv_width = kv_lora + rope;
  attention::ExecutionContext exec;
  std::vector<DeviceBuffer> owned;
  auto alloc = [&](int64_t bytes) -> absl::StatusOr<void*> {
    auto b = DeviceBuffer::Allocate(rt, static_cast<size_t>(bytes));
    if (!b.ok()) return b.status();
    owned.push_back(std::move(*b));
    return owned.back().data();
  };
  // Weights and inputs drawn on the device.
  uint64_t stream = 0;
  auto random = [&](DType dtype, std::initializer_list<int64_t> shape,
                    float scale, float offset) -> absl::StatusOr<TensorView> {
    TensorView t = MakeTensorView(nullptr, dtype, shape);
    auto p = alloc(t.num_elements() * attention::DTypeSize(dtype));
    if (!p.ok()) return p.status();
    t.data = *p;
    attention::RandomFill::Args a;
    a.y = t;
    a.seed = 1;
    a.stream = ++stream;
    a.scale = scale;
    a.offset = offset;
    if (absl::Status s = k.random_fill(exec, a); !s.ok()) return s;
    return t;
  };
#define DSA_BENCH_ASSIGN(lhs, expr)             \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  TensorView lhs = *lhs##_or;
  DSA_BENCH_ASSIGN(residual, random(DType::kFloat32, {T, hidden}, 1.0f, 0.0f));
  DSA_BENCH_ASSIGN(x, random(DType::kBFloat16, {T, hidden}, 0.0f, 0.0f));
  DSA_BENCH_ASSIGN(w_qa,
                   random(DType::kBFloat16, {1, q_lora, hidden}, 0.02f, 0));
  DSA_BENCH_ASSIGN(n_q, random(DType::kBFloat16, {q_lora}, 0.1f, 1.0f));
  DSA_BENCH_ASSIGN(w_qb,
                   random(DType::kBFloat16, {1, H * qk, q_lora}, 0.04f, 0));
  DSA_BENCH_ASSIGN(w_kva,
                   random(DType::kBFloat16, {1, kv_width, hidden}, 0.02f, 0));
  DSA_BENCH_ASSIGN(n_kv, random(DType::kBFloat16, {kv_lora}, 0.1f, 1.0f));
  DSA_BENCH_ASSIGN(w_k, random(DType::kBFloat16, {1, id, hidden}, 0.02f, 0));
  DSA_BENCH_ASSIGN(w_o, random(DType::kBFloat16, {1, hidden, H * v}, 0.01f, 0));
  DSA_BENCH_ASSIGN(attn, random(DType::kBFloat16, {T, H * v}, 1.0f, 0.0f));
  DSA_BENCH_ASSIGN(q_c_raw, random(DType::kFloat32, {T, q_lora}, 0.0f, 0.0f));
  DSA_BENCH_ASSIGN(q_c, random(DType::kBFloat16, {T, q_lora}, 0.0f, 0.0f));
  DSA_BENCH_ASSIGN(q, random(DType::kBFloat16, {T, H * qk}, 0.0f, 0.0f));
  DSA_BENCH_ASSIGN(kv, random(DType::kFloat32, {T, kv_width}, 0.0f, 0.0f));
  DSA_BENCH_ASSIGN(kv_c, random(DType::kBFloat16, {T, kv_lora}, 0.0f, 0.0f));
  DSA_BENCH_ASSIGN(ik, random(DType::kBFloat16, {T, id}, 0.0f, 0.0f));
  DSA_BENCH_ASSIGN(out, random(DType::kFloat32, {T, hidden}, 0.0f, 0.0f));
#undef DSA_BENCH_ASSIGN
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = t;
  auto pos_dev = alloc(T * 8);
  if (!pos_dev.ok()) return pos_dev.status();
  if (absl::Status s = rt.CopyHostToDevice(*pos_dev, pos.data(), T * 8);
      !s.ok()) {
    return s;
  }
  const std::vector<float> table = RopeCosSinTable(T, rope, 10000.0);
  auto table_dev = alloc(table.size() * 4);
  if (!table_dev.ok()) return table_dev.status();
  if (absl::Status s =
          rt.CopyHostToDevice(*table_dev, table.data(), table.size() * 4);
      !s.ok()) {
    return s;
  }
  auto as3 = [](TensorView t) {
    TensorView b = MakeTensorView(t.data, t.dtype, {1, t.dim(0), t.dim(1)});
    return b;
  };
  int launches = 0;
  auto gemm = [&](TensorView x_, TensorView w, TensorView y) {
    attention::Gemm::Args a;
    a.x = as3(x_);
    a.w = w;
    a.y = as3(y);
    ++launches;
    return k.gemm(exec, a);
  };
  auto norm = [&](TensorView x_, TensorView w, TensorView y) {
    attention::RmsNorm::Args a;
    a.x = x_;
    a.weight = w;
    a.y = y;
    ++launches;
    return k.rms_norm(exec, a);
  };
  auto rope_op = [&](void* data, DType dtype, int64_t heads, int64_t t_stride,
                     int64_t h_stride) {
    attention::Rope::Args a;
    a.x = MakeTensorView(data, dtype, {T, heads, rope});
    a.x.strides[0] = t_stride;
    a.x.strides[1] = h_stride;
    a.positions = MakeTensorView(*pos_dev, DType::kInt64, {T});
    a.cos_sin_cache = MakeTensorView(*table_dev, DType::kFloat32, {T, rope});
    ++launches;
    return k.rope(exec, a);
  };
  auto layer = [&]() -> absl::Status {
    launches = 0;
    attention::Cast::Args cast;
    cast.x = residual;
    cast.y = x;
    ++launches;
    if (absl::Status s = k.cast(exec, cast); !s.ok()) return s;
    for (absl::Status s :
         {gemm(x, w_qa, q_c_raw), norm(q_c_raw, n_q, q_c), gemm(q_c, w_qb, q),
          rope_op(static_cast<uint16_t*>(q.data) + nope, DType::kBFloat16, H,
                  H * qk, qk),
          gemm(x, w_kva, kv)}) {
      if (!s.ok()) return s;
    }
    TensorView kv_c_in = MakeTensorView(kv.data, DType::kFloat32, {T, kv_lora});
    kv_c_in.strides[0] = kv_width;
    for (absl::Status s : {norm(kv_c_in, n_kv, kv_c),
                           rope_op(static_cast<float*>(kv.data) + kv_lora,
                                   DType::kFloat32, 1, kv_width, rope),
                           gemm(x, w_k, ik), gemm(attn, w_o, out)}) {
      if (!s.ok()) return s;
    }
    attention::ResidualAdd::Args add;
    add.residual = residual;
    add.x = out;
    ++launches;
    return k.residual_add(exec, add);
  };
  std::vector<double> ms;
  for (int i = 0; i < iters + 3; ++i) {
    if (absl::Status s = rt.Synchronize(); !s.ok()) return s;
    const auto begin = std::chrono::steady_clock::now();
    if (absl::Status s = layer(); !s.ok()) return s;
    if (absl::Status s = rt.Synchronize(); !s.ok()) return s;
    const auto end = std::chrono::steady_clock::now();
    if (i >= 3) {
      ms.push_back(
          std::chrono::duration<double, std::milli>(end - begin).count());
    }
  }
  const double flops = 2.0 * T *
                       (hidden * q_lora + q_lora * H * qk + hidden * kv_width +
                        hidden * id + H * v * hidden);
  std::printf(
      "dense ops of one layer T=%-5lld %9.3f ms (median of %d, host-timed, "
      "synchronised)  %d launches  %.1f TFLOP/s over its gemms\n",
      static_cast<long long>(T), Median(ms), iters, launches,
      flops / Median(ms) * 1e-9);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  std::string platform_id = "cuda";
  int iters = 20;
  std::vector<int64_t> tokens;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--platform=", 11) == 0) {
      platform_id = argv[i] + 11;
    } else if (std::strncmp(argv[i], "--iters=", 8) == 0) {
      iters = std::max(1, std::atoi(argv[i] + 8));
    } else {
      tokens.push_back(std::atoll(argv[i]));
    }
  }
  if (tokens.empty()) tokens = {1024, 8192};
  platform::Registry& registry = platform::Registry::Global();
  auto target = registry.GetPlatform(platform_id);
  if (!target.ok()) {
    std::printf("%s\n", target.status().ToString().c_str());
    return 1;
  }
  auto devices = target->ProbeDevices();
  if (!devices.ok() || devices->device_count == 0) {
    std::printf("platform %s: no device\n", platform_id.c_str());
    return 1;
  }
  auto dense = DenseKernels::Load(registry, platform_id);
  if (!dense.ok()) {
    std::printf("%s\n", dense.status().ToString().c_str());
    return 1;
  }
  auto kernels = AttentionKernels::Load(registry, platform_id);
  if (!kernels.ok()) {
    std::printf("full layer step not run: %s\n",
                kernels.status().ToString().c_str());
  }
  for (int64_t T : tokens) {
    absl::Status s = kernels.ok() ? TimeModelStep(*target, *kernels, T, iters)
                                  : absl::OkStatus();
    if (s.ok()) s = TimeDenseOps(*target, *dense, T, iters);
    if (!s.ok()) {
      std::printf("T=%lld: %s\n", static_cast<long long>(T),
                  s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace dsa::model::deepseek_v32

int main(int argc, char** argv) {
  return dsa::model::deepseek_v32::Main(argc, argv);
}
