// Loads a GPU runtime with dlopen through a table of required and optional
// symbols (the way IREE loads HIP), so nothing links the GPU runtime at build
// time and machines without one build, run and report "no device" cleanly.
// Header-only and free of Abseil, for use inside plugin shared objects.
#ifndef DSA_PLATFORM_RUNTIME_LIBRARY_H_
#define DSA_PLATFORM_RUNTIME_LIBRARY_H_

#include <dlfcn.h>

#include <string>

namespace dsa::platform {

struct RuntimeSymbol {
  const char* name;
  void** slot;    // receives the address, or nullptr when absent
  bool required;  // a missing required symbol fails the load
};

enum class RuntimeLoad {
  kLoaded,         // library open, every required symbol found
  kNotInstalled,   // none of the candidate libraries could be opened
  kMissingSymbol,  // opened, but a required symbol is absent
};

// Opens the first of `candidates` that dlopen finds and resolves `symbols`.
// The handle is kept for the life of the process (runtimes are never
// unloaded). `detail` receives dlerror()'s text or the missing symbol's name.
template <size_t NC, size_t NS>
RuntimeLoad LoadRuntimeLibrary(const char* const (&candidates)[NC],
                               const RuntimeSymbol (&symbols)[NS],
                               std::string* library, std::string* detail) {
  void* handle = nullptr;
  for (const char* name : candidates) {
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      *library = name;
      break;
    }
    const char* e = dlerror();
    if (detail->empty() && e != nullptr) *detail = e;
  }
  if (handle == nullptr) return RuntimeLoad::kNotInstalled;
  for (const RuntimeSymbol& s : symbols) {
    *s.slot = dlsym(handle, s.name);
    if (*s.slot == nullptr && s.required) {
      *detail = std::string(*library) + " lacks required symbol " + s.name;
      return RuntimeLoad::kMissingSymbol;
    }
  }
  return RuntimeLoad::kLoaded;
}

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_RUNTIME_LIBRARY_H_
