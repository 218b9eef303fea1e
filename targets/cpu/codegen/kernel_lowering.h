// Lowers one kir::Kernel to an LLVM function (internal to the CPU backend):
//   void <name>(void* const* buffers, int64_t begin, int64_t end)
// computing the kernel's outer points [begin, end).
#pragma once

#include <llvm/IR/Module.h>

#include <string>

#include "kir/kernel_ir.h"
#include "nnc/status.h"

namespace nnc::codegen::llvmcpu {

struct LoweringOptions {
  std::string cpu;       // "target-cpu" function attribute
  std::string features;  // "target-features" function attribute
  // Mark the floating-point Sum/Prod accumulations `reassoc` so LLVM may vectorise them (the
  // summation order then differs from the interpreter's sequential one by rounding only).
  bool reassociateReductions = true;
  // Lanes of the libmvec variants f32 transcendentals go through (ScalarOps::setVectorMathLanes);
  // 0: scalar libm.
  unsigned vectorMathLanes = 0;
  // f32 lanes of the widest vector the target computes with (16 for AVX-512, 8 AVX2, 4 SSE/NEON):
  // the width of the loops this backend vectorises itself (strided windows); below 2: none.
  int vectorLanes = 0;
  // Bytes of one core's L2 (kir::TileTarget::l2Bytes): packed weights, or an output, over half of it
  // are taken not to stay there between runs (the GEMM's prefetch hints).
  int64_t l2Bytes = kir::TileTarget().l2Bytes;
  // The unit a BF16 contraction's microkernel computes on (the tile target's, kir::TileTarget::bf16Unit).
  kir::Bf16Unit bf16Unit = kir::Bf16Unit::None;
};

// Adds the kernel's function to `module`. Errors name the kernel (unsupported op/dtype pairs).
Status lowerKernel(const kir::Kernel& kernel, llvm::Module& module, const LoweringOptions& options);

}  // namespace nnc::codegen::llvmcpu
