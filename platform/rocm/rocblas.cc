#include "platform/rocm/rocblas.h"

#include <cstdlib>
#include <vector>

namespace dsa::platform::rocm {
namespace {

struct Loaded {
  RocblasApi api;
  RuntimeLoadResult result;
};

const Loaded& Load() {
  static const Loaded* const loaded = [] {
    auto* l = new Loaded();
    std::vector<const char*> candidates;
    if (const char* env = std::getenv("DSA_ROCBLAS_LIBRARY");
        env != nullptr && env[0] != '\0') {
      candidates.push_back(env);
    }
    for (const char* name : {"librocblas.so.4", "librocblas.so.3",
                             "librocblas.so.0", "librocblas.so"}) {
      candidates.push_back(name);
    }
    l->result =
        LoadRuntimeLibrary(candidates.data(), candidates.size(), &l->api);
    return l;
  }();
  return *loaded;
}

}  // namespace

const RocblasApi* LoadedRocblas() {
  const Loaded& l = Load();
  return l.result.loaded() ? &l.api : nullptr;
}

const RuntimeLoadResult& RocblasLoadResult() { return Load().result; }

}  // namespace dsa::platform::rocm
