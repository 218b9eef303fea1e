// Loop partitioning (index-set splitting) of a kernel's innermost outer loop, as Halide partitions
// loops around boundary conditions: the border tests of padding, windows and concatenation
// (`0 <= w + kw - 1 < W`, the index clamps `min(max(x, 0), W - 1)`) are affine in the innermost
// variable, so they change value at a few points only. Between those points every such test has one
// value for all values of the reduction and inner variables, and a backend that emits one loop per
// piece with the tests folded turns the interior into clamp-free, unit-stride code that vectorises.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "kir/kernel_ir.h"

namespace nnc::kir {

struct LoopPiece {
  int64_t begin = 0, end = 0;  // [begin, end) of the innermost outer variable
  // Facts that hold at every loop point of the piece, by expression: for a comparison (lt, le, gt,
  // ge on i64) its value; for an i64 min or max, true when it equals its first operand, false
  // when it equals its second.
  std::map<ExprId, bool> facts;
};

// The narrowest vector the CPU backend emits for a piece (4 lanes): a shorter piece runs scalar, so
// rows without a piece this long are not split (the split would only add loops). At 8, a Pad's
// 7-point rows (ResNet's last stage) stayed one loop of masked scalar loads; 512 x 7 x 7 -> 9 x 9
// ran faster at 4 (bench/NOTES.md, "Figures moved out of code comments").
inline constexpr int64_t kMinVectorPiece = 4;

// The pieces covering [0, extent) of the innermost outer variable in order, at most `maxPieces`;
// empty when partitioning would fold nothing (no such test), would need too many pieces, or would
// leave no piece of kMinVectorPiece points or more (too short to vectorise).
// A test counts when it is affine in the innermost variable and otherwise only in reduction and
// inner-loop variables, whose extents bound it.
std::vector<LoopPiece> partitionInnermostLoop(const Kernel& kernel, size_t maxPieces = 5);

// The interior of the other outer variables (all but the innermost): a box of their values where
// the tests that depend on one of them (and otherwise only on reduction and inner-loop variables)
// each take the value they have at the domain's centre — a depthwise conv's `0 <= h + kh - 1 < H`
// for every row h away from the top and bottom. A backend emits each row twice, the interior
// version with `facts` folded (no clamps, no selects: an NHWC depthwise conv's taps are plain
// vector loads) and the general one, and picks per row by the box test.
struct RowInterior {
  struct Range {
    size_t dim = 0;              // position in kernel.outer.vars
    int64_t begin = 0, end = 0;  // [begin, end) of that variable
  };
  std::vector<Range> ranges;     // only the variables the box narrows; empty: every row is interior
  std::map<ExprId, bool> facts;  // as LoopPiece::facts
};

// nullopt when no such test exists, or when under half of the rows are interior (the second copy
// of the row would rarely run).
std::optional<RowInterior> rowInterior(const Kernel& kernel);

}  // namespace nnc::kir
