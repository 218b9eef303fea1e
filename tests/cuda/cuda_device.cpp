// Single-kernel runs for the CUDA backend's tests (see cuda_device.h).
#include "tests/cuda/cuda_device.h"

#include "runtime/cuda/emulator.h"

namespace nnc::codegen::cuda {

CudaDevice::~CudaDevice() {
  if (!api_) return;
  if (stream_) api_->cuStreamSynchronize(stream_);
  for (rt::cuda::CUmodule m : modules_) api_->cuModuleUnload(m);
  if (stream_) api_->cuStreamDestroy(stream_);
  if (context_) {
    rt::cuda::CUcontext popped = nullptr;
    api_->cuCtxPopCurrent(&popped);
    api_->cuDevicePrimaryCtxRelease(device_);
  }
}

Status CudaDevice::check(int result, const char* what) const {
  if (result == rt::cuda::kCudaSuccess) return Status::ok();
  return Status::error(rt::cuda::describeError(*api_, result, what));
}

Expected<std::unique_ptr<CudaDevice>> CudaDevice::open(int ordinal) {
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  std::string why;
  const rt::cuda::DriverApi* api = rt::cuda::openDriver(&why);
  if (!api) return Status::error(why);
  d->api_ = api;
  int count = 0;
  NNC_RETURN_IF_ERROR(d->check(api->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= count)
    return Status::error("no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(count) + " present)");
  NNC_RETURN_IF_ERROR(d->check(api->cuDeviceGet(&d->device_, ordinal), "cuDeviceGet"));
  rt::cuda::CUcontext context = nullptr;
  NNC_RETURN_IF_ERROR(d->check(api->cuDevicePrimaryCtxRetain(&context, d->device_), "cuDevicePrimaryCtxRetain"));
  if (Status s = d->check(api->cuCtxPushCurrent(context), "cuCtxPushCurrent"); !s.isOk()) {
    api->cuDevicePrimaryCtxRelease(d->device_);
    return s;
  }
  d->context_ = context;
  NNC_RETURN_IF_ERROR(d->check(api->cuStreamCreate(&d->stream_, rt::cuda::kStreamNonBlocking), "cuStreamCreate"));
  return d;
}

std::string CudaDevice::name() const {
  char buf[256] = {};
  if (api_->cuDeviceGetName(buf, sizeof buf - 1, device_) != rt::cuda::kCudaSuccess) return "unknown device";
  return buf;
}

int CudaDevice::computeCapability() const {
  int major = 0, minor = 0;
  api_->cuDeviceGetAttribute(&major, rt::cuda::kAttrComputeCapabilityMajor, device_);
  api_->cuDeviceGetAttribute(&minor, rt::cuda::kAttrComputeCapabilityMinor, device_);
  return major * 10 + minor;
}

Status CudaDevice::loadModule(const CompiledCuda& compiled, const std::string& source, int* moduleIndex) {
  rt::cuda::CUmodule m = nullptr;
  const std::string image = rt::cuda::emu::kEmulatedSourceMagic + source;
  NNC_RETURN_IF_ERROR(check(api_->cuModuleLoadData(&m, emulated() ? static_cast<const void*>(image.c_str())
                                                                  : static_cast<const void*>(compiled.cubin.data())),
                            "cuModuleLoadData"));
  modules_.push_back(m);
  *moduleIndex = static_cast<int>(modules_.size()) - 1;
  return Status::ok();
}

Expected<void*> CudaDevice::function(int moduleIndex, const std::string& name) {
  if (moduleIndex < 0 || moduleIndex >= static_cast<int>(modules_.size()))
    return Status::error("no CUDA module " + std::to_string(moduleIndex));
  rt::cuda::CUfunction f = nullptr;
  NNC_RETURN_IF_ERROR(check(api_->cuModuleGetFunction(&f, modules_[moduleIndex], name.c_str()),
                            ("cuModuleGetFunction '" + name + "'").c_str()));
  return f;
}

Expected<DevicePtr> CudaDevice::alloc(size_t bytes) {
  rt::cuda::CUdeviceptr p = 0;
  NNC_RETURN_IF_ERROR(check(api_->cuMemAlloc(&p, bytes == 0 ? 1 : bytes), "cuMemAlloc"));
  return static_cast<DevicePtr>(p);
}

Status CudaDevice::free(DevicePtr ptr) { return check(api_->cuMemFree(ptr), "cuMemFree"); }

Status CudaDevice::copyToDevice(DevicePtr dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::ok();
  NNC_RETURN_IF_ERROR(check(api_->cuMemcpyHtoDAsync(dst, src, bytes, stream_), "cuMemcpyHtoDAsync"));
  return synchronize();
}

Status CudaDevice::copyToHost(void* dst, DevicePtr src, size_t bytes) {
  if (bytes == 0) return Status::ok();
  NNC_RETURN_IF_ERROR(check(api_->cuMemcpyDtoHAsync(dst, src, bytes, stream_), "cuMemcpyDtoHAsync"));
  return synchronize();
}

Status CudaDevice::launch(void* fn, const std::vector<DevicePtr>& slots, int64_t begin, int64_t end, LaunchDims dims) {
  std::vector<DevicePtr> ptrs = slots;  // cuLaunchKernel reads each argument through a pointer
  std::vector<void*> args;
  for (DevicePtr& p : ptrs) args.push_back(&p);
  args.push_back(&begin);
  args.push_back(&end);
  return check(api_->cuLaunchKernel(fn, dims.gridX, 1, 1, dims.blockX, 1, 1, 0, stream_, args.data(), nullptr),
               "cuLaunchKernel");
}

Status CudaDevice::synchronize() { return check(api_->cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

}  // namespace nnc::codegen::cuda
