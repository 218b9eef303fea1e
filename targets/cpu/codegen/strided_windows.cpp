// Strided windows, vectorised here rather than by LLVM's loop vectoriser.
//
// A window read with a stride along the innermost variable (a stride-2 depthwise conv or pool:
// taps at 2w - 1, 2w, 2w + 1) is where LLVM's loop vectoriser does worst: the taps that form no
// complete interleave group become gathers (LLVM 14: one tap of three; LLVM 19 on Zen 4: all of
// them, slower than scalar code), or it gives up. Such a loop (its piece's border tests
// folded) is vectorised here instead, `lanes` points at a time: values that depend on the
// innermost variable are vectors, everything else is computed once as a scalar and splat; a load
// with stride s reads s contiguous vectors (the last one masked, so nothing past the last tap is
// touched) and keeps every s-th lane; reductions over the window keep one accumulator per lane,
// folding taps in the scalar order, so each point's result equals the scalar loop's. The rest of
// the piece runs as the scalar loop.
#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kir/affine.h"
#include "targets/cpu/codegen/kernel_lowering_context.h"

namespace nnc::codegen::llvmcpu::detail {

namespace {

// The widest stride of a load vectorised here (stridedLoad reads up to this many vectors per load).
constexpr int64_t kMaxWindowStride = 4;
constexpr int64_t kLlvmVectorLoopVectors = 4;  // LLVM's interleave count for such loops

}  // namespace

// Whether `e` depends on the innermost outer variable, with the current piece's tests folded.
bool KernelLowering::dependsOnInner(ExprId e) {
  if (auto it = vectorMemo_.depends.find(e); it != vectorMemo_.depends.end()) return it->second;
  const kir::ExprNode& n = k_.expr(e);
  bool depends = false;
  const auto fact = facts_ ? facts_->find(e) : std::map<ExprId, bool>::const_iterator();
  if (facts_ && fact != facts_->end()) {
    depends = (n.op == ExprOp::Min || n.op == ExprOp::Max) && dependsOnInner(fact->second ? n.a : n.b);
  } else if (n.op == ExprOp::Var) {
    depends = e == k_.outer.vars.back();
  } else if (n.op == ExprOp::ReduceValue) {
    depends = dependsOnInner(k_.reductions[static_cast<size_t>(n.ival)].body);
  } else {
    for (ExprId operand : {n.a, n.b, n.c})
      if (operand != kir::kNoExpr && dependsOnInner(operand)) depends = true;
  }
  vectorMemo_.depends[e] = depends;
  return depends;
}

// The step of an i64 index per innermost point (nullopt: not affine in it alone).
std::optional<int64_t> KernelLowering::innerStride(ExprId index) {
  std::optional<kir::AffineForm> form = kir::affineForm(k_.exprs, index, &vectorMemo_.foldedClamps);
  if (!form) return std::nullopt;
  const ExprId inner = k_.outer.vars.back();
  for (const auto& [term, coefficient] : form->terms)
    if (term != inner && dependsOnInner(term)) return std::nullopt;
  return form->coefficient(inner);
}

// Whether vectorValue can compute `e`; notes loads with a stride of 2 or more.
bool KernelLowering::vectorizable(ExprId e) {
  if (!dependsOnInner(e)) return true;
  if (auto it = vectorMemo_.ok.find(e); it != vectorMemo_.ok.end()) return it->second;
  const kir::ExprNode& n = k_.expr(e);
  bool ok = false;
  switch (n.op) {
    case ExprOp::Load: {
      const std::optional<int64_t> stride = innerStride(n.a);
      ok = n.dtype == DType::F32 && k_.params[n.slot].dtype == DType::F32 && stride && *stride >= 1 &&
           *stride <= kMaxWindowStride;
      if (ok) vectorMemo_.loadStride[e] = *stride;
      if (ok && *stride >= 2) vectorMemo_.strided = true;
      break;
    }
    case ExprOp::ReduceValue: {
      const kir::Reduction& r = k_.reductions[static_cast<size_t>(n.ival)];
      ok = r.dtype == DType::F32 && k_.expr(r.body).dtype == DType::F32 &&
           (r.op == ReduceOp::Sum || r.op == ReduceOp::Max || r.op == ReduceOp::Min) && vectorizable(r.body);
      break;
    }
    case ExprOp::Select:
      ok = (n.dtype == DType::F32 || n.dtype == DType::Bool) && vectorizable(n.a) && vectorizable(n.b) &&
           vectorizable(n.c);
      break;
    case ExprOp::Neg:
    case ExprOp::Abs:
    case ExprOp::Sqrt: ok = n.dtype == DType::F32 && vectorizable(n.a); break;
    case ExprOp::Exp:
    case ExprOp::Erf:
    case ExprOp::Tanh:
      ok = vectorMemo_.mathCalls && opts_.vectorMathLanes == static_cast<unsigned>(windowLanes_) &&
           n.dtype == DType::F32 && k_.expr(n.a).dtype == DType::F32 && vectorizable(n.a);
      break;
    case ExprOp::Add:
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::Div:
    case ExprOp::Min:
    case ExprOp::Max:
    case ExprOp::Eq:
    case ExprOp::Ne:
    case ExprOp::Lt:
    case ExprOp::Le:
    case ExprOp::Gt:
    case ExprOp::Ge:
      ok = k_.expr(n.a).dtype == DType::F32 && k_.expr(n.b).dtype == DType::F32 && vectorizable(n.a) &&
           vectorizable(n.b);
      break;
    default: break;
  }
  vectorMemo_.ok[e] = ok;
  return ok;
}

// Whether the innermost loop of the piece being emitted (`length` points) is vectorised here:
// every store is one f32 element per point, unit-stride, of a value vectorizable computes, and
// some load strides or the piece is short. The vectors are as wide as the target's, or narrower
// for a short piece (a depthwise conv's 8-point rows), down to 4 lanes.
bool KernelLowering::vectorisedHere(int64_t length) {
  vectorMemo_ = VectorMemo();
  if (facts_)
    for (const auto& [id, fact] : *facts_) {
      const kir::ExprNode& n = k_.expr(id);
      if (n.op == ExprOp::Min || n.op == ExprOp::Max) vectorMemo_.foldedClamps[id] = fact ? n.a : n.b;
    }
  windowLanes_ = opts_.vectorLanes;
  while (windowLanes_ > kir::kMinVectorPiece && windowLanes_ > length) windowLanes_ /= 2;
  if (windowLanes_ < kir::kMinVectorPiece || windowLanes_ > length || k_.outer.extents.empty()) return false;
  for (const kir::Store& st : k_.stores) {
    if (st.perInner || k_.params[st.slot].dtype != DType::F32 || k_.expr(st.value).dtype != DType::F32 ||
        innerStride(st.index) != std::optional<int64_t>(1) || !vectorizable(st.value))
      return false;
  }
  // A unit-stride piece shorter than LLVM's vector loop (16 lanes x 4 interleaved) would run all
  // in LLVM's epilogue, 8 lanes then scalar: a Pad's 56-point rows as 7 ymm copies, its 14-point
  // rows as one and 6 scalars. Here a 56-point row is 3 vectors and one overlapping, a 14-point
  // row two 8-lane vectors (bench/NOTES.md).
  return vectorMemo_.strided || length < kLlvmVectorLoopVectors * opts_.vectorLanes;
}

// [lo, hi): vectors of `lanes` points; the rest as one more vector ending at hi (it overlaps the
// last one, computing a few points twice: a kernel's output never aliases its inputs), or, in a
// piece shorter than a vector, the scalar loop. (Run as scalars, the few points past a short row's
// last vector cost about as much as its vectors: a pool's 55-point rows with 16 lanes.)
void KernelLowering::emitStridedWindows(Value* lo, Value* hi, const std::string& name) {
  const int64_t lanes = windowLanes_;
  Value* length = smax(b_.CreateSub(hi, lo), i64(0));
  Value* vectors = b_.CreateUDiv(length, i64(lanes));
  Value* vectorEnd = b_.CreateAdd(lo, b_.CreateMul(vectors, i64(lanes)));
  auto vectorAt = [&](Value* start) {
    bind(k_.outer.vars.back(), start);
    vectorReduced_.assign(k_.reductions.size(), nullptr);
    reduced_.assign(k_.reductions.size(), nullptr);
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      if (dependsOnInner(k_.reductions[r].body))
        vectorReduced_[r] = emitVectorReduction(k_.reductions[r], r);
      else
        reduced_[r] = emitReduction(k_.reductions[r], r);
    }
    for (const kir::Store& st : k_.stores) {
      Value* index = value(st.index);
      Value* v = vectorValue(st.value);
      if (!index || !v) return;
      b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(b_.getFloatTy(), bases_[st.slot], index), llvm::Align(4));
    }
  };
  emitLoop(
      i64(0), vectors, [&](Value* q) { vectorAt(b_.CreateAdd(lo, b_.CreateMul(q, i64(lanes)))); }, name + ".vec");
  Value* rest = b_.CreateICmpSLT(vectorEnd, hi);
  emitIfElse(
      b_.CreateAnd(rest, b_.CreateICmpNE(vectors, i64(0))), [&] { vectorAt(b_.CreateSub(hi, i64(lanes))); },
      [&] {
        emitLoop(
            vectorEnd, hi,
            [&](Value* j) {
              bind(k_.outer.vars.back(), j);
              emitPoint();
            },
            name + ".rest");
      });
}

// The memo key of `e`'s vector value in scopes_ (beside its scalar value).
ExprId KernelLowering::vectorKey(ExprId e) const {
  return static_cast<ExprId>(e + static_cast<ExprId>(k_.exprs.size()));
}

Value* KernelLowering::vectorValue(ExprId e) {
  return memoized(vectorKey(e), [&] { return computeVector(e); });
}

Value* KernelLowering::computeVector(ExprId e) {
  const auto lanes = static_cast<unsigned>(windowLanes_);
  if (!dependsOnInner(e)) {
    Value* scalar = value(e);
    return scalar ? b_.CreateVectorSplat(lanes, scalar) : nullptr;
  }
  const kir::ExprNode& n = k_.expr(e);
  switch (n.op) {
    case ExprOp::Load: {
      Value* index = value(n.a);  // lane 0's
      if (!index) return nullptr;
      return stridedLoad(b_.CreateInBoundsGEP(b_.getFloatTy(), bases_[n.slot], index), vectorMemo_.loadStride.at(e));
    }
    case ExprOp::ReduceValue: return vectorReduced_[static_cast<size_t>(n.ival)];
    case ExprOp::Select: {
      Value* c = vectorValue(n.a);
      Value* t = vectorValue(n.b);
      Value* f = vectorValue(n.c);
      return c && t && f ? b_.CreateSelect(c, t, f) : nullptr;
    }
    default: break;
  }
  std::string err;
  Value* r = nullptr;
  if (kir::exprOpArity(n.op) == 1) {
    if (Value* a = vectorValue(n.a)) r = ops_.unary(n, a, k_.expr(n.a).dtype, &err);
  } else {
    Value* a = vectorValue(n.a);
    Value* b = vectorValue(n.b);
    if (a && b) r = ops_.binary(n, a, k_.expr(n.a).dtype, b, k_.expr(n.b).dtype, &err);
  }
  if (!r && error_.empty()) error_ = "e" + std::to_string(e) + " (vectorised): " + err;
  return r;
}

// Elements ptr[stride * i] for i < lanes: stride contiguous vectors, the last masked to end at
// the last element used, and every stride-th lane of them.
Value* KernelLowering::stridedLoad(Value* ptr, int64_t stride) {
  const auto lanes = static_cast<unsigned>(windowLanes_);
  auto* vty = llvm::FixedVectorType::get(b_.getFloatTy(), lanes);
  if (stride == 1) return b_.CreateAlignedLoad(vty, ptr, llvm::Align(4));
  std::vector<Value*> parts;
  const int64_t last = stride * (lanes - 1);  // the last element used, from ptr
  for (int64_t q = 0; q < stride; ++q) {
    Value* at = b_.CreateInBoundsGEP(b_.getFloatTy(), ptr, i64(q * lanes));
    if ((q + 1) * lanes - 1 <= last) {
      parts.push_back(b_.CreateAlignedLoad(vty, at, llvm::Align(4)));
      continue;
    }
    std::vector<llvm::Constant*> mask;
    for (unsigned l = 0; l < lanes; ++l) mask.push_back(b_.getInt1(q * lanes + l <= last));
    parts.push_back(b_.CreateMaskedLoad(vty, at, llvm::Align(4), llvm::ConstantVector::get(mask),
                                        llvm::Constant::getNullValue(vty), "window.tail"));
  }
  // Concatenate pairwise (padding an odd count with zeros) until one vector holds them all.
  while (parts.size() > 1) {
    if (parts.size() % 2) parts.push_back(llvm::Constant::getNullValue(parts.back()->getType()));
    std::vector<Value*> joined;
    for (size_t i = 0; i < parts.size(); i += 2) {
      const auto width = llvm::cast<llvm::FixedVectorType>(parts[i]->getType())->getNumElements();
      std::vector<int> both(2 * width);
      for (unsigned l = 0; l < 2 * width; ++l) both[l] = static_cast<int>(l);
      joined.push_back(b_.CreateShuffleVector(parts[i], parts[i + 1], both));
    }
    parts = std::move(joined);
  }
  std::vector<int> every(lanes);
  for (unsigned l = 0; l < lanes; ++l) every[l] = static_cast<int>(stride * l);
  return b_.CreateShuffleVector(parts[0], every, "window.strided");
}

// A Sum/Max/Min over the window with one accumulator per lane; taps fold in the scalar order.
Value* KernelLowering::emitVectorReduction(const kir::Reduction& r, size_t number) {
  auto* vty = llvm::FixedVectorType::get(b_.getFloatTy(), static_cast<unsigned>(windowLanes_));
  llvm::AllocaInst* acc = entryAlloca(vty, "vred" + std::to_string(number) + ".acc");
  b_.CreateStore(b_.CreateVectorSplat(static_cast<unsigned>(windowLanes_), identity(r.op, r.dtype)), acc);
  emitLoopNest(r.loop, 0, "vred" + std::to_string(number) + ".", [&] {
    Value* v = vectorValue(r.body);
    if (!v) return;
    b_.CreateStore(combine(r.op, r.dtype, b_.CreateLoad(vty, acc), v), acc);
  });
  return b_.CreateLoad(vty, acc);
}

}  // namespace nnc::codegen::llvmcpu::detail
