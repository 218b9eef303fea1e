// What the dlopen'd NVIDIA libraries (cuda_driver.cpp: libcuda; cublaslt.cpp: cuBLASLt) share:
// resolving entry points into a function table, and opening a library once per process.
#pragma once

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace nnc::rt::cuda {

// Resolves `symbol` into `fn`; false (with *missing set to the first one) when the library lacks it.
template <class F>
bool resolveSymbol(void* lib, const char* symbol, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!*fn && missing->empty()) *missing = symbol;
  return *fn != nullptr;
}

// A function table opened by `open` (ok, or why not).
template <class Api>
struct OpenedLibrary {
  Api api{};
  bool ok = false;
  std::string why;
};

// Calls `open` once per process (per Api) and returns its table, or null with *why. Never closed:
// unloading a library that may have started threads or hold a context is not safe.
template <class Api>
const Api* openOncePerProcess(OpenedLibrary<Api> (*open)(), std::string* why) {
  static std::once_flag once;
  static OpenedLibrary<Api> opened;
  std::call_once(once, [open] { opened = open(); });
  if (!opened.ok) {
    if (why) *why = opened.why;
    return nullptr;
  }
  return &opened.api;
}

}  // namespace nnc::rt::cuda
