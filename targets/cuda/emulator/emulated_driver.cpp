// The emulated CUDA driver's table and exports (see emulator.h), and its init, device, context and error calls.
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "targets/cuda/emulator/emulator_internal.h"

namespace nnc::rt::cuda::emu::detail {
namespace {

const char* errorName(CUresult r) {
  switch (r) {
    case kCudaSuccess: return "CUDA_SUCCESS";
    case kInvalidValue: return "CUDA_ERROR_INVALID_VALUE";
    case kCudaErrorOutOfMemory: return "CUDA_ERROR_OUT_OF_MEMORY";
    case kNotInitialized: return "CUDA_ERROR_NOT_INITIALIZED";
    case kInvalidDevice: return "CUDA_ERROR_INVALID_DEVICE";
    case kInvalidImage: return "CUDA_ERROR_INVALID_IMAGE";
    case kInvalidContext: return "CUDA_ERROR_INVALID_CONTEXT";
    case kInvalidHandle: return "CUDA_ERROR_INVALID_HANDLE";
    case kIllegalState: return "CUDA_ERROR_ILLEGAL_STATE";
    case kNotFound: return "CUDA_ERROR_NOT_FOUND";
    case kIllegalAddress: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case kLaunchFailed: return "CUDA_ERROR_LAUNCH_FAILED";
    case kCaptureUnsupported: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case kCaptureInvalidated: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    default: return nullptr;
  }
}

// The emulator's own explanation of the last failure with each code (cuGetErrorString returns it,
// so the executor's messages carry it). Interned: the returned pointers stay valid.
std::mutex gReasonsMutex;
std::map<CUresult, const std::string*> gReasons;
std::deque<std::string> gReasonStore;

}  // namespace

CUresult failWith(CUresult r, const std::string& reason) {
  std::lock_guard<std::mutex> lock(gReasonsMutex);
  gReasonStore.push_back(reason);
  gReasons[r] = &gReasonStore.back();
  return r;
}

State& state() {
  static State* s = new State();  // never destroyed: other static destructors may still free memory
  return *s;
}

namespace {

// Contexts: one device, one primary context; the current-context stack is per thread.

thread_local int tlsContextDepth = 0;
char gPrimaryContext;

}  // namespace

CUresult needContext() {
  if (!state().initialized) return kNotInitialized;
  return tlsContextDepth > 0 ? kCudaSuccess : kInvalidContext;
}

namespace {

CUresult emuInit(unsigned flags) {
  if (flags != 0) return failWith(kInvalidValue, "cuInit takes flags 0");
  std::lock_guard<std::mutex> lock(state().mutex);
  state().initialized = true;
  return kCudaSuccess;
}
CUresult emuDriverGetVersion(int* version) {
  if (!version) return kInvalidValue;
  *version = 13000;
  return kCudaSuccess;
}
CUresult emuDeviceGetCount(int* count) {
  if (!state().initialized) return kNotInitialized;
  if (!count) return kInvalidValue;
  *count = 1;
  return kCudaSuccess;
}
CUresult emuDeviceGet(CUdevice* device, int ordinal) {
  if (!state().initialized) return kNotInitialized;
  if (!device) return kInvalidValue;
  if (ordinal != 0) return kInvalidDevice;
  *device = 0;
  return kCudaSuccess;
}
CUresult emuDeviceGetName(char* name, int length, CUdevice device) {
  if (!state().initialized) return kNotInitialized;
  if (device != 0) return kInvalidDevice;
  if (!name || length <= 0) return kInvalidValue;
  std::snprintf(name, static_cast<size_t>(length), "%s", "nnc CUDA emulator (CPU)");
  return kCudaSuccess;
}
CUresult emuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  if (!state().initialized) return kNotInitialized;
  if (device != 0) return kInvalidDevice;
  if (!value) return kInvalidValue;
  if (attribute == kAttrComputeCapabilityMajor)
    *value = 9;
  else if (attribute == kAttrComputeCapabilityMinor)
    *value = 0;
  else
    return failWith(kInvalidValue, "the emulator knows no device attribute " + std::to_string(attribute));
  return kCudaSuccess;
}
CUresult emuPrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (!state().initialized) return kNotInitialized;
  if (device != 0) return kInvalidDevice;
  if (!context) return kInvalidValue;
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().primaryRetains;
  *context = &gPrimaryContext;
  return kCudaSuccess;
}
CUresult emuPrimaryCtxRelease(CUdevice device) {
  if (!state().initialized) return kNotInitialized;
  if (device != 0) return kInvalidDevice;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().primaryRetains == 0) return failWith(kInvalidContext, "cuDevicePrimaryCtxRelease without a retain");
  --state().primaryRetains;
  return kCudaSuccess;
}
CUresult emuCtxPushCurrent(CUcontext context) {
  if (!state().initialized) return kNotInitialized;
  if (context != &gPrimaryContext) return failWith(kInvalidContext, "not the emulated device's primary context");
  ++tlsContextDepth;
  return kCudaSuccess;
}
CUresult emuCtxPopCurrent(CUcontext* context) {
  if (!state().initialized) return kNotInitialized;
  if (tlsContextDepth == 0) return failWith(kInvalidContext, "cuCtxPopCurrent with no context current");
  --tlsContextDepth;
  if (context) *context = &gPrimaryContext;
  return kCudaSuccess;
}

CUresult emuGetErrorString(CUresult result, const char** text) {
  if (!text) return kInvalidValue;
  {
    std::lock_guard<std::mutex> lock(gReasonsMutex);
    if (auto it = gReasons.find(result); it != gReasons.end()) {
      *text = it->second->c_str();
      return kCudaSuccess;
    }
  }
  *text = errorName(result) ? "the CUDA emulator reports this error" : nullptr;
  return *text ? kCudaSuccess : kInvalidValue;
}
CUresult emuGetErrorName(CUresult result, const char** name) {
  if (!name) return kInvalidValue;
  *name = errorName(result);
  return *name ? kCudaSuccess : kInvalidValue;
}

DriverApi makeApi() {
  DriverApi a{};
  a.cuInit = emuInit;
  a.cuDriverGetVersion = emuDriverGetVersion;
  a.cuDeviceGetCount = emuDeviceGetCount;
  a.cuDeviceGet = emuDeviceGet;
  a.cuDeviceGetName = emuDeviceGetName;
  a.cuDeviceGetAttribute = emuDeviceGetAttribute;
  a.cuDevicePrimaryCtxRetain = emuPrimaryCtxRetain;
  a.cuDevicePrimaryCtxRelease = emuPrimaryCtxRelease;
  a.cuCtxPushCurrent = emuCtxPushCurrent;
  a.cuCtxPopCurrent = emuCtxPopCurrent;
  a.cuGetErrorString = emuGetErrorString;
  a.cuGetErrorName = emuGetErrorName;
  addMemoryEntryPoints(a);
  addStreamEntryPoints(a);
  addModuleEntryPoints(a);
  a.emulated = true;
  return a;
}

}  // namespace
}  // namespace nnc::rt::cuda::emu::detail

namespace nnc::rt::cuda::emu {

const DriverApi* emulatedDriver() {
  static const DriverApi api = detail::makeApi();
  return &api;
}

}  // namespace nnc::rt::cuda::emu

#define NNC_EMU_EXPORT extern "C" __attribute__((visibility("default")))
NNC_EMU_EXPORT const nnc::rt::cuda::DriverApi* nnc_cuda_emulator_driver() {
  return nnc::rt::cuda::emu::emulatedDriver();
}
NNC_EMU_EXPORT const nnc::rt::cuda::CublasLtApi* nnc_cuda_emulator_cublaslt() {
  return nnc::rt::cuda::emu::emulatedCublasLt();
}
NNC_EMU_EXPORT unsigned long nnc_cuda_emulator_abi() { return nnc::rt::cuda::emu::emulatorAbi(); }
