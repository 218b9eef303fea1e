// Reductions: a loop nest accumulating in an entry-block alloca, and the accumulators' identity and combine.
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <cstdint>
#include <string>

#include "targets/cpu/codegen/kernel_lowering_context.h"

namespace nnc::codegen::llvmcpu::detail {

// The identity the accumulator starts from (equal to the interpreter's "first element" start).
Value* KernelLowering::identity(ReduceOp op, DType t) {
  llvm::Type* ty = ops_.valueType(t);
  const bool maxLike = op == ReduceOp::Max || op == ReduceOp::ArgMax;  // else Min/ArgMin
  if (isFloat(t)) {
    if (op == ReduceOp::Sum) return llvm::ConstantFP::getNegativeZero(ty);  // -0 + x == x, also for -0
    if (op == ReduceOp::Prod) return llvm::ConstantFP::get(ty, 1.0);
    return llvm::ConstantFP::getInfinity(ty, /*Negative=*/maxLike);
  }
  unsigned bits = ty->getIntegerBitWidth();
  const bool u = isUnsignedLike(t);
  if (op == ReduceOp::Sum) return llvm::ConstantInt::get(ty, 0);
  if (op == ReduceOp::Prod) return llvm::ConstantInt::get(ty, 1);
  if (maxLike)
    return llvm::ConstantInt::get(m_.getContext(),
                                  u ? llvm::APInt::getMinValue(bits) : llvm::APInt::getSignedMinValue(bits));
  return llvm::ConstantInt::get(m_.getContext(),
                                u ? llvm::APInt::getMaxValue(bits) : llvm::APInt::getSignedMaxValue(bits));
}

// A float max/min propagates NaN, which LLVM's vectoriser does not see as a reduction. With
// reassociation allowed it is split into two it does see: maxnum/minnum over the values
// (NaN-ignoring, flagged nnan) into `acc`, and an OR of "is NaN" into `sawNaN`; splitNaNResult gives
// NaN when any was.
void KernelLowering::foldSplitNaN(ReduceOp op, llvm::AllocaInst* acc, llvm::AllocaInst* sawNaN, Value* v) {
  llvm::FastMathFlags fmf;
  fmf.setNoNaNs();
  fmf.setNoSignedZeros();
  Value* next = b_.CreateBinaryIntrinsic(op == ReduceOp::Max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum,
                                         b_.CreateLoad(v->getType(), acc), v);
  llvm::cast<llvm::Instruction>(next)->setFastMathFlags(fmf);
  b_.CreateStore(next, acc);
  b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt1Ty(), sawNaN), b_.CreateFCmpUNO(v, v)), sawNaN);
}
Value* KernelLowering::splitNaNResult(llvm::AllocaInst* acc, llvm::AllocaInst* sawNaN, const std::string& name) {
  llvm::Type* ty = acc->getAllocatedType();
  return b_.CreateSelect(b_.CreateLoad(b_.getInt1Ty(), sawNaN), llvm::ConstantFP::getNaN(ty), b_.CreateLoad(ty, acc),
                         name);
}

// The accumulator `acc` folded with `v` by `op` (Sum, Prod, Max, Min) in dtype `t`.
Value* KernelLowering::combine(ReduceOp op, DType t, Value* acc, Value* v) {
  if (t == DType::Bool) {  // bool arithmetic saturates: sum/max = or, prod/min = and
    return (op == ReduceOp::Sum || op == ReduceOp::Max) ? b_.CreateOr(acc, v) : b_.CreateAnd(acc, v);
  }
  if (isFloat(t)) {
    llvm::FastMathFlags fmf;
    if (opts_.reassociateReductions) fmf.setAllowReassoc();
    fmf.setAllowContract();  // acc + a * b: one multiply-add
    switch (op) {
      case ReduceOp::Sum: {
        Value* r = b_.CreateFAdd(acc, v);
        llvm::cast<llvm::Instruction>(r)->setFastMathFlags(fmf);
        return r;
      }
      case ReduceOp::Prod: {
        Value* r = b_.CreateFMul(acc, v);
        llvm::cast<llvm::Instruction>(r)->setFastMathFlags(fmf);
        return r;
      }
      case ReduceOp::Max: return ops_.floatMax(acc, v);
      default: return ops_.floatMin(acc, v);
    }
  }
  switch (op) {
    case ReduceOp::Sum: return b_.CreateAdd(acc, v);
    case ReduceOp::Prod: return b_.CreateMul(acc, v);
    case ReduceOp::Max: return ops_.intMax(acc, v, t);
    default: return ops_.intMin(acc, v, t);
  }
}

// The value of reduction `r` (the kernel's reduction `number`) at the insertion point.
Value* KernelLowering::emitReduction(const kir::Reduction& r, size_t number) {
  const DType t = k_.expr(r.body).dtype;
  llvm::Type* ty = ops_.valueType(t);
  const std::string name = "red" + std::to_string(number);
  const bool isArg = r.op == ReduceOp::ArgMax || r.op == ReduceOp::ArgMin;
  llvm::AllocaInst* acc = entryAlloca(ty, name + ".acc");
  llvm::AllocaInst* bestIndex = isArg ? entryAlloca(b_.getInt64Ty(), name + ".idx") : nullptr;
  b_.CreateStore(identity(r.op, t), acc);
  if (isArg) b_.CreateStore(b_.getInt64(0), bestIndex);
  // Float max/min split in two for the vectoriser (foldSplitNaN).
  const bool splitNaN = opts_.reassociateReductions && (r.op == ReduceOp::Max || r.op == ReduceOp::Min) &&
                        (t == DType::F32 || t == DType::F64);
  llvm::AllocaInst* sawNaN = splitNaN ? entryAlloca(b_.getInt1Ty(), name + ".nan") : nullptr;
  if (splitNaN) b_.CreateStore(b_.getFalse(), sawNaN);
  emitLoopNest(
      r.loop, 0, name + ".",
      [&] {
        Value* v = value(r.body);
        if (!v) return;
        if (r.stashSlot >= 0) emitStore(kir::Store{r.stashSlot, r.stashIndex, r.body, false});
        if (splitNaN) {
          foldSplitNaN(r.op, acc, sawNaN, v);
          return;
        }
        Value* cur = b_.CreateLoad(ty, acc);
        if (!isArg) {
          b_.CreateStore(combine(r.op, t, cur, v), acc);
          return;
        }
        // ArgMax/ArgMin: the first element always wins (so a leading NaN sticks, as in the
        // interpreter), later ones when strictly better (or equal, with selectLastIndex).
        Value* flat = b_.getInt64(0);
        int64_t stride = 1;
        for (size_t d = r.loop.extents.size(); d-- > 0;) {
          flat = b_.CreateAdd(flat, b_.CreateMul(value(r.loop.vars[d]), b_.getInt64(stride)));
          stride *= r.loop.extents[d];
        }
        const bool isMax = r.op == ReduceOp::ArgMax;
        Value* better;
        if (isFloat(t)) {
          if (isMax)
            better = r.selectLastIndex ? b_.CreateFCmpOGE(v, cur) : b_.CreateFCmpOGT(v, cur);
          else
            better = r.selectLastIndex ? b_.CreateFCmpOLE(v, cur) : b_.CreateFCmpOLT(v, cur);
        } else {
          const bool u = isUnsignedLike(t);
          if (isMax) {
            better = r.selectLastIndex ? (u ? b_.CreateICmpUGE(v, cur) : b_.CreateICmpSGE(v, cur))
                                       : (u ? b_.CreateICmpUGT(v, cur) : b_.CreateICmpSGT(v, cur));
          } else {
            better = r.selectLastIndex ? (u ? b_.CreateICmpULE(v, cur) : b_.CreateICmpSLE(v, cur))
                                       : (u ? b_.CreateICmpULT(v, cur) : b_.CreateICmpSLT(v, cur));
          }
        }
        better = b_.CreateOr(better, b_.CreateICmpEQ(flat, b_.getInt64(0)));
        b_.CreateStore(b_.CreateSelect(better, v, cur), acc);
        b_.CreateStore(b_.CreateSelect(better, flat, b_.CreateLoad(b_.getInt64Ty(), bestIndex)), bestIndex);
      },
      r.unroll);
  if (isArg) return b_.CreateLoad(b_.getInt64Ty(), bestIndex, name);
  if (splitNaN) return splitNaNResult(acc, sawNaN, name);
  return b_.CreateLoad(ty, acc, name);
}

}  // namespace nnc::codegen::llvmcpu::detail
