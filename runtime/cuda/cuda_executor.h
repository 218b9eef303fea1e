// The CUDA executor: runs a Target::Cuda plan on an NVIDIA GPU through the dlopen'd driver API. At
// create time it loads the kernels (cubin, else the PTX for newer GPUs), allocates one device arena
// from the plan, device buffers for the model inputs and outputs, and a device copy of the weights;
// each run copies the host inputs in, launches the kernel steps and enqueues the library GEMMs (through
// cuBLASLt, dlopen'd too, with one 32 MiB workspace) in order on its own stream, runs host builtins
// on host copies of their buffers, and copies the outputs back. Everything is freed on destroy.
// Without a driver or GPU, creation fails with NNC_ERROR_NO_DEVICE; a plan with GEMMs but no
// cuBLASLt fails with NNC_ERROR_RUNTIME naming the libraries tried.
//
// CUDA Graphs: each maximal run of device steps between host builtins (a segment) is captured into a
// CUDA graph on its first run and replayed with one cuGraphLaunch afterwards. The launches only take
// the executor's own device pointers (the caller's tensors are copied in and out around them), so
// the graphs never need re-capturing. On by default; NNC_CUDA_GRAPHS=0 (read at creation) turns them
// off, as do NNC_CUDA_SYNC=1 and a driver without the graph API; a segment whose capture or
// instantiation fails launches kernel by kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nnc/model.h"
#include "runtime/model_handle.h"
#include "runtime/plan.h"

namespace nnc::rt::cuda {

// The compiled kernels of a plan, as the compiler embedded them. Only read during creation (the
// driver copies the image), so they need not outlive the handle.
struct ModuleImages {
  const void* cubin = nullptr;  // for the architecture the model was compiled for; may be empty
  size_t cubinSize = 0;
  const char* ptx = nullptr;  // NUL-terminated; JIT-compiled by the driver when the cubin does not load
  size_t ptxSize = 0;         // without the NUL
  // The CUDA C++ source NVRTC compiled, after emu::kEmulatedSourceMagic, NUL-terminated: the image
  // the CUDA emulator loads (emulator.h); a real driver never sees it.
  const char* source = nullptr;
  size_t sourceSize = 0;  // without the NUL
};

// The message prefix of every NNC_ERROR_NO_DEVICE failure.
inline constexpr const char* kNoDevicePrefix = "no CUDA driver/GPU: ";

// Builds a CUDA executor for `plan` (target cuda) and wraps it in a C ABI handle. `weights` (host)
// must stay valid while keepAlive lives (host builtins may read weights). opts may be null. Device
// ordinal: $NNC_CUDA_DEVICE, else 0. Returns null with *error and *status on failure:
// NNC_ERROR_NO_DEVICE ("no CUDA driver/GPU: <reason>"), NNC_ERROR_OUT_OF_MEMORY (device memory),
// NNC_ERROR_INVALID_ARGUMENT (bad options), NNC_ERROR_RUNTIME (a failed driver call, e.g. a module
// that loads neither as cubin nor as PTX) or NNC_ERROR_INTERNAL (an inconsistent plan).
nnc_model* createCudaModelHandle(Plan plan, const uint8_t* weights, std::shared_ptr<void> keepAlive,
                                 const ModuleImages& images, const nnc_options* opts, std::string* error,
                                 nnc_status* status);

// What a CUDA handle's runs did (tests and diagnostics).
struct CudaRunStats {
  bool graphsEnabled = false;
  std::string graphsOffReason;   // why not, when !graphsEnabled
  int64_t segments = 0;          // runs of consecutive kernel steps (split by host builtins)
  int64_t captures = 0;          // segments captured and instantiated
  int64_t captureFailures = 0;   // those then launched kernel by kernel
  int64_t graphLaunches = 0;     // segment runs through cuGraphLaunch
  int64_t plainSegmentRuns = 0;  // segment runs launched kernel by kernel
};
// False when `model` is not a handle made by createCudaModelHandle.
bool cudaRunStats(const nnc_model* model, CudaRunStats* out);

// Whether a CUDA driver and device are usable in this process; *why says why not.
bool cudaDeviceAvailable(std::string* why);

struct DriverApi;

// Holds a retain on the device's primary context while it lives (nothing without a driver or device).
// Each executor retains and releases that context itself, so when the last model of a process is
// destroyed the driver tears the context down and the next model builds it again: costly per model
// alone and far more with 16 processes doing it at once — on an H200, most of what a conformance case
// cost (bench/NOTES.md). A process that creates models one after another (nnc test's case
// worker) keeps one of these.
class PrimaryContextHold {
 public:
  PrimaryContextHold();
  ~PrimaryContextHold();
  PrimaryContextHold(const PrimaryContextHold&) = delete;
  PrimaryContextHold& operator=(const PrimaryContextHold&) = delete;
  bool held() const { return api_ != nullptr; }

 private:
  const DriverApi* api_ = nullptr;  // set while a retain is held
  int device_ = 0;
};

// Free and total memory of device `ordinal` in bytes (tests: memory stays flat over create/destroy).
bool cudaDeviceMemory(int ordinal, size_t* freeBytes, size_t* totalBytes, std::string* error);

}  // namespace nnc::rt::cuda
