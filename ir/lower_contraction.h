// Contractions for CPU targets: a group anchored by an f32 MatMul whose operands come from memory
// becomes a kernel with a kir::Contraction — its generic form (for the interpreter) plus the tile,
// the cache blocks and the B layout the target's packed GEMM uses. Constant B operands are packed
// into panels here, at compile time, so nothing is packed at run time.
#pragma once

#include <optional>
#include <string>

#include "ir/lower.h"
#include "ir/tensor.h"

namespace nnc {

struct LoweredContraction {
  LoweredKernel lowered;  // lowered.kernel.contraction is set
  // With a packed B (BLayout::Packed): the value packed and its param slot; the plan binds that slot
  // to packPanels(value) in the weights instead of the value itself.
  const Value* packedValue = nullptr;
  // With a packed A (Contraction::aPacked): the value, bound to packRowTiles(value) likewise.
  const Value* packedA = nullptr;
};

// The group as a contraction kernel for `target`, or nullopt when it is not one: its anchor must be
// an f32 MatMul of two matrices (rank >= 2, batch dims as OpDef::asGemm accepts) read from memory
// (no prologue), with one output of the product's shape.
Expected<std::optional<LoweredContraction>> lowerContraction(const KernelGroup& group, const std::string& kernelName,
                                                             const kir::TileTarget& target);

// B ([batch..., k, n], f32) as panels [batch][ceil(n / nr)][k][nr], columns past n zero.
Tensor packPanels(const Tensor& b, int64_t nr);
// A ([batch..., m, k], f32) as row tiles [batch][ceil(m / mr)][k][mr], rows past m zero.
Tensor packRowTiles(const Tensor& a, int64_t mr);

}  // namespace nnc
