// The GEMM microkernel of the CPU backend (internal): one register tile of vector FMAs.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nnc::codegen::llvmcpu {

struct MicrokernelShape {
  int lanes;           // f32 lanes per vector
  int64_t rows;        // rows of the tile (1..mr): one variant per row count, no masking
  int64_t nr;          // columns: a multiple of lanes
  int64_t aRowStride;  // elements between A's rows
  int64_t aColStride;  // elements between A's columns (the reduction)
  // A's columns through a table: column p starts at a + aColumns[p] (aColStride unused). A conv's
  // pixels read in place from its input: the table holds each (channel, tap)'s offset.
  bool indirectA = false;
  // With indirectA, rows from splitRow on (1..rows-1; 0: none) continue at a + aSecond instead of a's
  // step: a conv's tile of pixels that crosses an output row, two runs read in place, not packed.
  int64_t splitRow = 0;
  // Store the tile transposed: column j (rows 0..lanes-1, rows past `rows` zero) at dst + j * ldDst,
  // one vector each, transposed in registers (needs rows <= lanes). A transposed GEMM's tile is thus
  // laid out like its output, whose contiguous axis is the tile's rows. Never accumulates.
  bool transposedStore = false;
  // Bytes of the next weights block hinted into L2 per k step (0: none), from the pointer argument
  // `next`: one or two cache lines per step at next + p * nextStride, so that a block streaming from
  // DRAM arrives while the current one, already in L2, is computed.
  int64_t nextStride = 0;
  // Where nonzero, B's row is also hinted into L2 this many bytes ahead (besides the L1 hint 2 KiB
  // ahead): for weights streaming from DRAM through few row tiles, more lines in flight than the L1
  // hints alone keep.
  int64_t farPrefetchBytes = 0;
};

// The internal function of `shape` for kernel `owner`, emitted on its first use: named
// "<owner>.micro.<shape>" (a kernel helper, which mergeIdenticalKernels compares and deletes with its
// kernel), so that a kernel's calls with one shape share one copy. Each kernel owns its copies:
// inlined into it where it has one call, with its kLen and strides folded. (Shared across kernels
// of a module they are not inlined, and cost a call per register tile.)
//   void <owner>.micro.<shape>(const float* a, const float* b, int64_t ldb, int64_t kLen,
//               const float* src, int64_t ldSrc, i1 accumulate, float* dst, int64_t ldDst,
//               const int64_t* aColumns, int64_t aSecond, const float* next)
// computing, for i < rows and j < nr,
//   dst[i * ldDst + j] = (accumulate ? src[i * ldSrc + j] : 0)
//                        + sum_{p < kLen} a[i * aRowStride + p * aColStride] * b[p * ldb + j]
// (a[aColumns[p] + i * aRowStride] with indirectA, and a[aColumns[p] + aSecond + (i - splitRow) *
// aRowStride] for rows i >= splitRow > 0; aColumns and aSecond are unused otherwise; `next` is only
// prefetched, never read)
// with the rows x nr accumulators in vector registers (one FMA per lane, rounded once). kLen >= 1.
// b's rows, and src's and dst's, must be readable/writable as whole vectors (nr floats each): the
// caller passes the output itself for whole tiles, a scratch tile at the edges. src may be dst.
llvm::Function* emitMicrokernel(llvm::Module& module, const std::string& owner, const MicrokernelShape& shape,
                                const std::string& cpu, const std::string& features);

// The bf16 microkernel of kernel `owner`, with the signature of emitMicrokernel's and a 32 x 32 tile:
// 2 x 2 AMX tiles of f32 accumulators, started from src (rows ldSrc floats apart) when accumulating,
// else zero, plus the tile products of A's packed tile (K steps of [32 rows][32] bf16 at `a`, see
// packBf16A) and B's K block ([kLen / 2][32][2]
// bf16 at `b`) over kLen rounded up to kBf16TileK (both operands hold zeros there), stored whole to
// dst (rows ldDst floats apart). It ignores ldb and the table arguments. Needs the tile
// configuration loadTileConfig sets (every tile 16 rows of 64 bytes). farPrefetchBytes > 0: B's lines
// that far ahead are also hinted into L2.
llvm::Function* emitAmxMicrokernel(llvm::Module& module, const std::string& owner, int64_t farPrefetchBytes,
                                   const std::string& cpu, const std::string& features);

// The same tile without AMX (kir::Bf16Unit::Avx512Dot): the operands, arguments and result of
// emitAmxMicrokernel's, computed with AVX512-BF16's VDPBF16PS on vector accumulators, in strips of
// 8 rows: the first `strips` (1..4) of them, the tile's other rows neither read nor written. Needs
// no tile configuration.
llvm::Function* emitBf16DotMicrokernel(llvm::Module& module, const std::string& owner, int64_t strips,
                                       const std::string& cpu, const std::string& features);

// The internal function `name` with the signature above (void, from `a` to `next`), for `cpu` with
// `features`, without a body: the microkernels (FMA, AMX, VDPBF16PS) are called through one switch.
llvm::Function* createMicrokernelFunction(llvm::Module& module, const std::string& name, const std::string& cpu,
                                          const std::string& features);

// The accumulators a register tile starts from: `rows` x `vectors` vectors of `vty` read from `src`
// (rows ldSrc floats apart) where `accumulate`, else zeros. Emitted from the builder's block, which
// branches; the builder is left in the block where both ways meet.
std::vector<llvm::Value*> startingSums(llvm::IRBuilderBase& b, llvm::Value* accumulate, llvm::Value* src,
                                       llvm::Value* ldSrc, int64_t rows, int64_t vectors, llvm::FixedVectorType* vty);

// Transposes a square of vectors in place: `rows` (L vectors of L lanes, L a power of two) become
// their columns (shuffles only).
void transposeInRegisters(llvm::IRBuilderBase& b, std::vector<llvm::Value*>& rows);

// "micro." and every field of `shape`: equal names mean equal functions.
std::string microkernelName(const MicrokernelShape& shape);

}  // namespace nnc::codegen::llvmcpu
