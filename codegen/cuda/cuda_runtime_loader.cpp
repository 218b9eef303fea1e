// The CUDA driver API through dlopen/dlsym: just the entry points nnc needs, declared here with the
// driver's C ABI (no cuda.h), so building nnc needs no driver either.
#include "codegen/cuda/cuda_runtime_loader.h"

#include <dlfcn.h>

namespace nnc::codegen::cuda {

namespace {

// The driver's ABI types (cuda.h): CUresult is an int enum, handles are opaque pointers.
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
constexpr CUresult kSuccess = 0;
constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;

}  // namespace

struct CudaDevice::Api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuCtxCreate)(CUcontext*, unsigned, CUdevice);  // the _v2 ABI
  CUresult (*cuCtxDestroy)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuMemAlloc)(DevicePtr*, size_t);
  CUresult (*cuMemFree)(DevicePtr);
  CUresult (*cuMemcpyHtoD)(DevicePtr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, DevicePtr, size_t);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuGetErrorName)(CUresult, const char**);
};

namespace {

// Resolves `symbol` into `fn`; false (with *missing set) when the driver lacks it.
template <class F>
bool resolve(void* lib, const char* symbol, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!*fn && missing->empty()) *missing = symbol;
  return *fn != nullptr;
}

}  // namespace

CudaDevice::~CudaDevice() {
  if (api_) {
    for (void* m : modules_) api_->cuModuleUnload(m);
    if (context_) api_->cuCtxDestroy(context_);
  }
  if (lib_) dlclose(lib_);
}

Status CudaDevice::check(int result, const char* what) const {
  if (result == kSuccess) return Status::ok();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_ && api_->cuGetErrorName) api_->cuGetErrorName(result, &name);
  if (api_ && api_->cuGetErrorString) api_->cuGetErrorString(result, &text);
  return Status::error(std::string(what) + ": " + (name ? name : "CUDA error " + std::to_string(result)) +
                       (text ? std::string(" (") + text + ")" : ""));
}

Expected<std::unique_ptr<CudaDevice>> CudaDevice::open(int ordinal) {
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  d->lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!d->lib_) {
    const char* why = dlerror();
    return Status::error(std::string("libcuda.so.1 could not be opened: ") + (why ? why : "unknown reason"));
  }
  d->api_ = std::make_unique<Api>();
  Api& a = *d->api_;
  std::string missing;
  bool ok = resolve(d->lib_, "cuInit", &a.cuInit, &missing);
  ok &= resolve(d->lib_, "cuDeviceGetCount", &a.cuDeviceGetCount, &missing);
  ok &= resolve(d->lib_, "cuDeviceGet", &a.cuDeviceGet, &missing);
  ok &= resolve(d->lib_, "cuDeviceGetName", &a.cuDeviceGetName, &missing);
  ok &= resolve(d->lib_, "cuDeviceGetAttribute", &a.cuDeviceGetAttribute, &missing);
  ok &= resolve(d->lib_, "cuCtxCreate_v2", &a.cuCtxCreate, &missing);
  ok &= resolve(d->lib_, "cuCtxDestroy_v2", &a.cuCtxDestroy, &missing);
  ok &= resolve(d->lib_, "cuCtxSynchronize", &a.cuCtxSynchronize, &missing);
  ok &= resolve(d->lib_, "cuModuleLoadData", &a.cuModuleLoadData, &missing);
  ok &= resolve(d->lib_, "cuModuleUnload", &a.cuModuleUnload, &missing);
  ok &= resolve(d->lib_, "cuModuleGetFunction", &a.cuModuleGetFunction, &missing);
  ok &= resolve(d->lib_, "cuMemAlloc_v2", &a.cuMemAlloc, &missing);
  ok &= resolve(d->lib_, "cuMemFree_v2", &a.cuMemFree, &missing);
  ok &= resolve(d->lib_, "cuMemcpyHtoD_v2", &a.cuMemcpyHtoD, &missing);
  ok &= resolve(d->lib_, "cuMemcpyDtoH_v2", &a.cuMemcpyDtoH, &missing);
  ok &= resolve(d->lib_, "cuLaunchKernel", &a.cuLaunchKernel, &missing);
  ok &= resolve(d->lib_, "cuGetErrorString", &a.cuGetErrorString, &missing);
  ok &= resolve(d->lib_, "cuGetErrorName", &a.cuGetErrorName, &missing);
  if (!ok) return Status::error("libcuda.so.1 lacks " + missing);
  NNC_RETURN_IF_ERROR(d->check(a.cuInit(0), "cuInit"));
  int count = 0;
  NNC_RETURN_IF_ERROR(d->check(a.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= count)
    return Status::error("no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(count) + " present)");
  NNC_RETURN_IF_ERROR(d->check(a.cuDeviceGet(&d->device_, ordinal), "cuDeviceGet"));
  NNC_RETURN_IF_ERROR(d->check(a.cuCtxCreate(&d->context_, 0, d->device_), "cuCtxCreate"));
  return d;
}

std::string CudaDevice::name() const {
  char buf[256] = {};
  if (api_->cuDeviceGetName(buf, sizeof buf - 1, device_) != kSuccess) return "unknown device";
  return buf;
}

int CudaDevice::computeCapability() const {
  int major = 0, minor = 0;
  api_->cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, device_);
  api_->cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, device_);
  return major * 10 + minor;
}

Status CudaDevice::loadModule(const void* image, int* moduleIndex) {
  CUmodule m = nullptr;
  NNC_RETURN_IF_ERROR(check(api_->cuModuleLoadData(&m, image), "cuModuleLoadData"));
  modules_.push_back(m);
  *moduleIndex = static_cast<int>(modules_.size()) - 1;
  return Status::ok();
}

Expected<void*> CudaDevice::function(int moduleIndex, const std::string& name) {
  if (moduleIndex < 0 || moduleIndex >= static_cast<int>(modules_.size()))
    return Status::error("no CUDA module " + std::to_string(moduleIndex));
  CUfunction f = nullptr;
  NNC_RETURN_IF_ERROR(check(api_->cuModuleGetFunction(&f, modules_[moduleIndex], name.c_str()),
                            ("cuModuleGetFunction '" + name + "'").c_str()));
  return f;
}

Expected<DevicePtr> CudaDevice::alloc(size_t bytes) {
  DevicePtr p = 0;
  NNC_RETURN_IF_ERROR(check(api_->cuMemAlloc(&p, bytes == 0 ? 1 : bytes), "cuMemAlloc"));
  return p;
}

Status CudaDevice::free(DevicePtr ptr) { return check(api_->cuMemFree(ptr), "cuMemFree"); }

Status CudaDevice::copyToDevice(DevicePtr dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::ok();
  return check(api_->cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
}

Status CudaDevice::copyToHost(void* dst, DevicePtr src, size_t bytes) {
  if (bytes == 0) return Status::ok();
  return check(api_->cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH");
}

Status CudaDevice::launch(void* fn, const std::vector<DevicePtr>& slots, int64_t begin, int64_t end, LaunchDims dims) {
  std::vector<DevicePtr> ptrs = slots;  // cuLaunchKernel reads each argument through a pointer
  std::vector<void*> args;
  for (DevicePtr& p : ptrs) args.push_back(&p);
  args.push_back(&begin);
  args.push_back(&end);
  return check(api_->cuLaunchKernel(fn, dims.gridX, 1, 1, dims.blockX, 1, 1, 0, nullptr, args.data(), nullptr),
               "cuLaunchKernel");
}

Status CudaDevice::synchronize() { return check(api_->cuCtxSynchronize(), "cuCtxSynchronize"); }

}  // namespace nnc::codegen::cuda
