// The CUDA driver API through dlopen/dlsym, opened once per process (see cuda_driver.h).
#include "runtime/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace nnc::rt::cuda {
namespace {

// Resolves `symbol` into `fn`; false (with *missing set to the first one) when the driver lacks it.
template <class F>
bool resolve(void* lib, const char* symbol, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!*fn && missing->empty()) *missing = symbol;
  return *fn != nullptr;
}

struct Opened {
  DriverApi api{};
  bool ok = false;
  std::string why;
};

Opened openOnce() {
  Opened o;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    o.why = std::string("libcuda.so.1 could not be opened: ") + (err ? err : "unknown reason");
    return o;
  }
  DriverApi& a = o.api;
  std::string missing;
  bool ok = resolve(lib, "cuInit", &a.cuInit, &missing);
  ok &= resolve(lib, "cuDriverGetVersion", &a.cuDriverGetVersion, &missing);
  ok &= resolve(lib, "cuDeviceGetCount", &a.cuDeviceGetCount, &missing);
  ok &= resolve(lib, "cuDeviceGet", &a.cuDeviceGet, &missing);
  ok &= resolve(lib, "cuDeviceGetName", &a.cuDeviceGetName, &missing);
  ok &= resolve(lib, "cuDeviceGetAttribute", &a.cuDeviceGetAttribute, &missing);
  ok &= resolve(lib, "cuDevicePrimaryCtxRetain", &a.cuDevicePrimaryCtxRetain, &missing);
  ok &= resolve(lib, "cuDevicePrimaryCtxRelease_v2", &a.cuDevicePrimaryCtxRelease, &missing);
  ok &= resolve(lib, "cuCtxPushCurrent_v2", &a.cuCtxPushCurrent, &missing);
  ok &= resolve(lib, "cuCtxPopCurrent_v2", &a.cuCtxPopCurrent, &missing);
  ok &= resolve(lib, "cuStreamCreate", &a.cuStreamCreate, &missing);
  ok &= resolve(lib, "cuStreamDestroy_v2", &a.cuStreamDestroy, &missing);
  ok &= resolve(lib, "cuStreamSynchronize", &a.cuStreamSynchronize, &missing);
  ok &= resolve(lib, "cuModuleLoadData", &a.cuModuleLoadData, &missing);
  ok &= resolve(lib, "cuModuleUnload", &a.cuModuleUnload, &missing);
  ok &= resolve(lib, "cuModuleGetFunction", &a.cuModuleGetFunction, &missing);
  ok &= resolve(lib, "cuMemAlloc_v2", &a.cuMemAlloc, &missing);
  ok &= resolve(lib, "cuMemFree_v2", &a.cuMemFree, &missing);
  ok &= resolve(lib, "cuMemGetInfo_v2", &a.cuMemGetInfo, &missing);
  ok &= resolve(lib, "cuMemcpyHtoDAsync_v2", &a.cuMemcpyHtoDAsync, &missing);
  ok &= resolve(lib, "cuMemcpyDtoHAsync_v2", &a.cuMemcpyDtoHAsync, &missing);
  ok &= resolve(lib, "cuMemcpyDtoDAsync_v2", &a.cuMemcpyDtoDAsync, &missing);
  ok &= resolve(lib, "cuPointerGetAttribute", &a.cuPointerGetAttribute, &missing);
  ok &= resolve(lib, "cuLaunchKernel", &a.cuLaunchKernel, &missing);
  ok &= resolve(lib, "cuGetErrorString", &a.cuGetErrorString, &missing);
  ok &= resolve(lib, "cuGetErrorName", &a.cuGetErrorName, &missing);
  // Optional: without them the executor runs without CUDA Graphs.
  std::string missingOptional;
  if (!resolve(lib, "cuStreamBeginCapture_v2", &a.cuStreamBeginCapture, &missingOptional) ||
      !resolve(lib, "cuStreamEndCapture", &a.cuStreamEndCapture, &missingOptional) ||
      !resolve(lib, "cuGraphInstantiateWithFlags", &a.cuGraphInstantiateWithFlags, &missingOptional) ||
      !resolve(lib, "cuGraphLaunch", &a.cuGraphLaunch, &missingOptional) ||
      !resolve(lib, "cuGraphExecDestroy", &a.cuGraphExecDestroy, &missingOptional) ||
      !resolve(lib, "cuGraphDestroy", &a.cuGraphDestroy, &missingOptional)) {
    a.cuStreamBeginCapture = nullptr;  // hasGraphs() is false
  }
  if (!ok) {
    o.why = "libcuda.so.1 lacks " + missing + " (driver too old?)";
    return o;  // the library stays open: harmless, and closing a half-used driver is not
  }
  if (CUresult r = a.cuInit(0); r != kCudaSuccess) {
    o.why = describeError(a, r, "cuInit");
    return o;
  }
  int count = 0;
  if (CUresult r = a.cuDeviceGetCount(&count); r != kCudaSuccess) {
    o.why = describeError(a, r, "cuDeviceGetCount");
    return o;
  }
  if (count <= 0) {
    o.why = "the driver reports no CUDA device";
    return o;
  }
  o.ok = true;
  return o;
}

}  // namespace

const DriverApi* openDriver(std::string* why) {
  static std::once_flag once;
  static Opened opened;
  std::call_once(once, [] { opened = openOnce(); });
  if (!opened.ok) {
    if (why) *why = opened.why;
    return nullptr;
  }
  return &opened.api;
}

std::string describeError(const DriverApi& api, CUresult result, const std::string& what) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(result, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(result, &text);
  return what + ": " + (name ? std::string(name) : "CUDA error " + std::to_string(result)) +
         (text ? std::string(" (") + text + ")" : "");
}

}  // namespace nnc::rt::cuda
