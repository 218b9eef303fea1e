// What the emulated driver's files share (private to libnnc_cuda_emulator.so, hidden like all of it).
//
//   emulated_driver.cpp  the DriverApi table and its exports; init, device, context and error entry points
//   device_memory.cpp    device memory: guarded host allocations, the memory entry points
//   streams.cpp          streams, graph capture and replay, the stream and graph entry points
//   module_cache.cpp     modules compiled by the host compiler and cached on disk; module and launch entry points
//   block_runner.cpp     running a grid's blocks and threads: barriers, shuffles, the thread and fiber runners
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/emulator.h"
#include "targets/cuda/emulator/emulation_abi.h"

#if defined(__SANITIZE_ADDRESS__)
#define NNC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NNC_EMU_ASAN 1
#endif
#endif

namespace nnc::rt::cuda::emu::detail {

// CUresult values (cuda.h) the emulator returns.
inline constexpr CUresult kInvalidValue = 1;
inline constexpr CUresult kNotInitialized = 3;
inline constexpr CUresult kInvalidDevice = 101;
inline constexpr CUresult kInvalidImage = 200;
inline constexpr CUresult kInvalidContext = 201;
inline constexpr CUresult kInvalidHandle = 400;
inline constexpr CUresult kIllegalState = 401;
inline constexpr CUresult kNotFound = 500;
inline constexpr CUresult kIllegalAddress = 700;
inline constexpr CUresult kLaunchFailed = 719;
inline constexpr CUresult kCaptureUnsupported = 900;
inline constexpr CUresult kCaptureInvalidated = 901;
inline constexpr CUresult kUnknown = 999;

// Returns r, after recording `reason` as the explanation cuGetErrorString gives for it
// (emulated_driver.cpp).
CUresult failWith(CUresult r, const std::string& reason);

// v as 0x... (device_memory.cpp).
std::string hex(uint64_t v);

// A device allocation (device_memory.cpp).
struct Allocation {
  unsigned char* base = nullptr;  // what was allocated: guard, user bytes, guard
  size_t size = 0;                // the user's bytes
};

// Everything the emulated driver keeps, under one mutex (launches run under another, workMutex in
// streams.cpp).
struct State {
  std::mutex mutex;
  bool initialized = false;
  int primaryRetains = 0;
  std::map<uint64_t, Allocation> allocations;  // by user pointer
  size_t allocatedBytes = 0;
  std::set<void*> streams, modules, functions, graphs, graphExecs;
};
State& state();  // emulated_driver.cpp

// kCudaSuccess when the driver is initialised and this thread has a current context
// (emulated_driver.cpp).
CUresult needContext();

// The first damaged guard zone of any live allocation, described; empty when all are intact
// (device_memory.cpp).
std::string checkAllGuards();

// kCudaSuccess, unless this thread captures a stream: then the capture is invalidated and `what`
// (a call the capture cannot record) fails (streams.cpp).
CUresult refuseDuringCapture(const char* what);

// A kernel of a loaded module (module_cache.cpp makes them, block_runner.cpp runs them).
struct Function {
  std::string name;
  const nnc_emu_kernel* kernel = nullptr;
  bool cooperative = false;  // uses barriers, shuffles or shared memory: threads run concurrently
};

// The emulator's side of the intrinsics, bound into every module (block_runner.cpp).
extern const nnc_emu_hooks kHooks;

// Runs every block of the grid; false with *error when one failed (block_runner.cpp).
bool runGrid(const Function& f, const nnc_emu_dim3& grid, const nnc_emu_dim3& block,
             std::vector<std::vector<unsigned char>>& args, std::string* error);

// Each file's entry points, set in the table emulated_driver.cpp builds.
void addMemoryEntryPoints(DriverApi& api);  // device_memory.cpp
void addStreamEntryPoints(DriverApi& api);  // streams.cpp
void addModuleEntryPoints(DriverApi& api);  // module_cache.cpp

}  // namespace nnc::rt::cuda::emu::detail
