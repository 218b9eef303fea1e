// kir::Kernel -> LLVM function: loop nests, reductions, stores, and expression DAGs emitted once
// per loop scope.
//
// Shape of the generated code (outer rank >= 2):
//   for (f = begin; f < end; f += jEnd - j0) {         // one row segment of the outer domain
//     j0 = f % L (0 after the first row); jEnd = min(L, j0 + end - f);  // L = innermost extent
//     outer vars 0..rank-2: begin / L by div/mod once, then +1 per row with carries
//     for (j = j0; j < jEnd; ++j) { point work }        // innermost outer var = j: a clean loop
//   }
// so the innermost loop has no div/mod and vectorises. Where border tests (padding, windows, concat)
// are affine in the innermost variable, that loop is split into pieces (kir/loop_partition.h) with
// the tests folded in each, so the interior loads are unit-stride and unclamped. Point work: each
// reduction as a loop nest over its extents accumulating in an alloca (SROA/mem2reg make it a phi),
// then the stores with perInner == false, then a loop nest over the inner domain with the perInner
// stores.
//
// Memoisation: a stack of ExprId -> Value maps, one per open loop body. A value emitted inside a
// loop is only visible while that loop body is open (it would not dominate code after the loop);
// values from enclosing scopes are reused. Loop-invariant code left inside loops is hoisted by
// LLVM's LICM.
#include "targets/cpu/codegen/kernel_lowering.h"

#include <llvm/IR/IRBuilder.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "kir/affine.h"
#include "kir/loop_partition.h"
#include "targets/cpu/codegen/microkernel.h"
#include "targets/cpu/codegen/scalar_ops.h"

namespace nnc::codegen::llvmcpu {

namespace {

using kir::ExprId;
using kir::ExprOp;
using kir::ReduceOp;
using llvm::Value;

// A plain GEMM's A with rows of at most this many floats is read in place (emitContraction); so
// are rows up to kMaxInPlaceFewPanelsRowLength long when the GEMM has at most kMaxInPlacePanels
// column panels to amortise a pack over.
constexpr int64_t kMaxInPlaceRowLength = 384, kMaxInPlaceFewPanelsRowLength = 1024, kMaxInPlacePanels = 10;
// A row kernel hints this many lines of its next row into L1, the rest into L2 (prefetchNextRow).
constexpr int64_t kRowPrefetchL1Lines = 16;

class KernelLowering {
 public:
  KernelLowering(const kir::Kernel& k, llvm::Module& m, const LoweringOptions& o)
      : k_(k), m_(m), opts_(o), b_(m.getContext()), ops_(b_, m) {
    ops_.setVectorMathLanes(o.vectorMathLanes);
  }

  Status run() {
    if (k_.name.empty()) return Status::error("cpu backend: kernel without a name");
    if (m_.getFunction(k_.name)) return Status::error("cpu backend: duplicate kernel name '" + k_.name + "'");
    createFunction();
    // One emitter per kind.
    const Status checked = std::visit(kir::Overloaded{[&](const kir::LoopNest&) {
                                                        pieces_ = kir::partitionInnermostLoop(k_);
                                                        rowInterior_ = kir::rowInterior(k_);
                                                        emitOuterLoop();
                                                        return Status::ok();
                                                      },
                                                      [&](const kir::Contraction& c) {
                                                        NNC_RETURN_IF_ERROR(checkContraction(c));
                                                        emitContraction(c);
                                                        return Status::ok();
                                                      },
                                                      [&](const kir::Attention& a) {
                                                        NNC_RETURN_IF_ERROR(checkAttention(a));
                                                        emitAttention(a);
                                                        return Status::ok();
                                                      }},
                                      k_.kind);
    if (!checked) {
      fn_->eraseFromParent();
      return Status::error("kernel '" + k_.name + "': " + checked.message());
    }
    b_.CreateRetVoid();
    if (!error_.empty()) {
      fn_->eraseFromParent();
      return Status::error("kernel '" + k_.name + "': " + error_);
    }
    return Status::ok();
  }

 private:
  void createFunction() {
    llvm::LLVMContext& c = m_.getContext();
    llvm::Type* i8p = llvm::PointerType::getUnqual(c);
    auto* fty = llvm::FunctionType::get(llvm::Type::getVoidTy(c),
                                        {i8p->getPointerTo(), b_.getInt64Ty(), b_.getInt64Ty()}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, k_.name, m_);
    fn_->setDoesNotThrow();
    if (!opts_.cpu.empty()) fn_->addFnAttr("target-cpu", opts_.cpu);
    if (!opts_.features.empty()) fn_->addFnAttr("target-features", opts_.features);
    // LLVM's vectoriser stops at 256 bits on Intel's AVX-512 cores unless told otherwise (a tuning
    // for clocks older cores lowered under 512-bit load); those with a second 512-bit FMA port
    // compute twice as fast at 512 (softmax 1024 x 1024: 0.51 -> 0.43 ms on a Xeon).
    if (opts_.vectorLanes >= 16) fn_->addFnAttr("prefer-vector-width", std::to_string(opts_.vectorLanes * 32));
    llvm::Argument* buffers = fn_->getArg(0);
    buffers->setName("buffers");
    buffers->addAttr(llvm::Attribute::NoCapture);
    buffers->addAttr(llvm::Attribute::ReadOnly);
    fn_->getArg(1)->setName("begin");
    fn_->getArg(2)->setName("end");

    entry_ = llvm::BasicBlock::Create(c, "entry", fn_);
    b_.SetInsertPoint(entry_);
    // Base pointers are loaded once: stores through them cannot change the pointer table.
    for (size_t s = 0; s < k_.params.size(); ++s) {
      const kir::Param& p = k_.params[s];
      Value* slotPtr = b_.CreateConstInBoundsGEP1_64(i8p, buffers, s);
      Value* raw = b_.CreateAlignedLoad(i8p, slotPtr, llvm::Align(8), p.name + ".raw");
      bases_.push_back(b_.CreateBitCast(raw, ops_.storageType(p.dtype)->getPointerTo(), p.name));
    }
    scopes_.emplace_back();
  }

  // --- loops

  // for (i = lo; i < hi; ++i) body(i), in a fresh memo scope; the builder ends after the loop.
  void emitLoop(Value* lo, Value* hi, const std::function<void(Value*)>& body, const std::string& name,
                llvm::MDNode* loopHints = nullptr) {
    llvm::LLVMContext& c = m_.getContext();
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(c, name + ".header", fn_);
    auto* bodyBlock = llvm::BasicBlock::Create(c, name + ".body", fn_);
    auto* exit = llvm::BasicBlock::Create(c, name + ".exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, name);
    i->addIncoming(lo, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(i, hi), bodyBlock, exit);
    b_.SetInsertPoint(bodyBlock);
    scopes_.emplace_back();
    body(i);
    scopes_.pop_back();
    i->addIncoming(b_.CreateAdd(i, b_.getInt64(1), name + ".next", /*HasNUW=*/true, /*HasNSW=*/true),
                   b_.GetInsertBlock());
    llvm::BranchInst* latch = b_.CreateBr(header);
    if (loopHints) latch->setMetadata(llvm::LLVMContext::MD_loop, loopHints);
    b_.SetInsertPoint(exit);
  }

  // Self-referencing loop metadata (LLVM's !llvm.loop) holding the given key/value hints.
  llvm::MDNode* loopHints(std::initializer_list<std::pair<const char*, llvm::Constant*>> hints) {
    llvm::LLVMContext& c = m_.getContext();
    std::vector<llvm::Metadata*> ops = {nullptr};
    for (const auto& [key, v] : hints)
      ops.push_back(llvm::MDNode::get(c, {llvm::MDString::get(c, key), llvm::ConstantAsMetadata::get(v)}));
    llvm::MDNode* id = llvm::MDNode::getDistinct(c, ops);
    id->replaceOperandWith(0, id);
    return id;
  }

  // Do not vectorise (a loop of scalar moves the vectoriser would turn into scatters).
  llvm::MDNode* noVectorLoop() { return loopHints({{"llvm.loop.vectorize.enable", b_.getFalse()}}); }

  // Vectorise `width` wide with the remainder as one masked iteration (a short loop of unit-stride
  // accesses and unknown trip count: a transposed tile's column of rows <= lanes). Not unrolled
  // first: where the trip count is known (a whole tile's 14 rows) LLVM unrolled the loop into
  // scalars instead, a sixth of ResNet's 7 x 7 stem.
  llvm::MDNode* maskedVectorLoop(int width) {
    return loopHints({{"llvm.loop.vectorize.enable", b_.getTrue()},
                      {"llvm.loop.vectorize.width", b_.getInt32(static_cast<uint32_t>(width))},
                      {"llvm.loop.vectorize.predicate.enable", b_.getTrue()},
                      {"llvm.loop.unroll.disable", b_.getTrue()}});
  }

  // Unroll fully (a window's few taps; LLVM's O2 pipeline would leave the loop and so not vectorise
  // the loop around it).
  llvm::MDNode* fullUnrollLoop() {
    llvm::LLVMContext& c = m_.getContext();
    llvm::MDNode* id = llvm::MDNode::getDistinct(
        c, {nullptr, llvm::MDNode::get(c, {llvm::MDString::get(c, "llvm.loop.unroll.full")})});
    id->replaceOperandWith(0, id);
    return id;
  }

  // A loop nest over `loop` (innermost fastest); extent-1 dims bind their var to 0 without a loop.
  void emitLoopNest(const kir::Loop& loop, size_t dim, const std::string& name, const std::function<void()>& body,
                    bool fullyUnroll = false) {
    if (dim == loop.extents.size()) {
      body();
      return;
    }
    const std::string dimName = name + std::to_string(dim);
    if (loop.extents[dim] == 1) {
      bind(loop.vars[dim], b_.getInt64(0));
      emitLoopNest(loop, dim + 1, name, body, fullyUnroll);
      return;
    }
    emitLoop(
        b_.getInt64(0), b_.getInt64(loop.extents[dim]),
        [&](Value* i) {
          bind(loop.vars[dim], i);
          emitLoopNest(loop, dim + 1, name, body, fullyUnroll);
        },
        dimName, fullyUnroll ? fullUnrollLoop() : nullptr);
  }

  // The innermost outer variable over [lo, hi): one loop, or one per piece of its partition
  // (kir/loop_partition.h) with the piece's border tests folded, so the interior is clamp-free.
  void emitInnermostLoop(Value* lo, Value* hi, const std::string& name) {
    const ExprId var = k_.outer.vars.back();
    auto point = [&](Value* j) {
      bind(var, j);
      emitPoint();
    };
    auto piece = [&](Value* from, Value* to, int64_t length, const std::string& pieceName) {
      if (vectorisedHere(length)) {
        emitStridedWindows(from, to, pieceName);
      } else {
        emitLoop(from, to, point, pieceName);
      }
    };
    if (pieces_.empty()) {
      facts_ = rowFacts_;
      piece(lo, hi, k_.outer.extents.back(), name);
      facts_ = nullptr;
      return;
    }
    for (size_t i = 0; i < pieces_.size(); ++i) {
      std::map<ExprId, bool> facts = pieces_[i].facts;
      if (rowFacts_) facts.insert(rowFacts_->begin(), rowFacts_->end());
      facts_ = &facts;
      piece(smax(lo, i64(pieces_[i].begin)), smin(hi, i64(pieces_[i].end)), pieces_[i].end - pieces_[i].begin,
            name + ".p" + std::to_string(i));
      facts_ = nullptr;
    }
  }

  // How many trailing outer dims one row covers: 1, or where the innermost is too short to vectorise
  // (an NHWC stem's patches: [oh, ow, c, kh, kw], kw = 3), as many as make a row of 16 points or
  // more, so that the per-row work (carries, loop set-up) is paid once per patch, not per 3 taps.
  size_t mergedRowDims() const {
    const kir::Loop& outer = k_.outer;
    const size_t rank = outer.extents.size();
    if (outer.extents.back() >= 4 || !pieces_.empty()) return 1;
    size_t dims = 1;
    int64_t length = outer.extents.back();
    while (dims + 1 < rank && length < 16) length *= outer.extents[rank - ++dims];
    return dims;
  }

  // A merged row over dims [first, rank): the full row as a loop nest of constant bounds (short
  // loops LLVM unrolls), a partial one (at a chunk's ends) point by point with div/mod.
  void emitMergedRow(Value* lo, Value* hi, size_t first, int64_t length) {
    const kir::Loop& outer = k_.outer;
    kir::Loop rowLoop;
    rowLoop.vars.assign(outer.vars.begin() + static_cast<std::ptrdiff_t>(first), outer.vars.end());
    rowLoop.extents.assign(outer.extents.begin() + static_cast<std::ptrdiff_t>(first), outer.extents.end());
    llvm::LLVMContext& c = m_.getContext();
    auto* full = llvm::BasicBlock::Create(c, "row.full", fn_);
    auto* partial = llvm::BasicBlock::Create(c, "row.partial", fn_);
    auto* done = llvm::BasicBlock::Create(c, "row.done", fn_);
    b_.CreateCondBr(b_.CreateAnd(b_.CreateICmpEQ(lo, i64(0)), b_.CreateICmpEQ(hi, i64(length))), full, partial);
    b_.SetInsertPoint(full);
    scopes_.emplace_back();
    emitLoopNest(rowLoop, 0, "row.", [&] { emitPoint(); });
    scopes_.pop_back();
    b_.CreateBr(done);
    b_.SetInsertPoint(partial);
    emitLoop(
        lo, hi,
        [&](Value* j) {
          for (size_t d = rowLoop.extents.size(); d-- > 0;) {
            Value* extent = i64(rowLoop.extents[d]);
            bind(rowLoop.vars[d], d == 0 ? j : b_.CreateURem(j, extent));
            if (d > 0) j = b_.CreateUDiv(j, extent);
          }
          emitPoint();
        },
        "row.point");
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // One row (the outer variables but the innermost bound): with a row interior (kir::RowInterior),
  // the interior version with its facts folded where the row lies in the box, else the general one.
  void emitRow(Value* lo, Value* hi) {
    if (!rowInterior_) {
      emitInnermostLoop(lo, hi, "col");
      return;
    }
    auto version = [&](const std::map<ExprId, bool>* facts, const std::string& name) {
      scopes_.emplace_back();  // nothing computed under one version's facts leaks into the other
      rowFacts_ = facts;
      emitInnermostLoop(lo, hi, name);
      rowFacts_ = nullptr;
      scopes_.pop_back();
    };
    if (rowInterior_->ranges.empty()) {
      version(&rowInterior_->facts, "col.in");
      return;
    }
    Value* inBox = b_.getTrue();
    for (const kir::RowInterior::Range& r : rowInterior_->ranges) {
      Value* v = value(k_.outer.vars[r.dim]);
      if (r.begin > 0) inBox = b_.CreateAnd(inBox, b_.CreateICmpSGE(v, i64(r.begin)));
      if (r.end < k_.outer.extents[r.dim]) inBox = b_.CreateAnd(inBox, b_.CreateICmpSLT(v, i64(r.end)));
    }
    llvm::LLVMContext& c = m_.getContext();
    auto* interior = llvm::BasicBlock::Create(c, "row.interior", fn_);
    auto* border = llvm::BasicBlock::Create(c, "row.border", fn_);
    auto* done = llvm::BasicBlock::Create(c, "row.done", fn_);
    b_.CreateCondBr(inBox, interior, border);
    b_.SetInsertPoint(interior);
    version(&rowInterior_->facts, "col.in");
    b_.CreateBr(done);
    b_.SetInsertPoint(border);
    version(nullptr, "col");
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // --- strided windows, vectorised here
  //
  // A window read with a stride along the innermost variable (a stride-2 depthwise conv or pool:
  // taps at 2w - 1, 2w, 2w + 1) is where LLVM's loop vectoriser does worst: the taps that form no
  // complete interleave group become gathers (LLVM 14: one tap of three; LLVM 19 on Zen 4: all of
  // them, 6x slower than scalar code), or it gives up. Such a loop (its piece's border tests
  // folded) is vectorised here instead, `lanes` points at a time: values that depend on the
  // innermost variable are vectors, everything else is computed once as a scalar and splat; a load
  // with stride s reads s contiguous vectors (the last one masked, so nothing past the last tap is
  // touched) and keeps every s-th lane; reductions over the window keep one accumulator per lane,
  // folding taps in the scalar order, so each point's result equals the scalar loop's. The rest of
  // the piece runs as the scalar loop.

  // Whether `e` depends on the innermost outer variable, with the current piece's tests folded.
  bool dependsOnInner(ExprId e) {
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
  std::optional<int64_t> innerStride(ExprId index) {
    std::optional<kir::AffineForm> form = kir::affineForm(k_.exprs, index, &vectorMemo_.foldedClamps);
    if (!form) return std::nullopt;
    const ExprId inner = k_.outer.vars.back();
    for (const auto& [term, coefficient] : form->terms)
      if (term != inner && dependsOnInner(term)) return std::nullopt;
    return form->coefficient(inner);
  }

  // Whether vectorValue can compute `e`; notes loads with a stride of 2 or more.
  bool vectorizable(ExprId e) {
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
  bool vectorisedHere(int64_t length) {
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
    // row two 8-lane vectors (ResNet-18 at 224, 1 thread, 28.6 -> 27.9 ms; bench/NOTES.md).
    return vectorMemo_.strided || length < kLlvmVectorLoopVectors * opts_.vectorLanes;
  }

  // [lo, hi): vectors of `lanes` points; the rest as one more vector ending at hi (it overlaps the
  // last one, computing a few points twice: a kernel's output never aliases its inputs), or, in a
  // piece shorter than a vector, the scalar loop. (A pool's 55-point rows with 16 lanes: 7 scalar
  // points of 55 took as long as the 48 in vectors.)
  void emitStridedWindows(Value* lo, Value* hi, const std::string& name) {
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
  ExprId vectorKey(ExprId e) const { return static_cast<ExprId>(e + static_cast<ExprId>(k_.exprs.size())); }

  Value* vectorValue(ExprId e) {
    return memoized(vectorKey(e), [&] { return computeVector(e); });
  }

  Value* computeVector(ExprId e) {
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
  Value* stridedLoad(Value* ptr, int64_t stride) {
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
  Value* emitVectorReduction(const kir::Reduction& r, size_t number) {
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

  void emitOuterLoop() {
    Value* begin = fn_->getArg(1);
    Value* end = fn_->getArg(2);
    const kir::Loop& outer = k_.outer;
    const size_t rank = outer.extents.size();
    if (rank == 0) {
      emitLoop(
          begin, end, [&](Value*) { emitPoint(); }, "outer");
      return;
    }
    if (rank == 1) {
      emitInnermostLoop(begin, end, "outer");
      return;
    }
    // Row segments (see the file comment). The first row's multi-index comes from `begin` by
    // div/mod once; each later row increments it with carries (no division per row: rows of a
    // small image are a few points long, and three divisions cost more than the row).
    llvm::LLVMContext& c = m_.getContext();
    const size_t rowDims = mergedRowDims();
    const size_t rowRank = rank - rowDims + 1;  // the row index's dims, plus one for the row
    int64_t rowLength = 1;
    for (size_t d = rowRank - 1; d < rank; ++d) rowLength *= outer.extents[d];
    Value* lastExtent = b_.getInt64(rowLength);
    std::vector<llvm::AllocaInst*> index(rowRank - 1);
    Value* row = b_.CreateUDiv(begin, lastExtent, "row");
    for (size_t d = rowRank - 1; d-- > 0;) {
      index[d] = entryAlloca(b_.getInt64Ty(), "idx" + std::to_string(d));
      if (d == 0) {
        b_.CreateStore(row, index[d]);
      } else {
        Value* extent = b_.getInt64(outer.extents[d]);
        b_.CreateStore(b_.CreateURem(row, extent), index[d]);
        row = b_.CreateUDiv(row, extent);
      }
    }
    Value* firstJ = b_.CreateURem(begin, lastExtent);
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(c, "row.header", fn_);
    auto* body = llvm::BasicBlock::Create(c, "row.body", fn_);
    auto* exit = llvm::BasicBlock::Create(c, "row.exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* f = b_.CreatePHI(b_.getInt64Ty(), 2, "f");
    llvm::PHINode* j0 = b_.CreatePHI(b_.getInt64Ty(), 2, "j0");
    f->addIncoming(begin, pre);
    j0->addIncoming(firstJ, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(f, end), body, exit);
    b_.SetInsertPoint(body);
    scopes_.emplace_back();
    Value* jEnd = b_.CreateAdd(j0, b_.CreateSub(end, f));
    jEnd = b_.CreateSelect(b_.CreateICmpSLT(jEnd, lastExtent), jEnd, lastExtent, "jend");
    Value* next = b_.CreateAdd(f, b_.CreateSub(jEnd, j0), "f.next");
    for (size_t d = 0; d + 1 < rowRank; ++d) bind(outer.vars[d], b_.CreateLoad(b_.getInt64Ty(), index[d]));
    if (rowDims == 1)
      emitRow(j0, jEnd);
    else
      emitMergedRow(j0, jEnd, rowRank - 1, rowLength);
    scopes_.pop_back();
    // Next row: the index of dims 0..rowRank-2 plus one, carried.
    Value* carry = b_.getTrue();
    for (size_t d = rowRank - 1; d-- > 0;) {
      Value* cur = b_.CreateLoad(b_.getInt64Ty(), index[d]);
      Value* bumped = b_.CreateAdd(cur, b_.CreateZExt(carry, b_.getInt64Ty()));
      if (d == 0) {
        b_.CreateStore(bumped, index[d]);
        break;
      }
      Value* wraps = b_.CreateICmpEQ(bumped, b_.getInt64(outer.extents[d]));
      b_.CreateStore(b_.CreateSelect(wraps, b_.getInt64(0), bumped), index[d]);
      carry = wraps;
    }
    f->addIncoming(next, b_.GetInsertBlock());
    j0->addIncoming(b_.getInt64(0), b_.GetInsertBlock());
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
  }

  // --- contractions (kir::Contraction): a packed, register-tiled GEMM with the kernel's stores as
  // its epilogue, applied to each tile while it is in L1.

  Status checkContraction(const kir::Contraction& c) const {
    const size_t rank = k_.outer.extents.size();
    const bool ok = c.lanes > 0 && c.nr % c.lanes == 0 && c.mr >= 1 && c.mr <= 32 && c.nr <= 256 && c.kc >= 1 &&
                    c.mc % c.mr == 0 && c.nc % c.nr == 0 && c.m >= 1 && c.n >= 1 && c.k >= 1 && rank >= 2 &&
                    k_.outer.extents[rank - (c.transposed ? 1 : 2)] == c.m &&
                    k_.outer.extents[rank - (c.transposed ? 2 : 1)] == c.n && k_.reductions.size() == 1 &&
                    k_.reductions[0].loop.vars.size() == 1 && k_.stores.size() == 1 &&
                    (!c.transposed || (!c.partialsInOutput && c.kc >= c.k)) &&
                    ((c.aRowIndex == kir::kNoExpr && c.aColIndex == kir::kNoExpr) ||
                     (!c.aPacked && validExpr(c.aRowIndex) && validExpr(c.aColIndex))) &&
                    !k_.stores[0].perInner && c.aSlot >= 0 && static_cast<size_t>(c.aSlot) < k_.params.size() &&
                    c.bSlot >= 0 && static_cast<size_t>(c.bSlot) < k_.params.size() &&
                    k_.params[c.aSlot].dtype == DType::F32 && k_.params[c.bSlot].dtype == DType::F32 &&
                    (!c.partialsInOutput || k_.params[k_.stores[0].slot].dtype == DType::F32) &&
                    (c.partialsInOutput || c.kc >= c.k) &&
                    (c.bLayout != kir::Contraction::BLayout::Direct || c.bColStride == 1);
    return ok ? Status::ok() : Status::error("inconsistent contraction: " + c.str());
  }

  bool validExpr(ExprId e) const { return e >= 0 && static_cast<size_t>(e) < k_.exprs.size(); }
  // The outer variables indexing the GEMM's rows and columns (swapped when it is transposed).
  ExprId rowVar(const kir::Contraction& c) const {
    return k_.outer.vars[k_.outer.vars.size() - (c.transposed ? 1 : 2)];
  }
  ExprId colVar(const kir::Contraction& c) const {
    return k_.outer.vars[k_.outer.vars.size() - (c.transposed ? 2 : 1)];
  }

  Value* smin(Value* a, Value* b) { return b_.CreateSelect(b_.CreateICmpSLT(a, b), a, b); }
  Value* smax(Value* a, Value* b) { return b_.CreateSelect(b_.CreateICmpSGT(a, b), a, b); }
  Value* i64(int64_t v) { return b_.getInt64(v); }

  // A tile's output lines, and the lines of the tensors its epilogue reads (a residual), are misses
  // the epilogue would take in turn, each write-allocated or read from L3 or memory: a transposed
  // tile's `cols` runs of `rows` floats each in another channel plane (the stem's 64 planes of
  // 12,321 pixels: 3 MB), an as-is tile's `rows` runs in rows a whole image row apart (a 1 x 1
  // conv's 256 channel planes of 56 x 56). Asked for before the microkernel, they arrive while it
  // computes. The first and last element of each run: a run spans two lines at most.
  void prefetchTile(const kir::Store& store, Value* i0, Value* j0, Value* rows, Value* cols) {
    const kir::Contraction& c = *k_.as<kir::Contraction>();
    llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::prefetch, {b_.getPtrTy()});
    struct Target {
      int32_t slot;
      ExprId index;
      bool write;
    };
    std::vector<Target> targets = {{store.slot, store.index, true}};
    // A read constant along the run (a per-channel bias) is one L1-resident line per run: hinting it
    // cost SqueezeNet's stem (K = 27) two prefetches per column, ~6% of its time in perf samples.
    const ExprId along = c.transposed ? rowVar(c) : colVar(c);
    for (ExprId load : epilogueLoads(store.value)) {
      const std::optional<std::set<ExprId>> vars = kir::varsOf(k_.exprs, k_.expr(load).a);
      if (!vars || vars->count(along)) targets.push_back({k_.expr(load).slot, k_.expr(load).a, false});
    }
    Value* runs = c.transposed ? cols : rows;
    emitLoop(
        i64(0), runs,
        [&](Value* r) {
          const auto [first, last] = c.transposed ? std::pair{i0, b_.CreateAdd(i0, b_.CreateSub(rows, i64(1)))}
                                                  : std::pair{j0, b_.CreateAdd(j0, b_.CreateSub(cols, i64(1)))};
          bind(c.transposed ? colVar(c) : rowVar(c), b_.CreateAdd(c.transposed ? j0 : i0, r));
          for (Value* at : {first, last}) {
            scopes_.emplace_back();
            bind(c.transposed ? rowVar(c) : colVar(c), at);
            for (const Target& t : targets)
              if (Value* index = value(t.index)) {
                Value* ptr = b_.CreateInBoundsGEP(ops_.storageType(k_.params[t.slot].dtype), bases_[t.slot], index);
                b_.CreateCall(prefetch, {ptr, b_.getInt32(t.write ? 1 : 0), b_.getInt32(3), b_.getInt32(1)});
              }
            scopes_.pop_back();
          }
        },
        "prefetch.tile", noVectorLoop());
  }

  // The Load expressions reachable from `root` outside any reduction's body for which `keep` holds,
  // at most `limit` of them.
  template <typename Keep>
  std::vector<ExprId> loadsOutsideReductions(ExprId root, Keep keep, size_t limit = SIZE_MAX) const {
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

  // The loads of other tensors in a contraction's store value (not inside its reduction), at most
  // two, whose index reads no memory (a gather's would be a load of its own).
  std::vector<ExprId> epilogueLoads(ExprId value) const {
    return loadsOutsideReductions(
        value, [&](const kir::ExprNode& n) { return !readsMemory(n.a); }, 2);
  }

  bool readsMemory(ExprId e) const {
    if (e == kir::kNoExpr) return false;
    const kir::ExprNode& n = k_.expr(e);
    return n.op == ExprOp::Load || n.op == ExprOp::ReduceValue || readsMemory(n.a) || readsMemory(n.b) ||
           readsMemory(n.c);
  }

  void emitContraction(const kir::Contraction& c) {
    llvm::Type* f32 = b_.getFloatTy();
    using BLayout = kir::Contraction::BLayout;
    const kir::Store& store = k_.stores[0];
    const size_t rank = k_.outer.extents.size();
    const size_t batchRank = rank - 2;

    // Per-call scratch: the accumulator tile and, unless B is packed, one kc x nr panel of B.
    // A transposed GEMM's tile is stored transposed by the microkernel (column j at j * lanes) when
    // its rows fit one vector, so the epilogue walks the output's contiguous axis in vectors.
    const bool transposedTile = c.transposed && c.mr <= c.lanes;
    Value* tile = alignedAlloca(std::max(c.mr, static_cast<int64_t>(c.lanes)) * c.nr, "tile");
    // A run-time B is packed a whole kc x nc block at a time when that fits the stack: its rows are
    // then read front to back (which the hardware prefetchers follow, where a panel's short row
    // segments a page apart miss in turn when B is not in cache); else panel by panel.
    const int64_t kcEffective = std::min(c.kc, c.k);
    const bool blockB = c.bLayout != BLayout::Packed && kcEffective * c.nc * 4 <= (256 << 10);
    const bool rowTilesOuter = c.rowTilesOuter && (blockB || c.bLayout == BLayout::Packed);
    Value* panelBuf = c.bLayout == BLayout::Packed ? nullptr
                      : blockB                     ? alignedAlloca(kcEffective * c.nc, "bblock")
                                                   : alignedAlloca(kcEffective * c.nr, "bpanel");
    // A's mc x kc block, packed per kc block as row tiles [tile][p][mr]: the microkernel's broadcasts
    // then read one contiguous stream (in place, rows a power-of-two apart alias in L1's sets).
    // A row-major A with short rows is read in place instead: packing copies each element once per
    // row block (a scalar load and store) for as few FMAs as one or two panels give it (a 1x1
    // conv to 16 channels: the pack took half the kernel), and a row tile of up to 384 floats per
    // row (14 rows: 21 KiB, half of L1), rows as close, stays in L1 for the whole block either way
    // (rows 4 KiB apart would share L1's sets: those are packed; 256 -> 384 floats: MobileNetV2's
    // 320 -> 1280 at 7 x 7 0.257 -> 0.243 ms).
    // Longer rows too where few column panels share the pack: a packed element costs about a
    // cycle, and feeds nr / 32 cycles of FMAs per panel (AVX-512), so with 2 or 3 panels the pack
    // was a third to a half of the kernel — MobileNetV2's projections 384 -> 64 / 576 -> 96 at
    // 14 x 14: 0.079 -> 0.049 / 0.156 -> 0.115 ms; where many panels share it (BERT's 768 -> 3072),
    // packed rows stay (14 streams a row apart would each need L1's lines for the whole sweep).
    // So is a transposed A whose rows are adjacent (a channel-first activation read as pixels x
    // channels): a tile's mr rows at each k are consecutive floats, as a conv's patches read in place.
    const bool fewPanels = c.nPanels() <= kMaxInPlacePanels && c.k <= kMaxInPlaceFewPanelsRowLength &&
                           c.aRowStride <= kMaxInPlaceFewPanelsRowLength && c.aRowStride % 1024 != 0;
    const bool shortRows = c.aColStride == 1 && c.aRowStride >= 1 &&
                           ((c.k <= kMaxInPlaceRowLength && c.aRowStride <= kMaxInPlaceRowLength) || fewPanels);
    const bool adjacentRows = c.aRowStride == 1 && c.aColStride >= 1;
    const bool aInPlace = !c.aPacked && c.aRowIndex == kir::kNoExpr && (shortRows || adjacentRows);
    Value* aPacked = c.aPacked || aInPlace ? nullptr : alignedAlloca(c.mc * std::min(c.kc, c.k), "apack");

    // Weights too big to stay in L2 from one run to the next, in one K block: each column block
    // streams from L3 or DRAM on the first row tile that reads it, and that tile waited on memory
    // while the others ran from L2 (ResNet-50's 7 x 7 layers, 9.4 MB each). So every (row tile,
    // panel) hints its share of the next column block's same panel into L2 as it goes: the block
    // arrives while this one is computed.
    const int64_t kBlocks = (c.k + c.kc - 1) / c.kc;
    // Packed weights, or an output, over half of L2 do not stay there between runs (or kernels).
    const int64_t l2Resident = opts_.l2Bytes / 2;
    // (Not with one row tile: it streams each block once at the FMAs' pace, and hints as fast
    // for a block megabytes ahead only doubled the traffic — ResNet-18 at 64 x 64, 2 x 2 pixels
    // against 9.4 MB of weights: 1.92 -> 2.66 ms at 2 threads.)
    const bool prefetchNextBlock = c.bLayout == BLayout::Packed && kBlocks == 1 && c.nBlocks() > 1 && c.mTiles() >= 2 &&
                                   c.nPanels() * c.k * c.nr * 4 > l2Resident;
    const int64_t nextStride = prefetchNextBlock ? std::max<int64_t>(4, (c.nr * 4 + c.mTiles() - 1) / c.mTiles()) : 0;
    // An as-is tile's output misses only when the output outgrows L2 (and is not a row pipeline's
    // window, which stays in cache): 1 x 1 convs over 56 x 56 images, 3 MB; a transposed tile's
    // always lands in channel planes far apart.
    const bool prefetchTiles = c.transposed || (c.imageWidth == 0 && c.batch * c.m * c.n * 4 > l2Resident);
    // Packed weights larger than L2 read by one or two row tiles and not hinted a block ahead: each
    // panel streams from memory once at ~28 FMA-cycles per 128-byte row or less, faster than one
    // core's L1 hints alone keep lines in flight; a second hint 8 KiB ahead into L2 adds as many
    // (ResNet-18 at 64 x 64, whose last layers are 2 x 2 and 4 x 4 pixels against 2.4-9.4 MB of
    // weights: 5.22 -> 4.97 ms at 1 thread, 3.73 -> 3.18 at 2, bench/NOTES.md). Not for weights that fit L2 (the
    // batch-1 MLP's 1.6 MB layer stays there between runs: 0.050 -> 0.061 ms with the hint), nor
    // where many row tiles reuse a panel (the hint only costs load slots there).
    const int64_t farPrefetch = c.bLayout == BLayout::Packed && !prefetchNextBlock && c.mTiles() <= 2 &&
                                        c.nPanels() * c.k * c.nr * 4 > opts_.l2Bytes
                                    ? 8192
                                    : 0;
    // Only the row counts some tile has get a microkernel (a switch case, each inlined: 14 of them
    // were most of a kernel's code and compile time): whole tiles and the last of each row block
    // (rows = min(mr, m1 - i0) below).
    const std::vector<bool> rowCountUsed = kir::tileRowCounts(c.m, c.mc, c.mr);
    std::vector<llvm::Function*> micro;
    for (int64_t rows = 1; rows <= c.mr; ++rows) {
      if (!rowCountUsed[static_cast<size_t>(rows)]) {
        micro.push_back(nullptr);  // no tile has this many rows: no case in callByIndex
        continue;
      }
      MicrokernelShape shape =
          aInPlace
              ? MicrokernelShape{c.lanes, rows, c.nr, c.aRowStride, c.aColStride, false, 0, transposedTile, nextStride}
              : MicrokernelShape{c.lanes, rows, c.nr, 1, c.mr, false, 0, transposedTile, nextStride};
      shape.farPrefetchBytes = farPrefetch;
      micro.push_back(emitMicrokernel(m_, k_.name, shape, opts_.cpu, opts_.features));
    }
    if (c.aRowIndex != kir::kNoExpr) {
      // A separable A's tables (see packSeparableA), and microkernels reading whole row tiles in
      // place whose rows are 1 or 2 elements apart (stride-1 and stride-2 convs).
      auto table = [&](int64_t size, const char* name) {
        return entryAlloca(llvm::ArrayType::get(b_.getInt64Ty(), static_cast<uint64_t>(size)), name);
      };
      separable_.rowOffset = table(c.mc, "arows");
      separable_.colOffset = table(std::min(c.kc, c.k), "acols");
      separable_.tileStep = table(c.mc / c.mr, "asteps");
      separable_.tileSplit = table(c.mc / c.mr, "asplits");
      // Only the splits some tile has get a microkernel (each costs compile time): a 56-wide image
      // has none (14-pixel tiles follow its rows), a 55-wide one all 13.
      const std::array<uint64_t, 2> splits = tileSplits(c);
      separable_.splitMask = splits;
      for (int64_t step : {1, 2}) {
        MicrokernelShape shape{c.lanes, c.mr, c.nr, step, 0, /*indirectA=*/true, 0, transposedTile, nextStride};
        shape.farPrefetchBytes = farPrefetch;
        separable_.inPlace[step - 1] = emitMicrokernel(m_, k_.name, shape, opts_.cpu, opts_.features);
        separable_.split[step - 1].assign(static_cast<size_t>(c.mr - 1), nullptr);
        for (int64_t row = 1; row < c.mr; ++row) {
          if (!(splits[step - 1] >> row & 1)) continue;
          shape.splitRow = row;
          llvm::Function* f = emitMicrokernel(m_, k_.name, shape, opts_.cpu, opts_.features);
          f->addFnAttr(llvm::Attribute::NoInline);  // one call per crossing tile, not one copy per call site
          separable_.split[step - 1][static_cast<size_t>(row - 1)] = f;
        }
      }
    }

    Value* noColumns = llvm::ConstantPointerNull::get(b_.getInt64Ty()->getPointerTo());
    Value* noSecond = i64(0);
    // Which (batch, row block) the packed A holds (batch * m + m0); -1: none yet.
    llvm::AllocaInst* packedKey = entryAlloca(b_.getInt64Ty(), "apack.key");
    b_.CreateStore(i64(-1), packedKey);
    const int64_t blocksPerBatch = c.mBlocks() * c.nBlocks();
    Value* end = smin(fn_->getArg(2), i64(c.numTasks()));  // never past the last task, whatever the caller says
    // With one K block every task reads the same column offsets: filled once here instead of per
    // task (a 7 x 7 conv's task is one tile against 4,608 columns: the table cost a third of it).
    separable_.columnsOnce = c.aRowIndex != kir::kNoExpr && kBlocks == 1;
    if (separable_.columnsOnce) fillColumnOffsets(c, i64(0), i64(c.k));
    Value* base = bases_[store.slot];
    // Whether the epilogue can run as vectors along the tile's columns (wholeTileEpilogue): an as-is
    // tile, one f32 store at unit stride per column of a value the vector emitter computes.
    vectorMemo_ = VectorMemo();
    facts_ = nullptr;
    windowLanes_ = c.lanes;
    for (size_t e = 0; e < k_.exprs.size(); ++e)  // the sum is the tile's vector, never its body
      if (k_.exprs[e].op == ExprOp::ReduceValue) {
        vectorMemo_.depends[static_cast<ExprId>(e)] = true;
        vectorMemo_.ok[static_cast<ExprId>(e)] = true;
      }
    // (The innermost outer variable, the vectors' lane axis, is the tile's column for an as-is
    // GEMM and its row for a transposed one: the output's contiguous axis either way.)
    const bool vectorEpilogue = (!c.transposed || transposedTile) && k_.params[store.slot].dtype == DType::F32 &&
                                k_.expr(store.value).dtype == DType::F32 && !store.perInner &&
                                innerStride(store.index) == std::optional<int64_t>(1) && vectorizable(store.value);
    emitLoop(
        fn_->getArg(1), end,
        [&](Value* task) {
          Value* batch = b_.CreateUDiv(task, i64(blocksPerBatch), "batch");
          Value* inBatch = b_.CreateURem(task, i64(blocksPerBatch));
          Value* rowBlock =
              c.columnBlocksOuter ? b_.CreateURem(inBatch, i64(c.mBlocks())) : b_.CreateUDiv(inBatch, i64(c.nBlocks()));
          Value* columnBlock =
              c.columnBlocksOuter ? b_.CreateUDiv(inBatch, i64(c.mBlocks())) : b_.CreateURem(inBatch, i64(c.nBlocks()));
          Value* m0 = b_.CreateMul(rowBlock, i64(c.mc), "m0");
          Value* n0 = b_.CreateMul(columnBlock, i64(c.nc), "n0");
          Value* m1 = smin(b_.CreateAdd(m0, i64(c.mc)), i64(c.m));
          Value* n1 = smin(b_.CreateAdd(n0, i64(c.nc)), i64(c.n));
          Value* rest = batch;
          for (size_t d = batchRank; d-- > 0;) {
            bind(k_.outer.vars[d], b_.CreateURem(rest, i64(k_.outer.extents[d])));
            rest = b_.CreateUDiv(rest, i64(k_.outer.extents[d]));
          }
          Value* aBatch =
              c.aPacked ? b_.CreateInBoundsGEP(
                              f32, bases_[c.aSlot],
                              b_.CreateMul(c.aBatchStride == 0 ? i64(0) : batch, i64(c.mTiles() * c.k * c.mr)))
                        : b_.CreateInBoundsGEP(f32, bases_[c.aSlot],
                                               b_.CreateAdd(i64(c.aOffset), b_.CreateMul(batch, i64(c.aBatchStride))));
          Value* bBatch;
          if (c.bLayout == BLayout::Packed) {
            Value* packedBatch = c.bBatchStride == 0 ? i64(0) : batch;
            bBatch =
                b_.CreateInBoundsGEP(f32, bases_[c.bSlot], b_.CreateMul(packedBatch, i64(c.nPanels() * c.k * c.nr)));
          } else {
            bBatch = b_.CreateInBoundsGEP(f32, bases_[c.bSlot],
                                          b_.CreateAdd(i64(c.bOffset), b_.CreateMul(batch, i64(c.bBatchStride))));
          }
          Value* cBatch =
              c.partialsInOutput ? b_.CreateInBoundsGEP(f32, base, b_.CreateMul(batch, i64(c.m * c.n))) : nullptr;
          emitLoop(
              i64(0), i64(kBlocks),
              [&](Value* kb) {
                Value* kc0 = b_.CreateMul(kb, i64(c.kc), "kc0");
                Value* kLen = smin(i64(c.kc), b_.CreateSub(i64(c.k), kc0));
                Value* first = b_.CreateICmpEQ(kb, i64(0));
                Value* last = b_.CreateICmpEQ(kb, i64(kBlocks - 1));
                const bool packAtRunTime = !c.aPacked && !aInPlace;  // (else A is read where it is)
                if (packAtRunTime && kBlocks == 1) {
                  // One K block: consecutive tasks of a row block (its column blocks) share the packed A.
                  Value* key = b_.CreateAdd(b_.CreateMul(batch, i64(c.m)), m0);
                  emitIf(b_.CreateICmpNE(b_.CreateLoad(b_.getInt64Ty(), packedKey), key), [&] {
                    packA(c, aBatch, m0, m1, kc0, kLen, aPacked);
                    b_.CreateStore(key, packedKey);
                  });
                } else if (packAtRunTime) {
                  packA(c, aBatch, m0, m1, kc0, kLen, aPacked);
                }
                if (blockB) packBlockB(c, bBatch, n0, n1, kc0, kLen, panelBuf);
                Value* panelBegin = b_.CreateUDiv(n0, i64(c.nr));
                Value* panelEnd = b_.CreateUDiv(b_.CreateAdd(n1, i64(c.nr - 1)), i64(c.nr));
                Value* tiles = b_.CreateUDiv(b_.CreateAdd(b_.CreateSub(m1, m0), i64(c.mr - 1)), i64(c.mr));
                // B's panel: in the packed block or the packed weights (no side effects), else
                // prepared here (copied for Copy, edge panels of Direct).
                auto panelOf = [&](Value* panel) -> std::pair<Value*, Value*> {
                  Value* j0 = b_.CreateMul(panel, i64(c.nr));
                  Value* cols = smin(i64(c.nr), b_.CreateSub(n1, j0));
                  if (!blockB) return panelOperand(c, bBatch, panel, j0, cols, kc0, kLen, panelBuf);
                  Value* offset = b_.CreateMul(b_.CreateSub(panel, panelBegin), b_.CreateMul(kLen, i64(c.nr)));
                  return {b_.CreateInBoundsGEP(f32, panelBuf, offset), i64(c.nr)};
                };
                // One register tile: row tile t against panel `panel`, then its epilogue.
                auto tileWork = [&](Value* panel, Value* t, Value* bPanel, Value* ldb) {
                  Value* j0 = b_.CreateMul(panel, i64(c.nr), "j0");
                  Value* cols = smin(i64(c.nr), b_.CreateSub(n1, j0));
                  Value* i0 = b_.CreateAdd(m0, b_.CreateMul(t, i64(c.mr)), "i0");
                  Value* rows = smin(i64(c.mr), b_.CreateSub(m1, i0));
                  Value* cTile = cBatch
                                     ? b_.CreateInBoundsGEP(f32, cBatch, b_.CreateAdd(b_.CreateMul(i0, i64(c.n)), j0))
                                     : nullptr;
                  // Partial sums of earlier K blocks live in the output: a whole tile is read
                  // and written there in place; an edge tile goes through the scratch tile.
                  // The last K block leaves the tile in scratch for the epilogue.
                  Value* whole = cTile ? b_.CreateICmpEQ(cols, i64(c.nr)) : b_.getFalse();
                  if (cTile) {
                    emitIf(b_.CreateAnd(b_.CreateNot(first), b_.CreateNot(whole)),
                           [&] { copyTile(cTile, c.n, tile, c.nr, rows, cols); });
                  }
                  Value* src = cTile ? b_.CreateSelect(whole, cTile, tile) : tile;
                  Value* ldSrc = b_.CreateSelect(whole, i64(c.n), i64(c.nr));
                  Value* toOutput = b_.CreateAnd(whole, b_.CreateNot(last));
                  Value* dst = cTile ? b_.CreateSelect(toOutput, cTile, tile) : tile;
                  Value* ldDst = transposedTile ? i64(c.lanes) : b_.CreateSelect(toOutput, i64(c.n), i64(c.nr));
                  // Row tile t of the block: packed here per K block, or at compile time
                  // (tile i0 / mr of all of K, from column kc0 on).
                  Value* aTile =
                      c.aPacked
                          ? b_.CreateInBoundsGEP(
                                f32, aBatch,
                                b_.CreateMul(b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(i0, i64(c.mr)), i64(c.k)), kc0),
                                             i64(c.mr)))
                      : aInPlace ? b_.CreateInBoundsGEP(f32, aBatch,
                                                        b_.CreateAdd(b_.CreateMul(i0, i64(c.aRowStride)),
                                                                     b_.CreateMul(kc0, i64(c.aColStride))))
                                 : b_.CreateInBoundsGEP(f32, aPacked, b_.CreateMul(b_.CreateMul(t, kLen), i64(c.mr)));
                  if (prefetchTiles) prefetchTile(store, i0, j0, rows, cols);
                  // The same panel of the next column block (this one's at the last), from this row
                  // tile's share of it on.
                  Value* next = bPanel;
                  if (prefetchNextBlock) {
                    Value* nextPanel = smin(b_.CreateAdd(panel, i64(c.nc / c.nr)), i64(c.nPanels() - 1));
                    Value* share = b_.CreateMul(b_.CreateUDiv(i0, i64(c.mr)), i64(nextStride * c.k));
                    next = b_.CreateGEP(b_.getInt8Ty(), bBatch,
                                        b_.CreateAdd(b_.CreateMul(nextPanel, i64(c.k * c.nr * 4)), share));
                  }
                  std::vector<Value*> args = {aTile, bPanel, ldb,       kLen,     src, ldSrc, b_.CreateNot(first),
                                              dst,   ldDst,  noColumns, noSecond, next};
                  if (c.aRowIndex == kir::kNoExpr) {
                    callByIndex(micro, rows, args);
                  } else {
                    // A tile whose rows are 1 or 2 elements apart is read in place, in one run or
                    // two (it crosses an output row: split at the row the second run starts).
                    Value* step = b_.CreateLoad(b_.getInt64Ty(), tableAt(separable_.tileStep, t));
                    Value* split = b_.CreateLoad(b_.getInt64Ty(), tableAt(separable_.tileSplit, t));
                    Value* firstRow = b_.CreateMul(t, i64(c.mr));
                    Value* firstOffset = b_.CreateLoad(b_.getInt64Ty(), tableAt(separable_.rowOffset, firstRow));
                    std::vector<Value*> direct = args;
                    direct[0] = b_.CreateInBoundsGEP(f32, aBatch, firstOffset);
                    direct[9] = tableAt(separable_.colOffset, i64(0));
                    auto inPlace = [&](int64_t s) {
                      emitIfElse(
                          b_.CreateICmpEQ(split, i64(0)), [&] { b_.CreateCall(separable_.inPlace[s - 1], direct); },
                          [&] {
                            std::vector<Value*> two = direct;
                            two[10] = b_.CreateSub(
                                b_.CreateLoad(b_.getInt64Ty(),
                                              tableAt(separable_.rowOffset, b_.CreateAdd(firstRow, split))),
                                firstOffset);
                            callByIndex(separable_.split[s - 1], split, two);  // (a split no tile has: packed)
                          });
                    };
                    emitIfElse(
                        b_.CreateICmpEQ(step, i64(1)), [&] { inPlace(1); },
                        [&] {
                          emitIfElse(
                              b_.CreateICmpEQ(step, i64(2)), [&] { inPlace(2); },
                              [&] { callByIndex(micro, rows, args); });
                        });
                  }
                  // The kernel's store at each point of the tile, along the output's
                  // contiguous axis: j innermost, or i when the GEMM is transposed.
                  auto epilogue = [&] {
                    auto point = [&](Value* i, Value* j) {
                      bind(rowVar(c), b_.CreateAdd(i0, i));
                      bind(colVar(c), b_.CreateAdd(j0, j));
                      Value* ptr = b_.CreateInBoundsGEP(f32, tile,
                                                        transposedTile ? b_.CreateAdd(b_.CreateMul(j, i64(c.lanes)), i)
                                                                       : b_.CreateAdd(b_.CreateMul(i, i64(c.nr)), j));
                      reduced_.assign(1, b_.CreateAlignedLoad(f32, ptr, llvm::Align(4)));
                      emitStore(store);
                    };
                    Value* outerCount = c.transposed ? cols : rows;
                    Value* innerCount = c.transposed ? rows : cols;
                    emitLoop(
                        i64(0), outerCount,
                        [&](Value* x) {
                          emitLoop(
                              i64(0), innerCount, [&](Value* y) { c.transposed ? point(y, x) : point(x, y); },
                              "epi.inner",
                              transposedTile ? maskedVectorLoop(c.lanes)
                              : c.transposed ? nullptr
                                             : loopHints({{"llvm.loop.vectorize.enable", b_.getTrue()},
                                                          {"llvm.loop.vectorize.width", b_.getInt32(c.lanes)},
                                                          {"llvm.loop.unroll.disable", b_.getTrue()}}));
                        },
                        // Never across the outer loop: LLVM vectorised it (as gathers from the tile
                        // and scatters over the output's rows or channel planes) after unrolling a
                        // whole tile's inner loop — a third of ResNet's 7 x 7 stem.
                        "epi.outer", noVectorLoop());
                  };
                  // A whole as-is tile: the epilogue row by row in vectors of the tile's own width,
                  // unrolled, so that its loads of the tile are the microkernel's stores just made
                  // (LLVM forwards them: the accumulators go from registers to the output).
                  auto wholeTileEpilogue = [&] {
                    const auto lanes = static_cast<unsigned>(c.lanes);
                    auto* vty = llvm::FixedVectorType::get(f32, lanes);
                    for (int64_t i = 0; i < c.mr; ++i)
                      for (int64_t v = 0; v < c.nr / c.lanes; ++v) {
                        scopes_.emplace_back();
                        bind(rowVar(c), b_.CreateAdd(i0, i64(i)));
                        bind(colVar(c), b_.CreateAdd(j0, i64(v * c.lanes)));
                        Value* at = b_.CreateConstInBoundsGEP1_64(f32, tile, i * c.nr + v * c.lanes);
                        vectorReduced_.assign(1, b_.CreateAlignedLoad(vty, at, llvm::Align(4)));
                        reduced_.assign(1, nullptr);
                        Value* index = value(store.index);
                        Value* stored = vectorValue(store.value);
                        if (index && stored)
                          b_.CreateAlignedStore(stored, b_.CreateInBoundsGEP(f32, bases_[store.slot], index),
                                                llvm::Align(4));
                        scopes_.pop_back();
                      }
                  };
                  // A whole transposed tile: one vector per column, lanes along its rows — the
                  // microkernel's transposed store just made, forwarded — stored masked to its mr
                  // rows. The scalar loop it replaces (a masked vector per column, its mask and
                  // addresses recomputed each time) was a tenth of a 3 x 3 conv's time and a third
                  // of a K = 27 stem's. Lanes past mr compute on points below m (the tile ends
                  // lanes before m), so their loads stay in bounds; they are not stored.
                  auto wholeTransposedTileEpilogue = [&] {
                    const auto lanes = static_cast<unsigned>(c.lanes);
                    auto* vty = llvm::FixedVectorType::get(f32, lanes);
                    std::vector<llvm::Constant*> bits;
                    for (unsigned l = 0; l < lanes; ++l) bits.push_back(b_.getInt1(l < c.mr));
                    llvm::Constant* mask = llvm::ConstantVector::get(bits);
                    for (int64_t j = 0; j < c.nr; ++j) {
                      scopes_.emplace_back();
                      bind(rowVar(c), i0);
                      bind(colVar(c), b_.CreateAdd(j0, i64(j)));
                      Value* at = b_.CreateConstInBoundsGEP1_64(f32, tile, j * c.lanes);
                      vectorReduced_.assign(1, b_.CreateAlignedLoad(vty, at, llvm::Align(4), "epi.tcol"));
                      reduced_.assign(1, nullptr);
                      Value* index = value(store.index);
                      Value* stored = vectorValue(store.value);
                      if (index && stored)
                        b_.CreateMaskedStore(stored, b_.CreateInBoundsGEP(f32, bases_[store.slot], index),
                                             llvm::Align(4), mask);
                      scopes_.pop_back();
                    }
                  };
                  auto finish = [&] {
                    if (!vectorEpilogue) return epilogue();
                    Value* whole = b_.CreateAnd(b_.CreateICmpEQ(rows, i64(c.mr)), b_.CreateICmpEQ(cols, i64(c.nr)));
                    if (!c.transposed) return emitIfElse(whole, wholeTileEpilogue, epilogue);
                    emitIfElse(b_.CreateAnd(whole, b_.CreateICmpSLE(b_.CreateAdd(i0, i64(c.lanes)), i64(c.m))),
                               wholeTransposedTileEpilogue, epilogue);
                  };
                  if (cTile) {
                    emitIfElse(last, finish, [&] {
                      emitIf(b_.CreateNot(whole), [&] { copyTile(tile, c.nr, cTile, c.n, rows, cols); });
                    });
                  } else {
                    finish();
                  }
                };
                if (rowTilesOuter) {
                  // Each row tile sweeps the block's panels: its output rows are written front to
                  // back (prefetchable store streams), its A tile stays in L1, B's block in L2.
                  emitLoop(
                      i64(0), tiles,
                      [&](Value* t) {
                        emitLoop(
                            panelBegin, panelEnd,
                            [&](Value* panel) {
                              // (Not a structured binding: clang 14 cannot capture one in lambdas.)
                              const std::pair<Value*, Value*> operand = panelOf(panel);
                              tileWork(panel, t, operand.first, operand.second);
                            },
                            "panel");
                      },
                      "tile");
                } else {
                  // BLIS's order: each panel of B stays in L1 while the block's row tiles stream past.
                  emitLoop(
                      panelBegin, panelEnd,
                      [&](Value* panel) {
                        const std::pair<Value*, Value*> operand = panelOf(panel);
                        emitLoop(
                            i64(0), tiles, [&](Value* t) { tileWork(panel, t, operand.first, operand.second); },
                            "tile");
                      },
                      "panel");
                }
              },
              "kblock");
        },
        "task");
  }

  // packed[(t * kLen + p) * mr + i % mr] = A[i][kc0 + p] for rows i in [m0, m1), t = (i - m0) / mr.
  // A whole row tile is copied a chunk of 16 columns at a time, its rows and the chunk unrolled: each
  // row's cache line is read once (rows a multiple of 4 KiB apart share L1's sets, so a column-by-
  // column walk of 13 rows misses on every load) and the chunk's mr x 16 packed floats stay in L1.
  // The moves stay scalar: vectorised, the writes that stride by mr would become scatters, which
  // Zen 4 runs at a few cycles per element.
  void packA(const kir::Contraction& c, Value* aBatch, Value* m0, Value* m1, Value* kc0, Value* kLen, Value* packed) {
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
            return b_.CreateInBoundsGEP(f32, aBatch,
                                        b_.CreateAdd(b_.CreateMul(b_.CreateAdd(i0, r), i64(c.aRowStride)),
                                                     b_.CreateMul(kc0, i64(c.aColStride))));
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
  void fillColumnOffsets(const kir::Contraction& c, Value* kc0, Value* kLen) {
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
  void packSeparableA(const kir::Contraction& c, Value* aBatch, Value* m0, Value* m1, Value* kc0, Value* kLen,
                      Value* packed) {
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
          Value* mask =
              b_.CreateSelect(b_.CreateICmpEQ(step, i64(1)), i64(static_cast<int64_t>(separable_.splitMask[0])),
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

  Value* tableAt(llvm::AllocaInst* table, Value* i) {
    return b_.CreateInBoundsGEP(table->getAllocatedType(), table, {i64(0), i});
  }

  // buffer[(q * kLen + p) * nr + jj] = B[kc0 + p][n0 + q * nr + jj] (0 past n1): the block's panels,
  // B's rows read in order.
  void packBlockB(const kir::Contraction& c, Value* bBatch, Value* n0, Value* n1, Value* kc0, Value* kLen,
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
  // (SqueezeNet's 256 -> 32 1 x 1 conv, one panel per task: 0.167 -> 0.119 ms; bench/NOTES.md).
  void copyPanelRow(const kir::Contraction& c, Value* src, Value* dst, Value* cols) {
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

  void copyPartialPanelRow(const kir::Contraction& c, Value* src, Value* dst, Value* cols) {
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
  std::pair<Value*, Value*> panelOperand(const kir::Contraction& c, Value* bBatch, Value* panel, Value* j0, Value* cols,
                                         Value* kc0, Value* kLen, Value* buffer) {
    llvm::Type* f32 = b_.getFloatTy();
    using BLayout = kir::Contraction::BLayout;
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
  void copyTile(Value* src, int64_t srcStride, Value* dst, int64_t dstStride, Value* rows, Value* cols) {
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
                b_.CreateAlignedStore(v,
                                      b_.CreateInBoundsGEP(f32, dst, b_.CreateAdd(b_.CreateMul(i, i64(dstStride)), j)),
                                      llvm::Align(4));
              },
              "copy.j");
        },
        "copy.i");
  }

  // switch (rows) { case r: micro[r - 1](args...); }
  // Per step (1, 2): bit r set where a whole row tile of a separable A is two runs of that step, the
  // second from row r — the same test packSeparableA makes at run time, made here on R's constant
  // values (tiles start at multiples of mr). Zero when R is not a constant function of the row.
  std::array<uint64_t, 2> tileSplits(const kir::Contraction& c) {
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
  std::optional<int64_t> constantIndex(ExprId e, ExprId var, int64_t value) {
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

  // fns[index - 1](args) for index in 1..fns.size() (a null entry: never called, no case); nothing
  // for any other index. The row-count variants of a microkernel, or the split-row ones.
  void callByIndex(const std::vector<llvm::Function*>& fns, Value* index, const std::vector<Value*>& args) {
    llvm::LLVMContext& ctx = m_.getContext();
    auto* done = llvm::BasicBlock::Create(ctx, "micro.done", fn_);
    llvm::SwitchInst* sw = b_.CreateSwitch(index, done, static_cast<unsigned>(fns.size()));
    for (size_t r = 0; r < fns.size(); ++r) {
      if (!fns[r]) continue;
      auto* bb = llvm::BasicBlock::Create(ctx, "micro" + std::to_string(r + 1), fn_);
      sw->addCase(b_.getInt64(static_cast<int64_t>(r + 1)), bb);
      b_.SetInsertPoint(bb);
      b_.CreateCall(fns[r], args);
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
  }

  void emitIf(Value* cond, const std::function<void()>& then) { emitIfElse(cond, then, nullptr); }

  void emitIfElse(Value* cond, const std::function<void()>& then, const std::function<void()>& otherwise) {
    llvm::LLVMContext& ctx = m_.getContext();
    auto* thenBlock = llvm::BasicBlock::Create(ctx, "then", fn_);
    auto* elseBlock = otherwise ? llvm::BasicBlock::Create(ctx, "else", fn_) : nullptr;
    auto* join = llvm::BasicBlock::Create(ctx, "join", fn_);
    b_.CreateCondBr(cond, thenBlock, elseBlock ? elseBlock : join);
    b_.SetInsertPoint(thenBlock);
    scopes_.emplace_back();
    then();
    scopes_.pop_back();
    b_.CreateBr(join);
    if (elseBlock) {
      b_.SetInsertPoint(elseBlock);
      scopes_.emplace_back();
      otherwise();
      scopes_.pop_back();
      b_.CreateBr(join);
    }
    b_.SetInsertPoint(join);
  }

  void emitPoint() {
    reduced_.assign(k_.reductions.size(), nullptr);
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      reduced_[r] = emitReduction(k_.reductions[r], r);
      if (r == 0) prefetchNextRow();
    }
    bool anyInner = false;
    for (const kir::Store& s : k_.stores) {
      if (s.perInner)
        anyInner = true;
      else
        emitStore(s);
    }
    if (!anyInner) return;
    emitLoopNest(k_.inner, 0, "inner", [&] {
      for (const kir::Store& s : k_.stores)
        if (s.perInner) emitStore(s);
    });
  }

  // A row kernel (softmax, a norm: reductions over a row, then the row's outputs) reads its row
  // from memory in its first reduction and computes on it from L1 after that; the hardware
  // prefetchers see no misses meanwhile, so the next row's first reduction would wait on memory
  // again. Its lines are asked for here, after the first reduction: they arrive while this row's
  // other passes compute (a 1024 x 1024 softmax: the max pass then the exp pass, each ~0.2 ms).
  // Only the row's first kRowPrefetchL1Lines lines go to L1, the rest to L2: a hint to L1 holds one
  // of its few line-fill buffers (16 on a Sapphire Rapids core) until the line arrives, so 64 of
  // them at once (a 4 KiB row) stalled the core about as long as the memory took to deliver them
  // (softmax 1024 x 1024, 1 thread: 0.594 -> 0.527 ms, 2 threads 0.280 -> 0.253; LayerNorm and
  // RMSNorm 4096 x 1024 within 2%). The next pass then finds its head in L1 and the rest in L2,
  // which the L1 streamer follows.
  void prefetchNextRow() {
    if (k_.reductions.size() < 2 &&
        !std::any_of(k_.stores.begin(), k_.stores.end(), [](const kir::Store& st) { return st.perInner; }))
      return;
    const kir::Reduction& first = k_.reductions[0];
    if (first.loop.vars.size() != 1 || first.loop.extents[0] < 64 || k_.outer.vars.empty()) return;
    const ExprId var = first.loop.vars[0];
    const ExprId row = k_.outer.vars.back();
    // The loads of the reduction's body that move along its loop and with the row.
    const std::vector<ExprId> loads = loadsOutsideReductions(first.body, [&](const kir::ExprNode& n) {
      const std::optional<kir::AffineForm> f = kir::affineForm(k_.exprs, n.a);
      return f && f->coefficient(var) == 1 && f->coefficient(row) != 0;
    });
    if (loads.empty()) return;
    llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::prefetch, {b_.getPtrTy()});
    Value* next = b_.CreateAdd(value(row), i64(1));
    for (ExprId load : loads) {
      const kir::ExprNode& n = k_.expr(load);
      const int64_t perLine = std::max<int64_t>(1, 64 / dtypeSize(k_.params[n.slot].dtype));
      const int64_t lines = (first.loop.extents[0] + perLine - 1) / perLine;
      const int64_t toL1 = std::min(lines, kRowPrefetchL1Lines);
      // Lines [begin, end) of the next row, hinted into the caches down to `locality` (3: L1, 2: L2).
      auto hintLines = [&](int64_t begin, int64_t end, int locality, const char* name) {
        emitLoop(
            i64(begin), i64(end),
            [&](Value* line) {
              scopes_.emplace_back();
              bind(row, next);
              bind(var, b_.CreateMul(line, i64(perLine)));
              if (Value* at = value(n.a)) {
                // (Not inbounds: past the tensor after its last row; a prefetch never faults.)
                Value* ptr = b_.CreateGEP(ops_.storageType(k_.params[n.slot].dtype), bases_[n.slot], at);
                b_.CreateCall(prefetch, {ptr, /*read*/ b_.getInt32(0), b_.getInt32(locality), /*data*/ b_.getInt32(1)});
              }
              scopes_.pop_back();
            },
            name, noVectorLoop());
      };
      hintLines(0, toL1, 3, "prefetch.row");
      if (toL1 < lines) hintLines(toL1, lines, 2, "prefetch.row.l2");
    }
  }

  // --- attention (kir::Attention): per task, a block of query rows against the keys block by block.

  Status checkAttention(const kir::Attention& a) const {
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

  // A 64-byte aligned scratch array of `floats` f32 on the kernel's stack.
  Value* alignedAlloca(int64_t floats, const char* name) {
    llvm::Type* f32 = b_.getFloatTy();
    llvm::IRBuilder<> eb(entry_, entry_->begin());
    llvm::AllocaInst* a = eb.CreateAlloca(llvm::ArrayType::get(f32, static_cast<uint64_t>(floats)), nullptr, name);
    a->setAlignment(llvm::Align(64));
    return b_.CreateBitCast(a, f32->getPointerTo());
  }

  Value* loadF32(Value* base, Value* index) {
    llvm::Type* f32 = b_.getFloatTy();
    return b_.CreateAlignedLoad(f32, b_.CreateInBoundsGEP(f32, base, index), llvm::Align(4));
  }
  void storeF32(Value* v, Value* base, Value* index) {
    b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(b_.getFloatTy(), base, index), llvm::Align(4));
  }
  Value* f32c(double v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }
  // exp(x) for x <= 0 (or NaN), inline (kir's expOfNonPositive).
  Value* expOfNonPositive(Value* x) {
    kir::ExprNode n{ExprOp::Exp, DType::F32};
    n.ival = kir::kExpOfNonPositive;
    return ops_.unary(n, x, DType::F32, &error_);
  }

  // A kLen x nr panel of a row-major B (rows `stride` floats apart) from column c0 on, `cols` of its
  // columns present (1..nr): read in place when whole, else copied into `edge` zero-padded (so the
  // microkernel reads whole vectors, never past B's rows). Its pointer and row stride.
  std::pair<Value*, Value*> panelOrCopy(Value* b, Value* stride, Value* c0, Value* kLen, Value* cols, int64_t nr,
                                        Value* edge) {
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
  void rowTiles(const std::vector<llvm::Function*>& micro, int64_t mr, Value* rows, Value* aBase, int64_t aStride,
                Value* panel, Value* ldb, Value* kLen, Value* dst, int64_t ldDst, bool accumulate) {
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
  void emitAttention(const kir::Attention& a) {
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

  // --- reductions

  llvm::AllocaInst* entryAlloca(llvm::Type* ty, const std::string& name) {
    llvm::IRBuilder<> eb(entry_, entry_->begin());
    return eb.CreateAlloca(ty, nullptr, name);
  }

  // The identity the accumulator starts from (equal to the interpreter's "first element" start).
  Value* identity(ReduceOp op, DType t) {
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
  void foldSplitNaN(ReduceOp op, llvm::AllocaInst* acc, llvm::AllocaInst* sawNaN, Value* v) {
    llvm::FastMathFlags fmf;
    fmf.setNoNaNs();
    fmf.setNoSignedZeros();
    Value* next = b_.CreateBinaryIntrinsic(op == ReduceOp::Max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum,
                                           b_.CreateLoad(v->getType(), acc), v);
    llvm::cast<llvm::Instruction>(next)->setFastMathFlags(fmf);
    b_.CreateStore(next, acc);
    b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt1Ty(), sawNaN), b_.CreateFCmpUNO(v, v)), sawNaN);
  }
  Value* splitNaNResult(llvm::AllocaInst* acc, llvm::AllocaInst* sawNaN, const std::string& name) {
    llvm::Type* ty = acc->getAllocatedType();
    return b_.CreateSelect(b_.CreateLoad(b_.getInt1Ty(), sawNaN), llvm::ConstantFP::getNaN(ty), b_.CreateLoad(ty, acc),
                           name);
  }

  Value* combine(ReduceOp op, DType t, Value* acc, Value* v) {
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

  Value* emitReduction(const kir::Reduction& r, size_t number) {
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

  // --- stores and expressions

  void emitStore(const kir::Store& s) {
    Value* index = value(s.index);
    Value* v = value(s.value);
    if (!index || !v) return;
    const DType storage = k_.params[s.slot].dtype;
    Value* stored = ops_.toStorage(v, k_.expr(s.value).dtype, storage);
    llvm::Type* sty = ops_.storageType(storage);
    Value* ptr = b_.CreateInBoundsGEP(sty, bases_[s.slot], index);
    b_.CreateAlignedStore(stored, ptr, llvm::Align(dtypeSize(storage)));
  }

  void bind(ExprId var, Value* v) { scopes_.back()[var] = v; }

  // The value of expression `e` at the insertion point; nullptr after an error.
  Value* value(ExprId e) {
    return memoized(e, [&] { return compute(e); });
  }

  // The value memoised under `key` in the innermost scope that has it, else make() memoised in the
  // current scope (a loop body's values are forgotten when the loop ends).
  template <class Make>
  Value* memoized(ExprId key, Make make) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(key);
      if (found != it->end()) return found->second;
    }
    Value* v = make();
    if (v) scopes_.back()[key] = v;
    return v;
  }

  Value* compute(ExprId e) {
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
      case ExprOp::Var:
        NNC_CHECK(false, "kernel '" + k_.name + "': loop variable used outside its loop");
        return nullptr;
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

  const kir::Kernel& k_;
  llvm::Module& m_;
  const LoweringOptions& opts_;
  llvm::IRBuilder<> b_;
  ScalarOps ops_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  std::vector<Value*> bases_;
  std::vector<std::unordered_map<ExprId, Value*>> scopes_;
  std::vector<Value*> reduced_;
  struct SeparableA {  // emitContraction's tables and microkernels for a separable A
    llvm::AllocaInst *rowOffset = nullptr, *colOffset = nullptr, *tileStep = nullptr, *tileSplit = nullptr;
    std::vector<llvm::Function*> split[2];            // per step: the tiles whose second run starts at row 1..mr-1
    std::array<uint64_t, 2> splitMask = {0, 0};       // per step: the splits that have a microkernel
    llvm::Function* inPlace[2] = {nullptr, nullptr};  // rows 1 and 2 elements apart
    bool columnsOnce = false;                         // one K block: C(p) filled once per call, not per task
  } separable_;
  // Strided windows (emitStridedWindows): per piece, what dependsOnInner and vectorizable found.
  static constexpr int64_t kMaxWindowStride = 4;
  static constexpr int64_t kLlvmVectorLoopVectors = 4;  // LLVM's interleave count for such loops
  struct VectorMemo {
    std::unordered_map<ExprId, bool> depends, ok;
    std::unordered_map<ExprId, int64_t> loadStride;
    std::map<ExprId, ExprId> foldedClamps;  // the piece's min/max facts, as affineForm substitutions
    bool strided = false;                   // some load steps by 2 or more
  } vectorMemo_;
  std::vector<Value*> vectorReduced_;
  int windowLanes_ = 0;                               // the vector width of the strided window being emitted
  std::vector<kir::LoopPiece> pieces_;                // partition of the innermost outer loop
  std::optional<kir::RowInterior> rowInterior_;       // the interior box of the other outer variables
  const std::map<ExprId, bool>* rowFacts_ = nullptr;  // the row version being emitted: its facts
  const std::map<ExprId, bool>* facts_ = nullptr;     // the piece being emitted: its folded tests
  std::string error_;
};

}  // namespace

Status lowerKernel(const kir::Kernel& kernel, llvm::Module& module, const LoweringOptions& options) {
  return KernelLowering(kernel, module, options).run();
}

}  // namespace nnc::codegen::llvmcpu
