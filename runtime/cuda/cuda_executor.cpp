// The CUDA executor (see cuda_executor.h): device memory from the plan, kernels from the embedded
// module, launches on one stream (replayed from CUDA graphs where possible), and every driver call
// checked.
#include "runtime/cuda/cuda_executor.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "builtins/builtins.h"
#include "runtime/cuda/cublaslt.h"
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

// CUDA Graphs are on unless NNC_CUDA_GRAPHS=0.
bool graphsRequested() {
  const char* env = std::getenv("NNC_CUDA_GRAPHS");
  return !(env && env[0] == '0' && env[1] == '\0');
}

// What nnc_options says to a cuda model (fields the caller's struct is too short for keep defaults).
struct CudaOptions {
  bool deviceBuffers = false;
  nnc_cuda_graphs graphs = NNC_CUDA_GRAPHS_DEFAULT;
};

Failure readOptions(const nnc_options* opts, CudaOptions* out) {
  if (!opts) return {};
  if (opts->struct_size < sizeof(size_t))
    return failure(NNC_ERROR_INVALID_ARGUMENT, "nnc_options.struct_size is " + std::to_string(opts->struct_size) +
                                                   ", expected sizeof(nnc_options)");
  auto has = [&](size_t offset, size_t size) { return opts->struct_size >= offset + size; };
  // num_threads has no meaning on the GPU (host builtins run on the calling thread).
  if (has(offsetof(nnc_options, device_buffers), sizeof(opts->device_buffers))) {
    if (opts->device_buffers != 0 && opts->device_buffers != 1)
      return failure(NNC_ERROR_INVALID_ARGUMENT,
                     "nnc_options.device_buffers is " + std::to_string(opts->device_buffers) + ", expected 0 or 1");
    out->deviceBuffers = opts->device_buffers == 1;
  }
  if (has(offsetof(nnc_options, cuda_graphs), sizeof(opts->cuda_graphs))) {
    if (opts->cuda_graphs < NNC_CUDA_GRAPHS_DEFAULT || opts->cuda_graphs > NNC_CUDA_GRAPHS_OFF)
      return failure(NNC_ERROR_INVALID_ARGUMENT, "nnc_options.cuda_graphs is " + std::to_string(opts->cuda_graphs) +
                                                     ", expected an nnc_cuda_graphs value (0, 1 or 2)");
    out->graphs = static_cast<nnc_cuda_graphs>(opts->cuda_graphs);
  }
  return {};
}

class CudaExecutor final : public DeviceExecutor {
 public:
  ~CudaExecutor() override { release(); }

  static Failure create(Plan plan, const uint8_t* weights, const ModuleImages& images, const CudaOptions& options,
                        std::unique_ptr<CudaExecutor>* out);

  const Plan& plan() const override { return plan_; }
  nnc_status run(const nnc_tensor* inputs, size_t numInputs, nnc_tensor* outputs, size_t numOutputs,
                 std::string* error) override;
  CudaRunStats stats() {
    std::lock_guard<std::mutex> lock(runMutex_);
    return stats_;
  }

 private:
  // One plan step bound to the device: kernel steps launch `fn` over device pointers; library steps
  // enqueue `gemm`; builtin steps call `builtin` on host copies (see runBuiltin).
  struct BoundStep {
    CUfunction fn = nullptr;
    LaunchShape shape;
    std::vector<CUdeviceptr> devicePtrs;  // per param slot
    std::unique_ptr<GemmRunner> gemm;     // a library GEMM step
    BuiltinFn builtin = nullptr;
    std::vector<std::unique_ptr<uint8_t[]>> staging;  // builtin: host copy per slot (null: see hostPtrs)
    std::vector<void*> hostPtrs;                      // builtin: host pointer per slot (patched per run)
  };

  // A maximal run of device steps (kernels, library GEMMs) [first, end) between host builtins: what one
  // CUDA graph holds.
  // Every pointer its launches take is the executor's own device memory (arena, weights, and the
  // input/output buffers the caller's data is copied into and out of outside the graph), so a graph
  // captured once stays valid for every later run: there is nothing to re-capture.
  struct Segment {
    size_t first = 0, end = 0;
    size_t launches = 0;         // kernels with a non-empty outer domain, and GEMMs
    CUgraphExec exec = nullptr;  // instantiated on the segment's first run
    bool captureFailed = false;  // then the segment launches kernel by kernel from now on
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
  Failure checkDeviceBuffer(const nnc_tensor& t, uint64_t bytes, const std::string& what) const;
  Failure copyIn(CUdeviceptr dst, const nnc_tensor& src, uint64_t bytes, const std::string& what);
  Failure copyOut(const nnc_tensor& dst, CUdeviceptr src, uint64_t bytes, const std::string& what);
  Failure runBuiltin(size_t index, const nnc_tensor* inputs);
  Failure launchStep(size_t index);
  Failure bindGemm(size_t index);
  Failure runSegment(Segment& segment);
  void captureSegment(Segment& segment);
  void release();

  const DriverApi* api_ = nullptr;
  // cuBLASLt, opened only for plans with GEMM steps: the library, a handle and the one workspace
  // every GEMM of this executor uses (they run one at a time, on stream_).
  const CublasLtApi* lt_ = nullptr;
  void* ltHandle_ = nullptr;
  CUdeviceptr gemmWorkspace_ = 0;
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
  std::vector<Segment> segments_;  // in step order
  // Check steps (Step::check): their result in the arena, read back once per run after all steps.
  // Kernels clamp every data-dependent index, so running past a failed check stays in bounds, and
  // reading the results at the end keeps the checks inside the captured graphs.
  struct CheckSlot {
    size_t step = 0;
    CUdeviceptr result = 0;
  };
  std::vector<CheckSlot> checks_;
  std::vector<int64_t> checkResults_;  // kCheckResultSize per check
  bool syncEachStep_ = false;
  bool deviceBuffers_ = false;  // nnc_options.device_buffers: the caller's tensors are device memory
  CudaRunStats stats_;          // guarded by runMutex_
  std::mutex runMutex_;
};

// Device memory failures come back as CUDA_ERROR_OUT_OF_MEMORY (allocate()); host-side tables
// throw std::bad_alloc instead, which the function-try-block turns into the same status (ex's
// destructor has released whatever device memory was already allocated).
Failure CudaExecutor::create(Plan plan, const uint8_t* weights, const ModuleImages& images, const CudaOptions& options,
                             std::unique_ptr<CudaExecutor>* out) try {
  std::string message;
  if (!validatePlan(plan, &message)) return failure(NNC_ERROR_INTERNAL, "invalid plan: " + message);
  if (plan.target != Target::Cuda)
    return failure(NNC_ERROR_INTERNAL, "the plan is for the cpu target; the CUDA executor runs cuda plans only");
  if (plan.weightsSize > 0 && !weights)
    return failure(NNC_ERROR_INTERNAL,
                   "the plan needs " + std::to_string(plan.weightsSize) + " bytes of weights, but none were given");
  bool anyKernel = false;
  for (const Step& s : plan.steps) anyKernel |= s.kind == StepKind::Kernel;
  if (anyKernel && images.cubinSize == 0 && images.ptxSize == 0 && images.sourceSize == 0)
    return failure(NNC_ERROR_INTERNAL, "the plan has kernels but the model carries no CUDA module");

  std::unique_ptr<CudaExecutor> ex(new (std::nothrow) CudaExecutor());
  if (!ex) return failure(NNC_ERROR_OUT_OF_MEMORY, "out of memory creating the CUDA executor");
  std::string why;
  ex->api_ = openDriver(&why);
  if (!ex->api_) return failure(NNC_ERROR_NO_DEVICE, kNoDevicePrefix + why);
  ex->plan_ = std::move(plan);
  ex->hostWeights_ = weights;
  ex->syncEachStep_ = syncEachStep();
  ex->deviceBuffers_ = options.deviceBuffers;
  // Graph capture forbids the per-step synchronisation of NNC_CUDA_SYNC=1 (a debugging mode anyway).
  // An explicit nnc_options.cuda_graphs overrides the environment.
  if (options.graphs == NNC_CUDA_GRAPHS_OFF)
    ex->stats_.graphsOffReason = "nnc_options.cuda_graphs is off";
  else if (options.graphs == NNC_CUDA_GRAPHS_DEFAULT && !graphsRequested())
    ex->stats_.graphsOffReason = "NNC_CUDA_GRAPHS=0";
  else if (ex->syncEachStep_)
    ex->stats_.graphsOffReason = "NNC_CUDA_SYNC=1 synchronises after every step";
  else if (!ex->api_->hasGraphs())
    ex->stats_.graphsOffReason = "the CUDA driver lacks the graph API";
  ex->stats_.graphsEnabled = ex->stats_.graphsOffReason.empty();
  if (Failure f = ex->open(anyKernel ? images : ModuleImages{})) return f;
  if (Failure f = ex->bind(weights)) return f;
  *out = std::move(ex);
  return {};
} catch (const std::bad_alloc&) {
  return failure(NNC_ERROR_OUT_OF_MEMORY, "out of memory creating the CUDA executor");
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
  if (images.cubinSize == 0 && images.ptxSize == 0 && images.sourceSize == 0) return {};  // builtins only
  if (a.emulated) {
    if (images.sourceSize == 0 || !images.source || images.source[images.sourceSize] != '\0')
      return failure(NNC_ERROR_RUNTIME, "the CUDA emulator needs the kernels' CUDA C++ source, which this model lacks");
    return check(a.cuModuleLoadData(&module_, images.source), "cuModuleLoadData (emulated CUDA C++)");
  }

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
    return failure(NNC_ERROR_OUT_OF_MEMORY, "out of device memory allocating the " + std::to_string(bytes) + "-byte " +
                                                what + ": " + describeError(*api_, r, "cuMemAlloc"));
  return check(r, "cuMemAlloc (" + what + ")");
}

CUdeviceptr CudaExecutor::devicePointer(const BufferRef& b) const {
  switch (b.kind) {
    case BufferKind::Arena: return arena_ ? arena_ + b.offset : 0;
    case BufferKind::Weight: return weights_ ? weights_ + b.offset : 0;
    case BufferKind::Input: return io_ ? io_ + inputOffsets_[b.offset] : 0;
    case BufferKind::Output: return io_ ? io_ + outputOffsets_[b.offset] : 0;
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
      if (!s.check.empty()) checks_.push_back({i, b.devicePtrs.back()});  // validatePlan: an arena buffer
      continue;
    }
    if (s.kind == StepKind::Library) {
      if (Failure f = bindGemm(i)) return f;
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
      } else if (ref.kind != BufferKind::Input || deviceBuffers_) {  // else the caller's host data, per run
        host.reset(new (std::nothrow) uint8_t[ref.size ? ref.size : 1]);
        if (!host) return failure(NNC_ERROR_OUT_OF_MEMORY, prefix + "out of memory for host staging buffers");
        hostPtr = host.get();
      }
      b.staging.push_back(std::move(host));
      b.hostPtrs.push_back(hostPtr);
    }
  }
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const Step& s = plan_.steps[i];
    if (s.kind == StepKind::Builtin) continue;
    if (segments_.empty() || segments_.back().end != i) segments_.push_back(Segment{i, i});
    Segment& seg = segments_.back();
    seg.end = i + 1;
    if (s.kind == StepKind::Library || s.outerSize > 0) ++seg.launches;
  }
  stats_.segments = static_cast<int64_t>(segments_.size());
  checkResults_.assign(checks_.size() * kCheckResultSize, 0);
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
    if (ref.kind == BufferKind::Input && !deviceBuffers_) b.hostPtrs[slot] = inputs[ref.offset].data;
    if (!b.staging[slot] || ref.size == 0) continue;
    if (Failure f = check(a.cuMemcpyDtoHAsync(b.staging[slot].get(), b.devicePtrs[slot], ref.size, stream_),
                          prefix + "cuMemcpyDtoH (builtin '" + s.name + "' argument " + std::to_string(slot) + ")"))
      return f;
  }
  if (Failure f =
          check(a.cuStreamSynchronize(stream_), prefix + "cuStreamSynchronize (before builtin '" + s.name + "')"))
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

// A library GEMM step: cuBLASLt (opened, with its handle and workspace, for the first one) and a runner
// prepared for the step's fixed device buffers. Called from bind() with the context current.
Failure CudaExecutor::bindGemm(size_t index) {
  const Step& s = plan_.steps[index];
  BoundStep& b = steps_[index];
  const std::string prefix = "step " + std::to_string(index) + " (" + s.origin + "): ";
  for (int32_t arg : s.args) b.devicePtrs.push_back(devicePointer(plan_.buffers[static_cast<size_t>(arg)]));
  std::string why;
  if (!lt_) {
    lt_ = openCublasLt(&why);
    if (!lt_) return failure(NNC_ERROR_RUNTIME, prefix + "the model's GEMMs need cuBLASLt: " + why);
    if (!createLtHandle(*lt_, &ltHandle_, &why)) {
      ltHandle_ = nullptr;
      return failure(NNC_ERROR_RUNTIME, prefix + why);
    }
    if (Failure f = allocate(&gemmWorkspace_, kGemmWorkspaceBytes, "cuBLASLt workspace")) return f;
  }
  GemmParams p;
  if (!decodeGemm(s.params, &p, &why)) return failure(NNC_ERROR_INTERNAL, prefix + why);  // validated before
  GemmBuffers buffers;
  buffers.a = b.devicePtrs[0];
  buffers.b = b.devicePtrs[1];
  buffers.c = b.devicePtrs[2];
  if (p.hasBias()) buffers.bias = b.devicePtrs[3];
  buffers.workspace = gemmWorkspace_;
  buffers.workspaceBytes = kGemmWorkspaceBytes;
  b.gemm = GemmRunner::create(*lt_, ltHandle_, p, buffers, &why);
  if (!b.gemm) return failure(NNC_ERROR_RUNTIME, prefix + why);
  return {};
}

// One device step on stream_: a kernel launch or a library GEMM.
Failure CudaExecutor::launchStep(size_t index) {
  const DriverApi& a = *api_;
  const Step& s = plan_.steps[index];
  BoundStep& b = steps_[index];
  const std::string where = "step " + std::to_string(index) + " (" + s.origin + "): ";
  if (b.gemm) {
    std::string why;
    if (!b.gemm->run(stream_, &why)) return failure(NNC_ERROR_RUNTIME, where + why);
    if (syncEachStep_)
      if (Failure f = check(a.cuStreamSynchronize(stream_), where + "gemm")) return f;
    return {};
  }
  if (s.outerSize == 0) return {};  // an empty tensor: nothing to compute
  // The emitted signature: one pointer per param slot, then i64 begin, i64 end. The driver copies
  // the values at launch (and at capture), so these locals may go out of scope afterwards.
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
  return {};
}

// Records the segment's launches into a graph (nothing runs while capturing) and instantiates it.
// Any failure on the way leaves the segment to launch kernel by kernel, now and on later runs; the
// plain launches then report whatever error there really is.
void CudaExecutor::captureSegment(Segment& seg) {
  const DriverApi& a = *api_;
  seg.captureFailed = true;  // until the executable graph exists
  if (a.cuStreamBeginCapture(stream_, kStreamCaptureModeThreadLocal) != kCudaSuccess) {
    ++stats_.captureFailures;
    return;
  }
  bool recorded = true;
  for (size_t i = seg.first; i < seg.end && recorded; ++i) recorded = !launchStep(i);
  // Always ended, even after a failed launch: the stream must leave capture mode.
  CUgraph graph = nullptr;
  const CUresult ended = a.cuStreamEndCapture(stream_, &graph);
  CUgraphExec exec = nullptr;
  if (recorded && ended == kCudaSuccess && graph && a.cuGraphInstantiateWithFlags(&exec, graph, 0) == kCudaSuccess &&
      exec) {
    seg.exec = exec;
    seg.captureFailed = false;
    ++stats_.captures;
  } else {
    ++stats_.captureFailures;
  }
  if (graph) a.cuGraphDestroy(graph);  // the executable graph is independent of it
}

// Device steps [seg.first, seg.end): one graph launch when graphs are on (captured on the first run),
// else launch by launch.
Failure CudaExecutor::runSegment(Segment& seg) {
  if (seg.launches == 0) return {};
  if (stats_.graphsEnabled && !seg.exec && !seg.captureFailed) captureSegment(seg);
  if (seg.exec) {
    const CUresult r = api_->cuGraphLaunch(seg.exec, stream_);
    if (r == kCudaSuccess) {
      ++stats_.graphLaunches;
      return {};
    }
    // The run fails like a failed kernel launch would; later runs do without this graph.
    api_->cuGraphExecDestroy(seg.exec);
    seg.exec = nullptr;
    seg.captureFailed = true;
    return check(r, "cuGraphLaunch (steps " + std::to_string(seg.first) + " to " + std::to_string(seg.end - 1) + ")");
  }
  ++stats_.plainSegmentRuns;
  for (size_t i = seg.first; i < seg.end; ++i)
    if (Failure f = launchStep(i)) return f;
  return {};
}

// With device buffers, a caller's pointer must be device (or managed) memory of this executor's GPU
// whose allocation covers the tensor: otherwise the copy would read or write out of bounds, or fault.
Failure CudaExecutor::checkDeviceBuffer(const nnc_tensor& t, uint64_t bytes, const std::string& what) const {
  const DriverApi& a = *api_;
  const auto ptr = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(t.data));
  const std::string prefix = what + ": nnc_options.device_buffers is set, but the data pointer ";
  unsigned memoryType = 0;
  if (a.cuPointerGetAttribute(&memoryType, kPointerAttributeMemoryType, ptr) != kCudaSuccess ||
      (memoryType != kMemoryTypeDevice && memoryType != kMemoryTypeUnified))
    return failure(NNC_ERROR_INVALID_ARGUMENT, prefix + "is not CUDA device memory");
  int ordinal = -1;
  CUdevice device = 0;
  if (a.cuPointerGetAttribute(&ordinal, kPointerAttributeDeviceOrdinal, ptr) != kCudaSuccess ||
      a.cuDeviceGet(&device, ordinal) != kCudaSuccess || device != device_)
    return failure(NNC_ERROR_INVALID_ARGUMENT,
                   prefix + "is memory of another GPU (device " + std::to_string(ordinal) + ")");
  CUdeviceptr start = 0;
  size_t size = 0;
  if (a.cuPointerGetAttribute(&start, kPointerAttributeRangeStart, ptr) != kCudaSuccess ||
      a.cuPointerGetAttribute(&size, kPointerAttributeRangeSize, ptr) != kCudaSuccess || ptr < start ||
      bytes > size - (ptr - start))
    return failure(NNC_ERROR_INVALID_ARGUMENT,
                   prefix + "points into an allocation with fewer than " + std::to_string(bytes) + " bytes left");
  return {};
}

Failure CudaExecutor::copyIn(CUdeviceptr dst, const nnc_tensor& src, uint64_t bytes, const std::string& what) {
  if (!deviceBuffers_)
    return check(api_->cuMemcpyHtoDAsync(dst, src.data, bytes, stream_), "cuMemcpyHtoD (" + what + ")");
  if (Failure f = checkDeviceBuffer(src, bytes, what)) return f;
  const auto ptr = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(src.data));
  return check(api_->cuMemcpyDtoDAsync(dst, ptr, bytes, stream_), "cuMemcpyDtoD (" + what + ")");
}

Failure CudaExecutor::copyOut(const nnc_tensor& dst, CUdeviceptr src, uint64_t bytes, const std::string& what) {
  if (!deviceBuffers_)
    return check(api_->cuMemcpyDtoHAsync(dst.data, src, bytes, stream_), "cuMemcpyDtoH (" + what + ")");
  if (Failure f = checkDeviceBuffer(dst, bytes, what)) return f;
  const auto ptr = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst.data));
  return check(api_->cuMemcpyDtoDAsync(ptr, src, bytes, stream_), "cuMemcpyDtoD (" + what + ")");
}

Failure CudaExecutor::runSteps(const nnc_tensor* inputs, nnc_tensor* outputs) {
  const DriverApi& a = *api_;
  for (size_t i = 0; i < plan_.inputs.size(); ++i) {
    const uint64_t bytes = plan_.inputs[i].byteSize;
    if (bytes == 0) continue;
    if (Failure f = copyIn(io_ + inputOffsets_[i], inputs[i], bytes,
                           "input " + std::to_string(i) + " ('" + plan_.inputs[i].name + "')"))
      return f;
  }
  // Host builtins in order between the segments of device steps.
  size_t nextSegment = 0;
  for (size_t i = 0; i < plan_.steps.size();) {
    if (steps_[i].builtin) {
      if (Failure f = runBuiltin(i, inputs)) return f;
      ++i;
      continue;
    }
    if (nextSegment >= segments_.size() || segments_[nextSegment].first != i)
      return failure(NNC_ERROR_INTERNAL, "step " + std::to_string(i) + " is in no kernel segment");
    Segment& seg = segments_[nextSegment++];
    if (Failure f = runSegment(seg)) return f;
    i = seg.end;
  }
  for (size_t i = 0; i < plan_.outputs.size(); ++i) {
    const uint64_t bytes = plan_.outputs[i].byteSize;
    if (bytes == 0) continue;
    if (Failure f = copyOut(outputs[i], io_ + outputOffsets_[i], bytes,
                            "output " + std::to_string(i) + " ('" + plan_.outputs[i].name + "')"))
      return f;
  }
  for (size_t c = 0; c < checks_.size(); ++c) {
    if (plan_.steps[checks_[c].step].outerSize == 0) continue;
    if (Failure f = check(a.cuMemcpyDtoHAsync(&checkResults_[c * kCheckResultSize], checks_[c].result,
                                              kCheckResultSize * sizeof(int64_t), stream_),
                          "cuMemcpyDtoH (result of check step " + std::to_string(checks_[c].step) + ")"))
      return f;
  }
  // Kernel faults are asynchronous: they surface here, or at the first copy after them.
  if (Failure f = check(a.cuStreamSynchronize(stream_),
                        syncEachStep_ ? std::string("cuStreamSynchronize")
                                      : std::string("running the kernels (NNC_CUDA_SYNC=1 names the failing step)")))
    return f;
  // The first violated contract in step order fails the run, as on the CPU.
  for (size_t c = 0; c < checks_.size(); ++c) {
    const int64_t* result = &checkResults_[c * kCheckResultSize];
    if (result[kCheckViolations] != 0)
      return failure(NNC_ERROR_RUNTIME, describeCheckFailure(plan_.steps[checks_[c].step].check, result));
  }
  return {};
}

nnc_status CudaExecutor::run(const nnc_tensor* inputs, size_t numInputs, nnc_tensor* outputs, size_t numOutputs,
                             std::string* error) {
  std::lock_guard<std::mutex> lock(runMutex_);
  if (nnc_status st = checkRunArguments(plan_, inputs, numInputs, outputs, numOutputs, error); st != NNC_OK) return st;
  ContextScope scope(*api_, context_);
  Failure f = check(scope.result(), "cuCtxPushCurrent");
  if (!f) f = runSteps(inputs, outputs);
  if (!f) return NNC_OK;
  if (!f.message.empty() && error) *error = std::move(f.message);
  // Leave no work in flight on our buffers. The failure's own status goes back: a refused device
  // buffer is the caller's invalid argument, a failed driver call a runtime error.
  if (scope.result() == kCudaSuccess) api_->cuStreamSynchronize(stream_);
  return f.status;
}

void CudaExecutor::release() {
  if (!api_ || !retained_) return;
  {
    ContextScope scope(*api_, context_);
    if (scope.result() == kCudaSuccess) {
      if (stream_) api_->cuStreamSynchronize(stream_);
      for (Segment& seg : segments_)
        if (seg.exec) api_->cuGraphExecDestroy(seg.exec);
      segments_.clear();
      for (BoundStep& b : steps_) b.gemm.reset();  // their descriptors, before the handle
      if (ltHandle_) destroyLtHandle(*lt_, ltHandle_);
      ltHandle_ = nullptr;
      for (CUdeviceptr p : {arena_, io_, weights_, gemmWorkspace_})
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
  CudaOptions options;
  if (Failure f = readOptions(opts, &options)) return failWith(f.status, f.message);
  std::unique_ptr<nnc_model> m(new (std::nothrow) nnc_model());
  if (!m) return failWith(NNC_ERROR_OUT_OF_MEMORY, "out of memory creating the model");
  m->keepAlive = std::move(keepAlive);
  std::unique_ptr<CudaExecutor> ex;
  if (Failure f = CudaExecutor::create(std::move(plan), weights, images, options, &ex))
    return failWith(f.status, f.message);
  m->device = std::move(ex);
  if (status) *status = NNC_OK;
  return m.release();
}

bool cudaRunStats(const nnc_model* model, CudaRunStats* out) {
  if (!model || !out) return false;
  auto* ex = dynamic_cast<CudaExecutor*>(model->device.get());
  if (!ex) return false;
  *out = ex->stats();
  return true;
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

PrimaryContextHold::PrimaryContextHold() {
  std::string why;
  const DriverApi* api = openDriver(&why);
  const int ordinal = deviceOrdinal();
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (!api || ordinal < 0 || api->cuDeviceGet(&device, ordinal) != kCudaSuccess ||
      api->cuDevicePrimaryCtxRetain(&context, device) != kCudaSuccess)
    return;  // models made without the hold report the reason themselves
  api_ = api;
  device_ = device;
}

PrimaryContextHold::~PrimaryContextHold() {
  if (api_) api_->cuDevicePrimaryCtxRelease(device_);
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
