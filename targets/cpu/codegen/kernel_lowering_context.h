// kir::Kernel -> LLVM function: loop nests, reductions, stores, and expression DAGs emitted once
// per loop scope. The lowering's shared context (private to targets/cpu/codegen): one class whose
// members are defined by concept in kernel_lowering.cpp (the entry, the function, the dispatch on
// the kernel's kind), loop_nests.cpp, strided_windows.cpp, contraction.cpp,
// contraction_epilogue.cpp, packing.cpp, attention.cpp, reductions.cpp and expressions.cpp.
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
#pragma once

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/IRBuilder.h>

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kir/loop_partition.h"
#include "targets/cpu/codegen/kernel_lowering.h"
#include "targets/cpu/codegen/scalar_ops.h"

namespace nnc::codegen::llvmcpu::detail {

using kir::ExprId;
using kir::ExprOp;
using kir::ReduceOp;
using llvm::Value;

// Lowers one kernel into one function of the module (lowerKernel): the builder, the function being
// emitted, the memo scopes, and the state of the loop piece, window or tile being emitted.
class KernelLowering {
 public:
  KernelLowering(const kir::Kernel& k, llvm::Module& m, const LoweringOptions& o);

  Status run();

 private:
  // What emitContraction decides for a contraction before emitting its loops, and the scratch
  // arrays and microkernels it emits for them.
  // A bf16 AMX tile whose epilogue runs during the next tile's products (emitPipelinedBf16Tile):
  // whether one is due, where it is and where its sums are, in allocas of the kernel's entry.
  struct PendingEpilogue {
    Value *due = nullptr, *i0 = nullptr, *j0 = nullptr, *sums = nullptr;
    Value* parity = nullptr;     // which of the two scratch tiles the next tile's sums go to
    Value* otherTile = nullptr;  // the second scratch tile (the first is the plan's tile)
  };
  struct ContractionPlan {
    // The accumulator tile is stored transposed by the microkernel (column j at j * lanes).
    bool transposedTile = false;
    bool blockB = false;         // a run-time B is packed a kc x nc block at a time, not per panel
    bool rowTilesOuter = false;  // each row tile sweeps the block's panels (else each panel the tiles)
    bool aInPlace = false;       // A is read where it is: packed neither ahead of time nor here
    int64_t kBlocks = 0;         // K blocks of kc
    // The next column block's panels hinted into L2 as this one is computed, nextStride bytes per
    // k step (0: none).
    bool prefetchNextBlock = false;
    int64_t nextStride = 0;
    bool prefetchTiles = false;          // each tile's output lines (and epilogue reads) hinted first
    int64_t farPrefetch = 0;             // bytes ahead of B's rows the microkernel also hints into L2 (0: none)
    bool vectorEpilogue = false;         // whole tiles' epilogues as vectors (emitWholeTileEpilogue)
    Value* tile = nullptr;               // the accumulator tile
    Value* partials = nullptr;           // bf16 with K blocks: the task's partial sums, tile by tile
    Value* panelBuf = nullptr;           // B's packed block or panel; null when B is packed ahead of time
    Value* aPacked = nullptr;            // A's packed row block; null when A is not packed here
    std::vector<llvm::Function*> micro;  // per row count 1..mr; null where no tile has that many rows
    bool pipelined = false;              // whole bf16 AMX tiles through emitPipelinedBf16Tile
    PendingEpilogue pending;
  };
  // One task's block of the GEMM at one K block: rows [m0, m1) and columns [n0, n1) of a batch, its
  // operands, and the K block [kc0, kc0 + kLen).
  struct ContractionBlock {
    Value *m0, *m1, *n0, *n1;
    Value *aBatch, *bBatch;
    Value* cBatch;  // the batch's output where partial sums live there, else null
    Value *kc0, *kLen;
    Value *first, *last;  // i1: this is the first / the last K block
  };
  // One register tile of the block: rows [i0, i0 + rows), columns [j0, j0 + cols).
  struct TileBounds {
    Value *i0, *j0, *rows, *cols;
  };

  // --- kernel_lowering.cpp: the function and its entry block
  void createFunction();
  llvm::AllocaInst* entryAlloca(llvm::Type* ty, const std::string& name);
  Value* alignedAlloca(int64_t floats, const char* name);

  // --- loop_nests.cpp: loops, branches, rows, the outer loop and the per-point work
  void emitLoop(Value* lo, Value* hi, const std::function<void(Value*)>& body, const std::string& name,
                llvm::MDNode* loopHints = nullptr);
  llvm::MDNode* loopHints(std::initializer_list<std::pair<const char*, llvm::Constant*>> hints);
  llvm::MDNode* noVectorLoop();
  llvm::MDNode* maskedVectorLoop(int width);
  llvm::MDNode* fullUnrollLoop();
  void emitLoopNest(const kir::Loop& loop, size_t dim, const std::string& name, const std::function<void()>& body,
                    bool fullyUnroll = false);
  void emitIf(Value* cond, const std::function<void()>& then);
  void emitIfElse(Value* cond, const std::function<void()>& then, const std::function<void()>& otherwise);
  void emitInnermostLoop(Value* lo, Value* hi, const std::string& name);
  size_t mergedRowDims() const;
  void emitMergedRow(Value* lo, Value* hi, size_t first, int64_t length);
  void emitRow(Value* lo, Value* hi);
  void emitOuterLoop();
  void emitPoint();
  void prefetchNextRow();

  // --- strided_windows.cpp: innermost loops vectorised here
  bool dependsOnInner(ExprId e);
  std::optional<int64_t> innerStride(ExprId index);
  bool vectorizable(ExprId e);
  bool vectorisedHere(int64_t length);
  void emitStridedWindows(Value* lo, Value* hi, const std::string& name);
  ExprId vectorKey(ExprId e) const;
  Value* vectorValue(ExprId e);
  Value* computeVector(ExprId e);
  Value* stridedLoad(Value* ptr, int64_t stride);
  Value* emitVectorReduction(const kir::Reduction& r, size_t number);

  // --- contraction.cpp: the GEMM driver
  Status checkContraction(const kir::Contraction& c) const;
  ExprId rowVar(const kir::Contraction& c) const;
  ExprId colVar(const kir::Contraction& c) const;
  void emitContraction(const kir::Contraction& c);
  ContractionPlan planContraction(const kir::Contraction& c);
  void emitContractionMicrokernels(const kir::Contraction& c, ContractionPlan& plan);
  bool prepareVectorEpilogue(const kir::Contraction& c, const ContractionPlan& plan);
  void emitBlockTiles(const kir::Contraction& c, const ContractionPlan& plan, const ContractionBlock& block);
  void emitRegisterTile(const kir::Contraction& c, const ContractionPlan& plan, const ContractionBlock& block,
                        Value* panel, Value* t, Value* bPanel, Value* ldb);
  void callTileMicrokernel(const kir::Contraction& c, const ContractionPlan& plan, Value* aBatch, Value* t, Value* rows,
                           const std::vector<Value*>& args);
  void callByIndex(const std::vector<llvm::Function*>& fns, Value* index, const std::vector<Value*>& args);

  // --- contraction_epilogue.cpp: the kernel's store over each GEMM tile
  void emitTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan, const TileBounds& bounds);
  void emitPointwiseTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan, const TileBounds& bounds);
  void emitWholeTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan, const TileBounds& bounds);
  void storeEpilogueVector(const kir::Contraction& c, Value* i, Value* j, Value* sums, llvm::Constant* mask = nullptr);
  void emitWholeBf16TransposedTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan,
                                           const TileBounds& bounds);
  void emitWholeTransposedTileEpilogue(const kir::Contraction& c, const ContractionPlan& plan,
                                       const TileBounds& bounds);
  void prefetchTile(const kir::Store& store, Value* i0, Value* j0, Value* rows, Value* cols);
  std::vector<ExprId> epilogueLoads(ExprId value) const;

  // --- packing.cpp: the GEMM's operands packed and copied
  void packA(const kir::Contraction& c, Value* aBatch, Value* m0, Value* m1, Value* kc0, Value* kLen, Value* packed);
  void fillColumnOffsets(const kir::Contraction& c, Value* kc0, Value* kLen);
  void packSeparableA(const kir::Contraction& c, Value* aBatch, Value* m0, Value* m1, Value* kc0, Value* kLen,
                      Value* packed);
  Value* tableAt(llvm::AllocaInst* table, Value* i);
  std::array<uint64_t, 2> tileSplits(const kir::Contraction& c);
  std::optional<int64_t> constantIndex(ExprId e, ExprId var, int64_t value);
  void packBlockB(const kir::Contraction& c, Value* bBatch, Value* n0, Value* n1, Value* kc0, Value* kLen,
                  Value* buffer);
  void copyPanelRow(const kir::Contraction& c, Value* src, Value* dst, Value* cols);
  void copyPartialPanelRow(const kir::Contraction& c, Value* src, Value* dst, Value* cols);
  std::pair<Value*, Value*> panelOperand(const kir::Contraction& c, Value* bBatch, Value* panel, Value* j0, Value* cols,
                                         Value* kc0, Value* kLen, Value* buffer);
  void copyTile(Value* src, int64_t srcStride, Value* dst, int64_t dstStride, Value* rows, Value* cols);

  // --- amx.cpp: the AMX tile configuration, and the bf16 pack of A (both bf16 units)
  void loadTileConfig();
  void packBf16A(const kir::Contraction& c, Value* aBatch, Value* m0, Value* m1, Value* packed);
  void emitPipelinedBf16Tile(const kir::Contraction& c, const ContractionPlan& plan, const ContractionBlock& block,
                             Value* i0, Value* j0, Value* aTile, Value* bPanel, Value* partialTile);
  void emitPendingEpilogueRows(const kir::Contraction& c, const ContractionPlan& plan, Value* r0, Value* r1);
  void flushPendingEpilogue(const kir::Contraction& c, const ContractionPlan& plan);

  // --- attention.cpp: flash attention
  Status checkAttention(const kir::Attention& a) const;
  Value* loadF32(Value* base, Value* index);
  void storeF32(Value* v, Value* base, Value* index);
  Value* f32c(double v);
  Value* expOfNonPositive(Value* x);
  std::pair<Value*, Value*> panelOrCopy(Value* b, Value* stride, Value* c0, Value* kLen, Value* cols, int64_t nr,
                                        Value* edge);
  void rowTiles(const std::vector<llvm::Function*>& micro, int64_t mr, Value* rows, Value* aBase, int64_t aStride,
                Value* panel, Value* ldb, Value* kLen, Value* dst, int64_t ldDst, bool accumulate);
  void emitAttention(const kir::Attention& a);

  // --- reductions.cpp
  Value* identity(ReduceOp op, DType t);
  void foldSplitNaN(ReduceOp op, llvm::AllocaInst* acc, llvm::AllocaInst* sawNaN, Value* v);
  Value* splitNaNResult(llvm::AllocaInst* acc, llvm::AllocaInst* sawNaN, const std::string& name);
  Value* combine(ReduceOp op, DType t, Value* acc, Value* v);
  Value* emitReduction(const kir::Reduction& r, size_t number);

  // --- expressions.cpp: stores, expression values and their memo scopes, expression queries
  void emitStore(const kir::Store& s);
  void bind(ExprId var, Value* v);
  Value* value(ExprId e);
  // The value memoised under `key` in the innermost scope that has it, else make() memoised in the
  // current scope (a loop body's values are forgotten when the loop ends).
  template <class Make>
  Value* memoized(ExprId key, Make make);
  Value* compute(ExprId e);
  bool validExpr(ExprId e) const;
  bool readsMemory(ExprId e) const;
  std::vector<ExprId> loadsOutsideReductions(ExprId root, llvm::function_ref<bool(const kir::ExprNode&)> keep,
                                             size_t limit = SIZE_MAX) const;

  // Integer helpers used throughout.
  Value* smin(Value* a, Value* b) { return b_.CreateSelect(b_.CreateICmpSLT(a, b), a, b); }
  Value* smax(Value* a, Value* b) { return b_.CreateSelect(b_.CreateICmpSGT(a, b), a, b); }
  Value* i64(int64_t v) { return b_.getInt64(v); }

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
  struct VectorMemo {
    std::unordered_map<ExprId, bool> depends, ok;
    std::unordered_map<ExprId, int64_t> loadStride;
    std::map<ExprId, ExprId> foldedClamps;  // the piece's min/max facts, as affineForm substitutions
    bool strided = false;                   // some load steps by 2 or more
    // exp, erf and tanh as vectors too (a GEMM's epilogue: the GELU of a transformer's FFN), by the
    // libmvec variant the scalar path calls, so each element's result is the same either way.
    bool mathCalls = false;
  } vectorMemo_;
  std::vector<Value*> vectorReduced_;
  int windowLanes_ = 0;                               // the vector width of the strided window being emitted
  std::vector<kir::LoopPiece> pieces_;                // partition of the innermost outer loop
  std::optional<kir::RowInterior> rowInterior_;       // the interior box of the other outer variables
  const std::map<ExprId, bool>* rowFacts_ = nullptr;  // the row version being emitted: its facts
  const std::map<ExprId, bool>* facts_ = nullptr;     // the piece being emitted: its folded tests
  std::string error_;
};

template <class Make>
Value* KernelLowering::memoized(ExprId key, Make make) {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = it->find(key);
    if (found != it->end()) return found->second;
  }
  Value* v = make();
  if (v) scopes_.back()[key] = v;
  return v;
}

}  // namespace nnc::codegen::llvmcpu::detail
