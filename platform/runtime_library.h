// Loads a GPU runtime with dlopen through a table of required and optional
// symbols (the way IREE loads HIP), so nothing links the GPU runtime at build
// time and machines without one build, run and report "no device" cleanly.
//
// A runtime's symbols are ONE X-macro list (platform/rocm/hip_symbols.h,
// platform/cuda/cuda_symbols.h): each row `PREFIX_REQUIRED(name, ret, args)`
// or `PREFIX_OPTIONAL(name, ret, args)`. Expanding the list with
// DSA_RUNTIME_SYMBOL_FIELD gives the struct of typed function pointers;
// expanding it with DSA_RUNTIME_SYMBOL_RESOLVE_REQUIRED/_OPTIONAL gives the
// loader. Every required symbol is checked once, when the library loads: a
// struct that loaded has every required pointer set, so callers test the
// load's outcome once instead of each pointer on each call. Optional pointers
// may be null and are tested where they are used.
//
// Header-only and free of Abseil, for use inside plugin shared objects.
#ifndef DSA_PLATFORM_RUNTIME_LIBRARY_H_
#define DSA_PLATFORM_RUNTIME_LIBRARY_H_

#include <dlfcn.h>

#include <cstddef>
#include <string>

namespace dsa::platform {

enum class RuntimeLoad {
  kLoaded,         // library open, every required symbol found
  kNotInstalled,   // none of the candidate libraries could be opened
  kMissingSymbol,  // opened, but a required symbol is absent
};

// The outcome of loading one runtime, computed once.
struct RuntimeLoadResult {
  RuntimeLoad state = RuntimeLoad::kNotInstalled;
  // The candidate that dlopen opened; empty when none did.
  std::string library;
  // Why the load failed: dlerror()'s text for the first candidate, or the
  // names of every missing required symbol. Empty when loaded.
  std::string detail;

  bool loaded() const { return state == RuntimeLoad::kLoaded; }
};

// Resolves the symbols of one opened library into typed function pointers
// and collects the required ones that are absent, so a single failed load
// names all of them.
class RuntimeSymbolResolver {
 public:
  explicit RuntimeSymbolResolver(void* handle) : handle_(handle) {}

  template <class Fn>
  void Required(const char* name, Fn** slot) {
    *slot = Lookup<Fn>(name);
    if (*slot == nullptr) {
      if (num_missing_++ > 0) missing_ += ", ";
      missing_ += name;
    }
  }

  template <class Fn>
  void Optional(const char* name, Fn** slot) {
    *slot = Lookup<Fn>(name);
  }

  // Comma-separated names of the absent required symbols; empty when none.
  const std::string& missing() const { return missing_; }
  int num_missing() const { return num_missing_; }

 private:
  template <class Fn>
  Fn* Lookup(const char* name) {
    // POSIX guarantees that a dlsym result converts to a function pointer.
    return reinterpret_cast<Fn*>(dlsym(handle_, name));
  }

  void* handle_;
  std::string missing_;
  int num_missing_ = 0;
};

// Expansions of a symbol list row. A list is expanded inside the struct that
// holds the pointers, e.g.
//
//   struct HipApi {
//   #define DSA_HIP_REQUIRED DSA_RUNTIME_SYMBOL_FIELD
//   #define DSA_HIP_OPTIONAL DSA_RUNTIME_SYMBOL_FIELD
//   #include "platform/rocm/hip_symbols.h"
//
//     void Resolve(RuntimeSymbolResolver& resolver) {
//   #define DSA_HIP_REQUIRED DSA_RUNTIME_SYMBOL_RESOLVE_REQUIRED
//   #define DSA_HIP_OPTIONAL DSA_RUNTIME_SYMBOL_RESOLVE_OPTIONAL
//   #include "platform/rocm/hip_symbols.h"
//     }
//   };
//
// `args` is the parenthesised parameter list, e.g. (int*, size_t).
#define DSA_RUNTIME_SYMBOL_FIELD(name, ret, args) ret(*name) args = nullptr;
#define DSA_RUNTIME_SYMBOL_RESOLVE_REQUIRED(name, ret, args) \
  resolver.Required(#name, &this->name);
#define DSA_RUNTIME_SYMBOL_RESOLVE_OPTIONAL(name, ret, args) \
  resolver.Optional(#name, &this->name);

// Opens the first of `num_candidates` names that dlopen finds and resolves
// `symbols` (a struct with `void Resolve(RuntimeSymbolResolver&)`). A
// candidate that opens is the runtime: a missing required symbol fails the
// load rather than falling through to an older candidate, whose ABI may
// differ. The handle of a loaded runtime is kept for the life of the process
// (runtimes are never unloaded); a failed one is closed. On failure,
// `symbols` is left value-initialised, every pointer null.
template <class Symbols>
RuntimeLoadResult LoadRuntimeLibrary(const char* const* candidates,
                                     size_t num_candidates, Symbols* symbols) {
  RuntimeLoadResult result;
  void* handle = nullptr;
  for (size_t i = 0; i < num_candidates; ++i) {
    handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      result.library = candidates[i];
      break;
    }
    const char* e = dlerror();
    if (result.detail.empty() && e != nullptr) result.detail = e;
  }
  if (handle == nullptr) {
    if (result.detail.empty()) result.detail = "no candidate library";
    return result;
  }
  RuntimeSymbolResolver resolver(handle);
  symbols->Resolve(resolver);
  if (resolver.num_missing() > 0) {
    *symbols = Symbols();
    dlclose(handle);
    result.state = RuntimeLoad::kMissingSymbol;
    result.detail = result.library + " lacks required symbol" +
                    (resolver.num_missing() > 1 ? "s " : " ") +
                    resolver.missing();
    return result;
  }
  result.state = RuntimeLoad::kLoaded;
  result.detail.clear();
  return result;
}

template <class Symbols, size_t N>
RuntimeLoadResult LoadRuntimeLibrary(const char* const (&candidates)[N],
                                     Symbols* symbols) {
  return LoadRuntimeLibrary(candidates, N, symbols);
}

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_RUNTIME_LIBRARY_H_
