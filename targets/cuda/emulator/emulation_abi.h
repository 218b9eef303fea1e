// The binary interface between the CUDA emulator (module_cache.cpp, block_runner.cpp) and an
// emulated module (a shared object compiled from emulation.cuh + the generated CUDA C++). Plain C
// structs: the module is built by another compiler invocation, possibly another compiler. The build
// prepends this file to emulation.cuh when it embeds that header, so both sides read the one
// definition.
#pragma once

struct nnc_emu_dim3 {
  unsigned x, y, z;
};

// Where an emulated thread runs (the emulator fills it for each thread).
struct nnc_emu_thread {
  nnc_emu_dim3 thread, block, blockDim, gridDim;
};

// The emulator's side of the intrinsics. Either call may throw a C++ exception (the block has
// failed: the thread unwinds out of the kernel); neither returns garbage.
struct nnc_emu_hooks {
  unsigned version;
  void (*syncthreads)();
  unsigned long long (*shfl_xor)(unsigned mask, unsigned long long bits, int laneMask, int width);
};
#define NNC_EMU_HOOKS_VERSION 1u
#define NNC_EMU_MAX_PARAMS 64

// A kernel as the emulator sees it: how to run one thread, and its parameters' sizes (what a launch
// copies from kernelParams, as the driver does from a cubin's metadata).
struct nnc_emu_kernel {
  void (*run)(const nnc_emu_thread* where, void** params);  // enter(where), then the kernel
  // Sets the module's threadIdx/blockIdx/blockDim/gridDim (per OS thread) to `where`: the fiber
  // scheduler calls it before resuming each emulated thread.
  void (*enter)(const nnc_emu_thread* where);
  int paramCount;
  unsigned long paramSizes[NNC_EMU_MAX_PARAMS];
};
