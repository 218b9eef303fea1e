// Loops, branches and a kir::LoopNest's loop nest: row segments, innermost loops, the per-point work.
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kir/affine.h"
#include "targets/cpu/codegen/kernel_lowering_context.h"

namespace nnc::codegen::llvmcpu::detail {

namespace {

// A row kernel hints this many lines of its next row into L1, the rest into L2 (prefetchNextRow).
constexpr int64_t kRowPrefetchL1Lines = 16;

}  // namespace

// for (i = lo; i < hi; ++i) body(i), in a fresh memo scope; the builder ends after the loop.
void KernelLowering::emitLoop(Value* lo, Value* hi, const std::function<void(Value*)>& body, const std::string& name,
                              llvm::MDNode* loopHints) {
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
llvm::MDNode* KernelLowering::loopHints(std::initializer_list<std::pair<const char*, llvm::Constant*>> hints) {
  llvm::LLVMContext& c = m_.getContext();
  std::vector<llvm::Metadata*> ops = {nullptr};
  for (const auto& [key, v] : hints)
    ops.push_back(llvm::MDNode::get(c, {llvm::MDString::get(c, key), llvm::ConstantAsMetadata::get(v)}));
  llvm::MDNode* id = llvm::MDNode::getDistinct(c, ops);
  id->replaceOperandWith(0, id);
  return id;
}

// Do not vectorise (a loop of scalar moves the vectoriser would turn into scatters).
llvm::MDNode* KernelLowering::noVectorLoop() { return loopHints({{"llvm.loop.vectorize.enable", b_.getFalse()}}); }

// Vectorise `width` wide with the remainder as one masked iteration (a short loop of unit-stride
// accesses and unknown trip count: a transposed tile's column of rows <= lanes). Not unrolled
// first: where the trip count is known (a whole tile's 14 rows) LLVM unrolled the loop into
// scalars instead.
llvm::MDNode* KernelLowering::maskedVectorLoop(int width) {
  return loopHints({{"llvm.loop.vectorize.enable", b_.getTrue()},
                    {"llvm.loop.vectorize.width", b_.getInt32(static_cast<uint32_t>(width))},
                    {"llvm.loop.vectorize.predicate.enable", b_.getTrue()},
                    {"llvm.loop.unroll.disable", b_.getTrue()}});
}

// Unroll fully (a window's few taps; LLVM's O2 pipeline would leave the loop and so not vectorise
// the loop around it).
llvm::MDNode* KernelLowering::fullUnrollLoop() {
  llvm::LLVMContext& c = m_.getContext();
  llvm::MDNode* id =
      llvm::MDNode::getDistinct(c, {nullptr, llvm::MDNode::get(c, {llvm::MDString::get(c, "llvm.loop.unroll.full")})});
  id->replaceOperandWith(0, id);
  return id;
}

// A loop nest over `loop` (innermost fastest); extent-1 dims bind their var to 0 without a loop.
void KernelLowering::emitLoopNest(const kir::Loop& loop, size_t dim, const std::string& name,
                                  const std::function<void()>& body, bool fullyUnroll) {
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

// if (cond) then() [else otherwise()]: each branch in a fresh memo scope, the builder after both.
void KernelLowering::emitIf(Value* cond, const std::function<void()>& then) { emitIfElse(cond, then, nullptr); }

void KernelLowering::emitIfElse(Value* cond, const std::function<void()>& then,
                                const std::function<void()>& otherwise) {
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

// The innermost outer variable over [lo, hi): one loop, or one per piece of its partition
// (kir/loop_partition.h) with the piece's border tests folded, so the interior is clamp-free.
void KernelLowering::emitInnermostLoop(Value* lo, Value* hi, const std::string& name) {
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
size_t KernelLowering::mergedRowDims() const {
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
void KernelLowering::emitMergedRow(Value* lo, Value* hi, size_t first, int64_t length) {
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
void KernelLowering::emitRow(Value* lo, Value* hi) {
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

void KernelLowering::emitOuterLoop() {
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
  // Row segments (see kernel_lowering_context.h). The first row's multi-index comes from `begin` by
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

void KernelLowering::emitPoint() {
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
// other passes compute (a softmax: the max pass then the exp pass).
// Only the row's first kRowPrefetchL1Lines lines go to L1, the rest to L2: a hint to L1 holds one
// of its few line-fill buffers (16 on a Sapphire Rapids core) until the line arrives, so 64 of
// them at once (a 4 KiB row) stalled the core about as long as the memory took to deliver them.
// The next pass then finds its head in L1 and the rest in L2, which the L1 streamer follows.
void KernelLowering::prefetchNextRow() {
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

}  // namespace nnc::codegen::llvmcpu::detail
