// The CUDA driver API through dlopen/dlsym, opened once per process (see cuda_driver.h).
#include "runtime/cuda/cuda_driver.h"

#include <dlfcn.h>

#include "runtime/cuda/dynamic_library.h"
#include "runtime/cuda/emulator.h"

namespace nnc::rt::cuda {
namespace {

OpenedLibrary<DriverApi> openOnce() {
  OpenedLibrary<DriverApi> o;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    o.why = std::string("libcuda.so.1 could not be opened: ") + (err ? err : "unknown reason");
    return o;
  }
  DriverApi& a = o.api;
  std::string missing;
  bool ok = resolveSymbol(lib, "cuInit", &a.cuInit, &missing);
  ok &= resolveSymbol(lib, "cuDriverGetVersion", &a.cuDriverGetVersion, &missing);
  ok &= resolveSymbol(lib, "cuDeviceGetCount", &a.cuDeviceGetCount, &missing);
  ok &= resolveSymbol(lib, "cuDeviceGet", &a.cuDeviceGet, &missing);
  ok &= resolveSymbol(lib, "cuDeviceGetName", &a.cuDeviceGetName, &missing);
  ok &= resolveSymbol(lib, "cuDeviceGetAttribute", &a.cuDeviceGetAttribute, &missing);
  ok &= resolveSymbol(lib, "cuDevicePrimaryCtxRetain", &a.cuDevicePrimaryCtxRetain, &missing);
  ok &= resolveSymbol(lib, "cuDevicePrimaryCtxRelease_v2", &a.cuDevicePrimaryCtxRelease, &missing);
  ok &= resolveSymbol(lib, "cuCtxPushCurrent_v2", &a.cuCtxPushCurrent, &missing);
  ok &= resolveSymbol(lib, "cuCtxPopCurrent_v2", &a.cuCtxPopCurrent, &missing);
  ok &= resolveSymbol(lib, "cuStreamCreate", &a.cuStreamCreate, &missing);
  ok &= resolveSymbol(lib, "cuStreamDestroy_v2", &a.cuStreamDestroy, &missing);
  ok &= resolveSymbol(lib, "cuStreamSynchronize", &a.cuStreamSynchronize, &missing);
  ok &= resolveSymbol(lib, "cuModuleLoadData", &a.cuModuleLoadData, &missing);
  ok &= resolveSymbol(lib, "cuModuleUnload", &a.cuModuleUnload, &missing);
  ok &= resolveSymbol(lib, "cuModuleGetFunction", &a.cuModuleGetFunction, &missing);
  ok &= resolveSymbol(lib, "cuMemAlloc_v2", &a.cuMemAlloc, &missing);
  ok &= resolveSymbol(lib, "cuMemFree_v2", &a.cuMemFree, &missing);
  ok &= resolveSymbol(lib, "cuMemGetInfo_v2", &a.cuMemGetInfo, &missing);
  ok &= resolveSymbol(lib, "cuMemcpyHtoDAsync_v2", &a.cuMemcpyHtoDAsync, &missing);
  ok &= resolveSymbol(lib, "cuMemcpyDtoHAsync_v2", &a.cuMemcpyDtoHAsync, &missing);
  ok &= resolveSymbol(lib, "cuMemcpyDtoDAsync_v2", &a.cuMemcpyDtoDAsync, &missing);
  ok &= resolveSymbol(lib, "cuPointerGetAttribute", &a.cuPointerGetAttribute, &missing);
  ok &= resolveSymbol(lib, "cuLaunchKernel", &a.cuLaunchKernel, &missing);
  ok &= resolveSymbol(lib, "cuGetErrorString", &a.cuGetErrorString, &missing);
  ok &= resolveSymbol(lib, "cuGetErrorName", &a.cuGetErrorName, &missing);
  // Optional: without them the executor runs without CUDA Graphs.
  std::string missingOptional;
  if (!resolveSymbol(lib, "cuStreamBeginCapture_v2", &a.cuStreamBeginCapture, &missingOptional) ||
      !resolveSymbol(lib, "cuStreamEndCapture", &a.cuStreamEndCapture, &missingOptional) ||
      !resolveSymbol(lib, "cuGraphInstantiateWithFlags", &a.cuGraphInstantiateWithFlags, &missingOptional) ||
      !resolveSymbol(lib, "cuGraphLaunch", &a.cuGraphLaunch, &missingOptional) ||
      !resolveSymbol(lib, "cuGraphExecDestroy", &a.cuGraphExecDestroy, &missingOptional) ||
      !resolveSymbol(lib, "cuGraphDestroy", &a.cuGraphDestroy, &missingOptional)) {
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
  if (emu::emulationRequested()) {
    const DriverApi* api = emu::openEmulatedDriver(why);
    if (api) api->cuInit(0);  // idempotent, as the driver's is
    return api;
  }
  return openOncePerProcess(openOnce, why);
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
