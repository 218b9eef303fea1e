// The GEMM microkernel of the CPU backend (internal): one register tile of vector FMAs.
#pragma once

#include <llvm/IR/Module.h>

#include <cstdint>
#include <string>

namespace nnc::codegen::llvmcpu {

struct MicrokernelShape {
  int lanes;           // f32 lanes per vector
  int64_t rows;        // rows of the tile (1..mr): one variant per row count, no masking
  int64_t nr;          // columns: a multiple of lanes
  int64_t aRowStride;  // elements between A's rows
  int64_t aColStride;  // elements between A's columns (the reduction)
};

// Emits an internal function
//   void <name>(const float* a, const float* b, int64_t ldb, int64_t kLen, float* tile, i1 accumulate)
// computing, for i < rows and j < nr,
//   tile[i * nr + j] = (accumulate ? tile[i * nr + j] : 0) + sum_{p < kLen} a[i * aRowStride + p * aColStride] * b[p *
//   ldb + j]
// with the rows x nr accumulators in vector registers (one FMA per lane, rounded once). kLen >= 1.
// b's rows must be readable as whole vectors (nr floats each).
llvm::Function* emitMicrokernel(llvm::Module& module, const std::string& name, const MicrokernelShape& shape,
                                const std::string& cpu, const std::string& features);

}  // namespace nnc::codegen::llvmcpu
