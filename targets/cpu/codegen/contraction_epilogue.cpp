// The GEMM's epilogue: the kernel's store over each finished register tile, and the prefetch of its lines.
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "kir/affine.h"
#include "targets/cpu/codegen/kernel_lowering_context.h"
#include "targets/cpu/codegen/microkernel.h"

namespace nnc::codegen::llvmcpu::detail {

// The kernel's store over a finished tile: as vectors where the store allows and the tile is whole,
// else point by point.
void KernelLowering::emitTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan,
                                      const TileBounds& bounds) {
  if (!plan.vectorEpilogue) return emitPointwiseTileEpilogue(c, plan, bounds);
  Value* whole = b_.CreateAnd(b_.CreateICmpEQ(bounds.rows, i64(c.mr)), b_.CreateICmpEQ(bounds.cols, i64(c.nr)));
  auto pointwise = [&] { emitPointwiseTileEpilogue(c, plan, bounds); };
  if (!c.transposed)
    return emitIfElse(
        whole, [&] { emitWholeTileEpilogue(c, plan, bounds); }, pointwise);
  if (c.operands == DType::BF16)
    return emitIfElse(
        whole, [&] { emitWholeBf16TransposedTileEpilogue(c, plan, bounds); }, pointwise);
  emitIfElse(
      b_.CreateAnd(whole, b_.CreateICmpSLE(b_.CreateAdd(bounds.i0, i64(c.lanes)), i64(c.m))),
      [&] { emitWholeTransposedTileEpilogue(c, plan, bounds); }, pointwise);
}

// The kernel's store at each point of the tile, along the output's
// contiguous axis: j innermost, or i when the GEMM is transposed.
void KernelLowering::emitPointwiseTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan,
                                               const TileBounds& bounds) {
  llvm::Type* f32 = b_.getFloatTy();
  const kir::Store& store = k_.stores[0];
  auto point = [&](Value* i, Value* j) {
    bind(rowVar(c), b_.CreateAdd(bounds.i0, i));
    bind(colVar(c), b_.CreateAdd(bounds.j0, j));
    Value* ptr = b_.CreateInBoundsGEP(f32, plan.tile,
                                      plan.transposedTile ? b_.CreateAdd(b_.CreateMul(j, i64(c.lanes)), i)
                                                          : b_.CreateAdd(b_.CreateMul(i, i64(c.nr)), j));
    reduced_.assign(1, b_.CreateAlignedLoad(f32, ptr, llvm::Align(4)));
    emitStore(store);
  };
  Value* outerCount = c.transposed ? bounds.cols : bounds.rows;
  Value* innerCount = c.transposed ? bounds.rows : bounds.cols;
  emitLoop(
      i64(0), outerCount,
      [&](Value* x) {
        emitLoop(
            i64(0), innerCount, [&](Value* y) { c.transposed ? point(y, x) : point(x, y); }, "epi.inner",
            plan.transposedTile ? maskedVectorLoop(c.lanes)
            : c.transposed      ? nullptr
                                : loopHints({{"llvm.loop.vectorize.enable", b_.getTrue()},
                                             {"llvm.loop.vectorize.width", b_.getInt32(c.lanes)},
                                             {"llvm.loop.unroll.disable", b_.getTrue()}}));
      },
      // Never across the outer loop: LLVM vectorised it (as gathers from the tile
      // and scatters over the output's rows or channel planes) after unrolling a
      // whole tile's inner loop, which slowed ResNet's 7 x 7 stem.
      "epi.outer", noVectorLoop());
}

// The kernel's store of `sums` (the tile's vector of products along the output's contiguous axis,
// from point (i, j) on) through its epilogue expression; masked to `mask`'s lanes where given.
void KernelLowering::storeEpilogueVector(const kir::Contraction& c, Value* i, Value* j, Value* sums,
                                         llvm::Constant* mask) {
  const kir::Store& store = k_.stores[0];
  scopes_.emplace_back();
  bind(rowVar(c), i);
  bind(colVar(c), j);
  vectorReduced_.assign(1, sums);
  reduced_.assign(1, nullptr);
  Value* index = value(store.index);
  Value* stored = vectorValue(store.value);
  if (index && stored) {
    Value* at = b_.CreateInBoundsGEP(b_.getFloatTy(), bases_[store.slot], index);
    if (mask)
      b_.CreateMaskedStore(stored, at, llvm::Align(4), mask);
    else
      b_.CreateAlignedStore(stored, at, llvm::Align(4));
  }
  scopes_.pop_back();
}

// A whole as-is tile: the epilogue row by row in vectors of the tile's own width,
// unrolled, so that its loads of the tile are the microkernel's stores just made
// (LLVM forwards them: the accumulators go from registers to the output).
void KernelLowering::emitWholeTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan,
                                           const TileBounds& bounds) {
  llvm::Type* f32 = b_.getFloatTy();
  const auto lanes = static_cast<unsigned>(c.lanes);
  auto* vty = llvm::FixedVectorType::get(f32, lanes);
  for (int64_t i = 0; i < c.mr; ++i)
    for (int64_t v = 0; v < c.nr / c.lanes; ++v) {
      Value* at = b_.CreateConstInBoundsGEP1_64(f32, plan.tile, i * c.nr + v * c.lanes);
      storeEpilogueVector(c, b_.CreateAdd(bounds.i0, i64(i)), b_.CreateAdd(bounds.j0, i64(v * c.lanes)),
                          b_.CreateAlignedLoad(vty, at, llvm::Align(4)));
    }
}

// A whole transposed bf16 tile (32 x 32, rows along the output's contiguous axis): each 16 x 16
// quarter transposed in registers, then one vector per column of it. Point by point, the epilogue
// of a conv with few channels in (ResNet's 7 x 7 stem, K = 147) cost about as much as its products.
void KernelLowering::emitWholeBf16TransposedTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan,
                                                         const TileBounds& bounds) {
  llvm::Type* f32 = b_.getFloatTy();
  const int64_t lanes = c.lanes;
  auto* vty = llvm::FixedVectorType::get(f32, static_cast<unsigned>(lanes));
  for (int64_t i0 = 0; i0 < c.mr; i0 += lanes)
    for (int64_t j0 = 0; j0 < c.nr; j0 += lanes) {
      std::vector<Value*> quarter;
      for (int64_t i = 0; i < lanes; ++i)
        quarter.push_back(b_.CreateAlignedLoad(vty, b_.CreateConstInBoundsGEP1_64(f32, plan.tile, (i0 + i) * c.nr + j0),
                                               llvm::Align(4)));
      transposeInRegisters(b_, quarter);  // quarter[j]: column j0 + j, rows i0..i0 + 15
      for (int64_t j = 0; j < lanes; ++j)
        storeEpilogueVector(c, b_.CreateAdd(bounds.i0, i64(i0)), b_.CreateAdd(bounds.j0, i64(j0 + j)),
                            quarter[static_cast<size_t>(j)]);
    }
}

// A whole transposed tile: one vector per column, lanes along its rows — the
// microkernel's transposed store just made, forwarded — stored masked to its mr
// rows. The scalar loop it replaces (a masked vector per column, its mask and
// addresses recomputed each time) was a costly part of a 3 x 3 conv's time and
// of a K = 27 stem's. Lanes past mr compute on points below m (the tile ends
// lanes before m), so their loads stay in bounds; they are not stored.
void KernelLowering::emitWholeTransposedTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan,
                                                     const TileBounds& bounds) {
  llvm::Type* f32 = b_.getFloatTy();
  const auto lanes = static_cast<unsigned>(c.lanes);
  auto* vty = llvm::FixedVectorType::get(f32, lanes);
  std::vector<llvm::Constant*> bits;
  for (unsigned l = 0; l < lanes; ++l) bits.push_back(b_.getInt1(l < c.mr));
  llvm::Constant* mask = llvm::ConstantVector::get(bits);
  for (int64_t j = 0; j < c.nr; ++j) {
    Value* at = b_.CreateConstInBoundsGEP1_64(f32, plan.tile, j * c.lanes);
    storeEpilogueVector(c, bounds.i0, b_.CreateAdd(bounds.j0, i64(j)),
                        b_.CreateAlignedLoad(vty, at, llvm::Align(4), "epi.tcol"), mask);
  }
}

// A tile's output lines, and the lines of the tensors its epilogue reads (a residual), are misses
// the epilogue would take in turn, each write-allocated or read from L3 or memory: a transposed
// tile's `cols` runs of `rows` floats each in another channel plane (the stem's 64 planes of
// 12,321 pixels: 3 MB), an as-is tile's `rows` runs in rows a whole image row apart (a 1 x 1
// conv's 256 channel planes of 56 x 56). Asked for before the microkernel, they arrive while it
// computes. The first and last element of each run: a run spans two lines at most.
void KernelLowering::prefetchTile(const kir::Store& store, Value* i0, Value* j0, Value* rows, Value* cols) {
  const kir::Contraction& c = *k_.as<kir::Contraction>();
  llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::prefetch, {b_.getPtrTy()});
  struct Target {
    int32_t slot;
    ExprId index;
    bool write;
  };
  std::vector<Target> targets = {{store.slot, store.index, true}};
  // A read constant along the run (a per-channel bias) is one L1-resident line per run: hinting it
  // cost SqueezeNet's stem (K = 27) two prefetches per column.
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

// The loads of other tensors in a contraction's store value (not inside its reduction), at most
// two, whose index reads no memory (a gather's would be a load of its own).
std::vector<ExprId> KernelLowering::epilogueLoads(ExprId value) const {
  return loadsOutsideReductions(
      value, [&](const kir::ExprNode& n) { return !readsMemory(n.a); }, 2);
}

}  // namespace nnc::codegen::llvmcpu::detail
