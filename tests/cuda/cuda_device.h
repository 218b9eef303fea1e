// Runs single kernels compiled by NVRTC on the CUDA device for the backend's tests, through the
// runtime's driver table (runtime/cuda/cuda_driver.h): the real driver, or the CUDA emulator with
// NNC_CUDA_EMULATE=1 (emulator.h), which loads the CUDA C++ source instead of the cubin.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nnc/status.h"
#include "runtime/cuda/cuda_driver.h"
#include "targets/cuda/codegen/cuda_emitter.h"
#include "targets/cuda/codegen/nvrtc_compiler.h"

namespace nnc::codegen::cuda {

using DevicePtr = uint64_t;  // CUdeviceptr

// The primary context of one device and a stream on it. Not thread-safe; the context is current on
// the thread that opened it while the device lives.
class CudaDevice {
 public:
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  // Opens the driver (rt::cuda::openDriver), retains device `ordinal`'s primary context and makes it
  // current. Errors say which step failed and why.
  static Expected<std::unique_ptr<CudaDevice>> open(int ordinal = 0);

  std::string name() const;       // e.g. "NVIDIA H100 80GB HBM3"
  int computeCapability() const;  // e.g. 90
  bool emulated() const { return api_->emulated; }

  // Loads what NVRTC compiled from `source`: the cubin, or, on the emulator, the source itself. The
  // module lives as long as this device.
  Status loadModule(const CompiledCuda& compiled, const std::string& source, int* moduleIndex);
  // The kernel function `name` of module `moduleIndex`.
  Expected<void*> function(int moduleIndex, const std::string& name);

  Expected<DevicePtr> alloc(size_t bytes);
  Status free(DevicePtr ptr);
  Status copyToDevice(DevicePtr dst, const void* src, size_t bytes);
  Status copyToHost(void* dst, DevicePtr src, size_t bytes);
  // Launches `fn` with one pointer per param slot, then begin/end (the emitted signature).
  Status launch(void* fn, const std::vector<DevicePtr>& slots, int64_t begin, int64_t end, LaunchDims dims);
  Status synchronize();

 private:
  CudaDevice() = default;
  Status check(int result, const char* what) const;

  const rt::cuda::DriverApi* api_ = nullptr;
  rt::cuda::CUdevice device_ = 0;
  rt::cuda::CUcontext context_ = nullptr;
  rt::cuda::CUstream stream_ = nullptr;
  std::vector<rt::cuda::CUmodule> modules_;
};

}  // namespace nnc::codegen::cuda
