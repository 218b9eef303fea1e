// Stores, expression values memoised per loop scope, and queries over the kernel's expression DAG.
#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "targets/cpu/codegen/kernel_lowering_context.h"

namespace nnc::codegen::llvmcpu::detail {

// Store `s` at the insertion point, its value converted to the tensor's storage type.
void KernelLowering::emitStore(const kir::Store& s) {
  Value* index = value(s.index);
  Value* v = value(s.value);
  if (!index || !v) return;
  const DType storage = k_.params[s.slot].dtype;
  Value* stored = ops_.toStorage(v, k_.expr(s.value).dtype, storage);
  llvm::Type* sty = ops_.storageType(storage);
  Value* ptr = b_.CreateInBoundsGEP(sty, bases_[s.slot], index);
  b_.CreateAlignedStore(stored, ptr, llvm::Align(dtypeSize(storage)));
}

// Loop variable `var` is `v` in the innermost open scope.
void KernelLowering::bind(ExprId var, Value* v) { scopes_.back()[var] = v; }

// The value of expression `e` at the insertion point; nullptr after an error.
Value* KernelLowering::value(ExprId e) {
  return memoized(e, [&] { return compute(e); });
}

// `e` from its operands' values, with the tests the current piece or row version folds.
Value* KernelLowering::compute(ExprId e) {
  if (!error_.empty()) return nullptr;
  const kir::ExprNode& n = k_.expr(e);
  if (facts_) {
    if (auto fact = facts_->find(e); fact != facts_->end()) {
      if (n.op == ExprOp::Min || n.op == ExprOp::Max) return value(fact->second ? n.a : n.b);
      return b_.getInt1(fact->second);
    }
  }
  switch (n.op) {
    case ExprOp::Const: return ops_.constant(n);
    case ExprOp::Var: NNC_CHECK(false, "kernel '" + k_.name + "': loop variable used outside its loop"); return nullptr;
    case ExprOp::ReduceValue:
      NNC_CHECK(n.ival >= 0 && static_cast<size_t>(n.ival) < reduced_.size() && reduced_[n.ival],
                "kernel '" + k_.name + "': reduction value used before it is computed");
      return reduced_[n.ival];
    case ExprOp::Load: {
      Value* index = value(n.a);
      if (!index) return nullptr;
      const DType storage = k_.params[n.slot].dtype;
      llvm::Type* sty = ops_.storageType(storage);
      Value* ptr = b_.CreateInBoundsGEP(sty, bases_[n.slot], index);
      Value* raw = b_.CreateAlignedLoad(sty, ptr, llvm::Align(dtypeSize(storage)));
      return ops_.fromStorage(raw, storage);
    }
    case ExprOp::Select: {
      Value* c = value(n.a);
      Value* t = value(n.b);
      Value* f = value(n.c);
      if (!c || !t || !f) return nullptr;
      return b_.CreateSelect(c, t, f);
    }
    case ExprOp::Cast: {
      Value* a = value(n.a);
      if (!a) return nullptr;
      return ops_.cast(a, k_.expr(n.a).dtype, n.dtype);
    }
    default: break;
  }
  std::string err;
  Value* r;
  if (kir::exprOpArity(n.op) == 1) {
    Value* a = value(n.a);
    if (!a) return nullptr;
    r = ops_.unary(n, a, k_.expr(n.a).dtype, &err);
  } else {
    Value* a = value(n.a);
    Value* b = value(n.b);
    if (!a || !b) return nullptr;
    r = ops_.binary(n, a, k_.expr(n.a).dtype, b, k_.expr(n.b).dtype, &err);
  }
  if (!r) error_ = std::string("e").append(std::to_string(e)).append(": ").append(err);
  return r;
}

// Whether `e` names one of the kernel's expressions.
bool KernelLowering::validExpr(ExprId e) const { return e >= 0 && static_cast<size_t>(e) < k_.exprs.size(); }

// Whether computing `e` reads memory: a load, or a reduction (whose body loads).
bool KernelLowering::readsMemory(ExprId e) const {
  if (e == kir::kNoExpr) return false;
  const kir::ExprNode& n = k_.expr(e);
  return n.op == ExprOp::Load || n.op == ExprOp::ReduceValue || readsMemory(n.a) || readsMemory(n.b) ||
         readsMemory(n.c);
}

// The Load expressions reachable from `root` outside any reduction's body for which `keep` holds,
// at most `limit` of them.
std::vector<ExprId> KernelLowering::loadsOutsideReductions(ExprId root,
                                                           llvm::function_ref<bool(const kir::ExprNode&)> keep,
                                                           size_t limit) const {
  std::vector<ExprId> loads, work = {root};
  std::set<ExprId> seen;
  while (!work.empty() && loads.size() < limit) {
    const ExprId e = work.back();
    work.pop_back();
    if (e == kir::kNoExpr || !seen.insert(e).second) continue;
    const kir::ExprNode& n = k_.expr(e);
    if (n.op == ExprOp::ReduceValue) continue;
    if (n.op == ExprOp::Load) {
      if (keep(n)) loads.push_back(e);
      continue;
    }
    work.insert(work.end(), {n.a, n.b, n.c});
  }
  return loads;
}

}  // namespace nnc::codegen::llvmcpu::detail
