// Contractions for CPU targets: a group anchored by an f32 MatMul whose operands come from memory
// becomes a kernel with a kir::Contraction — its generic form (for the interpreter) plus the tile,
// the cache blocks and the B layout the target's packed GEMM uses. Constant B operands are packed
// into panels here, at compile time, so nothing is packed at run time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/lower.h"
#include "nnc/tensor.h"

namespace nnc {

// A constant operand the plan stores packed: packTiles(value, tiledAxis, width) in the weights, bound
// to the value's param instead of the value itself (the cpu target makes it a PackedConstant).
struct PackedOperand {
  const Value* value;
  int tiledAxis;  // kTiledRows or kTiledColumns
  int64_t width;
  int64_t bf16Pairs = 0;  // nonzero: packPairs(value, tiledAxis, width, bf16Pairs) (a bf16 contraction's B)
};

struct LoweredContraction {
  LoweredKernel lowered;  // lowered.kernel.contraction is set
  // The GEMM's B packed into panels (BLayout::Packed) and/or its A into row tiles (aPacked).
  std::vector<PackedOperand> packed;
};

// The longest K (channels x kernel size) whose conv patches a packed GEMM reads in place: its
// transposed form is never K-blocked, and one 14-row tile of K floats must fit the 512 KiB the
// kernel's stack gives it (3 x 3 convs up to 1024 channels). The fusion policy takes an Im2Col as a
// contraction's prologue only up to this K.
inline constexpr int64_t kMaxInPlacePatchesK = 9216;

// The group as a contraction kernel for `target`, or nullopt when it is not one: its anchor must be
// an f32 MatMul of two matrices (rank >= 2, batch dims as OpDef::asGemm accepts) read from memory
// (no prologue), with one output of the product's shape.
Expected<std::optional<LoweredContraction>> lowerContraction(const KernelGroup& group, const std::string& kernelName,
                                                             const kir::TileTarget& target);

// Constant operands packed at compile time: a matrix ([batch..., rows, cols], f32) cut along one of its
// two last axes into blocks of `width` (zero past the end), each block stored [other axis][width]:
// B's column panels [batch][ceil(n / nr)][k][nr] (kTiledColumns, width nr) and A's row tiles
// [batch][ceil(m / mr)][k][mr] (kTiledRows, width mr).
inline constexpr int kTiledRows = 0, kTiledColumns = 1;
Tensor packTiles(const Tensor& matrix, int tiledAxis, int64_t width);

// A bf16 contraction's B (f32: [batch..., k, n] with tiledAxis kTiledColumns, or a transposed GEMM's
// weights [batch..., n, k] with kTiledRows) rounded to bf16 (nearest even) in the pairs layout AMX's
// tile loads and VDPBF16PS read: panels of `width` of B's columns, each [kPadded / 2][width][2] —
// rows p and p + 1 of a column side by side — zero past k (up to kPadded, a multiple of 2) and past n.
Tensor packPairs(const Tensor& matrix, int tiledAxis, int64_t width, int64_t kPadded);

}  // namespace nnc
