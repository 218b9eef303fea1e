// Runs compiled CUDA kernels through the CUDA driver API, opened at run time with
// dlopen("libcuda.so.1"), so that nnc links and starts on machines without a driver or GPU; open()
// then fails with a reason instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_emitter.h"
#include "ir/status.h"
#include "kir/kernel_ir.h"

namespace nnc::codegen::cuda {

using DevicePtr = uint64_t;  // CUdeviceptr

// One context on one device. Not thread-safe; the context is current on the thread that opened it.
class CudaDevice {
 public:
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  // dlopen + cuInit + cuDeviceGet(ordinal) + cuCtxCreate. Errors say which step failed and why
  // ("libcuda.so.1 not found: ...", "cuInit: CUDA_ERROR_NO_DEVICE ...").
  static Expected<std::unique_ptr<CudaDevice>> open(int ordinal = 0);

  std::string name() const;       // e.g. "NVIDIA H100 80GB HBM3"
  int computeCapability() const;  // e.g. 90

  // Loads a cubin (or PTX text, NUL-terminated) image; the module lives as long as this device.
  Status loadModule(const void* image, int* moduleIndex);
  // The kernel function `name` of module `moduleIndex`.
  Expected<void*> function(int moduleIndex, const std::string& name);

  Expected<DevicePtr> alloc(size_t bytes);
  Status free(DevicePtr ptr);
  Status copyToDevice(DevicePtr dst, const void* src, size_t bytes);
  Status copyToHost(void* dst, DevicePtr src, size_t bytes);
  // Launches `fn` with one pointer per param slot, then begin/end (the emitted signature).
  Status launch(void* fn, const std::vector<DevicePtr>& slots, int64_t begin, int64_t end, LaunchDims dims);
  Status synchronize();

  struct Api;  // the dlsym'd entry points (cuda_runtime_loader.cpp)

 private:
  CudaDevice() = default;
  Status check(int result, const char* what) const;

  void* lib_ = nullptr;
  std::unique_ptr<Api> api_;
  void* context_ = nullptr;
  int device_ = 0;
  std::vector<void*> modules_;
};

}  // namespace nnc::codegen::cuda
