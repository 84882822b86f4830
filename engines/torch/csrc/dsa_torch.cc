// PyTorch as a host engine: the attention ops of attention/ops.h as
// `torch.ops.dsa.*`, calling kernels that plugin shared objects register
// through the C boundary (platform/plugin_api.h, attention/kernel_api.h).
//
// This library is built outside Bazel, against whatever PyTorch the user has
// (engines/torch/build.sh), so it uses only the C++ standard library, libdl,
// PyTorch's own headers and the project's Abseil-free sources compiled into
// it: the plugin loader (platform/plugin_adapter.cc, plugin_file.cc), the op
// argument checks (attention/ops.cc, tensor.cc) and the C <-> C++ argument
// conversions (attention/kernel_abi.cc). No Abseil, no protobuf.
//
// Plugins register into this library's own table (a PluginSink), not into the
// project's registry: a PyTorch process holds exactly one table, so every
// plugin loaded through `torch.ops.dsa.load_plugin` is seen by every op.
//
// Each op is functional: the Args fields of ops.h in order, minus the outputs,
// plus what sizes the outputs (topk, width, an fp8 encoding); it returns fresh
// tensors, and the in-place cache writes mutate their cache argument (`(a!)`
// in the schema). A call runs on the device of its first tensor argument,
// with the kernel registered for the platform that device type maps to
// ("cpu" -> "cpu", "cuda" -> "cuda", or "rocm" on a ROCm build of PyTorch:
// set_device_platform), on PyTorch's current stream of that device. On meta
// tensors an op only returns outputs of the right shape and dtype, so that
// torch.compile and FakeTensor tracing can pass through it.
//
// fp8 tensors: PyTorch before 2.1 has no float8 dtypes, so fp8 data crosses
// as torch.uint8 holding the raw bytes, with the encoding named by a string
// argument ("float8_e4m3fn" or "float8_e4m3fnuz"); where PyTorch has float8
// dtypes, those tensors are accepted too (their dtype must match the named
// encoding). fp8 outputs are uint8 in every PyTorch version.
//
// Errors: a bad argument raises ValueError naming the op and the argument
// (device, dtype, rank, shape, strides, range of a scalar, unknown names,
// an output too large for its device or for 64 bits, checked before it is
// allocated: CheckOutputSize);
// an element value a kernel rejects (a slot or block id out of range) raises
// IndexError; anything else a kernel reports raises RuntimeError.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Optional.h>
#include <torch/library.h>
#include <torch/version.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention/dtypes/dtype.h"
#include "attention/kernel_abi.h"
#include "attention/kernel_api.h"
#include "attention/ops.h"
#include "attention/tensor.h"
#include "platform/core_status.h"
#include "platform/plugin_adapter.h"
#include "platform/plugin_api.h"
#include "platform/plugin_file.h"

#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define DSA_TORCH_HAS_FLOAT8_E4M3FN 1
#endif
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
#define DSA_TORCH_HAS_FLOAT8_E4M3FNUZ 1
#endif
// c10::Stream::native_handle(), the cudaStream_t / hipStream_t of a stream
// without CUDA headers.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define DSA_TORCH_HAS_STREAM_NATIVE_HANDLE 1
#endif

namespace dsa::torch_binding {
namespace {

using ::dsa::attention::DType;
using ::dsa::attention::TensorView;
using ::dsa::platform::PluginFileIdentity;
using ::dsa::platform::PluginRegistrations;

// ---------------------------------------------------------------------------
// Errors.

// A user's string as a message shows it: at most 80 characters, then "...
// (N bytes)"; NUL and other control bytes escaped, since Python reads an
// exception's message as a C string and a NUL would cut it short.
std::string Echo(const std::string& value) {
  return platform::EchoForMessage(value);
}

// The most of an error message raised: a safety net behind Echo.
constexpr size_t kMaxMessageChars = 1000;

std::string MessageText(const std::string& message) {
  return platform::EchoForMessage(message, kMaxMessageChars);
}

[[noreturn]] void RaiseValue(const std::string& message) {
  C10_THROW_ERROR(ValueError, MessageText(message));
}

// Raises the Python exception that fits a dsa::Status.
void RaiseIfError(const Status& status) {
  if (status.ok()) return;
  const std::string message = MessageText(status.message());
  switch (status.code()) {
    case DSA_STATUS_INVALID_ARGUMENT:
      TORCH_CHECK_VALUE(false, message);
      break;
    case DSA_STATUS_OUT_OF_RANGE:
      TORCH_CHECK_INDEX(false, message);
      break;
    case DSA_STATUS_RESOURCE_EXHAUSTED:
      // Out of memory in a kernel: the exception PyTorch's own allocators
      // raise (torch.cuda.OutOfMemoryError), which engines catch.
      C10_THROW_ERROR(OutOfMemoryError, status.message());
      break;
    default:
      TORCH_CHECK(false, message);
  }
}

// ---------------------------------------------------------------------------
// The plugin table of this process.

class Host final : public platform::PluginSink {
 public:
  static Host& Get() {
    static Host* host = new Host();  // never destroyed: plugins stay loaded
    return *host;
  }

  bool HasPlugin(const std::string& plugin_name) const override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const PluginRegistrations& p : plugins_) {
      if (p.plugin_name == plugin_name) return true;
    }
    return false;
  }

  bool HasPluginFile(const PluginFileIdentity& file) const override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const PluginRegistrations& p : plugins_) {
      if (p.file.has_value() && *p.file == file) return true;
    }
    return false;
  }

  // All or nothing: a platform id or an (op, platform) kernel that is already
  // there is AlreadyExists; a kernel for a platform that neither this plugin
  // nor an earlier one provides is FailedPrecondition (load the platform
  // plugin first), so every kernel found later has its platform.
  Status Commit(const PluginRegistrations& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const PluginRegistrations& p : plugins_) {
      if (p.plugin_name == r.plugin_name) {
        return Status(
            DSA_STATUS_ALREADY_EXISTS,
            StrCat("a plugin named '", r.plugin_name, "' is already loaded"));
      }
      if (p.file.has_value() && r.file.has_value() && *p.file == *r.file) {
        return Status(DSA_STATUS_ALREADY_EXISTS,
                      StrCat("its file is already loaded as plugin '",
                             p.plugin_name, "'"));
      }
    }
    std::vector<std::string> new_platforms;
    for (const DsaPlatformDescriptor& d : r.platforms) {
      const std::string id = d.platform_id;
      if (platforms_.count(id) != 0 || Contains(new_platforms, id)) {
        return Status(DSA_STATUS_ALREADY_EXISTS,
                      StrCat("platform '", id, "' is already registered"));
      }
      new_platforms.push_back(id);
    }
    std::vector<KernelKey> new_kernels;
    for (const DsaKernelDescriptor& k : r.kernels) {
      const KernelKey key{k.op_name, k.platform_id};
      if (kernels_.count(key) != 0 || Contains(new_kernels, key)) {
        return Status(DSA_STATUS_ALREADY_EXISTS,
                      StrCat("a kernel for op '", key.first, "' on platform '",
                             key.second, "' is already registered"));
      }
      if (platforms_.count(key.second) == 0 &&
          !Contains(new_platforms, key.second)) {
        return FailedPreconditionError(
            StrCat("registers op '", key.first, "' for platform '", key.second,
                   "', which no loaded plugin provides; load that platform's "
                   "plugin first"));
      }
      new_kernels.push_back(key);
    }
    plugins_.push_back(r);
    for (const DsaPlatformDescriptor& d : r.platforms) {
      platforms_.emplace(d.platform_id,
                         Registered<DsaPlatformDescriptor>{d, r.plugin_name});
    }
    for (const DsaKernelDescriptor& k : r.kernels) {
      kernels_.emplace(KernelKey{k.op_name, k.platform_id},
                       Registered<DsaKernelDescriptor>{k, r.plugin_name});
    }
    return OkStatus();
  }

  // The entry point of `op` (of ABI `abi_version`) for `platform_id`.
  const void* FindKernel(const char* op, uint32_t abi_version,
                         const std::string& platform_id,
                         const std::string& device) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kernels_.find(KernelKey{op, platform_id});
    if (it == kernels_.end()) {
      std::string loaded;
      for (const auto& [key, entry] : kernels_) {
        if (key.first != op) continue;
        loaded += StrCat(loaded.empty() ? "" : ", ", key.second);
      }
      TORCH_CHECK(false, op, ": no kernel is loaded for platform '",
                  Echo(platform_id), "' (the tensors are on ", device,
                  "); loaded for ",
                  loaded.empty() ? std::string("no platform") : loaded,
                  ". Load a plugin with dsa_torch.load(plugins=[...]) or "
                  "torch.ops.dsa.load_plugin(path)");
    }
    const DsaKernelDescriptor& k = it->second.descriptor;
    TORCH_CHECK(k.op_abi_version == abi_version, op, ": plugin '",
                it->second.plugin, "' registers ABI version ", k.op_abi_version,
                " of the op for platform '", platform_id,
                "'; this binding was built for version ", abi_version);
    return k.fn;
  }

  bool FindPlatform(const std::string& platform_id,
                    DsaPlatformDescriptor* out) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = platforms_.find(platform_id);
    if (it == platforms_.end()) return false;
    *out = it->second.descriptor;
    return true;
  }

  std::vector<std::string> Describe() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> lines;
    for (const auto& [id, entry] : platforms_) {
      lines.push_back(StrCat("platform ", id, " (plugin ", entry.plugin, ")"));
    }
    for (const auto& [key, entry] : kernels_) {
      lines.push_back(StrCat("kernel ", key.first, " v",
                             entry.descriptor.op_abi_version, " on ",
                             key.second, " (plugin ", entry.plugin, ")"));
    }
    return lines;
  }

  // The platform id the kernels for a device type come from.
  std::string PlatformFor(c10::DeviceType type) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = device_platforms_.find(type);
    return it == device_platforms_.end() ? std::string() : it->second;
  }
  void SetPlatformFor(c10::DeviceType type, std::string platform_id) {
    std::lock_guard<std::mutex> lock(mu_);
    device_platforms_[type] = std::move(platform_id);
  }

  // The memory of the device an output would live on, found once per
  // device type: the host's physical memory for CPU tensors, else the device
  // memory the platform plugin mapped to the device type reports (of its
  // device 0; a node's GPUs are alike). 0 when unknown: no plugin is mapped
  // or loaded yet, or it reports none.
  uint64_t DeviceMemoryBytes(const c10::Device& device) {
    const std::string platform_id = PlatformFor(device.type());
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = memory_bytes_.find(device.type());
      if (it != memory_bytes_.end() && it->second.first == platform_id) {
        return it->second.second;
      }
    }
    uint64_t bytes = 0;
    if (device.is_cpu()) {
      const long pages = ::sysconf(_SC_PHYS_PAGES);
      const long page_size = ::sysconf(_SC_PAGESIZE);
      if (pages > 0 && page_size > 0) {
        bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
      }
    } else {
      DsaPlatformDescriptor platform;
      DsaDeviceInfo info;
      if (FindPlatform(platform_id, &platform) &&
          platform::QueryDevices(platform, &info).ok() &&
          info.device_count > 0) {
        bytes = info.total_memory_bytes;
      }
      // Not found yet: asked again at the next call, once it may be loaded.
      if (bytes == 0) return 0;
    }
    std::lock_guard<std::mutex> lock(mu_);
    memory_bytes_[device.type()] = {platform_id, bytes};
    return bytes;
  }

  bool poison_outputs() const { return poison_outputs_.load(); }
  void set_poison_outputs(bool on) { poison_outputs_.store(on); }

 private:
  using KernelKey = std::pair<std::string, std::string>;  // op, platform
  template <class T>
  struct Registered {
    T descriptor;
    std::string plugin;
  };

  Host() {
    device_platforms_[c10::DeviceType::CPU] = "cpu";
    device_platforms_[c10::DeviceType::CUDA] = "cuda";
  }

  template <class T>
  static bool Contains(const std::vector<T>& v, const T& x) {
    for (const T& y : v) {
      if (y == x) return true;
    }
    return false;
  }

  mutable std::mutex mu_;
  std::vector<PluginRegistrations> plugins_;
  std::map<std::string, Registered<DsaPlatformDescriptor>> platforms_;
  std::map<KernelKey, Registered<DsaKernelDescriptor>> kernels_;
  std::map<c10::DeviceType, std::string> device_platforms_;
  // Per device type: the platform it was found for, and its memory.
  std::map<c10::DeviceType, std::pair<std::string, uint64_t>> memory_bytes_;
  std::atomic<bool> poison_outputs_{false};
};

// ---------------------------------------------------------------------------
// Tensors to views.

std::string DeviceName(const c10::Device& device) { return device.str(); }

// What one call runs on: the device of its first tensor argument.
struct Call {
  const char* op;
  const char* first_arg;
  c10::Device device;
};

Call StartCall(const char* op, const char* first_arg, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.defined(), op, ": ", first_arg,
                    " is an undefined tensor");
  return Call{op, first_arg, t.device()};
}

// "torch.int64": how a Python user writes the dtype.
std::string TorchDTypeName(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return "torch.float32";
    case c10::ScalarType::Double:
      return "torch.float64";
    case c10::ScalarType::Half:
      return "torch.float16";
    case c10::ScalarType::BFloat16:
      return "torch.bfloat16";
    case c10::ScalarType::Byte:
      return "torch.uint8";
    case c10::ScalarType::Char:
      return "torch.int8";
    case c10::ScalarType::Short:
      return "torch.int16";
    case c10::ScalarType::Int:
      return "torch.int32";
    case c10::ScalarType::Long:
      return "torch.int64";
    case c10::ScalarType::Bool:
      return "torch.bool";
    default:
      return StrCat("torch.", c10::toString(t));
  }
}

bool IsTorchFp8(c10::ScalarType t) {
#ifdef DSA_TORCH_HAS_FLOAT8_E4M3FN
  if (t == c10::ScalarType::Float8_e4m3fn) return true;
#endif
#ifdef DSA_TORCH_HAS_FLOAT8_E4M3FNUZ
  if (t == c10::ScalarType::Float8_e4m3fnuz) return true;
#endif
  (void)t;
  return false;
}

// The project's dtype of a PyTorch dtype; false for one no op takes.
bool FromTorchDType(c10::ScalarType t, DType* out) {
  switch (t) {
    case c10::ScalarType::Float:
      *out = DType::kFloat32;
      return true;
    case c10::ScalarType::BFloat16:
      *out = DType::kBFloat16;
      return true;
    case c10::ScalarType::Byte:
      *out = DType::kUint8;
      return true;
    case c10::ScalarType::Int:
      *out = DType::kInt32;
      return true;
    case c10::ScalarType::Long:
      *out = DType::kInt64;
      return true;
    default:
      break;
  }
#ifdef DSA_TORCH_HAS_FLOAT8_E4M3FN
  if (t == c10::ScalarType::Float8_e4m3fn) {
    *out = DType::kFloat8E4m3fn;
    return true;
  }
#endif
#ifdef DSA_TORCH_HAS_FLOAT8_E4M3FNUZ
  if (t == c10::ScalarType::Float8_e4m3fnuz) {
    *out = DType::kFloat8E4m3fnuz;
    return true;
  }
#endif
  return false;
}

// Checks that `t` is defined, on the call's device, of rank `rank` and of one
// of `dtypes`, and returns its view (shape and strides as PyTorch has them;
// the op's own checks then say which strides it accepts).
TensorView View(const Call& call, const char* arg, const at::Tensor& t,
                int rank, std::initializer_list<DType> dtypes) {
  TORCH_CHECK_VALUE(t.defined(), call.op, ": ", arg, " is an undefined tensor");
  TORCH_CHECK_VALUE(t.device() == call.device, call.op, ": ", arg, " is on ",
                    DeviceName(t.device()), ", expected ",
                    DeviceName(call.device), " (the device of ", call.first_arg,
                    ")");
  DType dtype = DType::kFloat32;
  bool known = FromTorchDType(t.scalar_type(), &dtype);
  bool allowed = false;
  std::string expected;
  for (DType d : dtypes) {
    if (known && d == dtype) allowed = true;
    expected += StrCat(expected.empty() ? "" : " or ", attention::DTypeName(d));
  }
  TORCH_CHECK_VALUE(allowed, call.op, ": ", arg, " is ",
                    TorchDTypeName(t.scalar_type()), ", expected ", expected);
  TORCH_CHECK_VALUE(t.dim() == rank, call.op, ": ", arg, " has ", t.dim(),
                    " dims, expected ", rank);
  TensorView v;
  // Meta tensors (shape inference, torch.compile tracing) have no data.
  v.data = t.numel() == 0 || t.is_meta() ? nullptr : t.data_ptr();
  v.dtype = dtype;
  v.rank = rank;
  for (int i = 0; i < rank; ++i) {
    v.shape[i] = t.size(i);
    v.strides[i] = t.stride(i);
  }
  return v;
}

// An optional int32 index vector in host memory (a CPU tensor whatever the
// call's device: an engine's host copy of a device tensor, as vLLM's
// seq_lens_cpu); the absent view when not given.
TensorView HostIndexView(const Call& call, const char* arg,
                         const c10::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return TensorView();
  TORCH_CHECK_VALUE(t->device().is_cpu(), call.op, ": ", arg, " is on ",
                    DeviceName(t->device()),
                    ", expected cpu (it is the host copy)");
  TORCH_CHECK_VALUE(t->scalar_type() == at::kInt, call.op, ": ", arg, " is ",
                    TorchDTypeName(t->scalar_type()), ", expected int32");
  TORCH_CHECK_VALUE(t->dim() == 1, call.op, ": ", arg, " has ", t->dim(),
                    " dims, expected 1");
  TensorView v;
  v.data = t->numel() == 0 ? nullptr : t->data_ptr();
  v.dtype = DType::kInt32;
  v.rank = 1;
  v.shape[0] = t->size(0);
  v.strides[0] = t->stride(0);
  return v;
}

// An fp8 encoding named by a string argument.
DType Fp8Encoding(const char* op, const char* arg, const std::string& name) {
  if (name == "float8_e4m3fn") return DType::kFloat8E4m3fn;
  if (name == "float8_e4m3fnuz") return DType::kFloat8E4m3fnuz;
  RaiseValue(StrCat(op, ": ", arg, " is \"", Echo(name),
                    "\", expected \"float8_e4m3fn\" or \"float8_e4m3fnuz\""));
}

// A latent cache dtype: bfloat16 or an fp8 encoding.
DType LatentCacheDType(const char* op, const std::string& name) {
  if (name == "bfloat16") return DType::kBFloat16;
  if (name == "float8_e4m3fn") return DType::kFloat8E4m3fn;
  if (name == "float8_e4m3fnuz") return DType::kFloat8E4m3fnuz;
  RaiseValue(StrCat(op, ": cache_dtype is \"", Echo(name),
                    "\", expected \"bfloat16\", \"float8_e4m3fn\" or "
                    "\"float8_e4m3fnuz\""));
}

attention::RopeStyle RopeStyleOf(const char* op, const std::string& name) {
  if (name == "neox") return attention::RopeStyle::kNeox;
  if (name == "interleaved") return attention::RopeStyle::kInterleaved;
  RaiseValue(StrCat(op, ": rope_style is \"", Echo(name),
                    "\", expected \"neox\" or \"interleaved\""));
}

// The view of an fp8 tensor: uint8 bytes in `encoding`, or (where PyTorch has
// them) a float8 tensor whose dtype is `encoding`.
TensorView Fp8View(const Call& call, const char* arg, const at::Tensor& t,
                   int rank, DType encoding, const char* encoding_arg) {
  TORCH_CHECK_VALUE(t.defined(), call.op, ": ", arg, " is an undefined tensor");
  if (IsTorchFp8(t.scalar_type())) {
    TensorView v = View(call, arg, t, rank,
                        {DType::kFloat8E4m3fn, DType::kFloat8E4m3fnuz});
    TORCH_CHECK_VALUE(v.dtype == encoding, call.op, ": ", arg, " is ",
                      TorchDTypeName(t.scalar_type()), " but ", encoding_arg,
                      " is \"", attention::DTypeName(encoding), "\"");
    return v;
  }
  TensorView v = View(call, arg, t, rank, {DType::kUint8});
  v.dtype = encoding;
  return v;
}

int32_t Int32Arg(const char* op, const char* arg, int64_t value,
                 int64_t min_value) {
  TORCH_CHECK_VALUE(
      value >= min_value && value <= std::numeric_limits<int32_t>::max(), op,
      ": ", arg, " is ", value, ", expected ", min_value, " to ",
      std::numeric_limits<int32_t>::max());
  return static_cast<int32_t>(value);
}

// A size of an output: at least 1 and at most the views' dimension bound.
int64_t SizeArg(const char* op, const char* arg, int64_t value) {
  TORCH_CHECK_VALUE(value >= 1 && value <= attention::kMaxTensorDim, op, ": ",
                    arg, " is ", value, ", expected 1 to ",
                    attention::kMaxTensorDim);
  return value;
}

float FloatArg(const char* op, const char* arg, double value) {
  // The ops' own checks reject non-finite and non-positive values; this only
  // keeps a double that does not fit a float from turning into inf silently.
  TORCH_CHECK_VALUE(!(std::abs(value) > std::numeric_limits<float>::max()), op,
                    ": ", arg, " is ", value, ", out of float range");
  return static_cast<float>(value);
}

// "[4, 2048] int32"
std::string DescribeShape(at::IntArrayRef shape, c10::ScalarType dtype) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += StrCat(i == 0 ? "" : ", ", shape[i]);
  }
  return StrCat(text, "] ", TorchDTypeName(dtype).substr(6));
}

std::string GiB(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

// A new output's shape and byte count, checked before anything is
// allocated: every dim within the views' bound (attention::kMaxTensorDim),
// the byte count in checked 64-bit arithmetic, and no more than the memory
// of the device it would live on (meta tensors have none). `sized_by` says
// where the shape comes from ("logits' rows and topk (2048)"), so that a
// huge or overflowing size argument raises ValueError naming it instead of
// an allocator's message.
void CheckOutputSize(const Call& call, const char* output,
                     at::IntArrayRef shape, c10::ScalarType dtype,
                     const std::string& sized_by) {
  const std::string what =
      StrCat(call.op, ": output ", output, " ", DescribeShape(shape, dtype),
             ", sized by ", sized_by, ",");
  uint64_t bytes = c10::elementSize(dtype);
  for (size_t i = 0; i < shape.size(); ++i) {
    TORCH_CHECK_VALUE(shape[i] >= 0 && shape[i] <= attention::kMaxTensorDim,
                      what, " has dim ", i, " of ", shape[i],
                      ", expected 0 to ", attention::kMaxTensorDim);
  }
  bool overflow = false;
  for (int64_t d : shape) {
    overflow = overflow ||
               __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  }
  TORCH_CHECK_VALUE(
      !overflow &&
          bytes <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
      what, " would take more than 2^63 bytes");
  if (call.device.is_meta()) return;
  const uint64_t memory = Host::Get().DeviceMemoryBytes(call.device);
  TORCH_CHECK_VALUE(memory == 0 || bytes <= memory, what, " would take ", bytes,
                    " bytes (", GiB(bytes), "), more than the ", GiB(memory),
                    " of memory of ", DeviceName(call.device));
}

// A fresh output on the call's device, after CheckOutputSize. An allocation
// that fails anyway (the memory is in use) raises the allocator's error
// with the op and the output in front. With poisoning on (tests), filled
// with a value no kernel writes, so an element a kernel forgets shows.
at::Tensor NewOutput(const Call& call, const char* output,
                     at::IntArrayRef shape, c10::ScalarType dtype,
                     const std::string& sized_by) {
  CheckOutputSize(call, output, shape, dtype, sized_by);
  at::Tensor out;
  try {
    out =
        at::empty(shape, at::TensorOptions().dtype(dtype).device(call.device));
  } catch (const c10::OutOfMemoryError& e) {
    C10_THROW_ERROR(
        OutOfMemoryError,
        StrCat(call.op, ": cannot allocate output ", output, " ",
               DescribeShape(shape, dtype), ": ", e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, call.op, ": cannot allocate output ", output, " ",
                DescribeShape(shape, dtype), ": ", e.what_without_backtrace());
  }
  if (Host::Get().poison_outputs()) {
    switch (dtype) {
      case c10::ScalarType::Float:
      case c10::ScalarType::BFloat16:
        out.fill_(std::numeric_limits<float>::quiet_NaN());
        break;
      case c10::ScalarType::Byte:
        out.fill_(0x7f);  // NaN in float8_e4m3fn, 240 * 2^... in fnuz: never
                          // a quantised value in either
        break;
      default:
        out.fill_(0x5a5a5a5a);
    }
  }
  return out;
}

// The stream of the call's device and the threads of a CPU call.
DsaExecutionContext ExecutionContextFor(const Call& call) {
  attention::ExecutionContext ctx;
  if (call.device.is_cpu()) {
    ctx.num_threads = at::get_num_threads();
  } else {
#ifdef DSA_TORCH_HAS_STREAM_NATIVE_HANDLE
    const c10::impl::DeviceGuardImplInterface* impl =
        c10::impl::getDeviceGuardImpl(call.device.type());
    ctx.stream = impl->getStream(call.device).native_handle();
#else
    TORCH_CHECK(false, call.op, ": tensors on ", DeviceName(call.device),
                " need PyTorch 2.5 or newer, whose streams expose their "
                "native handle");
#endif
  }
  return attention::ExecutionContextToC(ctx);
}

// Checks the arguments (ops.h's Validate: shapes, strides, aliasing), finds
// the kernel for the call's device and runs it.
template <class Op>
void Run(const Call& call, const typename Op::Args& args) {
  // On meta tensors the op only gives its outputs' shapes and dtypes.
  if (call.device.is_meta()) return;
  RaiseIfError(Op::Validate(args));
  Host& host = Host::Get();
  const std::string platform_id = host.PlatformFor(call.device.type());
  TORCH_CHECK(!platform_id.empty(), call.op,
              ": no platform is mapped to "
              "device type ",
              c10::DeviceTypeName(call.device.type(), true), " (tensors on ",
              DeviceName(call.device),
              "); see torch.ops.dsa.set_device_platform");
  const auto fn =
      reinterpret_cast<typename Op::CFn>(const_cast<void*>(host.FindKernel(
          Op::kName, Op::kAbiVersion, platform_id, DeviceName(call.device))));
  c10::OptionalDeviceGuard guard(call.device);
  const DsaExecutionContext exec = ExecutionContextFor(call);
  const typename Op::CArgs c_args = attention::ToCArgs(args);
  char error[1024] = {0};
  const DsaStatusCode code = fn(&exec, &c_args, error, sizeof(error));
  if (code == DSA_STATUS_OK) return;
  // The kernel's message already names the op.
  const size_t n = strnlen(error, sizeof(error) - 1);
  const std::string message =
      n > 0 ? std::string(error, n) : StrCat(call.op, ": no message");
  const int raw = static_cast<int>(code);
  if (raw < 1 || raw > 16) {
    RaiseIfError(
        InternalError(StrCat(call.op, " on ", platform_id,
                             ": unknown status code ", raw, ": ", message)));
  }
  RaiseIfError(Status(code, message));
}

// ---------------------------------------------------------------------------
// The ops.

constexpr std::initializer_list<DType> kFloat = {DType::kFloat32,
                                                 DType::kBFloat16};

c10::ScalarType TorchFloatDType(DType d) {
  return d == DType::kBFloat16 ? c10::ScalarType::BFloat16
                               : c10::ScalarType::Float;
}

at::Tensor IndexerKWrite(
    const at::Tensor& k, const at::Tensor& ln_weight, const at::Tensor& ln_bias,
    double ln_eps, const at::Tensor& positions, const at::Tensor& cos_sin_cache,
    const std::string& rope_style, const at::Tensor& slot_mapping,
    const at::Tensor& k_cache, const std::string& cache_dtype, int64_t topk) {
  using Op = attention::IndexerKWrite;
  const Call call = StartCall(Op::kName, "k", k);
  Op::Args a;
  a.k = View(call, "k", k, 2, kFloat);
  a.ln_weight = View(call, "ln_weight", ln_weight, 1, kFloat);
  a.ln_bias = View(call, "ln_bias", ln_bias, 1, kFloat);
  a.ln_eps = FloatArg(call.op, "ln_eps", ln_eps);
  a.positions = View(call, "positions", positions, 1, {DType::kInt64});
  a.cos_sin_cache =
      View(call, "cos_sin_cache", cos_sin_cache, 2, {DType::kFloat32});
  a.rope_style = RopeStyleOf(call.op, rope_style);
  a.slot_mapping = View(call, "slot_mapping", slot_mapping, 1, {DType::kInt64});
  a.k_cache = View(call, "k_cache", k_cache, 3, {DType::kUint8});
  a.cache_dtype = Fp8Encoding(call.op, "cache_dtype", cache_dtype);
  at::Tensor topk_indices = NewOutput(
      call, "topk_indices", {k.size(0), SizeArg(call.op, "topk", topk)},
      c10::ScalarType::Int, StrCat("k's tokens and topk (", topk, ")"));
  a.topk_indices = View(call, "topk_indices", topk_indices, 2, {DType::kInt32});
  Run<Op>(call, a);
  return topk_indices;
}

std::tuple<at::Tensor, at::Tensor> IndexerQ(const at::Tensor& q,
                                            const at::Tensor& weights,
                                            const at::Tensor& positions,
                                            const at::Tensor& cos_sin_cache,
                                            const std::string& rope_style,
                                            const std::string& fp8_dtype) {
  using Op = attention::IndexerQ;
  const Call call = StartCall(Op::kName, "q", q);
  Op::Args a;
  a.q = View(call, "q", q, 3, kFloat);
  a.weights = View(call, "weights", weights, 2, kFloat);
  a.positions = View(call, "positions", positions, 1, {DType::kInt64});
  a.cos_sin_cache =
      View(call, "cos_sin_cache", cos_sin_cache, 2, {DType::kFloat32});
  a.rope_style = RopeStyleOf(call.op, rope_style);
  const DType encoding = Fp8Encoding(call.op, "fp8_dtype", fp8_dtype);
  at::Tensor q_fp8 =
      NewOutput(call, "q_fp8", q.sizes(), c10::ScalarType::Byte, "q's shape");
  at::Tensor head_weights =
      NewOutput(call, "head_weights", {q.size(0), q.size(1)},
                c10::ScalarType::Float, "q's tokens and heads");
  a.q_fp8 = Fp8View(call, "q_fp8", q_fp8, 3, encoding, "fp8_dtype");
  a.head_weights =
      View(call, "head_weights", head_weights, 2, {DType::kFloat32});
  Run<Op>(call, a);
  return {q_fp8, head_weights};
}

at::Tensor IndexerLogits(
    const at::Tensor& q_fp8, const at::Tensor& head_weights,
    const at::Tensor& k_cache, const at::Tensor& block_table,
    const at::Tensor& seq_lens, const at::Tensor& row_request,
    const at::Tensor& row_key_start, const at::Tensor& row_key_end,
    int64_t width, const std::string& fp8_dtype) {
  using Op = attention::IndexerLogits;
  const Call call = StartCall(Op::kName, "q_fp8", q_fp8);
  Op::Args a;
  const DType encoding = Fp8Encoding(call.op, "fp8_dtype", fp8_dtype);
  a.q_fp8 = Fp8View(call, "q_fp8", q_fp8, 3, encoding, "fp8_dtype");
  a.head_weights =
      View(call, "head_weights", head_weights, 2, {DType::kFloat32});
  a.k_cache = View(call, "k_cache", k_cache, 3, {DType::kUint8});
  a.block_table = View(call, "block_table", block_table, 2, {DType::kInt32});
  a.seq_lens = View(call, "seq_lens", seq_lens, 1, {DType::kInt32});
  a.row_request = View(call, "row_request", row_request, 1, {DType::kInt32});
  a.row_key_start =
      View(call, "row_key_start", row_key_start, 1, {DType::kInt32});
  a.row_key_end = View(call, "row_key_end", row_key_end, 1, {DType::kInt32});
  at::Tensor logits = NewOutput(
      call, "logits", {q_fp8.size(0), SizeArg(call.op, "width", width)},
      c10::ScalarType::Float, StrCat("q_fp8's rows and width (", width, ")"));
  a.logits = View(call, "logits", logits, 2, {DType::kFloat32});
  Run<Op>(call, a);
  return logits;
}

at::Tensor IndexerTopK(const at::Tensor& logits,
                       const at::Tensor& row_key_start,
                       const at::Tensor& row_key_end, int64_t topk) {
  using Op = attention::IndexerTopK;
  const Call call = StartCall(Op::kName, "logits", logits);
  Op::Args a;
  a.logits = View(call, "logits", logits, 2, {DType::kFloat32});
  a.row_key_start =
      View(call, "row_key_start", row_key_start, 1, {DType::kInt32});
  a.row_key_end = View(call, "row_key_end", row_key_end, 1, {DType::kInt32});
  at::Tensor topk_indices = NewOutput(
      call, "topk_indices", {logits.size(0), SizeArg(call.op, "topk", topk)},
      c10::ScalarType::Int, StrCat("logits' rows and topk (", topk, ")"));
  a.topk_indices = View(call, "topk_indices", topk_indices, 2, {DType::kInt32});
  Run<Op>(call, a);
  return topk_indices;
}

attention::LatentCacheFormat LatentFormat(const char* op,
                                          const std::string& cache_dtype,
                                          int64_t kv_lora_rank,
                                          int64_t rope_dim) {
  attention::LatentCacheFormat f;
  f.dtype = LatentCacheDType(op, cache_dtype);
  f.kv_lora_rank = Int32Arg(op, "kv_lora_rank", kv_lora_rank, 1);
  f.rope_dim = Int32Arg(op, "rope_dim", rope_dim, 1);
  return f;
}

// The latent cache's view: bfloat16 or uint8 bytes, as its format says (the
// op's checks then name a mismatch).
TensorView LatentCacheView(const Call& call, const at::Tensor& kv_cache) {
  return View(call, "kv_cache", kv_cache, 3, {DType::kBFloat16, DType::kUint8});
}

void MlaCacheWrite(const at::Tensor& kv_c, const at::Tensor& k_pe,
                   const at::Tensor& slot_mapping, const at::Tensor& kv_cache,
                   const std::string& cache_dtype, int64_t kv_lora_rank,
                   int64_t rope_dim) {
  using Op = attention::MlaCacheWrite;
  const Call call = StartCall(Op::kName, "kv_c", kv_c);
  Op::Args a;
  a.kv_c = View(call, "kv_c", kv_c, 2, kFloat);
  a.k_pe = View(call, "k_pe", k_pe, 2, kFloat);
  a.slot_mapping = View(call, "slot_mapping", slot_mapping, 1, {DType::kInt64});
  a.kv_cache = LatentCacheView(call, kv_cache);
  a.cache_format = LatentFormat(call.op, cache_dtype, kv_lora_rank, rope_dim);
  Run<Op>(call, a);
}

// v_head_dim from kv_b_proj [heads * (qk_nope + v), kv_lora_rank].
int64_t VHeadDim(const Call& call, const at::Tensor& kv_b_proj, int64_t heads,
                 int64_t qk_nope) {
  TORCH_CHECK_VALUE(kv_b_proj.defined() && kv_b_proj.dim() == 2, call.op,
                    ": kv_b_proj must be a 2-dim tensor [heads * "
                    "(qk_nope_head_dim + v_head_dim), kv_lora_rank]");
  TORCH_CHECK_VALUE(heads >= 1, call.op,
                    ": q has 0 heads, expected at "
                    "least 1");
  const int64_t rows = kv_b_proj.size(0);
  TORCH_CHECK_VALUE(rows % heads == 0 && rows / heads > qk_nope, call.op,
                    ": kv_b_proj has ", rows, " rows, expected heads (", heads,
                    ") * (qk_nope_head_dim (", qk_nope,
                    ") + v_head_dim) with v_head_dim >= 1");
  return rows / heads - qk_nope;
}

at::Tensor SparseMla(const at::Tensor& q, const at::Tensor& kv_cache,
                     const std::string& cache_dtype, int64_t kv_lora_rank,
                     int64_t rope_dim, const at::Tensor& block_table,
                     const at::Tensor& seq_lens,
                     const at::Tensor& token_request,
                     const at::Tensor& topk_indices,
                     const at::Tensor& kv_b_proj, int64_t qk_nope_head_dim,
                     double softmax_scale) {
  using Op = attention::SparseMla;
  const Call call = StartCall(Op::kName, "q", q);
  Op::Args a;
  a.q = View(call, "q", q, 3, kFloat);
  a.kv_cache = LatentCacheView(call, kv_cache);
  a.cache_format = LatentFormat(call.op, cache_dtype, kv_lora_rank, rope_dim);
  a.block_table = View(call, "block_table", block_table, 2, {DType::kInt32});
  a.seq_lens = View(call, "seq_lens", seq_lens, 1, {DType::kInt32});
  a.token_request =
      View(call, "token_request", token_request, 1, {DType::kInt32});
  a.topk_indices = View(call, "topk_indices", topk_indices, 2, {DType::kInt32});
  a.kv_b_proj = View(call, "kv_b_proj", kv_b_proj, 2, kFloat);
  a.qk_nope_head_dim =
      Int32Arg(call.op, "qk_nope_head_dim", qk_nope_head_dim, 0);
  a.softmax_scale = FloatArg(call.op, "softmax_scale", softmax_scale);
  const int64_t v_head_dim =
      VHeadDim(call, kv_b_proj, q.size(1), qk_nope_head_dim);
  at::Tensor output =
      NewOutput(call, "output", {q.size(0), q.size(1), v_head_dim},
                TorchFloatDType(a.q.dtype),
                StrCat("q's tokens and heads and v_head_dim (", v_head_dim,
                       ", from kv_b_proj's rows and qk_nope_head_dim)"));
  a.output = View(call, "output", output, 3, kFloat);
  Run<Op>(call, a);
  return output;
}

at::Tensor DenseMhaPrefill(
    const at::Tensor& q, const at::Tensor& kv_cache,
    const std::string& cache_dtype, int64_t kv_lora_rank, int64_t rope_dim,
    const at::Tensor& block_table, const at::Tensor& seq_lens,
    const at::Tensor& query_start_loc, const at::Tensor& kv_b_proj,
    double softmax_scale, const c10::optional<at::Tensor>& seq_lens_host,
    const c10::optional<at::Tensor>& query_start_loc_host) {
  using Op = attention::DenseMhaPrefill;
  const Call call = StartCall(Op::kName, "q", q);
  Op::Args a;
  a.q = View(call, "q", q, 3, kFloat);
  a.kv_cache = LatentCacheView(call, kv_cache);
  a.cache_format = LatentFormat(call.op, cache_dtype, kv_lora_rank, rope_dim);
  a.block_table = View(call, "block_table", block_table, 2, {DType::kInt32});
  a.seq_lens = View(call, "seq_lens", seq_lens, 1, {DType::kInt32});
  a.query_start_loc =
      View(call, "query_start_loc", query_start_loc, 1, {DType::kInt32});
  a.kv_b_proj = View(call, "kv_b_proj", kv_b_proj, 2, kFloat);
  a.softmax_scale = FloatArg(call.op, "softmax_scale", softmax_scale);
  a.seq_lens_host = HostIndexView(call, "seq_lens_host", seq_lens_host);
  a.query_start_loc_host =
      HostIndexView(call, "query_start_loc_host", query_start_loc_host);
  TORCH_CHECK_VALUE(q.size(2) > a.cache_format.rope_dim, call.op,
                    ": q head dim is ", q.size(2),
                    ", expected qk_nope_head_dim + rope_dim with rope_dim ",
                    a.cache_format.rope_dim);
  const int64_t qk_nope = q.size(2) - a.cache_format.rope_dim;
  const int64_t v_head_dim = VHeadDim(call, kv_b_proj, q.size(1), qk_nope);
  at::Tensor output =
      NewOutput(call, "output", {q.size(0), q.size(1), v_head_dim},
                TorchFloatDType(a.q.dtype),
                StrCat("q's tokens and heads and v_head_dim (", v_head_dim,
                       ", from kv_b_proj's rows and q's head dim)"));
  a.output = View(call, "output", output, 3, kFloat);
  Run<Op>(call, a);
  return output;
}

// ---------------------------------------------------------------------------
// Plugins and platforms.

// Loads a plugin shared object; returns the name it registered under.
// The same loader as the project's registry (platform/plugin_adapter.h): the
// file is opened once, checked on the sealed copy that is loaded, and a
// corrupt one raises ValueError naming its path instead of crashing the
// interpreter inside dlopen.
std::string LoadPlugin(const std::string& path) {
  std::string name;
  RaiseIfError(platform::LoadPluginFile(path, Host::Get(), &name));
  return name;
}

std::vector<std::string> Loaded() { return Host::Get().Describe(); }

void SetDevicePlatform(const std::string& device_type,
                       const std::string& platform_id) {
  c10::DeviceType type;
  try {
    type = c10::Device(device_type).type();
  } catch (const c10::Error&) {
    RaiseValue(StrCat("set_device_platform: device_type \"", Echo(device_type),
                      "\" is not a PyTorch device type"));
  }
  TORCH_CHECK_VALUE(c10::Device(device_type).index() == -1,
                    "set_device_platform: device_type \"", Echo(device_type),
                    "\" names one device; pass its type (\"cuda\")");
  TORCH_CHECK_VALUE(!platform_id.empty(),
                    "set_device_platform: platform_id is empty");
  Host::Get().SetPlatformFor(type, platform_id);
}

std::string DevicePlatform(const std::string& device_type) {
  c10::DeviceType type;
  try {
    type = c10::Device(device_type).type();
  } catch (const c10::Error&) {
    RaiseValue(StrCat("device_platform: device_type \"", Echo(device_type),
                      "\" is not a PyTorch device type"));
  }
  return Host::Get().PlatformFor(type);
}

// The static capabilities a loaded platform plugin reports for `arch` (its
// default architecture when empty): (arch, is_cuda_alike,
// dense_mha_prefill, decode_context_parallel, warp_size, kv_cache_fp8).
std::tuple<std::string, bool, bool, bool, int64_t, std::string>
PlatformCapabilities(const std::string& platform_id, const std::string& arch) {
  DsaPlatformDescriptor platform;
  TORCH_CHECK_VALUE(Host::Get().FindPlatform(platform_id, &platform),
                    "platform_capabilities: platform_id \"", Echo(platform_id),
                    "\" is not loaded; load its platform plugin first");
  const std::string chosen =
      arch.empty()
          ? std::string(platform.default_arch != nullptr ? platform.default_arch
                                                         : "")
          : arch;
  DsaCapabilities caps;
  const Status status = platform::QueryCapabilities(platform, chosen, &caps);
  if (!status.ok()) {
    RaiseIfError(Status(
        status.code() == DSA_STATUS_NOT_FOUND ? DSA_STATUS_INVALID_ARGUMENT
                                              : status.code(),
        StrCat("platform_capabilities: arch: ", status.message())));
  }
  const char* fp8 = caps.kv_cache_fp8_format == DSA_FP8_E4M3FNUZ
                        ? "float8_e4m3fnuz"
                        : "float8_e4m3fn";
  return {std::string(caps.arch, strnlen(caps.arch, sizeof(caps.arch))),
          caps.is_cuda_alike != 0,
          caps.sparse_mla_dense_mha_prefill != 0,
          caps.sparse_mla_decode_context_parallel != 0,
          static_cast<int64_t>(caps.warp_size),
          std::string(fp8)};
}

void SetPoisonOutputs(bool on) { Host::Get().set_poison_outputs(on); }

}  // namespace
}  // namespace dsa::torch_binding

TORCH_LIBRARY(dsa, m) {
  using namespace ::dsa::torch_binding;
  m.def(
      "indexer_k_write(Tensor k, Tensor ln_weight, Tensor ln_bias, "
      "float ln_eps, Tensor positions, Tensor cos_sin_cache, str rope_style, "
      "Tensor slot_mapping, Tensor(a!) k_cache, str cache_dtype, int topk) "
      "-> Tensor");
  m.def(
      "indexer_q(Tensor q, Tensor weights, Tensor positions, "
      "Tensor cos_sin_cache, str rope_style, "
      "str fp8_dtype=\"float8_e4m3fn\") -> (Tensor, Tensor)");
  m.def(
      "indexer_logits(Tensor q_fp8, Tensor head_weights, Tensor k_cache, "
      "Tensor block_table, Tensor seq_lens, Tensor row_request, "
      "Tensor row_key_start, Tensor row_key_end, int width, "
      "str fp8_dtype=\"float8_e4m3fn\") -> Tensor");
  m.def(
      "indexer_topk(Tensor logits, Tensor row_key_start, Tensor row_key_end, "
      "int topk) -> Tensor");
  m.def(
      "mla_cache_write(Tensor kv_c, Tensor k_pe, Tensor slot_mapping, "
      "Tensor(a!) kv_cache, str cache_dtype, int kv_lora_rank, int rope_dim) "
      "-> ()");
  m.def(
      "sparse_mla(Tensor q, Tensor kv_cache, str cache_dtype, "
      "int kv_lora_rank, int rope_dim, Tensor block_table, Tensor seq_lens, "
      "Tensor token_request, Tensor topk_indices, Tensor kv_b_proj, "
      "int qk_nope_head_dim, float softmax_scale) -> Tensor");
  m.def(
      "dense_mha_prefill(Tensor q, Tensor kv_cache, str cache_dtype, "
      "int kv_lora_rank, int rope_dim, Tensor block_table, Tensor seq_lens, "
      "Tensor query_start_loc, Tensor kv_b_proj, float softmax_scale, "
      "Tensor? seq_lens_host=None, Tensor? query_start_loc_host=None) "
      "-> Tensor");
  // Host functions: no tensors, one kernel for every dispatch key.
  m.def("load_plugin(str path) -> str", &LoadPlugin);
  m.def("loaded() -> str[]", &Loaded);
  m.def("set_device_platform(str device_type, str platform_id) -> ()",
        &SetDevicePlatform);
  m.def("device_platform(str device_type) -> str", &DevicePlatform);
  m.def(
      "platform_capabilities(str platform_id, str arch=\"\") -> "
      "(str, bool, bool, bool, int, str)",
      &PlatformCapabilities);
  m.def("set_poison_outputs(bool on) -> ()", &SetPoisonOutputs);
}

// The same functions for CPU and CUDA tensors (ROCm builds of PyTorch use the
// CUDA key too): the device type picks the plugin's platform at run time.
#define DSA_TORCH_IMPL_OPS(m)                \
  m.impl("indexer_k_write", &IndexerKWrite); \
  m.impl("indexer_q", &IndexerQ);            \
  m.impl("indexer_logits", &IndexerLogits);  \
  m.impl("indexer_topk", &IndexerTopK);      \
  m.impl("mla_cache_write", &MlaCacheWrite); \
  m.impl("sparse_mla", &SparseMla);          \
  m.impl("dense_mha_prefill", &DenseMhaPrefill)

TORCH_LIBRARY_IMPL(dsa, CPU, m) {
  using namespace ::dsa::torch_binding;
  DSA_TORCH_IMPL_OPS(m);
}

TORCH_LIBRARY_IMPL(dsa, CUDA, m) {
  using namespace ::dsa::torch_binding;
  DSA_TORCH_IMPL_OPS(m);
}

// Meta tensors: outputs of the right shape and dtype, no kernel (what
// torch.compile and FakeTensor tracing call).
TORCH_LIBRARY_IMPL(dsa, Meta, m) {
  using namespace ::dsa::torch_binding;
  DSA_TORCH_IMPL_OPS(m);
}

// PyTorch 1.13 has no autograd fallthrough for meta tensors of a custom op
// ("Could not run ... from the 'AutogradMeta' backend"); the ops have no
// derivative, so meta calls go straight to the Meta functions above.
TORCH_LIBRARY_IMPL(dsa, AutogradMeta, m) {
  for (const char* op :
       {"indexer_k_write", "indexer_q", "indexer_logits", "indexer_topk",
        "mla_cache_write", "sparse_mla", "dense_mha_prefill"}) {
    m.impl(op, torch::CppFunction::makeFallthrough());
  }
}
