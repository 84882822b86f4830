// Fuzz target: the plugin C ABI (platform/plugin_api.h) as the host reads it.
//
// Each input describes up to three fake plugins registered, one after the
// other, into a fresh platform::Registry through RegisterPlugin. A fake
// plugin's API table and every descriptor it registers are heap buffers of
// exactly the struct_size they claim (at least the size field itself), so
// ASan reports a host that reads past what the plugin wrote; struct sizes
// are those of older, current and newer plugins and arbitrary ones. Their
// contents are random: strings (exactly allocated, NULL, empty, too long,
// not identifiers), kinds, arch lists with NULL or empty entries, NULL
// callbacks, version numbers. initialize registers in any order, passes NULL
// descriptors or a NULL context, and fails with any status code and message.
// Descriptor buffers are freed as soon as the registering call returns, as a
// plugin's stack would be, so a host keeping the plugin's struct instead of
// its own copy reads freed memory.
//
// Whatever registered is then used as an engine would: platforms, their
// capabilities per arch, the device probe and runtime (callbacks answering
// with random records and status codes), a stream, kernel lookups and the
// active platform. Nothing may crash or read outside what the plugin handed
// over.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "platform/plugin_api.h"
#include "platform/registry.h"
#include "testing/fuzz/fuzz_input.h"

namespace dsa::platform {
namespace {

using fuzz::FuzzInput;

// The input being run: the plugin callbacks have no context argument of
// their own (libFuzzer runs one input at a time on one thread).
FuzzInput* g_in = nullptr;

// Everything the fake plugins handed over that must outlive registration
// (strings and arrays, which the C ABI says stay valid while the plugin is
// loaded), and the fake device memory.
struct PluginMemory {
  std::vector<std::unique_ptr<char[]>> strings;
  std::vector<std::unique_ptr<const char*[]>> arrays;
  std::set<void*> device_allocations;
  std::set<void*> streams;

  ~PluginMemory() {
    for (void* p : device_allocations) std::free(p);
    for (void* p : streams) std::free(p);
  }
};
PluginMemory* g_memory = nullptr;

const char* String(FuzzInput& in) {
  static const char* const kKnown[] = {
      "cpu",     "rocm",      "cuda",           "fake",       "fake_b",
      "x86_64",  "gfx942",    "gfx90a",         "sm_90",      "sm_100",
      "aarch64", "indexer_q", "indexer_logits", "sparse_mla", ""};
  std::string s;
  switch (in.Range(0, 7)) {
    case 0:
      return nullptr;
    case 1:
    case 2:
    case 3:
      s = kKnown[in.Range(0, sizeof(kKnown) / sizeof(kKnown[0]) - 1)];
      break;
    case 4:
      s = std::string(static_cast<size_t>(in.Pick<int>({64, 65, 200})), 'a');
      break;
    default:
      s = in.Bytes(40);
      break;
  }
  // Exactly the string and its NUL: an over-read of it is caught.
  auto buffer = std::make_unique<char[]>(s.size() + 1);
  std::memcpy(buffer.get(), s.c_str(), s.size() + 1);
  g_memory->strings.push_back(std::move(buffer));
  return g_memory->strings.back().get();
}

// A message of at most error_size bytes, NUL included.
void WriteError(FuzzInput& in, char* error, size_t error_size) {
  if (error == nullptr || error_size == 0 || in.OneIn(4)) return;
  const size_t n = std::min<size_t>(
      error_size - 1, static_cast<size_t>(in.Pick<int>({0, 5, 40, 700})));
  for (size_t i = 0; i < n; ++i) {
    const char c = static_cast<char>(in.Byte());
    error[i] = c == '\0' ? 'x' : c;
  }
  error[n] = '\0';
}

// A status the plugin returns. Unknown codes stay within the enum's range
// of values (0-31): in C++ a DsaStatusCode outside it is undefined, which is
// why a C ABI had better return a plain int32_t.
DsaStatusCode Code(FuzzInput& in) {
  if (!in.OneIn(4)) return DSA_STATUS_OK;
  return static_cast<DsaStatusCode>(
      in.Pick<int>({1, 3, 5, 8, 9, 12, 13, 14, 16, 17, 31}));
}

// --- Callbacks of the fake platforms.

DsaStatusCode FakeCapabilities(const char* arch, DsaCapabilities* out,
                               char* error, size_t error_size) {
  FuzzInput& in = *g_in;
  const DsaStatusCode code = Code(in);
  if (code != DSA_STATUS_OK) {
    WriteError(in, error, error_size);
    return code;
  }
  // Writes only the fields inside the host's record, as a plugin must.
  const size_t host_size = out->struct_size;
  auto fits = [host_size](size_t offset, size_t size) {
    return offset + size <= host_size;
  };
  if (fits(offsetof(DsaCapabilities, arch), DSA_ARCH_NAME_SIZE)) {
    if (in.Bool() && arch != nullptr) {
      std::strncpy(out->arch, arch, DSA_ARCH_NAME_SIZE - 1);
    } else {
      // Possibly without a NUL: the array is fixed-size.
      for (int i = 0; i < DSA_ARCH_NAME_SIZE; ++i) {
        out->arch[i] = static_cast<char>(in.Byte());
      }
    }
  }
  if (fits(offsetof(DsaCapabilities, is_cuda_alike), 4)) {
    out->is_cuda_alike = in.Pick<int32_t>({0, 1, 7});
  }
  if (fits(offsetof(DsaCapabilities, kv_cache_fp8_format), 4)) {
    out->kv_cache_fp8_format = in.Pick<int32_t>({1, 2, 0, 3, -1});
  }
  if (fits(offsetof(DsaCapabilities, warp_size), 4)) {
    out->warp_size = in.Pick<int32_t>({64, 32, 1, 0, -1, 1025});
  }
  if (fits(offsetof(DsaCapabilities, sparse_mla_dense_mha_prefill), 4)) {
    out->sparse_mla_dense_mha_prefill = in.Pick<int32_t>({0, 1, 2});
  }
  if (fits(offsetof(DsaCapabilities, sparse_mla_decode_context_parallel), 4)) {
    out->sparse_mla_decode_context_parallel = in.Pick<int32_t>({0, 1, -3});
  }
  // An older plugin reports a shorter record.
  if (in.OneIn(4)) {
    out->struct_size = std::min(
        host_size, in.Pick<size_t>({0, 8, 40, 48, 52, 56, sizeof(*out)}));
  }
  return DSA_STATUS_OK;
}

DsaStatusCode FakeProbe(DsaDeviceInfo* out, char* error, size_t error_size) {
  FuzzInput& in = *g_in;
  const DsaStatusCode code = Code(in);
  if (code != DSA_STATUS_OK) {
    WriteError(in, error, error_size);
    return code;
  }
  const size_t host_size = out->struct_size;
  if (host_size >= sizeof(*out)) {
    out->device_count = in.Pick<int32_t>({0, 1, 2, -1});
    for (int i = 0; i < DSA_ARCH_NAME_SIZE; ++i) {
      out->arch[i] = static_cast<char>(in.OneIn(3) ? 0 : in.Byte());
    }
    for (int i = 0; i < DSA_DEVICE_NAME_SIZE; ++i) {
      out->name[i] = static_cast<char>(in.Byte());
    }
    out->total_memory_bytes = in.Bits(8);
    out->runtime_version = static_cast<int32_t>(in.Bits(4));
  }
  if (in.OneIn(4)) {
    out->struct_size = std::min(host_size, in.Pick<size_t>({0, 8, 100}));
  }
  return DSA_STATUS_OK;
}

DsaStatusCode FakeMalloc(size_t bytes, void** out, char* error,
                         size_t error_size) {
  FuzzInput& in = *g_in;
  const DsaStatusCode code = Code(in);
  if (code != DSA_STATUS_OK) {
    WriteError(in, error, error_size);
    return code;
  }
  if (in.OneIn(4)) {
    *out = nullptr;  // claims success without memory
    return DSA_STATUS_OK;
  }
  void* p = std::malloc(std::max<size_t>(bytes, 1));
  g_memory->device_allocations.insert(p);
  *out = p;
  return DSA_STATUS_OK;
}

DsaStatusCode FakeFree(void* ptr, char* error, size_t error_size) {
  if (g_memory->device_allocations.erase(ptr) > 0) std::free(ptr);
  const DsaStatusCode code = Code(*g_in);
  if (code != DSA_STATUS_OK) WriteError(*g_in, error, error_size);
  return code;
}

DsaStatusCode FakeMemcpy(void* dst, const void* src, size_t bytes, int32_t kind,
                         char* error, size_t error_size) {
  (void)kind;
  const DsaStatusCode code = Code(*g_in);
  if (code != DSA_STATUS_OK) {
    WriteError(*g_in, error, error_size);
    return code;
  }
  std::memmove(dst, src, bytes);
  return DSA_STATUS_OK;
}

DsaStatusCode FakeSynchronize(char* error, size_t error_size) {
  const DsaStatusCode code = Code(*g_in);
  if (code != DSA_STATUS_OK) WriteError(*g_in, error, error_size);
  return code;
}

DsaStatusCode FakeStreamCreate(void** stream, char* error, size_t error_size) {
  FuzzInput& in = *g_in;
  const DsaStatusCode code = Code(in);
  if (code != DSA_STATUS_OK) {
    WriteError(in, error, error_size);
    return code;
  }
  if (in.OneIn(4)) {
    *stream = nullptr;  // claims success without a stream
    return DSA_STATUS_OK;
  }
  void* s = std::malloc(8);
  g_memory->streams.insert(s);
  *stream = s;
  return DSA_STATUS_OK;
}

DsaStatusCode FakeStreamDestroy(void* stream, char* error, size_t error_size) {
  if (g_memory->streams.erase(stream) > 0) std::free(stream);
  const DsaStatusCode code = Code(*g_in);
  if (code != DSA_STATUS_OK) WriteError(*g_in, error, error_size);
  return code;
}

DsaStatusCode FakeMemcpyAsync(void* dst, const void* src, size_t bytes,
                              int32_t kind, void* stream, char* error,
                              size_t error_size) {
  if (g_memory->streams.count(stream) == 0) std::abort();  // host's bug
  return FakeMemcpy(dst, src, bytes, kind, error, error_size);
}

DsaStatusCode FakeStreamSynchronize(void* stream, char* error,
                                    size_t error_size) {
  if (g_memory->streams.count(stream) == 0) std::abort();  // host's bug
  return FakeSynchronize(error, error_size);
}

void FakeKernel() {}

// --- Descriptors.

// A heap buffer of exactly `size` bytes (at least the struct_size field)
// holding the first `size` bytes of `full`, then random bytes.
template <class T>
std::unique_ptr<uint8_t[]> Exact(const T& full, size_t size, FuzzInput& in) {
  const size_t bytes = std::max(size, sizeof(size_t));
  auto buffer = std::make_unique<uint8_t[]>(bytes);
  std::memcpy(buffer.get(), &full, std::min(bytes, sizeof(T)));
  for (size_t i = sizeof(T); i < bytes; ++i) buffer[i] = in.Byte();
  std::memcpy(buffer.get(), &size, sizeof(size_t));  // struct_size
  return buffer;
}

size_t StructSize(FuzzInput& in, size_t current,
                  std::initializer_list<size_t> older) {
  switch (in.Range(0, 5)) {
    case 0:
    case 1:
      return current;
    case 2:
      return *(older.begin() + in.Range(0, older.size() - 1));
    case 3:
      return current + in.Pick<size_t>({4, 8, 64});  // a newer minor version
    case 4:
      return static_cast<size_t>(in.Range(0, current));
    default:
      return in.Pick<size_t>({0, 1, 7, 8, 4096});
  }
}

std::unique_ptr<uint8_t[]> PlatformDescriptor(FuzzInput& in) {
  DsaPlatformDescriptor d;
  std::memset(&d, 0, sizeof(d));
  d.platform_id = String(in);
  d.kind = in.Pick<int32_t>({0, 1, 2, 1, 2, 3, -1});
  d.is_accelerator = in.Pick<int32_t>({0, 1, 1, 2});
  const size_t n = static_cast<size_t>(in.Range(0, 4));
  if (n > 0 || in.Bool()) {
    auto archs = std::make_unique<const char*[]>(std::max<size_t>(n, 1));
    for (size_t i = 0; i < n; ++i) archs[i] = String(in);
    d.known_archs = archs.get();
    g_memory->arrays.push_back(std::move(archs));
  }
  d.num_known_archs = n;
  d.default_arch =
      n > 0 && in.Bool() ? d.known_archs[in.Range(0, n - 1)] : String(in);
  if (!in.OneIn(6)) d.capabilities_for_arch = &FakeCapabilities;
  if (in.Bool()) d.probe_devices = &FakeProbe;
  if (in.Bool()) {
    d.device_malloc = &FakeMalloc;
    d.device_free = &FakeFree;
    d.device_memcpy = &FakeMemcpy;
    d.device_synchronize = &FakeSynchronize;
    d.stream_create = &FakeStreamCreate;
    d.stream_destroy = &FakeStreamDestroy;
    d.memcpy_async = &FakeMemcpyAsync;
    d.stream_synchronize = &FakeStreamSynchronize;
    // Also a partial set of the stream callbacks, which is refused.
    if (in.OneIn(4)) {
      d.device_free = nullptr;
      d.memcpy_async = nullptr;
    }
  }
  // Older layouts: up to capabilities_for_arch (the minimum), up to
  // probe_devices, up to device_free.
  const size_t size =
      StructSize(in, sizeof(d),
                 {offsetof(DsaPlatformDescriptor, probe_devices),
                  offsetof(DsaPlatformDescriptor, device_malloc),
                  offsetof(DsaPlatformDescriptor, device_memcpy)});
  return Exact(d, size, in);
}

std::unique_ptr<uint8_t[]> KernelDescriptor(FuzzInput& in) {
  DsaKernelDescriptor k;
  std::memset(&k, 0, sizeof(k));
  k.op_name = String(in);
  k.op_abi_version = in.Pick<uint32_t>({1, 1, 0, 2, 0xffffffffu});
  k.platform_id = String(in);
  k.fn = in.OneIn(6) ? nullptr : reinterpret_cast<const void*>(&FakeKernel);
  const size_t size = StructSize(in, sizeof(k),
                                 {offsetof(DsaKernelDescriptor, fn),
                                  offsetof(DsaKernelDescriptor, platform_id)});
  return Exact(k, size, in);
}

// With DSA_FUZZ_VERBOSE set, each registration on stderr (to read a
// crashing input).
void Trace(const char* what, const uint8_t* descriptor) {
  static const bool verbose = std::getenv("DSA_FUZZ_VERBOSE") != nullptr;
  if (!verbose) return;
  size_t size;
  std::memcpy(&size, descriptor, sizeof(size));
  std::fprintf(stderr, "plugin registers a %s descriptor of %zu bytes\n", what,
               size);
}

DsaStatusCode FakeInitialize(const DsaHostApi* host, char* error,
                             size_t error_size) {
  FuzzInput& in = *g_in;
  const int actions = static_cast<int>(in.Range(0, 6));
  for (int i = 0; i < actions; ++i) {
    char message[256] = {0};
    void* context = in.OneIn(12) ? nullptr : host->context;
    switch (in.Range(0, 5)) {
      case 0:
      case 1: {
        auto d = PlatformDescriptor(in);
        Trace("platform", d.get());
        host->register_platform(
            context, reinterpret_cast<const DsaPlatformDescriptor*>(d.get()),
            message, sizeof(message));
        break;  // `d` is freed here, as a plugin's stack would be
      }
      case 2:
      case 3: {
        auto k = KernelDescriptor(in);
        Trace("kernel", k.get());
        host->register_kernel(
            context, reinterpret_cast<const DsaKernelDescriptor*>(k.get()),
            message, sizeof(message));
        break;
      }
      case 4:
        host->register_platform(context, nullptr, message, sizeof(message));
        break;
      default:
        host->register_kernel(context, nullptr, message, in.Bool() ? 0 : 1);
        break;
    }
  }
  const DsaStatusCode code = Code(in);
  if (code != DSA_STATUS_OK) WriteError(in, error, error_size);
  return code;
}

std::unique_ptr<uint8_t[]> PluginApi(FuzzInput& in) {
  DsaPluginApi api;
  std::memset(&api, 0, sizeof(api));
  api.major_version = in.OneIn(6) ? in.Pick<uint32_t>({0, 2, 0xffffffffu})
                                  : DSA_PLUGIN_API_MAJOR;
  api.minor_version = in.Pick<uint32_t>({0, 0, 1, 99});
  api.plugin_name = String(in);
  api.initialize = in.OneIn(10) ? nullptr : &FakeInitialize;
  const size_t size = StructSize(in, sizeof(api),
                                 {offsetof(DsaPluginApi, initialize),
                                  offsetof(DsaPluginApi, plugin_name)});
  return Exact(api, size, in);
}

// Uses what registered, as an engine would.
void Exercise(Registry& registry, FuzzInput& in) {
  for (const std::string& id : registry.PlatformIds()) {
    auto platform = registry.GetPlatform(id);
    if (!platform.ok()) continue;
    std::vector<std::string> archs = platform->known_archs();
    archs.push_back(platform->default_arch());
    archs.push_back(in.Bytes(12));
    for (const std::string& arch : archs) {
      platform->CapabilitiesForArch(arch).status().IgnoreError();
    }
    platform->ProbeDevices().status().IgnoreError();
    platform->Capabilities().status().IgnoreError();
    const DeviceRuntime runtime = platform->runtime();
    (void)runtime.available();
    auto memory = runtime.Allocate(static_cast<size_t>(in.Range(0, 64)));
    uint8_t host_buffer[64] = {0};
    if (memory.ok() && *memory != nullptr) {
      runtime.CopyHostToDevice(*memory, host_buffer, 1).IgnoreError();
      runtime.CopyDeviceToHost(host_buffer, *memory, 1).IgnoreError();
      runtime.CopyDeviceToDevice(*memory, *memory, 0).IgnoreError();
      runtime.Free(*memory).IgnoreError();
    }
    runtime.CopyHostToDevice(nullptr, host_buffer, 4).IgnoreError();
    runtime.Synchronize().IgnoreError();
    // A stream, as a model uses one (a failed or NULL create is an error;
    // every later call gets the handle the plugin made).
    if (auto stream = runtime.CreateStream(); stream.ok()) {
      runtime
          .CopyAsync(host_buffer, host_buffer + 32, 8,
                     DSA_MEMCPY_HOST_TO_DEVICE, *stream)
          .IgnoreError();
      runtime.SynchronizeStream(*stream).IgnoreError();
      runtime.DestroyStream(*stream).IgnoreError();
    }
    for (const std::string& op : registry.KernelOps(id)) {
      registry.FindKernel(op, in.Pick<uint32_t>({1, 0, 2}), id)
          .status()
          .IgnoreError();
    }
  }
  registry.GetPlatform(in.Bytes(8)).status().IgnoreError();
  registry.ActivePlatform().status().IgnoreError();
  if (in.Bool()) {
    registry.SelectPlatform(in.Bool() ? "cpu" : in.Bytes(8));
    registry.ActivePlatform().status().IgnoreError();
  }
}

void Run(FuzzInput& in) {
  PluginMemory memory;
  g_memory = &memory;
  g_in = &in;
  {
    Registry registry;
    const int plugins = static_cast<int>(in.Range(1, 3));
    for (int i = 0; i < plugins; ++i) {
      auto api = PluginApi(in);
      registry.RegisterPlugin(reinterpret_cast<const DsaPluginApi*>(api.get()))
          .IgnoreError();
    }
    Exercise(registry, in);
  }
  g_in = nullptr;
  g_memory = nullptr;
}

}  // namespace
}  // namespace dsa::platform

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsa::fuzz::FuzzInput in(data, size);
  dsa::platform::Run(in);
  return 0;
}
