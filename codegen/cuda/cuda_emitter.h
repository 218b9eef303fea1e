// The CUDA backend's source emitter: kernel IR -> one CUDA C++ translation unit (prelude, kernel
// declarations, kernel definitions) that NVRTC compiles without include paths.
//
// Each kir::Kernel becomes
//   extern "C" __global__ void <kernel.name>(T0* p0, const T1* __restrict__ p1, ..., i64 begin, i64 end);
// with one pointer per param slot (outputs writable; f16/bf16 as u16 bits, bool as u8) computing the
// kernel's outer points [begin, end). Two thread mappings:
//   ThreadPerPoint (no reductions): a grid-stride loop, one thread per outer point; any per-inner
//     stores run as a sequential loop nest in that thread.
//   WarpPerPoint (reductions): a grid-stride loop over warps, one warp per outer point; the lanes
//     split every reduction loop and combine with __shfl_xor_sync (ArgMax/ArgMin carry (value,
//     index) with the interpreter's tie rules), lane 0 does the per-point stores, and the lanes split
//     the inner loop. Needs blockDim.x to be a multiple of 32.
// Semantics follow kir/interpreter.cpp (see prelude.cuh). Inputs are declared __restrict__: the plan
// never binds an output of a kernel to a buffer the same kernel reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/status.h"
#include "kir/kernel_ir.h"

namespace nnc::codegen::cuda {

enum class ThreadMapping : uint8_t { ThreadPerPoint, WarpPerPoint };

ThreadMapping threadMapping(const kir::Kernel& kernel);

// A launch shape for `points` outer points (block 256 threads; enough blocks to cover the points,
// capped: the grid-stride loops take care of the rest).
struct LaunchDims {
  uint32_t gridX = 1;
  uint32_t blockX = 256;
};
LaunchDims launchDims(ThreadMapping mapping, int64_t points);

struct EmittedKernel {
  std::string name;
  ThreadMapping mapping;
  int64_t outerSize;
};

struct CudaSource {
  std::string code;                    // the whole translation unit, prelude included
  std::vector<EmittedKernel> kernels;  // in input order
};

// The prelude (codegen/cuda/prelude.cuh as embedded at build time).
const char* preludeSource();

// Kernel names must be unique, non-empty C identifiers. Operations the backend cannot express (an
// op on an operand type expr_ops.def does not allow) give an error naming the kernel.
Expected<CudaSource> emitCudaSource(const std::vector<kir::Kernel>& kernels);

}  // namespace nnc::codegen::cuda
