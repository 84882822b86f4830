#include "platform/gpu/nccl.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "platform/plugin_util.h"

namespace dsa::platform::gpu {
namespace {

// nccl.h's values (RCCL's are the same).
constexpr int kNcclSuccess = 0;
constexpr int kNcclUint8 = 1;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclBfloat16 = 9;
constexpr int kNcclSum = 0;

struct Loaded {
  NcclApi api;
  RuntimeLoadResult result;
};

const Loaded& Load(CollectiveLibrary library) {
  static const Loaded* const nccl = [] {
    auto* l = new Loaded();
    std::vector<const char*> candidates;
    // An override is the one library tried: a wrong path is an error, not
    // a silent fall back to another install.
    if (const char* env = std::getenv("DSA_NCCL_LIBRARY");
        env != nullptr && env[0] != '\0') {
      candidates.push_back(env);
    } else {
      candidates.push_back("libnccl.so.2");
    }
    l->result =
        LoadRuntimeLibrary(candidates.data(), candidates.size(), &l->api);
    return l;
  }();
  static const Loaded* const rccl = [] {
    auto* l = new Loaded();
    std::vector<const char*> candidates;
    // An override is the one library tried: a wrong path is an error, not
    // a silent fall back to another install.
    if (const char* env = std::getenv("DSA_RCCL_LIBRARY");
        env != nullptr && env[0] != '\0') {
      candidates.push_back(env);
    } else {
      candidates.push_back("librccl.so.1");
      candidates.push_back("librccl.so");
    }
    l->result =
        LoadRuntimeLibrary(candidates.data(), candidates.size(), &l->api);
    return l;
  }();
  return library == CollectiveLibrary::kNccl ? *nccl : *rccl;
}

}  // namespace

const char* CollectiveLibraryName(CollectiveLibrary library) {
  return library == CollectiveLibrary::kNccl ? "NCCL" : "RCCL";
}

const NcclApi* LoadedNccl(CollectiveLibrary library) {
  const Loaded& l = Load(library);
  return l.result.loaded() ? &l.api : nullptr;
}

const RuntimeLoadResult& NcclLoadResult(CollectiveLibrary library) {
  return Load(library).result;
}

std::string NcclGroup::Fail(const char* call, int result, void* comm) const {
  std::string text = std::string(CollectiveLibraryName(library_)) + " " + call +
                     " failed: error " + std::to_string(result);
  const char* what = api_.ncclGetErrorString != nullptr
                         ? api_.ncclGetErrorString(result)
                         : nullptr;
  if (what != nullptr && what[0] != '\0')
    text += std::string(" (") + what + ")";
  const char* last = comm != nullptr && api_.ncclGetLastError != nullptr
                         ? api_.ncclGetLastError(comm)
                         : nullptr;
  if (last != nullptr && last[0] != '\0') text += std::string(": ") + last;
  return text;
}

std::string NcclGroup::Create(const NcclApi& api, CollectiveLibrary library,
                              const std::vector<int>& devices,
                              std::unique_ptr<NcclGroup>* out) {
  if (devices.empty()) return "a collective group needs at least one rank";
  std::unique_ptr<NcclGroup> group(new NcclGroup(api, library));
  std::vector<void*> comms(devices.size(), nullptr);
  const int result = api.ncclCommInitAll(
      comms.data(), static_cast<int>(devices.size()), devices.data());
  if (result != kNcclSuccess) {
    return group->Fail("ncclCommInitAll", result, nullptr);
  }
  group->comms_ = std::move(comms);
  *out = std::move(group);
  return "";
}

NcclGroup::~NcclGroup() {
  if (aborted_.load()) return;  // Abort released the communicators
  for (void* comm : comms_) api_.ncclCommDestroy(comm);
}

std::string NcclGroup::AllReduceSum(int rank, void* buffer, size_t count,
                                    CollectiveElement type, void* stream) {
  if (rank < 0 || rank >= size()) {
    return "rank " + std::to_string(rank) + " of a group of " +
           std::to_string(size());
  }
  if (aborted_.load())
    return std::string(CollectiveLibraryName(library_)) + " group was aborted";
  const int nccl_type =
      type == CollectiveElement::kFloat32 ? kNcclFloat32 : kNcclBfloat16;
  const int result = api_.ncclAllReduce(buffer, buffer, count, nccl_type,
                                        kNcclSum, comms_[rank], stream);
  return result == kNcclSuccess ? ""
                                : Fail("ncclAllReduce", result, comms_[rank]);
}

std::string NcclGroup::AllGather(int rank, const void* send, void* recv,
                                 size_t bytes, void* stream) {
  if (rank < 0 || rank >= size()) {
    return "rank " + std::to_string(rank) + " of a group of " +
           std::to_string(size());
  }
  if (aborted_.load())
    return std::string(CollectiveLibraryName(library_)) + " group was aborted";
  const int result =
      api_.ncclAllGather(send, recv, bytes, kNcclUint8, comms_[rank], stream);
  return result == kNcclSuccess ? ""
                                : Fail("ncclAllGather", result, comms_[rank]);
}

void NcclGroup::Abort() {
  if (aborted_.exchange(true)) return;
  for (void* comm : comms_) {
    if (api_.ncclCommAbort != nullptr) {
      api_.ncclCommAbort(comm);
    } else {
      api_.ncclCommDestroy(comm);
    }
  }
}

namespace internal {
namespace {

// "cuda" or "rocm": the platform a library's entries serve, for messages.
const char* PlatformOf(CollectiveLibrary library) {
  return library == CollectiveLibrary::kNccl ? "cuda" : "rocm";
}
const char* OverrideOf(CollectiveLibrary library) {
  return library == CollectiveLibrary::kNccl ? "DSA_NCCL_LIBRARY"
                                             : "DSA_RCCL_LIBRARY";
}
DsaStatusCode Failed(CollectiveLibrary library, const std::string& why,
                     char* error, size_t error_size) {
  if (why.empty()) return DSA_STATUS_OK;
  return PluginError(DSA_STATUS_INTERNAL, error, error_size, "%s: %s",
                     PlatformOf(library), why.c_str());
}

}  // namespace

DsaStatusCode Create(CollectiveLibrary library, int32_t num_ranks,
                     const int32_t* ordinals, void** group, char* error,
                     size_t error_size) {
  const char* platform = PlatformOf(library);
  if (group == nullptr || ordinals == nullptr || num_ranks < 1) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "%s: a collective group of %d ranks", platform,
                       num_ranks);
  }
  *group = nullptr;
  const NcclApi* api = LoadedNccl(library);
  if (api == nullptr) {
    return PluginError(DSA_STATUS_UNAVAILABLE, error, error_size,
                       "%s: %s is not available (%s); %s names the library "
                       "to load",
                       platform, CollectiveLibraryName(library),
                       NcclLoadResult(library).detail.c_str(),
                       OverrideOf(library));
  }
  std::unique_ptr<NcclGroup> g;
  const std::string why = NcclGroup::Create(
      *api, library, std::vector<int>(ordinals, ordinals + num_ranks), &g);
  if (!why.empty()) return Failed(library, why, error, error_size);
  *group = g.release();
  return DSA_STATUS_OK;
}

DsaStatusCode Abort(CollectiveLibrary library, void* group, char* error,
                    size_t error_size) {
  if (group == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "%s: aborting a NULL collective group",
                       PlatformOf(library));
  }
  static_cast<NcclGroup*>(group)->Abort();
  return DSA_STATUS_OK;
}

DsaStatusCode Destroy(CollectiveLibrary library, void* group, char* error,
                      size_t error_size) {
  if (group == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "%s: destroying a NULL collective group",
                       PlatformOf(library));
  }
  delete static_cast<NcclGroup*>(group);
  return DSA_STATUS_OK;
}

DsaStatusCode AllReduceSum(CollectiveLibrary library, void* group, int32_t rank,
                           void* buffer, size_t count, int32_t element,
                           void* stream, char* error, size_t error_size) {
  if (group == nullptr || (element != DSA_COLLECTIVE_FLOAT32 &&
                           element != DSA_COLLECTIVE_BFLOAT16)) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "%s: all-reduce on a NULL group or of element %d",
                       PlatformOf(library), element);
  }
  return Failed(
      library,
      static_cast<NcclGroup*>(group)->AllReduceSum(
          rank, buffer, count,
          element == DSA_COLLECTIVE_FLOAT32 ? CollectiveElement::kFloat32
                                            : CollectiveElement::kBFloat16,
          stream),
      error, error_size);
}

DsaStatusCode AllGather(CollectiveLibrary library, void* group, int32_t rank,
                        const void* send, void* recv, size_t bytes,
                        void* stream, char* error, size_t error_size) {
  if (group == nullptr) {
    return PluginError(DSA_STATUS_INVALID_ARGUMENT, error, error_size,
                       "%s: all-gather on a NULL group", PlatformOf(library));
  }
  return Failed(library,
                static_cast<NcclGroup*>(group)->AllGather(rank, send, recv,
                                                          bytes, stream),
                error, error_size);
}

}  // namespace internal

}  // namespace dsa::platform::gpu
