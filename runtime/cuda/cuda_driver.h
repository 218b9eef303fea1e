// The CUDA driver API for the runtime, opened at run time with dlopen("libcuda.so.1") so that a
// model.so (and nnc) link and load on machines without a driver; only the entry points the CUDA
// executor needs, declared with the driver's C ABI (no cuda.h). Depends on nothing of nnc but the
// standard library: a model.so carries it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nnc::rt::cuda {

// The driver's ABI types (cuda.h): CUresult is an int enum, handles are opaque pointers.
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUdeviceptr = unsigned long long;
using CUgraph = void*;
using CUgraphExec = void*;

constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorOutOfMemory = 2;
constexpr CUresult kCudaErrorNoDevice = 100;
constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: a capture restricts only the capturing thread's API calls, so
// other threads (other model handles) may allocate while a plan is being captured.
constexpr int kStreamCaptureModeThreadLocal = 1;
// cuPointerGetAttribute: CU_POINTER_ATTRIBUTE_MEMORY_TYPE (unsigned CUmemorytype), _DEVICE_ORDINAL
// (int), _RANGE_START_ADDR (CUdeviceptr), _RANGE_SIZE (size_t); CU_MEMORYTYPE_DEVICE / _UNIFIED.
constexpr int kPointerAttributeMemoryType = 2;
constexpr int kPointerAttributeDeviceOrdinal = 9;
constexpr int kPointerAttributeRangeStart = 11;
constexpr int kPointerAttributeRangeSize = 12;
constexpr unsigned kMemoryTypeDevice = 2;
constexpr unsigned kMemoryTypeUnified = 4;

struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);  // the _v2 ABI
  CUresult (*cuCtxPushCurrent)(CUcontext);          // _v2
  CUresult (*cuCtxPopCurrent)(CUcontext*);          // _v2
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);  // _v2
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);                               // _v2
  CUresult (*cuMemFree)(CUdeviceptr);                                         // _v2
  CUresult (*cuMemGetInfo)(size_t*, size_t*);                                 // _v2
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);  // _v2
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);        // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);  // _v2
  CUresult (*cuPointerGetAttribute)(void*, int, CUdeviceptr);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  // CUDA Graphs (optional: null when the driver lacks one of them, and the executor then launches
  // kernels one by one). cuGraphInstantiateWithFlags needs a CUDA 11.4 driver.
  CUresult (*cuStreamBeginCapture)(CUstream, int);  // _v2; int: CUstreamCaptureMode
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  // The CUDA emulator's table (emulator.h): modules are CUDA C++ source, not cubin or PTX.
  bool emulated = false;
  bool hasGraphs() const {
    return cuStreamBeginCapture && cuStreamEndCapture && cuGraphInstantiateWithFlags && cuGraphLaunch &&
           cuGraphExecDestroy && cuGraphDestroy;
  }
};

// The driver, opened and cuInit'ed once per process (never closed: unloading libcuda while a
// context may exist is unsafe). Null with *why set ("libcuda.so.1 could not be opened: ...",
// "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)") when there is none. With
// NNC_CUDA_EMULATE=1, the CUDA emulator's table instead (emulator.h).
const DriverApi* openDriver(std::string* why);

// "what: CUDA_ERROR_X (description)".
std::string describeError(const DriverApi& api, CUresult result, const std::string& what);

}  // namespace nnc::rt::cuda
