// The GEMM driver of a kir::Contraction: packed, register-tiled, the kernel's stores as each tile's epilogue.
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "targets/cpu/codegen/kernel_lowering_context.h"
#include "targets/cpu/codegen/microkernel.h"

namespace nnc::codegen::llvmcpu::detail {

namespace {

// A plain GEMM's A with rows of at most this many floats is read in place (planContraction); so
// are rows up to kMaxInPlaceFewPanelsRowLength long when the GEMM has at most kMaxInPlacePanels
// column panels to amortise a pack over.
constexpr int64_t kMaxInPlaceRowLength = 384, kMaxInPlaceFewPanelsRowLength = 1024, kMaxInPlacePanels = 10;

}  // namespace

Status KernelLowering::checkContraction(const kir::Contraction& c) const {
  const size_t rank = k_.outer.extents.size();
  const bool ok =
      c.lanes > 0 && c.nr % c.lanes == 0 && c.mr >= 1 && c.mr <= 32 && c.nr <= 256 && c.kc >= 1 && c.mc % c.mr == 0 &&
      c.nc % c.nr == 0 && c.m >= 1 && c.n >= 1 && c.k >= 1 && rank >= 2 &&
      k_.outer.extents[rank - (c.transposed ? 1 : 2)] == c.m &&
      k_.outer.extents[rank - (c.transposed ? 2 : 1)] == c.n && k_.reductions.size() == 1 &&
      k_.reductions[0].loop.vars.size() == 1 && k_.stores.size() == 1 &&
      (!c.transposed || c.operands == DType::BF16 || (!c.partialsInOutput && c.kc >= c.k)) &&
      ((c.aRowIndex == kir::kNoExpr && c.aColIndex == kir::kNoExpr) ||
       (!c.aPacked && validExpr(c.aRowIndex) && validExpr(c.aColIndex))) &&
      !k_.stores[0].perInner && c.aSlot >= 0 && static_cast<size_t>(c.aSlot) < k_.params.size() && c.bSlot >= 0 &&
      static_cast<size_t>(c.bSlot) < k_.params.size() && k_.params[c.aSlot].dtype == DType::F32 &&
      k_.params[c.bSlot].dtype == (c.operands == DType::BF16 ? DType::BF16 : DType::F32) &&
      (c.operands == DType::F32 || (c.operands == DType::BF16 && opts_.bf16Unit != kir::Bf16Unit::None && !c.aPacked &&
                                    c.bLayout == kir::Contraction::BLayout::Packed && c.mr == 32 && c.nr == 32 &&
                                    c.lanes == 16 && (c.kc >= c.k || c.kc % kir::kBf16TileK == 0))) &&
      (!c.partialsInOutput || k_.params[k_.stores[0].slot].dtype == DType::F32) &&
      (c.partialsInOutput || c.kc >= c.k) && (c.bLayout != kir::Contraction::BLayout::Direct || c.bColStride == 1);
  return ok ? Status::ok() : Status::error("inconsistent contraction: " + c.str());
}

// The outer variables indexing the GEMM's rows and columns (swapped when it is transposed).
ExprId KernelLowering::rowVar(const kir::Contraction& c) const {
  return k_.outer.vars[k_.outer.vars.size() - (c.transposed ? 1 : 2)];
}
ExprId KernelLowering::colVar(const kir::Contraction& c) const {
  return k_.outer.vars[k_.outer.vars.size() - (c.transposed ? 2 : 1)];
}

// For each task (batch, row block, column block), for each K block: A's row block packed (unless it
// is read in place), B's block packed (when it fits the stack), then the block's register tiles.
void KernelLowering::emitContraction(const kir::Contraction& c) {
  llvm::Type* f32 = b_.getFloatTy();
  using BLayout = kir::Contraction::BLayout;
  const kir::Store& store = k_.stores[0];
  const size_t rank = k_.outer.extents.size();
  const size_t batchRank = rank - 2;
  ContractionPlan plan = planContraction(c);
  emitContractionMicrokernels(c, plan);

  // Which (batch, row block) the packed A holds (batch * m + m0); -1: none yet.
  llvm::AllocaInst* packedKey = entryAlloca(b_.getInt64Ty(), "apack.key");
  b_.CreateStore(i64(-1), packedKey);
  const int64_t blocksPerBatch = c.mBlocks() * c.nBlocks();
  Value* end = smin(fn_->getArg(2), i64(c.numTasks()));  // never past the last task, whatever the caller says
  const bool bf16 = c.operands == DType::BF16;
  // With one K block every task reads the same column offsets: filled once here instead of per
  // task (a 7 x 7 conv's task is one tile against 4,608 columns: filled per task, the table was a
  // large share of it). So with bf16, whose pack reads all of K at once.
  separable_.columnsOnce = c.aRowIndex != kir::kNoExpr && (plan.kBlocks == 1 || bf16);
  if (separable_.columnsOnce) fillColumnOffsets(c, i64(0), i64(c.k));
  Value* base = bases_[store.slot];
  plan.vectorEpilogue = prepareVectorEpilogue(c, plan);
  const bool amx = bf16 && opts_.bf16Unit == kir::Bf16Unit::AmxTiles;
  if (amx) loadTileConfig();
  // (Where a task has few tiles, the epilogue of its last, flushed unhidden, is a large share: the
  // batch-64 MLP's 64 x 784 x 512, 4 tiles a task, ran slower pipelined.)
  constexpr int64_t kMinPipelinedTiles = 8;
  plan.pipelined = amx && !c.transposed && plan.vectorEpilogue && (c.mc / c.mr) * (c.nc / c.nr) >= kMinPipelinedTiles;
  if (plan.pipelined) {
    PendingEpilogue& pending = plan.pending;
    pending.due = entryAlloca(b_.getInt1Ty(), "pending.due");
    pending.i0 = entryAlloca(b_.getInt64Ty(), "pending.i0");
    pending.j0 = entryAlloca(b_.getInt64Ty(), "pending.j0");
    pending.sums = entryAlloca(b_.getPtrTy(), "pending.sums");
    pending.parity = entryAlloca(b_.getInt64Ty(), "pending.parity");
    pending.otherTile = alignedAlloca(c.mr * c.nr, "tile.other");
    b_.CreateStore(b_.getFalse(), pending.due);
    b_.CreateStore(i64(0), pending.parity);
  }
  // A bf16 B holds kPadded rows a panel, two bf16 a float.
  const int64_t packedPanelFloats = bf16 ? c.kPadded() * c.nr / 2 : c.k * c.nr;
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
            c.aPacked
                ? b_.CreateInBoundsGEP(f32, bases_[c.aSlot],
                                       b_.CreateMul(c.aBatchStride == 0 ? i64(0) : batch, i64(c.mTiles() * c.k * c.mr)))
                : b_.CreateInBoundsGEP(f32, bases_[c.aSlot],
                                       b_.CreateAdd(i64(c.aOffset), b_.CreateMul(batch, i64(c.aBatchStride))));
        Value* bBatch;
        if (c.bLayout == BLayout::Packed) {
          Value* packedBatch = c.bBatchStride == 0 ? i64(0) : batch;
          bBatch = b_.CreateInBoundsGEP(f32, bases_[c.bSlot],
                                        b_.CreateMul(packedBatch, i64(c.nPanels() * packedPanelFloats)));
        } else {
          bBatch = b_.CreateInBoundsGEP(f32, bases_[c.bSlot],
                                        b_.CreateAdd(i64(c.bOffset), b_.CreateMul(batch, i64(c.bBatchStride))));
        }
        Value* cBatch =
            c.partialsInOutput ? b_.CreateInBoundsGEP(f32, base, b_.CreateMul(batch, i64(c.m * c.n))) : nullptr;
        emitLoop(
            i64(0), i64(plan.kBlocks),
            [&](Value* kb) {
              Value* kc0 = b_.CreateMul(kb, i64(c.kc), "kc0");
              Value* kLen = smin(i64(c.kc), b_.CreateSub(i64(c.k), kc0));
              Value* first = b_.CreateICmpEQ(kb, i64(0));
              Value* last = b_.CreateICmpEQ(kb, i64(plan.kBlocks - 1));
              const bool packAtRunTime = !c.aPacked && !plan.aInPlace;  // (else A is read where it is)
              if (packAtRunTime && (plan.kBlocks == 1 || bf16)) {
                // One K block: consecutive tasks of a row block (its column blocks) share the packed A.
                // So with bf16, packed for all of K (each K block reads its slice: A's tiles are K step
                // by K step).
                Value* key = b_.CreateAdd(b_.CreateMul(batch, i64(c.m)), m0);
                emitIf(b_.CreateICmpNE(b_.CreateLoad(b_.getInt64Ty(), packedKey), key), [&] {
                  if (bf16)
                    packBf16A(c, aBatch, m0, m1, plan.aPacked);
                  else
                    packA(c, aBatch, m0, m1, kc0, kLen, plan.aPacked);
                  b_.CreateStore(key, packedKey);
                });
              } else if (packAtRunTime) {
                packA(c, aBatch, m0, m1, kc0, kLen, plan.aPacked);
              }
              if (plan.blockB) packBlockB(c, bBatch, n0, n1, kc0, kLen, plan.panelBuf);
              emitBlockTiles(c, plan, {m0, m1, n0, n1, aBatch, bBatch, cBatch, kc0, kLen, first, last});
            },
            "kblock");
        if (plan.pipelined) flushPendingEpilogue(c, plan);
      },
      "task");
  // Back to the initial tile state: a thread that has released its tiles saves and restores none.
  if (amx) b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::x86_tilerelease));
}

// How far ahead of B's rows a microkernel hints weights streamed from L3 into L2 (farPrefetch).
constexpr int64_t kFarPrefetchBytes = 8192;

// The decisions that depend only on the contraction's shape and the target, and the per-call
// scratch arrays they call for.
KernelLowering::ContractionPlan KernelLowering::planContraction(const kir::Contraction& c) {
  using BLayout = kir::Contraction::BLayout;
  ContractionPlan plan;
  // Per-call scratch: the accumulator tile and, unless B is packed, one kc x nr panel of B.
  // A transposed GEMM's tile is stored transposed by the microkernel (column j at j * lanes) when
  // its rows fit one vector, so the epilogue walks the output's contiguous axis in vectors.
  plan.transposedTile = c.transposed && c.mr <= c.lanes;
  plan.tile = alignedAlloca(std::max(c.mr, static_cast<int64_t>(c.lanes)) * c.nr, "tile");
  // A run-time B is packed a whole kc x nc block at a time when that fits the stack: its rows are
  // then read front to back (which the hardware prefetchers follow, where a panel's short row
  // segments a page apart miss in turn when B is not in cache); else panel by panel.
  const int64_t kcEffective = std::min(c.kc, c.k);
  plan.blockB = c.bLayout != BLayout::Packed && kcEffective * c.nc * 4 <= (256 << 10);
  plan.rowTilesOuter = c.rowTilesOuter && (plan.blockB || c.bLayout == BLayout::Packed);
  plan.panelBuf = c.bLayout == BLayout::Packed ? nullptr
                  : plan.blockB                ? alignedAlloca(kcEffective * c.nc, "bblock")
                                               : alignedAlloca(kcEffective * c.nr, "bpanel");
  // A's mc x kc block, packed per kc block as row tiles [tile][p][mr]: the microkernel's broadcasts
  // then read one contiguous stream (in place, rows a power-of-two apart alias in L1's sets).
  // A row-major A with short rows is read in place instead: packing copies each element once per
  // row block (a scalar load and store) for as few FMAs as one or two panels give it (a 1x1
  // conv to 16 channels), and a row tile of up to 384 floats per row (14 rows: 21 KiB, half of
  // L1), rows as close, stays in L1 for the whole block either way (rows 4 KiB apart would share
  // L1's sets: those are packed; 384 floats rather than 256 for MobileNetV2's 320 -> 1280 at 7 x 7).
  // Longer rows too where few column panels share the pack: a packed element costs about a
  // cycle, and feeds nr / 32 cycles of FMAs per panel (AVX-512), so with 2 or 3 panels the pack
  // was a large part of the kernel (MobileNetV2's projections 384 -> 64 and 576 -> 96 at
  // 14 x 14); where many panels share it (BERT's 768 -> 3072), packed rows stay (14 streams a row
  // apart would each need L1's lines for the whole sweep).
  // So is a transposed A whose rows are adjacent (a channel-first activation read as pixels x
  // channels): a tile's mr rows at each k are consecutive floats, as a conv's patches read in place.
  const bool fewPanels = c.nPanels() <= kMaxInPlacePanels && c.k <= kMaxInPlaceFewPanelsRowLength &&
                         c.aRowStride <= kMaxInPlaceFewPanelsRowLength && c.aRowStride % 1024 != 0;
  const bool shortRows = c.aColStride == 1 && c.aRowStride >= 1 &&
                         ((c.k <= kMaxInPlaceRowLength && c.aRowStride <= kMaxInPlaceRowLength) || fewPanels);
  const bool adjacentRows = c.aRowStride == 1 && c.aColStride >= 1;
  if (c.operands == DType::BF16) {  // A is always packed, a row block's whole K in bf16 (packBf16A)
    // Partial sums of a task's block, tile after tile ([row tile][panel][mr][nr]): kept in the output,
    // a tile's 32 rows would lie a multiple of 4 KiB apart there (n = 1024, 3072: every row in
    // one L1 set) and its loads and stores conflict. (A bf16 tile is stored whole, all 32 rows:
    // never to the output in place.)
    if (c.partialsInOutput) plan.partials = alignedAlloca(c.mc * c.nc, "partials.bf16");
    plan.aPacked = alignedAlloca(c.mc * c.kPadded() / 2, "apack.bf16");
    plan.kBlocks = (c.k + c.kc - 1) / c.kc;
    // The output's lines (and a residual's) hinted before the last K block, as for f32 below: a
    // transposed tile's 32 columns land in channel planes far apart (ResNet-50's 1 x 1 convs to 256
    // channels at 56 x 56 waited on them with K = 64).
    plan.prefetchTiles = c.transposed || (c.imageWidth == 0 && c.batch * c.m * c.n * 4 > opts_.l2Bytes / 2);
    // Weights larger than L2 read by one or two row tiles stream from L3 at the tile loads' pace,
    // latency-bound: hinted 8 KiB ahead into L2 on AMX, as for f32 below (with more row tiles, which
    // read them from L2, the hints measured no gain).
    plan.farPrefetch = opts_.bf16Unit == kir::Bf16Unit::AmxTiles && c.mTiles() <= 2 &&
                               c.nPanels() * c.kPadded() * c.nr * 2 > opts_.l2Bytes
                           ? kFarPrefetchBytes
                           : 0;
    return plan;
  }
  plan.aInPlace = !c.aPacked && c.aRowIndex == kir::kNoExpr && (shortRows || adjacentRows);
  plan.aPacked = c.aPacked || plan.aInPlace ? nullptr : alignedAlloca(c.mc * std::min(c.kc, c.k), "apack");

  // Weights too big to stay in L2 from one run to the next, in one K block: each column block
  // streams from L3 or DRAM on the first row tile that reads it, and that tile waited on memory
  // while the others ran from L2 (ResNet-50's 7 x 7 layers, 9.4 MB each). So every (row tile,
  // panel) hints its share of the next column block's same panel into L2 as it goes: the block
  // arrives while this one is computed.
  plan.kBlocks = (c.k + c.kc - 1) / c.kc;
  // Packed weights, or an output, over half of L2 do not stay there between runs (or kernels).
  const int64_t l2Resident = opts_.l2Bytes / 2;
  // (Not with one row tile: it streams each block once at the FMAs' pace, and hints as fast
  // for a block megabytes ahead only doubled the traffic: ResNet-18 at 64 x 64, 2 x 2 pixels
  // against 9.4 MB of weights.)
  plan.prefetchNextBlock = c.bLayout == BLayout::Packed && plan.kBlocks == 1 && c.nBlocks() > 1 && c.mTiles() >= 2 &&
                           c.nPanels() * c.k * c.nr * 4 > l2Resident;
  plan.nextStride = plan.prefetchNextBlock ? std::max<int64_t>(4, (c.nr * 4 + c.mTiles() - 1) / c.mTiles()) : 0;
  // An as-is tile's output misses only when the output outgrows L2 (and is not a row pipeline's
  // window, which stays in cache): 1 x 1 convs over 56 x 56 images, 3 MB; a transposed tile's
  // always lands in channel planes far apart.
  plan.prefetchTiles = c.transposed || (c.imageWidth == 0 && c.batch * c.m * c.n * 4 > l2Resident);
  // Packed weights larger than L2 read by one or two row tiles and not hinted a block ahead: each
  // panel streams from memory once at ~28 FMA-cycles per 128-byte row or less, faster than one
  // core's L1 hints alone keep lines in flight; a second hint 8 KiB ahead into L2 adds as many
  // (ResNet-18 at 64 x 64, whose last layers are 2 x 2 and 4 x 4 pixels against 2.4-9.4 MB of
  // weights; bench/NOTES.md). Not for weights that fit L2 (the batch-1 MLP's 1.6 MB layer stays
  // there between runs, and the hint slowed it), nor where many row tiles reuse a panel (the hint
  // only costs load slots there).
  plan.farPrefetch = c.bLayout == BLayout::Packed && !plan.prefetchNextBlock && c.mTiles() <= 2 &&
                             c.nPanels() * c.k * c.nr * 4 > opts_.l2Bytes
                         ? kFarPrefetchBytes
                         : 0;
  return plan;
}

// The microkernels the tiles call: one per row count some tile has, and for a separable A its
// tables and the microkernels reading whole row tiles in place.
void KernelLowering::emitContractionMicrokernels(const kir::Contraction& c, ContractionPlan& plan) {
  // Only the row counts some tile has get a microkernel (a switch case, each inlined: 14 of them
  // were most of a kernel's code and compile time): whole tiles and the last of each row block
  // (rows = min(mr, m1 - i0) below).
  const std::vector<bool> rowCountUsed = kir::tileRowCounts(c.m, c.mc, c.mr);
  if (c.operands == DType::BF16) {    // one microkernel for every row count: A's rows past m are zeros
    if (c.aRowIndex != kir::kNoExpr)  // a separable A's C(p), all of K (packBf16A)
      separable_.colOffset =
          entryAlloca(llvm::ArrayType::get(b_.getInt64Ty(), static_cast<uint64_t>(c.k)), "acols.bf16");
    // (VDPBF16PS: the 8-row strips that hold a tile's rows.)
    constexpr int64_t kStripRows = 8;
    for (int64_t rows = 1; rows <= c.mr; ++rows)
      plan.micro.push_back(
          !rowCountUsed[static_cast<size_t>(rows)] ? nullptr
          : opts_.bf16Unit == kir::Bf16Unit::AmxTiles
              ? emitAmxMicrokernel(m_, k_.name, plan.farPrefetch, opts_.cpu, opts_.features)
              : emitBf16DotMicrokernel(m_, k_.name, (rows + kStripRows - 1) / kStripRows, opts_.cpu, opts_.features));
    return;
  }
  for (int64_t rows = 1; rows <= c.mr; ++rows) {
    if (!rowCountUsed[static_cast<size_t>(rows)]) {
      plan.micro.push_back(nullptr);  // no tile has this many rows: no case in callByIndex
      continue;
    }
    MicrokernelShape shape =
        plan.aInPlace
            ? MicrokernelShape{c.lanes,        rows, c.nr, c.aRowStride, c.aColStride, false, 0, plan.transposedTile,
                               plan.nextStride}
            : MicrokernelShape{c.lanes, rows, c.nr, 1, c.mr, false, 0, plan.transposedTile, plan.nextStride};
    shape.farPrefetchBytes = plan.farPrefetch;
    plan.micro.push_back(emitMicrokernel(m_, k_.name, shape, opts_.cpu, opts_.features));
  }
  if (c.aRowIndex == kir::kNoExpr) return;
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
    MicrokernelShape shape{c.lanes, c.mr, c.nr, step, 0, /*indirectA=*/true, 0, plan.transposedTile, plan.nextStride};
    shape.farPrefetchBytes = plan.farPrefetch;
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

// Whether the epilogue can run as vectors along the tile's columns (emitWholeTileEpilogue): an
// as-is tile, one f32 store at unit stride per column of a value the vector emitter computes.
// Leaves the vector emitter's state set for the tiles' epilogues.
bool KernelLowering::prepareVectorEpilogue(const kir::Contraction& c, const ContractionPlan& plan) {
  const kir::Store& store = k_.stores[0];
  vectorMemo_ = VectorMemo();
  vectorMemo_.mathCalls = true;
  facts_ = nullptr;
  windowLanes_ = c.lanes;
  for (size_t e = 0; e < k_.exprs.size(); ++e)  // the sum is the tile's vector, never its body
    if (k_.exprs[e].op == ExprOp::ReduceValue) {
      vectorMemo_.depends[static_cast<ExprId>(e)] = true;
      vectorMemo_.ok[static_cast<ExprId>(e)] = true;
    }
  // (The innermost outer variable, the vectors' lane axis, is the tile's column for an as-is
  // GEMM and its row for a transposed one: the output's contiguous axis either way.)
  return (!c.transposed || plan.transposedTile || c.operands == DType::BF16) &&
         k_.params[store.slot].dtype == DType::F32 && k_.expr(store.value).dtype == DType::F32 && !store.perInner &&
         innerStride(store.index) == std::optional<int64_t>(1) && vectorizable(store.value);
}

// The block's register tiles, in one of two orders, each against its panel of B.
void KernelLowering::emitBlockTiles(const kir::Contraction& c, const ContractionPlan& plan,
                                    const ContractionBlock& block) {
  llvm::Type* f32 = b_.getFloatTy();
  Value* panelBegin = b_.CreateUDiv(block.n0, i64(c.nr));
  Value* panelEnd = b_.CreateUDiv(b_.CreateAdd(block.n1, i64(c.nr - 1)), i64(c.nr));
  Value* tiles = b_.CreateUDiv(b_.CreateAdd(b_.CreateSub(block.m1, block.m0), i64(c.mr - 1)), i64(c.mr));
  // B's panel: in the packed block or the packed weights (no side effects), else
  // prepared here (copied for Copy, edge panels of Direct).
  auto panelOf = [&](Value* panel) -> std::pair<Value*, Value*> {
    Value* j0 = b_.CreateMul(panel, i64(c.nr));
    Value* cols = smin(i64(c.nr), b_.CreateSub(block.n1, j0));
    if (!plan.blockB) return panelOperand(c, block.bBatch, panel, j0, cols, block.kc0, block.kLen, plan.panelBuf);
    Value* offset = b_.CreateMul(b_.CreateSub(panel, panelBegin), b_.CreateMul(block.kLen, i64(c.nr)));
    return {b_.CreateInBoundsGEP(f32, plan.panelBuf, offset), i64(c.nr)};
  };
  if (plan.rowTilesOuter) {
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
                emitRegisterTile(c, plan, block, panel, t, operand.first, operand.second);
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
              i64(0), tiles,
              [&](Value* t) { emitRegisterTile(c, plan, block, panel, t, operand.first, operand.second); }, "tile");
        },
        "panel");
  }
}

// One register tile: row tile t against panel `panel` (bPanel, its rows ldb apart), then its
// epilogue.
void KernelLowering::emitRegisterTile(const kir::Contraction& c, const ContractionPlan& plan,
                                      const ContractionBlock& block, Value* panel, Value* t, Value* bPanel,
                                      Value* ldb) {
  llvm::Type* f32 = b_.getFloatTy();
  Value* j0 = b_.CreateMul(panel, i64(c.nr), "j0");
  Value* cols = smin(i64(c.nr), b_.CreateSub(block.n1, j0));
  Value* i0 = b_.CreateAdd(block.m0, b_.CreateMul(t, i64(c.mr)), "i0");
  Value* rows = smin(i64(c.mr), b_.CreateSub(block.m1, i0));
  // Partial sums of earlier K blocks live in the output: a whole tile is read
  // and written there in place; an edge tile goes through the scratch tile.
  // The last K block leaves the tile in scratch for the epilogue.
  Value* cTile = nullptr;
  Value* whole = b_.getFalse();
  int64_t ldC = c.n;    // floats between cTile's rows
  if (plan.partials) {  // a bf16 block's own partial sums, tile by tile: every tile whole
    Value* inBlock =
        b_.CreateAdd(b_.CreateMul(t, i64(c.nc / c.nr)), b_.CreateSub(panel, b_.CreateUDiv(block.n0, i64(c.nr))));
    cTile = b_.CreateInBoundsGEP(f32, plan.partials, b_.CreateMul(inBlock, i64(c.mr * c.nr)));
    ldC = c.nr;
    whole = b_.getTrue();
  } else if (block.cBatch) {
    cTile = b_.CreateInBoundsGEP(f32, block.cBatch, b_.CreateAdd(b_.CreateMul(i0, i64(c.n)), j0));
    whole = b_.CreateICmpEQ(cols, i64(c.nr));
  }
  // Row tile t of the block: packed here per K block, or at compile time
  // (tile i0 / mr of all of K, from column kc0 on).
  Value* aTile =
      c.operands == DType::BF16 ? b_.CreateInBoundsGEP(b_.getBFloatTy(), plan.aPacked,
                                                       b_.CreateAdd(b_.CreateMul(t, i64(c.mr * c.kPadded())),
                                                                    b_.CreateMul(block.kc0, i64(c.mr))))
      : c.aPacked
          ? b_.CreateInBoundsGEP(
                f32, block.aBatch,
                b_.CreateMul(b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(i0, i64(c.mr)), i64(c.k)), block.kc0), i64(c.mr)))
      : plan.aInPlace ? b_.CreateInBoundsGEP(f32, block.aBatch,
                                             b_.CreateAdd(b_.CreateMul(i0, i64(c.aRowStride)),
                                                          b_.CreateMul(block.kc0, i64(c.aColStride))))
                      : b_.CreateInBoundsGEP(f32, plan.aPacked, b_.CreateMul(b_.CreateMul(t, block.kLen), i64(c.mr)));
  auto viaMicrokernel = [&] {
    if (plan.prefetchTiles && plan.partials)
      emitIf(block.last, [&] { prefetchTile(k_.stores[0], i0, j0, rows, cols); });
    else if (plan.prefetchTiles)
      prefetchTile(k_.stores[0], i0, j0, rows, cols);
    if (cTile) {
      emitIf(b_.CreateAnd(b_.CreateNot(block.first), b_.CreateNot(whole)),
             [&] { copyTile(cTile, ldC, plan.tile, c.nr, rows, cols); });
    }
    Value* src = cTile ? b_.CreateSelect(whole, cTile, plan.tile) : plan.tile;
    Value* ldSrc = b_.CreateSelect(whole, i64(ldC), i64(c.nr));
    Value* toOutput = b_.CreateAnd(whole, b_.CreateNot(block.last));
    Value* dst = cTile ? b_.CreateSelect(toOutput, cTile, plan.tile) : plan.tile;
    Value* ldDst = plan.transposedTile ? i64(c.lanes) : b_.CreateSelect(toOutput, i64(ldC), i64(c.nr));
    // The same panel of the next column block (this one's at the last), from this row
    // tile's share of it on.
    Value* next = bPanel;
    if (plan.prefetchNextBlock) {
      Value* nextPanel = smin(b_.CreateAdd(panel, i64(c.nc / c.nr)), i64(c.nPanels() - 1));
      Value* share = b_.CreateMul(b_.CreateUDiv(i0, i64(c.mr)), i64(plan.nextStride * c.k));
      next =
          b_.CreateGEP(b_.getInt8Ty(), block.bBatch, b_.CreateAdd(b_.CreateMul(nextPanel, i64(c.k * c.nr * 4)), share));
    }
    Value* noColumns = llvm::ConstantPointerNull::get(b_.getInt64Ty()->getPointerTo());
    Value* noSecond = i64(0);
    std::vector<Value*> args = {aTile, bPanel, ldb,       block.kLen, src, ldSrc, b_.CreateNot(block.first),
                                dst,   ldDst,  noColumns, noSecond,   next};
    callTileMicrokernel(c, plan, block.aBatch, t, rows, args);
    const TileBounds bounds{i0, j0, rows, cols};
    if (cTile) {
      emitIfElse(
          block.last, [&] { emitTileEpilogue(c, plan, bounds); },
          [&] { emitIf(b_.CreateNot(whole), [&] { copyTile(plan.tile, c.nr, cTile, ldC, rows, cols); }); });
    } else {
      emitTileEpilogue(c, plan, bounds);
    }
  };
  if (!plan.pipelined) return viaMicrokernel();
  Value* wholeTile = b_.CreateAnd(b_.CreateICmpEQ(rows, i64(c.mr)), b_.CreateICmpEQ(cols, i64(c.nr)));
  emitIfElse(
      wholeTile, [&] { emitPipelinedBf16Tile(c, plan, block, i0, j0, aTile, bPanel, plan.partials ? cTile : nullptr); },
      [&] {
        flushPendingEpilogue(c, plan);
        viaMicrokernel();
      });
}

// The microkernel call of row tile t (`rows` rows): by its row count, or for a separable A, a tile
// whose rows are 1 or 2 elements apart read in place, in one run or two.
void KernelLowering::callTileMicrokernel(const kir::Contraction& c, const ContractionPlan& plan, Value* aBatch,
                                         Value* t, Value* rows, const std::vector<Value*>& args) {
  if (c.aRowIndex == kir::kNoExpr || c.operands == DType::BF16) {  // (bf16 packs a separable A too)
    callByIndex(plan.micro, rows, args);
    return;
  }
  llvm::Type* f32 = b_.getFloatTy();
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
          two[10] =
              b_.CreateSub(b_.CreateLoad(b_.getInt64Ty(), tableAt(separable_.rowOffset, b_.CreateAdd(firstRow, split))),
                           firstOffset);
          callByIndex(separable_.split[s - 1], split, two);  // (a split no tile has: packed)
        });
  };
  emitIfElse(
      b_.CreateICmpEQ(step, i64(1)), [&] { inPlace(1); },
      [&] {
        emitIfElse(
            b_.CreateICmpEQ(step, i64(2)), [&] { inPlace(2); }, [&] { callByIndex(plan.micro, rows, args); });
      });
}

// switch (index) { case i: fns[i - 1](args); }: fns[index - 1](args) for index in 1..fns.size() (a
// null entry: never called, no case); nothing for any other index. The row-count variants of a
// microkernel, or the split-row ones.
void KernelLowering::callByIndex(const std::vector<llvm::Function*>& fns, Value* index,
                                 const std::vector<Value*>& args) {
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

}  // namespace nnc::codegen::llvmcpu::detail
