// The microkernel loop, per k: nr / lanes vector loads of B, then for each row one broadcast of A and
// nr / lanes FMAs into that row's accumulators. rows x (nr / lanes) independent accumulators hide
// the FMA latency (AVX2: 12 chains for a 4-cycle latency at 2 FMAs per cycle), and the loads (B's
// vectors and A's broadcasts) stay below the FMAs' count, so the loop is FMA-bound — once B's lines
// arrive in time: a software prefetch per line of B's row, 2 KiB ahead.
#include "targets/cpu/codegen/microkernel.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <vector>

namespace nnc::codegen::llvmcpu {

namespace {
constexpr int64_t kPrefetchBytesAhead = 2048;
// A conv's patches read in place (indirectA) are hinted this many columns ahead: ~450 cycles of a
// 14 x 32 tile's FMAs, more than a line's trip from L3 (see the loop).
constexpr int64_t kInPlaceAColumnsAhead = 32;
}  // namespace

std::string microkernelName(const MicrokernelShape& s) {
  std::string name = "micro.l" + std::to_string(s.lanes) + ".r" + std::to_string(s.rows) + ".n" + std::to_string(s.nr) +
                     ".a" + std::to_string(s.aRowStride) + "x" + std::to_string(s.aColStride);
  if (s.indirectA) name += ".ind" + std::to_string(s.splitRow);
  if (s.transposedStore) name += ".t";
  if (s.nextStride) name += ".next" + std::to_string(s.nextStride);
  if (s.farPrefetchBytes) name += ".far" + std::to_string(s.farPrefetchBytes);
  return name;
}

// Butterflies: at distance d the off-diagonal d x d blocks of each 2d x 2d block swap, rows r and
// r + d exchanging their lanes with bit d set.
void transposeInRegisters(llvm::IRBuilderBase& b, std::vector<llvm::Value*>& rows) {
  const int L = static_cast<int>(rows.size());
  for (int d = L / 2; d >= 1; d /= 2) {
    std::vector<int> low(static_cast<size_t>(L)), high(static_cast<size_t>(L));
    for (int k = 0; k < L; ++k) {
      low[static_cast<size_t>(k)] = (k & d) == 0 ? k : L + k - d;
      high[static_cast<size_t>(k)] = (k & d) == 0 ? k + d : L + k;
    }
    for (int r = 0; r < L; ++r) {
      if (r & d) continue;
      llvm::Value* a = rows[static_cast<size_t>(r)];
      llvm::Value* c = rows[static_cast<size_t>(r + d)];
      rows[static_cast<size_t>(r)] = b.CreateShuffleVector(a, c, low);
      rows[static_cast<size_t>(r + d)] = b.CreateShuffleVector(a, c, high);
    }
  }
}

std::vector<llvm::Value*> startingSums(llvm::IRBuilderBase& b, llvm::Value* accumulate, llvm::Value* src,
                                       llvm::Value* ldSrc, int64_t rows, int64_t vectors, llvm::FixedVectorType* vty) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* from = b.GetInsertBlock();
  // Partial sums are read only when accumulating (src holds nothing otherwise).
  auto* partials = llvm::BasicBlock::Create(b.getContext(), "partials", fn);
  auto* start = llvm::BasicBlock::Create(b.getContext(), "start", fn);
  b.CreateCondBr(accumulate, partials, start);
  b.SetInsertPoint(partials);
  std::vector<llvm::Value*> loaded;
  for (int64_t i = 0; i < rows; ++i) {
    llvm::Value* row = b.CreateInBoundsGEP(b.getFloatTy(), src, b.CreateMul(b.getInt64(i), ldSrc));
    for (int64_t v = 0; v < vectors; ++v)
      loaded.push_back(b.CreateAlignedLoad(
          vty, b.CreateConstInBoundsGEP1_64(b.getFloatTy(), row, v * vty->getNumElements()), llvm::Align(4)));
  }
  b.CreateBr(start);
  b.SetInsertPoint(start);
  std::vector<llvm::Value*> sums;
  for (llvm::Value* partial : loaded) {
    llvm::PHINode* phi = b.CreatePHI(vty, 2);
    phi->addIncoming(llvm::ConstantAggregateZero::get(vty), from);
    phi->addIncoming(partial, partials);
    sums.push_back(phi);
  }
  return sums;
}

llvm::Function* createMicrokernelFunction(llvm::Module& module, const std::string& name, const std::string& cpu,
                                          const std::string& features) {
  llvm::IRBuilder<> b(module.getContext());
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* ptr = b.getPtrTy();
  auto* fty = llvm::FunctionType::get(b.getVoidTy(),
                                      {ptr, ptr, i64, i64, ptr, i64, b.getInt1Ty(), ptr, i64, ptr, i64, ptr}, false);
  auto* fn = llvm::Function::Create(fty, llvm::Function::InternalLinkage, name, module);
  fn->setDoesNotThrow();
  if (!cpu.empty()) fn->addFnAttr("target-cpu", cpu);
  if (!features.empty()) fn->addFnAttr("target-features", features);
  for (unsigned i : {0u, 1u, 4u, 7u, 9u}) fn->getArg(i)->addAttr(llvm::Attribute::NoCapture);
  return fn;
}

llvm::Function* emitMicrokernel(llvm::Module& module, const std::string& owner, const MicrokernelShape& s,
                                const std::string& cpu, const std::string& features) {
  const std::string name = owner + "." + microkernelName(s);
  if (llvm::Function* existing = module.getFunction(name)) return existing;
  llvm::LLVMContext& c = module.getContext();
  llvm::IRBuilder<> b(c);
  llvm::Type* f32 = b.getFloatTy();
  llvm::Type* i64 = b.getInt64Ty();
  auto* vty = llvm::FixedVectorType::get(f32, static_cast<unsigned>(s.lanes));
  llvm::Function* fn = createMicrokernelFunction(module, name, cpu, features);
  llvm::Value* a = fn->getArg(0);
  llvm::Value* bp = fn->getArg(1);
  llvm::Value* ldb = fn->getArg(2);
  llvm::Value* kLen = fn->getArg(3);
  llvm::Value* src = fn->getArg(4);
  llvm::Value* ldSrc = fn->getArg(5);
  llvm::Value* accumulate = fn->getArg(6);
  llvm::Value* dst = fn->getArg(7);
  llvm::Value* ldDst = fn->getArg(8);
  llvm::Value* aColumns = fn->getArg(9);
  llvm::Value* aSecond = fn->getArg(10);
  llvm::Value* nextBlock = fn->getArg(11);

  const int64_t vectors = s.nr / s.lanes;
  const llvm::Align scalarAlign(4);
  auto* entry = llvm::BasicBlock::Create(c, "entry", fn);
  auto* loop = llvm::BasicBlock::Create(c, "k", fn);
  auto* exit = llvm::BasicBlock::Create(c, "done", fn);
  b.SetInsertPoint(entry);
  llvm::Value* zero = llvm::ConstantAggregateZero::get(vty);
  const std::vector<llvm::Value*> init = startingSums(b, accumulate, src, ldSrc, s.rows, vectors, vty);
  llvm::BasicBlock* start = b.GetInsertBlock();
  b.CreateBr(loop);

  b.SetInsertPoint(loop);
  llvm::PHINode* p = b.CreatePHI(i64, 2, "p");
  p->addIncoming(b.getInt64(0), start);
  std::vector<llvm::PHINode*> acc;
  for (size_t t = 0; t < init.size(); ++t) {
    acc.push_back(b.CreatePHI(vty, 2, "acc"));
    acc.back()->addIncoming(init[t], start);
  }
  llvm::Value* bRow = b.CreateInBoundsGEP(f32, bp, b.CreateMul(p, ldb));
  std::vector<llvm::Value*> bv;
  for (int64_t v = 0; v < vectors; ++v) {
    llvm::Value* ptr = b.CreateConstInBoundsGEP1_64(f32, bRow, v * s.lanes);
    bv.push_back(b.CreateAlignedLoad(vty, b.CreateBitCast(ptr, vty->getPointerTo()), scalarAlign, "b"));
  }
  // Prefetch B's row about 2 KiB ahead, one hint per cache line: the panel streams from L3 or DRAM
  // on the first row tile that reads it, and its lines are needed faster than the hardware
  // prefetchers bring them (on a Xeon: GPT-2's block 23.5 -> 15.9 ms; bench/NOTES.md). Past the
  // panel's end the hint touches nothing it may not: prefetches never fault.
  const int64_t rowBytes = s.nr * 4, aheadRows = (kPrefetchBytesAhead + rowBytes - 1) / rowBytes;
  llvm::Value* ahead = b.CreateGEP(f32, bRow, b.CreateMul(b.getInt64(aheadRows), ldb));
  llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::prefetch, {b.getPtrTy()});
  // One read hint per cache line of a B row at `row` (locality 3: all levels; 2: L2 and out).
  auto hintRow = [&](llvm::Value* row, int locality) {
    for (int64_t line = 0; line < rowBytes; line += 64)
      b.CreateCall(prefetch, {b.CreateGEP(f32, row, b.getInt64(line / 4)), /*read*/ b.getInt32(0), b.getInt32(locality),
                              /*data*/ b.getInt32(1)});
  };
  hintRow(ahead, 3);
  if (s.farPrefetchBytes > 0) {
    const int64_t farRows = (s.farPrefetchBytes + rowBytes - 1) / rowBytes;
    hintRow(b.CreateGEP(f32, bRow, b.CreateMul(b.getInt64(farRows), ldb), "prefetch.far"), 2);
  }
  if (s.nextStride > 0) {
    // (Not inbounds: `next` may lie past the weights; a prefetch never faults.)
    llvm::Value* at = b.CreateGEP(b.getInt8Ty(), nextBlock, b.CreateMul(p, b.getInt64(s.nextStride)), "prefetch.next");
    for (int64_t line = 0; line < std::min<int64_t>(2, (s.nextStride + 63) / 64); ++line)
      b.CreateCall(prefetch, {b.CreateGEP(b.getInt8Ty(), at, b.getInt64(line * 64)), /*read*/ b.getInt32(0),
                              /*L2*/ b.getInt32(2), /*data*/ b.getInt32(1)});
  }
  llvm::Function* fma = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::fma, {vty});
  // Column k of A, and row i of a column: rows from splitRow on continue at aSecond.
  auto columnAt = [&](llvm::Value* k, const char* name) -> llvm::Value* {
    return s.indirectA
               ? b.CreateInBoundsGEP(
                     f32, a, b.CreateAlignedLoad(i64, b.CreateInBoundsGEP(i64, aColumns, k), llvm::Align(8)), name)
               : b.CreateInBoundsGEP(f32, a, b.CreateMul(k, b.getInt64(s.aColStride)), name);
  };
  auto rowOf = [&](llvm::Value* column, int64_t i) {
    return s.splitRow > 0 && i >= s.splitRow
               ? b.CreateConstInBoundsGEP1_64(f32, b.CreateInBoundsGEP(f32, column, aSecond),
                                              (i - s.splitRow) * s.aRowStride)
               : b.CreateConstInBoundsGEP1_64(f32, column, i * s.aRowStride);
  };
  llvm::Value* aCol = columnAt(p, "");
  if (s.indirectA) {
    // Patches read in place come from channel planes a plane apart, a new line every few columns
    // (each kernel row of each channel), in a pattern no hardware prefetcher follows. When the VM's
    // L2 misses grow slow, the tile stalled on those broadcasts (perf: the first FMA after the
    // column's first broadcast 4% of a 3 x 3 conv's samples, 15% in slow stretches). So hint the
    // first and last row's element of column p + kInPlaceAColumnsAhead (the column itself near the
    // end): 64-channel 3 x 3 conv at 56 x 56, 1 thread, 1.75 -> 1.64 ms; see bench/NOTES.md.
    llvm::Value* q = b.CreateAdd(p, b.getInt64(kInPlaceAColumnsAhead));
    llvm::Value* ahead = columnAt(b.CreateSelect(b.CreateICmpSLT(q, kLen), q, p), "prefetch.a");
    for (llvm::Value* at : {rowOf(ahead, 0), rowOf(ahead, s.rows - 1)})
      b.CreateCall(prefetch, {at, /*read*/ b.getInt32(0), /*all levels*/ b.getInt32(3), /*data*/ b.getInt32(1)});
  }
  std::vector<llvm::Value*> next(acc.size());
  for (int64_t i = 0; i < s.rows; ++i) {
    llvm::Value* at = rowOf(aCol, i);
    llvm::Value* ai = b.CreateAlignedLoad(f32, at, scalarAlign);
    llvm::Value* splat = b.CreateVectorSplat(static_cast<unsigned>(s.lanes), ai);
    for (int64_t v = 0; v < vectors; ++v) {
      const size_t t = static_cast<size_t>(i * vectors + v);
      next[t] = b.CreateCall(fma, {splat, bv[static_cast<size_t>(v)], acc[t]});
    }
  }
  llvm::Value* pNext = b.CreateAdd(p, b.getInt64(1), "p.next", /*HasNUW=*/true, /*HasNSW=*/true);
  p->addIncoming(pNext, loop);
  for (size_t t = 0; t < acc.size(); ++t) acc[t]->addIncoming(next[t], loop);
  b.CreateCondBr(b.CreateICmpSLT(pNext, kLen), loop, exit);

  b.SetInsertPoint(exit);
  if (s.transposedStore) {
    // Per vector of columns, a lanes x lanes transpose.
    const int L = s.lanes;
    for (int64_t v = 0; v < vectors; ++v) {
      std::vector<llvm::Value*> rows(static_cast<size_t>(L), zero);
      for (int64_t i = 0; i < s.rows; ++i) rows[static_cast<size_t>(i)] = next[static_cast<size_t>(i * vectors + v)];
      transposeInRegisters(b, rows);
      for (int l = 0; l < L; ++l) {
        llvm::Value* col = b.CreateInBoundsGEP(f32, dst, b.CreateMul(b.getInt64(v * L + l), ldDst));
        b.CreateAlignedStore(rows[static_cast<size_t>(l)], b.CreateBitCast(col, vty->getPointerTo()), scalarAlign);
      }
    }
    b.CreateRetVoid();
    return fn;
  }
  for (int64_t i = 0; i < s.rows; ++i)
    for (int64_t v = 0; v < vectors; ++v) {
      llvm::Value* row = b.CreateInBoundsGEP(f32, dst, b.CreateMul(b.getInt64(i), ldDst));
      llvm::Value* ptr = b.CreateConstInBoundsGEP1_64(f32, row, v * s.lanes);
      b.CreateAlignedStore(next[static_cast<size_t>(i * vectors + v)], b.CreateBitCast(ptr, vty->getPointerTo()),
                           scalarAlign);
    }
  b.CreateRetVoid();
  return fn;
}

}  // namespace nnc::codegen::llvmcpu
