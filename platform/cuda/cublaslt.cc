#include "platform/cuda/cublaslt.h"

#include <cstdlib>
#include <vector>

namespace dsa::platform::cuda {
namespace {

struct Loaded {
  CublasLtApi api;
  RuntimeLoadResult result;
};

const Loaded& Load() {
  static const Loaded* const loaded = [] {
    auto* l = new Loaded();
    std::vector<const char*> candidates;
    if (const char* env = std::getenv("DSA_CUBLASLT_LIBRARY");
        env != nullptr && env[0] != '\0') {
      candidates.push_back(env);
    }
    for (const char* name :
         {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
      candidates.push_back(name);
    }
    l->result =
        LoadRuntimeLibrary(candidates.data(), candidates.size(), &l->api);
    return l;
  }();
  return *loaded;
}

}  // namespace

const CublasLtApi* LoadedCublasLt() {
  const Loaded& l = Load();
  return l.result.loaded() ? &l.api : nullptr;
}

const RuntimeLoadResult& CublasLtLoadResult() { return Load().result; }

}  // namespace dsa::platform::cuda
