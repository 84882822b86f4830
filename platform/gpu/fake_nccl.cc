// A stand-in NCCL over host memory for the tests of platform/gpu/nccl.cc:
// the entry points the loader needs, each rank's buffers plain host memory,
// the collectives those of platform/host_collectives.h. With
// FAKE_NCCL_FAIL=<entry point> that entry point returns ncclInternalError
// (3) and ncclGetLastError says why.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "platform/host_collectives.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Comm {
  std::shared_ptr<dsa::platform::HostCollectiveGroup> group;
  int rank = 0;
};

bool Fails(const char* entry) {
  const char* f = std::getenv("FAKE_NCCL_FAIL");
  return f != nullptr && std::strcmp(f, entry) == 0;
}

thread_local std::string last_error;

}  // namespace

FAKE_EXPORT int ncclGetVersion(int* version) {
  *version = 22703;
  return 0;
}

FAKE_EXPORT int ncclCommInitAll(void** comms, int n, const int* devices) {
  if (Fails("ncclCommInitAll")) return 3;
  if (n < 1 || devices == nullptr) return 4;  // ncclInvalidArgument
  auto group = std::make_shared<dsa::platform::HostCollectiveGroup>(n);
  for (int r = 0; r < n; ++r) comms[r] = new Comm{group, r};
  return 0;
}

FAKE_EXPORT int ncclCommDestroy(void* comm) {
  delete static_cast<Comm*>(comm);
  return 0;
}

// A rank may still be inside a collective of an aborted communicator: the
// communicator stays alive (freed at exit) so that its call can return.
FAKE_EXPORT int ncclCommAbort(void* comm) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<Comm>> aborted;
  static_cast<Comm*>(comm)->group->Abort("communicator aborted");
  std::lock_guard<std::mutex> lock(mu);
  aborted.emplace_back(static_cast<Comm*>(comm));
  return 0;
}

FAKE_EXPORT int ncclAllReduce(const void* send, void* recv, size_t count,
                              int type, int op, void* comm, void* stream) {
  (void)stream;
  if (Fails("ncclAllReduce")) {
    last_error = "fake: all-reduce refused";
    return 3;
  }
  if (op != 0 || (type != 7 && type != 9)) return 4;
  const size_t bytes = count * (type == 7 ? 4 : 2);
  if (send != recv) std::memmove(recv, send, bytes);
  Comm* c = static_cast<Comm*>(comm);
  const std::string e = c->group->AllReduceSum(
      c->rank, recv, count,
      type == 7 ? dsa::platform::CollectiveElement::kFloat32
                : dsa::platform::CollectiveElement::kBFloat16);
  if (!e.empty()) last_error = e;
  return e.empty() ? 0 : 5;  // ncclInvalidUsage
}

FAKE_EXPORT int ncclAllGather(const void* send, void* recv, size_t count,
                              int type, void* comm, void* stream) {
  (void)stream;
  if (Fails("ncclAllGather")) return 3;
  if (type != 1) return 4;
  Comm* c = static_cast<Comm*>(comm);
  const std::string e = c->group->AllGather(c->rank, send, recv, count);
  if (!e.empty()) last_error = e;
  return e.empty() ? 0 : 5;
}

FAKE_EXPORT const char* ncclGetErrorString(int result) {
  switch (result) {
    case 0:
      return "no error";
    case 1:
      return "unhandled cuda error";
    case 3:
      return "internal error";
    case 4:
      return "invalid argument";
    case 5:
      return "invalid usage";
    default:
      return "unknown result code";
  }
}

FAKE_EXPORT const char* ncclGetLastError(void* comm) {
  (void)comm;
  return last_error.c_str();
}
