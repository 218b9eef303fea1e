// Flash attention (kir::Attention): per task, a block of query rows against the keys block by block.
#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <vector>

#include "targets/cpu/codegen/kernel_lowering_context.h"
#include "targets/cpu/codegen/microkernel.h"

namespace nnc::codegen::llvmcpu::detail {

Status KernelLowering::checkAttention(const kir::Attention& a) const {
  const size_t rank = k_.outer.extents.size();
  auto slotOk = [&](int slot, int64_t numel) {
    return slot >= 0 && static_cast<size_t>(slot) < k_.params.size() && k_.params[slot].dtype == DType::F32 &&
           k_.params[slot].numel == numel;
  };
  const bool ok = rank >= 2 && k_.outer.extents[rank - 2] == a.lq && k_.outer.extents[rank - 1] == a.lk &&
                  k_.outer.size() == a.batch * a.lq * a.lk && a.lanes > 0 && a.nr % a.lanes == 0 && a.mr >= 1 &&
                  a.mr <= 32 && a.qBlock % a.mr == 0 && a.kBlock % a.nr == 0 && a.d >= 1 && a.dv >= 1 &&
                  k_.reductions.empty() && k_.stores.size() == 1 && k_.stores[0].slot == a.oSlot &&
                  k_.expr(k_.stores[0].value).dtype == DType::F32 && validExpr(a.dot) &&
                  k_.expr(a.dot).op == ExprOp::Load && k_.expr(a.dot).dtype == DType::F32 &&
                  slotOk(a.qSlot, a.batch * a.lq * a.d) && slotOk(a.ktSlot, a.batch * a.d * a.lk) &&
                  slotOk(a.vSlot, a.batch * a.lk * a.dv) && slotOk(a.oSlot, a.batch * a.lq * a.dv);
  return ok ? Status::ok() : Status::error("inconsistent attention: " + a.str());
}

Value* KernelLowering::loadF32(Value* base, Value* index) {
  llvm::Type* f32 = b_.getFloatTy();
  return b_.CreateAlignedLoad(f32, b_.CreateInBoundsGEP(f32, base, index), llvm::Align(4));
}
void KernelLowering::storeF32(Value* v, Value* base, Value* index) {
  b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(b_.getFloatTy(), base, index), llvm::Align(4));
}
Value* KernelLowering::f32c(double v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }
// exp(x) for x <= 0 (or NaN), inline (kir's expOfNonPositive).
Value* KernelLowering::expOfNonPositive(Value* x) {
  kir::ExprNode n{ExprOp::Exp, DType::F32};
  n.ival = kir::kExpOfNonPositive;
  return ops_.unary(n, x, DType::F32, &error_);
}

// A kLen x nr panel of a row-major B (rows `stride` floats apart) from column c0 on, `cols` of its
// columns present (1..nr): read in place when whole, else copied into `edge` zero-padded (so the
// microkernel reads whole vectors, never past B's rows). Its pointer and row stride.
std::pair<Value*, Value*> KernelLowering::panelOrCopy(Value* b, Value* stride, Value* c0, Value* kLen, Value* cols,
                                                      int64_t nr, Value* edge) {
  llvm::Type* f32 = b_.getFloatTy();
  Value* whole = b_.CreateICmpEQ(cols, i64(nr));
  emitIf(b_.CreateNot(whole), [&] {
    emitLoop(
        i64(0), kLen,
        [&](Value* p) {
          Value* row = b_.CreateAdd(b_.CreateMul(p, stride), c0);
          emitLoop(
              i64(0), i64(nr),
              [&](Value* c) {
                Value* at = b_.CreateAdd(row, smin(c, b_.CreateSub(cols, i64(1))));
                storeF32(b_.CreateSelect(b_.CreateICmpSLT(c, cols), loadF32(b, at), f32c(0)), edge,
                         b_.CreateAdd(b_.CreateMul(p, i64(nr)), c));
              },
              "edge.c");
        },
        "edge.p");
  });
  return {b_.CreateSelect(whole, b_.CreateInBoundsGEP(f32, b, c0), edge), b_.CreateSelect(whole, stride, i64(nr))};
}

// dst[i][:nr] (+)= A[i][:kLen] . panel for the `rows` rows of A (aStride floats apart), one register
// tile of up to mr rows at a time: micro[r - 1] computes r rows.
void KernelLowering::rowTiles(const std::vector<llvm::Function*>& micro, int64_t mr, Value* rows, Value* aBase,
                              int64_t aStride, Value* panel, Value* ldb, Value* kLen, Value* dst, int64_t ldDst,
                              bool accumulate) {
  llvm::Type* f32 = b_.getFloatTy();
  Value* noColumns = llvm::ConstantPointerNull::get(b_.getInt64Ty()->getPointerTo());
  emitLoop(
      i64(0), b_.CreateUDiv(b_.CreateAdd(rows, i64(mr - 1)), i64(mr)),
      [&](Value* t) {
        Value* r0 = b_.CreateMul(t, i64(mr));
        Value* tile = b_.CreateInBoundsGEP(f32, dst, b_.CreateMul(r0, i64(ldDst)));
        callByIndex(micro, smin(i64(mr), b_.CreateSub(rows, r0)),
                    {b_.CreateInBoundsGEP(f32, aBase, b_.CreateMul(r0, i64(aStride))), panel, ldb, kLen, tile,
                     i64(ldDst), b_.getInt1(accumulate), tile, i64(ldDst), noColumns, i64(0), panel});
      },
      "tile");
}

// For each task (batch b, query rows [i0, i0 + rows)):
//   m = -inf, l = 0, acc = 0 (rows x dv, on the stack)
//   for each block of keys [j0, j0 + cols):
//     S = Q[rows] . Kt[:, block]         register tiles (the contraction's microkernel), Kt read in place
//     per row: S = score(S) (the kernel's store value, masks and all), m' = max(m, max S),
//              P = exp(S - m'), l = l * exp(m - m') + sum P, acc *= exp(m - m')
//     acc += P . V[block]                register tiles again, accumulating
//   O[rows] = acc / l
// A row whose scores so far are all -inf (masked) takes P = 0 for them (exp(-inf - -inf) is NaN; the
// softmax of its later keys must not see it); one masked entirely ends as 0 / 0 = NaN, as the
// unfused softmax gives.
void KernelLowering::emitAttention(const kir::Attention& a) {
  const kir::Store& store = k_.stores[0];
  const size_t rank = k_.outer.extents.size();
  const ExprId iVar = k_.outer.vars[rank - 2], jVar = k_.outer.vars[rank - 1];
  const int64_t dvPad = (a.dv + a.nr - 1) / a.nr * a.nr;
  const int64_t vPanels = dvPad / a.nr;
  const int64_t kBlocks = (a.lk + a.kBlock - 1) / a.kBlock;
  std::vector<llvm::Function*> qk, pv;
  // Only the row counts a tile can have (whole tiles, and the last query rows' remainder): each
  // variant costs compile time.
  qk.assign(static_cast<size_t>(a.mr), nullptr);
  pv.assign(static_cast<size_t>(a.mr), nullptr);
  const std::vector<bool> rowCountUsed = kir::tileRowCounts(a.lq, a.qBlock, a.mr);
  for (int64_t rows = 1; rows <= a.mr; ++rows) {
    if (!rowCountUsed[static_cast<size_t>(rows)]) continue;
    qk[static_cast<size_t>(rows - 1)] =
        emitMicrokernel(m_, k_.name, {a.lanes, rows, a.nr, a.d, 1}, opts_.cpu, opts_.features);
    pv[static_cast<size_t>(rows - 1)] =
        emitMicrokernel(m_, k_.name, {a.lanes, rows, a.nr, a.kBlock, 1}, opts_.cpu, opts_.features);
  }
  Value* scores = alignedAlloca(a.qBlock * a.kBlock, "scores");
  Value* acc = alignedAlloca(a.qBlock * dvPad, "acc");
  Value* rowMax = alignedAlloca(a.qBlock, "rowmax");
  Value* rowSum = alignedAlloca(a.qBlock, "rowsum");
  // Copies of the last partial panel of Kt's keys and of V's columns, where there is one.
  Value* none = llvm::ConstantPointerNull::get(b_.getFloatTy()->getPointerTo());
  Value* ktEdge = a.lk % a.nr != 0 ? alignedAlloca(a.d * a.nr, "kt.edge") : none;
  Value* vEdge = a.dv % a.nr != 0 ? alignedAlloca(a.kBlock * a.nr, "v.edge") : none;
  Value* negInf = llvm::ConstantFP::getInfinity(b_.getFloatTy(), /*Negative=*/true);
  llvm::Type* f32 = b_.getFloatTy();
  Value* end = smin(fn_->getArg(2), i64(a.numTasks()));  // never past the last task
  emitLoop(
      fn_->getArg(1), end,
      [&](Value* task) {
        Value* batch = b_.CreateUDiv(task, i64(a.qBlocks()), "batch");
        Value* i0 = b_.CreateMul(b_.CreateURem(task, i64(a.qBlocks())), i64(a.qBlock), "i0");
        Value* rows = smin(i64(a.qBlock), b_.CreateSub(i64(a.lq), i0));
        Value* rest = batch;
        for (size_t d = rank - 2; d-- > 0;) {
          bind(k_.outer.vars[d], b_.CreateURem(rest, i64(k_.outer.extents[d])));
          rest = b_.CreateUDiv(rest, i64(k_.outer.extents[d]));
        }
        Value* q = b_.CreateInBoundsGEP(f32, bases_[a.qSlot],
                                        b_.CreateMul(b_.CreateAdd(b_.CreateMul(batch, i64(a.lq)), i0), i64(a.d)));
        Value* kt = b_.CreateInBoundsGEP(f32, bases_[a.ktSlot], b_.CreateMul(batch, i64(a.d * a.lk)));
        Value* v = b_.CreateInBoundsGEP(f32, bases_[a.vSlot], b_.CreateMul(batch, i64(a.lk * a.dv)));
        Value* o = b_.CreateInBoundsGEP(f32, bases_[a.oSlot],
                                        b_.CreateMul(b_.CreateAdd(b_.CreateMul(batch, i64(a.lq)), i0), i64(a.dv)));
        emitLoop(
            i64(0), rows,
            [&](Value* r) {
              storeF32(negInf, rowMax, r);
              storeF32(f32c(0), rowSum, r);
            },
            "init");
        b_.CreateMemSet(acc, b_.getInt8(0), b_.CreateMul(rows, i64(dvPad * 4)), llvm::MaybeAlign(64));
        emitLoop(
            i64(0), i64(kBlocks),
            [&](Value* kb) {
              Value* j0 = b_.CreateMul(kb, i64(a.kBlock), "j0");
              Value* cols = smin(i64(a.kBlock), b_.CreateSub(i64(a.lk), j0));
              Value* panels = b_.CreateUDiv(b_.CreateAdd(cols, i64(a.nr - 1)), i64(a.nr));
              // S = Q . Kt[:, j0 .. j0 + cols): Kt's whole panels read in place, the keys' last
              // partial one copied (zero-padded) so that the microkernel reads whole vectors.
              emitLoop(
                  i64(0), panels,
                  [&](Value* panel) {
                    Value* jp = b_.CreateAdd(j0, b_.CreateMul(panel, i64(a.nr)));
                    Value* pcols = smin(i64(a.nr), b_.CreateSub(i64(a.lk), jp));
                    const auto [bPanel, ldb] = panelOrCopy(kt, i64(a.lk), jp, i64(a.d), pcols, a.nr, ktEdge);
                    rowTiles(qk, a.mr, rows, q, a.d, bPanel, ldb, i64(a.d),
                             b_.CreateInBoundsGEP(f32, scores, b_.CreateMul(panel, i64(a.nr))), a.kBlock, false);
                  },
                  "qk.panel");
              // The online softmax, row by row.
              emitLoop(
                  i64(0), rows,
                  [&](Value* r) {
                    bind(iVar, b_.CreateAdd(i0, r));
                    Value* row = b_.CreateInBoundsGEP(f32, scores, b_.CreateMul(r, i64(a.kBlock)));
                    llvm::AllocaInst* mx = entryAlloca(f32, "att.max");
                    llvm::AllocaInst* sawNaN = entryAlloca(b_.getInt1Ty(), "att.nan");
                    b_.CreateStore(negInf, mx);
                    b_.CreateStore(b_.getFalse(), sawNaN);
                    emitLoop(
                        i64(0), cols,
                        [&](Value* c) {
                          bind(jVar, b_.CreateAdd(j0, c));
                          bind(a.dot, loadF32(row, c));
                          Value* s = value(store.value);
                          if (!s) return;
                          storeF32(s, row, c);
                          foldSplitNaN(ReduceOp::Max, mx, sawNaN, s);
                        },
                        "score");
                    Value* blockMax = splitNaNResult(mx, sawNaN, "att.blockmax");
                    Value* oldMax = loadF32(rowMax, r);
                    Value* newMax = ops_.floatMax(oldMax, blockMax);
                    Value* shift = b_.CreateSelect(b_.CreateFCmpOEQ(newMax, negInf), f32c(0), newMax);
                    Value* alpha = expOfNonPositive(b_.CreateFSub(oldMax, shift));
                    llvm::AllocaInst* sum = entryAlloca(f32, "att.sum");
                    b_.CreateStore(llvm::ConstantFP::getNegativeZero(f32), sum);
                    emitLoop(
                        i64(0), cols,
                        [&](Value* c) {
                          Value* p = expOfNonPositive(b_.CreateFSub(loadF32(row, c), shift));
                          if (!p) return;
                          storeF32(p, row, c);
                          b_.CreateStore(combine(ReduceOp::Sum, DType::F32, b_.CreateLoad(f32, sum), p), sum);
                        },
                        "exp");
                    storeF32(b_.CreateFAdd(b_.CreateFMul(loadF32(rowSum, r), alpha), b_.CreateLoad(f32, sum)), rowSum,
                             r);
                    storeF32(newMax, rowMax, r);
                    Value* accRow = b_.CreateInBoundsGEP(f32, acc, b_.CreateMul(r, i64(dvPad)));
                    emitLoop(
                        i64(0), i64(dvPad),
                        [&](Value* c) { storeF32(b_.CreateFMul(loadF32(accRow, c), alpha), accRow, c); }, "rescale");
                  },
                  "softmax");
              // acc += P . V[j0 .. j0 + cols): V's whole column panels read in place, its last
              // partial one copied.
              emitLoop(
                  i64(0), i64(vPanels),
                  [&](Value* panel) {
                    Value* c0 = b_.CreateMul(panel, i64(a.nr));
                    Value* pcols = smin(i64(a.nr), b_.CreateSub(i64(a.dv), c0));
                    Value* vBlock = b_.CreateInBoundsGEP(f32, v, b_.CreateMul(j0, i64(a.dv)));
                    const auto [bPanel, ldb] = panelOrCopy(vBlock, i64(a.dv), c0, cols, pcols, a.nr, vEdge);
                    rowTiles(pv, a.mr, rows, scores, a.kBlock, bPanel, ldb, cols, b_.CreateInBoundsGEP(f32, acc, c0),
                             dvPad, true);
                  },
                  "pv.panel");
            },
            "keys");
        // O = acc / l.
        emitLoop(
            i64(0), rows,
            [&](Value* r) {
              Value* inverse = b_.CreateFDiv(f32c(1), loadF32(rowSum, r));
              Value* accRow = b_.CreateInBoundsGEP(f32, acc, b_.CreateMul(r, i64(dvPad)));
              Value* out = b_.CreateInBoundsGEP(f32, o, b_.CreateMul(r, i64(a.dv)));
              emitLoop(
                  i64(0), i64(a.dv), [&](Value* c) { storeF32(b_.CreateFMul(loadF32(accRow, c), inverse), out, c); },
                  "out");
            },
            "normalise");
      },
      "task");
}

}  // namespace nnc::codegen::llvmcpu::detail
