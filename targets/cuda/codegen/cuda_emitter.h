// The CUDA backend's source emitter: kernel IR -> one CUDA C++ translation unit (prelude, kernel
// declarations, kernel definitions) that NVRTC compiles without include paths.
//
// Each kir::Kernel becomes
//   extern "C" __global__ void <kernel.name>(T0* p0, const T1* __restrict__ p1, ..., i64 begin, i64 end);
// with one pointer per param slot (outputs writable; f16/bf16 as u16 bits, bool as u8) computing the
// kernel's outer points [begin, end). Thread mappings (chooseMapping() picks one per kernel):
//   ThreadPerPoint: a grid-stride loop, one thread per outer point; reductions (only tiny ones: at
//     most kTinyReduction elements, over at least kManyPoints outer points) run sequentially in
//     the thread in the interpreter's order, any per-inner stores as a sequential loop nest.
//   ThreadPerVector (pointwise kernels whose accesses are unit-stride or invariant in the innermost
//     outer dimension, see vectorWidth()): each thread computes `vectorWidth` consecutive points of
//     one row, moving 16 bytes per access of the widest element type with nnc_vec loads/stores;
//     invariant (broadcast) values are computed once per vector and the scalar expression code runs
//     per lane in an unrolled loop. Taken only when every vector-accessed pointer is aligned to its
//     vector size and begin/end are multiples of the width (checked once per launch, uniformly);
//     otherwise the same launch runs the ThreadPerPoint code (the scalar fallback).
//   WarpPerPoint (reductions, the default): a grid-stride loop over warps, one warp per outer point;
//     the lanes split every reduction loop and combine with __shfl_xor_sync (ArgMax/ArgMin carry
//     (value, index) with the interpreter's tie rules), lane 0 does the per-point stores, and the
//     lanes split the inner loop.
//   BlockPerPoint (a reduction of at least kLargeReduction elements over fewer than kFewPoints outer
//     points): a grid-stride loop over blocks, one block per outer point; the threads split each
//     reduction, combine within each warp with shuffles, then across warps through shared memory
//     (every thread combines the per-warp partials in warp order, so all get the same result);
//     thread 0 does the per-point stores and the threads split the inner loop.
// Warp and block mappings need blockDim.x to be a multiple of 32 (at most 1024); every mapping is
// correct for any grid size. Semantics follow kir/interpreter.cpp (see prelude.cuh). Inputs are
// declared __restrict__: the plan never binds an output of a kernel to a buffer the same kernel reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kir/kernel_ir.h"
#include "nnc/status.h"
#include "runtime/plan.h"

namespace nnc::codegen::cuda {

enum class ThreadMapping : uint8_t { ThreadPerPoint, WarpPerPoint, BlockPerPoint, ThreadPerVector };

// The mapping rule's thresholds (elements of one reduction loop, outer points).
inline constexpr int64_t kTinyReduction = 32;     // at most this: ThreadPerPoint, when ...
inline constexpr int64_t kManyPoints = 4096;      // ... there are at least this many outer points
inline constexpr int64_t kLargeReduction = 4096;  // at least this: BlockPerPoint, when ...
inline constexpr int64_t kFewPoints = 2048;       // ... there are fewer outer points than this

struct KernelMapping {
  ThreadMapping mapping = ThreadMapping::ThreadPerPoint;
  int vectorWidth = 1;  // ThreadPerVector: points per thread (2, 4, 8 or 16); else 1
};
KernelMapping chooseMapping(const kir::Kernel& kernel);
ThreadMapping threadMapping(const kir::Kernel& kernel);  // chooseMapping(kernel).mapping
// Points per thread of the vectorised variant (16 / the widest element size among the vector-accessed
// params), or 1 when the kernel does not qualify: no reductions and no per-inner stores; the
// innermost outer dimension of extent > 1 (later ones have extent 1) a multiple of the width; every
// store index unit-stride in that dimension's variable with a base provably a multiple of the width
// (flat = base(other vars) + v); every load index unit-stride or invariant in it (unit-stride loads
// with a provably aligned base become vector loads, the others per-lane scalar loads); no load from
// an output param.
int vectorWidth(const kir::Kernel& kernel);

// What the plan records for a kernel step with this mapping (rt::Step::gpuMapping).
rt::GpuMapping planMapping(const KernelMapping& m);

// A launch shape for `points` outer points (block 256 threads; enough blocks to cover the points,
// capped: the grid-stride loops take care of the rest); runtime/cuda/launch_dims.h's rule.
struct LaunchDims {
  uint32_t gridX = 1;
  uint32_t blockX = 256;
};
LaunchDims launchDims(ThreadMapping mapping, int64_t points, int vectorWidth = 1);
LaunchDims launchDims(const KernelMapping& m, int64_t points);

struct EmittedKernel {
  std::string name;
  ThreadMapping mapping;
  int64_t outerSize;
  int vectorWidth = 1;                                         // ThreadPerVector: points per thread
  rt::GpuMapping gpuMapping = rt::GpuMapping::ThreadPerPoint;  // planMapping() of the above: for the plan
};

struct CudaSource {
  std::string code;                    // the whole translation unit, prelude included
  std::vector<EmittedKernel> kernels;  // in input order
};

// The prelude (targets/cuda/codegen/prelude.cuh as embedded at build time).
const char* preludeSource();

// Kernel names must be unique, non-empty C identifiers. Operations the backend cannot express (an
// op on an operand type expr_ops.def does not allow) give an error naming the kernel.
Expected<CudaSource> emitCudaSource(const std::vector<kir::Kernel>& kernels);

}  // namespace nnc::codegen::cuda
