// The CUDA emulator: the cuda target's generated CUDA C++ run on the CPU, behind the same function
// tables the CUDA executor uses for the real driver (cuda_driver.h) and cuBLASLt (cublaslt.h), so
// that everything above them (executor, plan, index-check read-back, CUDA Graph path, device-buffer
// option) is the code a GPU runs. Chosen with NNC_CUDA_EMULATE=1 (`nnc run|test|bench --target=cuda
// --emulate` sets it), read whenever the driver is opened.
//
// The emulator is a shared library, libnnc_cuda_emulator.so, that the runtime dlopens in place of
// libcuda and cuBLASLt: every copy of the runtime in a process (nnc's, each model.so's) then shares
// one emulated device, as they share one driver. Looked up at $NNC_CUDA_EMULATOR, else where the
// build tree put it, else by name on the library path (`nnc --emulate` sets $NNC_CUDA_EMULATOR to
// the one beside its runtime archives).
//
//  - emulated_driver.cpp, with device_memory.cpp, streams.cpp, module_cache.cpp and
//    block_runner.cpp (what they share: emulator_internal.h): the driver API. Device memory is host
//    memory (256-byte aligned, filled with 0xff bytes, between guard zones checked at every
//    synchronisation and free, and poisoned for AddressSanitizer); streams execute their work in
//    order as it is enqueued; stream capture records that work into a graph that cuGraphLaunch
//    replays; a module is the CUDA C++ source (see kEmulatedSourceMagic), compiled by the host C++
//    compiler against emulation.cuh into a shared object (cached on disk) and dlopen'ed; a launch
//    runs the grid block by block, the threads of a block that cooperates (barriers, shuffles,
//    shared memory) as fibers, or as OS threads under ThreadSanitizer or NNC_EMULATE_THREADS=os,
//    and the others one after another. Every barrier must be reached by every thread of the block
//    and every shuffle by every lane its mask names; a block that breaks this fails the launch,
//    saying which threads wait where.
//  - emulated_cublaslt.cpp: cuBLASLt. Checks every handle, descriptor, layout, attribute, pointer,
//    alignment and workspace it is given, and computes the GEMM with a reference loop.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cuda_driver.h"

namespace nnc::rt::cuda::emu {

// An emulated module image starts with this line (a comment, so the image is the CUDA C++ source
// NVRTC compiled, verbatim); anything else (a cubin, PTX) is refused by the emulated
// cuModuleLoadData with CUDA_ERROR_INVALID_IMAGE.
inline constexpr const char kEmulatedSourceMagic[] = "// nnc: CUDA C++ source for the emulator\n";

// --- in the runtime (emulator_loader.cpp)

// NNC_CUDA_EMULATE is set to something other than "" or "0".
bool emulationRequested();

// The emulator's tables, from the library opened once per process; null with *why when it cannot be
// opened (naming each place tried).
const DriverApi* openEmulatedDriver(std::string* why);
const CublasLtApi* openEmulatedCublasLt(std::string* why);

// --- inside libnnc_cuda_emulator.so

// The library's exports, looked up by the loader: the tables, and their sizes (a check that the
// library was built from the same headers as the runtime loading it).
extern "C" {
const DriverApi* nnc_cuda_emulator_driver();
const CublasLtApi* nnc_cuda_emulator_cublaslt();
unsigned long nnc_cuda_emulator_abi();
}
inline unsigned long emulatorAbi() { return sizeof(DriverApi) * 100000ul + sizeof(CublasLtApi); }

// For the emulated cuBLASLt: runs `op` on the emulated `stream` in order with the stream's other
// work: now, or at each replay when the stream is capturing a graph. An op returns false with
// *error to fail the stream (the error is sticky, like a faulting kernel's, and reported by the
// next synchronisation). Returns kCudaSuccess, CUDA_ERROR_INVALID_HANDLE (400) for an unknown
// stream, or the stream's sticky error. Ops run under the emulator's work lock; they may call
// isDeviceRange (which takes the state lock, never held while work runs).
CUresult enqueue(CUstream stream, std::function<bool(std::string* error)> op);

// Whether [ptr, ptr + bytes) lies inside one live emulated device allocation; *why says which
// allocation it overruns, or that it is no device memory.
bool isDeviceRange(uint64_t ptr, uint64_t bytes, std::string* why);

// The tables (what the exports return).
const DriverApi* emulatedDriver();
const CublasLtApi* emulatedCublasLt();

}  // namespace nnc::rt::cuda::emu
