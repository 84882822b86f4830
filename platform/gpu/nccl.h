// NCCL on CUDA and RCCL on ROCm, loaded with dlopen at run time like the
// other vendor libraries (platform/runtime_library.h), for the collectives
// of tensor-parallel ranks that are threads of one process, a GPU each:
// NcclGroup creates one communicator per rank with ncclCommInitAll and runs
// each rank's all-reduce (sum) and all-gather on that rank's stream.
//
// The fault site of these calls is the platform's (DeviceRuntime's
// "collective call", platform/registry.h), as for every platform call.
//
// Free of Abseil: it runs inside the platform plugins. Errors are strings
// (empty on success) naming the call and the library's text.
#ifndef DSA_PLATFORM_GPU_NCCL_H_
#define DSA_PLATFORM_GPU_NCCL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "platform/host_collectives.h"
#include "platform/plugin_api.h"
#include "platform/runtime_library.h"

namespace dsa::platform::gpu {

struct NcclApi {
#define DSA_NCCL_REQUIRED DSA_RUNTIME_SYMBOL_FIELD
#define DSA_NCCL_OPTIONAL DSA_RUNTIME_SYMBOL_FIELD
#include "platform/gpu/nccl_symbols.h"

  void Resolve(RuntimeSymbolResolver& resolver) {
#define DSA_NCCL_REQUIRED DSA_RUNTIME_SYMBOL_RESOLVE_REQUIRED
#define DSA_NCCL_OPTIONAL DSA_RUNTIME_SYMBOL_RESOLVE_OPTIONAL
#include "platform/gpu/nccl_symbols.h"
  }
};

enum class CollectiveLibrary {
  kNccl,  // CUDA: $DSA_NCCL_LIBRARY (only it when set), else libnccl.so.2
  kRccl,  // ROCm: $DSA_RCCL_LIBRARY (only it when set), else librccl.so.1
};
const char* CollectiveLibraryName(CollectiveLibrary library);

// Loaded once per process; null when the library is not there (the load
// result says why).
const NcclApi* LoadedNccl(CollectiveLibrary library);
const RuntimeLoadResult& NcclLoadResult(CollectiveLibrary library);

class NcclGroup {
 public:
  // One communicator for each of `devices` (device ordinals), rank r on
  // devices[r]. Empty on success.
  static std::string Create(const NcclApi& api, CollectiveLibrary library,
                            const std::vector<int>& devices,
                            std::unique_ptr<NcclGroup>* out);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const { return static_cast<int>(comms_.size()); }

  // Enqueued on `stream` (the rank's); rank r calls from the thread bound to
  // devices[r]. In place: every rank's `buffer` becomes the sum.
  std::string AllReduceSum(int rank, void* buffer, size_t count,
                           CollectiveElement type, void* stream);
  // `recv` holds size() blocks of `bytes`; `send` may be the rank's own.
  std::string AllGather(int rank, const void* send, void* recv, size_t bytes,
                        void* stream);
  // Aborts every communicator (a rank failed): collectives waiting on a
  // peer return instead of waiting forever. Later calls fail. Safe to call
  // from any thread while ranks are inside a collective.
  void Abort();

 private:
  NcclGroup(const NcclApi& api, CollectiveLibrary library)
      : api_(api), library_(library) {}
  std::string Fail(const char* call, int result, void* comm) const;

  const NcclApi& api_;
  CollectiveLibrary library_;
  std::vector<void*> comms_;
  std::atomic<bool> aborted_{false};
};

// The collective entries of the plugin ABI (plugin_api.h, minor version 3)
// over NcclGroup, the same for the CUDA platform (NCCL) and the ROCm one
// (RCCL): a group is a NcclGroup*; messages start with the platform's id.
// `enter` (may be null) makes the calling thread's bound device current
// before a collective (the CUDA driver's context).
namespace internal {
DsaStatusCode Create(CollectiveLibrary library, int32_t num_ranks,
                     const int32_t* ordinals, void** group, char* error,
                     size_t error_size);
DsaStatusCode Abort(CollectiveLibrary library, void* group, char* error,
                    size_t error_size);
DsaStatusCode Destroy(CollectiveLibrary library, void* group, char* error,
                      size_t error_size);
DsaStatusCode AllReduceSum(CollectiveLibrary library, void* group, int32_t rank,
                           void* buffer, size_t count, int32_t element,
                           void* stream, char* error, size_t error_size);
DsaStatusCode AllGather(CollectiveLibrary library, void* group, int32_t rank,
                        const void* send, void* recv, size_t bytes,
                        void* stream, char* error, size_t error_size);
}  // namespace internal

using EnterDevice = DsaStatusCode (*)(char* error, size_t error_size);

template <CollectiveLibrary L, EnterDevice kEnter>
struct PluginCollectives {
  static DsaStatusCode Create(int32_t num_ranks, const int32_t* ordinals,
                              void** group, char* error, size_t error_size) {
    return internal::Create(L, num_ranks, ordinals, group, error, error_size);
  }
  static DsaStatusCode Abort(void* group, char* error, size_t error_size) {
    return internal::Abort(L, group, error, error_size);
  }
  static DsaStatusCode Destroy(void* group, char* error, size_t error_size) {
    return internal::Destroy(L, group, error, error_size);
  }
  static DsaStatusCode AllReduceSum(void* group, int32_t rank, void* buffer,
                                    size_t count, int32_t element, void* stream,
                                    char* error, size_t error_size) {
    if (kEnter != nullptr) {
      const DsaStatusCode c = kEnter(error, error_size);
      if (c != DSA_STATUS_OK) return c;
    }
    return internal::AllReduceSum(L, group, rank, buffer, count, element,
                                  stream, error, error_size);
  }
  static DsaStatusCode AllGather(void* group, int32_t rank, const void* send,
                                 void* recv, size_t bytes, void* stream,
                                 char* error, size_t error_size) {
    if (kEnter != nullptr) {
      const DsaStatusCode c = kEnter(error, error_size);
      if (c != DSA_STATUS_OK) return c;
    }
    return internal::AllGather(L, group, rank, send, recv, bytes, stream, error,
                               error_size);
  }
};

}  // namespace dsa::platform::gpu

#endif  // DSA_PLATFORM_GPU_NCCL_H_
