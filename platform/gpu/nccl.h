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
#include <memory>
#include <string>
#include <vector>

#include "platform/host_collectives.h"
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

}  // namespace dsa::platform::gpu

#endif  // DSA_PLATFORM_GPU_NCCL_H_
