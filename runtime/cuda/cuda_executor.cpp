// The CUDA executor (see cuda_executor.h): device memory from the plan, kernels from the embedded
// module, launches on one stream, and every driver call checked.
#include "runtime/cuda/cuda_executor.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "runtime/builtins.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/launch_dims.h"
#include "runtime/executor.h"

namespace nnc::rt::cuda {
namespace {

// Device buffers for model inputs/outputs are carved out of one allocation at this alignment (what
// cuMemAlloc guarantees, and more than the 16-byte vector accesses of generated kernels need).
constexpr uint64_t kIoAlignment = 256;

uint64_t alignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// A failure on the way: the C ABI status and the message.
struct Failure {
  nnc_status status = NNC_OK;
  std::string message;
  explicit operator bool() const { return status != NNC_OK; }
};

Failure failure(nnc_status status, std::string message) { return {status, std::move(message)}; }

// Makes `ctx` current on this thread for a scope: the handle may be used from any thread, and the
// caller's own current context (if any) is restored afterwards.
class ContextScope {
 public:
  ContextScope(const DriverApi& api, CUcontext ctx) : api_(api) { pushed_ = api_.cuCtxPushCurrent(ctx); }
  ~ContextScope() {
    if (pushed_ == kCudaSuccess) {
      CUcontext popped = nullptr;
      api_.cuCtxPopCurrent(&popped);
    }
  }
  CUresult result() const { return pushed_; }

 private:
  const DriverApi& api_;
  CUresult pushed_;
};

int deviceOrdinal() {
  const char* env = std::getenv("NNC_CUDA_DEVICE");
  if (!env || !*env) return 0;
  char* end = nullptr;
  long v = std::strtol(env, &end, 10);
  return (*end || v < 0 || v > 1 << 16) ? -1 : static_cast<int>(v);
}

// Whether NNC_CUDA_SYNC=1: synchronise after every step, so that an asynchronous kernel fault is
// reported with the step that caused it (slower; for debugging).
bool syncEachStep() {
  const char* env = std::getenv("NNC_CUDA_SYNC");
  return env && env[0] == '1';
}

class CudaExecutor final : public DeviceExecutor {
 public:
  ~CudaExecutor() override { release(); }

  static Failure create(Plan plan, const uint8_t* weights, const ModuleImages& images,
                        std::unique_ptr<CudaExecutor>* out);

  const Plan& plan() const override { return plan_; }
  nnc_status run(const nnc_tensor* inputs, size_t numInputs, nnc_tensor* outputs, size_t numOutputs,
                 std::string* error) override;

 private:
  // One plan step bound to the device: kernel steps launch `fn` over device pointers; builtin steps
  // call `builtin` on host copies (see runBuiltin).
  struct BoundStep {
    CUfunction fn = nullptr;
    LaunchShape shape;
    std::vector<CUdeviceptr> devicePtrs;  // per param slot
    BuiltinFn builtin = nullptr;
    std::vector<std::unique_ptr<uint8_t[]>> staging;  // builtin: host copy per slot (null: see hostPtrs)
    std::vector<void*> hostPtrs;                      // builtin: host pointer per slot (patched per run)
  };

  CudaExecutor() = default;
  Failure check(CUresult r, const std::string& what) const {
    if (r == kCudaSuccess) return {};
    return failure(r == kCudaErrorOutOfMemory ? NNC_ERROR_OUT_OF_MEMORY : NNC_ERROR_RUNTIME,
                   describeError(*api_, r, what));
  }
  Failure open(const ModuleImages& images);
  Failure allocate(CUdeviceptr* ptr, uint64_t bytes, const std::string& what);
  Failure bind(const uint8_t* weights);
  CUdeviceptr devicePointer(const BufferRef& b) const;
  Failure runSteps(const nnc_tensor* inputs, nnc_tensor* outputs);
  Failure runBuiltin(size_t index, const nnc_tensor* inputs);
  void release();

  const DriverApi* api_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;  // the device's primary context, retained
  bool retained_ = false;
  CUstream stream_ = nullptr;
  CUmodule module_ = nullptr;
  CUdeviceptr arena_ = 0, weights_ = 0, io_ = 0;
  std::vector<uint64_t> inputOffsets_, outputOffsets_;  // in io_
  const uint8_t* hostWeights_ = nullptr;
  Plan plan_;
  std::vector<BoundStep> steps_;
  bool syncEachStep_ = false;
  std::mutex runMutex_;
};

Failure CudaExecutor::create(Plan plan, const uint8_t* weights, const ModuleImages& images,
                             std::unique_ptr<CudaExecutor>* out) {
  std::string message;
  if (!validatePlan(plan, &message)) return failure(NNC_ERROR_INTERNAL, "invalid plan: " + message);
  if (plan.target != Target::Cuda)
    return failure(NNC_ERROR_INTERNAL, "the plan is for the cpu target; the CUDA executor runs cuda plans only");
  if (plan.weightsSize > 0 && !weights)
    return failure(NNC_ERROR_INTERNAL,
                   "the plan needs " + std::to_string(plan.weightsSize) + " bytes of weights, but none were given");
  bool anyKernel = false;
  for (const Step& s : plan.steps) anyKernel |= s.kind == StepKind::Kernel;
  if (anyKernel && images.cubinSize == 0 && images.ptxSize == 0)
    return failure(NNC_ERROR_INTERNAL, "the plan has kernels but the model carries no CUDA module");

  std::unique_ptr<CudaExecutor> ex(new (std::nothrow) CudaExecutor());
  if (!ex) return failure(NNC_ERROR_OUT_OF_MEMORY, "out of memory creating the CUDA executor");
  std::string why;
  ex->api_ = openDriver(&why);
  if (!ex->api_) return failure(NNC_ERROR_NO_DEVICE, kNoDevicePrefix + why);
  ex->plan_ = std::move(plan);
  ex->hostWeights_ = weights;
  ex->syncEachStep_ = syncEachStep();
  if (Failure f = ex->open(anyKernel ? images : ModuleImages{})) return f;
  if (Failure f = ex->bind(weights)) return f;
  *out = std::move(ex);
  return {};
}

// Device, context, stream and module.
Failure CudaExecutor::open(const ModuleImages& images) {
  const DriverApi& a = *api_;
  const int ordinal = deviceOrdinal();
  if (ordinal < 0) return failure(NNC_ERROR_INVALID_ARGUMENT, "NNC_CUDA_DEVICE is not a device number");
  int count = 0;
  if (CUresult r = a.cuDeviceGetCount(&count); r != kCudaSuccess)
    return failure(NNC_ERROR_NO_DEVICE, kNoDevicePrefix + describeError(a, r, "cuDeviceGetCount"));
  if (ordinal >= count)
    return failure(NNC_ERROR_NO_DEVICE, std::string(kNoDevicePrefix) + "no CUDA device " + std::to_string(ordinal) +
                                            " (" + std::to_string(count) + " present)");
  if (Failure f = check(a.cuDeviceGet(&device_, ordinal), "cuDeviceGet")) return f;
  if (Failure f = check(a.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain")) return f;
  retained_ = true;
  ContextScope scope(a, context_);
  if (Failure f = check(scope.result(), "cuCtxPushCurrent")) return f;
  if (Failure f = check(a.cuStreamCreate(&stream_, kStreamNonBlocking), "cuStreamCreate")) return f;
  if (images.cubinSize == 0 && images.ptxSize == 0) return {};  // builtins only

  // The cubin is for one architecture; a GPU of another one takes the PTX (JIT-compiled by the
  // driver, for newer GPUs). Both failing is reported with both reasons.
  std::string cubinWhy = "no cubin embedded";
  if (images.cubinSize > 0) {
    CUresult r = a.cuModuleLoadData(&module_, images.cubin);
    if (r == kCudaSuccess) return {};
    module_ = nullptr;
    cubinWhy = describeError(a, r, "cuModuleLoadData (cubin)");
    if (r == kCudaErrorOutOfMemory) return failure(NNC_ERROR_OUT_OF_MEMORY, cubinWhy);
  }
  if (images.ptxSize == 0 || !images.ptx || images.ptx[images.ptxSize] != '\0')
    return failure(NNC_ERROR_RUNTIME, cubinWhy + "; and no usable PTX embedded");
  CUresult r = a.cuModuleLoadData(&module_, images.ptx);
  if (r == kCudaSuccess) return {};
  module_ = nullptr;
  char name[256] = {};
  a.cuDeviceGetName(name, sizeof name - 1, device_);
  int major = 0, minor = 0;
  a.cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, device_);
  a.cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, device_);
  return failure(r == kCudaErrorOutOfMemory ? NNC_ERROR_OUT_OF_MEMORY : NNC_ERROR_RUNTIME,
                 "cannot load the model's kernels on " + std::string(name) + " (sm_" + std::to_string(major) +
                     std::to_string(minor) + "): " + cubinWhy + "; " + describeError(a, r, "cuModuleLoadData (PTX)"));
}

Failure CudaExecutor::allocate(CUdeviceptr* ptr, uint64_t bytes, const std::string& what) {
  *ptr = 0;
  if (bytes == 0) return {};  // cuMemAlloc refuses 0; nothing will be read or written there
  CUresult r = api_->cuMemAlloc(ptr, static_cast<size_t>(bytes));
  if (r == kCudaSuccess) return {};
  *ptr = 0;
  if (r == kCudaErrorOutOfMemory)
    return failure(NNC_ERROR_OUT_OF_MEMORY, "out of device memory allocating the " + std::to_string(bytes) +
                                                "-byte " + what + ": " + describeError(*api_, r, "cuMemAlloc"));
  return check(r, "cuMemAlloc (" + what + ")");
}

CUdeviceptr CudaExecutor::devicePointer(const BufferRef& b) const {
  switch (b.kind) {
    case BufferKind::Arena:
      return arena_ ? arena_ + b.offset : 0;
    case BufferKind::Weight:
      return weights_ ? weights_ + b.offset : 0;
    case BufferKind::Input:
      return io_ ? io_ + inputOffsets_[b.offset] : 0;
    case BufferKind::Output:
      return io_ ? io_ + outputOffsets_[b.offset] : 0;
  }
  return 0;
}

// Device memory (arena, weights, inputs/outputs), the weights upload, and each step's bindings.
Failure CudaExecutor::bind(const uint8_t* weights) {
  const DriverApi& a = *api_;
  ContextScope scope(a, context_);
  if (Failure f = check(scope.result(), "cuCtxPushCurrent")) return f;

  uint64_t ioBytes = 0;
  for (const TensorDesc& d : plan_.inputs) {
    inputOffsets_.push_back(ioBytes);
    ioBytes = alignUp(ioBytes + d.byteSize, kIoAlignment);
  }
  for (const TensorDesc& d : plan_.outputs) {
    outputOffsets_.push_back(ioBytes);
    ioBytes = alignUp(ioBytes + d.byteSize, kIoAlignment);
  }
  if (Failure f = allocate(&arena_, plan_.arenaSize, "device arena")) return f;
  if (Failure f = allocate(&io_, ioBytes, "input/output buffers")) return f;
  if (Failure f = allocate(&weights_, plan_.weightsSize, "device copy of the weights")) return f;
  if (plan_.weightsSize > 0) {
    if (Failure f = check(a.cuMemcpyHtoDAsync(weights_, weights, static_cast<size_t>(plan_.weightsSize), stream_),
                          "cuMemcpyHtoD (weights)"))
      return f;
    if (Failure f = check(a.cuStreamSynchronize(stream_), "cuStreamSynchronize (weights)")) return f;
  }

  steps_.resize(plan_.steps.size());
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const Step& s = plan_.steps[i];
    BoundStep& b = steps_[i];
    const std::string prefix = "step " + std::to_string(i) + " (" + s.origin + "): ";
    if (s.kind == StepKind::Kernel) {
      if (!module_) return failure(NNC_ERROR_INTERNAL, prefix + "kernel '" + s.name + "' but no CUDA module");
      CUresult r = a.cuModuleGetFunction(&b.fn, module_, s.name.c_str());
      if (r != kCudaSuccess)
        return failure(NNC_ERROR_INTERNAL, prefix + describeError(a, r, "kernel '" + s.name + "' not in the module"));
      b.shape = launchShape(s.gpuMapping, s.outerSize);
      for (int32_t arg : s.args) b.devicePtrs.push_back(devicePointer(plan_.buffers[static_cast<size_t>(arg)]));
      continue;
    }
    b.builtin = findBuiltin(s.name);
    if (!b.builtin) return failure(NNC_ERROR_INTERNAL, prefix + "builtin symbol '" + s.name + "' not found");
    for (int32_t arg : s.args) {
      const BufferRef& ref = plan_.buffers[static_cast<size_t>(arg)];
      b.devicePtrs.push_back(devicePointer(ref));
      std::unique_ptr<uint8_t[]> host;
      void* hostPtr = nullptr;
      if (ref.kind == BufferKind::Weight) {
        // Kernels and builtins never write weights; const dropped only for the uniform signature.
        hostPtr = weights ? const_cast<uint8_t*>(weights) + ref.offset : nullptr;
      } else if (ref.kind != BufferKind::Input) {  // model inputs: the caller's host data, per run
        host.reset(new (std::nothrow) uint8_t[ref.size ? ref.size : 1]);
        if (!host) return failure(NNC_ERROR_OUT_OF_MEMORY, prefix + "out of memory for host staging buffers");
        hostPtr = host.get();
      }
      b.staging.push_back(std::move(host));
      b.hostPtrs.push_back(hostPtr);
    }
  }
  return {};
}

// Opaque builtins (TopK) have no CUDA implementation yet: their buffers are copied to the host, the
// CPU builtin runs there, and what it may have written (arena and output buffers) is copied back.
// Model inputs are read straight from the caller's host memory and weights from the host copy.
Failure CudaExecutor::runBuiltin(size_t index, const nnc_tensor* inputs) {
  const DriverApi& a = *api_;
  const Step& s = plan_.steps[index];
  BoundStep& b = steps_[index];
  const std::string prefix = "step " + std::to_string(index) + " (" + s.origin + "): ";
  for (size_t slot = 0; slot < s.args.size(); ++slot) {
    const BufferRef& ref = plan_.buffers[static_cast<size_t>(s.args[slot])];
    if (ref.kind == BufferKind::Input) b.hostPtrs[slot] = inputs[ref.offset].data;
    if (!b.staging[slot] || ref.size == 0) continue;
    if (Failure f = check(a.cuMemcpyDtoHAsync(b.staging[slot].get(), b.devicePtrs[slot], ref.size, stream_),
                          prefix + "cuMemcpyDtoH (builtin '" + s.name + "' argument " + std::to_string(slot) + ")"))
      return f;
  }
  if (Failure f = check(a.cuStreamSynchronize(stream_), prefix + "cuStreamSynchronize (before builtin '" + s.name + "')"))
    return f;
  if (int rc = b.builtin(s.params.data(), b.hostPtrs.data()); rc != 0)
    return failure(NNC_ERROR_RUNTIME, prefix + "builtin '" + s.name + "' failed with code " + std::to_string(rc));
  for (size_t slot = 0; slot < s.args.size(); ++slot) {
    const BufferRef& ref = plan_.buffers[static_cast<size_t>(s.args[slot])];
    if (!b.staging[slot] || ref.size == 0) continue;
    if (Failure f = check(a.cuMemcpyHtoDAsync(b.devicePtrs[slot], b.staging[slot].get(), ref.size, stream_),
                          prefix + "cuMemcpyHtoD (builtin '" + s.name + "' result " + std::to_string(slot) + ")"))
      return f;
  }
  // The staging buffers are reused by the next run: wait until the copies have read them.
  return check(a.cuStreamSynchronize(stream_), prefix + "cuStreamSynchronize (after builtin '" + s.name + "')");
}

Failure CudaExecutor::runSteps(const nnc_tensor* inputs, nnc_tensor* outputs) {
  const DriverApi& a = *api_;
  for (size_t i = 0; i < plan_.inputs.size(); ++i) {
    const uint64_t bytes = plan_.inputs[i].byteSize;
    if (bytes == 0) continue;
    if (Failure f = check(a.cuMemcpyHtoDAsync(io_ + inputOffsets_[i], inputs[i].data, bytes, stream_),
                          "cuMemcpyHtoD (input " + std::to_string(i) + " '" + plan_.inputs[i].name + "')"))
      return f;
  }
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const Step& s = plan_.steps[i];
    BoundStep& b = steps_[i];
    const std::string where = "step " + std::to_string(i) + " (" + s.origin + "): ";
    if (b.builtin) {
      if (Failure f = runBuiltin(i, inputs)) return f;
      continue;
    }
    if (s.outerSize == 0) continue;  // an empty tensor: nothing to compute
    // The emitted signature: one pointer per param slot, then i64 begin, i64 end.
    std::vector<CUdeviceptr> ptrs = b.devicePtrs;
    int64_t begin = 0, end = s.outerSize;
    std::vector<void*> args;
    args.reserve(ptrs.size() + 2);
    for (CUdeviceptr& p : ptrs) args.push_back(&p);
    args.push_back(&begin);
    args.push_back(&end);
    CUresult r = a.cuLaunchKernel(b.fn, b.shape.gridX, 1, 1, b.shape.blockX, 1, 1, 0, stream_, args.data(), nullptr);
    if (Failure f = check(r, where + "cuLaunchKernel '" + s.name + "'")) return f;
    if (syncEachStep_)
      if (Failure f = check(a.cuStreamSynchronize(stream_), where + "kernel '" + s.name + "'")) return f;
  }
  for (size_t i = 0; i < plan_.outputs.size(); ++i) {
    const uint64_t bytes = plan_.outputs[i].byteSize;
    if (bytes == 0) continue;
    if (Failure f = check(a.cuMemcpyDtoHAsync(outputs[i].data, io_ + outputOffsets_[i], bytes, stream_),
                          "cuMemcpyDtoH (output " + std::to_string(i) + " '" + plan_.outputs[i].name + "')"))
      return f;
  }
  // Kernel faults are asynchronous: they surface here, or at the first copy after them.
  return check(a.cuStreamSynchronize(stream_),
               syncEachStep_ ? std::string("cuStreamSynchronize")
                             : std::string("running the kernels (NNC_CUDA_SYNC=1 names the failing step)"));
}

nnc_status CudaExecutor::run(const nnc_tensor* inputs, size_t numInputs, nnc_tensor* outputs, size_t numOutputs,
                             std::string* error) {
  std::lock_guard<std::mutex> lock(runMutex_);
  if (nnc_status st = checkRunArguments(plan_, inputs, numInputs, outputs, numOutputs, error); st != NNC_OK)
    return st;
  ContextScope scope(*api_, context_);
  Failure f = check(scope.result(), "cuCtxPushCurrent");
  if (!f) f = runSteps(inputs, outputs);
  if (!f) return NNC_OK;
  if (!f.message.empty() && error) *error = std::move(f.message);
  // Any failed driver call during a run is a runtime error; leave no work in flight on our buffers.
  if (scope.result() == kCudaSuccess) api_->cuStreamSynchronize(stream_);
  return f.status == NNC_ERROR_OUT_OF_MEMORY ? NNC_ERROR_OUT_OF_MEMORY : NNC_ERROR_RUNTIME;
}

void CudaExecutor::release() {
  if (!api_ || !retained_) return;
  {
    ContextScope scope(*api_, context_);
    if (scope.result() == kCudaSuccess) {
      if (stream_) api_->cuStreamSynchronize(stream_);
      for (CUdeviceptr p : {arena_, io_, weights_})
        if (p) api_->cuMemFree(p);
      if (module_) api_->cuModuleUnload(module_);
      if (stream_) api_->cuStreamDestroy(stream_);
    }
  }
  arena_ = io_ = weights_ = 0;
  module_ = nullptr;
  stream_ = nullptr;
  api_->cuDevicePrimaryCtxRelease(device_);
  retained_ = false;
}

}  // namespace

nnc_model* createCudaModelHandle(Plan plan, const uint8_t* weights, std::shared_ptr<void> keepAlive,
                                 const ModuleImages& images, const nnc_options* opts, std::string* error,
                                 nnc_status* status) {
  auto failWith = [&](nnc_status st, std::string message) -> nnc_model* {
    if (error) *error = std::move(message);
    if (status) *status = st;
    return nullptr;
  };
  if (opts && opts->struct_size < sizeof(size_t))
    return failWith(NNC_ERROR_INVALID_ARGUMENT, "nnc_options.struct_size is " + std::to_string(opts->struct_size) +
                                                    ", expected sizeof(nnc_options)");
  // num_threads has no meaning on the GPU (host builtins run on the calling thread).
  std::unique_ptr<nnc_model> m(new (std::nothrow) nnc_model());
  if (!m) return failWith(NNC_ERROR_OUT_OF_MEMORY, "out of memory creating the model");
  m->keepAlive = std::move(keepAlive);
  std::unique_ptr<CudaExecutor> ex;
  if (Failure f = CudaExecutor::create(std::move(plan), weights, images, &ex)) return failWith(f.status, f.message);
  m->device = std::move(ex);
  if (status) *status = NNC_OK;
  return m.release();
}

bool cudaDeviceAvailable(std::string* why) {
  const DriverApi* api = openDriver(why);
  if (!api) return false;
  const int ordinal = deviceOrdinal();
  int count = 0;
  if (ordinal < 0 || api->cuDeviceGetCount(&count) != kCudaSuccess || ordinal >= count) {
    if (why) *why = "no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(count) + " present)";
    return false;
  }
  return true;
}

bool cudaDeviceMemory(int ordinal, size_t* freeBytes, size_t* totalBytes, std::string* error) {
  std::string why;
  const DriverApi* api = openDriver(&why);
  if (!api) {
    if (error) *error = kNoDevicePrefix + why;
    return false;
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUresult r = api->cuDeviceGet(&dev, ordinal);
  if (r == kCudaSuccess) r = api->cuDevicePrimaryCtxRetain(&ctx, dev);
  if (r != kCudaSuccess) {
    if (error) *error = describeError(*api, r, "cuDevicePrimaryCtxRetain");
    return false;
  }
  {
    ContextScope scope(*api, ctx);
    r = scope.result();
    if (r == kCudaSuccess) r = api->cuMemGetInfo(freeBytes, totalBytes);
  }
  api->cuDevicePrimaryCtxRelease(dev);
  if (r != kCudaSuccess && error) *error = describeError(*api, r, "cuMemGetInfo");
  return r == kCudaSuccess;
}

}  // namespace nnc::rt::cuda
