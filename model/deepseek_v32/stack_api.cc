// libdsa_stack.so: the C ABI of stack_api.h over LoadModel and the runner.
#include "model/deepseek_v32/stack_api.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "attention/dtypes/dtype.h"
#include "model/deepseek_v32/attention_kernels.h"
#include "model/deepseek_v32/layer_plan.h"
#include "model/deepseek_v32/model_loader.h"
#include "model/deepseek_v32/model_runner.h"
#include "platform/registry.h"
#include "platform/status_macros.h"

struct DsaStack {
  std::unique_ptr<dsa::model::deepseek_v32::LoadedModel> loaded;
  std::unique_ptr<dsa::model::deepseek_v32::DeepseekV32Model> model;
  uint64_t seed = 0;
  int64_t max_tokens = 0;
  int64_t next_request = 1;
};

namespace dsa::model::deepseek_v32 {
namespace {

DsaStatusCode Report(const absl::Status& status, char* error,
                     size_t error_size) {
  if (status.ok()) return DSA_STATUS_OK;
  if (error != nullptr && error_size > 0) {
    std::snprintf(error, error_size, "%s",
                  std::string(status.message()).c_str());
  }
  return static_cast<DsaStatusCode>(status.code());
}

template <class F>
DsaStatusCode Guard(char* error, size_t error_size, F f) {
  try {
    return Report(f(), error, error_size);
  } catch (const std::exception& e) {
    return Report(absl::InternalError(absl::StrCat("exception: ", e.what())),
                  error, error_size);
  } catch (...) {
    return Report(absl::InternalError("unknown exception"), error, error_size);
  }
}

absl::Status Open(const DsaStackOpenArgs* a, DsaStack** out) {
  if (a == nullptr || out == nullptr || a->struct_size < sizeof(size_t)) {
    return absl::InvalidArgumentError("dsa_stack open: no arguments");
  }
  *out = nullptr;
  DsaStackOpenArgs args;
  std::memset(&args, 0, sizeof(args));
  args.indexer_hadamard_rotation = -1;
  // A field an older caller's struct does not reach keeps its default.
  std::memcpy(&args, a, std::min(a->struct_size, sizeof(args)));
  if (args.model == nullptr) {
    return absl::InvalidArgumentError("dsa_stack open: model is NULL");
  }
  const std::string platform_id =
      args.platform != nullptr ? args.platform : "cpu";
  LoadModelOptions load;
  if (args.indexer_hadamard_rotation == 0 ||
      args.indexer_hadamard_rotation == 1) {
    load.indexer_hadamard_rotation = args.indexer_hadamard_rotation == 1;
  } else if (args.indexer_hadamard_rotation != -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("dsa_stack open: indexer_hadamard_rotation is ",
                     args.indexer_hadamard_rotation, ", expected -1, 0 or 1"));
  }
  auto stack = std::make_unique<DsaStack>();
  DSA_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(args.model, load));
  stack->loaded = std::make_unique<LoadedModel>(std::move(loaded));
  const ModelConfig& config = stack->loaded->config();
  platform::Registry& registry = platform::Registry::Global();
  DSA_ASSIGN_OR_RETURN(platform::Platform platform,
                       registry.GetPlatform(platform_id));
  if (platform.is_accelerator()) {
    DSA_ASSIGN_OR_RETURN(platform::DeviceInfo devices, platform.ProbeDevices());
    if (devices.device_count == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("platform ", platform_id, " has no device"));
    }
  }
  DSA_ASSIGN_OR_RETURN(platform::PlatformCapabilities caps,
                       platform.Capabilities());
  DSA_ASSIGN_OR_RETURN(LayerPlanner planner,
                       LayerPlanner::Create(config, caps, {}));
  DSA_ASSIGN_OR_RETURN(AttentionKernels kernels,
                       AttentionKernels::Load(registry, platform_id));
  int64_t max_tokens = args.max_tokens;
  if (max_tokens <= 0) {
    max_tokens = std::min<int64_t>(config.max_position_embeddings(), 8192);
  }
  if (max_tokens > config.max_position_embeddings()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dsa_stack open: max_tokens ", max_tokens, " is above the model's ",
        config.max_position_embeddings(), " positions"));
  }
  RuntimeOptions options;
  options.block_size = 64;
  options.num_blocks = static_cast<int>((max_tokens + 63) / 64);
  options.max_model_len = max_tokens;
  options.max_num_batched_tokens = max_tokens;
  options.num_threads = args.num_threads;
  options.activation_dtype = args.bf16_activations != 0
                                 ? attention::DType::kBFloat16
                                 : attention::DType::kFloat32;
  DSA_ASSIGN_OR_RETURN(
      stack->model,
      DeepseekV32Model::Create(
          std::move(planner), platform, kernels, options,
          stack->loaded->weight_source(), args.seed,
          args.progress != 0 ? TerminalLoadProgress(stderr) : LoadProgress()));
  stack->seed = args.seed;
  stack->max_tokens = max_tokens;
  *out = stack.release();
  return absl::OkStatus();
}

absl::Status Info(const DsaStack* stack, DsaStackInfo* out) {
  if (stack == nullptr || out == nullptr || out->struct_size < sizeof(size_t)) {
    return absl::InvalidArgumentError("dsa_stack info: no stack or output");
  }
  const ModelConfig& c = stack->loaded->config();
  DsaStackInfo info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = std::min(out->struct_size, sizeof(info));
  info.num_main_layers = c.num_main_layers();
  info.num_mtp_layers = c.num_mtp_layers();
  info.hidden_size = c.proto().hidden_size();
  info.vocab_size = c.proto().vocab_size();
  info.index_topk = c.index_topk();
  info.max_tokens = stack->max_tokens;
  info.has_checkpoint_weights = stack->loaded->has_checkpoint_weights() ? 1 : 0;
  std::snprintf(info.name, sizeof(info.name), "%s", c.name().c_str());
  std::snprintf(info.description, sizeof(info.description), "%s",
                stack->loaded->description().c_str());
  std::memcpy(out, &info, info.struct_size);
  return absl::OkStatus();
}

absl::Status Prefill(DsaStack* stack, const DsaStackPrefillArgs* a) {
  if (stack == nullptr || a == nullptr || a->struct_size < sizeof(size_t)) {
    return absl::InvalidArgumentError(
        "dsa_stack prefill: no stack or arguments");
  }
  DsaStackPrefillArgs args;
  std::memset(&args, 0, sizeof(args));
  std::memcpy(&args, a, std::min(a->struct_size, sizeof(args)));
  const ModelConfig& c = stack->loaded->config();
  const int64_t T = args.num_tokens;
  const int64_t hidden = c.proto().hidden_size();
  if (T < 1 || T > stack->max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("dsa_stack prefill: num_tokens is ", T, ", expected 1..",
                     stack->max_tokens, " (the stack's max_tokens)"));
  }
  if ((args.input_ids == nullptr) == (args.hidden_states == nullptr)) {
    return absl::InvalidArgumentError(
        "dsa_stack prefill: give exactly one of input_ids and hidden_states");
  }
  if (args.mtp_input_ids != nullptr && args.mtp_hidden_states != nullptr) {
    return absl::InvalidArgumentError(
        "dsa_stack prefill: give at most one of mtp_input_ids and "
        "mtp_hidden_states");
  }
  if (args.out_hidden_states == nullptr) {
    return absl::InvalidArgumentError(
        "dsa_stack prefill: out_hidden_states is NULL");
  }
  std::vector<float> x(static_cast<size_t>(T * hidden));
  if (args.input_ids != nullptr) {
    DSA_RETURN_IF_ERROR(stack->loaded->Embed(
        absl::MakeConstSpan(args.input_ids, T), false, stack->seed, x.data()));
  } else {
    std::copy_n(args.hidden_states, T * hidden, x.data());
  }
  std::vector<float> mtp;
  if (c.num_mtp_layers() > 0) {
    if (args.mtp_input_ids != nullptr) {
      mtp.resize(x.size());
      DSA_RETURN_IF_ERROR(
          stack->loaded->Embed(absl::MakeConstSpan(args.mtp_input_ids, T), true,
                               stack->seed, mtp.data()));
    } else if (args.mtp_hidden_states != nullptr) {
      mtp.assign(args.mtp_hidden_states, args.mtp_hidden_states + T * hidden);
    }
  }
  StepOptions options;
  options.capture_hidden_states = true;
  options.capture_topk = args.out_topk != nullptr;
  options.read_hidden = false;
  const int64_t request = stack->next_request++;
  absl::StatusOr<StepOutput> out =
      stack->model->Step({}, {{request, 0, T}}, x, mtp, options);
  const absl::Status released = stack->model->Release(request);
  DSA_RETURN_IF_ERROR(out.status());
  DSA_RETURN_IF_ERROR(released);
  for (size_t l = 0; l < out->hidden_states.size(); ++l) {
    std::copy(out->hidden_states[l].begin(), out->hidden_states[l].end(),
              args.out_hidden_states + static_cast<int64_t>(l) * T * hidden);
  }
  if (args.out_topk != nullptr) {
    const int64_t k = c.index_topk();
    for (size_t l = 0; l < out->topk.size(); ++l) {
      int32_t* dst = args.out_topk + static_cast<int64_t>(l) * T * k;
      if (out->plan.layers[l].prefill_branch == PrefillBranch::kSparseMqa &&
          static_cast<int64_t>(out->topk[l].size()) == T * k) {
        std::copy(out->topk[l].begin(), out->topk[l].end(), dst);
      } else {
        std::fill_n(dst, T * k, -1);
      }
    }
  }
  return absl::OkStatus();
}

DsaStatusCode OpenC(const DsaStackOpenArgs* args, DsaStack** out, char* error,
                    size_t error_size) {
  return Guard(error, error_size, [&] { return Open(args, out); });
}
DsaStatusCode InfoC(const DsaStack* stack, DsaStackInfo* out, char* error,
                    size_t error_size) {
  return Guard(error, error_size, [&] { return Info(stack, out); });
}
DsaStatusCode PrefillC(DsaStack* stack, const DsaStackPrefillArgs* args,
                       char* error, size_t error_size) {
  return Guard(error, error_size, [&] { return Prefill(stack, args); });
}
void CloseC(DsaStack* stack) { delete stack; }

constexpr DsaStackApi kApi = {sizeof(DsaStackApi),
                              DSA_STACK_API_MAJOR,
                              DSA_STACK_API_MINOR,
                              &OpenC,
                              &InfoC,
                              &PrefillC,
                              &CloseC};

}  // namespace
}  // namespace dsa::model::deepseek_v32

extern "C" DSA_PLUGIN_EXPORT const DsaStackApi* DsaGetStackApi(void) {
  return &dsa::model::deepseek_v32::kApi;
}
