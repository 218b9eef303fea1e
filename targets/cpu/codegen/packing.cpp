// The GEMM's operands packed and copied for the microkernel: A's row tiles, B's panels, partial output tiles.
#include <llvm/IR/IRBuilder.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "targets/cpu/codegen/kernel_lowering_context.h"

namespace nnc::codegen::llvmcpu::detail {

// packed[(t * kLen + p) * mr + i % mr] = A[i][kc0 + p] for rows i in [m0, m1), t = (i - m0) / mr.
// A whole row tile is copied a chunk of 16 columns at a time, its rows and the chunk unrolled: each
// row's cache line is read once (rows a multiple of 4 KiB apart share L1's sets, so a column-by-
// column walk of 13 rows misses on every load) and the chunk's mr x 16 packed floats stay in L1.
// The moves stay scalar: vectorised, the writes that stride by mr would become scatters, which
// Zen 4 runs at a few cycles per element.
void KernelLowering::packA(const kir::Contraction& c, Value* aBatch, Value* m0, Value* m1, Value* kc0, Value* kLen,
                           Value* packed) {
  if (c.aRowIndex != kir::kNoExpr) {
    packSeparableA(c, aBatch, m0, m1, kc0, kLen, packed);
    return;
  }
  llvm::Type* f32 = b_.getFloatTy();
  Value* tiles = b_.CreateUDiv(b_.CreateAdd(b_.CreateSub(m1, m0), i64(c.mr - 1)), i64(c.mr));
  emitLoop(
      i64(0), tiles,
      [&](Value* t) {
        Value* i0 = b_.CreateAdd(m0, b_.CreateMul(t, i64(c.mr)));
        Value* rows = smin(i64(c.mr), b_.CreateSub(m1, i0));
        Value* dst = b_.CreateInBoundsGEP(f32, packed, b_.CreateMul(b_.CreateMul(t, kLen), i64(c.mr)));
        auto rowStart = [&](Value* r) {
          return b_.CreateInBoundsGEP(
              f32, aBatch,
              b_.CreateAdd(b_.CreateMul(b_.CreateAdd(i0, r), i64(c.aRowStride)), b_.CreateMul(kc0, i64(c.aColStride))));
        };
        auto copy = [&](Value* src, Value* p, Value* r) {
          Value* v = b_.CreateAlignedLoad(f32, b_.CreateInBoundsGEP(f32, src, b_.CreateMul(p, i64(c.aColStride))),
                                          llvm::Align(4));
          b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(f32, dst, b_.CreateAdd(b_.CreateMul(p, i64(c.mr)), r)),
                                llvm::Align(4));
        };
        emitIfElse(
            b_.CreateICmpEQ(rows, i64(c.mr)),
            [&] {
              constexpr int64_t kChunk = 16;
              std::vector<Value*> starts;
              for (int64_t r = 0; r < c.mr; ++r) starts.push_back(rowStart(i64(r)));
              Value* chunks = b_.CreateUDiv(kLen, i64(kChunk));
              emitLoop(
                  i64(0), chunks,
                  [&](Value* chunk) {
                    Value* p0 = b_.CreateMul(chunk, i64(kChunk));
                    for (int64_t r = 0; r < c.mr; ++r)
                      for (int64_t q = 0; q < kChunk; ++q)
                        copy(starts[static_cast<size_t>(r)], b_.CreateAdd(p0, i64(q)), i64(r));
                  },
                  "apack.chunk", noVectorLoop());
              emitLoop(
                  b_.CreateMul(chunks, i64(kChunk)), kLen,
                  [&](Value* p) {
                    for (int64_t r = 0; r < c.mr; ++r) copy(starts[static_cast<size_t>(r)], p, i64(r));
                  },
                  "apack.p", noVectorLoop());
            },
            [&] {
              emitLoop(
                  i64(0), rows,
                  [&](Value* r) {
                    Value* start = rowStart(r);
                    emitLoop(
                        i64(0), kLen, [&](Value* p) { copy(start, p, r); }, "apack.edge.p", noVectorLoop());
                  },
                  "apack.edge.r");
            });
      },
      "apack.t");
}

// The K block's column offsets C(p) of a separable A: a conv's (channel, tap) offsets.
void KernelLowering::fillColumnOffsets(const kir::Contraction& c, Value* kc0, Value* kLen) {
  const ExprId p = k_.reductions[0].loop.vars[0];
  emitLoop(
      i64(0), kLen,
      [&](Value* q) {
        bind(p, b_.CreateAdd(kc0, q));
        if (Value* col = value(c.aColIndex)) b_.CreateStore(col, tableAt(separable_.colOffset, q));
      },
      "acols.p");
}

// packA for a separable A (kir::Contraction::aRowIndex): tables of the block's row offsets R(i)
// and the K block's column offsets C(p), and per row tile the step between its rows' offsets when
// it is whole and they are evenly 1 or 2 apart (a conv's output row segment, stride 1 or 2): such
// a tile is read in place by the microkernel (separable_.inPlace). Other tiles (crossing an output
// row, at the block's edge) are packed here element by element: A[R(i) + C(p)].
void KernelLowering::packSeparableA(const kir::Contraction& c, Value* aBatch, Value* m0, Value* m1, Value* kc0,
                                    Value* kLen, Value* packed) {
  llvm::Type* f32 = b_.getFloatTy();
  llvm::Type* i64Ty = b_.getInt64Ty();
  emitLoop(
      m0, m1,
      [&](Value* i) {
        bind(rowVar(c), i);
        if (Value* r = value(c.aRowIndex)) b_.CreateStore(r, tableAt(separable_.rowOffset, b_.CreateSub(i, m0)));
      },
      "arows.i");
  if (!separable_.columnsOnce) fillColumnOffsets(c, kc0, kLen);
  Value* tiles = b_.CreateUDiv(b_.CreateAdd(b_.CreateSub(m1, m0), i64(c.mr - 1)), i64(c.mr));
  // Per whole tile: the step s (1 or 2) its rows advance by, from the first or the last pair, and
  // the rows where they do not: none (one run), one (two runs, the second from that row), or more
  // (packed). The step is 0 for a packed tile.
  llvm::AllocaInst* breaks = entryAlloca(i64Ty, "breaks");
  llvm::AllocaInst* splitAt = entryAlloca(i64Ty, "split");
  emitLoop(
      i64(0), tiles,
      [&](Value* t) {
        Value* r0 = b_.CreateMul(t, i64(c.mr));
        Value* rows = smin(i64(c.mr), b_.CreateSub(b_.CreateSub(m1, m0), r0));
        auto rowOffset = [&](Value* r) {
          return b_.CreateLoad(i64Ty, tableAt(separable_.rowOffset, b_.CreateAdd(r0, r)));
        };
        auto stepOk = [&](Value* s) { return b_.CreateOr(b_.CreateICmpEQ(s, i64(1)), b_.CreateICmpEQ(s, i64(2))); };
        Value* head = b_.CreateSub(rowOffset(i64(1 % c.mr)), rowOffset(i64(0)));
        Value* tail = b_.CreateSub(rowOffset(i64(std::max<int64_t>(c.mr - 1, 0))),
                                   rowOffset(i64(std::max<int64_t>(c.mr - 2, 0))));
        Value* step = b_.CreateSelect(stepOk(head), head, tail);
        Value* whole = b_.CreateAnd(b_.CreateICmpEQ(rows, i64(c.mr)), stepOk(step));
        b_.CreateStore(i64(0), breaks);
        b_.CreateStore(i64(0), splitAt);
        emitIf(whole, [&] {
          emitLoop(
              i64(1), i64(c.mr),
              [&](Value* r) {
                Value* off = b_.CreateICmpNE(rowOffset(r), b_.CreateAdd(rowOffset(b_.CreateSub(r, i64(1))), step));
                b_.CreateStore(b_.CreateAdd(b_.CreateLoad(i64Ty, breaks), b_.CreateZExt(off, i64Ty)), breaks);
                b_.CreateStore(b_.CreateSelect(off, r, b_.CreateLoad(i64Ty, splitAt)), splitAt);
              },
              "arows.step");
        });
        // Two runs only where that split has its microkernel (tileSplits found it at compile time).
        Value* mask = b_.CreateSelect(b_.CreateICmpEQ(step, i64(1)), i64(static_cast<int64_t>(separable_.splitMask[0])),
                                      i64(static_cast<int64_t>(separable_.splitMask[1])));
        Value* hasSplit =
            b_.CreateICmpNE(b_.CreateAnd(b_.CreateLShr(mask, b_.CreateLoad(i64Ty, splitAt)), i64(1)), i64(0));
        Value* nBreaks = b_.CreateLoad(i64Ty, breaks);
        Value* inPlace = b_.CreateAnd(whole, b_.CreateOr(b_.CreateICmpEQ(nBreaks, i64(0)),
                                                         b_.CreateAnd(b_.CreateICmpEQ(nBreaks, i64(1)), hasSplit)));
        b_.CreateStore(b_.CreateSelect(inPlace, step, i64(0)), tableAt(separable_.tileStep, t));
        b_.CreateStore(b_.CreateSelect(inPlace, b_.CreateLoad(i64Ty, splitAt), i64(0)),
                       tableAt(separable_.tileSplit, t));
        emitIf(b_.CreateNot(inPlace), [&] {
          Value* tileBase = b_.CreateMul(b_.CreateMul(t, kLen), i64(c.mr));
          emitLoop(
              i64(0), kLen,
              [&](Value* q) {
                Value* col = b_.CreateLoad(i64Ty, tableAt(separable_.colOffset, q));
                Value* dst = b_.CreateInBoundsGEP(f32, packed, b_.CreateAdd(tileBase, b_.CreateMul(q, i64(c.mr))));
                emitLoop(
                    i64(0), rows,
                    [&](Value* r) {
                      Value* from = b_.CreateInBoundsGEP(f32, aBatch, b_.CreateAdd(rowOffset(r), col));
                      b_.CreateAlignedStore(b_.CreateAlignedLoad(f32, from, llvm::Align(4)),
                                            b_.CreateInBoundsGEP(f32, dst, r), llvm::Align(4));
                    },
                    "apack.r");
              },
              "apack.p");
        });
      },
      "apack.t");
}

// The address of element i of `table` (one of separable_'s i64 arrays).
Value* KernelLowering::tableAt(llvm::AllocaInst* table, Value* i) {
  return b_.CreateInBoundsGEP(table->getAllocatedType(), table, {i64(0), i});
}

// Per step (1, 2): bit r set where a whole row tile of a separable A is two runs of that step, the
// second from row r — the same test packSeparableA makes at run time, made here on R's constant
// values (tiles start at multiples of mr). Zero when R is not a constant function of the row.
std::array<uint64_t, 2> KernelLowering::tileSplits(const kir::Contraction& c) {
  std::array<uint64_t, 2> masks = {0, 0};
  if (c.mr < 3 || c.mr > 63 || c.m > (1 << 22)) return masks;
  std::vector<int64_t> rowOffset(static_cast<size_t>(c.m));
  const ExprId row = rowVar(c);
  for (int64_t i = 0; i < c.m; ++i) {
    std::optional<int64_t> r = constantIndex(c.aRowIndex, row, i);
    if (!r) return masks;
    rowOffset[static_cast<size_t>(i)] = *r;
  }
  for (int64_t start = 0; start + c.mr <= c.m; start += c.mr) {
    auto R = [&](int64_t r) { return rowOffset[static_cast<size_t>(start + r)]; };
    const int64_t head = R(1) - R(0), tail = R(c.mr - 1) - R(c.mr - 2);
    const int64_t step = head == 1 || head == 2 ? head : tail;
    if (step != 1 && step != 2) continue;
    int64_t breaks = 0, at = 0;
    for (int64_t r = 1; r < c.mr; ++r)
      if (R(r) != R(r - 1) + step) ++breaks, at = r;
    if (breaks == 1) masks[static_cast<size_t>(step - 1)] |= uint64_t{1} << at;
  }
  return masks;
}

// The value of i64 expression `e` with `var` = `value` (constants, + - *, floor div/mod, min,
// max); nullopt where it reads anything else.
std::optional<int64_t> KernelLowering::constantIndex(ExprId e, ExprId var, int64_t value) {
  const kir::ExprNode& n = k_.expr(e);
  if (n.op == ExprOp::Var) return e == var ? std::optional<int64_t>(value) : std::nullopt;
  if (n.op == ExprOp::Const) return n.dtype == DType::I64 ? std::optional<int64_t>(n.ival) : std::nullopt;
  if (n.a == kir::kNoExpr || n.b == kir::kNoExpr) return std::nullopt;
  const std::optional<int64_t> a = constantIndex(n.a, var, value), b = constantIndex(n.b, var, value);
  if (!a || !b) return std::nullopt;
  switch (n.op) {
    case ExprOp::Add: return *a + *b;
    case ExprOp::Sub: return *a - *b;
    case ExprOp::Mul: return *a * *b;
    case ExprOp::Min: return std::min(*a, *b);
    case ExprOp::Max: return std::max(*a, *b);
    case ExprOp::FloorDiv:
      if (*b == 0) return std::nullopt;
      return *a / *b - ((*a % *b != 0) && ((*a < 0) != (*b < 0)));
    case ExprOp::FloorMod: {
      if (*b == 0) return std::nullopt;
      const int64_t m = *a % *b;
      return m != 0 && ((m < 0) != (*b < 0)) ? m + *b : m;
    }
    default: return std::nullopt;
  }
}

// buffer[(q * kLen + p) * nr + jj] = B[kc0 + p][n0 + q * nr + jj] (0 past n1): the block's panels,
// B's rows read in order.
void KernelLowering::packBlockB(const kir::Contraction& c, Value* bBatch, Value* n0, Value* n1, Value* kc0, Value* kLen,
                                Value* buffer) {
  llvm::Type* f32 = b_.getFloatTy();
  Value* panels = b_.CreateUDiv(b_.CreateAdd(b_.CreateSub(n1, n0), i64(c.nr - 1)), i64(c.nr));
  emitLoop(
      i64(0), kLen,
      [&](Value* p) {
        Value* srcRow = b_.CreateInBoundsGEP(
            f32, bBatch,
            b_.CreateAdd(b_.CreateMul(b_.CreateAdd(kc0, p), i64(c.bRowStride)), b_.CreateMul(n0, i64(c.bColStride))));
        emitLoop(
            i64(0), panels,
            [&](Value* q) {
              Value* cols = smin(i64(c.nr), b_.CreateSub(b_.CreateSub(n1, n0), b_.CreateMul(q, i64(c.nr))));
              Value* src = b_.CreateInBoundsGEP(f32, srcRow, b_.CreateMul(q, i64(c.nr * c.bColStride)));
              Value* dst =
                  b_.CreateInBoundsGEP(f32, buffer, b_.CreateMul(b_.CreateAdd(b_.CreateMul(q, kLen), p), i64(c.nr)));
              copyPanelRow(c, src, dst, cols);
            },
            "bblock.q");
      },
      "bblock.p");
}

// One row of a packed B panel: dst[j] = src[j * bColStride] for the `cols` columns present, then
// zeros up to nr; no per-element select, so an edge panel costs about a memcpy. A whole unit-stride
// row is nr / lanes vector moves: as a loop, LLVM made it a call to memcpy for 128 bytes, per row
// (SqueezeNet's 256 -> 32 1 x 1 conv, one panel per task; bench/NOTES.md).
void KernelLowering::copyPanelRow(const kir::Contraction& c, Value* src, Value* dst, Value* cols) {
  llvm::Type* f32 = b_.getFloatTy();
  if (c.bColStride == 1) {
    emitIfElse(
        b_.CreateICmpEQ(cols, i64(c.nr)),
        [&] {
          auto* vty = llvm::FixedVectorType::get(f32, static_cast<unsigned>(c.lanes));
          for (int64_t j = 0; j < c.nr; j += c.lanes)
            b_.CreateAlignedStore(
                b_.CreateAlignedLoad(vty, b_.CreateConstInBoundsGEP1_64(f32, src, static_cast<uint64_t>(j)),
                                     llvm::Align(4), "bpanel.row"),
                b_.CreateConstInBoundsGEP1_64(f32, dst, static_cast<uint64_t>(j)), llvm::Align(4));
        },
        [&] { copyPartialPanelRow(c, src, dst, cols); });
    return;
  }
  copyPartialPanelRow(c, src, dst, cols);
}

// copyPanelRow element by element: the columns present, then zeros up to nr.
void KernelLowering::copyPartialPanelRow(const kir::Contraction& c, Value* src, Value* dst, Value* cols) {
  llvm::Type* f32 = b_.getFloatTy();
  emitLoop(
      i64(0), cols,
      [&](Value* j) {
        Value* v = b_.CreateAlignedLoad(f32, b_.CreateInBoundsGEP(f32, src, b_.CreateMul(j, i64(c.bColStride))),
                                        llvm::Align(4));
        b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(f32, dst, j), llvm::Align(4));
      },
      "pack.j");
  emitLoop(
      cols, i64(c.nr),
      [&](Value* j) {
        b_.CreateAlignedStore(llvm::ConstantFP::get(f32, 0.0), b_.CreateInBoundsGEP(f32, dst, j), llvm::Align(4));
      },
      "pack.zero");
}

// B's kc x nr panel for the microkernel: its pointer and row stride. A packed B is used in place; a
// row-major B too, for whole panels; anything else is copied into `buffer` (zero past the columns).
std::pair<Value*, Value*> KernelLowering::panelOperand(const kir::Contraction& c, Value* bBatch, Value* panel,
                                                       Value* j0, Value* cols, Value* kc0, Value* kLen, Value* buffer) {
  llvm::Type* f32 = b_.getFloatTy();
  using BLayout = kir::Contraction::BLayout;
  if (c.bLayout == BLayout::Packed && c.operands == DType::BF16) {  // [panel][kPadded / 2][nr][2] bf16
    Value* offset = b_.CreateAdd(b_.CreateMul(panel, i64(c.kPadded() * c.nr / 2)), b_.CreateMul(kc0, i64(c.nr / 2)));
    return {b_.CreateInBoundsGEP(f32, bBatch, offset), i64(c.nr)};
  }
  if (c.bLayout == BLayout::Packed) {
    Value* offset = b_.CreateMul(b_.CreateAdd(b_.CreateMul(panel, i64(c.k)), kc0), i64(c.nr));
    return {b_.CreateInBoundsGEP(f32, bBatch, offset), i64(c.nr)};
  }
  Value* source = b_.CreateInBoundsGEP(
      f32, bBatch, b_.CreateAdd(b_.CreateMul(kc0, i64(c.bRowStride)), b_.CreateMul(j0, i64(c.bColStride))));
  // Row by row (copyPanelRow).
  auto copy = [&] {
    emitLoop(
        i64(0), kLen,
        [&](Value* p) {
          copyPanelRow(c, b_.CreateInBoundsGEP(f32, source, b_.CreateMul(p, i64(c.bRowStride))),
                       b_.CreateInBoundsGEP(f32, buffer, b_.CreateMul(p, i64(c.nr))), cols);
        },
        "pack.p");
  };
  if (c.bLayout == BLayout::Copy) {
    copy();
    return {buffer, i64(c.nr)};
  }
  // Direct: whole panels in place, the last partial one copied.
  Value* whole = b_.CreateICmpEQ(cols, i64(c.nr));
  emitIf(b_.CreateNot(whole), copy);
  return {b_.CreateSelect(whole, source, buffer), b_.CreateSelect(whole, i64(c.bRowStride), i64(c.nr))};
}

// dst[i * dstStride + j] = src[i * srcStride + j] for i < rows, j < cols.
void KernelLowering::copyTile(Value* src, int64_t srcStride, Value* dst, int64_t dstStride, Value* rows, Value* cols) {
  llvm::Type* f32 = b_.getFloatTy();
  emitLoop(
      i64(0), rows,
      [&](Value* i) {
        emitLoop(
            i64(0), cols,
            [&](Value* j) {
              Value* v = b_.CreateAlignedLoad(
                  f32, b_.CreateInBoundsGEP(f32, src, b_.CreateAdd(b_.CreateMul(i, i64(srcStride)), j)),
                  llvm::Align(4));
              b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(f32, dst, b_.CreateAdd(b_.CreateMul(i, i64(dstStride)), j)),
                                    llvm::Align(4));
            },
            "copy.j");
      },
      "copy.i");
}

}  // namespace nnc::codegen::llvmcpu::detail
